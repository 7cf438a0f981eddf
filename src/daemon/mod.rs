//! The long-running service (`vnfkeeper daemon`): the only module that spawns tasks, handles
//! signals and talks to systemd. It watches the spool, hands batches to intake, and reports
//! readiness, status and liveness to systemd.
//!
//! Main loop: one `select!` over spool events (inotify `IN_MOVED_TO`/`IN_CLOSE_WRITE` on `new/`,
//! and the removal or re-creation of `new/` or the spool), a periodic full rescan, a short settle
//! timer for entries seen by a scan and not yet known complete, the watchdog tick, and
//! SIGTERM/SIGINT (stop) and SIGHUP (reload).
//!
//! The loop never blocks: it touches no database and runs nothing that waits. Intake batches run
//! their phases (read, commit, move) on blocking threads, the phases of consecutive batches
//! overlapping ([`Intake::advance`]; each phase's end comes back as an event), and the
//! operation scheduler and its status counts on their own task ([`runner::Scheduler`]).

mod connect;
pub mod ha;
pub mod http;
pub mod lock;
pub mod logging;
mod reconcile;
pub mod reload;
mod runner;
pub mod status_page;
mod tacker;
pub mod tls;
mod watch;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use notify::EventKind;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use sd_notify::NotifyState;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::config::{EXIT_CONFIG, Settings};
use crate::intake::spool::{self, FileLook, Found, IntakeContext, Outcome, Spool};
use crate::message_ids::{MSG_REQUEST_ACCEPTED, MSG_REQUEST_REJECTED};
use crate::metrics::Metrics;
use crate::store::{Db, Store, StoreError};
use crate::tacker::{hooks, notifications, oauth};
use connect::Connector;
use logging::LogTarget;
use runner::{QueueStatus, Scheduler};
use vnfkeeper_core::model::Timestamp;
use watch::Ensured;

/// A regular file found by a scan (not announced complete by inotify) is taken once two looks at
/// least this far apart saw the same inode, size and modification time.
const SETTLE: Duration = Duration::from_secs(1);
/// How often the settle timer scans while entries wait for their second look.
const SETTLE_TICK: Duration = Duration::from_millis(500);

/// Runs the daemon until SIGTERM/SIGINT. Exit status 0 on a clean stop, 78 for an invalid
/// configuration, a state directory another daemon holds ([`lock`]), a refused database
/// (missing with signs of an earlier one, empty, failing `PRAGMA quick_check`: see
/// [`crate::store::Refusal`]) or a missing or unreadable secrets key
/// ([`crate::store::StoreError::SecretsKey`]; a restart cannot fix either), 1 for any other
/// fatal error (logged).
///
/// Before it takes any request, the spool's filed copies are compared with the database
/// ([`crate::intake::check`]): copies without their record end it with 78, unless
/// `recover_spool` (`--recover-spool`) says to record them again.
pub fn main(config_path: &Path, recover_spool: bool) -> ExitCode {
    let sink = logging::init(LogTarget::Auto, "info");
    let settings = match Settings::load(config_path) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    tracing::info!(config = %config_path.display(), log = sink, version = env!("CARGO_PKG_VERSION"), "vnfkeeper starting");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // [ha]: before the lock, which would create the state directory on the node's own disk
    // when the shard's file system is not mounted.
    if let Some(h) = &settings.ha
        && let Err(e) = ha::check_start(&h.require_mount, &settings.database)
    {
        tracing::error!(
            message_id = crate::message_ids::MSG_DATABASE_REFUSED,
            database = %settings.database.display(),
            "refusing to start: {e}"
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    // Before the database: a second daemon on the same state must not even migrate it.
    let state_dir = lock::state_dir_of(&settings.database);
    let _lock = match lock::acquire(&state_dir) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(database = %settings.database.display(), "refusing to start: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let mut store = match open_store(&settings) {
        Ok(s) => s,
        Err(
            e @ (crate::store::StoreError::Refused(_) | crate::store::StoreError::SecretsKey(_)),
        ) => {
            tracing::error!(
                message_id = crate::message_ids::MSG_DATABASE_REFUSED,
                database = %settings.database.display(),
                "refusing to start: {e}"
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(e) => {
            tracing::error!(
                database = %settings.database.display(),
                error = %e,
                "vnfkeeper stopped on a fatal error: opening database {}: {e}",
                settings.database.display()
            );
            return ExitCode::FAILURE;
        }
    };
    if let Err(code) = hold_epoch(&settings, &mut store) {
        return code;
    }
    if let Err(code) = check_spool(&settings, &mut store, recover_spool) {
        return code;
    }
    match runtime.block_on(serve(config_path.to_path_buf(), settings, store)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(
                error = format!("{e:#}"),
                "vnfkeeper stopped on a fatal error: {e:#}"
            );
            ExitCode::FAILURE
        }
    }
}

/// The end of one phase of an intake batch on a blocking thread, with the files the batch took
/// (see [`Intake::advance`]).
enum BatchDone {
    /// Read and examined ([`spool::read`]).
    Read(Vec<PathBuf>, spool::ReadBatch),
    /// Decided and recorded in one transaction ([`spool::commit`]), or nothing committed.
    Committed(Vec<PathBuf>, Result<spool::Committed, StoreError>),
    /// Moved to `accepted/` or `rejected/` ([`spool::file`]): what became of the files.
    Filed(Vec<PathBuf>, Vec<Outcome>),
}

/// Intake state owned by the main loop.
struct Intake {
    spool: Spool,
    db: Db,
    settings: Settings,
    /// Paths signalled complete by inotify, or stable, or to refuse, waiting for the next batch.
    ready: BTreeSet<PathBuf>,
    /// Regular files of `new/` seen by a scan and not yet taken: the last look and when it
    /// was first seen like that.
    looks: HashMap<PathBuf, (FileLook, Instant)>,
    /// Whether entries wait for another look (the settle timer runs).
    unsettled: bool,
    /// The inotify watch on the spool root and `new/`.
    watch: watch::SpoolWatch,
    /// Whether an event said the spool or `new/` was removed, moved or created: check the watch.
    check_watch: bool,
    /// When the last reconcile pass ended, for the status line (set by the reconcile pass).
    last_reconcile: Option<Timestamp>,
    /// Whether a batch is being read on a blocking thread now.
    reading: bool,
    /// A batch read and waiting for its commit.
    read: Option<(Vec<PathBuf>, spool::ReadBatch)>,
    /// Whether a batch commits on a blocking thread now.
    committing: bool,
    /// A batch committed and waiting for its files to be moved.
    committed: Option<(Vec<PathBuf>, spool::Committed)>,
    /// Whether a batch's files are being moved on a blocking thread now.
    filing: bool,
    /// Shutting down: no batch is read or committed any more; a committed one is still filed.
    stopping: bool,
    /// A commit failed while a batch was being read: that batch is dropped when read, so that
    /// no batch commits ahead of files taken before it.
    drop_read: bool,
    /// Every path of `new/` a batch took, in both its forms ([`spool::both_forms`]), until
    /// the batch's files are moved: kept out of `ready` and so out of later batches.
    in_flight: HashSet<PathBuf>,
    /// Files in batches not yet filed (0 when none runs).
    in_batch: usize,
    /// The daemon's metrics: intake outcomes and the spool backlog.
    metrics: Arc<Metrics>,
    /// Where a batch reports its end; the main loop receives it.
    batch_done: mpsc::UnboundedSender<BatchDone>,
}

/// Opens the database for the daemon: the spool's `accepted/` and `rejected/` count as signs
/// of an earlier database (see [`Store::open_guarded`]).
fn open_store(settings: &Settings) -> crate::store::Result<Store> {
    let accepted = settings.spool_dir.join("accepted");
    let rejected = settings.spool_dir.join("rejected");
    let dirs = [accepted.as_path(), rejected.as_path()];
    Store::open_guarded(&settings.database, crate::store::History { dirs: &dirs })
}

/// `[ha]`'s `synchronous=FULL`, then raises the daemon epoch (at every start, with or without
/// `[ha]`: one code path, and a database copied or shared past `daemon.lock` is fenced on a
/// single machine too) with the hook that exits when a later write is fenced. `Err` is the exit
/// status (1, logged).
fn hold_epoch(settings: &Settings, store: &mut Store) -> Result<(), ExitCode> {
    let fatal = |e: StoreError| {
        tracing::error!(error = %e, "vnfkeeper stopped on a fatal error: {e}");
        ExitCode::FAILURE
    };
    if settings.ha.is_some() {
        let level = store.set_synchronous_full().map_err(fatal)?;
        tracing::info!(synchronous = level, "[ha]: SQLite synchronous=FULL (2)");
    }
    let node = ha::node_name();
    let epoch = store
        .hold_epoch(&node, Timestamp(chrono::Utc::now()), Some(ha::exit_fenced))
        .map_err(fatal)?;
    tracing::info!(epoch = epoch.0, node = %node, "daemon epoch {epoch} raised");
    Ok(())
}

/// Compares the spool's filed copies with the database ([`crate::intake::check::check`]) and,
/// with `recover`, records the missing ones. `Err` is the exit status: 78 for copies without
/// their record (an operator must restore or recover) or a spool that cannot be opened as it is
/// (e.g. `new/` a symbolic link), 1 for any other error (logged).
fn check_spool(settings: &Settings, store: &mut Store, recover: bool) -> Result<(), ExitCode> {
    use crate::intake::check::{self, SpoolError};
    let started = Instant::now();
    // A spool that cannot be opened as it is (a directory replaced by a symbolic link, not
    // creatable) needs an operator, as a refused database does.
    let spool = match Spool::open(&settings.spool_dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(
                spool = %settings.spool_dir.display(),
                "refusing to start: spool {}: {e}",
                settings.spool_dir.display()
            );
            return Err(ExitCode::from(EXIT_CONFIG));
        }
    };
    let result = check::check(&spool, store, recover, Timestamp(chrono::Utc::now()));
    match result {
        Ok(0) => {
            tracing::debug!(
                ms = started.elapsed().as_secs_f64() * 1e3,
                "every filed copy in the spool has its record"
            );
            Ok(())
        }
        Ok(n) => {
            tracing::warn!(
                copies = n,
                "recorded again {n} filed request copies the database had lost (--recover-spool): \
                 accepted requests as FAILED operations, never run; see `vnfkeeper ops`"
            );
            Ok(())
        }
        Err(e @ SpoolError::Unrecorded { .. }) => {
            tracing::error!(
                message_id = crate::message_ids::MSG_DATABASE_REFUSED,
                database = %settings.database.display(),
                "refusing to start: {e}"
            );
            Err(ExitCode::from(EXIT_CONFIG))
        }
        Err(e) => {
            tracing::error!(error = %e, "vnfkeeper stopped on a fatal error: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// The database file the daemon opened, by device and inode: removed, renamed or replaced
/// behind the daemon's back (`rm state.db`, a restore into the running daemon's path), it is
/// not the file the daemon writes any more — SQLite keeps writing the unlinked inode, and all
/// of it is lost at the next start.
struct DatabaseFile {
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl DatabaseFile {
    fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(path)?;
        Ok((m.dev(), m.ino()))
    }

    /// Remembers the file at `path` as it is now (`None` when it cannot be read: then nothing
    /// is checked).
    fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            identity: Self::identity(path).ok(),
        }
    }

    /// `Err(why)` when the path no longer names the file the daemon opened. A metadata error
    /// other than "not found" (e.g. a permission change of the directory) is not a change.
    fn check(&self) -> Result<(), String> {
        let Some(opened) = self.identity else {
            return Ok(());
        };
        match Self::identity(&self.path) {
            Ok(now) if now == opened => Ok(()),
            Ok(_) => Err("the database file was replaced by another file".into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err("the database file was removed or renamed".into())
            }
            Err(_) => Ok(()),
        }
    }

    /// [`Self::check`], with a change logged (`MSG_DATABASE_LOST`) as the reason the daemon
    /// stops.
    fn check_logged(&self) -> Result<(), String> {
        self.check().inspect_err(|why| {
            tracing::error!(
                message_id = crate::message_ids::MSG_DATABASE_LOST,
                database = %self.path.display(),
                "{why} while the daemon ran; stopping, since what it would record now is lost (restart it: see README \"Restore from backup\")"
            );
        })
    }
}

async fn serve(config_path: PathBuf, settings: Settings, store: Store) -> anyhow::Result<()> {
    let database = DatabaseFile::new(&settings.database);
    let spool = Spool::open(&settings.spool_dir)
        .with_context(|| format!("opening spool {}", settings.spool_dir.display()))?;

    // Watch first, then scan, so that nothing arriving in between is missed (a file seen both by
    // the scan and as an event is queued once: `ready` is a set).
    let (events_tx, events) = mpsc::unbounded_channel();
    let watch = watch::SpoolWatch::new(&spool, events_tx)?;

    // The HTTP endpoints are bound before anything is processed: a port that cannot be bound
    // is a startup error, not a surprise later.
    let metrics = Arc::new(Metrics::new());
    let db = Db::new(store);
    let tacker_wake = Arc::new(tokio::sync::Notify::new());
    let (http, credentials) = start_http(&settings, &metrics, &db, &tacker_wake).await?;
    // Companion mode's Tacker connection, shared with the engine once made.
    let tacker_link = crate::tacker::vim::TackerLink::default();
    if settings.tacker.as_ref().is_some_and(|t| !t.register_vim) {
        tacker_link.skip_vim();
    }
    let companion = start_companion(&settings, &db, &tacker_wake, &tacker_link)?;
    let (batch_done, mut batches) = mpsc::unbounded_channel();
    let mut intake = Intake::new(
        spool,
        db.clone(),
        settings,
        watch,
        metrics.clone(),
        batch_done,
    );
    intake.first_scan(&mut batches).await?;
    // One cloud connection and one SSH session pool for the engine and reconcile alike.
    let connector = Connector::new();
    let scheduler = Scheduler::spawn(
        db.clone(),
        &intake.settings,
        metrics.clone(),
        tacker_link.clone(),
    );
    let mut reconcile =
        reconcile::ReconcileLoop::new(db.clone(), &intake.settings.spool_dir, metrics.clone());
    if companion.is_some() {
        reconcile.tacker_wake = Some(tacker_wake.clone());
    }
    let timers = Timers::new(&intake.settings);

    let sigterm = signal(SignalKind::terminate())?;
    let sigint = signal(SignalKind::interrupt())?;
    let sighup = signal(SignalKind::hangup())?;

    let status = intake.status_line(&scheduler.status.borrow());
    notify_systemd(&[NotifyState::Ready, NotifyState::Status(&status)]);
    tracing::info!(spool = %intake.settings.spool_dir.display(), database = %intake.settings.database.display(), "ready");

    let mut main = MainLoop {
        config_path,
        credentials,
        database,
        intake,
        events,
        batches,
        connector,
        connection_handed: false,
        scheduler,
        reconcile,
        timers,
        sigterm,
        sigint,
        sighup,
        status,
    };
    let lost = main.run().await;
    let database = main.database.path.clone();
    main.shut_down(http, companion).await;
    match lost {
        Some(why) => Err(anyhow::anyhow!(
            "{why}: {} is not the database this daemon opened",
            database.display()
        )),
        None => Ok(()),
    }
}

/// The main loop: what it waits on (inotify events, batch ends, timers, the cloud connection
/// attempt, signals) and what it drives (intake, the scheduler, reconcile, `STATUS=`).
struct MainLoop {
    /// The configuration file, read again on SIGHUP.
    config_path: PathBuf,
    /// The credentials the Tacker endpoint checks (when it runs), replaced by a reload.
    credentials: Option<Arc<crate::tacker::credentials::Credentials>>,
    /// The database file as opened, checked every second.
    database: DatabaseFile,
    intake: Intake,
    /// inotify events of the spool root and `new/`.
    events: mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
    /// Ends of intake batches.
    batches: mpsc::UnboundedReceiver<BatchDone>,
    /// The one cloud connection and SSH session pool.
    connector: Connector,
    /// Whether the scheduler has the connection (see [`hand_connection`]).
    connection_handed: bool,
    scheduler: Scheduler,
    reconcile: reconcile::ReconcileLoop,
    timers: Timers,
    sigterm: tokio::signal::unix::Signal,
    sigint: tokio::signal::unix::Signal,
    sighup: tokio::signal::unix::Signal,
    /// The `STATUS=` line sent last.
    status: String,
}

impl MainLoop {
    /// Serves until SIGTERM or SIGINT (`None`), or until the database file is no longer the one
    /// opened (`Some(why)`).
    async fn run(&mut self) -> Option<String> {
        let intake = &mut self.intake;
        loop {
            tokio::select! {
                Some(res) = self.events.recv() => intake.take_events(res, &mut self.events),
                _ = self.timers.rescan.tick() => {
                    intake.check_watch = true;
                    intake.scan_logged();
                    intake.advance();
                }
                _ = self.timers.settle.tick(), if intake.unsettled || intake.check_watch => {
                    intake.scan_logged();
                    intake.advance();
                }
                Some(done) = self.batches.recv() => {
                    // Operations (or tasks) a commit accepted start now, not at the next tick.
                    if intake.batch_done(done) {
                        self.scheduler.wake();
                    }
                }
                _ = self.timers.watchdog.tick(), if self.timers.watchdog_period.is_some() => {
                    notify_systemd(&[NotifyState::Watchdog]);
                }
                _ = self.connector.attempt_ended(&intake.settings), if self.connector.attempting() => {
                    // The operations accepted before the cloud was connected start now.
                    hand_connection(&self.connector, &self.scheduler, &mut self.connection_handed);
                }
                _ = self.timers.schedule.tick() => {
                    if let Err(why) = self.database.check_logged() {
                        return Some(why);
                    }
                    self.connector.poll(&intake.settings).await;
                    hand_connection(&self.connector, &self.scheduler, &mut self.connection_handed);
                    intake.refresh_status(&self.scheduler.status.borrow(), &mut self.status);
                }
                _ = self.timers.reconcile.tick() => {
                    self.reconcile.tick(&intake.settings, self.connector.get()).await;
                    intake.last_reconcile = self.reconcile.last_pass();
                }
                _ = self.sighup.recv() => {
                    notify_systemd(&[NotifyState::Reloading]);
                    match reload::reload(&self.config_path, &intake.settings, self.credentials.as_deref()) {
                        Ok((new, applied)) => {
                            if new.intake.rescan_interval != intake.settings.intake.rescan_interval {
                                self.timers.rescan = tokio::time::interval(new.intake.rescan_interval);
                                self.timers.rescan.reset();
                            }
                            intake.settings = new;
                            if applied.is_empty() {
                                tracing::info!("configuration reloaded: no change");
                            } else {
                                tracing::info!(applied = applied.join(", "), "configuration reloaded: applied {}", applied.join(", "));
                            }
                        }
                        Err(why) => tracing::error!(
                            reason = %why,
                            "configuration reload refused, keeping the running configuration: {why}"
                        ),
                    }
                    self.status = intake.status_line(&self.scheduler.status.borrow());
                    notify_systemd(&[NotifyState::Ready, NotifyState::Status(&self.status)]);
                }
                _ = self.sigterm.recv() => return None,
                _ = self.sigint.recv() => return None,
            }
        }
    }

    /// After the loop: `STOPPING=1`, no new operations (running ones get their time, then are
    /// aborted), a batch in flight committed and filed, reconcile, the HTTP endpoints `http`
    /// and the companion task stopped.
    async fn shut_down(
        self,
        http: Vec<http::Server>,
        companion: Option<tokio::task::JoinHandle<()>>,
    ) {
        let MainLoop {
            mut intake,
            mut batches,
            mut connector,
            scheduler,
            mut reconcile,
            ..
        } = self;
        notify_systemd(&[NotifyState::Stopping]);
        tracing::info!(running = scheduler.status.borrow().running, "stopping");
        connector.stop();
        intake.finish_in_flight(&mut batches).await;
        scheduler.stop().await;
        reconcile.stop().await;
        for server in http {
            server.stop();
        }
        if let Some(task) = companion {
            task.abort();
        }
        drop(intake);
    }
}

/// The main loop's timers (tokio intervals: the first tick is at once, but for the rescan's,
/// which waits one period).
struct Timers {
    /// Every second: the database file check, the cloud connection poll, `STATUS=`.
    schedule: tokio::time::Interval,
    /// Every 250 ms: reconcile's timer and cron schedule.
    reconcile: tokio::time::Interval,
    /// `intake.rescan_interval_secs`: the full rescan of the spool.
    rescan: tokio::time::Interval,
    /// [`SETTLE_TICK`]: used while entries wait for another look or the watch is to be checked.
    settle: tokio::time::Interval,
    /// Half of `WATCHDOG_USEC` (an hour, never used, without the watchdog).
    watchdog: tokio::time::Interval,
    /// Half of `WATCHDOG_USEC`, when systemd's watchdog is on for this process.
    watchdog_period: Option<Duration>,
}

impl Timers {
    /// The timers for `settings`, started now.
    fn new(settings: &Settings) -> Self {
        let schedule = tokio::time::interval(Duration::from_secs(1));
        let reconcile = tokio::time::interval(Duration::from_millis(250));
        let mut rescan = tokio::time::interval(settings.intake.rescan_interval);
        rescan.reset();
        let settle = tokio::time::interval(SETTLE_TICK);
        let watchdog_period = watchdog_period();
        let watchdog = tokio::time::interval(watchdog_period.unwrap_or(Duration::from_secs(3600)));
        Self {
            schedule,
            reconcile,
            rescan,
            settle,
            watchdog,
            watchdog_period,
        }
    }
}

/// Hands the cloud connection to the scheduler once `connector` has one, the first time only
/// (`handed` records it): the operations accepted before the cloud was connected start then.
fn hand_connection(connector: &Connector, scheduler: &Scheduler, handed: &mut bool) {
    if !*handed && let Some(c) = connector.get() {
        scheduler.set_connection(c.clone());
        *handed = true;
    }
}

impl Intake {
    /// The daemon's intake over `spool`, with nothing seen yet; batches report their end on
    /// `batch_done`.
    fn new(
        spool: Spool,
        db: Db,
        settings: Settings,
        watch: watch::SpoolWatch,
        metrics: Arc<Metrics>,
        batch_done: mpsc::UnboundedSender<BatchDone>,
    ) -> Self {
        Intake {
            spool,
            db,
            settings,
            ready: BTreeSet::new(),
            looks: HashMap::new(),
            unsettled: false,
            watch,
            check_watch: false,
            last_reconcile: None,
            reading: false,
            read: None,
            committing: false,
            committed: None,
            filing: false,
            stopping: false,
            drop_read: false,
            in_flight: HashSet::new(),
            in_batch: 0,
            metrics,
            batch_done,
        }
    }

    /// Before READY=1 (and before the main loop): the files already in new/ are processed;
    /// those not yet known complete are taken after their second look, [`SETTLE`] later.
    /// Errors: the spool cannot be scanned.
    async fn first_scan(
        &mut self,
        batches: &mut mpsc::UnboundedReceiver<BatchDone>,
    ) -> anyhow::Result<()> {
        self.scan().context("scanning the spool")?;
        self.advance();
        self.finish_batches(batches).await;
        if self.unsettled {
            tokio::time::sleep(SETTLE).await;
            self.scan().context("scanning the spool")?;
            self.advance();
            self.finish_batches(batches).await;
        }
        Ok(())
    }

    /// Notes the inotify event `first` and those already queued behind it (until a batch is
    /// full), then starts a batch.
    fn take_events(
        &mut self,
        first: notify::Result<notify::Event>,
        events: &mut mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
    ) {
        self.note_event(first);
        while self.ready.len() < self.settings.intake.batch_size as usize {
            match events.try_recv() {
                Ok(res) => self.note_event(res),
                Err(_) => break,
            }
        }
        self.advance();
    }

    /// Sends `STATUS=` to systemd when the status line (with the scheduler's `queue`) differs
    /// from `shown`, the one sent last, and remembers it there.
    fn refresh_status(&self, queue: &QueueStatus, shown: &mut String) {
        let now = self.status_line(queue);
        if now != *shown {
            notify_systemd(&[NotifyState::Status(&now)]);
            *shown = now;
        }
    }

    /// At shutdown: a batch committing finishes, and every committed batch moves its files
    /// before the daemon exits; a batch read but not committed is dropped (its files stay in
    /// `new/` for the next start).
    async fn finish_in_flight(&mut self, batches: &mut mpsc::UnboundedReceiver<BatchDone>) {
        self.stopping = true;
        self.ready.clear();
        if let Some((files, _)) = self.read.take() {
            self.release(&files);
        }
        self.finish_batches(batches).await;
    }

    /// Takes the entry of an inotify event that says it is complete (`IN_MOVED_TO`,
    /// `IN_CLOSE_WRITE`); an entry created in place in `new/` gets looked at by the settle timer;
    /// the removal, move or creation of `new/` or of the spool has the watch checked there. A
    /// queue overflow or a watcher error triggers a full rescan instead.
    fn note_event(&mut self, res: notify::Result<notify::Event>) {
        match res {
            Ok(ev) if ev.need_rescan() => self.scan_logged(),
            Ok(ev) => {
                let new_dir = self.spool.new_dir();
                let in_new = |p: &Path| p.parent() == Some(new_dir.as_path());
                let is_dir = |p: &Path| p == new_dir || p == self.spool.root();
                if ev.paths.iter().any(|p| is_dir(p)) {
                    // The spool or new/ itself: removed or moved away (its watch is gone, even
                    // if a new directory gets the same inode number), or created again.
                    if matches!(
                        ev.kind,
                        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
                    ) {
                        self.watch.invalidate();
                    }
                    self.check_watch = true;
                }
                match ev.kind {
                    EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
                    | EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                        for p in &ev.paths {
                            let is_request = p
                                .file_name()
                                .is_some_and(|n| spool::is_request_name(&spool::display_name(n)));
                            if is_request && in_new(p) && !self.in_flight.contains(p) {
                                self.ready.insert(p.clone());
                            }
                        }
                    }
                    // Created in place: looked at by the settle timer until it stops changing.
                    EventKind::Create(_) if ev.paths.iter().any(|p| in_new(p)) => {
                        self.unsettled = true;
                    }
                    _ => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "spool watcher error ({e}); rescanning");
                self.scan_logged();
            }
        }
    }

    /// Full scan of `new/` (after re-establishing the watch if an event or the rescan timer
    /// asked for it): entries to refuse are taken at once; a regular file is taken when two
    /// looks at least [`SETTLE`] apart saw the same inode, size and modification time (never by
    /// its age alone: a writer may pause), or earlier when inotify says it is complete.
    fn scan(&mut self) -> std::io::Result<()> {
        if std::mem::take(&mut self.check_watch) {
            match self.watch.ensure(&self.spool) {
                Ensured::Unchanged => {}
                Ensured::Reestablished => self.looks.clear(),
                Ensured::Pending => {
                    self.check_watch = true;
                    return Ok(());
                }
            }
        }
        let now = Instant::now();
        self.unsettled = false;
        let mut looks = HashMap::new();
        for (path, found) in self.spool.scan(spool::LIMIT)? {
            // Taken by a batch not yet filed: that batch decides and moves it.
            if self.in_flight.contains(&path) {
                continue;
            }
            let look = match found {
                Found::Refuse => {
                    self.ready.insert(path);
                    continue;
                }
                Found::Regular(look) => look,
            };
            if self.ready.contains(&path) {
                continue;
            }
            let since = match self.looks.get(&path) {
                Some((prev, since)) if *prev == look => *since,
                _ => now,
            };
            if now.duration_since(since) >= SETTLE {
                self.ready.insert(path);
            } else {
                looks.insert(path, (look, since));
                self.unsettled = true;
            }
        }
        self.looks = looks;
        // Committed files whose step after the commit did not finish (crash, I/O error).
        let unfinished = self.spool.unfinished()?;
        self.ready.extend(
            unfinished
                .into_iter()
                .filter(|p| !self.in_flight.contains(p)),
        );
        self.count_backlog();
        Ok(())
    }

    /// Sets the spool backlog gauge: files of `new/` ready, waiting for their second look, or
    /// in the batch running now.
    fn count_backlog(&self) {
        self.metrics
            .set_spool_backlog(self.ready.len() + self.looks.len() + self.in_batch);
    }

    fn scan_logged(&mut self) {
        if let Err(e) = self.scan() {
            tracing::error!(error = %e, spool = %self.settings.spool_dir.display(), "cannot scan the spool: {e}");
        }
    }

    /// Starts every intake phase that can start now, each on a blocking thread, so that the
    /// phases of consecutive batches overlap: batch N+1 is read while batch N commits, and batch
    /// N's files are moved while N+1 commits. Batches commit one after another, in the order
    /// they were read (a batch is decided against the rows of those before it); at most one
    /// committed batch waits for its move, at most one read batch for its commit. A batch of the
    /// ready files (at most `intake.batch_size`, none of them in flight) is read when no other
    /// is read or waits. Never waits, so the main loop keeps serving the watchdog and signals
    /// while a batch holds the database.
    fn advance(&mut self) {
        if !self.filing
            && let Some((files, committed)) = self.committed.take()
        {
            let (spool, done) = (self.spool.clone(), self.batch_done.clone());
            self.filing = true;
            tokio::task::spawn_blocking(move || {
                let outcomes = spool::file(&spool, committed);
                let _ = done.send(BatchDone::Filed(files, outcomes));
            });
        }
        if !self.committing
            && !self.stopping
            && self.committed.is_none()
            && let Some((files, read)) = self.read.take()
        {
            let (spool, db, done) = (self.spool.clone(), self.db.clone(), self.batch_done.clone());
            let (packages_dir, package_store, cloud_configured) = self.context();
            self.committing = true;
            tokio::task::spawn_blocking(move || {
                let ctx = IntakeContext {
                    packages_dir: &packages_dir,
                    package_store: &package_store,
                    cloud_configured,
                };
                let now = Timestamp(chrono::Utc::now());
                let result = db.with(|store| spool::commit(&spool, store, read, &ctx, now));
                let _ = done.send(BatchDone::Committed(files, result));
            });
        }
        if !self.reading && !self.stopping && self.read.is_none() && !self.ready.is_empty() {
            // The first `batch_size` paths in order, O(batch log backlog): the main loop does
            // not walk a backlog of thousands of files for every batch.
            let n = self.settings.intake.batch_size as usize;
            let mut batch = Vec::with_capacity(n.min(self.ready.len()));
            while batch.len() < n
                && let Some(path) = self.ready.pop_first()
            {
                // Not queued while in flight (see `scan`, `note_event`); kept out regardless.
                if !self.in_flight.contains(&path) {
                    batch.push(path);
                }
            }
            if !batch.is_empty() {
                for path in &batch {
                    self.in_flight.extend(spool::both_forms(path));
                }
                self.in_batch += batch.len();
                let done = self.batch_done.clone();
                let (packages_dir, package_store, cloud_configured) = self.context();
                self.reading = true;
                tokio::task::spawn_blocking(move || {
                    let ctx = IntakeContext {
                        packages_dir: &packages_dir,
                        package_store: &package_store,
                        cloud_configured,
                    };
                    let read = spool::read(&batch, &ctx);
                    let _ = done.send(BatchDone::Read(batch, read));
                });
            }
        }
        self.count_backlog();
    }

    /// What [`IntakeContext`] borrows, owned for a blocking thread: the packages directory,
    /// the package store and whether a cloud is configured.
    fn context(&self) -> (PathBuf, PathBuf, bool) {
        (
            self.settings.packages_dir.clone(),
            self.settings.package_store(),
            self.settings.cloud.is_some(),
        )
    }

    /// Whether a phase of a batch runs or a batch waits for its next phase.
    fn busy(&self) -> bool {
        self.reading
            || self.committing
            || self.filing
            || self.read.is_some()
            || self.committed.is_some()
    }

    /// The batch of `files` is done (filed, failed or dropped): its paths may be taken again.
    /// An event or scan may have seen one of them in `new/` meanwhile; a file left there is
    /// found by the next scan.
    fn release(&mut self, files: &[PathBuf]) {
        for f in files {
            for form in spool::both_forms(f) {
                self.in_flight.remove(&form);
                self.ready.remove(&form);
                self.looks.remove(&form);
            }
        }
        self.in_batch = self.in_batch.saturating_sub(files.len());
    }

    /// Waits until no batch is in flight (at start-up, before the main loop and READY=1, and
    /// at shutdown).
    async fn finish_batches(&mut self, batches: &mut mpsc::UnboundedReceiver<BatchDone>) {
        while self.busy() {
            match batches.recv().await {
                Some(done) => {
                    self.batch_done(done);
                }
                None => break,
            }
        }
    }

    /// Takes the end of a batch's phase: keeps its result for the next phase, logs the outcomes
    /// of a filed batch, and starts what can start now ([`Intake::advance`]). Returns whether a
    /// batch committed (and may have accepted operations).
    fn batch_done(&mut self, done: BatchDone) -> bool {
        let committed = matches!(done, BatchDone::Committed(_, Ok(_)));
        match done {
            BatchDone::Read(files, read) => {
                self.reading = false;
                if self.stopping || std::mem::take(&mut self.drop_read) {
                    self.release(&files);
                } else {
                    self.read = Some((files, read));
                }
            }
            BatchDone::Committed(files, Ok(committed)) => {
                self.committing = false;
                self.committed = Some((files, committed));
            }
            BatchDone::Committed(files, Err(e)) => {
                // Nothing was committed or moved; the files stay in new/ for the next scan,
                // and so do those of the batch read after them (taken again in order with them).
                self.committing = false;
                tracing::error!(error = %e, files = files.len(), "intake batch failed ({e}); will retry");
                self.release(&files);
                if let Some((next, _)) = self.read.take() {
                    self.release(&next);
                }
                self.drop_read = self.reading;
                self.ready.clear();
            }
            BatchDone::Filed(files, outcomes) => {
                self.filing = false;
                self.release(&files);
                for o in &outcomes {
                    log_outcome(o);
                    self.metrics.intake_outcome(o);
                }
            }
        }
        self.advance();
        committed
    }

    /// One-line summary for `systemctl status` (`STATUS=`), e.g. "2 VNF instances, 3
    /// operations not finished (1 running), reconcile: not run yet". Sent when it changes; the
    /// main loop compares it once a second. `queue`: the scheduler task's latest counts (the
    /// main loop reads no database).
    fn status_line(&self, queue: &QueueStatus) -> String {
        let reconcile = match &self.last_reconcile {
            Some(t) => format!("last reconcile {}", t.0.format("%Y-%m-%d %H:%M:%SZ")),
            None => "reconcile: not run yet".to_owned(),
        };
        match &queue.error {
            None => format!(
                "{} VNF instances, {} operations not finished ({} running), {reconcile}",
                queue.instances, queue.unfinished, queue.running
            ),
            Some(e) => format!("database error: {e}"),
        }
    }
}

fn log_outcome(o: &Outcome) {
    match o {
        Outcome::Accepted {
            file,
            vnf_lcm_op_occ_id,
            vnf_instance_id,
            operation,
            status_detail,
            warnings,
            ended: _,
        } => {
            tracing::info!(
                message_id = MSG_REQUEST_ACCEPTED,
                vnf_instance_id = %vnf_instance_id,
                vnf_lcm_op_occ_id = %vnf_lcm_op_occ_id,
                operation = %operation,
                file = %file,
                detail = status_detail.as_deref().unwrap_or(""),
                "request accepted"
            );
            // One line per file, however many fields were normalised: an intake burst of
            // fixture-like requests must not write several WARN lines per file into the
            // journal's per-service rate limit.
            if !warnings.is_empty() {
                let pointers = warnings
                    .iter()
                    .map(|w| w.pointer.as_str())
                    .collect::<Vec<_>>()
                    .join(",");
                let reasons = warnings
                    .iter()
                    .map(|w| format!("{}: {}", w.pointer, w.reason))
                    .collect::<Vec<_>>()
                    .join("; ");
                tracing::warn!(vnf_instance_id = %vnf_instance_id, file = %file, pointers = %pointers, normalised = warnings.len(), "request normalised: {reasons}");
            }
        }
        Outcome::Duplicate {
            file,
            vnf_lcm_op_occ_id,
        } => {
            tracing::info!(vnf_lcm_op_occ_id = %vnf_lcm_op_occ_id, file = %file, "duplicate request; no new operation");
        }
        Outcome::Rejected {
            file,
            vnf_instance_id: Some(vnf_instance_id),
            problem,
        } => {
            tracing::warn!(
                message_id = MSG_REQUEST_REJECTED,
                vnf_instance_id = %vnf_instance_id,
                file = %file,
                status = problem.status,
                "request rejected: {}",
                problem.detail
            );
        }
        // No usable vnfInstanceId in the file: no VNF_INSTANCE_ID field rather than an empty one.
        Outcome::Rejected {
            file,
            vnf_instance_id: None,
            problem,
        } => {
            tracing::warn!(
                message_id = MSG_REQUEST_REJECTED,
                file = %file,
                status = problem.status,
                "request rejected: {}",
                problem.detail
            );
        }
        Outcome::Quarantined { file, to, reason } => {
            tracing::error!(file = %file, to = %to.display(), "spool entry quarantined: {reason}");
        }
        Outcome::Recovered { file, to } => {
            tracing::info!(file = %file, to = %to.display(), "request file moved to its place (outcome already recorded)");
        }
    }
}

/// Half the systemd watchdog interval, if the watchdog is enabled for this process.
fn watchdog_period() -> Option<Duration> {
    let mut usec = 0;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| Duration::from_micros(usec / 2))
}

fn notify_systemd(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!(error = %e, "sd_notify failed");
    }
}

/// Starts companion mode's task when `[tacker]` has a `callback_uri`; `tacker_wake` (notified by
/// the endpoint for each new notification) makes it sync at once; `link` gets its Tacker
/// connection once made. Errors: `tacker.password_file` cannot be read.
fn start_companion(
    settings: &Settings,
    db: &Db,
    tacker_wake: &Arc<tokio::sync::Notify>,
    link: &crate::tacker::vim::TackerLink,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(t) = settings
        .tacker
        .as_ref()
        .filter(|t| t.callback_uri.is_some())
    else {
        return Ok(None);
    };
    let cloud = t
        .cloud_settings(settings.cloud.as_ref())
        .context("[tacker] callback_uri needs a [cloud] section")?;
    let password = t
        .read_password()
        .map_err(|e| anyhow::anyhow!(e.to_string()))?;
    tracing::info!(callback_uri = ?t.callback_uri, vnfd_ids = ?t.vnfd_ids, cloud = %cloud.cloud, "Tacker companion mode on");
    Ok(Some(tacker::spawn(
        t.clone(),
        cloud,
        password,
        db.clone(),
        tacker_wake.clone(),
        link.clone(),
        crate::tacker::PackagePaths {
            packages_dir: settings.packages_dir.clone(),
            package_store: settings.package_store(),
        },
    )))
}

/// Starts the HTTP endpoints that are configured: `GET /metrics` on `metrics.listen`, Tacker's
/// callback (and, with OAuth 2.0, the token endpoint) on `tacker.listen`, over TLS with
/// `tacker.tls_cert_file`; both on one socket when the addresses are the same. Errors: an
/// address cannot be bound; `tacker.password_file` or the TLS files cannot be read or used.
/// Returns the servers and, with `[tacker]`, the credentials its endpoint checks (a reload
/// replaces them).
async fn start_http(
    settings: &Settings,
    metrics: &Arc<Metrics>,
    db: &Db,
    tacker_wake: &Arc<tokio::sync::Notify>,
) -> anyhow::Result<(
    Vec<http::Server>,
    Option<Arc<crate::tacker::credentials::Credentials>>,
)> {
    // (address, routes, what they serve, the settings they come from, TLS)
    type Endpoint = (
        std::net::SocketAddr,
        axum::Router,
        Vec<String>,
        Vec<&'static str>,
        Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    );
    let mut endpoints: Vec<Endpoint> = Vec::new();
    let mut add = |addr, router: axum::Router, what: String, key: &'static str, tls| {
        if let Some((_, r, w, k, _)) = endpoints.iter_mut().find(|(a, ..)| *a == addr) {
            // `config check` refuses TLS on an address shared with the metrics.
            *r = std::mem::take(r).merge(router);
            w.push(what);
            k.push(key);
        } else {
            endpoints.push((addr, router, vec![what], vec![key], tls));
        }
    };
    let mut credentials = None;
    if let Some(addr) = settings.metrics.listen {
        let mut what = "metrics endpoint GET /metrics".to_owned();
        let mut router = http::router(metrics.clone(), db.clone());
        if settings.metrics.status_page {
            what.push_str(", status page GET /status");
            let state_dir = settings.database.parent().map(std::path::Path::to_path_buf);
            router = router.merge(status_page::router(db.clone(), state_dir));
        }
        add(addr, router, what, "metrics.listen", None);
    }
    if let Some(t) = &settings.tacker {
        let password = t
            .read_password()
            .map_err(|e| anyhow::anyhow!(e.to_string()))?;
        let creds = crate::tacker::credentials::Credentials::new(t.username.clone(), password);
        credentials = Some(creds.clone());
        let check = match t.auth_type {
            crate::config::tacker::TackerAuth::Basic => notifications::Check::Basic(creds),
            crate::config::tacker::TackerAuth::Oauth2ClientCredentials => {
                notifications::Check::Bearer(oauth::Tokens::new(creds, t.token_lifetime))
            }
        };
        let tokens = match &check {
            notifications::Check::Bearer(tokens) => Some(tokens.clone()),
            notifications::Check::Basic(_) => None,
        };
        let callback = notifications::Callback::start(
            db.clone(),
            check,
            t.max_body_bytes,
            Some(tacker_wake.clone()),
        );
        let mut what = format!(
            "Tacker notification endpoint GET/POST {}, MgmtDriver hooks POST {}",
            t.callback_path, t.hook_path
        );
        let mut router = notifications::router(&t.callback_path, callback.clone())
            .merge(hooks::router(&t.hook_path, callback, db.clone()));
        if let Some(tokens) = tokens {
            what.push_str(&format!(", OAuth 2.0 token endpoint POST {}", t.token_path));
            router = router.merge(oauth::router(&t.token_path, tokens));
        }
        let tls = match &t.tls {
            Some(files) => {
                Some(tls::server_config(files).map_err(|e| anyhow::anyhow!(e.to_string()))?)
            }
            None => None,
        };
        add(t.listen, router, what, "tacker.listen", tls);
    }
    let mut servers = Vec::new();
    for (addr, router, what, keys, tls) in endpoints {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = http::Server::start(addr, router, &keys.join(" and "), tls).await?;
        tracing::info!(listen = %server.local_addr, "listening on {scheme}://{}: {}", server.local_addr, what.join(", "));
        servers.push(server);
    }
    Ok((servers, credentials))
}
