//! Reconcile: observe every instantiated VNF instance, compare with its intended state, and
//! either start an automatic HEAL or record why not — safely: fail closed on observation errors,
//! short-circuit remediation storms, a retry budget with backoff, keep the storage server's data,
//! and record the evidence of every decision (the rules are in `policy`; they follow Cluster
//! API's MachineHealthCheck and KubeadmControlPlane remediation, magnum-auto-healer and Masakari).
//!
//! A pass is: [`snapshot`] (read the store) → [`Reconciler::evaluate`] (one cloud inventory of
//! list calls; on full passes SSH probes; then the pure [`policy::decide`] per VNF) →
//! [`record`] (one transaction: HEAL operations, audit events, the loop's memory) → [`log`]
//! (journald records with stable `MESSAGE_ID`s). `vnfkeeper plan` runs the first two only.
//!
//! Two kinds of pass: *cloud* passes (list calls only, every `cloud_interval_secs`, and at once
//! for the VNFs the fast observation names — one Nova `changes-since` request every
//! `changes_since_interval_secs`, see [`policy::changes`] — so a Nova `ERROR` or a vanished
//! server is healed within seconds) and *full* passes (cloud + probes, on the cron `schedule`
//! and on `vnfkeeper reconcile --now`).
//!
//! Contract with the engine: the HEAL operation's `operation_params` is a SOL002/SOL003
//! HealVnfRequest `{"vnfcInstanceId": [...], "cause": "...", "additionalParams":
//! {"configuration_only": true}}` (the last part only for a configuration repair: rerun the
//! idempotent configuration steps of those VNFCs, no new server), `isAutomaticInvocation` true,
//! state `STARTING`, queued behind nothing (the VNF had no unfinished operation).

pub mod cmd;
pub mod observe;
pub mod probe;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cloud::Cloud;
use crate::remote::Remote;
use crate::store::{
    InstanceRow, NewEvent, NewOperation, ReaderRef, ReconcileStateRow, RequestBody, Tx, VnfcRow,
};
use probe::{Cluster, ProbeSettings};
use vnfkeeper_core::flavour;
use vnfkeeper_core::model::{
    EventKind, InstantiationState, LcmOperationType, MaintenancePause, OpOccId, Timestamp,
    VnfInstanceId, VnfcId, pause,
};
use vnfkeeper_core::package::VnfPackage;
use vnfkeeper_core::policy::{
    self, CloudView, Memory, Policy, PvView, VnfInput, VnfOutcome, VnfcInput,
};
use vnfkeeper_core::recipes::StepKind;
use vnfkeeper_core::wire::sol003::InstantiateVnfRequest;

/// Which pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// List calls only.
    Cloud,
    /// List calls and SSH probes.
    Full,
}

impl PassKind {
    /// `"cloud"` or `"full"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PassKind::Cloud => "cloud",
            PassKind::Full => "full",
        }
    }
}

/// One instantiated VNF instance as the store knows it.
#[derive(Debug, Clone)]
pub struct VnfSnapshot {
    /// The instance.
    pub instance: InstanceRow,
    /// Its VNFCs (store order).
    pub vnfcs: Vec<VnfcRow>,
    /// Unfinished operations (vnfLcmOpOccId), oldest first.
    pub unfinished: Vec<OpOccId>,
    /// The last completed InstantiateVnfRequest.
    pub instantiate: Option<InstantiateVnfRequest>,
}

/// What a pass reads from the store.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Instantiated VNF instances (optionally only one).
    pub vnfs: Vec<VnfSnapshot>,
    /// The loop's memory.
    pub states: HashMap<(String, String), ReconcileStateRow>,
    /// VNFC `updated_at` by id.
    pub vnfc_updated: HashMap<String, Timestamp>,
    /// Maintenance pauses as stored (in force or past their `until`).
    pub pauses: Vec<MaintenancePause>,
    /// Pinned host keys of hosts outside any VNF (the Ansible server): address → OpenSSH line.
    pub external_host_keys: HashMap<String, String>,
}

/// Reads what a pass needs: every `INSTANTIATED` instance (or only `only`), its VNFCs,
/// unfinished operations and INSTANTIATE request, the loop's memory, and the maintenance
/// pauses. Errors: the store's.
pub fn snapshot(q: ReaderRef<'_>, only: Option<&VnfInstanceId>) -> crate::store::Result<Snapshot> {
    snapshot_where(q, |id| only.is_none_or(|o| o == id))
}

/// [`snapshot`] of the instantiated instances whose vnfInstanceId `keep` accepts (the fast
/// observation's pass over the VNFs it named). Errors: the store's.
pub fn snapshot_where(
    q: ReaderRef<'_>,
    keep: impl Fn(&VnfInstanceId) -> bool,
) -> crate::store::Result<Snapshot> {
    let unfinished = q.unfinished_operations_by_instance()?;
    let mut vnfs = Vec::new();
    for instance in q.instances()? {
        if instance.instantiation_state != InstantiationState::Instantiated || !keep(&instance.id) {
            continue;
        }
        vnfs.push(VnfSnapshot {
            vnfcs: q.vnfcs(&instance.id)?,
            unfinished: unfinished.get(&instance.id).cloned().unwrap_or_default(),
            instantiate: q.last_completed_instantiate(&instance.id)?,
            instance,
        });
    }
    Ok(Snapshot {
        vnfs,
        states: q.reconcile_states()?,
        vnfc_updated: q.vnfc_updated_at()?,
        pauses: q.maintenance_pauses()?,
        external_host_keys: q.external_host_keys()?,
    })
}

/// The servers recorded for VNFCs of instantiated instances, by server id, with their VNF and
/// whether it has an unfinished operation: what the fast observation
/// ([`policy::changes::ChangesPoll::plan`]) needs to name the VNFs of changed servers. Read only
/// when a poll found a failing server it had not reported. Errors: the store's.
pub fn recorded_servers(
    q: ReaderRef<'_>,
) -> crate::store::Result<HashMap<String, policy::changes::Recorded>> {
    let unfinished = q.unfinished_operations_by_instance()?;
    let mut out = HashMap::new();
    for instance in q.instances()? {
        if instance.instantiation_state != InstantiationState::Instantiated {
            continue;
        }
        let busy = unfinished
            .get(instance.id.as_str())
            .is_some_and(|u| !u.is_empty());
        for c in q.vnfcs(&instance.id)? {
            if let Some(server) = c.server_id.filter(|s| !s.is_empty()) {
                out.insert(
                    server,
                    policy::changes::Recorded {
                        vnf_instance_id: instance.id.clone(),
                        busy,
                    },
                );
            }
        }
    }
    Ok(out)
}

/// The result of evaluating one pass (nothing written yet).
#[derive(Debug)]
pub struct PassReport {
    /// Which pass.
    pub kind: PassKind,
    /// Its `now`.
    pub at: Timestamp,
    /// VNF instances looked at.
    pub vnfs: usize,
    /// VNFCs looked at.
    pub vnfcs: usize,
    /// Hosts probed (full passes).
    pub probed_hosts: usize,
    /// Cloud API requests this pass sent (pages count).
    pub api_requests: u64,
    /// Why the cloud listing failed, if it did (every VNFC is then unknown).
    pub cloud_error: Option<String>,
    /// Per VNF: the policy's outcome.
    pub outcomes: Vec<VnfOutcome>,
    /// Per VNF with PVs: Bound PV names read by this pass's probes.
    pub pv_bound: HashMap<VnfInstanceId, Vec<String>>,
    /// Per VNFC whose server's Nova status changed since the store recorded it: (server id,
    /// status). [`record`] stores them, so `status VNF` and the status page show what reconcile
    /// saw, also after cloud-only passes.
    pub nova_status: HashMap<VnfcId, (String, String)>,
    /// Wall time of observation, probes and policy.
    pub elapsed: Duration,
    /// HEAL operations started by [`record`]: (vnfInstanceId, vnfLcmOpOccId).
    pub started: Vec<(VnfInstanceId, OpOccId)>,
    /// Pauses whose `until` has passed at `at`: [`record`] removes them (if unchanged since the
    /// snapshot) with a `MAINTENANCE_RESUMED` event, and keeps only those it removed.
    pub expired_pauses: Vec<MaintenancePause>,
    /// VNFCs whose registry trust probes (`trust.*`) all found it in place: [`record`] sets
    /// their `node_registry_trust.verified_at` to `at`.
    pub trust_verified: Vec<VnfcId>,
    /// `tacker.auto_heal`: [`record`] heals Tacker-owned VNFs through Tacker (else it starts
    /// nothing on them).
    pub tacker_auto_heal: bool,
}

/// Observation, probes and policy over a cloud and a remote.
pub struct Reconciler<C> {
    cloud: Arc<C>,
    remote: Arc<dyn Remote>,
    /// Remediation policy.
    pub policy: Policy,
    /// Probe limits.
    pub probes: ProbeSettings,
    /// `tacker.auto_heal` (false unless set after [`Reconciler::new`]): copied into each
    /// [`PassReport`].
    pub tacker_auto_heal: bool,
}

impl<C> std::fmt::Debug for Reconciler<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

fn memory_of(row: Option<&ReconcileStateRow>) -> Memory {
    let Some(r) = row else {
        return Memory::default();
    };
    Memory {
        server_id: r.server_id.clone(),
        server_since: r.server_since,
        cloud_failures: r.cloud_failures.max(0) as u32,
        cloud_first_failure_at: r.cloud_first_failure_at,
        probe_failures: r.probe_failures.max(0) as u32,
        probe_first_failure_at: r.probe_first_failure_at,
        healthy_since: r.healthy_since,
        heal_attempts: r.heal_attempts.max(0) as u32,
        last_heal_at: r.last_heal_at,
        last_decision: r.last_decision.clone(),
    }
}

fn state_row(vnf: &str, vnfc: &str, m: &Memory) -> ReconcileStateRow {
    ReconcileStateRow {
        vnf_instance_id: vnf.into(),
        vnfc_id: vnfc.into(),
        server_id: m.server_id.clone(),
        server_since: m.server_since,
        cloud_failures: m.cloud_failures.into(),
        cloud_first_failure_at: m.cloud_first_failure_at,
        probe_failures: m.probe_failures.into(),
        probe_first_failure_at: m.probe_first_failure_at,
        healthy_since: m.healthy_since,
        heal_attempts: m.heal_attempts.into(),
        last_heal_at: m.last_heal_at,
        last_decision: m.last_decision.clone(),
        pv_bound: None,
        pv_observed_at: None,
    }
}

impl<C: Cloud> Reconciler<C> {
    /// A reconciler over a cloud and a remote.
    pub fn new(
        cloud: Arc<C>,
        remote: Arc<dyn Remote>,
        policy: Policy,
        probes: ProbeSettings,
    ) -> Self {
        Self {
            cloud,
            remote,
            policy,
            probes,
            tacker_auto_heal: false,
        }
    }

    /// Observes (one inventory; probes on a full pass) and decides, writing nothing. `now` is
    /// the pass's time for the policy. Never fails: a cloud error makes every VNFC unknown.
    pub async fn evaluate(&self, snap: &Snapshot, kind: PassKind, now: Timestamp) -> PassReport {
        let started = Instant::now();
        let before = self.cloud.request_count();
        let inventory = if snap.vnfs.is_empty() {
            Ok(Default::default())
        } else {
            self.cloud.inventory().await.map_err(|e| e.to_string())
        };
        let index = inventory.as_ref().map(observe::Index::new);
        let index_ref = index.as_ref().map_err(|e| e.as_str());

        let clusters = clusters(snap);
        let roles: HashMap<VnfInstanceId, HashMap<VnfcId, policy::Role>> = snap
            .vnfs
            .iter()
            .map(|v| {
                (
                    v.instance.id.clone(),
                    probe::roles(&v.vnfcs, clusters.get(&v.instance.id)),
                )
            })
            .collect();
        let none = std::collections::BTreeSet::new();
        let views: HashMap<VnfcId, CloudView> = snap
            .vnfs
            .iter()
            .flat_map(|v| {
                let floating = clusters.get(&v.instance.id).map_or(&none, |c| &c.floating);
                v.vnfcs.iter().map(move |c| (c, floating))
            })
            .map(|(c, floating)| (c.id.clone(), observe::view(c, index_ref, floating)))
            .collect();
        let nova_status: HashMap<VnfcId, (String, String)> = snap
            .vnfs
            .iter()
            .flat_map(|v| v.vnfcs.iter())
            .filter_map(|c| Some((c.id.clone(), observe::changed_status(c, index_ref)?)))
            .collect();
        let (mut probed, probed_hosts) = if kind == PassKind::Full {
            self.probe(snap, &clusters, &roles, &views).await
        } else {
            (HashMap::new(), 0)
        };

        let mut outcomes = Vec::with_capacity(snap.vnfs.len());
        let mut pv_bound = HashMap::new();
        let mut n_vnfcs = 0;
        let mut trust_verified = Vec::new();
        for v in &snap.vnfs {
            let id = &v.instance.id;
            let mut findings = probed.remove(id).unwrap_or_default();
            let (pvs, probed_now) = pv_view(snap, v, clusters.get(id.as_str()), &mut findings, now);
            if let (true, PvView::Known { bound, .. }) = (probed_now, &pvs) {
                pv_bound.insert(id.clone(), bound.clone());
            }
            trust_verified.extend(trust_verified_vnfcs(v, &findings));
            let vnfcs = v
                .vnfcs
                .iter()
                .map(|c| VnfcInput {
                    vnfc_id: c.id.clone(),
                    vdu_id: c.vdu_id.clone(),
                    role: roles[id.as_str()]
                        .get(c.id.as_str())
                        .copied()
                        .unwrap_or(policy::Role::Other),
                    server_id: c.server_id.clone(),
                    recorded_at: snap.vnfc_updated.get(c.id.as_str()).copied().unwrap_or(now),
                    cloud: views[c.id.as_str()].clone(),
                    probes: findings.findings.remove(c.id.as_str()),
                    memory: memory_of(snap.states.get(&(id.to_string(), c.id.to_string()))),
                    rebuild_refused: clusters.get(id.as_str()).and_then(|k| {
                        k.driver
                            .rebuild_refusal(&v.vnfcs, std::slice::from_ref(&c.id))
                    }),
                })
                .collect::<Vec<_>>();
            n_vnfcs += vnfcs.len();
            let input = VnfInput {
                vnf_instance_id: id.clone(),
                unfinished_operations: v.unfinished.clone(),
                vnfcs,
                pvs,
                memory: memory_of(snap.states.get(&(id.to_string(), String::new()))),
                pass: kind.as_str(),
                pause: pause::in_force(&snap.pauses, id, now).cloned(),
            };
            outcomes.push(policy::decide(&self.policy, &input, now));
        }
        PassReport {
            kind,
            at: now,
            vnfs: snap.vnfs.len(),
            vnfcs: n_vnfcs,
            probed_hosts,
            api_requests: self.cloud.request_count() - before,
            cloud_error: inventory.err(),
            outcomes,
            pv_bound,
            nova_status,
            elapsed: started.elapsed(),
            started: Vec::new(),
            expired_pauses: pause::expired(&snap.pauses, now)
                .into_iter()
                .cloned()
                .collect(),
            trust_verified,
            tacker_auto_heal: self.tacker_auto_heal,
        }
    }
}

impl<C: Cloud> Reconciler<C> {
    /// A full pass's probes: the healthy VNFCs of every VNF without unfinished operations that
    /// has a flavour. Returns the findings by vnfInstanceId and how many hosts were probed.
    async fn probe(
        &self,
        snap: &Snapshot,
        clusters: &HashMap<VnfInstanceId, Cluster>,
        roles: &HashMap<VnfInstanceId, HashMap<VnfcId, policy::Role>>,
        views: &HashMap<VnfcId, CloudView>,
    ) -> (HashMap<VnfInstanceId, probe::VnfProbes>, usize) {
        let mut probed_hosts = 0;
        let targets: Vec<probe::Target1<'_>> = snap
            .vnfs
            .iter()
            .filter(|v| v.unfinished.is_empty())
            .filter_map(|v| {
                let cluster = clusters.get(&v.instance.id)?;
                let probe: Vec<&str> = v
                    .vnfcs
                    .iter()
                    .filter(|c| views.get(c.id.as_str()) == Some(&CloudView::Healthy))
                    .map(|c| c.id.as_str())
                    .collect();
                probed_hosts += probe.len();
                Some(probe::Target1 {
                    vnf_instance_id: &v.instance.id,
                    vnfcs: &v.vnfcs,
                    probe,
                    roles: &roles[v.instance.id.as_str()],
                    cluster,
                    external_host_keys: &snap.external_host_keys,
                })
            })
            .collect();
        let probed = probe::probe_all(self.remote.as_ref(), self.probes, &targets).await;
        (probed, probed_hosts)
    }
}

/// The flavour drivers of the snapshot's VNFs that vnfkeeper configures, by vnfInstanceId (their
/// intended configuration); each package is loaded once per path and pass. A VNF whose package
/// cannot be loaded is left out (not probed), with a warning.
fn clusters(snap: &Snapshot) -> HashMap<VnfInstanceId, Cluster> {
    let mut packages: HashMap<String, Option<Arc<VnfPackage>>> = HashMap::new();
    let mut clusters: HashMap<VnfInstanceId, Cluster> = HashMap::new();
    for v in &snap.vnfs {
        let Some(req) = v.instantiate.clone() else {
            continue;
        };
        let Some(path) = v.instance.vnf_package.as_deref() else {
            continue;
        };
        // A flavour that reads no package file (kubespray; the registry without an image)
        // is still probed; only a VNF vnfkeeper does not configure is skipped.
        if !flavour::configures(&req) {
            continue;
        }
        let files = flavour::package_files(&req);
        let pkg = packages
            .entry(path.to_owned())
            .or_insert_with(|| match VnfPackage::load(std::path::Path::new(path)) {
                Ok(p) => Some(Arc::new(p)),
                Err(e) => {
                    tracing::warn!(vnf_package = path, error = %e, "reconcile: cannot load the VNF package; its VNFs are not probed");
                    None
                }
            })
            .clone();
        let Some(pkg) = pkg else { continue };
        let files = files
            .into_iter()
            .filter_map(|f| pkg.read(&f).ok().map(|b| (f, b)))
            .collect();
        let hot = pkg.base_hot(&req.flavour_id).ok();
        let floating_ip_ports = hot
            .as_ref()
            .map(|b| b.floating_ip_ports())
            .unwrap_or_default();
        let base_hot = hot.map(|b| b.template);
        let vnfd = match pkg.vnfd.for_flavour(&req.flavour_id) {
            Ok(vnfd) => vnfd.clone(),
            Err(why) => {
                tracing::warn!(vnf_instance_id = %v.instance.id, "reconcile: {why}; the VNF is not probed");
                continue;
            }
        };
        let driver = flavour::select(flavour::Inputs {
            vnf_instance_id: v.instance.id.clone(),
            req,
            vnfd,
            files,
            base_hot,
            floating_ip_ports: floating_ip_ports.clone(),
        });
        let floating = floating_ip_ports.into_keys().collect();
        clusters.insert(v.instance.id.clone(), Cluster { driver, floating });
    }
    clusters
}

/// What the pass knows of the VNF's PersistentVolumes: not applicable without any, the phases
/// probed now (taken out of `findings`, `observed_at` = `now`; then `true`), else the ones
/// remembered, else unknown.
fn pv_view(
    snap: &Snapshot,
    v: &VnfSnapshot,
    cluster: Option<&Cluster>,
    findings: &mut probe::VnfProbes,
    now: Timestamp,
) -> (PvView, bool) {
    // Names that cannot be read count as PersistentVolumes (fail closed).
    let has_pvs = cluster.is_some_and(|c| c.driver.pv_names().map_or(true, |n| !n.is_empty()));
    if !has_pvs {
        return (PvView::NotApplicable, false);
    }
    if let Some(bound) = findings.pv_bound.take() {
        let known = PvView::Known {
            bound,
            observed_at: now,
        };
        return (known, true);
    }
    let vnf_state = snap.states.get(&(v.instance.id.to_string(), String::new()));
    let remembered = vnf_state.and_then(|s| Some((s.pv_bound.clone()?, s.pv_observed_at?)));
    let view = match remembered {
        Some((bound, observed_at)) => PvView::Known { bound, observed_at },
        None => PvView::Unknown,
    };
    (view, false)
}

/// The VNFCs of `v` whose probes of registry trust ([`StepKind::records_trust`]) ran and were
/// all in place.
fn trust_verified_vnfcs(v: &VnfSnapshot, findings: &probe::VnfProbes) -> Vec<VnfcId> {
    let mut out = Vec::new();
    for c in &v.vnfcs {
        let trust: Vec<&policy::Finding> = findings
            .findings
            .get(c.id.as_str())
            .into_iter()
            .flatten()
            .filter(|f| StepKind::of_check(&f.check).is_some_and(StepKind::records_trust))
            .collect();
        if !trust.is_empty() && trust.iter().all(|f| f.verdict == policy::Verdict::InPlace) {
            out.push(c.id.clone());
        }
    }
    out
}

/// Writes a pass in one transaction: for each VNF, its HEAL operation (unless an operation
/// arrived since the snapshot: then an IN_FLIGHT row instead and the memory is left as it was),
/// one audit event per decision that is not a repeat, and the loop's memory; then removes the
/// pauses that ended (`MAINTENANCE_RESUMED`). Fills `report.started`. Errors: the store's
/// (nothing is written then).
pub fn record(
    tx: &mut Tx<'_>,
    report: &mut PassReport,
    now: Timestamp,
) -> crate::store::Result<()> {
    report.started.clear();
    let mut ended = Vec::new();
    for p in std::mem::take(&mut report.expired_pauses) {
        if tx.expire_maintenance_pause(&p, now)? {
            ended.push(p);
        }
    }
    report.expired_pauses = ended;
    for (vnfc, (server, status)) in &report.nova_status {
        tx.observe_server_status(vnfc, server, status, now)?;
    }
    for vnfc in &report.trust_verified {
        tx.verify_node_trust(vnfc, report.at)?;
    }
    for o in &report.outcomes {
        let vnf = o.vnf_instance_id.clone();
        let op_id = match &o.heal {
            // Not started: the heal's event says why; the VNF's decisions and memory are left
            // as they were, for the next pass to decide again.
            Some(heal) => match record_heal(tx, report, &vnf, heal, now)? {
                Some(id) => {
                    report.started.push((vnf.clone(), id.clone()));
                    Some(id)
                }
                None => continue,
            },
            None => None,
        };
        for d in o.decisions.iter().filter(|d| !d.repeat) {
            let ev = d.evidence.to_string();
            let is_heal = d.kind == policy::DecisionKind::HealStarted;
            tx.append_event(
                &NewEvent {
                    kind: d.kind.event_kind(),
                    vnf_instance_id: Some(&d.vnf_instance_id),
                    vnf_lcm_op_occ_id: if is_heal { op_id.as_ref() } else { None },
                    vnfc_id: d.vnfc_id.as_ref(),
                    message: &d.reason,
                    evidence: Some(&ev),
                },
                now,
            )?;
        }
        write_memory(tx, &vnf, o, report, now)?;
    }
    Ok(())
}

/// What [`record`] does with a heal the policy decided, given what the store holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HealAdmission {
    /// Not started: one event of `kind` says why.
    NotStarted { kind: EventKind, message: String },
    /// Started as an automatic HEAL operation with `detail` as its status detail; `tacker`:
    /// for a Tacker-owned VNF, whether it waits for Tacker's heal.
    Start {
        detail: String,
        tacker: Option<bool>,
    },
}

/// Decides a heal's admission (pure): `route` is the Tacker heal route of a Tacker-owned VNF
/// (`None`: vnfkeeper owns the stack), `arrived` an operation that arrived on the VNF since the
/// observation. Tacker owns its stack, so a route other than direct or through Tacker starts
/// nothing; an operation that arrived since the observation wins over the heal.
fn admit_heal(
    heal: &policy::HealPlan,
    route: Option<&vnfkeeper_core::tacker::TackerHealRoute>,
    arrived: Option<&OpOccId>,
) -> HealAdmission {
    use vnfkeeper_core::tacker::TackerHealRoute as R;
    let not_started = |kind, message| HealAdmission::NotStarted { kind, message };
    let tacker = match route {
        None => None,
        Some(R::Off) => {
            return not_started(
                EventKind::TackerHealNotStarted,
                "heal not started: the VNF is owned by Tacker and tacker.auto_heal is off".into(),
            );
        }
        Some(R::Blocked { occ_id, state }) => {
            return not_started(
                EventKind::TackerHealNotStarted,
                format!("heal not started: Tacker's operation {occ_id} on the VNF is {state}"),
            );
        }
        Some(R::Direct) => Some(false),
        Some(R::ThroughTacker) => Some(true),
    };
    if let Some(first) = arrived {
        return not_started(
            policy::DecisionKind::InFlight.event_kind(),
            format!("heal not started: operation {first} arrived since the observation"),
        );
    }
    let detail = format!(
        "automatic heal started by reconcile ({}{})",
        if heal.configuration_only {
            "configuration repair"
        } else {
            "server replacement"
        },
        if tacker == Some(true) {
            "; waiting for Tacker's heal"
        } else {
            ""
        }
    );
    HealAdmission::Start { detail, tacker }
}

/// Reads what a heal's admission depends on (the VNF's owner, Tacker's op occs, operations that
/// arrived since the observation), decides it ([`admit_heal`]), then writes it: an event, or
/// the HEAL operation (made Tacker's when the VNF is). Returns the operation's id if started.
fn record_heal(
    tx: &mut Tx<'_>,
    report: &PassReport,
    vnf: &VnfInstanceId,
    heal: &policy::HealPlan,
    now: Timestamp,
) -> crate::store::Result<Option<OpOccId>> {
    let tacker_owned = tx
        .instance(vnf)?
        .is_some_and(|i| i.origin == vnfkeeper_core::tacker::Origin::Tacker);
    // Tacker owns the stack: never a Heat call of vnfkeeper's on it.
    let route = if tacker_owned {
        let occs = tx.reader().tacker_occ_states(vnf.as_str())?;
        Some(vnfkeeper_core::tacker::tacker_heal_route(
            report.tacker_auto_heal,
            &occs,
            heal.configuration_only,
        ))
    } else {
        None
    };
    let arrived = tx.unfinished_operations(vnf)?.first().map(|o| o.id.clone());
    match admit_heal(heal, route.as_ref(), arrived.as_ref()) {
        HealAdmission::NotStarted { kind, message } => {
            let ev = json!({"pass": report.kind.as_str(), "heal": heal});
            tx.append_event(
                &NewEvent {
                    vnf_instance_id: Some(vnf),
                    message: &message,
                    evidence: Some(&ev.to_string()),
                    ..NewEvent::of(kind)
                },
                now,
            )?;
            Ok(None)
        }
        HealAdmission::Start { detail, tacker } => {
            let id = OpOccId::new(uuid::Uuid::new_v4().to_string());
            let params = RequestBody::split(LcmOperationType::Heal, &heal.request().to_string());
            tx.insert_operation(
                &NewOperation {
                    id: &id,
                    vnf_instance_id: vnf,
                    operation: LcmOperationType::Heal,
                    operation_params: &params,
                    vnf_package: None,
                    request_id: None,
                    is_automatic_invocation: true,
                    status_detail: Some(&detail),
                },
                now,
            )?;
            if let Some(wait_for_tacker) = tacker {
                tx.make_tacker_heal(&id, wait_for_tacker)?;
            }
            Ok(Some(id))
        }
    }
}

fn write_memory(
    tx: &mut Tx<'_>,
    vnf: &VnfInstanceId,
    o: &VnfOutcome,
    report: &PassReport,
    now: Timestamp,
) -> crate::store::Result<()> {
    for (vnfc, m) in &o.memory {
        tx.put_reconcile_state(&state_row(vnf.as_str(), vnfc.as_str(), m), now)?;
    }
    let mut row = state_row(vnf.as_str(), "", &o.vnf_memory);
    let old = tx.reader().reconcile_state(vnf, None)?;
    if let Some(b) = report.pv_bound.get(vnf) {
        row.pv_bound = Some(b.clone());
        row.pv_observed_at = Some(report.at);
    } else if let Some(old) = old {
        row.pv_bound = old.pv_bound;
        row.pv_observed_at = old.pv_observed_at;
    }
    tx.put_reconcile_state(&row, now)?;
    tx.prune_reconcile_state(vnf)?;
    Ok(())
}

/// Journald records of a recorded pass: one per decision that is not a repeat (`MESSAGE_ID`
/// heal started / heal deferred / drift detected / reconcile alert, fields `vnf_instance_id`,
/// `vnfc_id`, `vnf_lcm_op_occ_id`, `decision`), one per maintenance pause that ended, and one
/// summary line.
pub fn log(report: &PassReport) {
    use crate::message_ids::{
        MSG_DRIFT_DETECTED, MSG_HEAL_DEFERRED, MSG_HEAL_STARTED, MSG_RECONCILE_ALERT,
    };
    use vnfkeeper_core::policy::DecisionKind as K;
    for o in &report.outcomes {
        for d in o.decisions.iter().filter(|d| !d.repeat) {
            let op = report
                .started
                .iter()
                .find(|(v, _)| *v == d.vnf_instance_id)
                .map(|(_, op)| op.as_str())
                .unwrap_or("");
            let vnfc = d.vnfc_id.as_ref().map(VnfcId::as_str).unwrap_or("");
            let kind = d.kind.event_kind().as_str();
            match d.kind {
                K::HealStarted => {
                    tracing::info!(message_id = MSG_HEAL_STARTED, vnf_instance_id = %d.vnf_instance_id, vnfc_id = vnfc, vnf_lcm_op_occ_id = op, decision = kind, "automatic heal started: {}", d.reason)
                }
                K::DriftDetected => {
                    tracing::warn!(message_id = MSG_DRIFT_DETECTED, vnf_instance_id = %d.vnf_instance_id, vnfc_id = vnfc, decision = kind, "{}", d.reason)
                }
                k if k.is_alert() => {
                    tracing::error!(message_id = MSG_RECONCILE_ALERT, vnf_instance_id = %d.vnf_instance_id, vnfc_id = vnfc, decision = kind, "reconcile alert: {}", d.reason)
                }
                _ => {
                    tracing::info!(message_id = MSG_HEAL_DEFERRED, vnf_instance_id = %d.vnf_instance_id, vnfc_id = vnfc, decision = kind, "heal deferred: {}", d.reason)
                }
            }
        }
    }
    for p in &report.expired_pauses {
        tracing::info!(
            message_id = crate::message_ids::MSG_MAINTENANCE_RESUMED,
            vnf_instance_id = p.scope.as_key(),
            "maintenance pause ended at its until time ({})",
            p.describe()
        );
    }
    let level_info = report.kind == PassKind::Full || !report.started.is_empty();
    let summary = format!(
        "reconcile {} pass: {} VNF instances, {} VNFCs, {} hosts probed, {} API requests, {} heals started, {} ms",
        report.kind.as_str(),
        report.vnfs,
        report.vnfcs,
        report.probed_hosts,
        report.api_requests,
        report.started.len(),
        report.elapsed.as_millis()
    );
    if let Some(e) = &report.cloud_error {
        tracing::warn!(error = %e, "{summary}; cloud listing failed, every VNFC unknown");
    } else if level_info {
        tracing::info!("{summary}");
    } else {
        tracing::debug!("{summary}");
    }
}

/// The report as JSON for `vnfkeeper plan --json`: `{pass, at, vnfs, vnfcs, apiRequests,
/// cloudError, heals: [{vnfInstanceId, request}], decisions: [...]}`.
pub fn report_json(report: &PassReport) -> Value {
    let heals: Vec<Value> = report
        .outcomes
        .iter()
        .filter_map(|o| {
            let h = o.heal.as_ref()?;
            Some(json!({"vnfInstanceId": o.vnf_instance_id, "request": h.request()}))
        })
        .collect();
    let decisions: Vec<Value> = report
        .outcomes
        .iter()
        .flat_map(|o| o.decisions.iter())
        .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
        .collect();
    json!({
        "pass": report.kind.as_str(),
        "at": report.at.to_rfc3339(),
        "vnfs": report.vnfs,
        "vnfcs": report.vnfcs,
        "apiRequests": report.api_requests,
        "cloudError": report.cloud_error,
        "heals": heals,
        "decisions": decisions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnfkeeper_core::tacker::TackerHealRoute as R;

    fn heal(configuration_only: bool) -> policy::HealPlan {
        policy::HealPlan {
            vnfc_ids: vec!["w1".into()],
            configuration_only,
            cause: "test".into(),
        }
    }

    /// Tacker's route decides before anything else; an operation that arrived since the
    /// observation then wins over the heal; otherwise it starts, waiting for Tacker only on
    /// that route.
    #[test]
    fn heal_admission_follows_the_route_then_the_operations_that_arrived() {
        let not_started = |a: HealAdmission| match a {
            HealAdmission::NotStarted { kind, message } => (kind, message),
            other => panic!("started: {other:?}"),
        };
        let (kind, msg) = not_started(admit_heal(&heal(false), Some(&R::Off), None));
        assert_eq!(kind, EventKind::TackerHealNotStarted);
        assert!(msg.contains("tacker.auto_heal is off"), "{msg}");
        let blocked = R::Blocked {
            occ_id: "occ-1".into(),
            state: vnfkeeper_core::model::OperationState::Processing,
        };
        let (_, msg) = not_started(admit_heal(
            &heal(false),
            Some(&blocked),
            Some(&OpOccId::from("op-9")),
        ));
        assert!(msg.contains("occ-1") && msg.contains("PROCESSING"), "{msg}");
        let (kind, msg) = not_started(admit_heal(&heal(true), None, Some(&OpOccId::from("op-9"))));
        assert_eq!(kind, policy::DecisionKind::InFlight.event_kind());
        assert!(msg.contains("operation op-9 arrived"), "{msg}");

        assert_eq!(
            admit_heal(&heal(false), Some(&R::ThroughTacker), None),
            HealAdmission::Start {
                detail: "automatic heal started by reconcile (server replacement; waiting for \
                         Tacker's heal)"
                    .into(),
                tacker: Some(true),
            }
        );
        assert_eq!(
            admit_heal(&heal(true), Some(&R::Direct), None),
            HealAdmission::Start {
                detail: "automatic heal started by reconcile (configuration repair)".into(),
                tacker: Some(false),
            }
        );
        assert!(matches!(
            admit_heal(&heal(false), None, None),
            HealAdmission::Start { tacker: None, .. }
        ));
    }

    /// The audit view's `alert` column (migrations) agrees with `DecisionKind::is_alert` for
    /// every decision kind, so `SELECT … WHERE alert = 1` finds exactly what needs an operator.
    #[test]
    fn the_views_alert_flag_is_the_policys() {
        use policy::DecisionKind::*;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = crate::store::Store::open(&path).unwrap();
        let kinds = [
            HealStarted,
            DriftDetected,
            DeferredUnknown,
            DeferredGrace,
            DeferredBackoff,
            InFlight,
            ShortCircuit,
            BudgetExhausted,
            PvBoundBlock,
            Paused,
            RebuildRefused,
        ];
        let now = Timestamp::parse("2026-11-27T00:00:00Z").unwrap();
        store
            .write(|tx| {
                for k in kinds {
                    tx.append_event(
                        &NewEvent {
                            message: "m",
                            ..NewEvent::of(k.event_kind())
                        },
                        now,
                    )?;
                }
                Ok(())
            })
            .unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        for k in kinds {
            let alert: i64 = conn
                .query_row(
                    "SELECT alert FROM reconcile_decisions WHERE 'RECONCILE_' || decision = ?1",
                    [k.event_kind().as_str()],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(alert == 1, k.is_alert(), "{k:?}");
        }
    }
}
