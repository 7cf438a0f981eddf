//! Files laid into every host's overlay upper layer before it starts ("seed"): users, sshd
//! config, the host init, the command-recording wrapper and the stand-ins.

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::util::run;

pub(crate) const SETUP_SH: &str = include_str!("assets/setup.sh");
const INIT_SH: &str = include_str!("assets/init.sh");
const SSH_COMMAND_SH: &str = include_str!("assets/ssh-command.sh");
const SSHD_CONFIG: &str = include_str!("assets/sshd_config");
const APT_GET: &str = include_str!("../../standins/apt-get-standin");
const SYSTEMCTL: &str = include_str!("../../standins/systemctl-standin");
const EXPORTFS: &str = include_str!("../../standins/exportfs-standin");
const KUBECTL: &str = include_str!("../../standins/kubectl-standin");
const DOCKER: &str = include_str!("../../standins/docker-standin");
const MKFS: &str = include_str!("../../standins/mkfs-wrapper");
const DPKG_QUERY: &str = include_str!("../../standins/dpkg-query-standin");
const KUBEADM: &str = include_str!("../../standins/kubeadm-standin");
const KUBE_APISERVER: &str = include_str!("../../standins/kube-apiserver-standin");
const CURL: &str = include_str!("../../standins/curl-standin");
const APT_KEY: &str = include_str!("../../standins/apt-key-standin");
const ADD_APT_REPOSITORY: &str = include_str!("../../standins/add-apt-repository-standin");
const HOSTNAMECTL: &str = include_str!("../../standins/hostnamectl-standin");
const SWAPOFF: &str = include_str!("../../standins/swapoff-standin");
const APT_MARK: &str = include_str!("../../standins/apt-mark-standin");
const MODPROBE: &str = include_str!("../../standins/modprobe-standin");
const SYSCTL: &str = include_str!("../../standins/sysctl-standin");
const CONTAINERD: &str = include_str!("../../standins/containerd-standin");
const CTR: &str = include_str!("../../standins/ctr-standin");
const RUNC: &str = include_str!("../../standins/runc-standin");
const CILIUM: &str = include_str!("../../standins/cilium-standin");

/// The curl stand-in's mirror: (path under `usr/local/lib/testbed/mirror/`, content). Files
/// written for the testbed (see `standins/curl-standin`), served for these internet URLs.
const MIRROR: [(&str, &str); 6] = [
    (
        "download.docker.com/linux/ubuntu/gpg",
        include_str!("../../standins/mirror/docker-gpg.asc"),
    ),
    (
        "packages.cloud.google.com/apt/doc/apt-key.gpg",
        include_str!("../../standins/mirror/google-apt-key.asc"),
    ),
    (
        "docs.projectcalico.org/manifests/calico.yaml",
        include_str!("../../standins/mirror/calico.yaml"),
    ),
    // Tacker's v2 sample script (sol_v2_kubernetes_vnf_package install_k8s_cluster.sh)
    (
        "pkgs.k8s.io/core:/stable:/v1.26/deb/Release.key",
        include_str!("../../standins/mirror/k8s-release-key.asc"),
    ),
    (
        "raw.githubusercontent.com/containerd/containerd/main/containerd.service",
        include_str!("../../standins/mirror/containerd.service"),
    ),
    (
        "raw.githubusercontent.com/cilium/cilium-cli/main/stable.txt",
        include_str!("../../standins/mirror/cilium-cli-stable.txt"),
    ),
];

/// containerd release the mirror serves (Tacker 16.0.0's v2 sample script pins it).
const CONTAINERD_VERSION: &str = "1.7.11";
/// runc release the mirror serves (pinned by the same script).
const RUNC_VERSION: &str = "1.1.10";
/// cilium-cli release the mirror serves; `standins/mirror/cilium-cli-stable.txt` names it.
const CILIUM_CLI_VERSION: &str = "v0.15.19";

/// Lowercase hex sha256 of `data`.
fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `dir/name` and `dir/name.sha256sum` (`HASH  name`, the form `sha256sum --check`
/// reads and release pages publish) into the mirror under `seed`.
fn write_with_sum(seed: &Path, dir: &str, name: &str, data: &[u8]) -> Result<()> {
    let mirror = format!("usr/local/lib/testbed/mirror/{dir}");
    write_file(seed, &format!("{mirror}/{name}"), data, 0o644)?;
    let sum = format!("{}  {name}\n", sha256_hex(data));
    write_file(
        seed,
        &format!("{mirror}/{name}.sha256sum"),
        sum.as_bytes(),
        0o644,
    )?;
    Ok(())
}

/// A gzip'd tar archive (GNU tar, owner root) of `files` (path inside the archive, content,
/// mode), built in a scratch directory under `seed` that is removed again.
async fn tar_gz(seed: &Path, files: &[(&str, &str, u32)]) -> Result<Vec<u8>> {
    let scratch = seed.join(format!(".archive-{}", uuid::Uuid::new_v4().simple()));
    let result = async {
        let root = scratch.join("root");
        fs::create_dir_all(&root)?;
        for (rel, content, mode) in files {
            write_file(&root, rel, content.as_bytes(), *mode)?;
        }
        let archive = scratch.join("a.tar.gz");
        let mut args: Vec<String> = ["--owner=0", "--group=0", "--numeric-owner", "-czf"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(archive.to_string_lossy().into_owned());
        args.push("-C".into());
        args.push(root.to_string_lossy().into_owned());
        let mut tops: Vec<String> = files
            .iter()
            .map(|(rel, _, _)| rel.split('/').next().unwrap_or(rel).to_string())
            .collect();
        tops.dedup();
        args.extend(tops);
        run("tar", &args).await?;
        Ok::<_, anyhow::Error>(fs::read(&archive)?)
    }
    .await;
    let _ = fs::remove_dir_all(&scratch);
    result
}

/// The release files Tacker 16.0.0's v2 sample `install_k8s_cluster.sh` downloads with curl,
/// as the testbed's mirror serves them: archives of stand-ins (containerd, ctr, cilium) and the
/// runc stand-in, each with a `.sha256sum` computed from what is served (the script checks
/// them with `sha256sum --check`).
async fn mirror_archives(seed: &Path) -> Result<()> {
    let containerd = tar_gz(
        seed,
        &[
            ("bin/containerd", CONTAINERD, 0o755),
            ("bin/ctr", CTR, 0o755),
        ],
    )
    .await?;
    write_with_sum(
        seed,
        &format!("github.com/containerd/containerd/releases/download/v{CONTAINERD_VERSION}"),
        &format!("containerd-{CONTAINERD_VERSION}-linux-amd64.tar.gz"),
        &containerd,
    )?;
    let runc_dir = format!(
        "usr/local/lib/testbed/mirror/github.com/opencontainers/runc/releases/download/v{RUNC_VERSION}"
    );
    write_file(
        seed,
        &format!("{runc_dir}/runc.amd64"),
        RUNC.as_bytes(),
        0o644,
    )?;
    let sums = format!("{}  runc.amd64\n", sha256_hex(RUNC.as_bytes()));
    write_file(
        seed,
        &format!("{runc_dir}/runc.sha256sum"),
        sums.as_bytes(),
        0o644,
    )?;
    let cilium = tar_gz(seed, &[("cilium", CILIUM, 0o755)]).await?;
    write_with_sum(
        seed,
        &format!("github.com/cilium/cilium-cli/releases/download/{CILIUM_CLI_VERSION}"),
        "cilium-linux-amd64.tar.gz",
        &cilium,
    )?;
    Ok(())
}

/// Login user created inside every host (password = name).
pub(crate) const USER: &str = "ubuntu";

/// Creates `base/rel` and its missing parents, giving each new directory the mode of the same
/// directory on the machine (overlay upper directories hide the lower ones' attributes).
pub(crate) fn mkdirs_like(base: &Path, rel: &str) -> Result<PathBuf> {
    let mut cur = base.to_path_buf();
    let mut machine = PathBuf::from("/");
    for comp in Path::new(rel.trim_start_matches('/')).components() {
        cur.push(comp);
        machine.push(comp);
        if !cur.exists() {
            fs::create_dir(&cur).with_context(|| format!("mkdir {}", cur.display()))?;
            let mode = fs::metadata(&machine)
                .map(|m| m.permissions().mode() & 0o7777)
                .unwrap_or(0o755);
            fs::set_permissions(&cur, fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(cur)
}

/// Writes `base/rel` with `mode`, creating parent directories like [`mkdirs_like`].
pub(crate) fn write_file(base: &Path, rel: &str, content: &[u8], mode: u32) -> Result<PathBuf> {
    let rel = rel.trim_start_matches('/');
    if let Some(parent) = Path::new(rel).parent() {
        mkdirs_like(base, &parent.to_string_lossy())?;
    }
    let path = base.join(rel);
    fs::write(&path, content).with_context(|| format!("write {}", path.display()))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
    Ok(path)
}

/// Generates an ed25519 key pair at `path` (+ `.pub`) and returns the public key line
/// ("ssh-ed25519 BASE64", without comment).
pub(crate) async fn keygen(path: &Path, comment: &str) -> Result<String> {
    let _ = fs::remove_file(path);
    let _ = fs::remove_file(path.with_extension("pub"));
    run(
        "ssh-keygen",
        [
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            comment,
            "-f",
            &path.to_string_lossy(),
        ],
    )
    .await?;
    public_key(path)
}

/// Reads `path.pub` and returns "TYPE BASE64".
pub(crate) fn public_key(path: &Path) -> Result<String> {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    let text =
        fs::read_to_string(&p).with_context(|| format!("read {}", Path::new(&p).display()))?;
    let mut it = text.split_whitespace();
    match (it.next(), it.next()) {
        (Some(t), Some(k)) => Ok(format!("{t} {k}")),
        _ => bail!("malformed public key in {}", Path::new(&p).display()),
    }
}

fn free_id(file: &str, field: usize) -> u32 {
    let used: Vec<u32> = file
        .lines()
        .filter_map(|l| l.split(':').nth(field)?.parse().ok())
        .collect();
    (1000..60000).find(|id| !used.contains(id)).unwrap_or(60000)
}

fn add_member(file: &str, group: &str, user: &str) -> String {
    file.lines()
        .map(|l| {
            if l.split(':').next() == Some(group) {
                let members = l.rsplit(':').next().unwrap_or("");
                if members.is_empty() {
                    format!("{l}{user}")
                } else if members.split(',').any(|m| m == user) {
                    l.to_string()
                } else {
                    format!("{l},{user}")
                }
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// Builds the common seed tree at `seed` (removed and rebuilt). `root_pub` is the testbed key's
/// public line authorized for root (and the login user).
pub(crate) async fn build_common_seed(seed: &Path, root_pub: &str) -> Result<()> {
    if seed.exists() {
        fs::remove_dir_all(seed)?;
    }
    fs::create_dir_all(seed)?;
    fs::set_permissions(seed, fs::Permissions::from_mode(0o755))?;

    // users: the machine's files plus "ubuntu" (the machine itself gets no new user)
    let passwd = fs::read_to_string("/etc/passwd")?;
    let group = fs::read_to_string("/etc/group")?;
    let shadow = fs::read_to_string("/etc/shadow").unwrap_or_default();
    let gshadow = fs::read_to_string("/etc/gshadow").unwrap_or_default();
    let salt = uuid::Uuid::new_v4().simple().to_string()[..16].to_string();
    let hash = run("openssl", ["passwd", "-6", "-salt", &salt, USER])
        .await?
        .trim()
        .to_string();
    let (passwd, shadow, group, gshadow, uid, gid) =
        if passwd.lines().any(|l| l.starts_with(&format!("{USER}:"))) {
            let line = passwd
                .lines()
                .find(|l| l.starts_with(&format!("{USER}:")))
                .unwrap_or_default();
            let f: Vec<&str> = line.split(':').collect();
            let uid = f.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
            let gid = f.get(3).and_then(|s| s.parse().ok()).unwrap_or(1000);
            let shadow: String = shadow
                .lines()
                .map(|l| {
                    if l.starts_with(&format!("{USER}:")) {
                        let mut f: Vec<&str> = l.split(':').collect();
                        f[1] = &hash;
                        f.join(":") + "\n"
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            (passwd, shadow, group, gshadow, uid, gid)
        } else {
            let uid = free_id(&passwd, 2);
            let gid = if group
                .lines()
                .any(|l| l.split(':').nth(2) == Some(&uid.to_string()))
            {
                free_id(&group, 2)
            } else {
                uid
            };
            (
                format!("{passwd}{USER}:x:{uid}:{gid}:Ubuntu (testbed):/home/{USER}:/bin/bash\n"),
                format!("{shadow}{USER}:{hash}:19700:0:99999:7:::\n"),
                format!("{group}{USER}:x:{gid}:\n"),
                format!("{gshadow}{USER}:!::\n"),
                uid,
                gid,
            )
        };
    let group = add_member(&group, "sudo", USER);
    let gshadow = add_member(&gshadow, "sudo", USER);
    write_file(seed, "etc/passwd", passwd.as_bytes(), 0o644)?;
    write_file(seed, "etc/group", group.as_bytes(), 0o644)?;
    let p = write_file(seed, "etc/shadow", shadow.as_bytes(), 0o640)?;
    let shadow_gid = fs_gid("/etc/shadow");
    chown(&p, Some(0), shadow_gid)?;
    let p = write_file(seed, "etc/gshadow", gshadow.as_bytes(), 0o640)?;
    chown(&p, Some(0), shadow_gid)?;
    write_file(
        seed,
        "etc/sudoers.d/testbed-ubuntu",
        format!(
            "# testbed: passwordless sudo for the login user\n{USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"
        )
        .as_bytes(),
        0o440,
    )?;
    write_file(
        seed,
        "etc/ssh/testbed_sshd_config",
        SSHD_CONFIG.as_bytes(),
        0o644,
    )?;

    // home of the login user (from /etc/skel) and authorized keys
    let home = mkdirs_like(seed, &format!("home/{USER}"))?;
    fs::set_permissions(&home, fs::Permissions::from_mode(0o755))?;
    if let Ok(rd) = fs::read_dir("/etc/skel") {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_file()).unwrap_or(false) {
                let dst = home.join(e.file_name());
                fs::copy(e.path(), &dst)?;
                chown(&dst, Some(uid), Some(gid))?;
            }
        }
    }
    let auth = format!("{root_pub} testbed\n");
    for (dir, owner) in [
        (format!("home/{USER}/.ssh"), (uid, gid)),
        ("root/.ssh".to_string(), (0, 0)),
    ] {
        let d = mkdirs_like(seed, &dir)?;
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700))?;
        let f = write_file(
            seed,
            &format!("{dir}/authorized_keys"),
            auth.as_bytes(),
            0o600,
        )?;
        chown(&d, Some(owner.0), Some(owner.1))?;
        chown(&f, Some(owner.0), Some(owner.1))?;
    }
    chown(&home, Some(uid), Some(gid))?;

    // host machinery and stand-ins
    write_file(
        seed,
        "usr/local/lib/testbed/init",
        INIT_SH.as_bytes(),
        0o755,
    )?;
    write_file(
        seed,
        "usr/local/lib/testbed/ssh-command",
        SSH_COMMAND_SH.as_bytes(),
        0o755,
    )?;
    for name in ["apt-get", "apt"] {
        write_file(
            seed,
            &format!("usr/local/bin/{name}"),
            APT_GET.as_bytes(),
            0o755,
        )?;
    }
    write_file(seed, "usr/local/bin/systemctl", SYSTEMCTL.as_bytes(), 0o755)?;
    write_file(seed, "usr/local/bin/kubectl", KUBECTL.as_bytes(), 0o755)?;
    // the same stand-in where the apt stand-in links it from (`apt-get install kubectl` on a
    // host whose profile has no kubectl at boot)
    write_file(
        seed,
        "usr/local/lib/testbed/kubectl",
        KUBECTL.as_bytes(),
        0o755,
    )?;
    write_file(
        seed,
        "usr/local/bin/dpkg-query",
        DPKG_QUERY.as_bytes(),
        0o755,
    )?;
    write_file(seed, "usr/local/bin/docker", DOCKER.as_bytes(), 0o755)?;
    // kubeadm: only where the apt stand-in links it from (`apt-get install kubeadm`); the
    // machine has no kubeadm
    write_file(
        seed,
        "usr/local/lib/testbed/kubeadm",
        KUBEADM.as_bytes(),
        0o755,
    )?;
    write_file(
        seed,
        "usr/local/lib/testbed/kube-apiserver",
        KUBE_APISERVER.as_bytes(),
        0o755,
    )?;
    write_file(seed, "usr/local/bin/curl", CURL.as_bytes(), 0o755)?;
    for (rel, content) in MIRROR {
        write_file(
            seed,
            &format!("usr/local/lib/testbed/mirror/{rel}"),
            content.as_bytes(),
            0o644,
        )?;
    }
    mirror_archives(seed).await?;
    write_file(seed, "usr/local/bin/apt-key", APT_KEY.as_bytes(), 0o755)?;
    write_file(seed, "usr/local/bin/apt-mark", APT_MARK.as_bytes(), 0o755)?;
    write_file(
        seed,
        "usr/local/bin/add-apt-repository",
        ADD_APT_REPOSITORY.as_bytes(),
        0o755,
    )?;
    // at the real one's path: scripts call /usr/bin/hostnamectl by that absolute path
    write_file(seed, "usr/bin/hostnamectl", HOSTNAMECTL.as_bytes(), 0o755)?;
    // swap is not namespaced: the real swapoff in a host would turn off the machine's swap, so
    // the stand-in also covers the real one's path (/sbin is /usr/sbin on Debian 12)
    for rel in ["usr/local/sbin/swapoff", "usr/sbin/swapoff"] {
        write_file(seed, rel, SWAPOFF.as_bytes(), 0o755)?;
    }
    // modules are not namespaced either: the stand-in resolves like the real one but loads
    // nothing; it covers the real one's path too (kmod, called by argv[0])
    for rel in ["usr/local/sbin/modprobe", "usr/sbin/modprobe"] {
        write_file(seed, rel, MODPROBE.as_bytes(), 0o755)?;
    }
    // most sysctl keys are machine-wide: the stand-in (ahead of the real one on root's and
    // sudo's PATH) runs the real sysctl with --dry-run
    write_file(seed, "usr/local/sbin/sysctl", SYSCTL.as_bytes(), 0o755)?;
    write_file(seed, "usr/local/sbin/exportfs", EXPORTFS.as_bytes(), 0o755)?;
    for name in [
        "mkfs",
        "mkfs.ext2",
        "mkfs.ext3",
        "mkfs.ext4",
        "mkfs.xfs",
        "mke2fs",
    ] {
        write_file(
            seed,
            &format!("usr/local/sbin/{name}"),
            MKFS.as_bytes(),
            0o755,
        )?;
    }
    let st = mkdirs_like(seed, "var/lib/testbed")?;
    fs::set_permissions(&st, fs::Permissions::from_mode(0o755))?;
    // the curl stand-in runs as any user: its log is writable by all
    write_file(seed, "var/lib/testbed/curl.log", b"", 0o666)?;
    Ok(())
}

fn fs_gid(path: &str) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().map(|m| m.gid())
}
