//! The engine: runs one LCM operation occurrence to `COMPLETED` or `FAILED_TEMP`, journaling every
//! step in SQLite before and after it runs, so that after a crash, a restart or a RETRY the
//! operation resumes at its first unfinished step. Steps on several hosts fan out in parallel,
//! bounded by `limits.max_parallel_hosts`; transient failures (connection, timeouts, HTTP 5xx/429)
//! are retried with exponential backoff and jitter; anything else fails the operation at once
//! with a ProblemDetails naming the step, the host, the exit status and the masked stderr tail.
//!
//! State machine: SOL003 §5.6.2.2 (see [`vnfkeeper_core::model::OperationState`]).

mod adjusted;
mod change_ext_conn;
mod executor;
mod heal;
mod instance;
mod instantiate;
mod scale;
mod steps;
mod terminate;
mod vim;

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument as _;

use crate::cloud::Cloud;
use crate::metrics::Metrics;
use crate::remote::Remote;
use crate::store::{Db, NewEvent, OperationRow, StoreError};

pub use steps::StepFailure;

use vnfkeeper_core::model::{
    EventKind, LcmOperationType, OpOccId, OperationState, PendingTask, Timestamp,
};

/// Tunables of the engine (from the configuration's `[limits]`).
#[derive(Debug, Clone)]
pub struct EngineLimits {
    /// Hosts one stage works on at once.
    pub max_parallel_hosts: usize,
    /// Longest one remote command may run (steps may ask for less).
    pub command_timeout: Duration,
    /// Attempts per step for transient failures (1 = no retry).
    pub attempts: u32,
    /// First backoff delay; doubles per attempt (with ±25 % jitter), capped at 30 s.
    pub backoff: Duration,
    /// Longest wait for a Heat stack to reach `*_COMPLETE` (and for a server a HEAL stops to
    /// become `SHUTOFF`, a volume it detaches to become `available`).
    pub stack_timeout: Duration,
    /// Longest wait for a PersistentVolume to become Available.
    pub pv_wait: Duration,
}

impl Default for EngineLimits {
    fn default() -> Self {
        Self {
            max_parallel_hosts: 16,
            command_timeout: Duration::from_secs(900),
            attempts: 5,
            backoff: Duration::from_secs(1),
            stack_timeout: Duration::from_secs(3600),
            pv_wait: Duration::from_secs(150),
        }
    }
}

/// Why an operation stopped short of its goal.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A step failed (permanently, or transiently beyond the retry budget).
    #[error("{0}")]
    Step(#[from] StepFailure),
    /// The database failed; the operation is left as it is and resumes later.
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl From<vnfkeeper_core::flavour::FlavourError> for EngineError {
    fn from(e: vnfkeeper_core::flavour::FlavourError) -> Self {
        EngineError::Step(e.into())
    }
}

/// Runs operations. One `Engine` serves the whole daemon; `run` is called once per operation
/// occurrence at a time (the daemon guarantees one operation per VNF instance in flight).
pub struct Engine<C> {
    db: Db,
    cloud: Arc<C>,
    remote: Arc<dyn Remote>,
    limits: EngineLimits,
    /// Where operation and step ends are counted (the daemon's registry; a private one unless
    /// [`Engine::with_metrics`] was called).
    metrics: Arc<Metrics>,
    /// Companion mode's Tacker connection (`tacker.register_vim`); empty outside it.
    tacker: crate::tacker::vim::TackerLink,
}

impl<C> std::fmt::Debug for Engine<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// What one call of [`Engine::run`] did: the state the occurrence is in, and whether this run
/// moved it there (`None`: nothing to do, e.g. already final or waiting for an operator).
struct Ran {
    state: OperationState,
    reached: Option<OperationState>,
}

fn now() -> Timestamp {
    Timestamp(chrono::Utc::now())
}

impl<C: Cloud> Engine<C> {
    /// An engine over the shared database, a cloud and a remote.
    pub fn new(db: Db, cloud: Arc<C>, remote: Arc<dyn Remote>, limits: EngineLimits) -> Self {
        Self {
            db,
            cloud,
            remote,
            limits,
            metrics: Arc::default(),
            tacker: crate::tacker::vim::TackerLink::default(),
        }
    }

    /// The same engine reaching Tacker through `link` (companion mode: the connection of the
    /// `tacker.cloud` entry once made), for the stages that register the cluster with Tacker.
    pub fn with_tacker(mut self, link: crate::tacker::vim::TackerLink) -> Self {
        self.tacker = link;
        self
    }

    /// The same engine counting into `metrics` (the daemon's registry, served at `/metrics`).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs (or resumes) the operation `op_id` until it reaches `COMPLETED`, `FAILED_TEMP` or
    /// `ROLLED_BACK`, and returns that state. Errors: only database errors (the operation is
    /// then left where it was and resumes on the next call).
    pub async fn run(&self, op_id: &OpOccId) -> Result<OperationState, StoreError> {
        let Some(op) = self.db.with(|s| s.reader().operation(op_id))? else {
            return Ok(OperationState::Failed);
        };
        let span = tracing::info_span!("operation", vnf_instance_id = %op.vnf_instance_id, vnf_lcm_op_occ_id = %op.id, operation = %op.operation);
        let operation = op.operation;
        let started = std::time::Instant::now();
        let vnf_instance_id = op.vnf_instance_id.clone();
        let ran = self.run_op(op).instrument(span).await?;
        if ran.state.is_final() {
            self.remove_artifacts(&vnf_instance_id, |a| !a.outlives_operation());
        }
        if let Some(state) = ran.reached {
            self.metrics
                .operation_finished(operation, state, Some(started.elapsed()));
        }
        Ok(ran.state)
    }

    async fn run_op(&self, op: OperationRow) -> Result<Ran, StoreError> {
        let reached = match (op.operation_state, op.pending_task) {
            (OperationState::Starting, _)
            | (OperationState::FailedTemp, Some(PendingTask::Retry)) => {
                self.transition(&op, OperationState::Processing, None, "processing")?;
                self.process(&op).await?
            }
            (OperationState::Processing, _) => {
                tracing::info!("resuming after a restart at the first unfinished step");
                self.process(&op).await?
            }
            (OperationState::FailedTemp, Some(PendingTask::Rollback)) => {
                self.transition(&op, OperationState::RollingBack, None, "rolling back")?;
                self.roll_back(&op).await?
            }
            (OperationState::RollingBack, _) => self.roll_back(&op).await?,
            (state, _) => {
                return Ok(Ran {
                    state,
                    reached: None,
                });
            }
        };
        Ok(Ran {
            state: reached,
            reached: Some(reached),
        })
    }

    async fn process(&self, op: &OperationRow) -> Result<OperationState, StoreError> {
        let result = match op.operation {
            LcmOperationType::Instantiate => instantiate::run(self, op).await,
            LcmOperationType::Scale => scale::run(self, op).await,
            LcmOperationType::Heal => heal::run(self, op).await,
            LcmOperationType::Terminate => terminate::run(self, op).await,
            LcmOperationType::ChangeExtConn => change_ext_conn::run(self, op).await,
        };
        match result {
            Ok(()) => {
                self.transition(op, OperationState::Completed, None, "completed")?;
                tracing::info!("operation completed");
                Ok(OperationState::Completed)
            }
            Err(EngineError::Store(e)) => Err(e),
            Err(EngineError::Step(f)) => self.record_failure(op, &f),
        }
    }

    /// Records a failed step: FAILED_TEMP with its ProblemDetails, and the journal record.
    fn record_failure(
        &self,
        op: &OperationRow,
        f: &StepFailure,
    ) -> Result<OperationState, StoreError> {
        let problem = f.problem();
        tracing::error!(
            message_id = crate::message_ids::MSG_OPERATION_FAILED,
            step = %f.step,
            host = %f.host,
            "operation failed: {}",
            problem.detail
        );
        let json = serde_json::to_string(&problem).unwrap_or_default();
        self.transition(op, OperationState::FailedTemp, Some(&json), &problem.detail)?;
        Ok(OperationState::FailedTemp)
    }

    async fn roll_back(&self, op: &OperationRow) -> Result<OperationState, StoreError> {
        let result = match op.operation {
            LcmOperationType::Instantiate => instantiate::roll_back(self, op).await,
            LcmOperationType::Scale => scale::roll_back(self, op).await,
            other => Err(EngineError::Step(StepFailure::unsupported(other))),
        };
        match result {
            Ok(()) => {
                self.transition(op, OperationState::RolledBack, None, "rolled back")?;
                Ok(OperationState::RolledBack)
            }
            Err(EngineError::Store(e)) => Err(e),
            Err(EngineError::Step(f)) => {
                let problem = f.problem();
                let json = serde_json::to_string(&problem).unwrap_or_default();
                self.transition(op, OperationState::FailedTemp, Some(&json), &problem.detail)?;
                Ok(OperationState::FailedTemp)
            }
        }
    }

    fn transition(
        &self,
        op: &OperationRow,
        to: OperationState,
        error: Option<&str>,
        detail: &str,
    ) -> Result<(), StoreError> {
        let t = now();
        self.db.write(|tx| {
            let from = tx.set_operation_state(op.id.as_str(), to, error, t)?;
            tx.set_status_detail(&op.id, detail)?;
            let message = format!("{} {} → {}: {detail}", op.operation, from, to);
            tx.append_event(
                &NewEvent {
                    kind: EventKind::StateChanged,
                    vnf_instance_id: Some(&op.vnf_instance_id),
                    vnf_lcm_op_occ_id: Some(&op.id),
                    vnfc_id: None,
                    message: &message,
                    evidence: error,
                },
                t,
            )
        })
    }

    fn status(&self, op: &OperationRow, detail: &str) -> Result<(), StoreError> {
        self.db.write(|tx| tx.set_status_detail(&op.id, detail))
    }
}

/// The waits between the `attempts` attempts of a step: backon's exponential backoff from `base`,
/// doubling, at most 30 s, each with ±25 % jitter (ours: backon's own jitter only lengthens a
/// wait, up to twice it, also past the cap).
fn retries(base: Duration, attempts: u32) -> impl backon::Backoff {
    use backon::BackoffBuilder as _;
    backon::ExponentialBuilder::default()
        .with_min_delay(base)
        .with_factor(2.0)
        .with_max_delay(Duration::from_secs(30))
        .with_max_times(attempts.saturating_sub(1) as usize)
        .build()
        .map(|wait| wait.mul_f64(0.75 + fastrand::f64() * 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_the_base_up_to_30_s_with_a_quarter_of_jitter() {
        let waits: Vec<Duration> = retries(Duration::from_secs(4), 6).collect();
        assert_eq!(waits.len(), 5, "attempts - 1 waits");
        for (w, nominal) in waits.iter().zip([4.0, 8.0, 16.0, 30.0, 30.0]) {
            let s = w.as_secs_f64();
            assert!(
                (nominal * 0.75..=nominal * 1.25).contains(&s),
                "{s} s for {nominal} s"
            );
        }
        assert_eq!(retries(Duration::from_secs(1), 1).count(), 0);
    }
}
