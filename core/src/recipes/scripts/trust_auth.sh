# trust.auth FILE SERVER... — Docker's client configuration FILE (written whole by vnfkeeper over
# SFTP with mode 0600, never by `docker login --password`) has an auth for every SERVER, is mode
# 0600, and the kubelet reads it: /var/lib/kubelet/config.json links to FILE (as the cir spec's
# install script links it). Nothing of FILE's content is printed.
file=$1; shift
link=/var/lib/kubelet/config.json
has=$(python3 -c '
import json, sys
try:
    with open(sys.argv[1]) as f:
        auths = json.load(f).get("auths") or {}
except (OSError, ValueError, AttributeError):
    auths = {}
print("yes" if all(s in auths for s in sys.argv[2:]) else "no")
' "$file" "$@")
mode=$(stat -c %a "$file" 2>/dev/null || echo none)
if [ "$has" = yes ] && [ "$mode" = 600 ] && [ "$(readlink "$link" 2>/dev/null)" = "$file" ]; then
    done_ "$file has auths for $*, mode 0600, linked from $link"
fi
needed "$file: auths complete $has, mode $mode, link $(readlink "$link" 2>/dev/null || echo none)"
[ -f "$file" ] || fail "$file was not uploaded"
chmod 0600 "$file"
mkdir -p "$(dirname "$link")"
ln -sfn "$file" "$link"
echo "registry auths in $file, linked from $link"
