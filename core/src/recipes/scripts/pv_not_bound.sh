# pv.not_bound NAME... — none of the PersistentVolumes NAME... is Bound (a claim uses it), so the
# storage server behind them may be rebuilt. Read-only, from one `kubectl get pv` (a failing
# kubectl fails the step): refuses (exit 11) naming the Bound ones.
table=$(pv_table '{.status.phase}')
bound=
for name in "$@"; do
    [ "$(pv_field "$table" "$name")" = Bound ] && bound="$bound $name"
done
[ -z "$bound" ] || refuse "PersistentVolume(s) in use (Bound):$bound; release the claims before healing the storage server"
done_ "none of $* is Bound"
