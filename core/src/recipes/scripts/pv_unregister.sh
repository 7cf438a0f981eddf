# pv.unregister NAME WAIT_SECS — the PersistentVolume NAME does not exist (deleted unless Bound;
# a Bound PV is never deleted: refuses with exit 11).
name=$1; limit=$2
p=$(kubectl get pv "$name" -o jsonpath='{.status.phase}' 2>/dev/null || true)
[ -z "$p" ] && done_ "PersistentVolume $name does not exist"
[ "$p" = Bound ] && refuse "PersistentVolume $name is Bound (in use); not deleting it"
needed "PersistentVolume $name exists ($p)"
kubectl delete pv "$name" --wait=false >/dev/null
waited=0
while kubectl get pv "$name" >/dev/null 2>&1; do
    [ "$waited" -ge "$limit" ] && fail "PersistentVolume $name still exists after ${limit}s"
    sleep 1; waited=$((waited + 1))
done
echo "deleted PersistentVolume $name"
