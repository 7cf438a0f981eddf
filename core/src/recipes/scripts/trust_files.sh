# trust.files STAGE_DIR [SERVER CA_SHA256 HOSTS_TOML]... — per registry SERVER: containerd's
# /etc/containerd/certs.d/SERVER/hosts.toml is HOSTS_TOML; unless CA_SHA256 is "-" (HTTPS with
# the package's CA), the CA uploaded to STAGE_DIR/SERVER.crt is installed as
# /etc/docker/certs.d/SERVER/ca.crt (Docker) and /etc/containerd/certs.d/SERVER/ca.crt
# (containerd), both checked by their SHA-256. Docker and containerd read these files at each
# pull: no restart.
stage=$1; shift
sum() { if [ -f "$1" ]; then sha256sum "$1" | cut -d' ' -f1; else echo absent; fi; }
stale() { # prints the files that differ from the request
    while [ $# -ge 3 ]; do
        c=/etc/containerd/certs.d/$1
        [ "$(cat "$c/hosts.toml" 2>/dev/null)" = "$3" ] || printf ' %s' "$c/hosts.toml"
        if [ "$2" != - ]; then
            [ "$(sum "/etc/docker/certs.d/$1/ca.crt")" = "$2" ] || printf ' %s' "/etc/docker/certs.d/$1/ca.crt"
            [ "$(sum "$c/ca.crt")" = "$2" ] || printf ' %s' "$c/ca.crt"
        fi
        shift 3
    done
}
bad=$(stale "$@")
[ -z "$bad" ] && done_ "registry files in place for $(($# / 3)) registries"
needed "differ:$bad"
while [ $# -ge 3 ]; do
    c=/etc/containerd/certs.d/$1
    mkdir -p "$c"
    if [ "$(cat "$c/hosts.toml" 2>/dev/null)" != "$3" ]; then
        printf '%s\n' "$3" | replace_file "$c/hosts.toml"
    fi
    if [ "$2" != - ]; then
        [ "$(sum "$stage/$1.crt")" = "$2" ] || fail "the CA of $1 was not uploaded to $stage/$1.crt"
        for d in "/etc/docker/certs.d/$1" "$c"; do
            mkdir -p "$d"
            [ "$(sum "$d/ca.crt")" = "$2" ] || replace_file "$d/ca.crt" <"$stage/$1.crt"
        done
    fi
    shift 3
done
echo "registry files written"
