#!/bin/sh
# testbed host setup. Runs in the host's fresh mount/UTS/PID namespaces (already inside its network
# namespace) as PID 1 of the new PID namespace, builds the host's root and execs the host init.
# Environment (set by hosts::farm): TB_HOST_DIR (per-host dir on the machine, holds seed/ and ovl/),
# TB_SEED_DIR (files common to all hosts), TB_HOSTNAME, TB_LOG_DIR (bind-mounted at /var/log/testbed),
# TB_KUBE_DIR (cluster store, bind-mounted at /var/lib/testbed-kube),
# TB_DEVICES ("path:major:minor" block device nodes, space separated), TB_HIDE_DIR (the farm's
# state dir, covered by an empty tmpfs inside the host), TB_ABSENT (absolute paths removed from the
# host's root: programs its profile's distribution does not have at boot, space separated).
set -eu
O="$TB_HOST_DIR/ovl"
R="$O/root"
mount -t tmpfs -o mode=0755 tb-upper "$O"
mkdir -p "$O/up" "$O/work" "$R"
cp -a "$TB_SEED_DIR/." "$O/up/"
cp -a "$TB_HOST_DIR/seed/." "$O/up/"
# nfs_export=on gives the overlay file handles, so ganesha can export directories on it too
mount -t overlay tb-root -o "lowerdir=/,upperdir=$O/up,workdir=$O/work,index=on,nfs_export=on,xino=on" "$R" 2>/dev/null ||
  mount -t overlay tb-root -o "lowerdir=/,upperdir=$O/up,workdir=$O/work" "$R"
# the profile's absent programs (a whiteout in the upper layer; the machine keeps its files)
for f in ${TB_ABSENT:-}; do rm -f "$R$f"; done

# private /dev: the usual nodes plus the attached volumes
mount -t tmpfs -o mode=0755,size=4m tb-dev "$R/dev"
mknod -m 666 "$R/dev/null" c 1 3
mknod -m 666 "$R/dev/zero" c 1 5
mknod -m 666 "$R/dev/full" c 1 7
mknod -m 666 "$R/dev/random" c 1 8
mknod -m 666 "$R/dev/urandom" c 1 9
mknod -m 666 "$R/dev/tty" c 5 0
mkdir -m 755 "$R/dev/pts"
mkdir -m 1777 "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 tb-devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
ln -s /proc/self/fd "$R/dev/fd"
ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"
ln -s /proc/self/fd/2 "$R/dev/stderr"
for d in ${TB_DEVICES:-}; do
  p=${d%%:*}; mm=${d#*:}
  mkdir -p "$R$(dirname "$p")"
  mknod -m 660 "$R$p" b "${mm%%:*}" "${mm#*:}"
  chgrp disk "$R$p" 2>/dev/null || true
done

mount -t proc tb-proc "$R/proc"
mount -t sysfs tb-sys "$R/sys"
mount -t tmpfs -o mode=0755 tb-run "$R/run"
mkdir -m 0755 "$R/run/sshd" "$R/run/testbed" "$R/run/lock"
mount -t tmpfs -o mode=1777 tb-tmp "$R/tmp"
mkdir -p "$R/var/log/testbed" "$R/var/lib/testbed-kube"
mount --bind "$TB_LOG_DIR" "$R/var/log/testbed"
mount --bind "$TB_KUBE_DIR" "$R/var/lib/testbed-kube"
# hide the farm's state dir (keys, other hosts' files, volume images) from the host's lower layer
if [ -n "${TB_HIDE_DIR:-}" ]; then
  mkdir -p "$R$TB_HIDE_DIR"
  mount -t tmpfs -o mode=0755,size=1m tb-hide "$R$TB_HIDE_DIR"
fi
hostname "$TB_HOSTNAME"
cd "$R"
exec chroot "$R" /bin/bash /usr/local/lib/testbed/init
