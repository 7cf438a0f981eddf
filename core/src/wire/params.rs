//! Typed `additionalParams` of the four specs (Tacker MgmtDriver samples). Field names are
//! exactly as the specs spell them (snake_case, and the hyphenated `lcm-operation-user-data`).
//! Unknown keys at any level are kept in `extra`, never rejected. Cardinalities are given as in
//! the specs' parameter tables: `1`, `0..1`, `1..N`, `0..N`.
//!
//! Sources: the base guide "How to use Mgmt Driver for deploying Kubernetes Cluster" (script,
//! master/worker, proxy) and the tacker-specs files `specs/xena/pv-k8s-cluster.rst` (storage
//! server, PVs), `specs/xena/k8s-mgmtdriver-kubespray.rst` (ansible, external LB) and
//! `specs/xena/cir-k8s-cluster.rst` (private registries).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::secret::Secret;

/// `additionalParams` of an InstantiateVnfRequest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstantiateAdditionalParams {
    /// `k8s_cluster_installation_param` (1 for a Kubernetes-cluster VNF): cluster installation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_cluster_installation_param: Option<K8sClusterInstallationParam>,
    /// `private_registry_installation_param` (1 for a private-registry VNF, cir spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_registry_installation_param: Option<PrivateRegistryInstallationParam>,
    /// `lcm-operation-user-data` (0..1, with the class): package path of the LCM operation
    /// UserData script, e.g. `./UserData/k8s_cluster_user_data.py` (normalised by
    /// [`super::LcmEnvelope::package_paths`]).
    #[serde(
        rename = "lcm-operation-user-data",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub lcm_operation_user_data: Option<String>,
    /// `lcm-operation-user-data-class` (0..1, with the script): Python class name in that
    /// script, e.g. `KubernetesClusterUserData`.
    #[serde(
        rename = "lcm-operation-user-data-class",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub lcm_operation_user_data_class: Option<String>,
    /// `maintenance_pause` (0..1, vnfkeeper's own key): the VNF starts under a maintenance
    /// pause (see `model::pause`), as `vnfkeeper pause` would set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_pause: Option<MaintenancePauseParam>,
    /// Any other key (e.g. `nfv` overrides of the individual-VNFC spec), kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `additionalParams.maintenance_pause` of an InstantiateVnfRequest:
/// `{"reason": "...", "until": "<RFC 3339>"}`, both optional (`{}` pauses until
/// `vnfkeeper resume`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenancePauseParam {
    /// `reason` (0..1): one line of free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `until` (0..1): when the pause ends by itself, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// `k8s_cluster_installation_param` (1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct K8sClusterInstallationParam {
    /// `script_path` (1): package path of the cluster install script, e.g.
    /// `Scripts/install_k8s_cluster.sh`.
    pub script_path: String,
    /// `vim_name` (0..1): name under which the cluster is registered as a VIM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_name: Option<String>,
    /// `master_node` (1).
    pub master_node: MasterNode,
    /// `worker_node` (1).
    pub worker_node: WorkerNode,
    /// `proxy` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Proxy>,
    /// `ansible` (0..1, kubespray spec): the Ansible server that runs kubespray.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ansible: Option<Ansible>,
    /// `external_lb_param` (0..1, kubespray spec): the external load balancer VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_lb_param: Option<ExternalLbParam>,
    /// `storage_server` (0..1, pv spec): the NFS storage server VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_server: Option<StorageServer>,
    /// `pv_registration_params` (0..N, pv spec): PersistentVolumes to register.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pv_registration_params: Vec<PvRegistrationParam>,
    /// `private_registry_connection_info` (0..N, cir spec): registries the nodes use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_registry_connection_info: Vec<PrivateRegistryConnectionInfo>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `master_node` (1): the master VDU group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MasterNode {
    /// `aspect_id` (0..1): scaling aspect of the master group (needed with UserData).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aspect_id: Option<String>,
    /// `ssh_cp_name` (1): CP whose address is used for SSH.
    pub ssh_cp_name: String,
    /// `nic_cp_name` (1): CP whose address the cluster uses.
    pub nic_cp_name: String,
    /// `username` (1): POSIX login name for SSH.
    pub username: String,
    /// `password` (1): SSH password; secret.
    pub password: Secret<String>,
    /// `pod_cidr` (0..1): pod network CIDR (kubeadm default `10.0.0.0/8` in the guide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    /// `cluster_cidr` (0..1): service network CIDR (default `10.96.0.0/12`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_cidr: Option<String>,
    /// `cluster_cp_name` (1): CP (or VIP port) of the cluster API endpoint.
    pub cluster_cp_name: String,
    /// `cluster_fip_name` (0..1): floating IP resource of the cluster IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_fip_name: Option<String>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `worker_node` (1): the worker VDU group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerNode {
    /// `aspect_id` (0..1): scaling aspect of the worker group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aspect_id: Option<String>,
    /// `ssh_cp_name` (1).
    pub ssh_cp_name: String,
    /// `nic_cp_name` (1).
    pub nic_cp_name: String,
    /// `username` (1): POSIX login name.
    pub username: String,
    /// `password` (1): secret.
    pub password: Secret<String>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `proxy` (0..1): proxy settings written to the VMs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proxy {
    /// `http_proxy` (0..1): `http://[user:password@]host:port`; secret (may carry credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<Secret<String>>,
    /// `https_proxy` (0..1): like `http_proxy`; secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<Secret<String>>,
    /// `no_proxy` (0..1): comma-separated CIDRs, IP addresses and domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,
    /// `k8s_node_cidr` (0..1): CIDR of the nodes, added to `no_proxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_node_cidr: Option<String>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `storage_server` (0..1, pv spec): the storage-server VM that exports its Cinder volume(s) by NFS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageServer {
    /// `ssh_cp_name` (1): CP used for SSH/SFTP.
    pub ssh_cp_name: String,
    /// `nic_cp_name` (0..1, Tacker's driver): CP that identifies the storage server among VNFCs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_cp_name: Option<String>,
    /// `username` (1): POSIX login name.
    pub username: String,
    /// `password` (1): secret.
    pub password: Secret<String>,
    /// `cinder_volume_setup_params` (1..N): volumes to format (ext4) and mount.
    pub cinder_volume_setup_params: Vec<CinderVolumeSetupParam>,
    /// `nfs_server_setup_params` (1..N): NFS exports.
    pub nfs_server_setup_params: Vec<NfsServerSetupParam>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One `cinder_volume_setup_params` item (pv spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CinderVolumeSetupParam {
    /// `volume_resource_id` (1): BaseHOT resource name of the `OS::Cinder::Volume`.
    pub volume_resource_id: String,
    /// `mount_to` (1): absolute, normalised mount directory on the storage server.
    pub mount_to: String,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One `nfs_server_setup_params` item (pv spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NfsServerSetupParam {
    /// `export_dir` (1): absolute, normalised directory to export.
    pub export_dir: String,
    /// `export_to` (1): client network CIDR (or one IP address).
    pub export_to: String,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One `pv_registration_params` item (pv spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PvRegistrationParam {
    /// `pv_manifest_file_path` (1): package path of a PersistentVolume manifest.
    pub pv_manifest_file_path: String,
    /// `nfs_server_cp` (1): CP whose IP replaces the NFS server address in the manifest.
    pub nfs_server_cp: String,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `ansible` (0..1, kubespray spec): the pre-built Ansible server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ansible {
    /// `ip_address` (1): IP address of the Ansible server.
    pub ip_address: String,
    /// `username` (1): POSIX login name.
    pub username: String,
    /// `password` (1): secret.
    pub password: Secret<String>,
    /// `kubespray_root_path` (1): absolute kubespray directory on the Ansible server.
    pub kubespray_root_path: String,
    /// `transferring_inventory_path` (1): absolute directory on the Ansible server for the
    /// generated inventory.
    pub transferring_inventory_path: String,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `external_lb_param` (0..1, kubespray spec): the external load balancer VM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalLbParam {
    /// `ssh_cp_name` (1).
    pub ssh_cp_name: String,
    /// `ssh_username` (1): POSIX login name.
    pub ssh_username: String,
    /// `ssh_password` (1): secret.
    pub ssh_password: Secret<String>,
    /// `script_path` (1): package path of the LB install script.
    pub script_path: String,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `connection_type` of a private registry (cir spec): `0` HTTP, `1` HTTPS. The spec's example
/// writes it as a string (`"0"`); a JSON integer is accepted too. Serialises as the string form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionType {
    /// `0`: plain HTTP (an insecure registry for Docker).
    Http,
    /// `1`: HTTPS.
    Https,
}

impl ConnectionType {
    /// Parses `"0"`, `"1"`, `0` or `1`.
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) if s == "0" => Some(Self::Http),
            Value::String(s) if s == "1" => Some(Self::Https),
            Value::Number(n) if n.as_u64() == Some(0) => Some(Self::Http),
            Value::Number(n) if n.as_u64() == Some(1) => Some(Self::Https),
            _ => None,
        }
    }
}

impl Serialize for ConnectionType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Self::Http => "0",
            Self::Https => "1",
        })
    }
}

impl<'de> Deserialize<'de> for ConnectionType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Self::from_value(&v).ok_or_else(|| {
            serde::de::Error::custom("connection_type must be 0 (HTTP) or 1 (HTTPS)")
        })
    }
}

/// One `private_registry_connection_info` item (cir spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivateRegistryConnectionInfo {
    /// `connection_type` (1): 0 HTTP, 1 HTTPS.
    pub connection_type: ConnectionType,
    /// `server` (1): `host[:port]`, e.g. `192.168.0.10:5000`.
    pub server: String,
    /// `username` (0..1, with `password`): registry login; secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<Secret<String>>,
    /// `password` (0..1, with `username`): secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret<String>>,
    /// `certificate_path` (0..1): package path of the CA certificate for HTTPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_path: Option<String>,
    /// `hosts_string` (0..1): one `/etc/hosts` line, `"<IP address> <FQDN>"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_string: Option<String>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Default TCP port of the private registry (cir spec).
pub const DEFAULT_REGISTRY_PORT: u16 = 5000;

/// `private_registry_installation_param` (1, cir spec): the Docker private registry VNF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivateRegistryInstallationParam {
    /// `ssh_cp_name` (1).
    pub ssh_cp_name: String,
    /// `ssh_username` (1): POSIX login name.
    pub ssh_username: String,
    /// `ssh_password` (1): secret.
    pub ssh_password: Secret<String>,
    /// `image_path` (0..1): package path of a `docker save` tar of the registry image; pulled
    /// from the public registry if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_path: Option<String>,
    /// `port_no` (0..1): TCP port of the registry service, 1–65535; default 5000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_no: Option<u16>,
    /// `proxy` (0..1, Tacker's driver): proxy for Docker on the registry VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Proxy>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PrivateRegistryInstallationParam {
    /// `port_no`, or the default 5000.
    pub fn port(&self) -> u16 {
        self.port_no.unwrap_or(DEFAULT_REGISTRY_PORT)
    }
}

/// `additionalParams` of a HealVnfRequest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealAdditionalParams {
    /// `all` (0..1, Tacker v2): with no `vnfcInstanceId`, also re-create storage (whole stack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
    /// `configuration_only` (0..1, vnfkeeper): replace no server, only run the configuration
    /// steps on the VNFCs again (repair of drift such as a lost export; reconcile uses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_only: Option<bool>,
    /// Other keys, kept as given.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
