# pv.unregister NAME... WAIT_SECS — none of the PersistentVolumes NAME... exists: the ones that do
# are deleted, then waited for, up to WAIT_SECS in all. A Bound PV is never deleted: the step
# refuses (exit 11) before deleting any. One NAME is the form a plan of an earlier version stored
# (one stage per PersistentVolume).
# The last argument is WAIT_SECS; the NAMEs stay the positional parameters.
limit=; n=$#
for a in "$@"; do
    if [ "$n" -eq 1 ]; then limit=$a; else set -- "$@" "$a"; fi
    shift; n=$((n - 1))
done
[ $# -ge 1 ] || fail "pv.unregister: no PersistentVolume named"
table=$(pv_table '{.status.phase}')
present=; bound=
for name in "$@"; do
    pv_listed "$table" "$name" || continue
    [ "$(pv_field "$table" "$name")" = Bound ] && bound="$bound $name"
    present="$present $name"
done
[ -z "$bound" ] || refuse "PersistentVolume(s) Bound (in use):$bound; not deleting any"
[ -z "$present" ] && done_ "PersistentVolume(s) $* do not exist"
needed "PersistentVolume(s) exist:$present"
# NAMEs are DNS-1123 subdomains (checked when the plan was made): split on spaces as words.
# shellcheck disable=SC2086
kubectl delete pv $present --wait=false >/dev/null
waited=0
while :; do
    table=$(pv_table '')
    left=
    for name in $present; do
        if pv_listed "$table" "$name"; then left="$left $name"; fi
    done
    [ -z "$left" ] && break
    [ "$waited" -ge "$limit" ] && fail "PersistentVolume(s) still exist after ${limit}s:$left"
    sleep 1; waited=$((waited + 1))
done
echo "deleted PersistentVolume(s)$present"
