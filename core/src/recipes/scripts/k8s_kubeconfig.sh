# k8s.kubeconfig ENDPOINT — on a master: prints the cluster's admin kubeconfig
# (/etc/kubernetes/admin.conf) for vnfkeeper to keep (0600 under its state directory, the server
# set to ENDPOINT, the external load balancer). Reading changes nothing, so a check is the whole
# step; the engine takes the text from its output and records only the last line.
endpoint=$1
[ -r /etc/kubernetes/admin.conf ] || fail "/etc/kubernetes/admin.conf is missing: the cluster is not installed on $(hostname)"
cat /etc/kubernetes/admin.conf
echo
done_ "admin kubeconfig read for $endpoint"
