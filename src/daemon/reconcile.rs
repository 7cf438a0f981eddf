//! The reconcile loop in the daemon: decides every second whether a pass is due (a trigger file
//! from `vnfkeeper reconcile --now`, the cron `schedule` for full passes, `cloud_interval_secs`
//! for cloud-only passes) and runs at most one pass at a time as a task. The pass itself lives in
//! [`crate::reconcile`]; this file only schedules it over the daemon's shared [`Connection`] (the
//! cloud and the SSH session pool the engine uses too), and writes through the daemon's one
//! database connection.
//!
//! Trigger files: `<spool>/new/.reconcile-now.<unique>` holding a vnfInstanceId or nothing (all).
//! Intake ignores dotfiles; the daemon deletes the files when it starts the pass.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::connect::Connection;
use crate::cloud::OpenStackCloud;
use crate::config::Settings;
use crate::metrics::Metrics;
use crate::model::Timestamp;
use crate::reconcile::{self, PassKind, Reconciler, probe::ProbeSettings};
use crate::store::Db;

pub use crate::reconcile::cmd::TRIGGER_PREFIX;

/// Scheduler state of the reconcile loop, owned by the main loop.
pub(super) struct ReconcileLoop {
    db: Db,
    new_dir: PathBuf,
    task: Option<JoinHandle<()>>,
    last_cloud_pass: Option<Instant>,
    next_full: Option<chrono::DateTime<chrono::Utc>>,
    /// When the last pass was recorded (for systemd's STATUS line).
    last_recorded: Arc<std::sync::Mutex<Option<Timestamp>>>,
    /// The daemon's metrics: every pass is counted there.
    metrics: Arc<Metrics>,
}

impl ReconcileLoop {
    pub(super) fn new(db: Db, spool_dir: &Path, metrics: Arc<Metrics>) -> Self {
        Self {
            db,
            new_dir: spool_dir.join("new"),
            task: None,
            last_cloud_pass: None,
            next_full: None,
            last_recorded: Arc::default(),
            metrics,
        }
    }

    /// When the last pass was recorded, if any.
    pub(super) fn last_pass(&self) -> Option<Timestamp> {
        *self.last_recorded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called every second: collects a finished pass, then starts the next one if due. `conn`:
    /// the daemon's connection; while there is none no pass starts and trigger files stay in
    /// `new/` until one can run.
    pub(super) async fn tick(&mut self, settings: &Settings, conn: Option<&Connection>) {
        if let Some(t) = &self.task {
            if !t.is_finished() {
                return;
            }
            if let Some(t) = self.task.take()
                && let Err(e) = t.await
            {
                tracing::error!(error = %e, "reconcile pass ended abnormally");
            }
        }
        if settings.cloud.is_none() {
            return;
        }
        let now = chrono::Utc::now();
        let schedule = &settings.reconcile.schedule;
        let next_full = *self
            .next_full
            .get_or_insert_with(|| schedule.after(&now).next().unwrap_or(now));
        let Some(conn) = conn else { return };
        let (triggered, only) = self.take_triggers();
        let kind = if triggered || (settings.reconcile.enabled && now >= next_full) {
            PassKind::Full
        } else if settings.reconcile.enabled
            && self
                .last_cloud_pass
                .is_none_or(|t| t.elapsed() >= settings.reconcile.cloud_interval)
        {
            PassKind::Cloud
        } else {
            return;
        };
        if kind == PassKind::Full && !triggered {
            self.next_full = schedule.after(&now).next();
        }
        self.last_cloud_pass = Some(Instant::now());
        if triggered {
            tracing::info!(
                vnf_instance_id = only.as_deref().unwrap_or("*"),
                "reconcile --now: full pass requested"
            );
        }
        let db = self.db.clone();
        let rec = Reconciler::new(
            conn.cloud.clone(),
            conn.remote.clone(),
            settings.reconcile.policy.clone(),
            ProbeSettings {
                timeout: settings.reconcile.probe_timeout,
                max_parallel_hosts: settings.limits.max_parallel_hosts as usize,
            },
        );
        let last_recorded = self.last_recorded.clone();
        let metrics = self.metrics.clone();
        self.task = Some(tokio::spawn(async move {
            if let Some(at) = run_pass(&db, &rec, kind, only.as_deref(), &metrics).await {
                *last_recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
            }
        }));
    }

    /// Reads and deletes the trigger files; `(any, only)` where `only` is a single VNF named by
    /// every trigger (an empty trigger means all).
    fn take_triggers(&self) -> (bool, Option<String>) {
        let Ok(rd) = std::fs::read_dir(&self.new_dir) else {
            return (false, None);
        };
        let mut any = false;
        let mut vnfs = std::collections::BTreeSet::new();
        let mut all = false;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(TRIGGER_PREFIX) {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let _ = std::fs::remove_file(e.path());
            any = true;
            match text.trim() {
                "" => all = true,
                v => {
                    vnfs.insert(v.to_owned());
                }
            }
        }
        let only = if all || vnfs.len() != 1 {
            None
        } else {
            vnfs.into_iter().next()
        };
        (any, only)
    }

    /// Waits for a running pass (shutdown).
    pub(super) async fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }
}

/// One pass: snapshot, evaluate, record (one transaction), log, count in `metrics` (a pass
/// whose snapshot cannot be read is not counted: nothing was observed). Returns when it was
/// recorded (`None`: skipped).
async fn run_pass(
    db: &Db,
    rec: &Reconciler<OpenStackCloud>,
    kind: PassKind,
    only: Option<&str>,
    metrics: &Metrics,
) -> Option<Timestamp> {
    let started = Instant::now();
    let snap = match db.with(|s| reconcile::snapshot(s.reader(), only)) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "reconcile: cannot read the database; pass skipped");
            return None;
        }
    };
    let now = Timestamp(chrono::Utc::now());
    let mut report = rec.evaluate(&snap, kind, now).await;
    let recorded = db.write(|tx| reconcile::record(tx, &mut report, now));
    metrics.reconcile_pass(&report, recorded.is_ok(), started.elapsed(), now);
    match recorded {
        Ok(()) => {
            reconcile::log(&report);
            Some(now)
        }
        Err(e) => {
            tracing::error!(error = %e, "reconcile: cannot record the pass; nothing done");
            None
        }
    }
}
