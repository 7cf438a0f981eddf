#!/bin/sh
# chown(1) of hosts of the Ubuntu 20.04 profile (/usr/local/bin/chown, ahead of /usr/bin/chown on
# every PATH sshd, sudo and su set), as Ubuntu 20.04's coreutils 8.30 behaves: an OWNER.GROUP
# operand (the obsolete separator) is taken silently. The machine's coreutils 9.1 takes it too
# but warns on stderr ("'.' should be ':'"), and scripts written for Ubuntu 20.04 that fail on
# any stderr (Tacker's sample Kubernetes MgmtDriver runs `chown nobody.nogroup <dir>`) would
# fail here only. The first operand, when it names no user as it is and holds a '.' but no ':',
# is passed on as OWNER:GROUP; everything else goes to the machine's chown unchanged.
spec_seen=
for arg in "$@"; do
    shift
    if [ -z "$spec_seen" ]; then
        case $arg in
        --reference=* | --) spec_seen=1 ;;
        -*) ;;
        *)
            spec_seen=1
            case $arg in
            *:*) ;;
            *.*) getent passwd "$arg" >/dev/null 2>&1 || arg="${arg%%.*}:${arg#*.}" ;;
            esac
            ;;
        esac
    fi
    set -- "$@" "$arg"
done
exec /usr/bin/chown "$@"
