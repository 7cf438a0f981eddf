# registry.runtime — the container runtime (Docker) installed and its service enabled and running.
if command -v docker >/dev/null 2>&1 && { pkg_installed docker.io || pkg_installed docker-ce; }; then
    done_ "docker is installed"
fi
needed "docker is not installed"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
systemctl enable --now docker >/dev/null 2>&1 || systemctl restart docker
command -v docker >/dev/null 2>&1 || fail "docker missing after installing docker.io"
echo "installed docker.io"
