# k8s.vim_token NAMESPACE ACCOUNT SECRET — on a control-plane node: the ServiceAccount
# NAMESPACE/ACCOUNT bound to the cluster-admin ClusterRole, and its long-lived token Secret
# NAMESPACE/SECRET (type kubernetes.io/service-account-token; Kubernetes documentation,
# "Manually create a long-lived API token for a ServiceAccount"), whose token check prints as a
# BEARER_TOKEN= line for vnfkeeper to keep: what the cluster is registered with as a Kubernetes
# VIM (Tacker's auth_cred.bearer_token). Only the last line is ever recorded.
ns=$1; sa=$2; secret=$3
export KUBECONFIG=/etc/kubernetes/admin.conf
[ -r "$KUBECONFIG" ] || fail "$KUBECONFIG is missing: the cluster is not installed on $(hostname)"
token_of() {
    kubectl -n "$ns" get secret "$secret" -o 'jsonpath={.data.token}' 2>/dev/null | base64 -d 2>/dev/null || true
}
token=$(token_of)
if [ -n "$token" ]; then
    printf 'BEARER_TOKEN=%s\n' "$token"
    done_ "bearer token of ServiceAccount $ns/$sa (Secret $secret)"
fi
needed "no token in Secret $ns/$secret"
kubectl apply -f - <<MANIFEST >/dev/null || fail "kubectl apply of ServiceAccount $ns/$sa failed"
apiVersion: v1
kind: ServiceAccount
metadata:
  name: $sa
  namespace: $ns
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: $sa
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: ServiceAccount
  name: $sa
  namespace: $ns
---
apiVersion: v1
kind: Secret
metadata:
  name: $secret
  namespace: $ns
  annotations:
    kubernetes.io/service-account.name: $sa
type: kubernetes.io/service-account-token
MANIFEST
# The token controller fills the Secret's token asynchronously.
i=0
while [ -z "$(token_of)" ]; do
    i=$((i + 1))
    [ "$i" -le 60 ] || fail "Secret $ns/$secret got no token within 60 s"
    sleep 1
done
echo "token Secret $ns/$secret made for ServiceAccount $sa"
