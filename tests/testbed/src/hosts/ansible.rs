//! The Ansible server of the kubespray flavour: a host outside any stack with Debian's
//! `ansible-core` and the kubespray stand-in tree (`tests/testbed/kubespray/`).

use std::net::Ipv4Addr;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::farm::{HostFarm, HostSpec};

/// Server id (the key of [`HostFarm::command_log`], [`HostFarm::exec`] …) and host name of the
/// Ansible server.
pub const ANSIBLE_SERVER_ID: &str = "ansible-server";
/// Login of the Ansible server (password auth; the same values as the kubespray request fixture).
pub const ANSIBLE_USER: &str = "ansible";
/// Password of [`ANSIBLE_USER`] (the testbed's, never a real secret).
pub const ANSIBLE_PASSWORD: &str = "ansible";
/// Where the kubespray stand-in tree lies on the Ansible server (owned by [`ANSIBLE_USER`]).
pub const KUBESPRAY_ROOT: &str = "/home/ansible/kubespray";
/// File name of the Ansible server's description, written next to `clouds.yaml`.
pub const ANSIBLE_SERVER_FILE: &str = "ansible-server.json";

/// The kubespray stand-in tree: (path relative to the kubespray root, contents, mode).
const TREE: &[(&str, &str, u32)] = &[
    (
        "README.md",
        include_str!("../../kubespray/README.md"),
        0o644,
    ),
    (
        "ansible.cfg",
        include_str!("../../kubespray/ansible.cfg"),
        0o644,
    ),
    (
        "cluster.yml",
        include_str!("../../kubespray/cluster.yml"),
        0o644,
    ),
    (
        "scale.yml",
        include_str!("../../kubespray/scale.yml"),
        0o644,
    ),
    (
        "remove-node.yml",
        include_str!("../../kubespray/remove-node.yml"),
        0o644,
    ),
    (
        "facts.yml",
        include_str!("../../kubespray/facts.yml"),
        0o644,
    ),
    (
        "standin/node.yml",
        include_str!("../../kubespray/standin/node.yml"),
        0o644,
    ),
    (
        "standin/apiserver-standin.py",
        include_str!("../../kubespray/standin/apiserver-standin.py"),
        0o755,
    ),
    (
        "inventory/sample/hosts.yaml",
        include_str!("../../kubespray/inventory/sample/hosts.yaml"),
        0o644,
    ),
    (
        "inventory/sample/group_vars/all/all.yml",
        include_str!("../../kubespray/inventory/sample/group_vars/all/all.yml"),
        0o644,
    ),
    (
        "inventory/sample/group_vars/k8s_cluster/k8s-cluster.yml",
        include_str!("../../kubespray/inventory/sample/group_vars/k8s_cluster/k8s-cluster.yml"),
        0o644,
    ),
    (
        "inventory/sample/group_vars/k8s_cluster/k8s-net-calico.yml",
        include_str!("../../kubespray/inventory/sample/group_vars/k8s_cluster/k8s-net-calico.yml"),
        0o644,
    ),
];

/// How to reach the Ansible server: the contents of `ansible-server.json`
/// (`{"ip_address", "username", "password", "kubespray_root_path"}`), the field names of the
/// `ansible` block of a kubespray InstantiateVnfRequest's `k8s_cluster_installation_param`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnsibleServer {
    /// Its address on the testbed bridge (sshd on port 22).
    pub ip_address: Ipv4Addr,
    /// Login with password SSH and passwordless sudo.
    pub username: String,
    /// Password of `username`.
    pub password: String,
    /// Absolute path of the kubespray stand-in tree.
    pub kubespray_root_path: String,
}

impl AnsibleServer {
    /// Reads `ansible-server.json` (as written by [`AnsibleServer::write`]).
    ///
    /// Errors: unreadable file, or JSON without the four fields.
    pub fn read(path: &Path) -> Result<AnsibleServer> {
        let text = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        serde_json::from_slice(&text).with_context(|| format!("parse {}", path.display()))
    }

    /// Writes the description to `path` (mode 0600: it holds a password), atomically.
    ///
    /// Errors: the directory is not writable.
    pub fn write(&self, path: &Path) -> Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("create {}", tmp.display()))?;
        f.write_all(&serde_json::to_vec_pretty(self)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))
    }
}

impl HostFarm {
    /// Starts the Ansible server at `ip` (server id and host name [`ANSIBLE_SERVER_ID`], a
    /// cluster of its own, so it shares no kubectl store with any stack), creates the user
    /// [`ANSIBLE_USER`] (password [`ANSIBLE_PASSWORD`], passwordless sudo) and copies the kubespray
    /// stand-in tree to [`KUBESPRAY_ROOT`]. `ansible-playbook` comes from the machine's
    /// `ansible-core` ([`super::setup_packages`]). Its commands are in
    /// `command_log(ANSIBLE_SERVER_ID)`.
    ///
    /// Errors: those of [`HostFarm::start`] (address taken, leftovers), or the user/tree setup
    /// failing (the host is stopped again).
    pub async fn start_ansible_server(&self, ip: Ipv4Addr) -> Result<AnsibleServer> {
        self.start(HostSpec {
            server_id: ANSIBLE_SERVER_ID.into(),
            hostname: ANSIBLE_SERVER_ID.into(),
            ip,
            cluster: ANSIBLE_SERVER_ID.into(),
            volumes: Vec::new(),
        })
        .await?;
        if let Err(e) = self.install_ansible_server().await {
            let _ = self.stop(ANSIBLE_SERVER_ID).await;
            return Err(e);
        }
        Ok(AnsibleServer {
            ip_address: ip,
            username: ANSIBLE_USER.into(),
            password: ANSIBLE_PASSWORD.into(),
            kubespray_root_path: KUBESPRAY_ROOT.into(),
        })
    }

    async fn install_ansible_server(&self) -> Result<()> {
        let mut dirs: Vec<String> = TREE
            .iter()
            .filter_map(|(p, _, _)| Path::new(p).parent())
            .map(|d| format!("{KUBESPRAY_ROOT}/{}", d.display()))
            .collect();
        dirs.sort();
        dirs.dedup();
        let setup = format!(
            "set -e; id -u {u} >/dev/null 2>&1 || useradd -m -s /bin/bash {u}; \
             echo '{u}:{p}' | chpasswd; \
             echo '{u} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/90-{u}; chmod 0440 /etc/sudoers.d/90-{u}; \
             mkdir -p {dirs}",
            u = ANSIBLE_USER,
            p = ANSIBLE_PASSWORD,
            dirs = dirs.join(" ")
        );
        exec_ok(self, &setup).await?;
        for (rel, text, _) in TREE {
            self.write_file(
                ANSIBLE_SERVER_ID,
                &format!("{KUBESPRAY_ROOT}/{rel}"),
                text.as_bytes(),
            )
            .await?;
        }
        let modes: Vec<String> = TREE
            .iter()
            .map(|(rel, _, mode)| format!("chmod {mode:o} {KUBESPRAY_ROOT}/{rel}"))
            .collect();
        exec_ok(
            self,
            &format!(
                "set -e; {}; chown -R {u}:{u} /home/{u}",
                modes.join("; "),
                u = ANSIBLE_USER
            ),
        )
        .await
    }
}

async fn exec_ok(farm: &HostFarm, cmd: &str) -> Result<()> {
    let out = farm.exec(ANSIBLE_SERVER_ID, cmd).await?;
    if !out.status.success() {
        bail!(
            "Ansible server setup failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
