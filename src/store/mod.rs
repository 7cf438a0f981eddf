//! The SQLite store: the only module with SQL. Opens the database (WAL, busy timeout, foreign
//! keys), runs the embedded refinery migrations, and offers typed reads and transactional writes.
//!
//! The schema is documented in `migrations/V1__init.sql` and in the README ("Audit database").

mod checkpoint;
mod decode;
mod describe;
mod engine;
mod epoch;
mod gauges;
mod hostkeys;
mod packages;
mod pause;
mod reconcile;
mod rows;
mod secrets;
mod startup;
mod tacker;
mod timeline;
mod trust;

use std::path::Path;
use std::time::Duration;

use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};

pub use describe::LastDecision;
pub use engine::JournalRow;
pub use epoch::{Epoch, OnFenced};
pub use gauges::{StateGauges, holds_heal};
pub use hostkeys::ForgottenHostKey;
pub use reconcile::ReconcileStateRow;
pub use rows::{InstanceRow, IntakeRow, OperationRow};
pub use secrets::{DIGEST_PREFIX, KEY_FILE, RequestBody, SecretsKey, key_path};
pub use startup::{BackupReport, DB_MODE, History, InitReport, Refusal, backup, check, init};
pub use tacker::ReceivedNotification;
pub use tacker::WaitingHeal;
pub use tacker::{
    HealAdoption, PendingFollowup, PollRecord, RecordedInstance, RecordedOpOcc, Retired,
    StoredSubscription,
};
pub use tacker::{HookOutcome, HookReceipt};
pub use timeline::{IntakeFacts, StepFacts, TimelineEntry, TimelineSource};
pub use vnfkeeper_core::model::VnfcRow;

use vnfkeeper_core::package::PackageDigest;

use vnfkeeper_core::model::{
    EventKind, LcmOperationType, OpOccId, OperationState, PendingTask, Timestamp, VnfInstanceId,
    VnfcId,
};

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A migration failed or the database has migrations this binary does not know.
    #[error("database migration: {0}")]
    Migration(#[from] refinery::Error),
    /// A stored value does not decode into its type (bad time, unknown spelling, JSON of the
    /// wrong shape), or a write would break an invariant the store keeps (an illegal operation
    /// state transition). Display: `corrupt database: table vnfc, row 3f2…, column
    /// cp_addresses: expected a JSON object of strings (…)`.
    #[error("corrupt database: table {table}, row {row}, column {column}: {reason}")]
    Corrupt {
        /// Table, e.g. `vnfc`.
        table: &'static str,
        /// The row's key as text: `id` (`vnf_lcm_op_occ`: the vnfLcmOpOccId; `intake`: the
        /// integer id), `(vnf_instance_id, vnfc_id)` for `reconcile_state`.
        row: String,
        /// Column, e.g. `cp_addresses`.
        column: &'static str,
        /// What was expected and found (never a stored JSON document itself).
        reason: String,
    },
    /// A value could not be encoded for storage (JSON serialization failed).
    #[error("database: cannot encode column {column}: {reason}")]
    Encode {
        /// Column, e.g. `cp_addresses`.
        column: &'static str,
        /// The serializer's error.
        reason: String,
    },
    /// The key that encrypts request secrets is missing, unreadable or malformed, or secrets
    /// must be read without it (the text names the key file, never a secret).
    #[error("secrets key: {0}")]
    SecretsKey(String),
    /// A file operation on the database, its directory or a copy failed (the message names the
    /// file where the store adds it). Not a `source`, so that `{:#}` does not repeat it.
    #[error("database file: {0}")]
    Io(std::io::Error),
    /// The database must not be used as it is: missing with signs of an earlier one, empty, or
    /// failing `PRAGMA quick_check`. The daemon exits 78 (`EX_CONFIG`) on it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Another daemon raised the daemon epoch since this store's daemon started
    /// ([`Store::hold_epoch`]): the write transaction was rolled back before it wrote anything.
    /// The daemon exits with [`EXIT_FENCED`].
    #[error(
        "fenced: this daemon holds epoch {held}, but the database's daemon epoch is {current}: \
         another daemon started on this database since; nothing was written"
    )]
    Fenced {
        /// The epoch this daemon raised at its start.
        held: Epoch,
        /// The database's epoch now.
        current: Epoch,
    },
}

/// Exit status of a daemon whose write was fenced ([`StoreError::Fenced`]): another daemon
/// started on its database. The units' `RestartPreventExitStatus` lists it: a restart would
/// fence that other daemon in turn.
pub const EXIT_FENCED: u8 = 79;

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Io(e)
    }
}

/// Result alias of the store.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Owner of the read-write connection. Not `Sync`: the daemon keeps it on one blocking thread.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    /// Seals and opens request secrets (see `secrets.rs`).
    key: Option<SecretsKey>,
    /// The daemon epoch held since [`Store::hold_epoch`]; `None` for a command's store.
    fence: Option<epoch::Fence>,
}

impl Store {
    /// The directory holding the database file (the daemon's state directory); `None` for an
    /// in-memory database.
    pub fn state_dir(&self) -> Option<std::path::PathBuf> {
        self.conn.path().filter(|p| !p.is_empty()).and_then(|p| {
            std::path::Path::new(p)
                .parent()
                .map(std::path::Path::to_path_buf)
        })
    }

    /// Opens and migrates the database, creating it (mode 0640) only when no earlier database
    /// left a sign next to it (`-wal`, `-shm`, `-journal`, `backup/`); see [`Store::open_guarded`].
    /// Then loads the key that encrypts request secrets ([`key_path`]; created at first start)
    /// and encrypts the secrets of rows written before secrets were encrypted. Errors:
    /// [`StoreError`], [`StoreError::Refused`] for a refused file; a database holding encrypted
    /// secrets without its key is [`StoreError::SecretsKey`].
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_guarded(path, History::default())
    }

    /// Opens the database at start (daemon, `db` commands): a missing file is created only when
    /// neither its side files nor `history` (the spool's `accepted/` and `rejected/`) show an
    /// earlier one; a 0-byte file and a file failing `PRAGMA quick_check` are refused
    /// ([`Refusal`]); the file and its `-wal`/`-shm` get mode [`DB_MODE`]; then WAL mode and
    /// migrations. Errors: [`StoreError`].
    pub fn open_guarded(path: &Path, history: History<'_>) -> Result<Self> {
        let mut conn = startup::open_or_create(path, history)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(journal_mode = %mode, "database is not in WAL mode");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let report = embedded::migrations::runner().run(&mut conn)?;
        for m in report.applied_migrations() {
            tracing::info!(version = m.version(), name = %m.name(), "database migrated");
        }
        let key = secrets::at_open(&mut conn, path)?;
        Ok(Self {
            conn,
            key: Some(key),
            fence: None,
        })
    }

    /// `PRAGMA synchronous=FULL` (`[ha]`): each commit is synced to disk before it returns, so a
    /// power-off (a cluster's fencing) loses no committed transaction; the default `NORMAL` in
    /// WAL mode may lose the last ones. Returns SQLite's value read back (2 for FULL). Errors:
    /// SQLite's.
    pub fn set_synchronous_full(&mut self) -> Result<i64> {
        self.conn.pragma_update(None, "synchronous", "FULL")?;
        Ok(self
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))?)
    }

    /// Runs `f` inside one transaction and commits if it returns `Ok`.
    ///
    /// The transaction is `BEGIN IMMEDIATE`: it takes the write lock first, so while another
    /// connection (an auditor's `sqlite3`) holds a write transaction it waits up to the busy
    /// timeout (5 s) for it. A deferred transaction that reads first and then writes would fail
    /// at once with `SQLITE_BUSY` ("database is locked"): SQLite cannot wait for the lock there
    /// without risking a deadlock, so it does not call the busy handler.
    ///
    /// With a daemon epoch held ([`Store::hold_epoch`]) it first checks that it is still the
    /// database's; if not, it rolls back, calls the fence hook (the daemon's exits) and returns
    /// [`StoreError::Fenced`] without running `f`.
    pub fn write<T>(&mut self, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Err(e) = epoch::check(&tx, self.fence) {
            drop(tx);
            if let (Some(fence), StoreError::Fenced { held, current }) = (self.fence, &e)
                && let Some(hook) = fence.on_fenced
            {
                hook(*held, *current);
            }
            return Err(e);
        }
        let mut w = Tx {
            tx,
            key: self.key.as_ref(),
            epoch: self.fence.map(|f| f.epoch),
        };
        let out = f(&mut w)?;
        w.tx.commit()?;
        Ok(out)
    }

    /// The keyed digest of a request file whose SHA-256 is `sha256` ([`SecretsKey::digest`]), as
    /// intake records it. Errors: [`StoreError::SecretsKey`] when no key was loaded.
    pub fn digest(&self, sha256: &[u8; 32]) -> Result<String> {
        self.secrets_key().map(|k| k.digest(sha256))
    }

    /// The key loaded at open. Errors: [`StoreError::SecretsKey`] when there is none.
    pub fn secrets_key(&self) -> Result<&SecretsKey> {
        self.key
            .as_ref()
            .ok_or_else(|| StoreError::SecretsKey("no key was loaded".into()))
    }

    /// `PRAGMA integrity_check`: `["ok"]` for a sound file, else the problems found.
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        let mut st = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Read-only access for the CLI (`ops`, `status`, `plan`, `backup`) while the daemon runs or
    /// not: never creates a file and never migrates. Members of the database's group may use it
    /// (mode [`DB_MODE`]). Errors: [`StoreError::Io`] naming the file when it is missing or not
    /// readable by the caller ("permission denied"), else SQLite's error.
    /// Request secrets are put back only when the caller can read the key ([`key_path`]: the
    /// daemon's user or root); for anyone else, reading a request that holds secrets is
    /// [`StoreError::SecretsKey`].
    pub fn open_read_only(path: &Path) -> Result<Reader> {
        let denied = |e: std::io::Error| -> StoreError {
            let what = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "does not exist (has the daemon run? see README \"Restore from backup\")"
                        .to_string()
                }
                std::io::ErrorKind::PermissionDenied => "permission denied (members of the \
                     database's group, `vnfkeeper`, may read it; `id` shows your groups)"
                    .to_string(),
                _ => e.to_string(),
            };
            StoreError::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {what}", path.display()),
            ))
        };
        std::fs::File::open(path).map_err(denied)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let key = SecretsKey::load(&key_path(dir.unwrap_or(Path::new(".")))).ok();
        Ok(Reader { conn, key })
    }

    /// Reads through the read-write connection.
    pub fn reader(&self) -> ReaderRef<'_> {
        ReaderRef {
            conn: &self.conn,
            key: self.key.as_ref(),
        }
    }
}

/// A read-only connection (CLI).
#[derive(Debug)]
pub struct Reader {
    conn: Connection,
    key: Option<SecretsKey>,
}

impl Reader {
    /// Borrowed query interface.
    pub fn queries(&self) -> ReaderRef<'_> {
        ReaderRef {
            conn: &self.conn,
            key: self.key.as_ref(),
        }
    }
}

/// Queries shared by [`Reader`] and [`Store`].
#[derive(Debug, Clone, Copy)]
pub struct ReaderRef<'a> {
    conn: &'a Connection,
    /// Opens request secrets; `None` for the CLI's read-only connection (redacted bodies only).
    key: Option<&'a SecretsKey>,
}

impl ReaderRef<'_> {
    /// Operation occurrences in arrival order, optionally of one VNF instance (then served by
    /// the index `op_by_instance`; one statement per case, so that SQLite can plan each).
    pub fn operations(&self, vnf_instance_id: Option<&str>) -> Result<Vec<OperationRow>> {
        let cols = OperationRow::COLUMNS;
        let rows = match vnf_instance_id {
            Some(vnf) => {
                let mut st = self.conn.prepare(&format!(
                    "SELECT {cols} FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1 ORDER BY seq"
                ))?;
                let rows = st.query_map([vnf], OperationRow::from_row)?;
                collect_checked(rows)?
            }
            None => {
                let mut st = self
                    .conn
                    .prepare(&format!("SELECT {cols} FROM vnf_lcm_op_occ ORDER BY seq"))?;
                let rows = st.query_map([], OperationRow::from_row)?;
                collect_checked(rows)?
            }
        };
        Ok(rows)
    }

    /// Per VNF instance with at least one operation: how many of its operations are not in a
    /// final state (read from the partial index `op_unfinished`, migration V6) and its newest
    /// operation. For `vnfkeeper status`, which must not read the whole history: two index reads
    /// per instance, whatever the number of finished operations.
    pub fn operation_summaries(
        &self,
    ) -> Result<std::collections::BTreeMap<String, OperationSummary>> {
        let mut unfinished = std::collections::BTreeMap::<String, usize>::new();
        let mut st = self.conn.prepare(UNFINISHED_BY_INSTANCE_SQL)?;
        for row in st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (vnf, n) = row?;
            unfinished.insert(vnf, usize::try_from(n).unwrap_or_default());
        }
        let mut st = self.conn.prepare(&newest_operations_sql())?;
        let last = collect_checked(st.query_map([], OperationRow::from_row)?)?;
        Ok(last
            .into_iter()
            .map(|op| {
                let n = unfinished
                    .get(op.vnf_instance_id.as_str())
                    .copied()
                    .unwrap_or(0);
                (
                    op.vnf_instance_id.to_string(),
                    OperationSummary {
                        unfinished: n,
                        last: op,
                    },
                )
            })
            .collect())
    }

    /// Operations in `state`, a state that is not final (`FAILED_TEMP`, `PROCESSING`…), oldest
    /// first, at most `limit`; read from the partial index `op_unfinished` (migration V6), so
    /// the finished history is never read. A final state: none.
    pub fn operations_in_state(
        &self,
        state: vnfkeeper_core::model::OperationState,
        limit: usize,
    ) -> Result<Vec<OperationRow>> {
        if state.is_final() {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {} FROM vnf_lcm_op_occ INDEXED BY op_unfinished
             WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK')
               AND operation_state = ?1 ORDER BY seq LIMIT ?2",
            OperationRow::COLUMNS
        ))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = st.query_map(params![state.as_str(), limit], OperationRow::from_row)?;
        collect_checked(rows)
    }

    /// `(VNF instances, operations not in a final state)`, for the one-line service status. The
    /// second count reads only the partial index `op_unfinished` (migration V6).
    pub fn counts(&self) -> Result<(i64, i64)> {
        Ok(self.conn.query_row(
            "SELECT (SELECT COUNT(*) FROM vnf_instance),
                    (SELECT COUNT(*) FROM vnf_lcm_op_occ i INDEXED BY op_unfinished
                     WHERE i.operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK'))",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    /// One operation occurrence by id.
    pub fn operation(&self, id: &OpOccId) -> Result<Option<OperationRow>> {
        let sql = format!(
            "SELECT {} FROM vnf_lcm_op_occ WHERE id = ?1",
            OperationRow::COLUMNS
        );
        let row = self
            .conn
            .query_row(&sql, [id.as_str()], OperationRow::from_row)
            .optional()?;
        row.transpose()
    }

    /// VNF instances ordered by id.
    pub fn instances(&self) -> Result<Vec<InstanceRow>> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {} FROM vnf_instance ORDER BY id",
            InstanceRow::COLUMNS
        ))?;
        let rows = st.query_map([], InstanceRow::from_row)?;
        collect_checked(rows)
    }

    /// VNFCs of one instance ordered by VDU and index.
    pub fn vnfcs(&self, vnf_instance_id: &VnfInstanceId) -> Result<Vec<VnfcRow>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {} FROM vnfc WHERE vnf_instance_id = ?1 ORDER BY vdu_id, vnfc_index, created_at, id",
            rows::VnfcColumns::COLUMNS
        ))?;
        let rows = st.query_map([vnf_instance_id.as_str()], rows::VnfcColumns::from_row)?;
        collect_checked(rows)
    }

    /// [`ReaderRef::vnfcs`] of every VNF instance in one query (what `status` lists), by
    /// instance id, each ordered as `vnfcs` orders them; instances without VNFCs are absent.
    pub fn vnfcs_all(&self) -> Result<std::collections::BTreeMap<String, Vec<VnfcRow>>> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {} FROM vnfc ORDER BY vnf_instance_id, vdu_id, vnfc_index, created_at, id",
            rows::VnfcColumns::COLUMNS
        ))?;
        let mut out = std::collections::BTreeMap::<String, Vec<VnfcRow>>::new();
        for c in collect_checked(st.query_map([], rows::VnfcColumns::from_row)?)? {
            out.entry(c.vnf_instance_id.to_string())
                .or_default()
                .push(c);
        }
        Ok(out)
    }

    /// Intake records in order.
    pub fn intake(&self) -> Result<Vec<IntakeRow>> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {} FROM intake ORDER BY id",
            IntakeRow::COLUMNS
        ))?;
        let rows = st.query_map([], IntakeRow::from_row)?;
        collect_checked(rows)
    }

    /// How many `intake` rows hold each digest (`content_sha256`): one scan of the table, for
    /// the start-up comparison of the spool's filed copies with the database.
    pub fn intake_digest_counts(&self) -> Result<std::collections::HashMap<String, usize>> {
        let mut st = self
            .conn
            .prepare("SELECT content_sha256, COUNT(*) FROM intake GROUP BY content_sha256")?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        let mut out = std::collections::HashMap::new();
        for r in rows {
            let (digest, n) = r?;
            out.insert(digest, usize::try_from(n).unwrap_or(0));
        }
        Ok(out)
    }

    /// The intake record of the spool file named `file_name` (as `Spool::submit` named it in
    /// `new/`), once intake committed its outcome; `None` before.
    pub fn intake_of_file(&self, file_name: &str) -> Result<Option<IntakeRow>> {
        let mut st = self.conn.prepare(&intake_of_file_sql())?;
        let rows = st.query_map([file_name], IntakeRow::from_row)?;
        Ok(collect_checked(rows)?.into_iter().next())
    }
}

fn collect_checked<T>(rows: impl Iterator<Item = rusqlite::Result<Result<T>>>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for r in rows {
        out.push(r??);
    }
    Ok(out)
}

/// A write transaction (see [`Store::write`]).
#[derive(Debug)]
pub struct Tx<'c> {
    tx: Transaction<'c>,
    key: Option<&'c SecretsKey>,
    /// The daemon epoch stamped on appended events (`None`: a command's write).
    epoch: Option<Epoch>,
}

/// Prepared statements kept per connection (rusqlite's default is 16). The daemon's one
/// read-write connection serves intake, the scheduler, the engine and reconcile, whose
/// statements together are more than that; an evicted statement is parsed again at its next use.
const STATEMENT_CACHE: usize = 256;

/// A new LCM operation occurrence, as intake records it.
#[derive(Debug, Clone)]
pub struct NewOperation<'a> {
    /// vnfLcmOpOccId.
    pub id: &'a OpOccId,
    /// The instance it applies to (must exist).
    pub vnf_instance_id: &'a VnfInstanceId,
    /// Operation type.
    pub operation: LcmOperationType,
    /// The SOL003 request body, split into the text stored and its secrets.
    pub operation_params: &'a RequestBody,
    /// Absolute VNF package path (INSTANTIATE).
    pub vnf_package: Option<&'a str>,
    /// Idempotency key.
    pub request_id: Option<&'a str>,
    /// `isAutomaticInvocation`.
    pub is_automatic_invocation: bool,
    /// Why it waits.
    pub status_detail: Option<&'a str>,
}

/// Who submitted a spool file, as its `intake` row records it (migration V19).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Submitter {
    /// The file's owner uid (`fstat` at intake).
    pub uid: u32,
    /// That uid's user name at intake (`None`: the password database has none).
    pub name: Option<String>,
    /// `SUDO_USER` of the submitting command, for a file owned by root.
    pub sudo_user: Option<String>,
    /// The operator's file name, as the submitting command labelled the spool file.
    pub file: Option<String>,
}

/// A new intake record.
#[derive(Debug, Clone)]
pub struct NewIntake<'a> {
    /// File name in `new/` (`accepted/<copy>`, `rejected/<copy>` for a copy recorded again).
    pub file_name: &'a str,
    /// Keyed digest of the file ([`SecretsKey::digest`]).
    pub content_sha256: &'a str,
    /// Idempotency key, if any.
    pub request_id: Option<&'a str>,
    /// `ACCEPTED`, `DUPLICATE` or `REJECTED`.
    pub outcome: &'a str,
    /// Instance named by the request.
    pub vnf_instance_id: Option<&'a str>,
    /// Operation created or matched.
    pub vnf_lcm_op_occ_id: Option<&'a str>,
    /// ProblemDetails JSON for rejections.
    pub problem: Option<&'a str>,
    /// JSON array of warnings.
    pub warnings: Option<&'a str>,
}

/// The intake row of one spool file (`?1`), through `intake_by_file` (migration V10).
pub(crate) fn intake_of_file_sql() -> String {
    format!(
        "SELECT {} FROM intake WHERE file_name = ?1 ORDER BY id LIMIT 1",
        IntakeRow::COLUMNS
    )
}

/// Unfinished operations per VNF instance, from the partial index `op_unfinished` alone.
pub(crate) const UNFINISHED_BY_INSTANCE_SQL: &str =
    "SELECT vnf_instance_id, COUNT(*) FROM vnf_lcm_op_occ INDEXED BY op_unfinished
      WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK')
      GROUP BY vnf_instance_id";

/// The newest operation of each VNF instance: one search of `op_by_instance` per instance for
/// its highest `seq`, then the rows by primary key.
pub(crate) fn newest_operations_sql() -> String {
    format!(
        "SELECT {} FROM vnf_lcm_op_occ WHERE seq IN (
             SELECT (SELECT MAX(x.seq) FROM vnf_lcm_op_occ x WHERE x.vnf_instance_id = i.id)
               FROM vnf_instance i)",
        OperationRow::COLUMNS
    )
}

/// What `vnfkeeper status` shows of an instance's operations ([`ReaderRef::operation_summaries`]).
#[derive(Debug, Clone)]
pub struct OperationSummary {
    /// Operations not in a final state (queued, running or `FAILED_TEMP`).
    pub unfinished: usize,
    /// The newest operation (highest `seq`).
    pub last: OperationRow,
}

/// A new audit event.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    /// Event kind, stored as its upper-case name (e.g. `REQUEST_ACCEPTED`).
    pub kind: EventKind,
    /// Instance concerned.
    pub vnf_instance_id: Option<&'a VnfInstanceId>,
    /// Operation concerned.
    pub vnf_lcm_op_occ_id: Option<&'a OpOccId>,
    /// VNFC concerned.
    pub vnfc_id: Option<&'a VnfcId>,
    /// One line for humans.
    pub message: &'a str,
    /// JSON evidence.
    pub evidence: Option<&'a str>,
}

impl NewEvent<'_> {
    /// An event of `kind` concerning nothing in particular, with an empty message: the base
    /// of a struct update (`NewEvent { message, ..NewEvent::of(kind) }`).
    pub fn of(kind: EventKind) -> Self {
        NewEvent {
            kind,
            vnf_instance_id: None,
            vnf_lcm_op_occ_id: None,
            vnfc_id: None,
            message: "",
            evidence: None,
        }
    }
}

impl Tx<'_> {
    /// Queries inside the transaction (sees its own writes).
    pub fn reader(&self) -> ReaderRef<'_> {
        ReaderRef {
            conn: &self.tx,
            key: self.key,
        }
    }

    /// The instance's row, if known.
    pub fn instance(&self, id: &VnfInstanceId) -> Result<Option<InstanceRow>> {
        let sql = format!(
            "SELECT {} FROM vnf_instance WHERE id = ?1",
            InstanceRow::COLUMNS
        );
        self.tx
            .prepare_cached(&sql)?
            .query_row([id.as_str()], InstanceRow::from_row)
            .optional()?
            .transpose()
    }

    /// Creates the instance in `NOT_INSTANTIATED` unless it exists. Returns whether it was created.
    /// Flavour, package and stack are filled in by the INSTANTIATE operation when it runs.
    pub fn create_instance_if_missing(
        &mut self,
        id: &VnfInstanceId,
        now: Timestamp,
    ) -> Result<bool> {
        let n = self
            .tx
            .prepare_cached(
                "INSERT INTO vnf_instance (id, created_at, updated_at) VALUES (?1, ?2, ?2)
             ON CONFLICT (id) DO NOTHING",
            )?
            .execute(params![id.as_str(), now.to_rfc3339()])?;
        Ok(n == 1)
    }

    /// Operations of an instance that are not in a final state, oldest first.
    pub fn unfinished_operations(
        &self,
        vnf_instance_id: &VnfInstanceId,
    ) -> Result<Vec<OperationRow>> {
        let mut st = self.tx.prepare_cached(&format!(
            "SELECT {} FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1
             AND operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK') ORDER BY seq",
            OperationRow::COLUMNS
        ))?;
        let rows = st.query_map([vnf_instance_id.as_str()], OperationRow::from_row)?;
        collect_checked(rows)
    }

    /// The operation created with this idempotency key, if any.
    pub fn operation_by_request_id(&self, request_id: &str) -> Result<Option<OperationRow>> {
        let sql = format!(
            "SELECT {} FROM vnf_lcm_op_occ WHERE request_id = ?1",
            OperationRow::COLUMNS
        );
        self.tx
            .prepare_cached(&sql)?
            .query_row([request_id], OperationRow::from_row)
            .optional()?
            .transpose()
    }

    /// The first intake record with this content digest that created or matched an operation,
    /// or that rejected the file.
    pub fn intake_by_sha256(&self, sha256: &str) -> Result<Vec<IntakeRow>> {
        let mut st = self.tx.prepare_cached(&format!(
            "SELECT {} FROM intake WHERE content_sha256 = ?1 ORDER BY id",
            IntakeRow::COLUMNS
        ))?;
        let rows = st.query_map([sha256], IntakeRow::from_row)?;
        collect_checked(rows)
    }

    /// Inserts an operation in `STARTING`.
    ///
    /// The body is stored redacted; its secrets are stored encrypted in `operation_secrets`.
    pub fn insert_operation(&mut self, op: &NewOperation<'_>, now: Timestamp) -> Result<()> {
        self.insert_operation_with_snapshot(op, None, now)
    }

    /// [`Tx::insert_operation`] with the package snapshot the operation uses (its digest and
    /// the operator's package it was copied from), in the same row write as
    /// [`Tx::record_package_snapshot`] would store them afterwards: intake's acceptance writes
    /// the row once instead of inserting and then rewriting it.
    pub fn insert_operation_with_snapshot(
        &mut self,
        op: &NewOperation<'_>,
        snapshot: Option<(PackageDigest, &Path)>,
        now: Timestamp,
    ) -> Result<()> {
        let now = now.to_rfc3339();
        let (package_sha256, package_source) = match snapshot {
            Some((digest, source)) => (
                Some(digest.to_string()),
                Some(source.to_string_lossy().into_owned()),
            ),
            None => (None, None),
        };
        let body = op.operation_params;
        let sealed = match (body.secrets(), self.key) {
            (None, _) => None,
            (Some(s), Some(key)) => Some(key.seal(op.id.as_str(), s)?),
            (Some(_), None) => {
                return Err(StoreError::SecretsKey(
                    "no key loaded to encrypt the request's secrets".into(),
                ));
            }
        };
        self.tx
            .prepare_cached(
                "INSERT INTO vnf_lcm_op_occ (id, vnf_instance_id, operation, operation_state,
                 state_entered_time, start_time, is_automatic_invocation, operation_params,
                 vnf_package, request_id, status_detail, operation_secrets, package_sha256,
                 package_source, epoch)
             VALUES (?1, ?2, ?3, 'STARTING', ?4, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?
            .execute(params![
                op.id.as_str(),
                op.vnf_instance_id.as_str(),
                op.operation.as_str(),
                now,
                op.is_automatic_invocation,
                body.stored(),
                op.vnf_package,
                op.request_id,
                op.status_detail,
                sealed,
                package_sha256,
                package_source,
                self.epoch.map(|e| e.0)
            ])?;
        Ok(())
    }

    /// Moves an operation to `to` if the state machine allows it from its current state.
    /// Returns the previous state. Errors: [`StoreError::Corrupt`] on an illegal transition.
    pub fn set_operation_state(
        &mut self,
        id: &str,
        to: OperationState,
        error: Option<&str>,
        now: Timestamp,
    ) -> Result<OperationState> {
        let from: String = self.tx.query_row(
            "SELECT operation_state FROM vnf_lcm_op_occ WHERE id = ?1",
            [id],
            |r| r.get(0),
        )?;
        let cells = decode::Cells::new("vnf_lcm_op_occ", id);
        let from = cells.spelling(
            "operation_state",
            &from,
            OperationState::parse,
            decode::OPERATION_STATES,
        )?;
        from.transition(to)
            .map_err(|e| cells.corrupt("operation_state", e))?;
        self.tx
            .prepare_cached(
                "UPDATE vnf_lcm_op_occ SET operation_state = ?2, state_entered_time = ?3,
                 error = COALESCE(?4, error), pending_task = NULL, epoch = COALESCE(?5, epoch)
                 WHERE id = ?1",
            )?
            .execute(params![
                id,
                to.as_str(),
                now.to_rfc3339(),
                error,
                self.epoch.map(|e| e.0)
            ])?;
        Ok(from)
    }

    /// Records a RETRY or ROLLBACK for the engine to carry out.
    pub fn set_pending_task(&mut self, id: &OpOccId, task: PendingTask) -> Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE vnf_lcm_op_occ SET pending_task = ?2, epoch = COALESCE(?3, epoch)
                 WHERE id = ?1",
            )?
            .execute(params![id.as_str(), task.as_str(), self.epoch.map(|e| e.0)])?;
        Ok(())
    }

    /// Inserts an intake record; returns its id.
    pub fn insert_intake(&mut self, rec: &NewIntake<'_>, now: Timestamp) -> Result<i64> {
        self.insert_intake_by(rec, None, now)
    }

    /// Inserts an intake record with who submitted its spool file ([`Submitter`], `None`:
    /// unknown), in one row write; returns its id.
    pub fn insert_intake_by(
        &mut self,
        rec: &NewIntake<'_>,
        submitter: Option<&Submitter>,
        now: Timestamp,
    ) -> Result<i64> {
        self.tx
            .prepare_cached(
                "INSERT INTO intake (source, file_name, content_sha256, request_id, outcome,
                 vnf_instance_id, vnf_lcm_op_occ_id, problem, warnings, committed_at,
                 submitter_uid, submitter_name, submitter_sudo_user, submitted_file)
             VALUES ('SPOOL', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?
            .execute(params![
                rec.file_name,
                rec.content_sha256,
                rec.request_id,
                rec.outcome,
                rec.vnf_instance_id,
                rec.vnf_lcm_op_occ_id,
                rec.problem,
                rec.warnings,
                now.to_rfc3339(),
                submitter.map(|s| s.uid),
                submitter.and_then(|s| s.name.as_deref()),
                submitter.and_then(|s| s.sudo_user.as_deref()),
                submitter.and_then(|s| s.file.as_deref())
            ])?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Appends an audit event.
    pub fn append_event(&mut self, ev: &NewEvent<'_>, now: Timestamp) -> Result<()> {
        self.tx.prepare_cached(
            "INSERT INTO event (at, kind, vnf_instance_id, vnf_lcm_op_occ_id, vnfc_id, message, evidence, epoch)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?.execute(
            params![
                now.to_rfc3339(),
                ev.kind.as_str(),
                ev.vnf_instance_id.map(VnfInstanceId::as_str),
                ev.vnf_lcm_op_occ_id.map(OpOccId::as_str),
                ev.vnfc_id.map(VnfcId::as_str),
                ev.message,
                ev.evidence,
                self.epoch.map(|e| e.0)
            ],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest as _;

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-21T06:00:00Z").unwrap()
    }

    /// A database of V17: V18 takes the plain digest out of the accepted request's event
    /// evidence (the event stays append-only), and the open replaces the intake row's plain
    /// digest with the keyed one a new intake of the same bytes computes.
    #[test]
    fn v18_and_the_open_leave_no_plain_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut conn = Connection::open(&path).unwrap();
        embedded::migrations::runner()
            .set_target(refinery::Target::Version(17))
            .run(&mut conn)
            .unwrap();
        let plain = vnfkeeper_core::digest::sha256_hex(b"request");
        conn.execute(
            "INSERT INTO intake (source, content_sha256, outcome, committed_at)
             VALUES ('SPOOL', ?1, 'REJECTED', 't')",
            [&plain],
        )
        .unwrap();
        let evidence = serde_json::json!({"file": "a.json", "sha256": plain, "intakeId": 1});
        conn.execute(
            "INSERT INTO event (at, kind, message, evidence) VALUES ('t', 'REQUEST_ACCEPTED', 'm', ?1)",
            [evidence.to_string()],
        )
        .unwrap();
        drop(conn);
        let store = Store::open(&path).unwrap();
        let (digest, evidence): (String, String) = store
            .conn
            .query_row(
                "SELECT (SELECT content_sha256 FROM intake), (SELECT evidence FROM event)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let sha: [u8; 32] = sha2::Sha256::digest(b"request").into();
        assert_eq!(digest, store.digest(&sha).unwrap());
        assert!(!evidence.contains(&plain), "{evidence}");
        assert!(evidence.contains("\"intakeId\":1"), "{evidence}");
        assert!(
            store
                .conn
                .execute("UPDATE event SET message = 'x'", [])
                .is_err()
        );
    }

    /// V13 makes `vnf_lcm_op_occ` (and `step_journal`, `intake`) again for CHANGE_EXT_CONN:
    /// rows, foreign keys, AUTOINCREMENT counters and the audit views survive, and a
    /// CHANGE_EXT_CONN can be stored and read back as a change of the instance's VLs.
    #[test]
    fn v13_keeps_rows_and_counters_and_accepts_change_ext_conn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        embedded::migrations::runner()
            .set_target(refinery::Target::Version(10))
            .run(&mut conn)
            .unwrap();
        conn.execute_batch(
            "INSERT INTO vnf_instance (id, instantiation_state, created_at, updated_at)
                 VALUES ('vnf-1', 'INSTANTIATED', 't', 't');
             INSERT INTO vnf_lcm_op_occ (seq, id, vnf_instance_id, operation, operation_state,
                 state_entered_time, start_time, operation_params, operation_secrets)
                 VALUES (41, 'op-1', 'vnf-1', 'INSTANTIATE', 'COMPLETED', '2026-11-21T06:00:00Z', '2026-11-21T06:00:00Z', '{}', X'');
             INSERT INTO step_journal (vnf_lcm_op_occ_id, stage_key, step_no, name, state)
                 VALUES ('op-1', 'heat.create', 1, 'heat.create', 'DONE');
             INSERT INTO intake (id, source, content_sha256, outcome, vnf_lcm_op_occ_id, committed_at)
                 VALUES (7, 'SPOOL', 'x', 'ACCEPTED', 'op-1', 't');
             DELETE FROM intake WHERE id = 7;
             INSERT INTO intake (id, source, content_sha256, outcome, vnf_lcm_op_occ_id, committed_at)
                 VALUES (5, 'SPOOL', 'y', 'ACCEPTED', 'op-1', 't');",
        )
        .unwrap();
        drop(conn);
        let mut store = Store::open(&path).unwrap();
        let count = |sql: &str| -> i64 { store.conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            count("SELECT COUNT(*) FROM step_journal WHERE vnf_lcm_op_occ_id = 'op-1'"),
            1
        );
        assert_eq!(count("SELECT COUNT(*) FROM intake"), 1);
        assert_eq!(count("SELECT COUNT(*) FROM vnf_history"), 0);
        assert_eq!(
            count("SELECT seq FROM sqlite_sequence WHERE name = 'vnf_lcm_op_occ'"),
            41
        );
        assert_eq!(
            count("SELECT seq FROM sqlite_sequence WHERE name = 'intake'"),
            7
        );
        assert_eq!(count("SELECT COUNT(*) FROM pragma_foreign_key_check"), 0);
        assert_eq!(
            count("SELECT COUNT(*) FROM sqlite_schema WHERE name LIKE '%_v11'"),
            0
        );
        let body = r#"{"extVirtualLinks": []}"#;
        store
            .write(|tx| {
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from("op-2"),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::ChangeExtConn,
                        operation_params: &RequestBody::split(
                            LcmOperationType::ChangeExtConn,
                            body,
                        ),
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    now(),
                )?;
                tx.set_operation_state("op-2", OperationState::Processing, None, now())?;
                tx.set_operation_state("op-2", OperationState::Completed, None, now())?;
                Ok(())
            })
            .unwrap();
        let ops = store.reader().operations(Some("vnf-1")).unwrap();
        assert_eq!(ops[1].operation, LcmOperationType::ChangeExtConn);
        assert_eq!(ops[1].seq, 42, "the counter went on from 41");
        assert_eq!(
            store
                .reader()
                .ext_conn_changes(&VnfInstanceId::from("vnf-1"))
                .unwrap(),
            [body]
        );
    }

    #[test]
    fn migrates_and_enforces_state_machine_and_append_only_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        store
            .write(|tx| {
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now())?;
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from("op-1"),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::Instantiate,
                        operation_params: &RequestBody::split(LcmOperationType::Instantiate, "{}"),
                        vnf_package: Some("/pkg"),
                        request_id: Some("r1"),
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    now(),
                )?;
                tx.append_event(
                    &NewEvent {
                        message: "m",
                        ..NewEvent::of(EventKind::RequestAccepted)
                    },
                    now(),
                )?;
                Ok(())
            })
            .unwrap();
        let illegal = store
            .write(|tx| tx.set_operation_state("op-1", OperationState::Completed, None, now()));
        assert!(
            matches!(illegal, Err(StoreError::Corrupt { .. })),
            "{illegal:?}"
        );
        let prev = store
            .write(|tx| tx.set_operation_state("op-1", OperationState::Processing, None, now()))
            .unwrap();
        assert_eq!(prev, OperationState::Starting);
        let ops = store.reader().operations(Some("vnf-1")).unwrap();
        assert_eq!(ops[0].operation_state, OperationState::Processing);
        assert!(store.conn.execute("DELETE FROM event", []).is_err());
        assert!(
            store
                .conn
                .execute("UPDATE event SET kind = 'x'", [])
                .is_err()
        );
        assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
        drop(store);
        // Reopening runs no migration again and keeps the data.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.reader().instances().unwrap().len(), 1);
        let ro = Store::open_read_only(&path).unwrap();
        assert_eq!(
            ro.queries()
                .operation(&OpOccId::from("op-1"))
                .unwrap()
                .unwrap()
                .request_id
                .as_deref(),
            Some("r1")
        );
    }
}

/// The one read-write connection, shared by intake and the engine. Calls take a short lock; on
/// a multi-threaded runtime they run under `block_in_place`, so async workers are not starved.
/// WAL checkpoints run on a thread of their own ([`checkpoint::Checkpointer`]), woken after
/// each call, so that no call waits for one.
#[derive(Debug, Clone)]
pub struct Db {
    store: std::sync::Arc<std::sync::Mutex<Store>>,
    checkpointer: Option<std::sync::Arc<checkpoint::Checkpointer>>,
}

impl Db {
    /// Wraps an opened store and starts its checkpoint thread (none for an in-memory store).
    pub fn new(store: Store) -> Self {
        let checkpointer = checkpoint::Checkpointer::start(&store.conn).map(std::sync::Arc::new);
        Self {
            store: std::sync::Arc::new(std::sync::Mutex::new(store)),
            checkpointer,
        }
    }

    /// Runs `f` with the store (a poisoned lock is recovered: the store has no invariants that a
    /// panic between statements could break; transactions roll back on drop).
    pub fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let call = || {
            let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        };
        let out = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(call)
            }
            _ => call(),
        };
        if let Some(c) = &self.checkpointer {
            c.poke();
        }
        out
    }

    /// One write transaction (see [`Store::write`]).
    pub fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.with(|s| s.write(f))
    }
}
