# trust.auth FILE OWNER [SERVER DIGEST]... — Docker's client configuration FILE (written whole by
# vnfkeeper over SFTP with mode 0600, never by `docker login --password`) holds, for every SERVER,
# an auth token whose digest is DIGEST: PBKDF2-HMAC-SHA256 of the token, salt
# "vnfkeeper trust.auth OWNER SERVER", 10000 iterations (flavour::trust::auth_digest), so a changed
# password is written again. FILE is mode 0600 and the kubelet reads it:
# /var/lib/kubelet/config.json links to FILE (as the cir spec's install script links it). Nothing
# of FILE's content, nor a digest of it, is printed: only which servers are out of date.
file=$1; owner=$2; shift 2
link=/var/lib/kubelet/config.json
stale=$(python3 -c '
import hashlib, hmac, json, sys
path, owner, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    with open(path) as f:
        auths = json.load(f).get("auths") or {}
except (OSError, ValueError, AttributeError):
    auths = {}
stale = []
for server, want in zip(pairs[0::2], pairs[1::2]):
    entry = auths.get(server)
    token = entry.get("auth") if isinstance(entry, dict) else None
    if not isinstance(token, str):
        stale.append(server + "(missing)")
        continue
    salt = "vnfkeeper trust.auth %s %s" % (owner, server)
    got = hashlib.pbkdf2_hmac("sha256", token.encode(), salt.encode(), 10000).hex()
    if not hmac.compare_digest(got, want):
        stale.append(server + "(changed)")
print(" ".join(stale) if stale else "none")
' "$file" "$owner" "$@")
mode=$(stat -c %a "$file" 2>/dev/null || echo none)
if [ "$stale" = none ] && [ "$mode" = 600 ] && [ "$(readlink "$link" 2>/dev/null)" = "$file" ]; then
    done_ "$file has the current auths, mode 0600, linked from $link"
fi
needed "$file: out-of-date auths $stale, mode $mode, link $(readlink "$link" 2>/dev/null || echo none)"
[ -f "$file" ] || fail "$file was not uploaded"
chmod 0600 "$file"
mkdir -p "$(dirname "$link")"
ln -sfn "$file" "$link"
echo "registry auths in $file, linked from $link"
