# shellcheck shell=sh
# Prelude of every vnfkeeper step script (sourced text, prepended by the engine).
# A step runs as:  sh -c '<prelude + script>' vnfkeeper-step MODE ARG...
#   MODE=check  exit 0: already done (prints why); exit 10: needs apply; other: error
#   MODE=apply  converge, then exit 0; a non-zero exit is an error
# Arguments are validated values passed as positional parameters, never spliced into the text.
# Each step script calls only some of the helpers below; shellcheck (checking prelude + script as
# one file) reports the others as unreachable (SC2317), hence the directive on each helper.
set -eu
MODE=$1; shift
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
done_() { echo "already done: $*"; exit 0; }
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
needed() { if [ "$MODE" = check ]; then echo "needed: $*"; exit 10; fi; }
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
fail() { echo "$*" >&2; exit 3; }
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
pkg_installed() { dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# The block device of a Cinder volume: /dev/disk/by-id/virtio-<first 20 chars of the volume id>
# when udev made it, else the attachment's device name (e.g. /dev/vdb).
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
volume_device() {
    byid=/dev/disk/by-id/virtio-$(printf %s "$2" | cut -c1-20)
    if [ -b "$byid" ]; then echo "$byid"; elif [ -b "$1" ]; then echo "$1"; else fail "no block device for volume $2 (tried $byid and $1)"; fi
}
# A step that must not proceed because of what it found (e.g. a PersistentVolume in use): the
# operation fails with 409 Conflict naming the reason, and nothing was changed.
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
refuse() { echo "$*" >&2; exit 11; }
# replace_file FILE < CONTENT — FILE replaced by CONTENT atomically: a temporary file in FILE's
# directory (same filesystem) gets the content and FILE's owner and mode (0644 for a new FILE), is
# flushed to disk, then renamed over FILE; the rename is flushed too. A crash leaves the old or the
# new FILE, never a partial one; on failure the temporary file is removed and FILE is unchanged.
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
replace_file() {
    rf_dir=$(dirname "$1")
    rf_tmp=$(mktemp "$rf_dir/.$(basename "$1").vnfkeeper.XXXXXX") || fail "cannot create a temporary file in $rf_dir"
    if cat >"$rf_tmp" && rf_attrs "$1" "$rf_tmp" && sync "$rf_tmp" && mv -fT "$rf_tmp" "$1"; then
        sync "$rf_dir" || fail "replaced $1 but could not flush $rf_dir"
        return 0
    fi
    rm -f "$rf_tmp"
    fail "could not replace $1 (left unchanged)"
}
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
rf_attrs() {
    if [ -e "$1" ]; then chown --reference="$1" "$2" && chmod --reference="$1" "$2"; else chmod 0644 "$2"; fi
}
# pv_table FIELDS — one line per PersistentVolume of the cluster, from one `kubectl get pv`: its
# name, a space, then FIELDS (a jsonpath template such as `{.status.phase}`). A failing kubectl
# fails the step (never read as "no PersistentVolume").
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
pv_table() {
    kubectl get pv -o "jsonpath={range .items[*]}{.metadata.name} $1{\"\\n\"}{end}" ||
        fail "kubectl get pv failed"
}
# pv_field TABLE NAME — the fields of PersistentVolume NAME in TABLE (from pv_table), empty when
# it is not listed; pv_listed TABLE NAME — whether TABLE lists it.
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
pv_field() { printf '%s\n' "$1" | awk -v n="$2" '$1 == n { sub(/^[^ ]* ?/, ""); print; exit }'; }
# shellcheck disable=SC2317 # a shared helper; not every step script calls it
pv_listed() { printf '%s\n' "$1" | awk -v n="$2" '$1 == n { f = 1 } END { exit !f }'; }
