//! The reconcile loop in the daemon: decides every quarter second whether a pass is due (a
//! trigger file from `vnfkeeper reconcile --now`, looked for once a second; the cron `schedule`
//! for full passes; `cloud_interval_secs` for cloud-only passes; VNFs named by the fast
//! observation for a cloud pass over them at once) and runs at most one pass at a time as a
//! task. The fast observation (one Nova `changes-since` request every
//! `changes_since_interval_secs`, [`vnfkeeper_core::policy::changes`]) is a task of its own,
//! at most one at a time, bounded by a timeout; a poll due while the last one still runs is
//! skipped and counted, never queued. The pass itself lives in
//! [`crate::reconcile`]; this file only schedules it over the daemon's shared [`Connection`] (the
//! cloud and the SSH session pool the engine uses too), and writes through the daemon's one
//! database connection.
//!
//! Trigger files: `<spool>/new/.reconcile-now.<unique>` holding a vnfInstanceId or nothing (all).
//! Intake ignores dotfiles; the daemon deletes the files when it starts the pass.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::connect::Connection;
use crate::cloud::OpenStackCloud;
use crate::config::Settings;
use crate::metrics::Metrics;
use crate::reconcile::{self, PassKind, Reconciler, probe::ProbeSettings};
use crate::store::Db;
use vnfkeeper_core::model::{Timestamp, VnfInstanceId};
use vnfkeeper_core::policy::changes::{Changed, ChangesPoll};

use crate::reconcile::cmd::TRIGGER_PREFIX;

/// Scheduler state of the reconcile loop, owned by the main loop.
pub(super) struct ReconcileLoop {
    db: Db,
    new_dir: PathBuf,
    /// The running pass; it hands back the VNFs of a named pass whose listing failed.
    task: Option<JoinHandle<BTreeSet<VnfInstanceId>>>,
    last_cloud_pass: Option<Instant>,
    next_full: Option<chrono::DateTime<chrono::Utc>>,
    /// When the last pass was recorded (for systemd's STATUS line).
    last_recorded: Arc<std::sync::Mutex<Option<Timestamp>>>,
    /// The daemon's metrics: every pass is counted there.
    metrics: Arc<Metrics>,
    /// The fast observation's state while no poll runs (a running poll owns it).
    poller: Option<ChangesPoll>,
    /// The running poll.
    poll_task: Option<JoinHandle<PollDone>>,
    /// When the last poll was due.
    last_poll: Option<Instant>,
    /// VNFs the fast observation named that have not had their pass yet.
    pending: BTreeSet<VnfInstanceId>,
    /// When trigger files were last looked for.
    last_trigger_scan: Option<Instant>,
    /// VNFs of a named pass whose listing failed: named once more with the next poll's result
    /// (so at most one retry per poll interval, and only once).
    retry: BTreeSet<VnfInstanceId>,
    /// `pending` holds only VNFs being retried.
    pending_is_retry: bool,
    /// The companion task's wake-up (`[tacker]`): notified after a pass started a heal, so a
    /// heal through Tacker is sent without waiting for `tacker.poll_interval_secs`.
    pub(super) tacker_wake: Option<Arc<tokio::sync::Notify>>,
}

/// What a finished poll hands back: the poller, and the VNFs to observe now.
struct PollDone {
    poller: ChangesPoll,
    vnfs: BTreeSet<VnfInstanceId>,
}

/// Which instances a pass looks at.
#[derive(Debug, Clone)]
enum Scope {
    /// Every instantiated instance, or only one (`reconcile --now VNF`).
    Only(Option<VnfInstanceId>),
    /// Those named by the fast observation.
    Named(BTreeSet<VnfInstanceId>),
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
            poller: None,
            poll_task: None,
            last_poll: None,
            pending: BTreeSet::new(),
            last_trigger_scan: None,
            retry: BTreeSet::new(),
            pending_is_retry: false,
            tacker_wake: None,
        }
    }

    /// When the last pass was recorded, if any.
    pub(super) fn last_pass(&self) -> Option<Timestamp> {
        *self.last_recorded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called every quarter second: collects a finished poll and pass, starts the next poll if
    /// due, then the next pass if due. `conn`: the daemon's connection; while there is none no
    /// pass or poll starts and trigger files stay in `new/` until one can run. Without a
    /// `[cloud]` section trigger files are taken and ignored, with a WARN line.
    pub(super) async fn tick(&mut self, settings: &Settings, conn: Option<&Connection>) {
        self.collect_poll().await;
        if let Some(conn) = conn
            && settings.cloud.is_some()
            && settings.reconcile.enabled
        {
            self.start_poll(settings, conn);
        }
        if let Some(t) = &self.task {
            if !t.is_finished() {
                return;
            }
            if let Some(t) = self.task.take() {
                match t.await {
                    Ok(failed) => self.retry.extend(failed),
                    Err(e) => tracing::error!(error = %e, "reconcile pass ended abnormally"),
                }
            }
        }
        if settings.cloud.is_none() {
            // No pass runs without a cloud: a trigger (from an older CLI, or written before
            // `[cloud]` was removed) is taken and said so, not left in new/ for ever.
            if self
                .last_trigger_scan
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                self.last_trigger_scan = Some(Instant::now());
                if self.take_triggers().0 {
                    tracing::warn!(
                        "reconcile --now ignored: no [cloud] section in the configuration, nothing to observe"
                    );
                }
            }
            return;
        }
        let now = chrono::Utc::now();
        let schedule = &settings.reconcile.schedule;
        let next_full = *self
            .next_full
            .get_or_insert_with(|| schedule.next_after(&now).unwrap_or(now));
        let Some(conn) = conn else { return };
        let (triggered, only) = if self
            .last_trigger_scan
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.last_trigger_scan = Some(Instant::now());
            self.take_triggers()
        } else {
            (false, None)
        };
        let (kind, scope) = if triggered || (settings.reconcile.enabled && now >= next_full) {
            (PassKind::Full, Scope::Only(only.clone()))
        } else if settings.reconcile.enabled
            && self
                .last_cloud_pass
                .is_none_or(|t| t.elapsed() >= settings.reconcile.cloud_interval)
        {
            (PassKind::Cloud, Scope::Only(None))
        } else if settings.reconcile.enabled && !self.pending.is_empty() {
            (
                PassKind::Cloud,
                Scope::Named(std::mem::take(&mut self.pending)),
            )
        } else {
            return;
        };
        // A named pass of VNFs whose listing already failed once is not retried again.
        let retried = matches!(scope, Scope::Named(_)) && self.pending_is_retry;
        if kind == PassKind::Full && !triggered {
            self.next_full = schedule.next_after(&now);
        }
        match &scope {
            // A pass over every instance observes the named ones too.
            Scope::Only(None) => {
                self.last_cloud_pass = Some(Instant::now());
                self.pending.clear();
            }
            Scope::Only(Some(_)) => self.last_cloud_pass = Some(Instant::now()),
            Scope::Named(vnfs) => tracing::debug!(
                vnfs = vnfs.len(),
                "reconcile: cloud pass over the VNFs the changes-since poll named"
            ),
        }
        if triggered {
            tracing::info!(
                vnf_instance_id = only.as_ref().map_or("*", VnfInstanceId::as_str),
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
        let mut rec = rec;
        rec.tacker_auto_heal = settings.tacker.as_ref().is_some_and(|t| t.auto_heal);
        let last_recorded = self.last_recorded.clone();
        let metrics = self.metrics.clone();
        let wake = self.tacker_wake.clone();
        self.task = Some(tokio::spawn(async move {
            let (at, listing_failed) = run_pass(&db, &rec, kind, &scope, &metrics, wake).await;
            if let Some(at) = at {
                *last_recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
            }
            match scope {
                Scope::Named(vnfs) if listing_failed && !retried => vnfs,
                _ => BTreeSet::new(),
            }
        }));
    }

    /// Takes the result of a finished poll: its VNFs join `pending`.
    async fn collect_poll(&mut self) {
        let Some(t) = &self.poll_task else { return };
        if !t.is_finished() {
            return;
        }
        if let Some(t) = self.poll_task.take() {
            match t.await {
                Ok(done) => {
                    self.poller = Some(done.poller);
                    self.pending_is_retry = self.pending.is_empty() && done.vnfs.is_empty();
                    self.pending.extend(done.vnfs);
                    self.pending.extend(std::mem::take(&mut self.retry));
                    self.pending_is_retry &= !self.pending.is_empty();
                }
                Err(e) => {
                    tracing::error!(error = %e, "changes-since poll ended abnormally");
                }
            }
        }
    }

    /// Starts a poll when one is due: at most one runs; one due while the last still runs is
    /// skipped and counted.
    fn start_poll(&mut self, settings: &Settings, conn: &Connection) {
        let Some(every) = settings.reconcile.changes_since_interval else {
            return;
        };
        if self.last_poll.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last_poll = Some(Instant::now());
        if self.poll_task.is_some() {
            self.metrics.changes_poll("skipped");
            return;
        }
        let mut poller = self
            .poller
            .take()
            .unwrap_or_else(|| ChangesPoll::new(Timestamp(chrono::Utc::now())));
        let cloud = conn.cloud.clone();
        let db = self.db.clone();
        let metrics = self.metrics.clone();
        let limit = poll_timeout(every);
        self.poll_task = Some(tokio::spawn(async move {
            let started = Timestamp(chrono::Utc::now());
            let clock = Instant::now();
            let since = poller.since();
            let answer = tokio::time::timeout(limit, cloud.servers_changed_since(since)).await;
            let page = match answer {
                Ok(Ok(page)) => page,
                Ok(Err(e)) => {
                    metrics.changes_poll("failed");
                    tracing::debug!(error = %e, "changes-since poll failed; the next asks from the same time");
                    return PollDone {
                        poller,
                        vnfs: BTreeSet::new(),
                    };
                }
                Err(_) => {
                    metrics.changes_poll("failed");
                    tracing::debug!(
                        after_ms = limit.as_millis() as u64,
                        "changes-since poll timed out; the next asks from the same time"
                    );
                    return PollDone {
                        poller,
                        vnfs: BTreeSet::new(),
                    };
                }
            };
            metrics.changes_poll("ok");
            let changed: Vec<Changed> = page
                .servers
                .iter()
                .map(|s| Changed {
                    server_id: s.id.clone(),
                    status: s.status.clone(),
                    updated: s.updated.clone(),
                })
                .collect();
            let fresh = poller.succeeded(started, clock.elapsed(), page.date, &changed);
            if fresh.is_empty() && !poller.has_deferred() {
                return PollDone {
                    poller,
                    vnfs: BTreeSet::new(),
                };
            }
            let vnfs = match db.with(|s| reconcile::recorded_servers(s.reader())) {
                Ok(recorded) => poller.plan(&fresh, &recorded),
                Err(e) => {
                    tracing::error!(error = %e, "changes-since poll: cannot read the database; the next cloud pass observes");
                    BTreeSet::new()
                }
            };
            for c in &fresh {
                tracing::debug!(server_id = %c.server_id, status = %c.status, "changes-since: server changed");
            }
            PollDone { poller, vnfs }
        }));
    }

    /// Reads and deletes the trigger files; `(any, only)` where `only` is a single VNF named by
    /// every trigger (an empty trigger means all).
    fn take_triggers(&self) -> (bool, Option<VnfInstanceId>) {
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
                    vnfs.insert(VnfInstanceId::from(v));
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

    /// Waits for a running pass (shutdown); a running poll is abandoned.
    pub(super) async fn stop(&mut self) {
        if let Some(p) = self.poll_task.take() {
            p.abort();
        }
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }
}

/// How long one poll may take: twice its interval, at least 5 s, at most 30 s.
fn poll_timeout(every: Duration) -> Duration {
    (every * 2).clamp(Duration::from_secs(5), Duration::from_secs(30))
}

/// One pass: snapshot, evaluate, record (one transaction), log, count in `metrics` (a pass
/// whose snapshot cannot be read is not counted: nothing was observed). Returns when it was
/// recorded (`None`: skipped), and whether its cloud listing failed (every VNFC unknown).
async fn run_pass(
    db: &Db,
    rec: &Reconciler<OpenStackCloud>,
    kind: PassKind,
    scope: &Scope,
    metrics: &Metrics,
    tacker_wake: Option<Arc<tokio::sync::Notify>>,
) -> (Option<Timestamp>, bool) {
    let started = Instant::now();
    let snap = match db.with(|s| match scope {
        Scope::Only(only) => reconcile::snapshot(s.reader(), only.as_ref()),
        Scope::Named(vnfs) => reconcile::snapshot_where(s.reader(), |id| vnfs.contains(id)),
    }) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "reconcile: cannot read the database; pass skipped");
            return (None, false);
        }
    };
    let now = Timestamp(chrono::Utc::now());
    let mut report = rec.evaluate(&snap, kind, now).await;
    let recorded = db.write(|tx| reconcile::record(tx, &mut report, now));
    metrics.reconcile_pass(&report, recorded.is_ok(), started.elapsed(), now);
    let listing_failed = report.cloud_error.is_some();
    match recorded {
        Ok(()) => {
            reconcile::log(&report);
            if rec.tacker_auto_heal && !report.started.is_empty() {
                // A heal of a Tacker-owned VNF waits for the companion task to send it.
                if let Some(w) = &tacker_wake {
                    w.notify_one();
                }
            }
            (Some(now), listing_failed)
        }
        Err(e) => {
            tracing::error!(error = %e, "reconcile: cannot record the pass; nothing done");
            (None, listing_failed)
        }
    }
}
