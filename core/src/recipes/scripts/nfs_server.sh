# nfs.server — the NFS server installed and running.
if command -v exportfs >/dev/null 2>&1 && pkg_installed nfs-kernel-server; then
    done_ "nfs-kernel-server is installed"
fi
needed "nfs-kernel-server is not installed"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q nfs-kernel-server
systemctl enable --now nfs-kernel-server >/dev/null 2>&1 || systemctl restart nfs-kernel-server
command -v exportfs >/dev/null 2>&1 || fail "exportfs missing after installing nfs-kernel-server"
echo "installed nfs-kernel-server"
