//! Starts operations: every second (and after intake), the head of each VNF instance's queue is
//! started if the engine can run it, at most `limits.max_parallel_operations` at once and never
//! two for one instance. Without a `[cloud]` section (or while the cloud cannot be reached) nothing
//! starts and operations wait in `STARTING`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::cloud::{CloudError, OpenStackCloud};
use crate::config::{CloudSettings, Settings};
use crate::engine::{Engine, EngineLimits};
use crate::model::OperationState;
use crate::remote::{SshConfig, SshRemote};
use crate::store::Db;

/// What an operation task returns: (vnf instance, op id, final state or database error).
type TaskResult = (String, String, Result<OperationState, String>);

/// How often an unreachable cloud is tried again.
const CLOUD_RETRY: Duration = Duration::from_secs(30);

/// The operation scheduler of the daemon.
pub(super) struct Runner {
    db: Db,
    cloud: Option<CloudSettings>,
    engine: Option<Arc<Engine<OpenStackCloud>>>,
    limits: EngineLimits,
    max_parallel: usize,
    last_connect: Option<Instant>,
    /// A connection attempt in progress. It runs as its own task so that a slow or unreachable
    /// cloud (each request may take `api_timeout`) never holds up the main loop and its
    /// watchdog pings.
    connecting: Option<tokio::task::JoinHandle<Result<OpenStackCloud, CloudError>>>,
    /// Operations in flight; each task returns (vnf instance, op id, outcome).
    pub running: JoinSet<TaskResult>,
    /// VNF instances with an operation in flight, by task.
    busy: HashMap<tokio::task::Id, String>,
    busy_vnfs: HashSet<String>,
    /// How to abort the task in flight for a VNF instance (a TERMINATE superseding it).
    aborts: HashMap<String, tokio::task::AbortHandle>,
}

impl Runner {
    /// A scheduler with no engine yet: the first [`Runner::schedule`] connects to the cloud, so
    /// readiness never waits for it.
    pub(super) fn new(db: Db, settings: &Settings) -> Self {
        let limits = EngineLimits {
            max_parallel_hosts: settings.limits.max_parallel_hosts as usize,
            command_timeout: settings.limits.command_timeout,
            ..EngineLimits::default()
        };
        Self {
            db,
            cloud: settings.cloud.clone(),
            engine: None,
            limits,
            max_parallel: settings.limits.max_parallel_operations as usize,
            last_connect: None,
            connecting: None,
            running: JoinSet::new(),
            busy: HashMap::new(),
            busy_vnfs: HashSet::new(),
            aborts: HashMap::new(),
        }
    }

    /// Starts a connection attempt in the background.
    fn start_connect(&mut self) {
        let Some(c) = &self.cloud else { return };
        self.last_connect = Some(Instant::now());
        let (clouds_yaml, cloud, timeout) = (c.clouds_yaml.clone(), c.cloud.clone(), c.api_timeout);
        self.connecting = Some(tokio::spawn(async move {
            OpenStackCloud::connect(&clouds_yaml, &cloud, timeout).await
        }));
    }

    /// Takes the result of a finished connection attempt: an engine, or an error logged.
    async fn finish_connect(&mut self, settings: &Settings) {
        let Some(handle) = self.connecting.take_if(|h| h.is_finished()) else {
            return;
        };
        let Some(c) = &self.cloud else { return };
        let result = handle.await.unwrap_or_else(|e| {
            Err(CloudError::Config {
                path: c.clouds_yaml.clone(),
                message: format!("connection task ended abnormally: {e}"),
            })
        });
        match result {
            Ok(cloud) => {
                let remote = SshRemote::new(SshConfig {
                    connect_timeout: settings.limits.ssh_connect_timeout,
                    ..SshConfig::default()
                });
                self.engine = Some(Arc::new(Engine::new(
                    self.db.clone(),
                    Arc::new(cloud),
                    Arc::new(remote),
                    self.limits.clone(),
                )));
                tracing::info!(cloud = %c.cloud, clouds_yaml = %c.clouds_yaml.display(), "cloud connected");
            }
            Err(e) => {
                tracing::error!(cloud = %c.cloud, error = %e, "cannot reach the cloud; operations wait, retrying in 30 s");
            }
        }
    }

    /// Starts every runnable queue head that is not running yet, within the limit; first
    /// (re)connects to the cloud in the background if that is due.
    pub(super) async fn schedule(&mut self, settings: &Settings) {
        // Queue bookkeeping needs no cloud: a TERMINATE may end what waits ahead of it.
        if let Ok(heads) = self.db.with(|s| s.reader().heads_of_queues()) {
            self.supersede_for_terminations(&heads);
        }
        if self.engine.is_none() {
            self.finish_connect(settings).await;
            if self.engine.is_none()
                && self.connecting.is_none()
                && self.cloud.is_some()
                && self.last_connect.is_none_or(|t| t.elapsed() >= CLOUD_RETRY)
            {
                self.start_connect();
            }
            if self.engine.is_none() {
                return;
            }
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
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
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
