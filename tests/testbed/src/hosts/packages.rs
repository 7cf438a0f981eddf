//! Machine packages the hosts need (hosts see them through the overlay's lower layer).

use anyhow::{Result, bail};

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

/// Installs the missing [`HOST_PACKAGES`] with apt-get (one `apt-get update` first, only when
/// something is missing). Idempotent; needs root. Must run before any host starts: hosts see
/// packages through their overlay's lower layer, and files a host already copied up (its
/// /etc/passwd) hide later changes.
///
/// Errors: not root, or apt-get fails (its stderr is quoted).
pub async fn setup_packages() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("setup_packages needs root");
    }
    let mut missing = Vec::new();
    for p in HOST_PACKAGES {
        let st = tokio::process::Command::new("dpkg-query")
            .args(["-W", "-f", "${db:Status-Status}", p])
            .output()
            .await?;
        if String::from_utf8_lossy(&st.stdout).trim() != "installed" {
            missing.push(*p);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    tracing::info!(packages = ?missing, "installing host packages");
    apt(&["update", "-q"]).await?;
    let mut args = vec!["install", "-y", "-q"];
    args.extend(missing);
    apt(&args).await
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
