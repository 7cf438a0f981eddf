# pv.available NAME WAIT_SECS — the PersistentVolume NAME reached phase Available (or Bound):
# polls with backoff up to WAIT_SECS.
name=$1; limit=$2
phase() { kubectl get pv "$name" -o jsonpath='{.status.phase}' 2>/dev/null || true; }
p=$(phase)
case $p in Available|Bound) done_ "PersistentVolume $name is $p" ;; esac
needed "PersistentVolume $name is ${p:-absent}"
waited=0; step=1
while [ "$waited" -lt "$limit" ]; do
    sleep "$step"; waited=$((waited + step)); [ "$step" -lt 8 ] && step=$((step * 2))
    p=$(phase)
    case $p in Available|Bound) echo "PersistentVolume $name is $p after ${waited}s"; exit 0 ;; Failed) fail "PersistentVolume $name is Failed" ;; esac
done
fail "PersistentVolume $name is ${p:-absent} after ${waited}s, not Available"
