//! The daemon's Prometheus metrics: one registry of counters, gauges and histograms that the
//! runner, the engine, reconcile and intake update where things happen (a cheap
//! `Arc<Metrics>`: atomics, no lock held across anything), encoded on request in the
//! OpenMetrics text format (OpenMetrics 1.0, by the `prometheus-client` crate) for
//! `GET /metrics` (`daemon::http`).
//!
//! Every family is named `vnfkeeper_…` with its unit in the name (Prometheus naming
//! conventions), but `process_start_time_seconds` (the Prometheus client libraries' standard
//! process metric), and only bounded labels: an SOL003 `LcmOperationType`, an operation state,
//! an instantiation state, a step name (the step scripts and cloud actions are constants), a
//! reconcile pass kind, a decision reason, an intake outcome. Never a VNF instance id, an
//! operation id or a file name.
//!
//! Counters and histograms count what happened since the start; the state gauges
//! (`vnfkeeper_operations`, `vnfkeeper_vnf_instances`, `vnfkeeper_vnfcs_unhealthy`,
//! `vnfkeeper_vnfs_paused`) say what the database holds now and are set at each scrape
//! ([`Metrics::set_state`]).
//!
//! The families and their labels are listed in the README ("Metrics"); the names there and here
//! are the contract an operator's alert rules rely on.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::intake::spool::Outcome;
use crate::reconcile::{PassKind, PassReport};
use crate::store::StateGauges;
use vnfkeeper_core::model::{EventKind, InstantiationState, LcmOperationType, OperationState};
use vnfkeeper_core::policy::DecisionKind;

/// `Content-Type` of [`Format::OpenMetrics`] (OpenMetrics 1.0 text format).
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `Content-Type` of [`Format::Prometheus`] (Prometheus text format 0.0.4).
pub const PROMETHEUS_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// An exposition format of [`Metrics::encode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (`# UNIT`, `info` type, `# EOF`): what Prometheus asks for.
    OpenMetrics,
    /// The Prometheus text format 0.0.4, for clients that do not ask for OpenMetrics (curl,
    /// `promtool check metrics`, older scrapers): the same families and values.
    Prometheus,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (as Prometheus's scrapes do), else the Prometheus text
    /// format (the content negotiation of the Prometheus client libraries).
    pub fn negotiate(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
        }
    }
}

/// Labels `operation` (SOL003 `LcmOperationType`, e.g. `HEAL`) and `state` (the state the
/// operation stopped in, e.g. `COMPLETED`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationStateLabels {
    operation: &'static str,
    state: &'static str,
}

/// Label `state`: an SOL003 `InstantiationState`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceStateLabels {
    state: &'static str,
}

/// Label `held_by`: the rule holding back an unhealthy VNFC's heal (a value of
/// `vnfkeeper_heals_blocked_total{reason}`), or `none`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeldLabels {
    held_by: &'static str,
}

/// Label `operation` (SOL003 `LcmOperationType`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

/// Labels `step` (a step script's or cloud action's name, e.g. `heat.create`) and `result`
/// (`done` or `failed`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    step: &'static str,
    result: &'static str,
}

/// Label `reason`: why reconcile started no heal.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// Label `kind`: `cloud` or `full` pass.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PassLabels {
    kind: &'static str,
}

/// Labels `kind` (`cloud`, `full`) and `result` (`recorded`, `failed`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PassResultLabels {
    kind: &'static str,
    result: &'static str,
}

/// Label `outcome`: what intake did with a spool file.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// Outcomes of the fast observation (label `outcome` of `vnfkeeper_reconcile_changes_polls`).
const CHANGES_POLL_OUTCOMES: [&str; 3] = ["ok", "failed", "skipped"];

type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

/// Operation run time: 1 s to ~4.5 h (doubling).
fn operation_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// Step run time: 0.1 s to ~1.8 h (doubling).
fn step_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 17))
}

/// Reconcile pass time: 10 ms to ~82 s (doubling).
fn pass_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

/// Cloud API requests per pass: 1 to 2048 (doubling).
fn request_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

/// The metrics of one daemon. Every method only updates atomics (and, for a label value seen
/// for the first time, takes a short write lock of its family): safe to call from the main loop,
/// the scheduler's task, operation tasks and reconcile passes.
pub struct Metrics {
    registry: Registry,
    operations_finished: Family<OperationStateLabels, Counter>,
    operation_duration: HistogramFamily<OperationLabels>,
    step_duration: HistogramFamily<StepLabels>,
    heals_started: Counter,
    heals_blocked: Family<ReasonLabels, Counter>,
    heals_deferred: Family<ReasonLabels, Counter>,
    passes: Family<PassResultLabels, Counter>,
    pass_duration: HistogramFamily<PassLabels>,
    pass_requests: HistogramFamily<PassLabels>,
    last_success: Gauge<i64, std::sync::atomic::AtomicI64>,
    intake_files: Family<OutcomeLabels, Counter>,
    spool_backlog: Gauge<i64, std::sync::atomic::AtomicI64>,
    changes_polls: Family<OutcomeLabels, Counter>,
    operations: Family<OperationStateLabels, Gauge>,
    instances: Family<InstanceStateLabels, Gauge>,
    vnfcs_unhealthy: Family<HeldLabels, Gauge>,
    vnfs_paused: Gauge,
    start_time: Gauge<f64, std::sync::atomic::AtomicU64>,
}

/// Every SOL003 operation type vnfkeeper runs.
const OPERATIONS: [LcmOperationType; 5] = [
    LcmOperationType::Instantiate,
    LcmOperationType::Scale,
    LcmOperationType::Heal,
    LcmOperationType::Terminate,
    LcmOperationType::ChangeExtConn,
];

/// The operation states that are not final: the values of `vnfkeeper_operations{state}`.
const UNFINISHED_STATES: [OperationState; 4] = [
    OperationState::Starting,
    OperationState::Processing,
    OperationState::FailedTemp,
    OperationState::RollingBack,
];

/// The values of `vnfkeeper_vnf_instances{state}`.
const INSTANCE_STATES: [InstantiationState; 2] = [
    InstantiationState::NotInstantiated,
    InstantiationState::Instantiated,
];

/// The names of the cloud actions' steps (`CloudAction::name`): their
/// `vnfkeeper_step_duration_seconds` series exist, at 0, before any step ran.
const CLOUD_STEPS: [&str; 10] = [
    "heat.create",
    "heat.wait_create",
    "heat.update",
    "heat.wait_update",
    "heat.read_vnfcs",
    "heat.mark_unhealthy",
    "heat.delete",
    "heat.wait_delete",
    "nova.stop",
    "nova.detach_volume",
];

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered (and the label values known in advance
    /// pre-created at 0, so that `rate()` and `increase()` see a counter's first increment).
    pub fn new() -> Self {
        let m = Self {
            operations_finished: Family::default(),
            operation_duration: Family::new_with_constructor(operation_buckets),
            step_duration: Family::new_with_constructor(step_buckets),
            heals_started: Counter::default(),
            heals_blocked: Family::default(),
            heals_deferred: Family::default(),
            passes: Family::default(),
            pass_duration: Family::new_with_constructor(pass_buckets),
            pass_requests: Family::new_with_constructor(request_buckets),
            last_success: Gauge::default(),
            intake_files: Family::default(),
            spool_backlog: Gauge::default(),
            changes_polls: Family::default(),
            operations: Family::default(),
            instances: Family::default(),
            vnfcs_unhealthy: Family::default(),
            vnfs_paused: Gauge::default(),
            start_time: Gauge::default(),
            registry: Registry::default(),
        };
        m.start_time.set(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.precreate_labels();
        Self { registry, ..m }
    }

    /// Registers every family of `self` in `registry`, in the order they are exposed.
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "vnfkeeper_build",
            "Version of this vnfkeeper build (always 1)",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        registry.register(
            "vnfkeeper_operations_finished",
            "LCM operations that stopped in a final state or FAILED_TEMP, by SOL003 operation type and state",
            self.operations_finished.clone(),
        );
        registry.register_with_unit(
            "vnfkeeper_operation_duration",
            "How long the engine ran an operation until it stopped (COMPLETED, FAILED_TEMP, ROLLED_BACK), from the start or resume of its run",
            Unit::Seconds,
            self.operation_duration.clone(),
        );
        registry.register_with_unit(
            "vnfkeeper_step_duration",
            "How long one journaled step ran (a cloud call, or a remote step on one host, retries included), by step name and result",
            Unit::Seconds,
            self.step_duration.clone(),
        );
        registry.register(
            "vnfkeeper_heals_started",
            "Automatic HEAL operations queued by reconcile",
            self.heals_started.clone(),
        );
        registry.register(
            "vnfkeeper_heals_blocked",
            "Reconcile decisions that held back a heal a VNFC or VNF called for (max_unhealthy, retry budget, Bound PV, maintenance pause), by reason; counted every pass while the condition lasts",
            self.heals_blocked.clone(),
        );
        registry.register(
            "vnfkeeper_heals_deferred",
            "Reconcile decisions that waited before judging (unknown health, grace, backoff, an operation in flight), by reason; counted every pass while the condition lasts",
            self.heals_deferred.clone(),
        );
        registry.register(
            "vnfkeeper_reconcile_passes",
            "Reconcile passes by kind and whether their decisions were recorded",
            self.passes.clone(),
        );
        registry.register_with_unit(
            "vnfkeeper_reconcile_pass_duration",
            "Wall time of one reconcile pass (snapshot, observation, probes, policy, record)",
            Unit::Seconds,
            self.pass_duration.clone(),
        );
        registry.register(
            "vnfkeeper_reconcile_api_requests",
            "Cloud API requests one reconcile pass sent (each page of a list counts)",
            self.pass_requests.clone(),
        );
        registry.register_with_unit(
            "vnfkeeper_reconcile_last_success_timestamp",
            "When the last reconcile pass was recorded, in Unix seconds (0: none since start)",
            Unit::Seconds,
            self.last_success.clone(),
        );
        registry.register(
            "vnfkeeper_intake_files",
            "Spool files intake decided, by outcome",
            self.intake_files.clone(),
        );
        registry.register(
            "vnfkeeper_spool_backlog_files",
            "Request files in the spool's new/ known to the daemon and not yet decided",
            self.spool_backlog.clone(),
        );
        registry.register(
            "vnfkeeper_reconcile_changes_polls",
            "Fast observations (one Nova changes-since request each) by outcome: ok, failed (an API error or the timeout; the next poll asks from the same time), skipped (the previous poll was still running when this one was due)",
            self.changes_polls.clone(),
        );
        registry.register(
            "vnfkeeper_operations",
            "LCM operations not in a final state now (STARTING, PROCESSING, FAILED_TEMP: waiting for an operator's RETRY, ROLLBACK or FAIL, ROLLING_BACK), by SOL003 operation type and state",
            self.operations.clone(),
        );
        registry.register(
            "vnfkeeper_vnf_instances",
            "VNF instances now, by SOL003 instantiation state",
            self.instances.clone(),
        );
        registry.register(
            "vnfkeeper_vnfcs_unhealthy",
            "VNFCs reconcile counts failures of now (a failed cloud observation or probe), by the rule holding back their heal (max_unhealthy, retry_budget, pv_bound, paused, rebuild_refused) or none",
            self.vnfcs_unhealthy.clone(),
        );
        registry.register(
            "vnfkeeper_vnfs_paused",
            "VNF instances under a maintenance pause in force now",
            self.vnfs_paused.clone(),
        );
        registry.register_with_unit(
            "process_start_time",
            "Start time of the process since the Unix epoch",
            Unit::Seconds,
            self.start_time.clone(),
        );
    }

    /// Creates the label values known in advance at 0 (operation types and final states,
    /// pass kinds and results, poll outcomes, blocked and deferred reasons, intake outcomes),
    /// so that `rate()` and `increase()` see a counter's first increment.
    fn precreate_labels(&self) {
        for step in CLOUD_STEPS {
            for result in ["done", "failed"] {
                let _ = self
                    .step_duration
                    .get_or_create(&StepLabels { step, result });
            }
        }
        self.set_state(&StateGauges::default());
        for op in OPERATIONS {
            for state in [
                OperationState::Completed,
                OperationState::FailedTemp,
                OperationState::Failed,
                OperationState::RolledBack,
            ] {
                self.operations_finished
                    .get_or_create(&OperationStateLabels {
                        operation: op.as_str(),
                        state: state.as_str(),
                    })
                    .get();
            }
            let _ = self.operation_duration.get_or_create(&OperationLabels {
                operation: op.as_str(),
            });
        }
        for kind in [PassKind::Cloud, PassKind::Full].map(PassKind::as_str) {
            let _ = self.pass_duration.get_or_create(&PassLabels { kind });
            let _ = self.pass_requests.get_or_create(&PassLabels { kind });
            for result in ["recorded", "failed"] {
                self.passes
                    .get_or_create(&PassResultLabels { kind, result })
                    .get();
            }
        }
        for outcome in CHANGES_POLL_OUTCOMES {
            self.changes_polls
                .get_or_create(&OutcomeLabels { outcome })
                .get();
        }
        for reason in BLOCKED_REASONS {
            self.heals_blocked
                .get_or_create(&ReasonLabels { reason })
                .get();
        }
        for reason in DEFERRED_REASONS {
            self.heals_deferred
                .get_or_create(&ReasonLabels { reason })
                .get();
        }
        for outcome in INTAKE_OUTCOMES {
            self.intake_files
                .get_or_create(&OutcomeLabels { outcome })
                .get();
        }
    }

    /// The whole registry as text in `format` (OpenMetrics ends with `# EOF`); served with
    /// [`Format::content_type`].
    pub fn encode(&self, format: Format) -> String {
        let mut out = String::new();
        let r = match format {
            Format::OpenMetrics => {
                prometheus_client::encoding::text::encode(&mut out, &self.registry)
            }
            Format::Prometheus => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            }
        };
        // Writing into a String cannot fail; an encoder error would be a bug in a family.
        if let Err(e) = r {
            tracing::error!(error = %e, "metrics: cannot encode the registry");
        }
        out
    }

    /// An operation stopped in `state` (by the engine: COMPLETED, FAILED_TEMP, ROLLED_BACK; by
    /// a FAIL task or a superseding TERMINATE: FAILED). `ran`: how long the engine ran it
    /// (`None` when it was not the engine that ended it).
    pub fn operation_finished(
        &self,
        operation: LcmOperationType,
        state: OperationState,
        ran: Option<Duration>,
    ) {
        self.operations_finished
            .get_or_create(&OperationStateLabels {
                operation: operation.as_str(),
                state: state.as_str(),
            })
            .inc();
        if let Some(d) = ran {
            self.operation_duration
                .get_or_create(&OperationLabels {
                    operation: operation.as_str(),
                })
                .observe(d.as_secs_f64());
        }
    }

    /// A journaled step ended (`done`: DONE in the journal; otherwise FAILED). `step`: the step
    /// script's or cloud action's name (a constant: the label stays bounded).
    pub fn step_finished(&self, step: &'static str, done: bool, took: Duration) {
        self.step_duration
            .get_or_create(&StepLabels {
                step,
                result: if done { "done" } else { "failed" },
            })
            .observe(took.as_secs_f64());
    }

    /// A reconcile pass ended. `report`: after [`crate::reconcile::record`] when `recorded`
    /// (its `started` filled); `took`: the pass's wall time; `at`: its `now` (the gauge of the
    /// last successful pass is set from it when recorded).
    pub fn reconcile_pass(
        &self,
        report: &PassReport,
        recorded: bool,
        took: Duration,
        at: vnfkeeper_core::model::Timestamp,
    ) {
        let kind = report.kind.as_str();
        self.passes
            .get_or_create(&PassResultLabels {
                kind,
                result: if recorded { "recorded" } else { "failed" },
            })
            .inc();
        self.pass_duration
            .get_or_create(&PassLabels { kind })
            .observe(took.as_secs_f64());
        self.pass_requests
            .get_or_create(&PassLabels { kind })
            .observe(report.api_requests as f64);
        if !recorded {
            return;
        }
        self.last_success.set(at.0.timestamp());
        self.heals_started.inc_by(report.started.len() as u64);
        for o in &report.outcomes {
            for d in &o.decisions {
                if let Some(reason) = blocked_reason(d.kind) {
                    self.heals_blocked
                        .get_or_create(&ReasonLabels { reason })
                        .inc();
                } else if let Some(reason) = deferred_reason(d.kind) {
                    self.heals_deferred
                        .get_or_create(&ReasonLabels { reason })
                        .inc();
                }
            }
            // A heal decided on but not queued: an operation arrived between observation and
            // record (`record` writes a RECONCILE_IN_FLIGHT event for it).
            if o.heal.is_some() && !report.started.iter().any(|(v, _)| *v == o.vnf_instance_id) {
                self.heals_deferred
                    .get_or_create(&ReasonLabels {
                        reason: "in_flight",
                    })
                    .inc();
            }
        }
    }

    /// Intake decided a spool file. A FAIL task ends its operation in FAILED: counted in
    /// `vnfkeeper_operations_finished_total` too.
    pub fn intake_outcome(&self, outcome: &Outcome) {
        let label = match outcome {
            Outcome::Accepted { ended, .. } => {
                if let Some(op) = ended {
                    self.operation_finished(*op, OperationState::Failed, None);
                }
                "accepted"
            }
            Outcome::Duplicate { .. } => "duplicate",
            Outcome::Rejected { .. } => "rejected",
            Outcome::Quarantined { .. } => "quarantined",
            Outcome::Recovered { .. } => "recovered",
        };
        self.intake_files
            .get_or_create(&OutcomeLabels { outcome: label })
            .inc();
    }

    /// A fast observation ended (`"ok"`, `"failed"`) or was not sent because the previous one
    /// still ran (`"skipped"`).
    pub fn changes_poll(&self, outcome: &'static str) {
        self.changes_polls
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Sets the state gauges to `g` (every label value known in advance is set, absent ones
    /// to 0).
    pub fn set_state(&self, g: &StateGauges) {
        for op in OPERATIONS {
            for state in UNFINISHED_STATES {
                let n = g.operations.get(&(op, state)).copied().unwrap_or(0);
                self.operations
                    .get_or_create(&OperationStateLabels {
                        operation: op.as_str(),
                        state: state.as_str(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        for state in INSTANCE_STATES {
            let n = g.instances.get(&state).copied().unwrap_or(0);
            self.instances
                .get_or_create(&InstanceStateLabels {
                    state: state.as_str(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for held_by in std::iter::once("none").chain(BLOCKED_REASONS) {
            let n: u64 = g
                .unhealthy_vnfcs
                .iter()
                .filter(|(k, _)| held_reason(**k) == held_by)
                .map(|(_, n)| n)
                .sum();
            self.vnfcs_unhealthy
                .get_or_create(&HeldLabels { held_by })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.vnfs_paused
            .set(i64::try_from(g.paused_vnfs).unwrap_or(i64::MAX));
    }

    /// Request files in `new/` waiting for a decision, as the main loop knows them.
    pub fn set_spool_backlog(&self, files: usize) {
        self.spool_backlog
            .set(i64::try_from(files).unwrap_or(i64::MAX));
    }
}

/// Values of `vnfkeeper_heals_blocked_total{reason}`: a heal is called for and a rule holds it.
const BLOCKED_REASONS: [&str; 5] = [
    "max_unhealthy",
    "retry_budget",
    "pv_bound",
    "paused",
    "rebuild_refused",
];

/// Values of `vnfkeeper_heals_deferred_total{reason}`: nothing judged yet. `in_flight`: an
/// operation of the VNF runs (often the automatic heal itself), or another heal goes first.
const DEFERRED_REASONS: [&str; 4] = ["unknown_health", "grace", "backoff", "in_flight"];

/// Values of `vnfkeeper_intake_files_total{outcome}`.
const INTAKE_OUTCOMES: [&str; 5] = [
    "accepted",
    "duplicate",
    "rejected",
    "quarantined",
    "recovered",
];

/// The `held_by` of an unhealthy VNFC whose heal the decision of kind `held` holds back:
/// the matching `vnfkeeper_heals_blocked_total` reason, `none` without one.
fn held_reason(held: Option<EventKind>) -> &'static str {
    match held {
        Some(EventKind::ReconcileShortCircuit) => "max_unhealthy",
        Some(EventKind::ReconcileBudgetExhausted) => "retry_budget",
        Some(EventKind::ReconcilePvBoundBlock) => "pv_bound",
        Some(EventKind::ReconcilePaused) => "paused",
        Some(EventKind::ReconcileRebuildRefused) => "rebuild_refused",
        _ => "none",
    }
}

/// The `reason` of a decision that held back a heal (see [`DecisionKind`]).
fn blocked_reason(kind: DecisionKind) -> Option<&'static str> {
    Some(match kind {
        DecisionKind::ShortCircuit => "max_unhealthy",
        DecisionKind::BudgetExhausted => "retry_budget",
        DecisionKind::PvBoundBlock => "pv_bound",
        DecisionKind::Paused => "paused",
        DecisionKind::RebuildRefused => "rebuild_refused",
        _ => return None,
    })
}

/// The `reason` of a decision that waited before judging.
fn deferred_reason(kind: DecisionKind) -> Option<&'static str> {
    Some(match kind {
        DecisionKind::DeferredUnknown => "unknown_health",
        DecisionKind::DeferredGrace => "grace",
        DecisionKind::DeferredBackoff => "backoff",
        DecisionKind::InFlight => "in_flight",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
    }

    #[test]
    fn families_are_named_with_units_and_end_with_eof() {
        let m = Metrics::new();
        m.operation_finished(
            LcmOperationType::Heal,
            OperationState::Completed,
            Some(Duration::from_secs(3)),
        );
        m.step_finished("heat.create", true, Duration::from_millis(250));
        m.set_spool_backlog(7);
        let classic = m.encode(Format::Prometheus);
        assert!(!classic.contains("# EOF"), "{classic}");
        assert_eq!(
            value(&classic, "vnfkeeper_spool_backlog_files"),
            7.0,
            "{classic}"
        );
        let text = m.encode(Format::OpenMetrics);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(
            value(
                &text,
                "vnfkeeper_operations_finished_total{operation=\"HEAL\",state=\"COMPLETED\"}"
            ),
            1.0
        );
        assert_eq!(
            value(
                &text,
                "vnfkeeper_operations_finished_total{operation=\"SCALE\",state=\"FAILED\"}"
            ),
            0.0
        );
        assert_eq!(
            value(
                &text,
                "vnfkeeper_operation_duration_seconds_count{operation=\"HEAL\"}"
            ),
            1.0
        );
        assert_eq!(
            value(
                &text,
                "vnfkeeper_step_duration_seconds_sum{step=\"heat.create\",result=\"done\"}"
            ),
            0.25
        );
        assert_eq!(value(&text, "vnfkeeper_spool_backlog_files"), 7.0);
        assert!(text.contains("# UNIT vnfkeeper_operation_duration_seconds seconds"));
        assert!(text.contains("vnfkeeper_build_info{version="), "{text}");
        assert_eq!(
            value(&text, "vnfkeeper_reconcile_last_success_timestamp_seconds"),
            0.0
        );
    }

    #[test]
    fn state_gauges_and_process_start_exist_before_anything_happened() {
        let m = Metrics::new();
        let text = m.encode(Format::OpenMetrics);
        for series in [
            "vnfkeeper_operations{operation=\"HEAL\",state=\"FAILED_TEMP\"}",
            "vnfkeeper_vnf_instances{state=\"INSTANTIATED\"}",
            "vnfkeeper_vnfcs_unhealthy{held_by=\"none\"}",
            "vnfkeeper_vnfcs_unhealthy{held_by=\"retry_budget\"}",
            "vnfkeeper_vnfs_paused",
            "vnfkeeper_step_duration_seconds_count{step=\"heat.create\",result=\"done\"}",
        ] {
            assert_eq!(value(&text, series), 0.0, "{series}");
        }
        assert!(value(&text, "process_start_time_seconds") > 1.7e9, "{text}");
        assert!(text.contains("# TYPE vnfkeeper_operations gauge"), "{text}");

        let mut g = StateGauges::default();
        g.operations
            .insert((LcmOperationType::Heal, OperationState::FailedTemp), 2);
        g.instances.insert(InstantiationState::Instantiated, 3);
        g.unhealthy_vnfcs
            .insert(Some(EventKind::ReconcileBudgetExhausted), 1);
        g.unhealthy_vnfcs.insert(None, 4);
        g.paused_vnfs = 1;
        m.set_state(&g);
        let text = m.encode(Format::Prometheus);
        assert_eq!(
            value(
                &text,
                "vnfkeeper_operations{operation=\"HEAL\",state=\"FAILED_TEMP\"}"
            ),
            2.0
        );
        assert_eq!(
            value(
                &text,
                "vnfkeeper_operations{operation=\"SCALE\",state=\"FAILED_TEMP\"}"
            ),
            0.0
        );
        assert_eq!(
            value(&text, "vnfkeeper_vnf_instances{state=\"INSTANTIATED\"}"),
            3.0
        );
        assert_eq!(
            value(&text, "vnfkeeper_vnfcs_unhealthy{held_by=\"retry_budget\"}"),
            1.0
        );
        assert_eq!(
            value(&text, "vnfkeeper_vnfcs_unhealthy{held_by=\"none\"}"),
            4.0
        );
        assert_eq!(value(&text, "vnfkeeper_vnfs_paused"), 1.0);
        // Back to nothing: every series stays, at 0.
        m.set_state(&StateGauges::default());
        let text = m.encode(Format::Prometheus);
        assert_eq!(
            value(
                &text,
                "vnfkeeper_operations{operation=\"HEAL\",state=\"FAILED_TEMP\"}"
            ),
            0.0
        );
    }

    #[test]
    fn accept_header_chooses_the_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(
            Format::OpenMetrics.content_type(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
    }

    #[test]
    fn every_decision_kind_has_at_most_one_reason() {
        use DecisionKind::*;
        for k in [
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
        ] {
            assert!(
                blocked_reason(k).is_none() || deferred_reason(k).is_none(),
                "{k:?}"
            );
            let counted = blocked_reason(k).or(deferred_reason(k));
            assert_eq!(
                counted.is_none(),
                matches!(k, HealStarted | DriftDetected),
                "{k:?}"
            );
            if let Some(r) = blocked_reason(k) {
                assert!(BLOCKED_REASONS.contains(&r));
            }
            if let Some(r) = deferred_reason(k) {
                assert!(DEFERRED_REASONS.contains(&r));
            }
        }
    }
}
