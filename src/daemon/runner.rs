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
            self.busy_vnfs.insert(vnf);
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
