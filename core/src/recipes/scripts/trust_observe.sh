# trust.observe FILE — reports what vnfkeeper needs of Docker's daemon configuration FILE to merge
# its insecure registries into it, and nothing else (the file may hold credentials, e.g. in
# `proxies`, and the verdict is journaled): its SHA-256 and, base64, the JSON object
# {"insecure-registries": [...]} as the file has it. Verdicts: "already done: FILE sha256=<hex>
# b64=<base64>", "already done: FILE absent", or "already done: FILE sha256=<hex> invalid=<why>"
# when it is not a JSON object with an array of strings there. Changes nothing.
file=$1
if [ -f "$file" ]; then
    sum=$(sha256sum "$file" | cut -d' ' -f1)
    part=$(python3 -c '
import base64, json, sys
try:
    with open(sys.argv[1]) as f:
        text = f.read()
    doc = json.loads(text) if text.strip() else {}
except ValueError:
    print("invalid=not-JSON"); sys.exit(0)
if not isinstance(doc, dict):
    print("invalid=not-a-JSON-object"); sys.exit(0)
have = doc.get("insecure-registries")
if have is None:
    have = []
if not isinstance(have, list) or not all(isinstance(s, str) for s in have):
    print("invalid=insecure-registries-is-not-an-array-of-strings"); sys.exit(0)
print("b64=" + base64.b64encode(json.dumps({"insecure-registries": have}).encode()).decode())
' "$file") || fail "cannot read $file"
    done_ "$file sha256=$sum $part"
fi
done_ "$file absent"
