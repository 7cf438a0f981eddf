//! The Ansible server of the kubespray flavour: a host outside any stack with Debian's
//! `ansible` (ansible-core and its collections) and the kubespray stand-in tree (`tests/testbed/kubespray/`).

use std::net::Ipv4Addr;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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
    /// Fills the `additionalParams.k8s_cluster_installation_param.ansible` block of a kubespray
    /// InstantiateVnfRequest with this server: `ip_address`, `username`, `password`,
    /// `kubespray_root_path`, and `transferring_inventory_path` =
    /// `<kubespray_root_path>/inventory/<last component of the request's value>` (the seed
    /// fixture gives `vnf-kubespray`; `vnfkeeper` when the request has none). `request` is the
    /// InstantiateVnfRequest or a spool envelope (`{"operation", …, "request": {…}}`); every other
    /// field stays as it is.
    ///
    /// Errors: no `additionalParams.k8s_cluster_installation_param` object.
    pub fn fill_request(&self, request: &mut Value) -> Result<()> {
        let req = if request.get("request").is_some_and(Value::is_object) {
            &mut request["request"]
        } else {
            request
        };
        let param = req
            .get_mut("additionalParams")
            .and_then(|a| a.get_mut("k8s_cluster_installation_param"))
            .and_then(Value::as_object_mut)
            .context("no additionalParams.k8s_cluster_installation_param in the request")?;
        let block = param.entry("ansible").or_insert_with(|| json!({}));
        if !block.is_object() {
            *block = json!({});
        }
        let leaf = block
            .get("transferring_inventory_path")
            .and_then(Value::as_str)
            .and_then(|p| Path::new(p).file_name())
            .and_then(|f| f.to_str())
            .unwrap_or("vnfkeeper")
            .to_string();
        let root = self.kubespray_root_path.trim_end_matches('/');
        block["ip_address"] = json!(self.ip_address.to_string());
        block["username"] = json!(self.username);
        block["password"] = json!(self.password);
        block["kubespray_root_path"] = json!(root);
        block["transferring_inventory_path"] = json!(format!("{root}/inventory/{leaf}"));
        Ok(())
    }

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
    /// `ansible` ([`super::setup_packages`]: `ansible-core` and the collection bundle). Its commands are in
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
            profile: crate::hosts::HostProfile::Debian,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> AnsibleServer {
        AnsibleServer {
            ip_address: Ipv4Addr::new(10, 231, 9, 254),
            username: "ops".into(),
            password: "pw".into(),
            kubespray_root_path: "/srv/kubespray/".into(),
        }
    }

    #[test]
    fn fill_request_sets_the_ansible_block_of_the_seed_fixture() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json");
        let mut env: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        server().fill_request(&mut env).unwrap();
        let p = &env["request"]["additionalParams"]["k8s_cluster_installation_param"];
        assert_eq!(p["ansible"]["ip_address"], "10.231.9.254");
        assert_eq!(p["ansible"]["username"], "ops");
        assert_eq!(p["ansible"]["password"], "pw");
        assert_eq!(p["ansible"]["kubespray_root_path"], "/srv/kubespray");
        assert_eq!(
            p["ansible"]["transferring_inventory_path"],
            "/srv/kubespray/inventory/vnf-kubespray"
        );
        assert_eq!(p["master_node"]["username"], "ubuntu", "other fields kept");
        // the bare request works too, and a missing block is an error
        let mut req = env["request"].clone();
        req["additionalParams"]["k8s_cluster_installation_param"]
            .as_object_mut()
            .unwrap()
            .remove("ansible");
        server().fill_request(&mut req).unwrap();
        assert_eq!(
            req["additionalParams"]["k8s_cluster_installation_param"]["ansible"]["transferring_inventory_path"],
            "/srv/kubespray/inventory/vnfkeeper"
        );
        assert!(
            server()
                .fill_request(&mut json!({"flavourId": "simple"}))
                .is_err()
        );
    }

    #[test]
    fn description_file_round_trips_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("tb-ansible-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(ANSIBLE_SERVER_FILE);
        server().write(&path).unwrap();
        assert_eq!(AnsibleServer::read(&path).unwrap(), server());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["ip_address", "kubespray_root_path", "password", "username"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
