# k8s.haproxy_backends FILE BACKEND SERVERS STAMP — on a master of an HA cluster: the `server`
# lines of section `backend BACKEND` in the HAProxy configuration FILE are exactly SERVERS (one
# line each, order aside), and the running HAProxy has loaded them. Tacker's install script writes
# one `server  master<n>  <address>:6443 check` line per master it was given (`-m`); a master
# rebuilt or scaled at a new address leaves the others' lines pointing at the old one. Apply
# rewrites only those lines (everything else kept, the file replaced atomically), checks the new
# file with `haproxy -c` and reloads HAProxy (HAProxy configuration manual, section 4 "Proxies":
# `backend`, `server`; management guide: `-c`, soft reload). STAMP records the configuration's
# SHA-256 as `pending` before the file is replaced and `loaded` after the reload, so that a crash
# in between is a reload still needed, never a file that matches but is not served.
# Without FILE or without that backend (a single master: no HAProxy) nothing is to be done.
file=$1; backend=$2; servers=$3; stamp=$4
[ -f "$file" ] || done_ "$file absent: no HAProxy in front of the API servers"
section() { awk -v b="$backend" '
    /^[^[:space:]#]/ { on = ($1 == "backend" && $2 == b && NF == 2) ; next }
    on && $1 == "server" { print }' "$file"; }
has=$(awk -v b="$backend" '$1 == "backend" && $2 == b && NF == 2 { n++ } END { print n + 0 }' "$file")
[ "$has" = 0 ] && done_ "$file has no backend $backend"
[ "$has" = 1 ] || fail "$file has $has sections backend $backend"
norm() { awk 'NF { $1 = $1; print }' | LC_ALL=C sort; }
current=$(section | norm)
wanted=$(printf '%s\n' "$servers" | norm)
state=$(cat "$stamp" 2>/dev/null || true)
sum=$(sha256sum "$file" | cut -d' ' -f1)
if [ "$current" = "$wanted" ]; then
    case $state in
        "pending $sum") ;;
        *) done_ "$file backend $backend lists the masters" ;;
    esac
    needed "$file backend $backend lists the masters; HAProxy not reloaded since it was written"
else
    needed "$file backend $backend: $(printf '%s\n' "$current" | awk '{ print $3 }' | paste -sd, -) instead of $(printf '%s\n' "$wanted" | awk '{ print $3 }' | paste -sd, -)"
fi
mkdir -p "$(dirname "$stamp")"
if [ "$current" != "$wanted" ]; then
    new=$(mktemp) || fail "cannot create a temporary file"
    SERVERS=$servers awk -v b="$backend" '
        function put() { if (!done) { n = split(ENVIRON["SERVERS"], l, "\n"); for (i = 1; i <= n; i++) if (l[i] != "") print l[i]; done = 1 } }
        /^[^[:space:]#]/ { if (on) put(); on = ($1 == "backend" && $2 == b && NF == 2); print; next }
        on && $1 == "server" { put(); next }
        { print }
        END { if (on) put() }' "$file" >"$new" || { rm -f "$new"; fail "cannot rewrite $file"; }
    if command -v haproxy >/dev/null 2>&1 && ! out=$(haproxy -c -f "$new" 2>&1); then
        rm -f "$new"
        fail "haproxy -c refused the rewritten $file: $out"
    fi
    sum=$(sha256sum "$new" | cut -d' ' -f1)
    printf 'pending %s\n' "$sum" | replace_file "$stamp"
    replace_file "$file" <"$new"
    rm -f "$new"
fi
if systemctl is-active --quiet haproxy; then
    systemctl reload haproxy >&2 || fail "systemctl reload haproxy failed"
fi
printf 'loaded %s\n' "$sum" | replace_file "$stamp"
echo "$file backend $backend: $(printf '%s\n' "$wanted" | awk '{ print $2 "=" $3 }' | paste -sd' ' -)"
