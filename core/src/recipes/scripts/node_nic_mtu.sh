# node.nic_mtu ADDRESS — reads (never changes) the MTU of the interface holding ADDRESS; the
# verdict line `already done: mtu N on DEV` is the observation the flavour decides from (the
# kubespray flavour's Calico MTU; Tacker reads it with `ip a | grep <nic_ip> -B 2`).
addr=$1
dev=$(ip -o addr show | awk -v a="$addr" '{ split($4, p, "/"); if (p[1] == a) { print $2; exit } }')
[ -n "$dev" ] || fail "no interface holds address $addr"
mtu=$(cat "/sys/class/net/$dev/mtu") || fail "cannot read the MTU of $dev"
case "$mtu" in
    ''|*[!0-9]*) fail "the MTU of $dev is not a number: $mtu" ;;
esac
done_ "mtu $mtu on $dev"
