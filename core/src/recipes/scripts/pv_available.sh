# pv.available NAME... WAIT_SECS — each PersistentVolume NAME reached phase Available (or Bound):
# polls all together with backoff, up to WAIT_SECS in all; one in phase Failed fails the step.
# One NAME is the form a plan of an earlier version stored (one stage per PersistentVolume).
# The last argument is WAIT_SECS; the NAMEs stay the positional parameters.
limit=; n=$#
for a in "$@"; do
    if [ "$n" -eq 1 ]; then limit=$a; else set -- "$@" "$a"; fi
    shift; n=$((n - 1))
done
[ $# -ge 1 ] || fail "pv.available: no PersistentVolume named"
# Sets `left` to the PVs not Available or Bound (with their phase) and `failed` to those Failed,
# from one `kubectl get pv`.
look() {
    table=$(pv_table '{.status.phase}')
    left=; failed=
    for name in "$@"; do
        p=$(pv_field "$table" "$name")
        case $p in
            Available|Bound) ;;
            Failed) failed="$failed $name"; left="$left $name(Failed)" ;;
            *) left="$left $name(${p:-absent})" ;;
        esac
    done
}
look "$@"
[ -z "$left" ] && done_ "PersistentVolume(s) $* are Available or Bound"
needed "PersistentVolume(s) not Available:$left"
waited=0; step=1
while [ "$waited" -lt "$limit" ]; do
    sleep "$step"; waited=$((waited + step)); [ "$step" -lt 8 ] && step=$((step * 2))
    look "$@"
    [ -n "$failed" ] && fail "PersistentVolume(s) Failed:$failed"
    if [ -z "$left" ]; then echo "PersistentVolume(s) $* are Available or Bound after ${waited}s"; exit 0; fi
done
fail "PersistentVolume(s) not Available after ${waited}s:$left"
