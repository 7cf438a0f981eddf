# lb.haproxy CONFIG NEW SHA256 — on the external load balancer: HAProxy runs with CONFIG whose
# content has digest SHA256. The engine uploads the generated configuration to NEW before apply;
# apply installs haproxy if it is missing, validates NEW with `haproxy -c -f` (a rejected one
# leaves the running configuration alone), replaces CONFIG with it atomically and reloads HAProxy
# through its systemd unit (Debian's haproxy package; a reload hands the listeners over to the
# new process without dropping connections).
cfg=$1; new=$2; sha=$3
digest() { if [ -f "$1" ]; then sha256sum "$1" | cut -d' ' -f1; else echo none; fi; }
running() { systemctl is-active --quiet haproxy; }
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
systemctl enable haproxy >/dev/null 2>&1 || true
systemctl reload-or-restart haproxy || fail "systemctl reload-or-restart haproxy failed"
running || fail "haproxy is not running after the reload"
echo "haproxy reloaded with $cfg"
