# trust.docker FILE STAGED OBSERVED SERVER... — every SERVER is in "insecure-registries" of Docker's
# daemon configuration FILE (read with a JSON parser). Apply: FILE still is what trust.observe read
# (sha256 OBSERVED, or "absent"); STAGED (uploaded) is vnfkeeper's decision, a JSON object with
# the whole new "insecure-registries"; its keys replace those of FILE, every other key of FILE is
# kept, and FILE is replaced atomically; then docker, when it is a known service, is restarted —
# only here, so only when its configuration changed. A probe passes STAGED and OBSERVED empty:
# check only.
file=$1; staged=$2; observed=$3; shift 3
missing=$(python3 -c '
import json, sys
try:
    with open(sys.argv[1]) as f:
        have = json.load(f).get("insecure-registries") or []
except (OSError, ValueError, AttributeError):
    have = []
print(" ".join(s for s in sys.argv[2:] if s not in have))
' "$file" "$@")
[ -z "$missing" ] && done_ "$file lists every insecure registry: $*"
needed "$file lacks insecure registries: $missing"
[ -n "$staged" ] || fail "no merged $file to apply (a probe only checks)"
if [ -f "$file" ]; then now=$(sha256sum "$file" | cut -d' ' -f1); else now=absent; fi
[ "$now" = "$observed" ] ||
    fail "$file changed since vnfkeeper read it (sha256 $now, read as $observed); not replaced — a new HEAL of this node reads it again"
mkdir -p "$(dirname "$file")"
merged=$(python3 -c '
import json, sys
doc = {}
try:
    with open(sys.argv[1]) as f:
        text = f.read()
    if text.strip():
        doc = json.loads(text)
except FileNotFoundError:
    pass
with open(sys.argv[2]) as f:
    doc.update(json.load(f))
print(json.dumps(doc, indent=2))
' "$file" "$staged") || fail "cannot merge $staged into $file"
printf '%s\n' "$merged" | replace_file "$file"
rm -f "$staged"
if systemctl is-enabled --quiet docker 2>/dev/null || systemctl is-active --quiet docker 2>/dev/null; then
    systemctl restart docker || fail "docker did not restart after $file changed"
    echo "insecure registries added to $file; docker restarted"
else
    echo "insecure registries added to $file; docker is not a service here, nothing restarted"
fi
