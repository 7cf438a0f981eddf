# k8s.drain NODE DRAIN_SECS POLICY — on a master: the Kubernetes node NODE is cordoned and drained
# (pods evicted, DaemonSet pods ignored, emptyDir data deleted), bounded by DRAIN_SECS, or is not
# in the cluster. POLICY `strict` fails when the drain fails (scale-in of a live node); `lenient`
# reports the failure and goes on (heal of a node that may be dead).
# A drain that finished is recorded in the login user's ~/.vnfkeeper/drained/NODE (kubectl runs as
# that user): a node merely cordoned is drained again.
node=$1; limit=$2; policy=$3
mark=${HOME:-/tmp}/.vnfkeeper/drained
if ! kubectl get node "$node" >/dev/null 2>&1; then
    done_ "node $node is not in the cluster"
fi
if [ "$MODE" = check ] && [ -f "$mark/$node" ] && \
    [ "$(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}' 2>/dev/null)" = true ]; then
    done_ "node $node is drained"
fi
needed "node $node to drain"
if kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout="${limit}s"; then
    :
elif [ "$policy" = strict ]; then
    fail "drain of node $node failed within ${limit}s"
else
    echo "drain of node $node failed within ${limit}s; it is being replaced, so removal goes on" >&2
    kubectl cordon "$node" >/dev/null 2>&1 || true
fi
mkdir -p "$mark"
: >"$mark/$node"
echo "node $node drained"
