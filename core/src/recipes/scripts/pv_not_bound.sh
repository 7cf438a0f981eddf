# pv.not_bound NAME... — none of the PersistentVolumes NAME... is Bound (a claim uses it), so the
# storage server behind them may be rebuilt. Read-only: refuses (exit 11) naming the Bound ones.
bound=
for name in "$@"; do
    p=$(kubectl get pv "$name" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    [ "$p" = Bound ] && bound="$bound $name"
done
[ -z "$bound" ] || refuse "PersistentVolume(s) in use (Bound):$bound; release the claims before healing the storage server"
done_ "none of $* is Bound"
