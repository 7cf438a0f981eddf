# lb.script SCRIPT SHA256 RECORD MASTERS WORKERS — on the external load balancer: the VNF
# package's LB install script (`external_lb_param.script_path`; the engine uploads it to SCRIPT,
# mode 0755, before apply) has run with the seed's contract `-m MASTERS -w WORKERS`
# (comma-separated addresses; `-w` left out when there is no worker). RECORD holds
# "SHA256 MASTERS WORKERS" of its last successful run, so it runs again only when the script or
# the node set changed. Its output goes to stderr; it runs as root, by its own `#!` line.
script=$1; sha=$2; record=$3; masters=$4; workers=$5
want="$sha $masters $workers"
if [ -f "$record" ] && [ "$(cat "$record")" = "$want" ]; then
    done_ "the package's LB script ran for masters $masters, workers ${workers:-none}"
fi
needed "the package's LB script for masters $masters, workers ${workers:-none}"
if [ ! -f "$script" ] || [ "$(sha256sum "$script" | cut -d' ' -f1)" != "$sha" ]; then
    fail "the uploaded $script does not have the planned content"
fi
if [ -n "$workers" ]; then set -- -m "$masters" -w "$workers"; else set -- -m "$masters"; fi
rc=0
"$script" "$@" >&2 || rc=$?
[ "$rc" -eq 0 ] || fail "the package's LB script $script exited $rc"
mkdir -p "$(dirname "$record")"
printf '%s\n' "$want" | replace_file "$record"
echo "the package's LB script ran for masters $masters, workers ${workers:-none}"
