# storage.filesystem DEVICE VOLUME_ID — an ext4 filesystem on the volume, created only if the
# volume holds nothing: any filesystem, partition table or unreadable probe means "do not touch".
dev=$(volume_device "$1" "$2")
probe() { set +e; TYPE=$(blkid -p -o value -s TYPE "$dev" 2>/dev/null); RC=$?; set -e; }
probe
case $RC in
    0) [ -n "$TYPE" ] && done_ "$dev holds a $TYPE filesystem"
       fail "$dev holds data that is not a filesystem (partition table?); refusing to format" ;;
    2) ;;
    *) fail "blkid could not probe $dev (exit $RC); refusing to format what cannot be read" ;;
esac
needed "$dev holds no filesystem"
# Probe again right before formatting: nothing may have appeared since the check.
probe
[ "$RC" -eq 2 ] || fail "$dev changed while checking (blkid exit $RC); not formatting"
mkfs.ext4 -q -F "$dev"
echo "created an ext4 filesystem on $dev"
