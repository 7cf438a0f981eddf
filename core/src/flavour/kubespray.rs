//! The kubespray flavour: a Kubernetes cluster installed by kubespray's playbooks, run by
//! `ansible-playbook` on the request's Ansible server (`k8s_cluster_installation_param.ansible`),
//! behind an external HAProxy load balancer VNFC (`external_lb_param`). Source: tacker-specs
//! `specs/xena/k8s-mgmtdriver-kubespray.rst` and Tacker's sample `kubespray_mgmt.py`, with its
//! defects removed: the inventory and the HAProxy configuration are generated whole from the VNFC
//! rows (no `sed`/`tee -a` edits, so `worker1` never matches `worker10`), host keys are checked,
//! no password is left in a file or an argv, success is read from the exit status and the play
//! recap of Ansible's JSON-lines events ([`crate::ansible`]), not from its text output.
//!
//! Roles: the VDUs owning `master_node`, `worker_node` and `external_lb_param`'s `ssh_cp_name`;
//! the Ansible server is [`ANSIBLE_HOST`], reached at `ansible.ip_address`.
//! Hooks (stages as data; every step check-then-apply):
//! - `instantiate_end`: every node and the LB reached (host keys pinned), the first master's NIC
//!   MTU read (`node.nic_mtu`), then (`configure`, decided from that observation) Calico's MTUs
//!   in group_vars, the inventory written, `cluster.yml`, the LB configured (below);
//! - `scale_start` (SCALE_IN): each victim drained on a master that stays (strict, bounded), then
//!   `remove-node.yml -e node=<name> -e skip_confirmation=yes`; the inventory and HAProxy without
//!   the victims;
//! - `scale_end` (SCALE_OUT): the new nodes reached, the inventory, `facts.yml`, `scale.yml
//!   --limit <new nodes>`, HAProxy;
//! - `heal_start`: healed nodes drained (leniently: they may be dead) and removed;
//!   `heal_end`: healed VNFCs reached, the inventory, `facts.yml` then `scale.yml --limit` for
//!   workers, HAProxy; when a master was healed (e.g. a whole-VNF heal), the MTU is observed
//!   again and everything after it is as at INSTANTIATE (`cluster.yml`); with no node targeted
//!   (the LB, or a configuration-only heal) the inventory and HAProxy are converged;
//! - `terminate_start`: what vnfkeeper and kubespray wrote into the inventory directory on the
//!   Ansible server removed, then the directory when empty (`ansible.forget`); the same before a
//!   ROLLBACK of a failed INSTANTIATE deletes the stack (`instantiate_rollback`).
//!
//! The LB is configured in two steps wherever the node set may have changed: the package's
//! install script (`external_lb_param.script_path`, the seed's `ExternalLB_installation.sh`)
//! with its contract `-m <master addresses> -w <worker addresses>`, run again only when the script
//! or the lists changed (`lb.script`); then vnfkeeper's HAProxy configuration, generated whole
//! from the VNFC rows, checked with `haproxy -c` and reloaded (`lb.haproxy`).
//!
//! Reconcile probes the LB's script record and HAProxy configuration and, on the Ansible server, the inventory
//! (`ansible.inventory` in check mode); drift of either is repaired by the LB's
//! configuration-only heal, which writes both whole again.
//!
//! Private registries (`private_registry_connection_info`, cir spec) are trusted by the masters
//! and workers with the shared [`trust`] stages: at INSTANTIATE and a HEAL that rebuilt a master,
//! before the MTU is read and without trust's own placeholder, so that the one
//! [`Hook::Configure`] expansion decides both `trust.docker` (from `trust.observe`) and the
//! cluster (from `node.nic_mtu`); at SCALE_OUT and a HEAL of workers, after `scale.yml`, with
//! [`trust::node_stages`] (its placeholder then expands to `trust.docker` only). Masters and
//! workers are probed with [`trust::probes`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use super::{
    Access, ApplyFailed, ApplyOutput, FlavourError, HookContext, Inputs, Kept, KeptArtifacts,
    MgmtDriver, Probe, Role, kubeconfig_for, trust,
};
use crate::artifact::Artifact;
use crate::digest::sha256_hex;
use crate::model::{StageKey, VnfcId, VnfcRow};
use crate::plan::stages::{Hook, Stage, StageList};
use crate::recipes::{DrainPolicy, Late, Step, StepKind, Upload};
use crate::wire::Secret;
use crate::wire::params::K8sClusterInstallationParam;

/// The host id of the Ansible server in stages and the step journal (it is no VNFC).
pub const ANSIBLE_HOST: &str = "ansible-server";

/// The LB's frontend port for the Kubernetes API (the seed's `8383`).
pub const LB_API_PORT: u16 = 8383;

/// The port of each master's API server.
pub const API_PORT: u16 = 6443;

/// Kubernetes' default NodePort range (`--service-node-port-range`), forwarded to every node.
pub const NODE_PORTS: (u16, u16) = (30000, 32767);

/// Where the generated HAProxy configuration lives on the LB.
pub const HAPROXY_CFG: &str = "/etc/haproxy/haproxy.cfg";

/// Longest drain of a node removed by SCALE_IN.
const SCALE_IN_DRAIN: Duration = Duration::from_secs(300);

/// Longest drain of a node being replaced before it is removed anyway.
const HEAL_DRAIN: Duration = Duration::from_secs(60);

/// Longest run of one playbook.
const PLAYBOOK_TIMEOUT: Duration = Duration::from_secs(3600);

/// Where the package's LB install script and the record of its last run live on the LB.
pub const LB_SCRIPT_DIR: &str = "/var/lib/vnfkeeper/external-lb";

/// The package files this flavour reads: the LB install script (`external_lb_param.script_path`;
/// the inventory and the HAProxy configuration are generated) and the CA certificates of the
/// private registries (`private_registry_connection_info[].certificate_path`).
pub(super) fn package_files(k: &K8sClusterInstallationParam) -> Vec<String> {
    k.external_lb_param
        .iter()
        .map(|lb| lb.script_path.clone())
        .chain(
            k.private_registry_connection_info
                .iter()
                .filter_map(|r| r.certificate_path.clone()),
        )
        .collect()
}

/// A cluster node (or the LB) as the inventory and the HAProxy configuration name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Inventory host name and Kubernetes node name: `master<i+1>`/`worker<i+1>` from the VNFC
    /// index, else `master-<8 chars of the vnfcInstanceId>`; stable across HEAL (the VNFC keeps
    /// its id and index).
    pub name: String,
    /// vnfcInstanceId.
    pub vnfc_id: VnfcId,
    /// Master, worker or load balancer.
    pub role: Role,
    /// Fixed address of the role's `ssh_cp_name` CP (the inventory's `ip` and `access_ip`,
    /// HAProxy's backends).
    pub address: IpAddr,
    /// The address Ansible and vnfkeeper reach it at (`ansible_host`): its floating address
    /// when `ssh_cp_name` names a floating IP it has, else `address` (Tacker's
    /// `_get_ssh_ip_and_nic_ip`).
    pub ssh: IpAddr,
    /// Nova server id (a healed VNFC has a new one).
    pub server_id: Option<String>,
}

/// A short tag of the servers of `nodes` (a digest of their Nova server ids): a playbook's
/// record names it, so that the same playbook runs again for a rebuilt server.
fn servers_tag<'a>(nodes: impl IntoIterator<Item = &'a ClusterNode>) -> String {
    let mut ids: Vec<&str> = nodes
        .into_iter()
        .map(|n| n.server_id.as_deref().unwrap_or("-"))
        .collect();
    ids.sort_unstable();
    sha256_hex(ids.join(",").as_bytes())[..12].to_owned()
}

/// The stable name of `row` in `role` (see [`ClusterNode::name`]).
pub fn node_name(row: &VnfcRow, role: Role) -> String {
    let prefix = match role {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::LoadBalancer => "lb",
        _ => "node",
    };
    match row.vnfc_index {
        Some(i) if i >= 0 => format!("{prefix}{}", i + 1),
        _ => {
            let tag: String = row
                .id
                .as_str()
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .take(8)
                .collect::<String>()
                .to_ascii_lowercase();
            format!("{prefix}-{tag}")
        }
    }
}

/// The inventory files vnfkeeper writes, as whole documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// `hosts.yaml`: `all.hosts.<name>` (`ansible_host`, `ip`, `access_ip`, `ansible_user`,
    /// passwords as references into the credentials file) and the groups `kube_control_plane`,
    /// `etcd` (the masters), `kube_node` (every node), `k8s_cluster`, `calico_rr` (empty).
    pub hosts_yaml: String,
    /// `group_vars/all/vnfkeeper.yml`: `kube_pods_subnet`, `kube_service_addresses`, `no_proxy`,
    /// the external load balancer (`loadbalancer_apiserver`). No secret.
    pub group_vars: String,
}

#[derive(Serialize)]
struct HostVars {
    ansible_host: String,
    ip: String,
    access_ip: String,
    ansible_user: String,
    ansible_password: String,
    ansible_become_password: String,
}

#[derive(Serialize)]
struct Group {
    hosts: BTreeMap<String, Empty>,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct Children {
    children: BTreeMap<&'static str, Group>,
}

#[derive(Serialize)]
struct K8sCluster {
    children: BTreeMap<&'static str, Empty>,
}

fn group(nodes: &[&ClusterNode]) -> Group {
    Group {
        hosts: nodes.iter().map(|n| (n.name.clone(), Empty {})).collect(),
    }
}

/// The inventory for `nodes` (masters and workers; others are ignored). `users` gives the SSH
/// login of each role. Passwords are Jinja references to `vnfkeeper_credentials.<role>.password`,
/// defined only in the credentials file ([`credentials_yaml`]).
pub fn inventory(
    nodes: &[ClusterNode],
    users: &BTreeMap<Role, String>,
    k: &K8sClusterInstallationParam,
    lb: Option<IpAddr>,
) -> Inventory {
    let mut hosts = BTreeMap::new();
    let masters: Vec<&ClusterNode> = nodes.iter().filter(|n| n.role == Role::Master).collect();
    let all_nodes: Vec<&ClusterNode> = nodes.iter().filter(|n| n.role.is_node()).collect();
    for n in &all_nodes {
        let role = role_key(n.role);
        let pw = format!("{{{{ vnfkeeper_credentials.{role}.password }}}}");
        hosts.insert(
            n.name.clone(),
            HostVars {
                ansible_host: n.ssh.to_string(),
                ip: n.address.to_string(),
                access_ip: n.address.to_string(),
                ansible_user: users.get(&n.role).cloned().unwrap_or_default(),
                ansible_password: pw.clone(),
                ansible_become_password: pw,
            },
        );
    }
    let mut children = BTreeMap::new();
    children.insert("kube_control_plane", group(&masters));
    children.insert("etcd", group(&masters));
    children.insert("kube_node", group(&all_nodes));
    children.insert("calico_rr", group(&[]));
    let mut all = serde_yaml_ng::Mapping::new();
    all.insert("hosts".into(), to_yaml(&hosts));
    let mut ch = to_yaml(&Children { children });
    if let serde_yaml_ng::Value::Mapping(m) = &mut ch {
        let cluster = K8sCluster {
            children: [("kube_control_plane", Empty {}), ("kube_node", Empty {})]
                .into_iter()
                .chain([("calico_rr", Empty {})])
                .collect(),
        };
        if let Some(serde_yaml_ng::Value::Mapping(c)) = m.get_mut("children") {
            c.insert("k8s_cluster".into(), to_yaml(&cluster));
        }
    }
    if let serde_yaml_ng::Value::Mapping(m) = ch {
        for (key, v) in m {
            all.insert(key, v);
        }
    }
    let mut doc = serde_yaml_ng::Mapping::new();
    doc.insert("all".into(), serde_yaml_ng::Value::Mapping(all));
    let hosts_yaml = header(serde_yaml_ng::to_string(&doc).unwrap_or_default());

    let mut vars = serde_yaml_ng::Mapping::new();
    if let Some(p) = &k.master_node.pod_cidr {
        vars.insert("kube_pods_subnet".into(), p.clone().into());
    }
    if let Some(c) = &k.master_node.cluster_cidr {
        vars.insert("kube_service_addresses".into(), c.clone().into());
    }
    if let Some(np) = k.proxy.as_ref().and_then(|p| p.no_proxy.clone()) {
        vars.insert("no_proxy".into(), np.into());
    }
    if let Some(lb) = lb {
        let mut l = serde_yaml_ng::Mapping::new();
        l.insert("address".into(), lb.to_string().into());
        l.insert("port".into(), u64::from(LB_API_PORT).into());
        vars.insert("loadbalancer_apiserver".into(), l.into());
        vars.insert(
            "apiserver_loadbalancer_domain_name".into(),
            lb.to_string().into(),
        );
    }
    let group_vars = header(serde_yaml_ng::to_string(&vars).unwrap_or_default());
    Inventory {
        hosts_yaml,
        group_vars,
    }
}

fn to_yaml<T: Serialize>(v: &T) -> serde_yaml_ng::Value {
    serde_yaml_ng::to_value(v).unwrap_or(serde_yaml_ng::Value::Null)
}

fn header(body: String) -> String {
    format!("# Generated by vnfkeeper from its VNFC rows; replaced whole, never edited.\n{body}")
}

fn role_key(role: Role) -> &'static str {
    match role {
        Role::Master => "master",
        _ => "worker",
    }
}

/// The credentials file (YAML extra variables, uploaded 0600 just before a playbook and removed
/// when it ends): `vnfkeeper_credentials.{master,worker}.password` and, when the request sets
/// them, `http_proxy`/`https_proxy` (which may carry credentials).
pub fn credentials_yaml(k: &K8sClusterInstallationParam) -> Secret<String> {
    let mut creds = serde_yaml_ng::Mapping::new();
    for (role, pw) in [
        ("master", &k.master_node.password),
        ("worker", &k.worker_node.password),
    ] {
        let mut m = serde_yaml_ng::Mapping::new();
        m.insert("password".into(), pw.expose().clone().into());
        creds.insert(role.into(), m.into());
    }
    let mut doc = serde_yaml_ng::Mapping::new();
    doc.insert("vnfkeeper_credentials".into(), creds.into());
    if let Some(p) = &k.proxy {
        if let Some(h) = &p.http_proxy {
            doc.insert("http_proxy".into(), h.expose().clone().into());
        }
        if let Some(h) = &p.https_proxy {
            doc.insert("https_proxy".into(), h.expose().clone().into());
        }
    }
    Secret::new(serde_yaml_ng::to_string(&doc).unwrap_or_default())
}

/// The `known_hosts` file of `nodes` from their rows' pinned keys: `<address> <key>` per node.
/// Errors: a node without a pinned key (it must be reached first: `node.reach`).
pub fn known_hosts(nodes: &[ClusterNode], rows: &[VnfcRow]) -> Result<String, FlavourError> {
    let mut out = String::new();
    for n in nodes.iter().filter(|n| n.role.is_node()) {
        let key = rows
            .iter()
            .find(|r| r.id == n.vnfc_id)
            .and_then(|r| r.host_key.as_deref())
            .ok_or_else(|| {
                FlavourError::new(
                    "ansible.playbook",
                    format!(
                        "node {} (VNFC {}) has no pinned host key yet",
                        n.name, n.vnfc_id
                    ),
                )
            })?;
        // Algorithm and key blob only; a comment would be harmless but is not ours.
        let key: Vec<&str> = key.split_whitespace().take(2).collect();
        out.push_str(&format!("{} {}\n", n.ssh, key.join(" ")));
    }
    Ok(out)
}

/// The HAProxy configuration of the external LB, whole: frontend `*:8383` → every master's
/// `:6443`; frontend on the NodePort range → every node on the port the client asked for. TCP
/// mode, health-checked backends. Servers are named by node name, sorted, so the same nodes
/// give the same bytes.
pub fn haproxy_cfg(vnf_instance_id: &str, nodes: &[ClusterNode]) -> String {
    let mut masters: Vec<&ClusterNode> = nodes.iter().filter(|n| n.role == Role::Master).collect();
    let mut all: Vec<&ClusterNode> = nodes.iter().filter(|n| n.role.is_node()).collect();
    masters.sort_by(|a, b| a.name.cmp(&b.name));
    all.sort_by(|a, b| a.name.cmp(&b.name));
    let mut s = format!(
        "# Generated by vnfkeeper for VNF instance {vnf_instance_id} from its VNFC rows;\n\
         # replaced whole on every change, validated with `haproxy -c` first.\n\
         global\n    maxconn 4096\n\n\
         defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n\n\
         frontend kube_apiserver\n    bind *:{LB_API_PORT}\n    default_backend kube_masters\n\n\
         backend kube_masters\n    balance roundrobin\n"
    );
    for m in &masters {
        s.push_str(&format!(
            "    server {} {}:{API_PORT} check\n",
            m.name,
            host_port(m.address)
        ));
    }
    s.push_str(&format!(
        "\nfrontend kube_nodeports\n    bind *:{}-{}\n    default_backend kube_nodes\n\n\
         backend kube_nodes\n    balance roundrobin\n",
        NODE_PORTS.0, NODE_PORTS.1
    ));
    for n in &all {
        s.push_str(&format!("    server {} {}\n", n.name, host_port(n.address)));
    }
    s
}

fn host_port(a: IpAddr) -> String {
    match a {
        IpAddr::V4(v) => v.to_string(),
        IpAddr::V6(v) => format!("[{v}]"),
    }
}

/// The server names of the backend `backend` in an HAProxy configuration (for tests, the demo
/// and reconcile reports).
pub fn haproxy_servers(cfg: &str, backend: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in cfg.lines() {
        let t = line.trim();
        if !line.starts_with(' ') && !line.starts_with('\t') {
            inside = t == format!("backend {backend}");
            continue;
        }
        if inside && let Some(rest) = t.strip_prefix("server ") {
            out.extend(rest.split_whitespace().next().map(str::to_owned));
        }
    }
    out
}

/// The cluster endpoint behind the LB at `lb`: `https://<lb>:8383`.
pub fn endpoint(lb: IpAddr) -> String {
    format!("https://{}:{LB_API_PORT}", host_port(lb))
}

/// Calico's MTUs (kubespray's `calico_mtu` and `calico_veth_mtu` group variables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalicoMtu {
    /// `calico_mtu`: the MTU of the nodes' NIC, in bytes.
    pub mtu: u32,
    /// `calico_veth_mtu`: the pods' veth MTU, in bytes: `mtu` − 20 (the IP-in-IP header), as
    /// Tacker's kubespray MgmtDriver sets it.
    pub veth_mtu: u32,
}

/// The group_vars file of Calico's MTUs, relative to the inventory directory (kubespray reads
/// `group_vars/k8s_cluster/*.yml` for every cluster host; Tacker edits `k8s-net-calico.yml`).
pub const CALICO_VARS: &str = "group_vars/k8s_cluster/vnfkeeper-calico.yml";

/// Calico's MTUs from the verdict line of `node.nic_mtu` on the first master (`already done: mtu
/// N on DEV`). Errors: no `mtu N` in the line, or N outside 576..=65535 (IPv4's minimum
/// datagram a host must accept, RFC 791, to the largest IP datagram).
pub fn calico_mtu(observed: &str) -> Result<CalicoMtu, FlavourError> {
    let bad = || {
        FlavourError::new(
            "node.nic_mtu",
            format!("the observation `{observed}` gives no usable MTU"),
        )
    };
    let mut words = observed.split_whitespace();
    let mtu: u32 = loop {
        match words.next() {
            Some("mtu") => break words.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?,
            Some(_) => {}
            None => return Err(bad()),
        }
    };
    if !(576..=65535).contains(&mtu) {
        return Err(bad());
    }
    Ok(CalicoMtu {
        mtu,
        veth_mtu: mtu - 20,
    })
}

/// The content of [`CALICO_VARS`] for `m`, whole.
pub fn calico_vars(m: CalicoMtu) -> String {
    let mut vars = serde_yaml_ng::Mapping::new();
    vars.insert("calico_mtu".into(), u64::from(m.mtu).into());
    vars.insert("calico_veth_mtu".into(), u64::from(m.veth_mtu).into());
    header(serde_yaml_ng::to_string(&vars).unwrap_or_default())
}

fn step(kind: StepKind, host: &str, args: Vec<String>, sudo: bool, timeout: Duration) -> Step {
    Step {
        kind,
        host: host.to_owned(),
        args,
        uploads: Vec::new(),
        late: Vec::new(),
        sudo,
        timeout,
    }
}

/// The kubespray cluster of one instance.
#[derive(Debug)]
pub struct Kubespray {
    inputs: Inputs,
    k8s: K8sClusterInstallationParam,
}

impl Kubespray {
    pub(super) fn new(inputs: Inputs, k8s: K8sClusterInstallationParam) -> Self {
        Self { inputs, k8s }
    }

    fn ansible(&self) -> Result<&crate::wire::params::Ansible, FlavourError> {
        self.k8s
            .ansible
            .as_ref()
            .ok_or_else(|| FlavourError::new("plan", "the request has no ansible parameters"))
    }

    /// The VNFD CP an `ssh_cp_name` of `what` (`master_node`, …) names. The seed spec calls it
    /// the "resource name of CP" and Tacker's `_get_ssh_ip_and_nic_ip` looks it up as a Heat
    /// resource of the stack: a CP's port (a VduCp of the VNFD, whose port resource has its name)
    /// or, as in Tacker's kubespray package (`masterNode_FloatingIP`, `externalLB_FloatingIP`),
    /// an `OS::Neutron::FloatingIP` of the BaseHOT or a nested template whose `port_id` (or
    /// `port`) is `get_resource` of such a CP. Such a node is reached at its floating address
    /// (recorded on its VNFC under the resource's name), as Tacker's driver does.
    /// Errors: a name that is neither.
    pub fn cp_of(&self, name: &str, what: &str) -> Result<String, FlavourError> {
        self.inputs
            .cp_behind(name)
            .map(str::to_owned)
            .ok_or_else(|| {
                FlavourError::new(
                    "plan",
                    format!(
                        "{what}.ssh_cp_name `{name}` is neither a CP of the VNFD nor a floating \
                         IP of one in the BaseHOT"
                    ),
                )
            })
    }

    fn inventory_dir(&self) -> Result<String, FlavourError> {
        Ok(self
            .ansible()?
            .transferring_inventory_path
            .trim_end_matches('/')
            .to_owned())
    }

    /// The cluster's nodes and LB among `rows` (store order), optionally without `except`.
    pub fn nodes(
        &self,
        rows: &[VnfcRow],
        except: &BTreeSet<&str>,
    ) -> Result<Vec<ClusterNode>, FlavourError> {
        let mut out = Vec::new();
        for row in rows {
            let role = self.role(&row.vdu_id)?;
            if !matches!(role, Role::Master | Role::Worker | Role::LoadBalancer)
                || except.contains(row.id.as_str())
            {
                continue;
            }
            let access = self.access(role)?;
            let cp = &access.cp;
            let address = crate::plan::vnfcs::cp_address(row, cp).ok_or_else(|| {
                FlavourError::new(
                    "plan",
                    format!("VNFC {} has no address on CP `{cp}`", row.id),
                )
            })?;
            out.push(ClusterNode {
                name: node_name(row, role),
                vnfc_id: row.id.clone(),
                role,
                address,
                ssh: access.address_of(row).unwrap_or(address),
                server_id: row.server_id.clone(),
            });
        }
        let mut seen = BTreeSet::new();
        for n in &out {
            if !seen.insert(n.name.as_str()) {
                return Err(FlavourError::new(
                    "plan",
                    format!("two VNFCs would both be node {}", n.name),
                ));
            }
        }
        Ok(out)
    }

    fn users(&self) -> BTreeMap<Role, String> {
        [
            (Role::Master, self.k8s.master_node.username.clone()),
            (Role::Worker, self.k8s.worker_node.username.clone()),
        ]
        .into_iter()
        .collect()
    }

    fn trust_inputs(&self) -> trust::TrustInputs<'_> {
        trust::TrustInputs {
            registries: &self.k8s.private_registry_connection_info,
            files: &self.inputs.files,
            owner: self.inputs.vnf_instance_id.as_str(),
        }
    }

    /// The masters and workers among `nodes`, as the trust stages name them.
    fn trust_nodes<'a>(nodes: &[&'a ClusterNode]) -> Vec<trust::TrustNode<'a>> {
        nodes
            .iter()
            .filter(|n| n.role.is_node())
            .map(|n| trust::TrustNode {
                vnfc_id: n.vnfc_id.as_str(),
                role: n.role,
            })
            .collect()
    }

    /// The node trust of the masters and workers among `nodes` with its own
    /// [`Hook::Configure`] placeholder ([`trust::node_stages`]): for operations that observe no
    /// MTU (SCALE_OUT, a HEAL of workers).
    fn trust_stages(
        &self,
        nodes: &[&ClusterNode],
        list: &mut StageList,
    ) -> Result<(), FlavourError> {
        trust::node_stages(&self.trust_inputs(), &Self::trust_nodes(nodes), list)
    }

    fn lb(nodes: &[ClusterNode]) -> Option<&ClusterNode> {
        nodes.iter().find(|n| n.role == Role::LoadBalancer)
    }

    /// `node.reach` of each of `nodes` (one wave).
    fn reach(nodes: &[&ClusterNode]) -> Vec<Stage> {
        nodes
            .iter()
            .map(|n| {
                Stage::remote(
                    0,
                    n.vnfc_id.as_str(),
                    n.role,
                    step(
                        StepKind::NodeReach,
                        n.vnfc_id.as_str(),
                        Vec::new(),
                        false,
                        Duration::from_secs(60),
                    ),
                )
            })
            .collect()
    }

    /// `ansible.inventory` on the Ansible server for `nodes`.
    pub fn inventory_step(&self, nodes: &[ClusterNode]) -> Result<Step, FlavourError> {
        let inv = self.inventory_dir()?;
        let doc = inventory(
            nodes,
            &self.users(),
            &self.k8s,
            Self::lb(nodes).map(|n| n.address),
        );
        let mut s = step(
            StepKind::AnsibleInventory,
            ANSIBLE_HOST,
            vec![
                inv.clone(),
                sha256_hex(doc.hosts_yaml.as_bytes()),
                sha256_hex(doc.group_vars.as_bytes()),
            ],
            false,
            Duration::from_secs(120),
        );
        s.uploads = vec![
            Upload {
                path: format!("{inv}/hosts.yaml"),
                bytes: doc.hosts_yaml.into_bytes(),
                mode: 0o644,
            },
            Upload {
                path: format!("{inv}/group_vars/all/vnfkeeper.yml"),
                bytes: doc.group_vars.into_bytes(),
                mode: 0o644,
            },
        ];
        Ok(s)
    }

    /// `ansible.group_vars` of [`CALICO_VARS`] on the Ansible server.
    fn calico_step(&self, m: CalicoMtu) -> Result<Step, FlavourError> {
        let path = format!("{}/{CALICO_VARS}", self.inventory_dir()?);
        let text = calico_vars(m);
        let mut s = step(
            StepKind::AnsibleGroupVars,
            ANSIBLE_HOST,
            vec![path.clone(), sha256_hex(text.as_bytes())],
            false,
            Duration::from_secs(120),
        );
        s.uploads = vec![Upload {
            path,
            bytes: text.into_bytes(),
            mode: 0o644,
        }];
        Ok(s)
    }

    /// `ansible.playbook` of `book` (recorded as `record`), limited to `limit` (empty: all),
    /// with `extra` variables; keyed `ansible.playbook@<subject>`.
    fn playbook(
        &self,
        w: u32,
        subject: &str,
        book: &str,
        record: &str,
        limit: &[String],
        extra: &[String],
    ) -> Result<Stage, FlavourError> {
        let a = self.ansible()?;
        let inv = self.inventory_dir()?;
        let mut args = vec![
            a.kubespray_root_path.trim_end_matches('/').to_owned(),
            inv.clone(),
            book.to_owned(),
            record.to_owned(),
            limit.join(","),
        ];
        args.extend(extra.iter().cloned());
        let mut s = step(
            StepKind::AnsiblePlaybook,
            ANSIBLE_HOST,
            args,
            false,
            PLAYBOOK_TIMEOUT,
        );
        s.late = vec![
            Late::KnownHosts {
                path: format!("{inv}/known_hosts"),
            },
            Late::Credentials {
                path: format!("{inv}/.vnfkeeper/credentials.yml"),
            },
        ];
        Ok(Stage::remote(w, subject, Role::AnsibleServer, s))
    }

    /// `lb.script` on the LB for `nodes`, if there is an LB: the package's install script run
    /// with the seed's contract `-m <master addresses> -w <worker addresses>` (the seed's
    /// `ExternalLB_installation.sh`; Tacker's `install_external_lb.sh`). Errors: the script was
    /// not read from the package.
    pub fn lb_script_step(
        &self,
        nodes: &[ClusterNode],
    ) -> Result<Option<(VnfcId, Step)>, FlavourError> {
        let (Some(lb), Some(param)) = (Self::lb(nodes), self.k8s.external_lb_param.as_ref()) else {
            return Ok(None);
        };
        let body = self.inputs.files.get(&param.script_path).ok_or_else(|| {
            FlavourError::new(
                "lb.script",
                format!("package file `{}` was not read", param.script_path),
            )
        })?;
        let name = std::path::Path::new(&param.script_path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "install_external_lb.sh".into());
        let path = format!("{LB_SCRIPT_DIR}/{name}");
        let list = |role: Role| {
            nodes
                .iter()
                .filter(|n| n.role == role)
                .map(|n| n.address.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut s = step(
            StepKind::LbScript,
            lb.vnfc_id.as_str(),
            vec![
                path.clone(),
                sha256_hex(body),
                format!("{LB_SCRIPT_DIR}/ran"),
                list(Role::Master),
                list(Role::Worker),
            ],
            true,
            Duration::from_secs(900),
        );
        s.uploads = vec![Upload {
            path,
            bytes: body.clone(),
            mode: 0o755,
        }];
        Ok(Some((lb.vnfc_id.clone(), s)))
    }

    /// `lb.haproxy` on the LB for `nodes`, if there is an LB.
    pub fn haproxy_step(&self, nodes: &[ClusterNode]) -> Option<(VnfcId, Step)> {
        let lb = Self::lb(nodes)?;
        let cfg = haproxy_cfg(self.inputs.vnf_instance_id.as_str(), nodes);
        let new = format!("{HAPROXY_CFG}.vnfkeeper-new");
        let mut s = step(
            StepKind::LbHaproxy,
            lb.vnfc_id.as_str(),
            vec![
                HAPROXY_CFG.to_owned(),
                new.clone(),
                sha256_hex(cfg.as_bytes()),
            ],
            true,
            Duration::from_secs(600),
        );
        s.uploads = vec![Upload {
            path: new,
            bytes: cfg.into_bytes(),
            mode: 0o644,
        }];
        Some((lb.vnfc_id.clone(), s))
    }

    /// Inventory, then (for nodes) the playbooks, then HAProxy.
    fn converge(
        &self,
        nodes: &[ClusterNode],
        books: Vec<(&str, &str, String, Vec<String>)>,
        list: &mut StageList,
    ) -> Result<(), FlavourError> {
        let inv = self.inventory_step(nodes)?;
        list.wave(|w| vec![Stage::remote(w, ANSIBLE_HOST, Role::AnsibleServer, inv)]);
        for (subject, book, record, limit) in books {
            let s = self.playbook(0, subject, book, &record, &limit, &[])?;
            list.wave(|w| vec![at(w, s)]);
        }
        self.lb_routes(nodes, list)
    }

    /// The LB's routes to exactly `nodes`: the package's script first (what it installs on the
    /// LB), then vnfkeeper's whole HAProxy configuration (the routes are the nodes whatever the
    /// script wrote). Nothing without an LB.
    fn lb_routes(&self, nodes: &[ClusterNode], list: &mut StageList) -> Result<(), FlavourError> {
        if let Some((lb, s)) = self.lb_script_step(nodes)? {
            list.wave(|w| vec![Stage::remote(w, lb.as_str(), Role::LoadBalancer, s)]);
        }
        if let Some((lb, s)) = self.haproxy_step(nodes) {
            list.wave(|w| vec![Stage::remote(w, lb.as_str(), Role::LoadBalancer, s)]);
        }
        Ok(())
    }

    /// `k8s.kubeconfig` on the first master, when there are a master and an LB.
    fn kubeconfig(nodes: &[ClusterNode], list: &mut StageList) {
        let (Some(m), Some(lb)) = (
            nodes.iter().find(|n| n.role == Role::Master),
            Self::lb(nodes),
        ) else {
            return;
        };
        let s = step(
            StepKind::K8sKubeconfig,
            m.vnfc_id.as_str(),
            vec![endpoint(lb.address)],
            true,
            Duration::from_secs(60),
        );
        list.wave(|w| vec![Stage::remote(w, m.vnfc_id.as_str(), Role::Master, s)]);
    }

    /// The node trust of `trusting` without its placeholder
    /// ([`trust::node_stages_without_configure`]: registry files, hosts block, auth, and the
    /// observation of `daemon.json`), the first master's NIC MTU observed (`node.nic_mtu`), then
    /// the rest decided from both by [`MgmtDriver::configure`] (one placeholder): `trust.docker`,
    /// Calico's MTUs, the inventory, `cluster.yml`, HAProxy and the admin kubeconfig. Used
    /// wherever `cluster.yml` runs: INSTANTIATE and a HEAL that rebuilt a master (a whole-VNF heal
    /// may bring new NICs). Errors: a registry CA the package files lack.
    fn observe_then_configure(
        &self,
        c: HookContext<'_>,
        master: &ClusterNode,
        trusting: &[&ClusterNode],
        list: &mut StageList,
    ) -> Result<(), FlavourError> {
        trust::node_stages_without_configure(
            &self.trust_inputs(),
            &Self::trust_nodes(trusting),
            list,
        )?;
        let nic = c
            .vnfcs
            .iter()
            .find(|r| r.id == master.vnfc_id)
            .and_then(|r| crate::plan::vnfcs::cp_address(r, &self.k8s.master_node.nic_cp_name))
            .unwrap_or(master.address);
        let probe = step(
            StepKind::NodeNicMtu,
            master.vnfc_id.as_str(),
            vec![nic.to_string()],
            false,
            Duration::from_secs(60),
        );
        list.wave(|w| {
            vec![Stage::remote(
                w,
                master.vnfc_id.as_str(),
                Role::Master,
                probe,
            )]
        });
        list.wave(|w| vec![Stage::expand(w, Hook::Configure)]);
        Ok(())
    }

    /// Drain (on `master`) then `remove-node.yml` for each of `leaving`, one wave each.
    fn remove(
        &self,
        master: &ClusterNode,
        leaving: &[ClusterNode],
        drain: Duration,
        policy: DrainPolicy,
        list: &mut StageList,
    ) -> Result<(), FlavourError> {
        for n in leaving.iter().filter(|n| n.role.is_node()) {
            let d = step(
                StepKind::K8sDrain,
                master.vnfc_id.as_str(),
                vec![
                    n.name.clone(),
                    drain.as_secs().to_string(),
                    match policy {
                        DrainPolicy::Strict => "strict",
                        DrainPolicy::Lenient => "lenient",
                    }
                    .into(),
                ],
                false,
                drain + Duration::from_secs(60),
            );
            list.wave(|w| vec![Stage::remote(w, &n.name, Role::Master, d)]);
            let mut extra = vec![format!("node={}", n.name), "skip_confirmation=yes".into()];
            if policy == DrainPolicy::Lenient {
                // The node may be dead: kubespray removes it without resetting it.
                extra.push("reset_nodes=false".into());
                extra.push("allow_ungraceful_removal=true".into());
            }
            let s = self.playbook(
                0,
                &format!("remove-node.yml:{}", n.name),
                "remove-node.yml",
                &format!("remove-{}-{}", n.name, servers_tag([n])),
                &[],
                &extra,
            )?;
            list.wave(|w| vec![at(w, s)]);
        }
        Ok(())
    }
}

fn at(w: u32, mut s: Stage) -> Stage {
    s.wave = w;
    s
}

fn targeted(targets: &[VnfcId]) -> BTreeSet<&str> {
    targets.iter().map(VnfcId::as_str).collect()
}

impl MgmtDriver for Kubespray {
    fn role(&self, vdu: &str) -> Result<Role, FlavourError> {
        let vnfd = &self.inputs.vnfd;
        let owner = |name: &str, what: &str| -> Result<String, FlavourError> {
            let cp = self.cp_of(name, what)?;
            Ok(vnfd.cps.get(&cp).map(|c| c.vdu.clone()).unwrap_or_default())
        };
        if owner(&self.k8s.master_node.ssh_cp_name, "master_node")? == vdu {
            return Ok(Role::Master);
        }
        if owner(&self.k8s.worker_node.ssh_cp_name, "worker_node")? == vdu {
            return Ok(Role::Worker);
        }
        if let Some(lb) = &self.k8s.external_lb_param
            && owner(&lb.ssh_cp_name, "external_lb_param")? == vdu
        {
            return Ok(Role::LoadBalancer);
        }
        Ok(Role::Other)
    }

    fn access(&self, role: Role) -> Result<Access, FlavourError> {
        let k = &self.k8s;
        let (cp, user, password, address) = match role {
            Role::Master => (
                self.cp_of(&k.master_node.ssh_cp_name, "master_node")?,
                &k.master_node.username,
                &k.master_node.password,
                None,
            ),
            Role::Worker => (
                self.cp_of(&k.worker_node.ssh_cp_name, "worker_node")?,
                &k.worker_node.username,
                &k.worker_node.password,
                None,
            ),
            Role::LoadBalancer => {
                let lb = k.external_lb_param.as_ref().ok_or_else(|| {
                    FlavourError::new("plan", "the request has no external_lb_param")
                })?;
                (
                    self.cp_of(&lb.ssh_cp_name, "external_lb_param")?,
                    &lb.ssh_username,
                    &lb.ssh_password,
                    None,
                )
            }
            Role::AnsibleServer => {
                let a = self.ansible()?;
                let ip: IpAddr = a.ip_address.parse().map_err(|_| {
                    FlavourError::new(
                        "plan",
                        format!("ansible.ip_address `{}` is not an IP address", a.ip_address),
                    )
                })?;
                (String::new(), &a.username, &a.password, Some(ip))
            }
            Role::StorageServer | Role::Registry | Role::Other => {
                return Err(FlavourError::new(
                    "plan",
                    "a VNFC without a role in the cluster is not configured",
                ));
            }
        };
        // A floating IP resource as ssh_cp_name (cp_of checked it is one): reached at its
        // floating address.
        let name = match role {
            Role::Master => Some(&k.master_node.ssh_cp_name),
            Role::Worker => Some(&k.worker_node.ssh_cp_name),
            Role::LoadBalancer => k.external_lb_param.as_ref().map(|l| &l.ssh_cp_name),
            _ => None,
        };
        let floating = name
            .filter(|n| !self.inputs.vnfd.cps.contains_key(n.as_str()))
            .cloned();
        Ok(Access {
            cp,
            floating,
            username: user.clone(),
            password: password.clone(),
            address,
        })
    }

    fn instantiate_end(&self, c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        let nodes = self.nodes(c.vnfcs, &BTreeSet::new())?;
        let master = nodes
            .iter()
            .find(|n| n.role == Role::Master)
            .ok_or_else(|| FlavourError::new("plan", "the stack has no master VNFC"))?;
        let mut list = StageList::default();
        let all: Vec<&ClusterNode> = nodes.iter().collect();
        list.wave(|w| at_all(w, Self::reach(&all)));
        self.observe_then_configure(c, master, &all, &mut list)?;
        Ok(list.into_stages())
    }

    fn configure(
        &self,
        c: HookContext<'_>,
        observed: &BTreeMap<StageKey, String>,
    ) -> Result<Vec<Stage>, FlavourError> {
        let nodes = self.nodes(c.vnfcs, &BTreeSet::new())?;
        let master = nodes
            .iter()
            .find(|n| n.role == Role::Master)
            .ok_or_else(|| FlavourError::new("plan", "the stack has no master VNFC"))?;
        // One placeholder per operation decides everything observed before it: the
        // `daemon.json` of the nodes whose trust was planned (`trust.observe`), and the
        // cluster from the first master's MTU where `cluster.yml` runs.
        let all: Vec<&ClusterNode> = nodes.iter().collect();
        let docker = trust::configure_stages(
            &self.k8s.private_registry_connection_info,
            &Self::trust_nodes(&all),
            observed,
        )?;
        let mut list = StageList::default();
        list.wave(|w| at_all(w, docker.clone()));
        let key = format!("node.nic_mtu@{}", master.vnfc_id);
        let Some(line) = observed.get(key.as_str()) else {
            if !docker.is_empty() {
                return Ok(list.into_stages());
            }
            return Err(FlavourError::new(
                "node.nic_mtu",
                format!("no MTU was observed on master {} ({key})", master.name),
            ));
        };
        let mtu = calico_mtu(line)?;
        let calico = self.calico_step(mtu)?;
        list.wave(|w| vec![Stage::remote(w, ANSIBLE_HOST, Role::AnsibleServer, calico)]);
        let record = format!("cluster-{}", servers_tag(&nodes));
        self.converge(
            &nodes,
            vec![("cluster.yml", "cluster.yml", record, Vec::new())],
            &mut list,
        )?;
        Self::kubeconfig(&nodes, &mut list);
        Ok(list.into_stages())
    }

    fn scale_start(
        &self,
        c: HookContext<'_>,
        victims: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        let leaving_ids = targeted(victims);
        let nodes = self.nodes(c.vnfcs, &BTreeSet::new())?;
        let mut leaving: Vec<ClusterNode> = nodes
            .iter()
            .filter(|n| leaving_ids.contains(n.vnfc_id.as_str()) && n.role.is_node())
            .cloned()
            .collect();
        if leaving.is_empty() {
            return Ok(Vec::new());
        }
        leaving.sort_by_key(|n| victims.iter().position(|v| *v == n.vnfc_id));
        let master = nodes
            .iter()
            .find(|n| n.role == Role::Master && !leaving_ids.contains(n.vnfc_id.as_str()))
            .ok_or_else(|| FlavourError::new("plan", "no master stays to drain nodes on"))?;
        // The kubespray spec's scale_start order: the LB stops routing to the leaving nodes
        // first (no NodePort traffic reaches a draining node), then each is drained and removed
        // by `remove-node.yml`, then the inventory lists the nodes that stay.
        let staying = self.nodes(c.vnfcs, &leaving_ids)?;
        let mut list = StageList::default();
        self.lb_routes(&staying, &mut list)?;
        self.remove(
            master,
            &leaving,
            SCALE_IN_DRAIN,
            DrainPolicy::Strict,
            &mut list,
        )?;
        let inv = self.inventory_step(&staying)?;
        list.wave(|w| vec![Stage::remote(w, ANSIBLE_HOST, Role::AnsibleServer, inv)]);
        Ok(list.into_stages())
    }

    fn scale_end(
        &self,
        c: HookContext<'_>,
        created: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        let new = targeted(created);
        let nodes = self.nodes(c.vnfcs, &BTreeSet::new())?;
        let joining: Vec<&ClusterNode> = nodes
            .iter()
            .filter(|n| new.contains(n.vnfc_id.as_str()) && n.role.is_node())
            .collect();
        let mut list = StageList::default();
        list.wave(|w| at_all(w, Self::reach(&joining)));
        let names: Vec<String> = joining.iter().map(|n| n.name.clone()).collect();
        let books = if names.is_empty() {
            Vec::new()
        } else {
            let tag = servers_tag(joining.iter().copied());
            vec![
                ("facts.yml", "facts.yml", format!("facts-{tag}"), Vec::new()),
                ("scale.yml", "scale.yml", format!("scale-{tag}"), names),
            ]
        };
        self.converge(&nodes, books, &mut list)?;
        self.trust_stages(&joining, &mut list)?;
        Ok(list.into_stages())
    }

    /// kubespray spec: "Heal operation for Master node is not supported because kubespray
    /// doesn't provide a playbook for it": a master's server is rebuilt only with the whole VNF
    /// (every VNFC a target), whose heal runs `cluster.yml` as INSTANTIATE does.
    fn rebuild_refusal(&self, vnfcs: &[VnfcRow], targets: &[VnfcId]) -> Option<String> {
        if vnfcs.iter().all(|v| targets.contains(&v.id)) {
            return None;
        }
        let master = vnfcs
            .iter()
            .find(|v| targets.contains(&v.id) && self.role(&v.vdu_id) == Ok(Role::Master))?;
        Some(format!(
            "VNFC {} is a kubespray master: kubespray has no playbook to rebuild one master; \
             heal the whole VNF instead",
            master.id
        ))
    }

    fn heal_start(
        &self,
        c: HookContext<'_>,
        targets: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        let healed = targeted(targets);
        let nodes = self.nodes(c.vnfcs, &BTreeSet::new())?;
        let leaving: Vec<ClusterNode> = nodes
            .iter()
            .filter(|n| healed.contains(n.vnfc_id.as_str()) && n.role.is_node())
            .cloned()
            .collect();
        let mut list = StageList::default();
        if let Some(master) = nodes
            .iter()
            .find(|n| n.role == Role::Master && !healed.contains(n.vnfc_id.as_str()))
        {
            self.remove(
                master,
                &leaving,
                HEAL_DRAIN,
                DrainPolicy::Lenient,
                &mut list,
            )?;
        }
        Ok(list.into_stages())
    }

    fn heal_end(&self, c: HookContext<'_>, targets: &[VnfcId]) -> Result<Vec<Stage>, FlavourError> {
        let healed = targeted(targets);
        let nodes = self.nodes(c.vnfcs, &BTreeSet::new())?;
        let back: Vec<&ClusterNode> = nodes
            .iter()
            .filter(|n| healed.contains(n.vnfc_id.as_str()))
            .collect();
        let mut list = StageList::default();
        list.wave(|w| at_all(w, Self::reach(&back)));
        if back.iter().any(|n| n.role == Role::Master) {
            // A rebuilt master (a whole-VNF heal, as Tacker's heal_end calls instantiate_end):
            // `cluster.yml` over every node, decided as at INSTANTIATE from the MTU observed on
            // the first master now (its NIC may have changed with the rebuild).
            let master = nodes
                .iter()
                .find(|n| n.role == Role::Master)
                .ok_or_else(|| FlavourError::new("plan", "the stack has no master VNFC"))?;
            self.observe_then_configure(c, master, &back, &mut list)?;
            return Ok(list.into_stages());
        }
        let node_names: Vec<String> = back
            .iter()
            .filter(|n| n.role.is_node())
            .map(|n| n.name.clone())
            .collect();
        let tag = servers_tag(back.iter().copied());
        let books = if node_names.is_empty() {
            Vec::new()
        } else {
            vec![
                ("facts.yml", "facts.yml", format!("facts-{tag}"), Vec::new()),
                ("scale.yml", "scale.yml", format!("scale-{tag}"), node_names),
            ]
        };
        self.converge(&nodes, books, &mut list)?;
        self.trust_stages(&back, &mut list)?;
        Ok(list.into_stages())
    }

    fn instantiate_rollback(&self, c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        // The inventory a failed INSTANTIATE may have written; `ansible.forget` finds nothing to
        // do when it wrote none.
        self.terminate_start(c)
    }

    fn terminate_start(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        // Tacker's terminate_end removes `transferring_inventory_path` on the Ansible server
        // (`rm -rf`); the LB and the nodes go with the stack. `ansible.forget` removes only what
        // vnfkeeper and kubespray wrote there, then the directory when it is empty.
        let inv = self.inventory_dir()?;
        let s = step(
            StepKind::AnsibleForget,
            ANSIBLE_HOST,
            vec![inv],
            false,
            Duration::from_secs(120),
        );
        let mut list = StageList::default();
        list.wave(|w| vec![Stage::remote(w, ANSIBLE_HOST, Role::AnsibleServer, s)]);
        Ok(list.into_stages())
    }

    fn probes(
        &self,
        c: HookContext<'_>,
        vnfc: &VnfcRow,
        role: Role,
        _first_master: bool,
    ) -> Vec<Probe> {
        let Ok(nodes) = self.nodes(c.vnfcs, &BTreeSet::new()) else {
            return Vec::new();
        };
        match role {
            // The LB's configuration-only heal converges both the inventory and HAProxy, so
            // drift of either is the LB's.
            Role::LoadBalancer => {
                let mut probes: Vec<Probe> = Vec::new();
                if let Ok(Some((_, s))) = self.lb_script_step(&nodes) {
                    probes.push(Probe::Script(s));
                }
                probes.extend(self.haproxy_step(&nodes).map(|(_, s)| Probe::Script(s)));
                if let Ok(s) = self.inventory_step(&nodes) {
                    probes.push(Probe::Outside(s));
                }
                probes
            }
            // Node trust drift: registry files, hosts block, auths, insecure registries.
            Role::Master | Role::Worker => trust::probes(&self.trust_inputs(), vnfc.id.as_str())
                .into_iter()
                .map(Probe::Script)
                .collect(),
            _ => Vec::new(),
        }
    }

    fn pv_names(&self) -> Result<Vec<String>, FlavourError> {
        Ok(Vec::new())
    }

    fn late_upload(
        &self,
        late: &Late,
        rows: &[VnfcRow],
        _kept: &KeptArtifacts,
    ) -> Result<Secret<Vec<u8>>, FlavourError> {
        match late {
            Late::KnownHosts { .. } => {
                let nodes = self.nodes(rows, &BTreeSet::new())?;
                Ok(Secret::new(known_hosts(&nodes, rows)?.into_bytes()))
            }
            Late::Credentials { .. } => Ok(Secret::new(
                credentials_yaml(&self.k8s).expose().clone().into_bytes(),
            )),
            Late::RegistryAuth { .. } => {
                trust::docker_config_json(&self.k8s.private_registry_connection_info)
                    .map(|t| Secret::new(t.expose().clone().into_bytes()))
                    .ok_or_else(|| {
                        FlavourError::new("trust.auth", "no registry entry has credentials")
                    })
            }
            Late::InstallEnv { .. } => Err(FlavourError::new(
                "plan",
                format!("this flavour produces no file for {}", late.path()),
            )),
        }
    }

    fn secrets(&self) -> Vec<Secret<String>> {
        trust::secrets(&self.k8s.private_registry_connection_info)
    }

    fn registries(&self) -> Vec<trust::RegistryUse> {
        trust::registry_uses(&self.trust_inputs())
    }

    /// `ansible.playbook`: success only when it exited 0 and its play recap (the JSON-lines stats
    /// event) counts no failure and no unreachable for every host; otherwise the reason names each
    /// failed host, its task and message.
    fn judge_apply(&self, step: &Step, out: &ApplyOutput<'_>) -> Result<(), ApplyFailed> {
        if step.kind != StepKind::AnsiblePlaybook {
            return Ok(());
        }
        playbook_verdict(out)
    }

    /// `k8s.kubeconfig`: the admin kubeconfig it printed, its server set to the step's endpoint
    /// (the LB, the step's first argument).
    fn keep(&self, step: &Step, stdout: &str) -> Result<Option<Kept>, FlavourError> {
        if step.kind != StepKind::K8sKubeconfig {
            return Ok(None);
        }
        let endpoint = step.args.first().map(String::as_str).unwrap_or_default();
        Ok(Some(Kept {
            artifact: Artifact::AdminKubeconfig,
            text: Secret::new(kubeconfig_for(stdout, endpoint)?),
        }))
    }
}

/// The verdict on an `ansible-playbook` run from its exit status and its events' play recap
/// ([`crate::ansible`]). Without any event the reason carries the tail of standard error (else of
/// standard output); an Ansible without the JSON-lines callback is named as such.
fn playbook_verdict(out: &ApplyOutput<'_>) -> Result<(), ApplyFailed> {
    let run = out.events;
    if out.exit_status == Some(0) && run.succeeded() {
        return Ok(());
    }
    if run.events == 0
        && out
            .stderr_tail
            .contains("Invalid callback for stdout specified")
    {
        return Err(ApplyFailed {
            reason: format!(
                "ansible-playbook on the Ansible server has no stdout callback {}: install the \
                 collection ansible.posix (Debian's package `ansible`, pip's `ansible` bundle, or \
                 `ansible-galaxy collection install ansible.posix`)",
                crate::ansible::STDOUT_CALLBACK
            ),
        });
    }
    let signal = out
        .signal
        .map(|s| format!(", killed by SIG{s}"))
        .unwrap_or_default();
    let mut reason = format!("ansible-playbook failed{signal}: {}", run.summary());
    if run.events == 0 {
        let tail = if out.stderr_tail.trim().is_empty() {
            out.stdout_tail
        } else {
            out.stderr_tail
        };
        reason.push_str(&format!(" ({})", tail.trim()));
    }
    Err(ApplyFailed { reason })
}

fn at_all(w: u32, stages: Vec<Stage>) -> Vec<Stage> {
    stages.into_iter().map(|s| at(w, s)).collect()
}

#[cfg(test)]
pub(crate) mod tests;
