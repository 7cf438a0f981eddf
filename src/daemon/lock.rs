//! One daemon per state directory: an advisory lock (`flock(2)`, exclusive, non-blocking) on
//! `<state dir>/daemon.lock`, taken before the database is opened and held until the process
//! ends (the kernel drops it with the last descriptor, so a crashed daemon never leaves it
//! behind). The holder writes its pid into the file after locking, so that a second start can
//! name it. Only `vnfkeeper daemon` takes it: the CLI's commands read the database read-only or
//! go through the spool, and `config check` touches no state. Once it holds the lock, the daemon
//! checks that it can create a file in the state directory ([`LockError::NotWritable`]).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

/// File name of the lock, in the state directory (the database's directory).
pub const LOCK_FILE: &str = "daemon.lock";

/// The lock held by this process; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct StateLock {
    /// Keeps the descriptor (and so the lock) open.
    _file: File,
}

/// Why the lock was not taken. Both end the daemon with exit 78 (`EX_CONFIG`): a restart does
/// not help, an operator must act.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "another vnfkeeper daemon ({holder}) holds {path}: one daemon per state directory. Stop \
         it first (`systemctl stop vnfkeeper`), or give this one its own `database` (and spool)"
    )]
    Held {
        /// The lock file.
        path: PathBuf,
        /// `pid N`, or why the pid is unknown.
        holder: String,
    },
    /// The state directory cannot be written (a read-only file system, an immutable directory,
    /// no permission): the database's side files, the key and the package store live there.
    #[error(
        "state directory {dir} is not writable ({error}): the daemon keeps its database, its \
         -wal/-shm files, secrets.key and the package store there. Make it writable by the \
         daemon's user (a read-write mount, `chattr -i`, its owner), then start again"
    )]
    NotWritable {
        /// The state directory.
        dir: PathBuf,
        /// What creating a file in it said.
        error: std::io::Error,
    },
    /// The lock file cannot be created, opened or locked (e.g. a read-only state directory).
    #[error(
        "cannot lock {path}: {error} (the daemon's user must be able to write its state directory)"
    )]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
}

/// Takes the lock of `state_dir` (created if missing, as the database would be) and writes this
/// process's pid into it. Errors: [`LockError::Held`] naming the holder's pid,
/// [`LockError::Io`].
pub fn acquire(state_dir: &Path) -> Result<StateLock, LockError> {
    let path = state_dir.join(LOCK_FILE);
    let io = |error: std::io::Error| LockError::Io {
        path: path.clone(),
        error,
    };
    std::fs::create_dir_all(state_dir).map_err(io)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(io(std::io::Error::other("not a regular file")));
    }
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            return Err(LockError::Held {
                holder: holder(&mut file),
                path,
            });
        }
        Err(e) => return Err(io(e.into())),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    probe_writable(state_dir).map_err(|error| LockError::NotWritable {
        dir: state_dir.to_path_buf(),
        error,
    })?;
    Ok(StateLock { _file: file })
}

/// Whether a daemon holds the lock of `state_dir`, as a client (e.g. a task verb waiting for
/// intake) can tell without taking it: the lock file is opened read-only and a shared lock tried
/// and dropped at once. `Some(false)`: nobody holds it, so no daemon runs on this state now;
/// `None`: it cannot be told (no lock file yet, or this user may not read it).
pub fn is_held(state_dir: &Path) -> Option<bool> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(state_dir.join(LOCK_FILE))
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        // Dropped with the descriptor right away: a daemon starting now still gets its lock.
        Ok(()) => Some(false),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Some(true),
        Err(_) => None,
    }
}

/// The state directory of the daemon whose database is `database` (its directory; `.` for a
/// bare file name): where [`acquire`] takes the lock.
pub fn state_dir_of(database: &Path) -> PathBuf {
    match database.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates and removes a file in `dir`: a lock file that already exists opens for writing even
/// where no new file can be made (an immutable directory), so the lock alone does not show it.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    match std::fs::remove_file(&probe) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// `pid N` from the lock file's content, or why it cannot be told. The content is only trusted
/// as a number (at most 32 bytes are read), never shown as it is.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    match file.take(32).read_to_string(&mut text) {
        Ok(_) => match text.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "pid not yet written".into(),
        },
        Err(e) => format!("pid unreadable: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_first_holder_and_the_lock_ends_with_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(is_held(dir.path()), None, "no lock file yet");
        let first = acquire(dir.path()).unwrap();
        let e = acquire(dir.path()).unwrap_err();
        let pid = std::process::id();
        assert!(
            matches!(&e, LockError::Held { holder, .. } if *holder == format!("pid {pid}")),
            "{e}"
        );
        assert_eq!(is_held(dir.path()), Some(true));
        drop(first);
        assert_eq!(is_held(dir.path()), Some(false));
        let again = acquire(dir.path()).unwrap();
        drop(again);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(),
            format!("{pid}\n")
        );
    }
}
