//! Opening the database at start without ever starting empty by mistake, file modes for the
//! auditors' group, and `vnfkeeper backup` / `vnfkeeper db init`.
//!
//! Signs that a database existed before (any one of them makes a missing database an error,
//! [`Refusal::Missing`]): the SQLite side files `<db>-wal`, `<db>-shm`, `<db>-journal`
//! (<https://www.sqlite.org/tempfiles.html>, sections 2.2–2.4); any entry in the spool's
//! `accepted/` or `rejected/` (only the daemon writes there, after recording the file in the
//! database); any file in `<state dir>/backup/` (where the backup timer writes); the secrets key
//! `<state dir>/secrets.key` (created by the first start, after the database). Files in the
//! spool's `new/` and `tmp/` are not signs: producers may submit before the first start.
//!
//! Modes: the database is created 0640 *before* SQLite opens it, because SQLite gives the `-wal`
//! and `-shm` files the mode (and, as root, the owner) of the database file (unix VFS,
//! `findCreateFileMode`); an existing database and side files are set to 0640 at start. The
//! connection keeps `-wal` and `-shm` after it closes (`SQLITE_FCNTL_PERSIST_WAL`, the WAL
//! truncated to 0 bytes on a clean close via `journal_size_limit`), so that a group member can
//! open the database read-only when the daemon is stopped too: a read-only connection can use
//! existing `-wal`/`-shm` files it may only read, but cannot create them in the state directory
//! (<https://www.sqlite.org/wal.html>, section 5 "Read-Only Databases").

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{Result, StoreError};

/// Mode of the database and its `-wal`/`-shm` files: the daemon reads and writes, group
/// `vnfkeeper` (auditors) reads, others nothing.
pub const DB_MODE: u32 = 0o640;

/// `journal_size_limit` in bytes: the WAL is cut back to this after a checkpoint resets it, and
/// to 0 bytes when the last connection closes cleanly (<https://www.sqlite.org/pragma.html#pragma_journal_size_limit>).
const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// The side files SQLite keeps next to `db`: `-wal`, `-shm`, `-journal`.
fn side_files(db: &Path) -> [PathBuf; 3] {
    ["-wal", "-shm", "-journal"].map(|s| {
        let mut p = db.as_os_str().to_owned();
        p.push(s);
        PathBuf::from(p)
    })
}

/// Why the daemon refuses to open the database. Each is a 78 (`EX_CONFIG`) exit: restarting
/// cannot help, an operator must act. The display names the file, what was found and the
/// recovery steps.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The database file is missing although an earlier one left signs.
    #[error(
        "database {path} is missing, but an earlier database left signs: {}. Refusing to start \
         with a new empty database (its history would be lost). Recovery: stop the service, \
         restore the latest backup (README \"Restore from backup\"), start again. Only if the \
         history is really gone: `vnfkeeper db init` creates a new empty database",
        found.join("; ")
    )]
    Missing {
        /// The configured `database`.
        path: PathBuf,
        /// The signs found, e.g. `/var/lib/vnfkeeper/state.db-wal exists (0 bytes)`.
        found: Vec<String>,
    },
    /// The database file exists but holds 0 bytes.
    #[error(
        "database {path} is empty (0 bytes): refusing to use it as a new database. Recovery: \
         stop the service, restore the latest backup (README \"Restore from backup\"), start \
         again. Only if the history is really gone: `vnfkeeper db init` replaces the empty file \
         with a new empty database"
    )]
    Empty {
        /// The configured `database`.
        path: PathBuf,
    },
    /// The database or one of its side files cannot be opened for writing.
    #[error(
        "{path} cannot be opened for writing ({error}): a read-only file system, an immutable \
         file (`lsattr`), or a file the daemon's user may not write. Make it writable (a \
         read-write mount, `chattr -i`, `chown vnfkeeper:vnfkeeper`), then start again"
    )]
    NotWritable {
        /// The file.
        path: PathBuf,
        /// What opening it said.
        error: String,
    },
    /// `PRAGMA quick_check` failed, or SQLite found the file malformed while checking.
    #[error(
        "database {path} fails PRAGMA quick_check: {problems}. Refusing to start on a damaged \
         database. Recovery: stop the service, move {path} and its -wal/-shm files aside (keep \
         them for analysis), restore the latest backup (README \"Restore from backup\"), start \
         again"
    )]
    Corrupt {
        /// The configured `database`.
        path: PathBuf,
        /// The first problems `quick_check` reported (at most 5, `; `-joined), or SQLite's error.
        problems: String,
    },
}

/// Where else an earlier database leaves traces: the spool directories the daemon alone writes
/// (`accepted/`, `rejected/`). Empty for callers without a spool (unit tests, benchmarks).
#[derive(Debug, Clone, Copy, Default)]
pub struct History<'a> {
    /// Directories whose non-empty content proves an earlier run.
    pub dirs: &'a [&'a Path],
}

/// The signs of an earlier database next to `db` and in `history` (see the module doc).
pub fn earlier_signs(db: &Path, history: History<'_>) -> Vec<String> {
    let mut found = Vec::new();
    for f in side_files(db) {
        if let Ok(m) = fs::symlink_metadata(&f) {
            found.push(format!("{} exists ({} bytes)", f.display(), m.len()));
        }
    }
    let key = db.parent().map(|d| d.join(super::KEY_FILE));
    if let Some(key) = key.filter(|k| fs::symlink_metadata(k).is_ok()) {
        found.push(format!("{} exists", key.display()));
    }
    let backups = db.parent().map(|d| d.join("backup"));
    for dir in history.dirs.iter().copied().chain(backups.as_deref()) {
        match fs::read_dir(dir) {
            Ok(rd) => {
                let names: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                if let Some(first) = names.first() {
                    found.push(format!(
                        "{} holds {} entries (e.g. {first:?})",
                        dir.display(),
                        names.len()
                    ));
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            // Cannot look: count it as a sign rather than guess that it is empty.
            Err(e) => found.push(format!("{} cannot be listed ({e})", dir.display())),
        }
    }
    found
}

/// Sets `path` to [`DB_MODE`] unless it has it already. A missing file is fine.
fn set_db_mode(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.permissions().mode() & 0o7777 != DB_MODE => {
            fs::set_permissions(path, fs::Permissions::from_mode(DB_MODE))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `path` as an empty file of mode [`DB_MODE`] (exclusive create, so an existing file
/// is never truncated); as root, hands it to the owner and group of its directory, so that
/// `vnfkeeper db init` run by root leaves a file the `vnfkeeper` user can write.
fn create_db_file(path: &Path) -> std::io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(DB_MODE)
        .open(path)?;
    // The umask may have taken bits off.
    f.set_permissions(fs::Permissions::from_mode(DB_MODE))?;
    let dir = parent_dir(path);
    let (file, dir) = (f.metadata()?, fs::metadata(dir)?);
    if file.uid() == 0 && (dir.uid() != 0 || dir.gid() != file.gid()) {
        std::os::unix::fs::chown(path, Some(dir.uid()), Some(dir.gid()))?;
    }
    Ok(())
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An I/O error that names the file: `<path>: <error>`.
fn at(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |e| {
        StoreError::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    }
}

/// `fsync` of a directory, so that a rename in it is durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// The temporary name next to `path` used while writing it (`.<name>.<what>-<pid>`).
fn temp_next_to(path: &Path, what: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{what}-{}", std::process::id()))
}

/// Creates a new database at `path` (which must not exist): written and migrated under a
/// temporary name, then renamed into place, so a crash leaves either no database or a complete
/// one, never an empty file.
pub(super) fn create_new(path: &Path) -> Result<()> {
    let tmp = temp_next_to(path, "init");
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(at(&tmp)(e)),
        _ => {}
    }
    create_db_file(&tmp).map_err(at(&tmp))?;
    let result = (|| -> Result<()> {
        let mut conn = Connection::open_with_flags(
            &tmp,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        super::embedded::migrations::runner().run(&mut conn)?;
        // Recorded in the file header, so the daemon's connection finds it in WAL mode.
        let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        conn.close().map_err(|(_, e)| e)?;
        fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(at(&tmp))?;
        fs::rename(&tmp, path).map_err(at(path))?;
        sync_dir(parent_dir(path)).map_err(at(parent_dir(path)))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        for f in side_files(&tmp) {
            let _ = fs::remove_file(f);
        }
    }
    result
}

/// Refuses ([`Refusal::NotWritable`]) an existing `path` that cannot be opened for writing
/// (`EACCES`, `EPERM` — an immutable file —, `EROFS`): SQLite would fail on it at the first write
/// or not open it at all, which no restart fixes. A missing file is fine (SQLite creates side
/// files itself).
fn writable(path: &Path) -> Result<()> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    match opened {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ETXTBSY)
            ) =>
        {
            Err(Refusal::NotWritable {
                path: path.into(),
                error: e.to_string(),
            }
            .into())
        }
        Err(e) => Err(at(path)(e)),
    }
}

/// Opens the existing database read-write without ever creating it, after setting modes, and
/// runs `PRAGMA quick_check`. Errors: [`Refusal::Empty`], [`Refusal::Corrupt`], or I/O.
pub(super) fn open_existing(path: &Path) -> Result<Connection> {
    let meta = fs::metadata(path).map_err(at(path))?;
    if meta.len() == 0 {
        return Err(Refusal::Empty { path: path.into() }.into());
    }
    for f in std::iter::once(path.to_path_buf()).chain(side_files(path)) {
        writable(&f)?;
    }
    set_db_mode(path).map_err(at(path))?;
    for f in side_files(path) {
        set_db_mode(&f).map_err(at(&f))?;
    }
    // No SQLITE_OPEN_CREATE: should the file vanish in between, SQLite fails instead of
    // creating an empty one.
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    check(&conn).map_err(|problems| Refusal::Corrupt {
        path: path.into(),
        problems,
    })?;
    let mut persist: std::ffi::c_int = 1;
    conn.file_control(
        Some(rusqlite::MAIN_DB),
        rusqlite::FileControl::PersistWal(&mut persist),
    )?;
    conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT)?;
    Ok(conn)
}

/// `PRAGMA quick_check` (<https://www.sqlite.org/pragma.html#pragma_quick_check>): `Ok` for a
/// sound file, else the first problems (or the error SQLite raised reading a malformed file).
/// Busy and locking errors are passed through as problems too: the caller refuses either way.
pub fn check(conn: &Connection) -> std::result::Result<(), String> {
    let rows = (|| -> rusqlite::Result<Vec<String>> {
        let mut st = conn.prepare("PRAGMA quick_check(5)")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    })();
    match rows {
        Ok(r) if r == ["ok"] => Ok(()),
        Ok(r) => Err(r.join("; ")),
        Err(e) => Err(format!("SQLite: {e}")),
    }
}

/// Decides how to open `path` at start: an existing database is opened and checked; a missing
/// one is created only when [`earlier_signs`] finds nothing. Errors: [`Refusal`], I/O, SQLite.
pub(super) fn open_or_create(path: &Path, history: History<'_>) -> Result<Connection> {
    match fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let found = earlier_signs(path, history);
            if !found.is_empty() {
                return Err(Refusal::Missing {
                    path: path.into(),
                    found,
                }
                .into());
            }
            fs::create_dir_all(parent_dir(path)).map_err(at(parent_dir(path)))?;
            create_new(path)?;
            tracing::info!(
                database = %path.display(),
                "created a new empty database: no earlier one left any sign (side files, spool accepted/ and rejected/, backup/)"
            );
        }
        Err(e) => return Err(at(path)(e)),
    }
    open_existing(path)
}

/// What [`init`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitReport {
    /// Files moved aside, as `(from, to)`: stale side files that must not be applied to the new
    /// database, and a 0-byte database file.
    pub moved: Vec<(PathBuf, PathBuf)>,
}

/// `vnfkeeper db init`: creates a new empty database at `path` on purpose. Refuses when a
/// non-empty database is there (move it away first); a 0-byte file and stale `-wal`, `-shm`,
/// `-journal` files are renamed to `<name>.stale-<UTC time>` (an old WAL applied to a new
/// database would corrupt it). Spool history is left alone.
pub fn init(path: &Path, now: vnfkeeper_core::model::Timestamp) -> Result<InitReport> {
    let stamp = now.0.format("%Y%m%dT%H%M%SZ").to_string();
    let mut moved = Vec::new();
    let mut aside = |from: PathBuf| -> Result<()> {
        let mut to = from.as_os_str().to_owned();
        to.push(format!(".stale-{stamp}"));
        let to = PathBuf::from(to);
        fs::rename(&from, &to).map_err(at(&from))?;
        moved.push((from, to));
        Ok(())
    };
    match fs::symlink_metadata(path) {
        Ok(m) if m.len() == 0 && m.is_file() => aside(path.into())?,
        Ok(m) => {
            return Err(StoreError::Io(std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "{} exists ({} bytes): refusing to replace a database; move it away first \
                     if you really want a new empty one",
                    path.display(),
                    m.len()
                ),
            )));
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(at(path)(e)),
    }
    for f in side_files(path) {
        if fs::symlink_metadata(&f).is_ok() {
            aside(f)?;
        }
    }
    fs::create_dir_all(parent_dir(path)).map_err(at(parent_dir(path)))?;
    create_new(path)?;
    Ok(InitReport { moved })
}

/// What [`backup`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The file written.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Rows of `vnf_lcm_op_occ` in the copy.
    pub operations: i64,
    /// Rows of `event` in the copy.
    pub events: i64,
    /// Copies deleted by `keep`, oldest first.
    pub removed: Vec<PathBuf>,
}

/// File names of backups written into a directory: `state-YYYYMMDDTHHMMSSZ.db`.
fn is_backup_name(name: &str) -> bool {
    let Some(stamp) = name
        .strip_prefix("state-")
        .and_then(|s| s.strip_suffix("Z.db"))
    else {
        return false;
    };
    let b = stamp.as_bytes();
    b.len() == 15
        && b[8] == b'T'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 8 || c.is_ascii_digit())
}

/// `vnfkeeper backup`: copies the database at `src` with SQLite's online backup API
/// (<https://www.sqlite.org/backup.html>) in one step, i.e. one read transaction: a consistent
/// snapshot while the daemon keeps writing (WAL readers do not block the writer). `dest` is a
/// file, or a directory (existing, or named with a trailing `/`) that receives
/// `state-<UTC time>.db`; there `keep` (if given, ≥ 1) deletes the oldest such copies beyond
/// that number. The copy is written to a temporary name (mode 0640), checked with
/// `PRAGMA quick_check`, switched to `journal_mode=DELETE` (one self-contained file), synced and
/// renamed into place. Errors: SQLite (source missing or unreadable), I/O, a failed check
/// (`StoreError::Refused(Refusal::Corrupt)` naming `src`; the temporary copy is removed).
pub fn backup(
    src: &Path,
    dest: &Path,
    keep: Option<usize>,
    now: vnfkeeper_core::model::Timestamp,
) -> Result<BackupReport> {
    let source = super::Store::open_read_only(src)?;
    let into_dir = dest.is_dir() || dest.as_os_str().to_string_lossy().ends_with('/');
    let target = if into_dir {
        fs::create_dir_all(dest).map_err(at(dest))?;
        dest.join(format!("state-{}.db", now.0.format("%Y%m%dT%H%M%SZ")))
    } else {
        dest.to_path_buf()
    };
    let tmp = temp_next_to(&target, "backup");
    let _ = fs::remove_file(&tmp);
    create_db_file(&tmp).map_err(at(&tmp))?;
    let written = (|| -> Result<(i64, i64)> {
        let mut copy = Connection::open_with_flags(
            &tmp,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        {
            use rusqlite::backup::{Backup, StepResult};
            // `step(-1)` copies every page in one step (`run_to_completion` wants a positive
            // page count, and several steps restart when the daemon writes in between).
            let b = Backup::new(&source.conn, &mut copy)?;
            let mut tries = 0;
            loop {
                match b.step(-1)? {
                    StepResult::Done => break,
                    StepResult::More => {}
                    _ if tries < 300 => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    other => {
                        return Err(StoreError::Io(std::io::Error::new(
                            ErrorKind::TimedOut,
                            format!("{}: still {other:?} after 30 s of retries", src.display()),
                        )));
                    }
                }
            }
        }
        let _: String = copy.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))?;
        // The copy is page for page the source's snapshot: a failure is the source's.
        check(&copy).map_err(|problems| Refusal::Corrupt {
            path: src.into(),
            problems,
        })?;
        let counts = copy.query_row(
            "SELECT (SELECT COUNT(*) FROM vnf_lcm_op_occ), (SELECT COUNT(*) FROM event)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        copy.close().map_err(|(_, e)| e)?;
        fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(at(&tmp))?;
        fs::rename(&tmp, &target).map_err(at(&target))?;
        sync_dir(parent_dir(&target)).map_err(at(parent_dir(&target)))?;
        Ok(counts)
    })();
    let (operations, events) = match written {
        Ok(c) => c,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            for f in side_files(&tmp) {
                let _ = fs::remove_file(f);
            }
            return Err(e);
        }
    };
    let mut removed = Vec::new();
    if let (true, Some(keep)) = (into_dir, keep) {
        let mut copies: Vec<PathBuf> = fs::read_dir(dest)
            .map_err(at(dest))?
            .filter_map(|e| e.ok())
            .filter(|e| is_backup_name(&e.file_name().to_string_lossy()))
            .map(|e| e.path())
            .collect();
        copies.sort();
        let excess = copies.len().saturating_sub(keep.max(1));
        for old in copies.into_iter().take(excess) {
            fs::remove_file(&old).map_err(at(&old))?;
            removed.push(old);
        }
    }
    Ok(BackupReport {
        bytes: fs::metadata(&target).map_err(at(&target))?.len(),
        path: target,
        operations,
        events,
        removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_are_recognised_exactly() {
        assert!(is_backup_name("state-20261124T031500Z.db"));
        for bad in [
            "state-20261124T031500Z.db.tmp",
            "state-2026112xT031500Z.db",
            "state-20261124-031500Z.db",
            "state.db",
            ".state-20261124T031500Z.db.backup-1",
        ] {
            assert!(!is_backup_name(bad), "{bad}");
        }
    }

    #[test]
    fn fresh_directory_creates_0640_and_signs_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let accepted = dir.path().join("accepted");
        fs::create_dir(&accepted).unwrap();
        let dirs = [accepted.as_path()];
        let history = History { dirs: &dirs };
        assert!(earlier_signs(&db, history).is_empty());
        drop(open_or_create(&db, history).unwrap());
        assert_eq!(
            fs::metadata(&db).unwrap().permissions().mode() & 0o777,
            DB_MODE
        );
        // The side files stay (persistent WAL), with the database's mode.
        for f in &side_files(&db)[..2] {
            let m = fs::metadata(f).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, DB_MODE, "{}", f.display());
        }
        fs::remove_file(&db).unwrap();
        let e = open_or_create(&db, history).unwrap_err().to_string();
        assert!(e.contains("state.db-wal exists"), "{e}");
        assert!(!db.exists());
        // Spool history alone is a sign too.
        for f in side_files(&db) {
            let _ = fs::remove_file(f);
        }
        fs::write(accepted.join("op.json"), b"{}").unwrap();
        let e = open_or_create(&db, history).unwrap_err();
        assert!(
            matches!(&e, StoreError::Refused(Refusal::Missing { found, .. }) if found.len() == 1 && found[0].contains("accepted holds 1 entries")),
            "{e}"
        );
    }

    #[test]
    fn existing_0600_database_becomes_0640() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        drop(open_or_create(&db, History::default()).unwrap());
        for f in std::iter::once(db.clone()).chain(side_files(&db)) {
            if f.exists() {
                fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
        drop(open_or_create(&db, History::default()).unwrap());
        for f in std::iter::once(db.clone()).chain(side_files(&db)) {
            if let Ok(m) = fs::metadata(&f) {
                assert_eq!(m.permissions().mode() & 0o777, DB_MODE, "{}", f.display());
            }
        }
    }
}
