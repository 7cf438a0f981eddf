# pv.register NAME MANIFEST SERVER PATH — the PersistentVolume NAME exists with spec.nfs.server
# SERVER and spec.nfs.path PATH (MANIFEST, already uploaded, is applied when it does not).
name=$1; manifest=$2; server=$3; path=$4
have=$(kubectl get pv "$name" -o jsonpath='{.spec.nfs.server} {.spec.nfs.path}' 2>/dev/null || true)
[ "$have" = "$server $path" ] && done_ "PersistentVolume $name points at $server:$path"
needed "PersistentVolume $name missing or pointing elsewhere (${have:-absent})"
kubectl apply -f "$manifest"
echo "applied PersistentVolume $name ($server:$path)"
