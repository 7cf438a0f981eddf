# lb.haproxy CONFIG NEW SHA256 — on the external load balancer: HAProxy runs with CONFIG whose
# content has digest SHA256. The engine uploads the generated configuration to NEW before apply;
# apply installs haproxy if it is missing, validates NEW with `haproxy -c -f` (a rejected one
# leaves the running configuration alone), replaces CONFIG with it atomically and reloads HAProxy
# (systemd's unit where systemd runs, else the daemon by its pid file with `-sf`, which hands the
# listeners over without dropping connections).
cfg=$1; new=$2; sha=$3
pidf=/run/haproxy-vnfkeeper.pid
digest() { if [ -f "$1" ]; then sha256sum "$1" | cut -d' ' -f1; else echo none; fi; }
systemd() { [ -d /run/systemd/system ]; }
running() {
    if systemd; then systemctl is-active --quiet haproxy
    else [ -f "$pidf" ] && kill -0 "$(head -n1 "$pidf")" 2>/dev/null; fi
}
if [ "$(digest "$cfg")" = "$sha" ] && command -v haproxy >/dev/null 2>&1 && running; then
    done_ "haproxy runs with the current configuration"
fi
needed "haproxy configuration $cfg or the haproxy process differs"
if ! command -v haproxy >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy >&2 || fail "cannot install haproxy"
    command -v haproxy >/dev/null 2>&1 || fail "haproxy is not installed"
fi
[ "$(digest "$new")" = "$sha" ] || fail "the uploaded $new does not have the planned content"
haproxy -c -q -f "$new" >&2 || fail "haproxy -c rejected the generated configuration; $cfg unchanged"
replace_file "$cfg" <"$new"
rm -f "$new"
if systemd; then
    systemctl enable haproxy >/dev/null 2>&1 || true
    systemctl reload-or-restart haproxy || fail "systemctl reload-or-restart haproxy failed"
elif running; then
    haproxy -D -f "$cfg" -p "$pidf" -sf "$(head -n1 "$pidf")" || fail "haproxy reload failed"
else
    haproxy -D -f "$cfg" -p "$pidf" || fail "haproxy did not start"
fi
running || fail "haproxy is not running after the reload"
echo "haproxy reloaded with $cfg"
