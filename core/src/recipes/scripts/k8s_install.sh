# k8s.install SCRIPT ARG... — the node belongs to the cluster: kubeadm's kubelet configuration
# /etc/kubernetes/kubelet.conf exists (written by `kubeadm init` and `kubeadm join`); otherwise the
# VNF package's install script (already uploaded to SCRIPT) runs with ARG... as root.
script=$1; shift
[ -f /etc/kubernetes/kubelet.conf ] && done_ "$(hostname) is a cluster node (/etc/kubernetes/kubelet.conf exists)"
needed "$(hostname) is not a cluster node yet"
sh "$script" "$@"
[ -f /etc/kubernetes/kubelet.conf ] || fail "install script ended but /etc/kubernetes/kubelet.conf is missing"
echo "$(hostname) joined the cluster"
