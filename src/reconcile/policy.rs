//! Remediation policy (pure: no I/O, no clock — `now` is passed in): from one pass's
//! observations of a VNF instance and the loop's memory, decide per VNFC whether to heal, wait or
//! alert, and return the updated memory.
//!
//! Rules (DESIGN.md §5, issue 5 part 4; sources in research/peers.md §1.2, §1.3, §7):
//! - **Fail closed**: an API error or an unreadable probe makes a VNFC *unknown*, never unhealthy
//!   (Cluster API MHC errors out instead of judging from stale data; CAPO #2085).
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
//!   healthy for `min_healthy` gets its budget back (KCP `maxRetry`/`retryPeriod`/
//!   `minHealthyPeriod`, cluster-api#12553).
//! - **Keep data**: no automatic replacement of the storage server while one of its PVs is
//!   `Bound` (alert instead); unknown PV phases defer it.
//! - **Repair, not rebuild**: drift that needs no new VM (a lost export line or mount, a missing
//!   NFS client, a missing PV, a node not joined) is a configuration-only heal.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::Timestamp;

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

    /// Parses `"40%"` or `"2"`. Errors: a message naming the accepted forms.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if let Some(p) = t.strip_suffix('%') {
            match p.trim().parse::<u32>() {
                Ok(v) if v <= 100 => Ok(MaxUnhealthy::Percent(v)),
                _ => Err(format!(
                    "`{text}`: a percentage must be 0% to 100%, e.g. \"40%\""
                )),
            }
        } else {
            t.parse::<u32>().map(MaxUnhealthy::Count).map_err(|_| {
                format!("`{text}`: expected a count (e.g. 2) or a percentage (e.g. \"40%\")")
            })
        }
    }
}

impl std::fmt::Display for MaxUnhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxUnhealthy::Count(n) => write!(f, "{n}"),
            MaxUnhealthy::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// What a VNFC is, by the VDU that owns its role's `ssh_cp_name` (k8s_cluster_installation_param).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The first (oldest) master: runs kubectl for the cluster.
    FirstMaster,
    /// Another master.
    Master,
    /// A worker.
    Worker,
    /// The NFS storage server (stateful: healed alone, never while a PV is Bound).
    StorageServer,
    /// No cluster role (a VNF without k8s_cluster_installation_param, or an unnamed VDU).
    Other,
}

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
    pub vnfc_id: String,
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
    pub vnf_instance_id: String,
    /// Operations of the instance not in a final state (vnfLcmOpOccId), oldest first.
    pub unfinished_operations: Vec<String>,
    /// Its VNFCs.
    pub vnfcs: Vec<VnfcInput>,
    /// PV phases.
    pub pvs: PvView,
    /// VNF-level memory (`last_decision` only).
    pub memory: Memory,
    /// `"full"` (with probes) or `"cloud"` — recorded in the evidence.
    pub pass: &'static str,
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
}

impl DecisionKind {
    /// `event.kind` of the audit row.
    pub fn event_kind(self) -> &'static str {
        match self {
            DecisionKind::HealStarted => "RECONCILE_HEAL_STARTED",
            DecisionKind::DriftDetected => "RECONCILE_DRIFT_DETECTED",
            DecisionKind::DeferredUnknown => "RECONCILE_DEFERRED_UNKNOWN",
            DecisionKind::DeferredGrace => "RECONCILE_DEFERRED_GRACE",
            DecisionKind::DeferredBackoff => "RECONCILE_DEFERRED_BACKOFF",
            DecisionKind::InFlight => "RECONCILE_IN_FLIGHT",
            DecisionKind::ShortCircuit => "RECONCILE_SHORT_CIRCUIT",
            DecisionKind::BudgetExhausted => "RECONCILE_BUDGET_EXHAUSTED",
            DecisionKind::PvBoundBlock => "RECONCILE_PV_BOUND_BLOCK",
        }
    }

    /// Whether an operator must act (alert).
    pub fn is_alert(self) -> bool {
        matches!(
            self,
            DecisionKind::ShortCircuit | DecisionKind::BudgetExhausted | DecisionKind::PvBoundBlock
        )
    }
}

/// One decision with its reason and evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// vnfInstanceId.
    pub vnf_instance_id: String,
    /// The VNFC concerned (`None` for a VNF-level decision).
    pub vnfc_id: Option<String>,
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
    pub vnfc_ids: Vec<String>,
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
    pub vnf_instance_id: String,
    /// Decisions, VNF-level first.
    pub decisions: Vec<Decision>,
    /// Updated memory per VNFC (vnfc id, memory); empty when the VNF was skipped (in flight).
    pub memory: Vec<(String, Memory)>,
    /// Updated VNF-level memory.
    pub vnf_memory: Memory,
    /// The heal to start, if any.
    pub heal: Option<HealPlan>,
}

/// Health of one VNFC after this pass.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Healthy,
    Unknown(String),
    /// Waiting; `failing` counts towards max_unhealthy.
    Waiting {
        reason: String,
        failing: bool,
    },
    Replace(String),
    Repair(Vec<String>),
}

fn since(now: Timestamp, t: Timestamp) -> Duration {
    (now.0 - t.0).to_std().unwrap_or(Duration::ZERO)
}

fn ts(t: Option<Timestamp>) -> Value {
    t.map(|t| Value::String(t.to_rfc3339()))
        .unwrap_or(Value::Null)
}

/// Decides for one VNF instance. Pure: same inputs, same outcome.
pub fn decide(p: &Policy, vnf: &VnfInput, now: Timestamp) -> VnfOutcome {
    let vnf_id = vnf.vnf_instance_id.clone();
    let mut decisions = Vec::new();
    let mut vnf_memory = vnf.memory.clone();

    // One operation per VNF: while anything is unfinished the VNF is left alone.
    if !vnf.unfinished_operations.is_empty() {
        let not_healthy: Vec<Value> = vnf
            .vnfcs
            .iter()
            .filter(|v| v.cloud != CloudView::Healthy)
            .map(|v| json!({"vnfc_id": v.vnfc_id, "cloud": v.cloud}))
            .collect();
        if not_healthy.is_empty() {
            return VnfOutcome {
                vnf_instance_id: vnf_id,
                decisions,
                memory: Vec::new(),
                vnf_memory,
                heal: None,
            };
        }
        let reason = format!(
            "operation {} of this VNF is not finished; nothing is judged until it is",
            vnf.unfinished_operations[0]
        );
        push_vnf(
            &mut decisions,
            &mut vnf_memory,
            &vnf_id,
            DecisionKind::InFlight,
            reason,
            json!({"pass": vnf.pass, "unfinished_operations": vnf.unfinished_operations,
                   "not_healthy": not_healthy}),
        );
        return VnfOutcome {
            vnf_instance_id: vnf_id,
            decisions,
            memory: Vec::new(),
            vnf_memory,
            heal: None,
        };
    }

    // 1. Update the memory with this pass's observations and derive each VNFC's status.
    let mut rows = Vec::new();
    for v in &vnf.vnfcs {
        let mut m = v.memory.clone();
        if m.server_id != v.server_id {
            // A new server (created or replaced): fresh counters, startup grace from its record.
            let heal_attempts = m.heal_attempts;
            let last_heal_at = m.last_heal_at;
            m = Memory {
                server_id: v.server_id.clone(),
                server_since: Some(v.recorded_at),
                heal_attempts,
                last_heal_at,
                last_decision: m.last_decision,
                ..Memory::default()
            };
        }
        match &v.cloud {
            CloudView::Healthy => {
                m.cloud_failures = 0;
                m.cloud_first_failure_at = None;
            }
            CloudView::Suspect(_) | CloudView::Confirmed(_) => {
                m.cloud_failures += 1;
                m.cloud_first_failure_at.get_or_insert(now);
            }
            CloudView::Unknown(_) | CloudView::Transitional(_) => {}
        }
        let cloud_ok = v.cloud == CloudView::Healthy;
        let mut drift = Vec::new();
        let mut probe_unknown = Vec::new();
        let mut probe_failed = Vec::new();
        if let (true, Some(findings)) = (cloud_ok, &v.probes) {
            for f in findings {
                let line = format!("{}: {}", f.check, f.detail);
                match f.verdict {
                    Verdict::InPlace => {}
                    Verdict::Drift => drift.push(line),
                    Verdict::Failed => probe_failed.push(line),
                    Verdict::Unknown => probe_unknown.push(line),
                }
            }
            if !probe_failed.is_empty() {
                m.probe_failures += 1;
                m.probe_first_failure_at.get_or_insert(now);
            } else if probe_unknown.is_empty() {
                m.probe_failures = 0;
                m.probe_first_failure_at = None;
            }
        }
        let in_startup = m
            .server_since
            .is_some_and(|s| since(now, s) < p.startup_grace);
        let confirmed_after = |n: u32, first: Option<Timestamp>| {
            n >= 2 && first.is_some_and(|f| since(now, f) >= p.grace)
        };
        let status = match &v.cloud {
            CloudView::Unknown(why) => Status::Unknown(why.clone()),
            CloudView::Confirmed(why) => Status::Replace(why.clone()),
            CloudView::Transitional(why) => Status::Waiting {
                reason: format!("{why}; waiting for it to settle"),
                failing: false,
            },
            CloudView::Suspect(why) => {
                if confirmed_after(m.cloud_failures, m.cloud_first_failure_at) {
                    Status::Replace(format!(
                        "{why} in {} consecutive observations over {}s",
                        m.cloud_failures,
                        m.cloud_first_failure_at
                            .map_or(0, |f| since(now, f).as_secs())
                    ))
                } else {
                    Status::Waiting {
                        reason: format!(
                            "{why}: failed observation {} of 2, grace {}s",
                            m.cloud_failures,
                            p.grace.as_secs()
                        ),
                        failing: true,
                    }
                }
            }
            CloudView::Healthy => {
                if m.probe_failures > 0 {
                    let what = if probe_failed.is_empty() {
                        "earlier probe failure".to_owned()
                    } else {
                        probe_failed.join("; ")
                    };
                    if in_startup {
                        Status::Waiting {
                            reason: format!("{what}; within the startup grace"),
                            failing: false,
                        }
                    } else if confirmed_after(m.probe_failures, m.probe_first_failure_at) {
                        Status::Replace(format!(
                            "{what} in {} consecutive probes",
                            m.probe_failures
                        ))
                    } else {
                        Status::Waiting {
                            reason: format!(
                                "{what}: failed probe {} of 2, grace {}s",
                                m.probe_failures,
                                p.grace.as_secs()
                            ),
                            failing: true,
                        }
                    }
                } else if !drift.is_empty() {
                    if in_startup {
                        Status::Waiting {
                            reason: format!("{}; within the startup grace", drift.join("; ")),
                            failing: false,
                        }
                    } else {
                        Status::Repair(drift.clone())
                    }
                } else if !probe_unknown.is_empty() {
                    Status::Unknown(probe_unknown.join("; "))
                } else {
                    Status::Healthy
                }
            }
        };
        // Healthy stretch and budget reset.
        match &status {
            Status::Healthy => {
                let start = *m.healthy_since.get_or_insert(now);
                if m.heal_attempts > 0 && since(now, start) >= p.min_healthy {
                    m.heal_attempts = 0;
                }
            }
            Status::Unknown(_) => {}
            _ => m.healthy_since = None,
        }
        let evidence = json!({
            "pass": vnf.pass,
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
        });
        rows.push((v, m, status, evidence));
    }

    // 2. Storm control: too many unhealthy at once → heal nothing.
    let unhealthy: Vec<&str> = rows
        .iter()
        .filter(|(_, _, s, _)| {
            matches!(
                s,
                Status::Replace(_) | Status::Waiting { failing: true, .. }
            )
        })
        .map(|(v, _, _, _)| v.vnfc_id.as_str())
        .collect();
    let allowed = p.max_unhealthy.allowed(rows.len());
    let short_circuit = unhealthy.len() > allowed;
    if short_circuit {
        push_vnf(
            &mut decisions,
            &mut vnf_memory,
            &vnf_id,
            DecisionKind::ShortCircuit,
            format!(
                "{} of {} VNFCs unhealthy, more than max_unhealthy {} ({allowed} allowed): \
                 no automatic heal until an operator looks",
                unhealthy.len(),
                rows.len(),
                p.max_unhealthy
            ),
            json!({"pass": vnf.pass, "unhealthy": unhealthy, "total": rows.len(),
                   "max_unhealthy": p.max_unhealthy.to_string(), "allowed": allowed}),
        );
    } else if vnf.memory.last_decision.is_some() {
        vnf_memory.last_decision = None;
    }

    // 3. Per VNFC: deferrals, alerts, heal candidates.
    let mut replace = Vec::new();
    let mut repair = Vec::new();
    let mut per_vnfc: Vec<(usize, Decision)> = Vec::new();
    for (i, (v, m, status, evidence)) in rows.iter().enumerate() {
        let mut d = |kind: DecisionKind, reason: String| {
            per_vnfc.push((
                i,
                Decision {
                    vnf_instance_id: vnf_id.clone(),
                    vnfc_id: Some(v.vnfc_id.clone()),
                    kind,
                    reason,
                    evidence: evidence.clone(),
                    repeat: false,
                },
            ));
        };
        match status {
            Status::Healthy => {}
            Status::Unknown(why) => d(
                DecisionKind::DeferredUnknown,
                format!("health unknown ({why}); never treated as unhealthy"),
            ),
            Status::Waiting { reason, .. } => d(DecisionKind::DeferredGrace, reason.clone()),
            Status::Replace(_) | Status::Repair(_) => {
                if let Status::Repair(drift) = status {
                    d(
                        DecisionKind::DriftDetected,
                        format!("configuration drift: {}", drift.join("; ")),
                    );
                }
                if short_circuit {
                    continue;
                }
                let n = m.heal_attempts + 1;
                if m.heal_attempts >= p.retry_budget {
                    d(
                        DecisionKind::BudgetExhausted,
                        format!(
                            "retry budget of {} automatic heals used up (last at {}); \
                             not healing again until healthy for {}s or an operator acts",
                            p.retry_budget,
                            m.last_heal_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                            p.min_healthy.as_secs()
                        ),
                    );
                    continue;
                }
                if let (true, Some(last)) = (n >= 2, m.last_heal_at) {
                    let wait = p.retry_backoff.saturating_mul(1 << (n - 1).min(20));
                    if since(now, last) < wait {
                        d(
                            DecisionKind::DeferredBackoff,
                            format!(
                                "attempt {n} of {} waits until {}s after the last heal at {}",
                                p.retry_budget,
                                wait.as_secs(),
                                last.to_rfc3339()
                            ),
                        );
                        continue;
                    }
                }
                match status {
                    Status::Replace(why) => {
                        if v.role == Role::StorageServer {
                            match &vnf.pvs {
                                PvView::Known { bound, observed_at } if !bound.is_empty() => {
                                    d(
                                        DecisionKind::PvBoundBlock,
                                        format!(
                                            "storage server needs replacing ({why}) but PersistentVolumes \
                                             {} are Bound (as of {}); not healing automatically",
                                            bound.join(", "),
                                            observed_at.to_rfc3339()
                                        ),
                                    );
                                    continue;
                                }
                                PvView::Unknown => {
                                    d(
                                        DecisionKind::DeferredUnknown,
                                        format!(
                                            "storage server needs replacing ({why}) but the phases of its \
                                             PersistentVolumes are unknown; not healing while one may be Bound"
                                        ),
                                    );
                                    continue;
                                }
                                _ => {}
                            }
                        }
                        replace.push((i, why.clone()));
                    }
                    Status::Repair(drift) => repair.push((i, drift.join("; "))),
                    _ => {}
                }
            }
        }
    }

    // 4. At most one HEAL per VNF: replacements first (the storage server alone), then repairs.
    let storage_first = replace
        .iter()
        .position(|(i, _)| rows[*i].0.role == Role::StorageServer);
    let (chosen, configuration_only, waiting): (Vec<(usize, String)>, bool, Vec<usize>) =
        if let Some(k) = storage_first {
            let mut waiting: Vec<usize> = replace.iter().map(|(i, _)| *i).collect();
            waiting.remove(k);
            waiting.extend(repair.iter().map(|(i, _)| *i));
            (vec![replace[k].clone()], false, waiting)
        } else if !replace.is_empty() {
            let waiting = repair.iter().map(|(i, _)| *i).collect();
            (replace.clone(), false, waiting)
        } else {
            (repair.clone(), true, Vec::new())
        };
    let mut heal = None;
    let mut mems: Vec<Memory> = rows.iter().map(|(_, m, _, _)| m.clone()).collect();
    if !chosen.is_empty() {
        let ids: Vec<String> = chosen
            .iter()
            .map(|(i, _)| rows[*i].0.vnfc_id.clone())
            .collect();
        let cause = format!(
            "vnfkeeper reconcile: {}",
            chosen
                .iter()
                .map(|(i, why)| format!("{} ({}): {why}", rows[*i].0.vnfc_id, rows[*i].0.vdu_id))
                .collect::<Vec<_>>()
                .join("; ")
        )
        .replace(['\n', '\r'], " ");
        for (i, why) in &chosen {
            let m = &mut mems[*i];
            m.heal_attempts += 1;
            m.last_heal_at = Some(now);
            let what = if configuration_only {
                "configuration repair"
            } else {
                "server replacement"
            };
            per_vnfc.push((
                *i,
                Decision {
                    vnf_instance_id: vnf_id.clone(),
                    vnfc_id: Some(rows[*i].0.vnfc_id.clone()),
                    kind: DecisionKind::HealStarted,
                    reason: format!(
                        "{what} (automatic heal {} of {}): {why}",
                        m.heal_attempts, p.retry_budget
                    ),
                    evidence: {
                        let mut e = rows[*i].3.clone();
                        e["heal"] = json!({"vnfcInstanceId": ids, "configuration_only": configuration_only,
                                           "attempt": m.heal_attempts, "retry_budget": p.retry_budget});
                        e
                    },
                    repeat: false,
                },
            ));
        }
        for i in waiting {
            per_vnfc.push((
                i,
                Decision {
                    vnf_instance_id: vnf_id.clone(),
                    vnfc_id: Some(rows[i].0.vnfc_id.clone()),
                    kind: DecisionKind::InFlight,
                    reason: format!(
                        "another heal of this VNF goes first ({}); one heal per VNF at a time",
                        ids.join(", ")
                    ),
                    evidence: rows[i].3.clone(),
                    repeat: false,
                },
            ));
        }
        heal = Some(HealPlan {
            vnfc_ids: ids,
            configuration_only,
            cause,
        });
    }

    // 5. De-duplicate: a VNFC's decision that repeats the last recorded one is marked.
    let mut last: Vec<Option<String>> = vec![None; rows.len()];
    for (i, d) in &mut per_vnfc {
        let key = format!("{}:{}", d.kind.event_kind(), strip_counts(&d.reason));
        let always = d.kind == DecisionKind::HealStarted;
        d.repeat = !always && mems[*i].last_decision.as_deref() == Some(key.as_str());
        last[*i] = Some(key);
    }
    for (i, m) in mems.iter_mut().enumerate() {
        m.last_decision = last[i].take();
    }
    decisions.extend(per_vnfc.into_iter().map(|(_, d)| d));
    VnfOutcome {
        vnf_instance_id: vnf_id,
        decisions,
        memory: rows
            .iter()
            .map(|(v, _, _, _)| v.vnfc_id.clone())
            .zip(mems)
            .collect(),
        vnf_memory,
        heal,
    }
}

/// The reason without digits, so "failed observation 1 of 2" and "… 2 of 2" or changing times do
/// not make every pass a new decision.
fn strip_counts(reason: &str) -> String {
    reason.chars().filter(|c| !c.is_ascii_digit()).collect()
}

fn push_vnf(
    decisions: &mut Vec<Decision>,
    vnf_memory: &mut Memory,
    vnf_id: &str,
    kind: DecisionKind,
    reason: String,
    evidence: Value,
) {
    let key = format!("{}:{}", kind.event_kind(), strip_counts(&reason));
    let repeat = vnf_memory.last_decision.as_deref() == Some(key.as_str());
    vnf_memory.last_decision = Some(key);
    decisions.push(Decision {
        vnf_instance_id: vnf_id.to_owned(),
        vnfc_id: None,
        kind,
        reason,
        evidence,
        repeat,
    });
}

#[cfg(test)]
mod tests;
