//! Remediation policy (pure: no I/O, no clock — `now` is passed in): from one pass's
//! observations of a VNF instance and the loop's memory, decide per VNFC whether to heal, wait or
//! alert, and return the updated memory.
//!
//! The safety rules are named functions in `rules`; [`decide`] applies them in a fixed order
//! (see its documentation). In short:
//! - **Fail closed**: an API error or an unreadable probe makes a VNFC *unknown*, never unhealthy
//!   (as Cluster API's MachineHealthCheck, which errors out rather than judge from stale data).
//! - **Confirmation**: Nova `ERROR` or a server missing from a successful listing is confirmed at
//!   once. Any other failed observation (Nova `SHUTOFF`…, a node `NotReady`) acts only after at
//!   least two consecutive failed observations spanning `grace` (Senlin/masakari style).
//!   Transitional Nova states (`BUILD`, `REBUILD`, …) are waited for.
//! - **Startup grace** after a server was created or replaced applies to probe-based findings
//!   only (MHC `nodeStartupTimeout`, magnum `check-delay-after-add`).
//! - **Short-circuit**: more than `max_unhealthy` (a count, or a percentage of the VNF's VNFCs
//!   rounded down, like MHC `maxUnhealthy`) unhealthy at once → heal nothing, alert.
//! - **One heal per VNF**: a VNF with any unfinished operation is left alone; a pass starts at
//!   most one HEAL per VNF (the storage server alone, being stateful).
//! - **Retry budget** per VNFC: attempt n (n ≥ 2) only after `retry_backoff × 2^(n-1)` since
//!   the last automatic heal of that VNFC; after `retry_budget` attempts stop and alert; a VNFC
//!   healthy for `min_healthy` gets its budget back (Cluster API KCP `maxRetry`/`retryPeriod`/
//!   `minHealthyPeriod`).
//! - **Keep data**: no automatic replacement of the storage server while one of its PVs is
//!   `Bound` (alert instead); unknown PV phases defer it.
//! - **Repair, not rebuild**: drift that needs no new VM (a lost export line or mount, a missing
//!   NFS client, a missing PV, a node not joined) is a configuration-only heal.
//! - **Maintenance pause**: a VNF under a pause in force (its own or `--all`) is observed and
//!   recorded as usual, but a heal it would get is recorded as `PAUSED` instead, spending no
//!   attempt of the retry budget (Cluster API's `paused`).

pub mod changes;
pub mod kubectl;
mod rules;

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::{MaintenancePause, OpOccId, Timestamp, VnfInstanceId, VnfcId};
use rules::{Candidate, Ruling};

/// Policy settings (from `[reconcile]` in the configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Shortest span of ≥ 2 consecutive failed observations before an unconfirmed failure acts.
    pub grace: Duration,
    /// After a server appeared, probe-based findings are not acted on for this long.
    pub startup_grace: Duration,
    /// Short-circuit threshold per VNF.
    pub max_unhealthy: MaxUnhealthy,
    /// Automatic heals per VNFC before the loop stops and alerts.
    pub retry_budget: u32,
    /// Backoff base: attempt n waits `retry_backoff × 2^(n-1)` after the previous heal.
    pub retry_backoff: Duration,
    /// A VNFC healthy this long gets its retry budget back.
    pub min_healthy: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(300),
            startup_grace: Duration::from_secs(600),
            max_unhealthy: MaxUnhealthy::Percent(40),
            retry_budget: 3,
            retry_backoff: Duration::from_secs(600),
            min_healthy: Duration::from_secs(3600),
        }
    }
}

/// `max_unhealthy`: an absolute count or a percentage of the VNF's VNFCs (rounded down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnhealthy {
    /// At most this many unhealthy VNFCs.
    Count(u32),
    /// At most this percentage (0–100) of the VNF's VNFCs, rounded down.
    Percent(u32),
}

impl MaxUnhealthy {
    /// How many unhealthy VNFCs of `total` are still allowed (heals happen only up to this).
    pub fn allowed(self, total: usize) -> usize {
        match self {
            MaxUnhealthy::Count(n) => n as usize,
            MaxUnhealthy::Percent(p) => total * p as usize / 100,
        }
    }

    /// Parses `"40%"` or `"2"`. Errors: [`MaxUnhealthyError`], naming the accepted forms.
    pub fn parse(text: &str) -> Result<Self, MaxUnhealthyError> {
        let t = text.trim();
        if let Some(p) = t.strip_suffix('%') {
            match p.trim().parse::<u32>() {
                Ok(v) if v <= 100 => Ok(MaxUnhealthy::Percent(v)),
                _ => Err(MaxUnhealthyError::Percentage(text.to_owned())),
            }
        } else {
            t.parse::<u32>()
                .map(MaxUnhealthy::Count)
                .map_err(|_| MaxUnhealthyError::Neither(text.to_owned()))
        }
    }
}

/// Why a `max_unhealthy` setting was refused ([`MaxUnhealthy::parse`]); quotes it as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaxUnhealthyError {
    /// A percentage outside 0%–100% (or not a whole number).
    #[error("`{0}`: a percentage must be 0% to 100%, e.g. \"40%\"")]
    Percentage(String),
    /// Neither a count nor a percentage.
    #[error("`{0}`: expected a count (e.g. 2) or a percentage (e.g. \"40%\")")]
    Neither(String),
}

impl std::fmt::Display for MaxUnhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxUnhealthy::Count(n) => write!(f, "{n}"),
            MaxUnhealthy::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// What a VNFC is to its flavour; the policy acts on its traits (a stateful VNFC is healed
/// alone, never while a PersistentVolume is Bound).
pub use crate::model::Role;

/// What the cloud listings say about a VNFC's server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum CloudView {
    /// `ACTIVE`, ports and volumes in place.
    Healthy,
    /// A listing failed: nothing can be said.
    Unknown(String),
    /// `BUILD`, `REBUILD`, `REBOOT`, … (or no server yet): wait.
    Transitional(String),
    /// A failed observation that needs confirmation (`SHUTOFF`, a port or volume gone, …).
    Suspect(String),
    /// Confirmed failure: Nova `ERROR`, or the server missing from a successful listing.
    Confirmed(String),
}

/// The verdict of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Check exit 0: in place.
    InPlace,
    /// Check exit 10 (or PV missing): configuration drift, repairable without a new VM.
    Drift,
    /// A readable failure that only a new server fixes (node `NotReady`).
    Failed,
    /// SSH failure, timeout, unexpected exit: nothing can be said.
    Unknown,
}

/// One probe's finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The check, e.g. `nfs.exports`, `k8s.node_ready`, `pv.registered:nfs-pv1`.
    pub check: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// The script's last line or the error (no secrets).
    pub detail: String,
}

/// What the loop remembers about one VNFC between passes (see `reconcile_state`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// Server id last seen.
    pub server_id: Option<String>,
    /// When that server appeared.
    pub server_since: Option<Timestamp>,
    /// Consecutive failed cloud observations.
    pub cloud_failures: u32,
    /// First of them.
    pub cloud_first_failure_at: Option<Timestamp>,
    /// Consecutive failed probes.
    pub probe_failures: u32,
    /// First of them.
    pub probe_first_failure_at: Option<Timestamp>,
    /// Start of the current healthy stretch.
    pub healthy_since: Option<Timestamp>,
    /// Automatic heals since the budget was last reset.
    pub heal_attempts: u32,
    /// Last automatic heal.
    pub last_heal_at: Option<Timestamp>,
    /// Kind and reason of the last recorded decision (for de-duplicating audit rows).
    pub last_decision: Option<String>,
}

/// One VNFC as observed in this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct VnfcInput {
    /// vnfcInstanceId.
    pub vnfc_id: VnfcId,
    /// VDU.
    pub vdu_id: String,
    /// Role in the cluster.
    pub role: Role,
    /// Nova server id recorded for the VNFC.
    pub server_id: Option<String>,
    /// When the engine recorded that server (the VNFC row's `updated_at`); starts the startup
    /// grace when the loop sees a server id for the first time.
    pub recorded_at: Timestamp,
    /// Cloud verdict.
    pub cloud: CloudView,
    /// Probe findings; `None` when not probed in this pass (cloud-only pass, or no pinned key).
    pub probes: Option<Vec<Finding>>,
    /// Memory from earlier passes.
    pub memory: Memory,
    /// Why the VNF's flavour refuses to rebuild this VNFC's server alone
    /// (`MgmtDriver::rebuild_refusal`), if it does.
    pub rebuild_refused: Option<String>,
}

/// PersistentVolume phases of the VNF's cluster, as known to the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PvView {
    /// The VNF registers no PVs.
    NotApplicable,
    /// Never read successfully.
    Unknown,
    /// Read at `observed_at`: names of the Bound PVs.
    Known {
        /// Bound PV names.
        bound: Vec<String>,
        /// When they were read.
        observed_at: Timestamp,
    },
}

/// One VNF instance as observed in this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct VnfInput {
    /// vnfInstanceId.
    pub vnf_instance_id: VnfInstanceId,
    /// Operations of the instance not in a final state (vnfLcmOpOccId), oldest first.
    pub unfinished_operations: Vec<OpOccId>,
    /// Its VNFCs.
    pub vnfcs: Vec<VnfcInput>,
    /// PV phases.
    pub pvs: PvView,
    /// VNF-level memory (`last_decision` only).
    pub memory: Memory,
    /// `"full"` (with probes) or `"cloud"` — recorded in the evidence.
    pub pass: &'static str,
    /// The maintenance pause covering the VNF (see `model::pause::in_force`); it holds heals
    /// only while [`MaintenancePause::active_at`] the pass's `now`.
    pub pause: Option<MaintenancePause>,
}

/// The kind of a decision; each is one audit row (`event.kind` = `RECONCILE_<KIND>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DecisionKind {
    /// A HEAL operation is started (see [`HealPlan`]).
    HealStarted,
    /// Configuration drift found by a probe (accompanies a configuration-only heal or a deferral).
    DriftDetected,
    /// Health unknown (API error, SSH failure): nothing done.
    DeferredUnknown,
    /// A failure not yet confirmed, a transitional state, or within the startup grace.
    DeferredGrace,
    /// A further attempt waits for its backoff.
    DeferredBackoff,
    /// The VNF has an unfinished operation, or another heal of it goes first.
    InFlight,
    /// More than `max_unhealthy` unhealthy: nothing healed (alert).
    ShortCircuit,
    /// Retry budget used up (alert).
    BudgetExhausted,
    /// Storage server not replaced while a PV is Bound (alert).
    PvBoundBlock,
    /// A heal was called for, but the VNF is under a maintenance pause: nothing started.
    Paused,
    /// A server rebuild the VNF's flavour refuses (a kubespray master alone): nothing started
    /// (alert).
    RebuildRefused,
}

impl DecisionKind {
    /// `event.kind` of the audit row.
    pub fn event_kind(self) -> crate::model::EventKind {
        match self {
            DecisionKind::HealStarted => crate::model::EventKind::ReconcileHealStarted,
            DecisionKind::DriftDetected => crate::model::EventKind::ReconcileDriftDetected,
            DecisionKind::DeferredUnknown => crate::model::EventKind::ReconcileDeferredUnknown,
            DecisionKind::DeferredGrace => crate::model::EventKind::ReconcileDeferredGrace,
            DecisionKind::DeferredBackoff => crate::model::EventKind::ReconcileDeferredBackoff,
            DecisionKind::InFlight => crate::model::EventKind::ReconcileInFlight,
            DecisionKind::ShortCircuit => crate::model::EventKind::ReconcileShortCircuit,
            DecisionKind::BudgetExhausted => crate::model::EventKind::ReconcileBudgetExhausted,
            DecisionKind::PvBoundBlock => crate::model::EventKind::ReconcilePvBoundBlock,
            DecisionKind::Paused => crate::model::EventKind::ReconcilePaused,
            DecisionKind::RebuildRefused => crate::model::EventKind::ReconcileRebuildRefused,
        }
    }

    /// Whether an operator must act (alert).
    pub fn is_alert(self) -> bool {
        matches!(
            self,
            DecisionKind::ShortCircuit
                | DecisionKind::BudgetExhausted
                | DecisionKind::PvBoundBlock
                | DecisionKind::RebuildRefused
        )
    }
}

/// One decision with its reason and evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// vnfInstanceId.
    pub vnf_instance_id: VnfInstanceId,
    /// The VNFC concerned (`None` for a VNF-level decision).
    pub vnfc_id: Option<VnfcId>,
    /// Kind.
    pub kind: DecisionKind,
    /// One line for humans.
    pub reason: String,
    /// The facts behind it (JSON object).
    pub evidence: Value,
    /// Same kind and reason (digits aside) as the last decision recorded for this VNFC/VNF: the
    /// daemon does not write it again, so a lasting condition is one audit row, not one per pass
    /// (a started heal is never a repeat).
    pub repeat: bool,
}

/// A HEAL to start: the HealVnfRequest of the automatic operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealPlan {
    /// `vnfcInstanceId[]`.
    pub vnfc_ids: Vec<VnfcId>,
    /// `additionalParams.configuration_only`: rerun the configuration steps, no new server.
    pub configuration_only: bool,
    /// `cause`: one line.
    pub cause: String,
}

impl HealPlan {
    /// The SOL002/SOL003 HealVnfRequest body stored as the operation's `operation_params`:
    /// `{"vnfcInstanceId": [...], "cause": "...", "additionalParams": {"configuration_only": true}}`
    /// (`additionalParams` only for a configuration-only heal).
    pub fn request(&self) -> Value {
        let mut v = json!({"vnfcInstanceId": self.vnfc_ids, "cause": self.cause});
        if self.configuration_only {
            v["additionalParams"] = json!({"configuration_only": true});
        }
        v
    }
}

/// The policy's answer for one VNF instance.
#[derive(Debug, Clone, PartialEq)]
pub struct VnfOutcome {
    /// vnfInstanceId.
    pub vnf_instance_id: VnfInstanceId,
    /// Decisions, VNF-level first.
    pub decisions: Vec<Decision>,
    /// Updated memory per VNFC (vnfc id, memory); empty when the VNF was skipped (in flight).
    pub memory: Vec<(VnfcId, Memory)>,
    /// Updated VNF-level memory.
    pub vnf_memory: Memory,
    /// The heal to start, if any.
    pub heal: Option<HealPlan>,
}

/// Health of one VNFC after this pass's observations (see [`rules::health`]).
#[derive(Debug, Clone, PartialEq)]
enum Status {
    /// Nothing wrong.
    Healthy,
    /// Nothing can be said (API error, unreadable probe): why. Never unhealthy.
    Unknown(String),
    /// Not acted on yet (unconfirmed failure, transitional state, startup grace); `failing`
    /// counts towards `max_unhealthy`.
    Waiting { reason: String, failing: bool },
    /// A heal is called for.
    Needs(Remedy),
}

/// What heals a VNFC.
#[derive(Debug, Clone, PartialEq)]
enum Remedy {
    /// A new server (HEAL without `configuration_only`): why.
    Rebuild(String),
    /// Rerun the configuration steps, no new server (HEAL with `configuration_only`): one line
    /// per drifted check.
    Repair(Vec<String>),
}

impl Remedy {
    /// One line saying why, for the heal's `cause` and its audit row.
    fn why(&self) -> String {
        match self {
            Remedy::Rebuild(why) => why.clone(),
            Remedy::Repair(drift) => drift.join("; "),
        }
    }
}

/// One VNFC after the observation rules: its input, updated memory, status, and the evidence
/// its decisions carry.
#[derive(Debug)]
struct Row<'a> {
    vnfc: &'a VnfcInput,
    memory: Memory,
    status: Status,
    evidence: Value,
}

/// Decides for one VNF instance. Pure: same inputs, same outcome.
///
/// The safety rules (module `rules`, one function each) apply in this order:
/// 1. **One operation per VNF** (`rules::one_operation_per_vnf`): a VNF with an unfinished
///    operation is skipped (one VNF-level `IN_FLIGHT` unless every server is healthy), its
///    memory untouched.
/// 2. **Observe** each VNFC (`observe`): a new server restarts the counters and the startup
///    grace; cloud and probe failures are counted; the status follows from fail-closed, grace,
///    startup grace, and repair-vs-rebuild; a healthy stretch of `min_healthy` gives the retry
///    budget back.
/// 3. **Storm control** (`rules::storm_control`): more than `max_unhealthy` → no heal at all.
/// 4. **Per VNFC**: unknown and waiting VNFCs are deferred, drift is reported; a VNFC needing a
///    heal then passes the retry budget, the backoff, and keep-data (PV Bound) in that order.
/// 5. **Maintenance pause** (`rules::paused`): under a pause in force, every candidate is
///    recorded as `PAUSED` and no heal starts (no attempt spent).
/// 6. **One heal per VNF** (`rules::one_heal_per_vnf`): the storage server alone, else every
///    rebuild, else every repair; the others are told to wait.
/// 7. **Repeats** (`rules::mark_repeats`): a decision equal to the last recorded one is marked,
///    so a lasting condition is one audit row.
///
/// Decisions come VNF-level first, then per VNFC in that order of rules.
pub fn decide(p: &Policy, vnf: &VnfInput, now: Timestamp) -> VnfOutcome {
    let vnf_id = &vnf.vnf_instance_id;
    let mut vnf_memory = vnf.memory.clone();
    let mut decisions = Vec::new();

    // 1. One operation per VNF.
    if let Some(skip) = rules::one_operation_per_vnf(vnf) {
        decisions.extend(skip.map(|r| rules::vnf_decision(&mut vnf_memory, vnf_id, r)));
        return VnfOutcome {
            vnf_instance_id: vnf_id.clone(),
            decisions,
            memory: Vec::new(),
            vnf_memory,
            heal: None,
        };
    }

    // 2. Observe.
    let rows: Vec<Row<'_>> = vnf
        .vnfcs
        .iter()
        .map(|v| observe(p, v, vnf.pass, now))
        .collect();

    // 3. Storm control.
    let statuses: Vec<(&str, &Status)> = rows
        .iter()
        .map(|r| (r.vnfc.vnfc_id.as_str(), &r.status))
        .collect();
    let short_circuit = rules::storm_control(p, &statuses, vnf.pass);
    match &short_circuit {
        Some(r) => decisions.push(rules::vnf_decision(&mut vnf_memory, vnf_id, r.clone())),
        None => vnf_memory.last_decision = None,
    }

    // 4. Per VNFC: deferrals, drift, and the gates before a heal.
    let mut per_vnfc: Vec<(usize, Decision)> = Vec::new();
    let mut candidates = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let mut say = |r: Ruling| per_vnfc.push((i, row_decision(vnf_id, row, r)));
        let remedy = match &row.status {
            Status::Healthy => continue,
            Status::Unknown(why) => {
                say(rules::fail_closed(why));
                continue;
            }
            Status::Waiting { reason, .. } => {
                say(Ruling::new(DecisionKind::DeferredGrace, reason.clone()));
                continue;
            }
            Status::Needs(remedy) => remedy,
        };
        if let Remedy::Repair(drift) = remedy {
            say(rules::drift_detected(drift));
        }
        if short_circuit.is_some() {
            continue;
        }
        let held = rules::retry_budget(p, &row.memory)
            .or_else(|| rules::backoff(p, &row.memory, now))
            .or_else(|| rules::keep_data(row.vnfc.role, remedy, &vnf.pvs))
            .or_else(|| rules::flavour_refuses(remedy, row.vnfc.rebuild_refused.as_deref()));
        match held {
            Some(r) => say(r),
            None => candidates.push(Candidate {
                index: i,
                role: row.vnfc.role,
                remedy: remedy.clone(),
            }),
        }
    }

    // 5. Maintenance pause.
    if let Some(pause) = vnf.pause.as_ref().filter(|p| p.active_at(now)) {
        for c in candidates.drain(..) {
            let row = &rows[c.index];
            let mut d = row_decision(vnf_id, row, rules::paused(pause, &c.remedy));
            d.evidence["pause"] = pause_json(pause);
            per_vnfc.push((c.index, d));
        }
    }

    // 6. One heal per VNF.
    let mut memory: Vec<Memory> = rows.iter().map(|r| r.memory.clone()).collect();
    let heal = rules::one_heal_per_vnf(&candidates)
        .map(|sel| start_heal(p, vnf_id, &rows, &sel, &mut memory, &mut per_vnfc, now));

    // 7. Repeats.
    rules::mark_repeats(&mut per_vnfc, &mut memory);
    decisions.extend(per_vnfc.into_iter().map(|(_, d)| d));
    VnfOutcome {
        vnf_instance_id: vnf_id.clone(),
        decisions,
        memory: rows
            .iter()
            .map(|r| r.vnfc.vnfc_id.clone())
            .zip(memory)
            .collect(),
        vnf_memory,
        heal,
    }
}

/// Step 2 of [`decide`] for one VNFC: the observation rules in order, then the evidence of its
/// decisions (taken after the memory was updated).
fn observe<'a>(p: &Policy, v: &'a VnfcInput, pass: &str, now: Timestamp) -> Row<'a> {
    let mut m = rules::follow_server(&v.memory, v);
    rules::count_cloud_observation(&mut m, &v.cloud, now);
    let probes = rules::probe_lines(v);
    rules::count_probe_result(&mut m, probes.as_ref(), now);
    let status = rules::health(p, &v.cloud, &m, &probes.unwrap_or_default(), now);
    rules::healthy_stretch(p, &mut m, &status, now);
    let evidence = evidence(pass, v, &m);
    Row {
        vnfc: v,
        memory: m,
        status,
        evidence,
    }
}

/// Step 5 of [`decide`]: spends one attempt of each chosen VNFC's budget, adds `HEAL_STARTED`
/// for each chosen VNFC and `IN_FLIGHT` for each that waits, and returns the HEAL to start.
fn start_heal(
    p: &Policy,
    vnf_id: &VnfInstanceId,
    rows: &[Row<'_>],
    sel: &rules::Selection,
    memory: &mut [Memory],
    out: &mut Vec<(usize, Decision)>,
    now: Timestamp,
) -> HealPlan {
    let ids: Vec<VnfcId> = sel
        .chosen
        .iter()
        .map(|(i, _)| rows[*i].vnfc.vnfc_id.clone())
        .collect();
    let cause = format!(
        "vnfkeeper reconcile: {}",
        sel.chosen
            .iter()
            .map(|(i, why)| format!(
                "{} ({}): {why}",
                rows[*i].vnfc.vnfc_id, rows[*i].vnfc.vdu_id
            ))
            .collect::<Vec<_>>()
            .join("; ")
    )
    .replace(['\n', '\r'], " ");
    let what = if sel.configuration_only {
        "configuration repair"
    } else {
        "server replacement"
    };
    for (i, why) in &sel.chosen {
        let m = &mut memory[*i];
        rules::spend_attempt(m, now);
        let mut evidence = rows[*i].evidence.clone();
        evidence["heal"] = json!({"vnfcInstanceId": ids, "configuration_only": sel.configuration_only,
                                  "attempt": m.heal_attempts, "retry_budget": p.retry_budget});
        out.push((
            *i,
            Decision {
                evidence,
                ..row_decision(
                    vnf_id,
                    &rows[*i],
                    Ruling::new(
                        DecisionKind::HealStarted,
                        format!(
                            "{what} (automatic heal {} of {}): {why}",
                            m.heal_attempts, p.retry_budget
                        ),
                    ),
                )
            },
        ));
    }
    for i in &sel.waiting {
        out.push((
            *i,
            row_decision(
                vnf_id,
                &rows[*i],
                Ruling::new(
                    DecisionKind::InFlight,
                    format!(
                        "another heal of this VNF goes first ({}); one heal per VNF at a time",
                        ids.join(", ")
                    ),
                ),
            ),
        ));
    }
    HealPlan {
        vnfc_ids: ids,
        configuration_only: sel.configuration_only,
        cause,
    }
}

/// A VNFC's decision from a ruling, with the row's evidence (`repeat` is set later by
/// [`rules::mark_repeats`]).
fn row_decision(vnf_id: &VnfInstanceId, row: &Row<'_>, r: Ruling) -> Decision {
    Decision {
        vnf_instance_id: vnf_id.clone(),
        vnfc_id: Some(row.vnfc.vnfc_id.clone()),
        kind: r.kind,
        reason: r.reason,
        evidence: row.evidence.clone(),
        repeat: false,
    }
}

/// The facts behind a VNFC's decisions: the pass, the VNFC, its cloud view and probes, and the
/// loop's counters after this pass (times RFC 3339 or `null`).
fn evidence(pass: &str, v: &VnfcInput, m: &Memory) -> Value {
    json!({
        "pass": pass,
        "vnfc_id": v.vnfc_id,
        "vdu_id": v.vdu_id,
        "role": v.role,
        "server_id": v.server_id,
        "cloud": v.cloud,
        "probes": v.probes,
        "counters": {
            "cloud_failures": m.cloud_failures,
            "cloud_first_failure_at": ts(m.cloud_first_failure_at),
            "probe_failures": m.probe_failures,
            "probe_first_failure_at": ts(m.probe_first_failure_at),
            "server_since": ts(m.server_since),
            "healthy_since": ts(m.healthy_since),
            "heal_attempts": m.heal_attempts,
            "last_heal_at": ts(m.last_heal_at),
        },
    })
}

/// A pause as evidence: `{"scope", "paused_by", "reason", "since", "until"}` (`scope` is the
/// vnfInstanceId or `*`; times RFC 3339 or `null`).
pub fn pause_json(p: &MaintenancePause) -> Value {
    json!({
        "scope": p.scope.as_key(),
        "paused_by": p.paused_by,
        "reason": p.reason,
        "since": p.since.to_rfc3339(),
        "until": ts(p.until),
    })
}

fn ts(t: Option<Timestamp>) -> Value {
    t.map(|t| Value::String(t.to_rfc3339()))
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
