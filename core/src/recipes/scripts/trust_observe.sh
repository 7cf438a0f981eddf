# trust.observe FILE — reports Docker's daemon configuration FILE whole, for vnfkeeper to merge
# its insecure registries into (the merge is decided by vnfkeeper, never edited here): the verdict
# is "already done: FILE sha256=<hex> b64=<base64 of FILE>", or "already done: FILE absent".
# Changes nothing; check and apply both only report.
file=$1
if [ -f "$file" ]; then
    sum=$(sha256sum "$file" | cut -d' ' -f1)
    done_ "$file sha256=$sum b64=$(base64 -w0 "$file")"
fi
done_ "$file absent"
