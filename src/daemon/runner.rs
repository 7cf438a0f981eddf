//! Starts operations: every second, on its own task (never on the main loop), the head of each
//! VNF instance's queue is started if the engine can run it, at most `limits.max_parallel_operations` at once and never
//! two for one instance. Without a `[cloud]` section (or while the cloud cannot be reached) nothing
//! starts and operations wait in `STARTING`. The cloud and the SSH remote are the daemon's shared
//! [`Connection`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::connect::Connection;
use crate::cloud::OpenStackCloud;
use crate::config::Settings;
use crate::engine::{Engine, EngineLimits};
use crate::metrics::Metrics;
use crate::store::Db;

use vnfkeeper_core::model::{OpOccId, OperationState, VnfInstanceId};

/// What an operation task returns: (vnf instance, op id, final state or database error).
type TaskResult = (VnfInstanceId, OpOccId, Result<OperationState, String>);

/// The operation scheduler of the daemon.
struct Runner {
    db: Db,
    /// Made from the connection the first time one is there, then kept.
    engine: Option<Arc<Engine<OpenStackCloud>>>,
    limits: EngineLimits,
    max_parallel: usize,
    /// Operations in flight; each task returns (vnf instance, op id, outcome).
    running: JoinSet<TaskResult>,
    /// VNF instances with an operation in flight, by task.
    busy: HashMap<tokio::task::Id, VnfInstanceId>,
    busy_vnfs: HashSet<VnfInstanceId>,
    /// How to abort the task in flight for a VNF instance (a TERMINATE superseding it).
    aborts: HashMap<VnfInstanceId, tokio::task::AbortHandle>,
    /// The daemon's metrics, handed to the engine; superseded operations are counted here.
    metrics: Arc<Metrics>,
    /// Companion mode's Tacker connection, handed to the engine.
    tacker: crate::tacker::vim::TackerLink,
}

impl Runner {
    /// A scheduler with no engine yet: the engine is made by the first [`Runner::schedule`]
    /// that has a connection, so readiness never waits for the cloud.
    fn new(db: Db, settings: &Settings, metrics: Arc<Metrics>) -> Self {
        let limits = EngineLimits {
            max_parallel_hosts: settings.limits.max_parallel_hosts as usize,
            command_timeout: settings.limits.command_timeout,
            ..EngineLimits::default()
        };
        Self {
            db,
            engine: None,
            limits,
            max_parallel: settings.limits.max_parallel_operations as usize,
            running: JoinSet::new(),
            busy: HashMap::new(),
            busy_vnfs: HashSet::new(),
            aborts: HashMap::new(),
            metrics,
            tacker: crate::tacker::vim::TackerLink::default(),
        }
    }

    /// Starts every runnable queue head that is not running yet, within the limit. `conn`: the
    /// daemon's connection, `None` while there is none (then only the queue bookkeeping runs).
    ///
    /// Cost per call: the TERMINATEs waiting behind other operations, plus the runnable heads
    /// read until the free slots are filled (indexed queries, see
    /// [`crate::store::ReaderRef::runnable_heads`]); never the number of queued or stuck
    /// operations.
    fn schedule(&mut self, conn: Option<&Connection>) {
        // Queue bookkeeping needs no cloud: a TERMINATE may end what waits ahead of it.
        match self.db.with(|s| s.reader().terminations_waiting()) {
            Ok(terms) => self.supersede_for_terminations(&terms),
            Err(e) => tracing::error!(error = %e, "cannot read the waiting TERMINATEs"),
        }
        if self.engine.is_none()
            && let Some(c) = conn
        {
            self.engine = Some(Arc::new(
                Engine::new(
                    self.db.clone(),
                    c.cloud.clone(),
                    c.remote.clone(),
                    self.limits.clone(),
                )
                .with_metrics(self.metrics.clone())
                .with_tacker(self.tacker.clone()),
            ));
        }
        let Some(engine) = self.engine.clone() else {
            return;
        };
        let free = self.max_parallel.saturating_sub(self.running.len());
        let heads = match self
            .db
            .with(|s| s.reader().runnable_heads(free, &self.busy_vnfs))
        {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the operation queue");
                return;
            }
        };
        for op in heads {
            let vnf = op.vnf_instance_id.clone();
            let engine = engine.clone();
            let handle = self.running.spawn(async move {
                let r = engine.run(&op.id).await.map_err(|e| e.to_string());
                (op.vnf_instance_id, op.id, r)
            });
            self.busy.insert(handle.id(), vnf.clone());
            self.aborts.insert(vnf.clone(), handle);
            self.busy_vnfs.insert(vnf);
        }
    }

    /// A TERMINATE queued behind other operations of its VNF instance stops waiting for them when
    /// [`vnfkeeper_core::plan::terminate::supersedes_ahead`] says so: the task in flight (if any) is
    /// aborted and every operation ahead ends `FAILED` (superseded), so the TERMINATE becomes the
    /// head of the queue. `terms`: [`crate::store::ReaderRef::terminations_waiting`]; only the
    /// first of each VNF instance counts, and none whose queue is headed by another TERMINATE.
    fn supersede_for_terminations(&mut self, terms: &[crate::store::OperationRow]) {
        use vnfkeeper_core::model::LcmOperationType;
        let mut seen = HashSet::new();
        for term in terms {
            if !seen.insert(term.vnf_instance_id.as_str()) {
                continue;
            }
            let Ok(queue) = self.db.with(|s| s.reader().queue(&term.vnf_instance_id)) else {
                continue;
            };
            if queue
                .first()
                .is_none_or(|head| head.operation == LcmOperationType::Terminate)
            {
                continue;
            }
            let Some(why) = self
                .db
                .with(|s| s.reader().operation_params(&term.id))
                .ok()
                .flatten()
                .and_then(|(p, _)| serde_json::from_str(&p).ok())
                .and_then(|req| {
                    vnfkeeper_core::plan::terminate::supersedes_ahead(
                        &req,
                        term.start_time,
                        chrono::Utc::now(),
                    )
                })
            else {
                continue;
            };
            if let Some(handle) = self.aborts.remove(term.vnf_instance_id.as_str()) {
                handle.abort();
            }
            let ahead: Vec<(OpOccId, LcmOperationType)> = queue
                .iter()
                .filter(|o| o.seq < term.seq)
                .map(|o| (o.id.clone(), o.operation))
                .collect();
            let now = vnfkeeper_core::model::Timestamp(chrono::Utc::now());
            let result = self.db.write(|tx| {
                for (id, _) in &ahead {
                    tx.supersede(id, &term.id, &why, now)?;
                }
                Ok(())
            });
            if result.is_ok() {
                for (_, operation) in &ahead {
                    self.metrics
                        .operation_finished(*operation, OperationState::Failed, None);
                }
            }
            match result {
                Ok(()) => tracing::warn!(
                    vnf_instance_id = %term.vnf_instance_id, vnf_lcm_op_occ_id = %term.id,
                    superseded = ahead.len(), "{why}: operations ahead of the TERMINATE end FAILED"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "cannot supersede operations for a TERMINATE")
                }
            }
        }
    }

    /// Records the end of an operation task.
    fn finished(&mut self, done: Result<(tokio::task::Id, TaskResult), tokio::task::JoinError>) {
        let id = match &done {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some(vnf) = self.busy.remove(&id) {
            self.busy_vnfs.remove(&vnf);
            self.aborts.remove(&vnf);
        }
        match done {
            Ok((_, (vnf, op, Ok(state)))) => {
                tracing::info!(vnf_instance_id = %vnf, vnf_lcm_op_occ_id = %op, state = %state, "operation stopped")
            }
            Ok((_, (vnf, op, Err(e)))) => tracing::error!(
                vnf_instance_id = %vnf, vnf_lcm_op_occ_id = %op, error = %e,
                "operation interrupted by a database error; it resumes later"
            ),
            Err(e) => {
                tracing::error!(error = %e, "operation task ended abnormally; it resumes later")
            }
        }
    }

    /// Stops: running operations get a few seconds to finish their current step, then are
    /// aborted; the journal makes them resume at the interrupted step after a restart.
    async fn stop(&mut self) {
        let deadline = tokio::time::sleep(Duration::from_secs(10));
        tokio::pin!(deadline);
        while !self.running.is_empty() {
            tokio::select! {
                Some(done) = self.running.join_next_with_id() => self.finished(done),
                _ = &mut deadline => {
                    tracing::warn!(running = self.running.len(), "aborting running operations; they resume after restart");
                    self.running.abort_all();
                    while self.running.join_next().await.is_some() {}
                    break;
                }
            }
        }
    }
}

/// What the scheduler task reports for the service status line, refreshed every tick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct QueueStatus {
    /// VNF instances known.
    pub instances: i64,
    /// Operations not in a final state.
    pub unfinished: i64,
    /// Operations in flight.
    pub running: usize,
    /// The database error of the last count, if it failed.
    pub error: Option<String>,
}

/// Counts the status line's figures (`running`: operations in flight).
fn queue_status(db: &Db, running: usize) -> QueueStatus {
    match db.with(|s| s.reader().counts()) {
        Ok((instances, unfinished)) => QueueStatus {
            instances,
            unfinished,
            running,
            error: None,
        },
        Err(e) => QueueStatus {
            running,
            error: Some(e.to_string()),
            ..QueueStatus::default()
        },
    }
}

/// The scheduler running on its own task: the main loop hands it the cloud connection once made
/// and reads its [`QueueStatus`]; neither side ever waits for the other.
pub(super) struct Scheduler {
    conn: mpsc::UnboundedSender<Connection>,
    /// Asks for a scheduling round now (an intake batch ended).
    wake: Arc<tokio::sync::Notify>,
    /// The latest [`QueueStatus`].
    pub status: watch::Receiver<QueueStatus>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Scheduler {
    /// Spawns the scheduler task: every second, when [`Scheduler::wake`] asks, when the cloud
    /// connection arrives and when an operation ends (its instance's next queued operation may
    /// start), it runs [`Runner::schedule`] (whose database calls run under `block_in_place` on
    /// this task's worker, not on the main loop's); every second it also publishes the counts
    /// for the status line.
    pub(super) fn spawn(
        db: Db,
        settings: &Settings,
        metrics: Arc<Metrics>,
        tacker: crate::tacker::vim::TackerLink,
    ) -> Self {
        let mut runner = Runner::new(db.clone(), settings, metrics);
        runner.tacker = tacker;
        let (conn_tx, mut conn_rx) = mpsc::unbounded_channel::<Connection>();
        // Counted once here (at start-up, before the main loop runs) so that the first status
        // line is true.
        let (status_tx, status) = watch::channel(queue_status(&db, 0));
        let (stop, mut stop_rx) = tokio::sync::oneshot::channel();
        let wake = Arc::new(tokio::sync::Notify::new());
        let woken = wake.clone();
        let task = tokio::spawn(async move {
            let mut conn: Option<Connection> = None;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                // The status line's counts are refreshed on the tick only: they cost a pass over
                // the unfinished operations, too much for every intake batch.
                let ticked = tokio::select! {
                    _ = tick.tick() => true,
                    _ = woken.notified() => false,
                    Some(c) = conn_rx.recv() => {
                        conn = Some(c);
                        false
                    }
                    Some(done) = runner.running.join_next_with_id(), if !runner.running.is_empty() => {
                        runner.finished(done);
                        false
                    }
                    _ = &mut stop_rx => break,
                };
                runner.schedule(conn.as_ref());
                if ticked {
                    let now = queue_status(&db, runner.running.len());
                    status_tx.send_if_modified(|s| {
                        if *s == now {
                            false
                        } else {
                            *s = now;
                            true
                        }
                    });
                }
            }
            runner.stop().await;
        });
        Self {
            conn: conn_tx,
            wake,
            status,
            stop: Some(stop),
            task,
        }
    }

    /// Asks for a scheduling round now rather than at the next tick (several asks before the
    /// round runs make one round).
    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Hands the daemon's connection to the scheduler (once, when it is made).
    pub(super) fn set_connection(&self, conn: Connection) {
        let _ = self.conn.send(conn);
    }

    /// Stops scheduling and waits for the running operations as [`Runner::stop`] does.
    pub(super) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "scheduler task ended abnormally");
        }
    }
}
