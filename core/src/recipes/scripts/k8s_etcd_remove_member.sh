# k8s.etcd_remove_member ADDRESS — on a live control-plane node: the cluster's stacked etcd has no
# member with the peer URL https://ADDRESS:2380 (a master that left, or whose server is being
# rebuilt: its member would stay behind, dead, counting against the quorum, and its address could
# not join again). Apply removes it with etcdctl inside this node's etcd static pod, as Tacker's
# sample MgmtDriver does (_delete_master_node), with kubeadm's etcd certificate paths (etcd
# documentation, "Runtime reconfiguration": remove a member; kubeadm: stacked etcd topology).
addr=$1
export KUBECONFIG=/etc/kubernetes/admin.conf
pod=
for entry in $(kubectl get pods -n kube-system -o jsonpath='{range .items[*]}{.metadata.name}={.status.podIP}{"\n"}{end}'); do
    name=${entry%%=*}
    ip=${entry#*=}
    case $name in etcd-*) ;; *) continue ;; esac
    if hostname -I | tr ' ' '\n' | grep -qxF "$ip"; then pod=$name; break; fi
done
[ -n "$pod" ] || fail "no etcd pod of this node in kube-system"
etcdctl() {
    kubectl exec -n kube-system "$pod" -- etcdctl --endpoints=https://127.0.0.1:2379 \
        --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt \
        --key=/etc/kubernetes/pki/etcd/server.key "$@"
}
list=$(etcdctl member list) || fail "etcdctl member list failed in $pod"
id=$(printf '%s\n' "$list" | awk -F', ' -v url="https://$addr:2380" '$4 == url { print $1 }')
[ -z "$id" ] && done_ "etcd has no member at $addr"
needed "etcd member $id at $addr"
etcdctl member remove "$id" >&2 || fail "etcdctl member remove $id failed in $pod"
echo "removed etcd member $id ($addr)"
