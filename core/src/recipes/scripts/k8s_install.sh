# k8s.install SCRIPT ARG... — the node belongs to the cluster: kubeadm's kubelet configuration
# /etc/kubernetes/kubelet.conf exists (written by `kubeadm init` and `kubeadm join`); otherwise the
# VNF package's install script (already uploaded to SCRIPT) runs under bash, as Tacker's sample
# MgmtDriver runs it, with ARG... as root, after the variables of SCRIPT.env (uploaded 0600 when
# the step runs: ha_flag, proxies) are exported; SCRIPT.env is removed before the script runs.
script=$1; shift
env_file="$script.env"
if [ -f /etc/kubernetes/kubelet.conf ]; then
    rm -f "$env_file"
    done_ "$(hostname) is a cluster node (/etc/kubernetes/kubelet.conf exists)"
fi
needed "$(hostname) is not a cluster node yet"
if [ -f "$env_file" ]; then
    # shellcheck disable=SC1090 # export lines vnfkeeper wrote (each value quoted)
    . "$env_file"
    rm -f "$env_file"
fi
bash "$script" "$@"
[ -f /etc/kubernetes/kubelet.conf ] || fail "install script ended but /etc/kubernetes/kubelet.conf is missing"
echo "$(hostname) joined the cluster"
