# storage.mount DEVICE VOLUME_ID MOUNT_TO — the volume mounted at MOUNT_TO now and at boot
# (one /etc/fstab line by UUID, the file replaced whole and atomically: never duplicated).
dev=$(volume_device "$1" "$2"); mnt=$3
uuid=$(blkid -p -o value -s UUID "$dev" 2>/dev/null || true)
[ -n "$uuid" ] || fail "$dev has no filesystem UUID; run storage.filesystem first"
want="UUID=$uuid $mnt auto defaults,nofail 0 2"
have=$(awk -v m="$mnt" '$1 !~ /^#/ && $2 == m' /etc/fstab 2>/dev/null || true)
mounted_dev() { mountpoint -q "$mnt" 2>/dev/null && mountpoint -d "$mnt"; }
if [ "$have" = "$want" ] && [ "$(mounted_dev || true)" = "$(mountpoint -x "$dev")" ]; then
    done_ "$dev (UUID $uuid) is mounted at $mnt and in /etc/fstab"
fi
needed "fstab line or mount of $mnt missing"
mkdir -p "$mnt"
{ awk -v m="$mnt" '$1 ~ /^#/ || $2 != m' /etc/fstab 2>/dev/null || true; echo "$want"; } | replace_file /etc/fstab
cur=$(mounted_dev || true)
if [ -z "$cur" ]; then
    mount "$mnt"
elif [ "$cur" != "$(mountpoint -x "$dev")" ]; then
    fail "$mnt already has another filesystem mounted ($cur); not replacing it"
fi
echo "mounted $dev at $mnt (UUID $uuid)"
