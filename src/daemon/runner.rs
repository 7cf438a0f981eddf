//! Starts operations: every second (and after intake), the head of each VNF instance's queue is
//! started if the engine can run it, at most `limits.max_parallel_operations` at once and never
//! two for one instance. Without a `[cloud]` section (or while the cloud cannot be reached) nothing
//! starts and operations wait in `STARTING`. The cloud and the SSH remote are the daemon's shared
//! [`Connection`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::connect::Connection;
use crate::cloud::OpenStackCloud;
use crate::config::Settings;
use crate::engine::{Engine, EngineLimits};
use crate::model::OperationState;
use crate::store::Db;

/// What an operation task returns: (vnf instance, op id, final state or database error).
type TaskResult = (String, String, Result<OperationState, String>);

/// The operation scheduler of the daemon.
pub(super) struct Runner {
    db: Db,
    /// Made from the connection the first time one is there, then kept.
    engine: Option<Arc<Engine<OpenStackCloud>>>,
    limits: EngineLimits,
    max_parallel: usize,
    /// Operations in flight; each task returns (vnf instance, op id, outcome).
    pub running: JoinSet<TaskResult>,
    /// VNF instances with an operation in flight, by task.
    busy: HashMap<tokio::task::Id, String>,
    busy_vnfs: HashSet<String>,
    /// How to abort the task in flight for a VNF instance (a TERMINATE superseding it).
    aborts: HashMap<String, tokio::task::AbortHandle>,
}

impl Runner {
    /// A scheduler with no engine yet: the engine is made by the first [`Runner::schedule`]
    /// that has a connection, so readiness never waits for the cloud.
    pub(super) fn new(db: Db, settings: &Settings) -> Self {
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
        }
    }

    /// Starts every runnable queue head that is not running yet, within the limit. `conn`: the
    /// daemon's connection, `None` while there is none (then only the queue bookkeeping runs).
    pub(super) fn schedule(&mut self, conn: Option<&Connection>) {
        // Queue bookkeeping needs no cloud: a TERMINATE may end what waits ahead of it.
        if let Ok(heads) = self.db.with(|s| s.reader().heads_of_queues()) {
            self.supersede_for_terminations(&heads);
        }
        if self.engine.is_none()
            && let Some(c) = conn
        {
            self.engine = Some(Arc::new(Engine::new(
                self.db.clone(),
                c.cloud.clone(),
                c.remote.clone(),
                self.limits.clone(),
            )));
        }
        let Some(engine) = self.engine.clone() else {
            return;
        };
        let heads = match self.db.with(|s| s.reader().heads_of_queues()) {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the operation queue");
                return;
            }
        };
        for op in heads {
            if self.running.len() >= self.max_parallel {
                break;
            }
            if self.busy_vnfs.contains(&op.vnf_instance_id)
                || !Engine::<OpenStackCloud>::is_runnable(&op)
            {
                continue;
            }
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
    /// [`crate::plan::terminate::supersedes_ahead`] says so: the task in flight (if any) is
    /// aborted and every operation ahead ends `FAILED` (superseded), so the TERMINATE becomes the
    /// head of the queue.
    fn supersede_for_terminations(&mut self, heads: &[crate::store::OperationRow]) {
        use crate::model::LcmOperationType;
        for head in heads
            .iter()
            .filter(|h| h.operation != LcmOperationType::Terminate)
        {
            let queue = match self
                .db
                .with(|s| s.reader().operations(Some(&head.vnf_instance_id)))
            {
                Ok(q) => q,
                Err(_) => continue,
            };
            let Some(term) = queue.iter().find(|o| {
                o.operation == LcmOperationType::Terminate
                    && matches!(o.operation_state, OperationState::Starting)
            }) else {
                continue;
            };
            let Some(why) = self
                .db
                .with(|s| s.reader().operation_params(&term.id))
                .ok()
                .flatten()
                .and_then(|(p, _)| serde_json::from_str(&p).ok())
                .and_then(|req| {
                    crate::plan::terminate::supersedes_ahead(
                        &req,
                        term.start_time,
                        chrono::Utc::now(),
                    )
                })
            else {
                continue;
            };
            if let Some(handle) = self.aborts.remove(&head.vnf_instance_id) {
                handle.abort();
            }
            let ahead: Vec<String> = queue
                .iter()
                .filter(|o| o.seq < term.seq && !o.operation_state.is_final())
                .map(|o| o.id.clone())
                .collect();
            let now = crate::model::Timestamp(chrono::Utc::now());
            let result = self.db.write(|tx| {
                for id in &ahead {
                    tx.supersede(id, &term.id, &why, now)?;
                }
                Ok(())
            });
            match result {
                Ok(()) => tracing::warn!(
                    vnf_instance_id = %head.vnf_instance_id, vnf_lcm_op_occ_id = %term.id,
                    superseded = ahead.len(), "{why}: operations ahead of the TERMINATE end FAILED"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "cannot supersede operations for a TERMINATE")
                }
            }
        }
    }

    /// Records the end of an operation task.
    pub(super) fn finished(
        &mut self,
        done: Result<(tokio::task::Id, TaskResult), tokio::task::JoinError>,
    ) {
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
    pub(super) async fn stop(&mut self) {
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
