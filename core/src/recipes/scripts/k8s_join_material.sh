# k8s.join_material FILE OPERATION — on a control-plane node: FILE (0600) holds join material
# made for OPERATION (its first line, "# OPERATION") younger than 50 minutes, which check prints
# as TOKEN_NAME=, TOKEN_HASH=, CERT_KEY= lines for vnfkeeper to keep (a bootstrap token lives
# 24 h, a certificate key 2 h: kubeadm reference, "kubeadm token", "kubeadm init phase
# upload-certs"); apply makes fresh material with kubeadm and the CA public key pin of kubeadm's
# documentation ("kubeadm join", token-based discovery). Only the last line is ever recorded.
file=$1; op=$2
if [ -f "$file" ] && [ "$(head -n 1 "$file")" = "# $op" ] && [ -n "$(find "$file" -mmin -50 2>/dev/null)" ]; then
    cat "$file"
    done_ "join material of this operation, younger than 50 minutes"
fi
needed "no join material made for this operation"
token=$(kubeadm token create) || fail "kubeadm token create failed"
hash=$(openssl x509 -pubkey -in /etc/kubernetes/pki/ca.crt | openssl rsa -pubin -outform der 2>/dev/null |
    openssl dgst -sha256 -hex | sed 's/^.* //') || fail "cannot compute the CA public key hash"
key=$(kubeadm init phase upload-certs --upload-certs | tail -n 1) || fail "kubeadm init phase upload-certs failed"
mkdir -p "$(dirname "$file")"
( umask 077; : > "$file" )
printf '# %s\nTOKEN_NAME=%s\nTOKEN_HASH=%s\nCERT_KEY=%s\n' "$op" "$token" "$hash" "$key" | replace_file "$file"
echo "fresh join material made"
