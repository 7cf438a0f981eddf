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

/// The curl stand-in's mirror: (path under `usr/local/lib/testbed/mirror/`, content). Files
/// written for the testbed (see `standins/curl-standin`), served for these internet URLs.
const MIRROR: [(&str, &str); 3] = [
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
];

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
