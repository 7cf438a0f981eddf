//! Machine packages the hosts need (hosts see them through the overlay's lower layer).

use anyhow::{Result, anyhow, bail};
use nix::fcntl::{Flock, FlockArg};

use super::farm::REGISTRY_DIR;

use super::util::SANE_PATH;

/// Debian packages [`setup_packages`] makes sure of.
pub const HOST_PACKAGES: &[&str] = &[
    "openssh-server",
    "openssh-client",
    "sshpass",
    "sudo",
    "iproute2",
    "util-linux",
    "mount",
    "e2fsprogs",
    "openssl",
    "python3",
    "python3-yaml",
    "rpcbind",
    "nfs-ganesha",
    "nfs-ganesha-vfs",
    "libnfs-utils",
    "docker-registry",
    "skopeo",
    "curl",
];

/// Debian packages [`setup_packages`] installs without their recommended packages:
/// `ansible` (`ansible-playbook` of `ansible-core` on the Ansible server, and the collection
/// bundle with `ansible.posix`, whose `ansible.posix.jsonl` stdout callback the kubespray flavour
/// reads), `haproxy` (the external
/// load balancer of the kubespray flavour and the masters' :16443 front of Tacker's install
/// script) and `keepalived` (the install script's VRRP for the cluster VIP), both run inside a
/// host by the systemctl stand-in.
pub const LEAN_HOST_PACKAGES: &[&str] = &["ansible", "haproxy", "keepalived"];

/// Installs the missing [`HOST_PACKAGES`] and [`LEAN_HOST_PACKAGES`] with apt-get (one `apt-get update` first, only when
/// something is missing). Idempotent; needs root. Must run before any host starts: hosts see
/// packages through their overlay's lower layer, and files a host already copied up (its
/// /etc/passwd) hide later changes.
///
/// Errors: not root, or apt-get fails (its stderr is quoted).
pub async fn setup_packages() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("setup_packages needs root");
    }
    if missing_of(HOST_PACKAGES).await?.is_empty()
        && missing_of(LEAN_HOST_PACKAGES).await?.is_empty()
    {
        return Ok(());
    }
    // Tests running in parallel may all find something missing: one installs, the others wait
    // for it and then find nothing left to do (apt-get itself would fail on dpkg's lock).
    let _lock = tokio::task::spawn_blocking(|| {
        std::fs::create_dir_all(REGISTRY_DIR)?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(std::path::Path::new(REGISTRY_DIR).join("setup-packages.lock"))?;
        Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| anyhow!("flock: {e}"))
    })
    .await??;
    let missing = missing_of(HOST_PACKAGES).await?;
    let missing_lean = missing_of(LEAN_HOST_PACKAGES).await?;
    if missing.is_empty() && missing_lean.is_empty() {
        return Ok(());
    }
    tracing::info!(packages = ?missing, lean = ?missing_lean, "installing host packages");
    apt(&["update", "-q"]).await?;
    if !missing.is_empty() {
        let mut args = vec!["install", "-y", "-q"];
        args.extend(missing);
        apt(&args).await?;
    }
    if !missing_lean.is_empty() {
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
        args.extend(missing_lean);
        apt(&args).await?;
    }
    Ok(())
}

/// Installs the packages of `list` dpkg does not report as installed, without their
/// recommended packages (one `apt-get update` first, only when something is missing), under the
/// same lock as [`setup_packages`]: for a test that runs a real tool of the Debian archive
/// (Prometheus's server) and fails, never skips, without it. Idempotent; needs root.
///
/// Errors: not root, or apt-get fails (its stderr is quoted).
pub async fn install_packages(list: &[&'static str]) -> Result<()> {
    if missing_of(list).await?.is_empty() {
        return Ok(());
    }
    if !nix::unistd::geteuid().is_root() {
        bail!("installing {list:?} needs root");
    }
    let _lock = tokio::task::spawn_blocking(|| {
        std::fs::create_dir_all(REGISTRY_DIR)?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(std::path::Path::new(REGISTRY_DIR).join("setup-packages.lock"))?;
        Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| anyhow!("flock: {e}"))
    })
    .await??;
    let missing = missing_of(list).await?;
    if missing.is_empty() {
        return Ok(());
    }
    apt(&["update", "-q"]).await?;
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend(missing);
    apt(&args).await
}

/// The packages of `list` dpkg does not report as installed.
async fn missing_of(list: &[&'static str]) -> Result<Vec<&'static str>> {
    let mut missing = Vec::new();
    for p in list {
        let st = tokio::process::Command::new("dpkg-query")
            .args(["-W", "-f", "${db:Status-Status}", p])
            .output()
            .await?;
        if String::from_utf8_lossy(&st.stdout).trim() != "installed" {
            missing.push(*p);
        }
    }
    Ok(missing)
}

async fn apt(args: &[&str]) -> Result<()> {
    let out = tokio::process::Command::new("apt-get")
        .args(args)
        .env("PATH", SANE_PATH)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "apt-get {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
