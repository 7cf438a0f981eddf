//! The safety rules of the remediation policy, one small pure function each (no I/O, no clock:
//! `now` is passed in). [`super::decide`] applies them in a fixed order; each function's doc
//! comment names the rule it enforces.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    CloudView, Decision, DecisionKind, Memory, Policy, PvView, Remedy, Role, Status, Verdict,
    VnfInput, VnfcInput,
};
use crate::model::Timestamp;

/// What a rule says about a VNFC or a VNF: the kind of decision and its one line for humans.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ruling {
    pub kind: DecisionKind,
    pub reason: String,
}

impl Ruling {
    pub(super) fn new(kind: DecisionKind, reason: String) -> Self {
        Self { kind, reason }
    }
}

/// A VNF-level ruling with its evidence (a JSON object).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct VnfRuling {
    pub ruling: Ruling,
    pub evidence: Value,
}

/// A VNFC that passed every gate and may be healed: its index among the VNF's VNFCs, its role,
/// and the remedy.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Candidate {
    pub index: usize,
    pub role: Role,
    pub remedy: Remedy,
}

/// The one heal of a VNF: the chosen VNFCs (index, why) in heal order, whether it is a
/// configuration-only repair, and the indices of the candidates that wait for a later pass.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Selection {
    pub chosen: Vec<(usize, String)>,
    pub configuration_only: bool,
    pub waiting: Vec<usize>,
}

/// A VNFC's probe findings of this pass by verdict, each line `"<check>: <detail>"`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ProbeLines {
    pub drift: Vec<String>,
    pub failed: Vec<String>,
    pub unknown: Vec<String>,
}

/// Time from `t` to `now`; zero when `t` is later.
pub(super) fn since(now: Timestamp, t: Timestamp) -> Duration {
    (now.0 - t.0).to_std().unwrap_or(Duration::ZERO)
}

/// **One operation per VNF.** While the VNF has an unfinished operation nothing about it is
/// judged and its memory is not touched: `None` when it has none (go on); otherwise
/// `Some(ruling)`, the ruling being a VNF-level `IN_FLIGHT` naming the oldest operation and the
/// servers that are not healthy, or `None` when every server is healthy (nothing to say).
pub(super) fn one_operation_per_vnf(vnf: &VnfInput) -> Option<Option<VnfRuling>> {
    let oldest = vnf.unfinished_operations.first()?;
    let not_healthy: Vec<Value> = vnf
        .vnfcs
        .iter()
        .filter(|v| v.cloud != CloudView::Healthy)
        .map(|v| json!({"vnfc_id": v.vnfc_id, "cloud": v.cloud}))
        .collect();
    if not_healthy.is_empty() {
        return Some(None);
    }
    Some(Some(VnfRuling {
        ruling: Ruling::new(
            DecisionKind::InFlight,
            format!(
                "operation {oldest} of this VNF is not finished; nothing is judged until it is"
            ),
        ),
        evidence: json!({"pass": vnf.pass, "unfinished_operations": vnf.unfinished_operations,
                         "not_healthy": not_healthy}),
    }))
}

/// **A new server starts afresh.** When the VNFC's server id differs from the one remembered (the
/// server was created or replaced), the failure counters and the healthy stretch restart and the
/// startup grace runs from when the engine recorded the server; the retry budget
/// (`heal_attempts`, `last_heal_at`) and the last decision are kept, so a replacement that fails
/// again does not get a fresh budget. Returns the memory to use for this pass.
pub(super) fn follow_server(memory: &Memory, v: &VnfcInput) -> Memory {
    if memory.server_id == v.server_id {
        return memory.clone();
    }
    Memory {
        server_id: v.server_id.clone(),
        server_since: Some(v.recorded_at),
        heal_attempts: memory.heal_attempts,
        last_heal_at: memory.last_heal_at,
        last_decision: memory.last_decision.clone(),
        ..Memory::default()
    }
}

/// **Consecutive failed cloud observations.** A healthy view resets the count; a suspect or
/// confirmed failure adds one (remembering when the first was); an unknown view (fail closed)
/// or a transitional state neither counts nor resets.
pub(super) fn count_cloud_observation(m: &mut Memory, cloud: &CloudView, now: Timestamp) {
    match cloud {
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
}

/// **Probes count only on a healthy server.** This pass's findings sorted by verdict; `None`
/// when the VNFC was not probed in this pass or the cloud does not see its server healthy (then
/// the cloud view decides alone).
pub(super) fn probe_lines(v: &VnfcInput) -> Option<ProbeLines> {
    if v.cloud != CloudView::Healthy {
        return None;
    }
    let mut lines = ProbeLines::default();
    for f in v.probes.as_ref()? {
        let line = format!("{}: {}", f.check, f.detail);
        match f.verdict {
            Verdict::InPlace => {}
            Verdict::Drift => lines.drift.push(line),
            Verdict::Failed => lines.failed.push(line),
            Verdict::Unknown => lines.unknown.push(line),
        }
    }
    Some(lines)
}

/// **Consecutive failed probes.** A pass with a failed probe adds one (remembering when the
/// first was); a pass with every probe readable and none failed resets the count; a pass with
/// only unreadable probes (fail closed) or without probes changes nothing.
pub(super) fn count_probe_result(m: &mut Memory, probes: Option<&ProbeLines>, now: Timestamp) {
    let Some(probes) = probes else { return };
    if !probes.failed.is_empty() {
        m.probe_failures += 1;
        m.probe_first_failure_at.get_or_insert(now);
    } else if probes.unknown.is_empty() {
        m.probe_failures = 0;
        m.probe_first_failure_at = None;
    }
}

/// **Grace period (confirmation).** A failure that is not confirmed by itself acts only after at
/// least two consecutive failed observations, the first at least `grace` ago.
pub(super) fn confirmed(
    p: &Policy,
    failures: u32,
    first: Option<Timestamp>,
    now: Timestamp,
) -> bool {
    failures >= 2 && first.is_some_and(|f| since(now, f) >= p.grace)
}

/// **Startup grace.** For `startup_grace` after its server appeared, a VNFC's probe findings are
/// not acted on (a new server is still being configured); cloud findings are.
pub(super) fn in_startup_grace(p: &Policy, m: &Memory, now: Timestamp) -> bool {
    m.server_since
        .is_some_and(|s| since(now, s) < p.startup_grace)
}

/// **Fail closed; confirmation; repair vs rebuild.** The status of a VNFC from its cloud view,
/// its memory (already updated by this pass) and this pass's probe lines:
/// - cloud unknown → unknown (never unhealthy);
/// - confirmed (Nova `ERROR`, server gone) → rebuild at once;
/// - transitional → waiting, not failing;
/// - suspect → rebuild once [`confirmed`], else waiting and failing;
/// - healthy → what the probes say ([`probe_health`]).
pub(super) fn health(
    p: &Policy,
    cloud: &CloudView,
    m: &Memory,
    probes: &ProbeLines,
    now: Timestamp,
) -> Status {
    match cloud {
        CloudView::Unknown(why) => Status::Unknown(why.clone()),
        CloudView::Confirmed(why) => Status::Needs(Remedy::Rebuild(why.clone())),
        CloudView::Transitional(why) => Status::Waiting {
            reason: format!("{why}; waiting for it to settle"),
            failing: false,
        },
        CloudView::Suspect(why) => {
            if confirmed(p, m.cloud_failures, m.cloud_first_failure_at, now) {
                Status::Needs(Remedy::Rebuild(format!(
                    "{why} in {} consecutive observations over {}s",
                    m.cloud_failures,
                    m.cloud_first_failure_at
                        .map_or(0, |f| since(now, f).as_secs())
                )))
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
        CloudView::Healthy => probe_health(p, m, probes, now),
    }
}

/// **Repair vs rebuild, startup grace, fail closed — for a server the cloud sees healthy.**
/// A failed probe (this pass or remembered) needs a new server once [`confirmed`] and outside
/// the [`in_startup_grace`]; drift needs only a configuration repair, outside the startup grace;
/// unreadable probes make the VNFC unknown; otherwise it is healthy.
pub(super) fn probe_health(p: &Policy, m: &Memory, probes: &ProbeLines, now: Timestamp) -> Status {
    let in_startup = in_startup_grace(p, m, now);
    if m.probe_failures > 0 {
        let what = if probes.failed.is_empty() {
            "earlier probe failure".to_owned()
        } else {
            probes.failed.join("; ")
        };
        if in_startup {
            Status::Waiting {
                reason: format!("{what}; within the startup grace"),
                failing: false,
            }
        } else if confirmed(p, m.probe_failures, m.probe_first_failure_at, now) {
            Status::Needs(Remedy::Rebuild(format!(
                "{what} in {} consecutive probes",
                m.probe_failures
            )))
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
    } else if !probes.drift.is_empty() {
        if in_startup {
            Status::Waiting {
                reason: format!("{}; within the startup grace", probes.drift.join("; ")),
                failing: false,
            }
        } else {
            Status::Needs(Remedy::Repair(probes.drift.clone()))
        }
    } else if !probes.unknown.is_empty() {
        Status::Unknown(probes.unknown.join("; "))
    } else {
        Status::Healthy
    }
}

/// **Budget back after a healthy stretch.** A healthy VNFC starts its healthy stretch (unless
/// one runs) and gets its retry budget back once the stretch lasted `min_healthy`; an unknown
/// one changes nothing (fail closed); anything else ends the stretch.
pub(super) fn healthy_stretch(p: &Policy, m: &mut Memory, status: &Status, now: Timestamp) {
    match status {
        Status::Healthy => {
            let start = *m.healthy_since.get_or_insert(now);
            if m.heal_attempts > 0 && since(now, start) >= p.min_healthy {
                m.heal_attempts = 0;
            }
        }
        Status::Unknown(_) => {}
        _ => m.healthy_since = None,
    }
}

/// **`max_unhealthy` storm control (short circuit).** When more VNFCs of the VNF look unhealthy
/// at once (a rebuild needed, or a failure waiting for confirmation) than `max_unhealthy`
/// allows, nothing of the VNF is healed and a VNF-level `SHORT_CIRCUIT` alert says so. Unknown
/// VNFCs and repairs do not count. `statuses`: (vnfcInstanceId, status) of every VNFC.
pub(super) fn storm_control(
    p: &Policy,
    statuses: &[(&str, &Status)],
    pass: &str,
) -> Option<VnfRuling> {
    let unhealthy: Vec<&str> = statuses
        .iter()
        .filter(|(_, s)| {
            matches!(
                s,
                Status::Needs(Remedy::Rebuild(_)) | Status::Waiting { failing: true, .. }
            )
        })
        .map(|(id, _)| *id)
        .collect();
    let total = statuses.len();
    let allowed = p.max_unhealthy.allowed(total);
    if unhealthy.len() <= allowed {
        return None;
    }
    Some(VnfRuling {
        ruling: Ruling::new(
            DecisionKind::ShortCircuit,
            format!(
                "{} of {total} VNFCs unhealthy, more than max_unhealthy {} ({allowed} allowed): \
                 no automatic heal until an operator looks",
                unhealthy.len(),
                p.max_unhealthy
            ),
        ),
        evidence: json!({"pass": pass, "unhealthy": unhealthy, "total": total,
                         "max_unhealthy": p.max_unhealthy.to_string(), "allowed": allowed}),
    })
}

/// **Fail closed.** An unknown VNFC is deferred, never treated as unhealthy.
pub(super) fn fail_closed(why: &str) -> Ruling {
    Ruling::new(
        DecisionKind::DeferredUnknown,
        format!("health unknown ({why}); never treated as unhealthy"),
    )
}

/// **Drift is reported.** Configuration drift found by a probe is recorded whether or not the
/// repair can start in this pass.
pub(super) fn drift_detected(drift: &[String]) -> Ruling {
    Ruling::new(
        DecisionKind::DriftDetected,
        format!("configuration drift: {}", drift.join("; ")),
    )
}

/// **Per-VNFC retry budget.** After `retry_budget` automatic heals since the budget was last
/// given back, the VNFC is not healed again (`BUDGET_EXHAUSTED` alert) until it stays healthy for
/// `min_healthy` ([`healthy_stretch`]) or an operator acts.
pub(super) fn retry_budget(p: &Policy, m: &Memory) -> Option<Ruling> {
    (m.heal_attempts >= p.retry_budget).then(|| {
        Ruling::new(
            DecisionKind::BudgetExhausted,
            format!(
                "retry budget of {} automatic heals used up (last at {}); \
                 not healing again until healthy for {}s or an operator acts",
                p.retry_budget,
                m.last_heal_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                p.min_healthy.as_secs()
            ),
        )
    })
}

/// **Exponential backoff.** Attempt n (n ≥ 2) waits `retry_backoff × 2^(n-1)` after the VNFC's
/// last automatic heal (`DEFERRED_BACKOFF` until then); the first attempt never waits. The
/// exponent is capped at 20.
pub(super) fn backoff(p: &Policy, m: &Memory, now: Timestamp) -> Option<Ruling> {
    let n = m.heal_attempts + 1;
    let last = m.last_heal_at.filter(|_| n >= 2)?;
    let wait = p.retry_backoff.saturating_mul(1 << (n - 1).min(20));
    (since(now, last) < wait).then(|| {
        Ruling::new(
            DecisionKind::DeferredBackoff,
            format!(
                "attempt {n} of {} waits until {}s after the last heal at {}",
                p.retry_budget,
                wait.as_secs(),
                last.to_rfc3339()
            ),
        )
    })
}

/// **A Bound PersistentVolume blocks a storage-server rebuild (keep data).** The storage server
/// is not replaced automatically while one of the cluster's PVs is Bound (`PV_BOUND_BLOCK`
/// alert), nor while the PV phases are unknown (deferred). Repairs and other roles pass.
pub(super) fn keep_data(role: Role, remedy: &Remedy, pvs: &PvView) -> Option<Ruling> {
    let Remedy::Rebuild(why) = remedy else {
        return None;
    };
    if !role.is_stateful() {
        return None;
    }
    match pvs {
        PvView::Known { bound, observed_at } if !bound.is_empty() => Some(Ruling::new(
            DecisionKind::PvBoundBlock,
            format!(
                "storage server needs replacing ({why}) but PersistentVolumes \
                 {} are Bound (as of {}); not healing automatically",
                bound.join(", "),
                observed_at.to_rfc3339()
            ),
        )),
        PvView::Unknown => Some(Ruling::new(
            DecisionKind::DeferredUnknown,
            format!(
                "storage server needs replacing ({why}) but the phases of its \
                 PersistentVolumes are unknown; not healing while one may be Bound"
            ),
        )),
        _ => None,
    }
}

/// **What the flavour cannot rebuild is not rebuilt.** A server rebuild the VNF's flavour refuses
/// for this VNFC (a kubespray master: kubespray has no playbook for it) is never started
/// (`REBUILD_REFUSED` alert: an operator heals the whole VNF); a repair passes.
pub(super) fn flavour_refuses(remedy: &Remedy, refused: Option<&str>) -> Option<Ruling> {
    let (Remedy::Rebuild(why), Some(refusal)) = (remedy, refused) else {
        return None;
    };
    Some(Ruling::new(
        DecisionKind::RebuildRefused,
        format!("server needs replacing ({why}) but {refusal}; not healing automatically"),
    ))
}

/// **One heal per VNF; the storage server alone; one master at a time.** From the candidates
/// (in VNFC order): a storage server needing a rebuild is healed alone (stateful) and every
/// other candidate waits; else every rebuild goes in one HEAL — but of the masters only the
/// first, as a control plane's etcd keeps its quorum only while its members are replaced one by
/// one — and the repairs and other masters wait; else every repair goes in one
/// configuration-only HEAL. `None` without candidates.
pub(super) fn one_heal_per_vnf(candidates: &[Candidate]) -> Option<Selection> {
    let pick = |c: &Candidate| (c.index, c.remedy.why());
    let rebuilds: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| matches!(c.remedy, Remedy::Rebuild(_)))
        .collect();
    let repairs: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| matches!(c.remedy, Remedy::Repair(_)))
        .collect();
    let selection = if let Some(k) = rebuilds.iter().position(|c| c.role.is_stateful()) {
        let waiting = rebuilds
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .map(|(_, c)| c.index)
            .chain(repairs.iter().map(|c| c.index))
            .collect();
        Selection {
            chosen: vec![pick(rebuilds[k])],
            configuration_only: false,
            waiting,
        }
    } else if !rebuilds.is_empty() {
        let first_master = rebuilds.iter().position(|c| c.role == Role::Master);
        let later_master = |j: usize| rebuilds[j].role == Role::Master && Some(j) != first_master;
        Selection {
            chosen: (0..rebuilds.len())
                .filter(|j| !later_master(*j))
                .map(|j| pick(rebuilds[j]))
                .collect(),
            configuration_only: false,
            waiting: (0..rebuilds.len())
                .filter(|j| later_master(*j))
                .map(|j| rebuilds[j].index)
                .chain(repairs.iter().map(|c| c.index))
                .collect(),
        }
    } else {
        Selection {
            chosen: repairs.iter().map(|c| pick(c)).collect(),
            configuration_only: true,
            waiting: Vec::new(),
        }
    };
    (!selection.chosen.is_empty()).then_some(selection)
}

/// **Retry budget: one attempt spent.** A VNFC chosen for the heal counts one more automatic
/// heal, at `now` (the start of its backoff).
pub(super) fn spend_attempt(m: &mut Memory, now: Timestamp) {
    m.heal_attempts += 1;
    m.last_heal_at = Some(now);
}

/// The key two decisions are compared by: the audit kind and the reason without digits, so
/// "failed observation 1 of 2" and "… 2 of 2" or changing times are the same condition.
fn decision_key(kind: DecisionKind, reason: &str) -> String {
    let reason: String = reason.chars().filter(|c| !c.is_ascii_digit()).collect();
    format!("{}:{reason}", kind.event_kind())
}

/// **A lasting condition is one audit row (VNF level).** The VNF-level decision of a ruling,
/// marked as a repeat when its key equals the VNF's last recorded decision, which it replaces.
pub(super) fn vnf_decision(
    vnf_memory: &mut Memory,
    vnf_id: &crate::model::VnfInstanceId,
    r: VnfRuling,
) -> Decision {
    let key = decision_key(r.ruling.kind, &r.ruling.reason);
    let repeat = vnf_memory.last_decision.as_deref() == Some(key.as_str());
    vnf_memory.last_decision = Some(key);
    Decision {
        vnf_instance_id: vnf_id.clone(),
        vnfc_id: None,
        kind: r.ruling.kind,
        reason: r.ruling.reason,
        evidence: r.evidence,
        repeat,
    }
}

/// **Maintenance pause**: a VNFC that would be healed is held while its VNF is paused; the
/// reason names the remedy it waits for and the pause (who, until when, why).
pub(super) fn paused(pause: &crate::model::MaintenancePause, remedy: &Remedy) -> Ruling {
    let what = match remedy {
        Remedy::Rebuild(_) => "server replacement",
        Remedy::Repair(_) => "configuration repair",
    };
    Ruling::new(
        DecisionKind::Paused,
        format!(
            "{what} held by a maintenance pause ({}): {}",
            pause.describe(),
            remedy.why()
        ),
    )
}

/// **A lasting condition is one audit row (VNFC level).** Each decision (index of its VNFC,
/// decision) whose key equals its VNFC's last recorded decision is marked `repeat` (a started
/// heal never is); then each VNFC remembers the key of its last decision of this pass, or
/// nothing when it had none. `memory`: per VNFC, indexed like the decisions.
pub(super) fn mark_repeats(decisions: &mut [(usize, Decision)], memory: &mut [Memory]) {
    let mut last: Vec<Option<String>> = vec![None; memory.len()];
    for (i, d) in decisions.iter_mut() {
        let key = decision_key(d.kind, &d.reason);
        d.repeat = d.kind != DecisionKind::HealStarted
            && memory[*i].last_decision.as_deref() == Some(key.as_str());
        last[*i] = Some(key);
    }
    for (m, key) in memory.iter_mut().zip(last) {
        m.last_decision = key;
    }
}
