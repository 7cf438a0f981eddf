# k8s.remove_node ADDRESS DRAIN_SECS POLICY — no Kubernetes node has InternalIP ADDRESS: each one
# that has is drained (cordon, evict pods; DaemonSet pods ignored) and deleted. POLICY `strict`
# fails when the drain fails (scale-in of a live node); `lenient` deletes the node anyway (heal of
# a node that may be dead, whose pods cannot be evicted).
addr=$1; limit=$2; policy=$3
nodes() {
    for n in $(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'); do
        a=$(kubectl get node "$n" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}' 2>/dev/null || true)
        [ "$a" = "$addr" ] && echo "$n"
    done
    return 0
}
found=$(nodes)
[ -z "$found" ] && done_ "no node has address $addr"
needed "node(s) with address $addr: $found"
for n in $found; do
    if ! kubectl drain "$n" --ignore-daemonsets --delete-emptydir-data --timeout="${limit}s"; then
        [ "$policy" = strict ] && fail "drain of node $n failed"
        echo "drain of node $n failed; deleting it anyway (it is being replaced)" >&2
    fi
    kubectl delete node "$n"
done
echo "drained and deleted node(s) $found"
