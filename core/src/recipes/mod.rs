//! Recipes (pure): what to run on which VNFC for an action, as idempotent check-then-apply steps.
//!
//! Every step is a fixed shell script from `recipes/scripts/` plus arguments. The script is run as
//! `sh -c '<common.sh + script>' vnfkeeper-step MODE ARG...`: arguments are validated values passed
//! as positional parameters (quoted by the remote adapter's one quoting function), never spliced
//! into the script text. `MODE=check` exits 0 when the step is already done (and says why), 10 when
//! it is needed; `MODE=apply` converges and exits 0. Applying twice is harmless.
//!
//! Source of the remote steps: Tacker's MgmtDriver sample
//! `samples/mgmt_driver/kubernetes/kubernetes_mgmt.py` (storage server, NFS, PersistentVolumes),
//! with its defects removed: no unconditional `mkfs`, a persistent mount, `/etc/exports` written
//! declaratively, structured PV edits, bounded polls.

pub mod pv;
mod step_kind;
pub mod trust;

use std::time::Duration;

pub use step_kind::{OutputUse, StepKind};

const COMMON: &str = include_str!("scripts/common.sh");

/// One check-then-apply step on one host. Stored in an operation's plan as JSON: the script is
/// named by the step's kind (its script is compiled into this binary), uploads are base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What the step is, e.g. [`StepKind::StorageFilesystem`] (the stage key adds what the
    /// step is about).
    pub kind: StepKind,
    /// The VNFC the step runs on (vnfcInstanceId).
    pub host: String,
    /// Positional arguments after MODE: validated values only.
    pub args: Vec<String>,
    /// Files uploaded before the step runs (e.g. a PersistentVolume manifest).
    pub uploads: Vec<Upload>,
    /// Files whose content exists only when the step runs (pinned host keys, credentials),
    /// produced by the instance's flavour and uploaded after `uploads`.
    pub late: Vec<Late>,
    /// Run as root through sudo.
    pub sudo: bool,
    /// Longest one run (check or apply) may take; enforced on the remote side.
    pub timeout: Duration,
}

/// A file to put on the host before a step runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Upload {
    /// Absolute path on the host.
    pub path: String,
    /// Content (base64 when stored).
    #[serde(with = "base64_bytes")]
    pub bytes: Vec<u8>,
    /// File mode, e.g. `0o600`.
    pub mode: u32,
}

/// A file whose content the flavour produces when the step runs
/// (`MgmtDriver::late_upload`), never stored in the plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Late {
    /// An OpenSSH `known_hosts` file (mode 0644) of the cluster's nodes, from the host keys
    /// vnfkeeper pinned: one `<address> <key>` line per node.
    KnownHosts {
        /// Absolute path on the host.
        path: String,
    },
    /// A YAML variables file (mode 0600) with the nodes' SSH and sudo passwords and the proxy
    /// settings; the step's script removes it when it ends.
    Credentials {
        /// Absolute path on the host.
        path: String,
    },
    /// Docker's client `config.json` (mode 0600) with the private registries' auths
    /// (`flavour::trust::docker_config_json`); kept on the node for the kubelet.
    RegistryAuth {
        /// Absolute path on the host.
        path: String,
    },
    /// The environment of the package's cluster install script (mode 0600): `export NAME=value`
    /// lines (`ha_flag` for a worker, the request's proxies), sourced and removed by
    /// `k8s.install` before the script runs, so no value reaches an argument vector.
    InstallEnv {
        /// Absolute path on the host.
        path: String,
        /// `ha_flag` as Tacker's driver exports it for a worker (`True` with more than one
        /// master: the worker joins the VIP's port 16443); `None` for a master.
        ha_flag: Option<bool>,
        /// The node joins an existing cluster: the file also exports the kept join material
        /// (`TOKEN_NAME`, `TOKEN_HASH`, `CERT_KEY`, read by Tacker's install script).
        #[serde(default)]
        join: bool,
    },
}

impl Late {
    /// Absolute path on the host.
    pub fn path(&self) -> &str {
        match self {
            Late::KnownHosts { path }
            | Late::Credentials { path }
            | Late::RegistryAuth { path }
            | Late::InstallEnv { path, .. } => path,
        }
    }

    /// File mode.
    pub fn mode(&self) -> u32 {
        match self {
            Late::KnownHosts { .. } => 0o644,
            Late::Credentials { .. } | Late::RegistryAuth { .. } | Late::InstallEnv { .. } => 0o600,
        }
    }
}

/// The stored form of a [`Step`].
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredStep {
    name: StepKind,
    host: String,
    args: Vec<String>,
    #[serde(default)]
    uploads: Vec<Upload>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    late: Vec<Late>,
    sudo: bool,
    timeout_secs: u64,
}

impl From<Step> for StoredStep {
    fn from(s: Step) -> Self {
        Self {
            name: s.kind,
            host: s.host,
            args: s.args,
            uploads: s.uploads,
            late: s.late,
            sudo: s.sudo,
            timeout_secs: s.timeout.as_secs(),
        }
    }
}

impl From<StoredStep> for Step {
    fn from(s: StoredStep) -> Self {
        Self {
            kind: s.name,
            host: s.host,
            args: s.args,
            uploads: s.uploads,
            late: s.late,
            sudo: s.sudo,
            timeout: Duration::from_secs(s.timeout_secs),
        }
    }
}

impl serde::Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StoredStep::from(self.clone()).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Step::from(StoredStep::deserialize(d)?))
    }
}

/// Serde for upload content as standard base64 text.
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

impl Step {
    /// The stored dotted name of the step's kind, e.g. `storage.filesystem`.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The full script: the common prelude and the step's own text.
    pub fn script_text(&self) -> String {
        format!("{COMMON}\n{}", self.kind.script())
    }

    /// What a reconcile probe of this step checks, as its findings are keyed: the kind's name,
    /// and for a step about one object ([`StepKind::probes_object`]) `name:object`, e.g.
    /// `pv.register:pv0001`.
    pub fn probe_check(&self) -> String {
        match self.args.first() {
            Some(object) if self.kind.probes_object() => format!("{}:{object}", self.name()),
            _ => self.name().to_owned(),
        }
    }
}

/// Exit status of a check that found the step needed.
pub const EXIT_NEEDED: u32 = 10;

/// Exit status of a step that refuses to proceed because of what it found (`refuse` in
/// `common.sh`, e.g. a PersistentVolume in use); the operation fails with 409 Conflict.
pub const EXIT_REFUSED: u32 = 11;

/// How `k8s.remove_node` treats a failed drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainPolicy {
    /// Fail the step (SCALE_IN of a live node: its pods must move first).
    Strict,
    /// Delete the node anyway (HEAL: the node is being replaced and may be dead).
    Lenient,
}

/// A Cinder volume to prepare on the storage server (`cinder_volume_setup_params[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSetup {
    /// Cinder volume id (for `/dev/disk/by-id/virtio-<id>`).
    pub volume_id: String,
    /// Attachment device reported by Cinder, e.g. `/dev/vdb`.
    pub device: String,
    /// Absolute mount point (`mount_to`).
    pub mount_to: String,
}

/// An NFS export (`nfs_server_setup_params[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Absolute directory (`export_dir`).
    pub dir: String,
    /// Network allowed (`export_to`), a CIDR or address.
    pub to: String,
}

/// Storage server: a filesystem on each volume (only if it holds none), mounted persistently.
pub fn storage_volumes(host: &str, volumes: &[VolumeSetup]) -> Vec<Step> {
    let mut steps = Vec::new();
    for v in volumes {
        steps.push(Step {
            kind: StepKind::StorageFilesystem,
            host: host.into(),
            args: vec![v.device.clone(), v.volume_id.clone()],
            late: Vec::new(),
            uploads: Vec::new(),
            sudo: true,
            timeout: Duration::from_secs(600),
        });
        steps.push(Step {
            kind: StepKind::StorageMount,
            host: host.into(),
            args: vec![v.device.clone(), v.volume_id.clone(), v.mount_to.clone()],
            late: Vec::new(),
            uploads: Vec::new(),
            sudo: true,
            timeout: Duration::from_secs(120),
        });
    }
    steps
}

/// The `/etc/exports` lines for `exports` (options as Tacker's driver uses them).
pub fn exports_block(exports: &[Export]) -> String {
    exports
        .iter()
        .map(|e| {
            format!(
                "{} {}(rw,sync,no_subtree_check,insecure,all_squash)",
                e.dir, e.to
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Storage server: NFS server installed, then exactly `exports` in the block owned by
/// `vnf_instance_id` in `/etc/exports`, exported and verified with `exportfs`.
pub fn nfs_server(host: &str, vnf_instance_id: &str, exports: &[Export]) -> Vec<Step> {
    let mut args = vec![
        "/etc/exports".to_owned(),
        vnf_instance_id.to_owned(),
        exports_block(exports),
    ];
    args.extend(exports.iter().map(|e| e.dir.clone()));
    vec![
        Step {
            kind: StepKind::NfsServer,
            host: host.into(),
            args: Vec::new(),
            late: Vec::new(),
            uploads: Vec::new(),
            sudo: true,
            timeout: Duration::from_secs(900),
        },
        Step {
            kind: StepKind::NfsExports,
            host: host.into(),
            args,
            late: Vec::new(),
            uploads: Vec::new(),
            sudo: true,
            timeout: Duration::from_secs(120),
        },
    ]
}

/// A Kubernetes node: the NFS client installed.
pub fn nfs_client(host: &str) -> Step {
    Step {
        kind: StepKind::NfsClient,
        host: host.into(),
        args: Vec::new(),
        late: Vec::new(),
        uploads: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(900),
    }
}

/// The package's cluster install script (`script_path`) uploaded to `script` and run by bash with
/// `args` as root, with the variables of `<script>.env` ([`Late::InstallEnv`], `ha_flag`) in
/// its environment, unless the node already belongs to a cluster (kubeadm's
/// `/etc/kubernetes/kubelet.conf`). The contract for `args` is Tacker's sample MgmtDriver's
/// (README, "Cluster install script").
pub fn k8s_install(
    host: &str,
    script: &str,
    body: Vec<u8>,
    args: Vec<String>,
    ha_flag: Option<bool>,
    join: bool,
) -> Step {
    let mut all = vec![script.to_owned()];
    all.extend(args);
    Step {
        kind: StepKind::K8sInstall,
        host: host.into(),
        args: all,

        uploads: vec![Upload {
            path: script.into(),
            bytes: body,
            mode: 0o755,
        }],
        late: vec![Late::InstallEnv {
            path: format!("{script}.env"),
            ha_flag,
            join,
        }],
        sudo: true,
        timeout: Duration::from_secs(2700),
    }
}

/// On a control-plane node: join material made for the operation `op_occ_id` and kept in
/// `file` (0600), printed by the check for the flavour to keep
/// ([`crate::artifact::Artifact::JoinMaterial`]); made again for another operation, or when
/// older than 50 minutes (a certificate key lives 2 hours).
pub fn k8s_join_material(host: &str, file: &str, op_occ_id: &str) -> Step {
    Step {
        kind: StepKind::K8sJoinMaterial,
        host: host.into(),
        args: vec![file.into(), op_occ_id.into()],
        uploads: Vec::new(),
        late: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(120),
    }
}

/// On a master: the cluster's admin kubeconfig (`/etc/kubernetes/admin.conf`) printed by the
/// check for the flavour to keep ([`crate::artifact::Artifact::AdminKubeconfig`], its `server:`
/// set to `endpoint`, e.g. `https://10.0.0.5:6443`). Reading changes nothing.
pub fn k8s_kubeconfig(host: &str, endpoint: &str) -> Step {
    Step {
        kind: StepKind::K8sKubeconfig,
        host: host.into(),
        args: vec![endpoint.into()],
        uploads: Vec::new(),
        late: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(60),
    }
}

/// Namespace, ServiceAccount and token Secret of [`k8s_vim_token`]: the account Tacker's sample
/// MgmtDriver creates (`create_admin_token.yaml`: `kube-system/admin`, bound to
/// `cluster-admin`), with a token Secret of its own name.
pub const VIM_ACCOUNT: (&str, &str, &str) = ("kube-system", "admin", "admin-vim-token");

/// On a control-plane node: the admin ServiceAccount of [`VIM_ACCOUNT`] with its long-lived
/// token Secret (made once), the token printed by the check for the flavour to keep
/// ([`crate::artifact::Artifact::KubernetesVim`]).
pub fn k8s_vim_token(host: &str) -> Step {
    let (ns, sa, secret) = VIM_ACCOUNT;
    Step {
        kind: StepKind::K8sVimToken,
        host: host.into(),
        args: vec![ns.into(), sa.into(), secret.into()],
        uploads: Vec::new(),
        late: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(120),
    }
}

/// A Kubernetes node's `/etc/hosts` block owned by `owner` is exactly `block`: the names of the
/// cluster's nodes, written before the install script runs on any of them, as Tacker's sample
/// MgmtDriver does (`_get_hosts`; rewritten whole here instead of appended to).
pub fn k8s_hosts(host: &str, owner: &str, block: &str) -> Step {
    Step {
        kind: StepKind::K8sHosts,
        host: host.into(),
        args: vec!["/etc/hosts".into(), owner.into(), block.into()],
        uploads: Vec::new(),
        late: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(60),
    }
}

/// On a master: no Kubernetes node has InternalIP `address`; each that has is drained
/// (`kubectl drain --ignore-daemonsets --delete-emptydir-data --timeout`) and deleted. Source:
/// Tacker `samples/mgmt_driver/kubernetes/kubernetes_mgmt.py` `scale_start`/`heal_start`, with a
/// bounded drain and the node found by address instead of by parsing `kubectl get nodes`.
pub fn k8s_remove_node(host: &str, address: &str, drain: Duration, policy: DrainPolicy) -> Step {
    Step {
        kind: StepKind::K8sRemoveNode,
        host: host.into(),
        args: vec![
            address.into(),
            drain.as_secs().to_string(),
            match policy {
                DrainPolicy::Strict => "strict",
                DrainPolicy::Lenient => "lenient",
            }
            .into(),
        ],
        late: Vec::new(),
        uploads: Vec::new(),
        sudo: false,
        timeout: drain + Duration::from_secs(60),
    }
}

/// On a live control-plane node `host`: the stacked etcd has no member at `address` (a master
/// leaving the cluster, or whose server is rebuilt), removed through this node's etcd pod.
pub fn k8s_etcd_remove_member(host: &str, address: &str) -> Step {
    Step {
        kind: StepKind::K8sEtcdRemoveMember,
        host: host.into(),
        args: vec![address.into()],
        late: Vec::new(),
        uploads: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(120),
    }
}

/// The file, backend and listening port of the HAProxy Tacker's install script puts in front of
/// the API servers of an HA cluster (`install_k8s_cluster.sh` `modify_haproxy_conf`).
pub const API_HAPROXY: (&str, &str) = ("/etc/haproxy/haproxy.cfg", "kubernetes-apiserver");

/// On a master `host`: the `server` lines of HAProxy's `kubernetes-apiserver` backend are one
/// per `(name, address)` of `masters` (`server  <name>  <address>:6443 check`, the line Tacker's
/// install script writes), HAProxy reloaded when they change; nothing to do on a master without
/// that file or backend (a single master). Needed after a master leaves or is rebuilt or added
/// at a new address: the script wrote each master's list once, when that master was installed.
pub fn k8s_haproxy_backends(host: &str, masters: &[(String, std::net::IpAddr)]) -> Step {
    let (file, backend) = API_HAPROXY;
    let servers: Vec<String> = masters
        .iter()
        .map(|(name, ip)| {
            let addr = match ip {
                std::net::IpAddr::V4(v4) => v4.to_string(),
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            };
            format!("    server  {name}  {addr}:6443 check")
        })
        .collect();
    Step {
        kind: StepKind::K8sHaproxyBackends,
        host: host.into(),
        args: vec![
            file.into(),
            backend.into(),
            servers.join("\n"),
            "/var/lib/vnfkeeper/haproxy-backends.state".into(),
        ],
        uploads: Vec::new(),
        late: Vec::new(),
        sudo: true,
        timeout: Duration::from_secs(60),
    }
}

/// The Docker private registry as the registry VNF runs it (`private_registry_installation_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// Container name (`private_registry`, as the reference names it).
    pub container: String,
    /// Image reference, e.g. `registry:latest`.
    pub image: String,
    /// The package's image tar (`docker save` format) and where it is uploaded; `None`: pulled.
    pub image_tar: Option<(String, Vec<u8>)>,
    /// Host TCP port published to the registry's port 5000 (`port_no`).
    pub port: u16,
    /// Host directory bound to the registry's `/var/lib/registry` (on the data volume).
    pub data_dir: String,
    /// Longest wait for `GET /v2/` to answer after the container started.
    pub ready_wait: Duration,
}

/// Registry VM: the container runtime installed, the registry image present (loaded from the
/// uploaded tar, else pulled), the container running with the wanted port and data directory,
/// and `GET /v2/` answering — four steps, in this order. Source of the sequence: Tacker
/// `samples/mgmt_driver/kubernetes/private_registry_mgmt.py` (`instantiate_end`), with the name
/// conflict, the unbounded waits and the local-disk data removed.
pub fn registry(host: &str, r: &Registry) -> Vec<Step> {
    let step = |kind: StepKind, args: Vec<String>, uploads: Vec<Upload>, secs: u64| Step {
        kind,
        host: host.into(),
        args,
        uploads,
        sudo: true,
        timeout: Duration::from_secs(secs),
        late: Vec::new(),
    };
    let (tar_path, uploads) = match &r.image_tar {
        Some((path, bytes)) => (
            path.clone(),
            vec![Upload {
                path: path.clone(),
                bytes: bytes.clone(),
                mode: 0o600,
            }],
        ),
        None => (String::new(), Vec::new()),
    };
    vec![
        step(StepKind::RegistryRuntime, Vec::new(), Vec::new(), 2700),
        step(
            StepKind::RegistryImage,
            vec![r.image.clone(), tar_path],
            uploads,
            900,
        ),
        step(
            StepKind::RegistryRun,
            vec![
                r.container.clone(),
                r.image.clone(),
                r.port.to_string(),
                r.data_dir.clone(),
            ],
            Vec::new(),
            300,
        ),
        step(
            StepKind::RegistryReady,
            vec![r.port.to_string(), r.ready_wait.as_secs().to_string()],
            Vec::new(),
            r.ready_wait.as_secs() + 60,
        ),
    ]
}

#[cfg(test)]
mod tests;
