//! Configuration probes (shell): read-only checks over SSH on full passes, with bounded
//! concurrency (`limits.max_parallel_hosts`) and a timeout per probe.
//!
//! Each probe is an existing recipe script in `check` mode (exit 0 = in place, 10 = drift; any
//! other exit, an SSH failure or a timeout = unknown), so a probe and the configuration step that
//! repairs it can never disagree about what "in place" means. What is probed is the flavour's
//! choice (`MgmtDriver::probes`); for the kubeadm cluster with NFS PersistentVolumes:
//! - storage server: each volume mounted (`storage.mount`), NFS server installed (`nfs.server`),
//!   exactly the requested exports written and served (`nfs.exports`);
//! - masters and workers: cluster joined (`k8s.install`), NFS client installed (`nfs.client`,
//!   only when a storage server is configured);
//! - first master: each PersistentVolume registered with the right server and path
//!   (`pv.register`, counted as drift of the storage server whose configuration-only heal
//!   re-registers them), `kubectl get pv -o json` (phases: Bound blocks a storage heal) and
//!   `kubectl get nodes -o json` (a node `NotReady` or missing is a failed probe of its VNFC).
//!
//! Host keys come from the VNFC rows (pinned); a VNFC without a pinned key is not probed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::Value;

use crate::remote::{Auth, HostKeyPolicy, Remote, RemoteCommand, Target};
use crate::store::VnfcRow;
use vnfkeeper_core::flavour::{HookContext, MgmtDriver, Probe};
use vnfkeeper_core::model::{VnfInstanceId, VnfcId};
use vnfkeeper_core::policy::{Finding, Role, Verdict, kubectl};
use vnfkeeper_core::recipes::{EXIT_NEEDED, Step};
use vnfkeeper_core::wire::Secret;

/// Probe limits.
#[derive(Debug, Clone, Copy)]
pub struct ProbeSettings {
    /// Longest one probe command may take (remote `timeout` and client deadline).
    pub timeout: Duration,
    /// Hosts probed at once over all VNFs.
    pub max_parallel_hosts: usize,
}

/// The intended configuration of one VNF: its flavour (from the last completed INSTANTIATE and
/// its package), which says the role of each VNFC, how to reach it and what to probe.
#[derive(Debug)]
pub struct Cluster {
    /// The flavour's driver.
    pub driver: Box<dyn MgmtDriver>,
    /// The `OS::Neutron::FloatingIP` resource names of its BaseHOT: recorded addresses by
    /// these names are floating ones, on no port ([`super::observe::view`]).
    pub floating: std::collections::BTreeSet<String>,
}

/// Roles of the VNFCs (vnfc id → role) as the flavour assigns them.
pub fn roles(vnfcs: &[VnfcRow], cluster: Option<&Cluster>) -> HashMap<VnfcId, Role> {
    vnfcs
        .iter()
        .map(|v| {
            // A role naming a CP the VNFD lacks was refused when the VNF was instantiated.
            let role = cluster
                .and_then(|c| c.driver.role(&v.vdu_id).ok())
                .unwrap_or(Role::Other);
            (v.id.clone(), role)
        })
        .collect()
}

/// What one full pass learned about one VNF's configuration.
#[derive(Debug, Default)]
pub struct VnfProbes {
    /// Findings per probed VNFC (absent: not probed).
    pub findings: HashMap<VnfcId, Vec<Finding>>,
    /// Bound PersistentVolumes among the VNF's, when `kubectl get pv` could be read.
    pub pv_bound: Option<Vec<String>>,
}

/// One probe command.
#[derive(Debug, Clone)]
enum Check {
    Script(Step),
    Kubectl(&'static str),
}

/// All probes of one host.
#[derive(Debug)]
struct Job {
    vnf: VnfInstanceId,
    vnfc: VnfcId,
    /// The VNFC the verdicts are about when not the step's host (a probe of a host outside the
    /// VNF on behalf of a VNFC).
    about: Option<VnfcId>,
    target: Target,
    secrets: Vec<Secret<String>>,
    checks: Vec<Check>,
}

/// What a probe command returned.
#[derive(Debug)]
enum Answer {
    /// A finding about the VNFC named first (a PV check run on the first master is about the
    /// storage server).
    Verdict(VnfcId, Finding),
    Json(&'static str, Result<Value, String>),
}

/// One VNF to probe: its VNFCs (only those whose cloud view is healthy are probed), roles and
/// intended configuration.
#[derive(Debug)]
pub struct Target1<'a> {
    /// vnfInstanceId.
    pub vnf_instance_id: &'a VnfInstanceId,
    /// VNFC rows.
    pub vnfcs: &'a [VnfcRow],
    /// Which of them to probe (cloud healthy).
    pub probe: Vec<&'a str>,
    /// Roles.
    pub roles: &'a HashMap<VnfcId, Role>,
    /// Intended configuration.
    pub cluster: &'a Cluster,
    /// Pinned host keys of hosts outside any VNF (address → OpenSSH line), for
    /// [`Probe::Outside`].
    pub external_host_keys: &'a HashMap<String, String>,
}

/// Probes every VNF in `targets`; returns findings per VNF. Never fails: whatever cannot be read
/// is an `Unknown` finding.
pub async fn probe_all(
    remote: &dyn Remote,
    settings: ProbeSettings,
    targets: &[Target1<'_>],
) -> HashMap<VnfInstanceId, VnfProbes> {
    let mut out: HashMap<VnfInstanceId, VnfProbes> = HashMap::new();
    let mut jobs = Vec::new();
    let mut nodes_of: HashMap<VnfInstanceId, Vec<(VnfcId, Option<IpAddr>)>> = HashMap::new();
    let mut pv_names: HashMap<VnfInstanceId, Vec<String>> = HashMap::new();
    for t in targets {
        let entry = out.entry(t.vnf_instance_id.clone()).or_default();
        let (vnf_jobs, unprobed, nodes, pvs) = plan_jobs(t);
        for (vnfc, why) in unprobed {
            entry.findings.insert(
                vnfc,
                vec![Finding {
                    check: "ssh".into(),
                    verdict: Verdict::Unknown,
                    detail: why,
                }],
            );
        }
        jobs.extend(vnf_jobs);
        nodes_of.insert(t.vnf_instance_id.clone(), nodes);
        pv_names.insert(t.vnf_instance_id.clone(), pvs);
    }
    let timeout = settings.timeout;
    let results: Vec<(VnfInstanceId, VnfcId, Vec<Answer>)> = futures::stream::iter(jobs)
        .map(|job| async move {
            let answers = run_job(remote, &job, timeout).await;
            (job.vnf, job.vnfc, answers)
        })
        .buffer_unordered(settings.max_parallel_hosts.max(1))
        .collect()
        .await;

    // Findings per VNFC; kubectl answers of the first master become node and PV findings.
    // Per VNF: (`kubectl get nodes`, `kubectl get pv`) of its first master.
    type KubeLists = (Result<Value, String>, Result<Value, String>);
    let mut kube: HashMap<VnfInstanceId, KubeLists> = HashMap::new();
    for (vnf, vnfc, answers) in results {
        let entry = out.entry(vnf.clone()).or_default();
        entry.findings.entry(vnfc).or_default();
        for a in answers {
            match a {
                Answer::Verdict(about, f) => entry.findings.entry(about).or_default().push(f),
                Answer::Json(what, v) => {
                    let k = kube
                        .entry(vnf.clone())
                        .or_insert((Err("not read".into()), Err("not read".into())));
                    if what == "nodes" {
                        k.0 = v;
                    } else {
                        k.1 = v;
                    }
                }
            }
        }
    }
    for (vnf, nodes) in &nodes_of {
        let entry = out.entry(vnf.clone()).or_default();
        let (node_list, pv_list) = kube.remove(vnf).unwrap_or((
            Err("first master not probed".into()),
            Err("first master not probed".into()),
        ));
        for (vnfc, addr) in nodes {
            let f = kubectl::node_finding(node_list.as_ref().map_err(String::as_str), *addr);
            entry.findings.entry(vnfc.clone()).or_default().push(f);
        }
        let names = pv_names.get(vnf).cloned().unwrap_or_default();
        if !names.is_empty()
            && let Ok(pvs) = &pv_list
        {
            entry.pv_bound = Some(kubectl::bound_pvs(pvs, &names));
        }
    }
    out
}

/// Jobs for one VNF, VNFCs that cannot be probed (and why), the node VNFCs with their addresses,
/// and the VNF's PV names.
#[allow(clippy::type_complexity)]
fn plan_jobs(
    t: &Target1<'_>,
) -> (
    Vec<Job>,
    Vec<(VnfcId, String)>,
    Vec<(VnfcId, Option<IpAddr>)>,
    Vec<String>,
) {
    let driver = &t.cluster.driver;
    let c = HookContext {
        vnfcs: t.vnfcs,
        pv_wait: Duration::ZERO,
        op_occ_id: "",
    };
    let mut jobs = Vec::new();
    let mut unprobed = Vec::new();
    let mut nodes = Vec::new();
    let pv_names = driver.pv_names().unwrap_or_default();
    // The master that also reads the cluster's nodes and PVs: the first in the store's order
    // (as the engine chooses it).
    let first_master = t
        .vnfcs
        .iter()
        .find(|v| t.roles.get(v.id.as_str()).is_some_and(|r| r.runs_kubectl()))
        .map(|v| v.id.as_str());
    for v in t.vnfcs {
        let flavour_role = t.roles.get(v.id.as_str()).copied().unwrap_or(Role::Other);
        if flavour_role == Role::Other {
            continue;
        }
        let Ok(access) = driver.access(flavour_role) else {
            continue;
        };
        let cp = &access.cp;
        let addr = access.address_of(v);
        if flavour_role.is_node() {
            nodes.push((v.id.clone(), addr));
        }
        if !t.probe.contains(&v.id.as_str()) {
            continue;
        }
        let Some(address) = addr else {
            unprobed.push((v.id.clone(), format!("no address on CP {cp}")));
            continue;
        };
        let Some(key) = v.host_key.clone() else {
            unprobed.push((
                v.id.clone(),
                "no pinned host key for this server yet; not probed".into(),
            ));
            continue;
        };
        let mut checks = Vec::new();
        let mut outside = Vec::new();
        for p in driver.probes(c, v, flavour_role, first_master == Some(v.id.as_str())) {
            match p {
                Probe::Script(step) => checks.push(Check::Script(step)),
                Probe::Kubectl(kind) => checks.push(Check::Kubectl(kind)),
                Probe::Outside(step) => outside.push(Check::Script(step)),
            }
        }
        if !outside.is_empty() {
            match outside_job(t, &v.id, outside) {
                Ok(job) => jobs.push(job),
                Err(why) => unprobed.push((v.id.clone(), why)),
            }
        }
        let (user, password) = (access.username, access.password);
        jobs.push(Job {
            vnf: t.vnf_instance_id.clone(),
            vnfc: v.id.clone(),
            about: None,
            target: Target {
                address,
                port: 22,
                username: user,
                auth: Auth::Password(password.clone()),
                host_key: HostKeyPolicy::Pinned(key),
                label: v.id.to_string(),
            },
            secrets: vec![password],
            checks,
        });
    }
    (jobs, unprobed, nodes, pv_names)
}

/// The job that runs `checks` on the host outside the VNF (the flavour's
/// [`Role::AnsibleServer`]) on behalf of VNFC `about`, with that host's pinned key. Errors (why
/// it is not probed): the flavour reaches no such host, or its key is not pinned yet.
fn outside_job(t: &Target1<'_>, about: &VnfcId, checks: Vec<Check>) -> Result<Job, String> {
    let access = t
        .cluster
        .driver
        .access(Role::AnsibleServer)
        .map_err(|e| format!("no host outside the VNF to probe: {e}"))?;
    let address = access
        .address
        .ok_or("the host outside the VNF has no fixed address")?;
    let key = t
        .external_host_keys
        .get(&address.to_string())
        .cloned()
        .ok_or_else(|| format!("no pinned host key for {address} yet; not probed"))?;
    Ok(Job {
        vnf: t.vnf_instance_id.clone(),
        vnfc: about.clone(),
        about: Some(about.clone()),
        target: Target {
            address,
            port: 22,
            username: access.username,
            auth: Auth::Password(access.password.clone()),
            host_key: HostKeyPolicy::Pinned(key),
            label: address.to_string(),
        },
        secrets: vec![access.password],
        checks,
    })
}

/// Runs a host's probes one after the other (one SSH session). After an SSH-level failure the
/// remaining probes of the host are unknown without being tried.
async fn run_job(remote: &dyn Remote, job: &Job, timeout: Duration) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut broken: Option<String> = None;
    for check in &job.checks {
        let cmd = match check {
            Check::Script(step) => RemoteCommand::script(step.script_text())
                .arg("check")
                .args(step.args.iter().cloned())
                .sudo(step.sudo)
                .timeout(timeout)
                .step(step.name()),
            Check::Kubectl(what) => RemoteCommand::new("kubectl")
                .args(["get", what, "-o", "json"])
                .timeout(timeout)
                .step("reconcile.kubectl"),
        };
        let result = match &broken {
            Some(why) => Err(why.clone()),
            None => {
                // The client-side bound: remote deadline + kill grace + connect time.
                let limit = timeout + Duration::from_secs(15);
                match tokio::time::timeout(limit, remote.run(&job.target, &cmd)).await {
                    Ok(Ok(o)) => Ok(o),
                    Ok(Err(e)) => {
                        let why = format!("{e} ({})", e.kind());
                        broken = Some(why.clone());
                        Err(why)
                    }
                    Err(_) => {
                        let why = format!("no answer within {}s", limit.as_secs());
                        broken = Some(why.clone());
                        Err(why)
                    }
                }
            }
        };
        let secrets: Vec<&Secret<String>> = job.secrets.iter().collect();
        match check {
            Check::Kubectl(what) => {
                let v = result.and_then(|o| {
                    if o.exit_status == Some(0) {
                        serde_json::from_slice::<Value>(&o.stdout)
                            .map_err(|e| format!("kubectl output is not JSON: {e}"))
                    } else {
                        Err(format!(
                            "kubectl exit {:?}: {}",
                            o.exit_status,
                            o.stderr_tail(300, &secrets).trim()
                        ))
                    }
                });
                out.push(Answer::Json(what, v));
            }
            Check::Script(step) => {
                let (verdict, detail) = match result {
                    Err(why) => (Verdict::Unknown, why),
                    Ok(o) => {
                        let last = crate::remote::tail_masked(&o.stdout, 400, &secrets)
                            .lines()
                            .last()
                            .unwrap_or("")
                            .trim()
                            .to_owned();
                        match o.exit_status {
                            Some(0) => (Verdict::InPlace, last),
                            Some(EXIT_NEEDED) => (Verdict::Drift, last),
                            other => (
                                Verdict::Unknown,
                                format!(
                                    "check exit {other:?}: {}",
                                    o.stderr_tail(300, &secrets).trim()
                                ),
                            ),
                        }
                    }
                };
                let check = step.probe_check();
                // A PV check is about the storage server (step.host, see plan_jobs); a check
                // of a host outside the VNF about the VNFC it was planned for.
                out.push(Answer::Verdict(
                    job.about
                        .clone()
                        .unwrap_or_else(|| VnfcId::new(step.host.clone())),
                    Finding {
                        check,
                        verdict,
                        detail,
                    },
                ));
            }
        }
    }
    out
}
