# Prelude of every vnfkeeper step script (sourced text, prepended by the engine).
# A step runs as:  sh -c '<prelude + script>' vnfkeeper-step MODE ARG...
#   MODE=check  exit 0: already done (prints why); exit 10: needs apply; other: error
#   MODE=apply  converge, then exit 0; a non-zero exit is an error
# Arguments are validated values passed as positional parameters, never spliced into the text.
set -eu
MODE=$1; shift
done_() { echo "already done: $*"; exit 0; }
needed() { if [ "$MODE" = check ]; then echo "needed: $*"; exit 10; fi; }
fail() { echo "$*" >&2; exit 3; }
pkg_installed() { dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# The block device of a Cinder volume: /dev/disk/by-id/virtio-<first 20 chars of the volume id>
# when udev made it, else the attachment's device name (e.g. /dev/vdb).
volume_device() {
    byid=/dev/disk/by-id/virtio-$(printf %s "$2" | cut -c1-20)
    if [ -b "$byid" ]; then echo "$byid"; elif [ -b "$1" ]; then echo "$1"; else fail "no block device for volume $2 (tried $byid and $1)"; fi
}
# A step that must not proceed because of what it found (e.g. a PersistentVolume in use): the
# operation fails with 409 Conflict naming the reason, and nothing was changed.
refuse() { echo "$*" >&2; exit 11; }
