# pv.register NAME MANIFEST SERVER PATH [NAME MANIFEST SERVER PATH]... — each PersistentVolume
# NAME exists with spec.nfs.server SERVER and spec.nfs.path PATH: the ones that do not are
# applied from their MANIFESTs (already uploaded) in one `kubectl apply`; the others are left
# alone. One quadruple is the form a plan of an earlier version stored (one stage per
# PersistentVolume) and the form of reconcile's probe of one PersistentVolume.
if [ $# -lt 4 ] || [ $(($# % 4)) -ne 0 ]; then
    fail "pv.register: $# arguments, expected NAME MANIFEST SERVER PATH for each PersistentVolume"
fi
table=$(pv_table '{.spec.nfs.server} {.spec.nfs.path}')
names=; todo=; applied=; n=$(($# / 4))
# Each quadruple is taken off the front; `-f MANIFEST` of each one to apply goes on the end.
while [ "$n" -gt 0 ]; do
    name=$1; manifest=$2; server=$3; path=$4; shift 4; n=$((n - 1))
    names="$names $name"
    have=$(pv_field "$table" "$name")
    [ "$have" = "$server $path" ] && continue
    todo="$todo $name"
    if [ "$MODE" = check ]; then
        echo "PersistentVolume $name missing or pointing elsewhere (${have:-absent})"
        continue
    fi
    set -- "$@" -f "$manifest"
    applied="$applied $name ($server:$path)"
done
if [ "$MODE" = check ]; then
    [ -n "$todo" ] && needed "PersistentVolume(s) to apply:$todo"
    done_ "PersistentVolume(s)$names point at their NFS exports"
fi
[ $# -eq 0 ] && done_ "PersistentVolume(s)$names point at their NFS exports"
kubectl apply "$@"
echo "applied PersistentVolume(s)$applied"
