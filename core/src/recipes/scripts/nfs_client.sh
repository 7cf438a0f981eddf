# nfs.client — the NFS client (nfs-common) installed on a Kubernetes node.
pkg_installed nfs-common && done_ "nfs-common is installed"
needed "nfs-common is not installed"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q nfs-common
pkg_installed nfs-common || fail "nfs-common still not installed"
echo "installed nfs-common"
