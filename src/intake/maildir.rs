//! The spool directory on disk, with maildir semantics: producers write `tmp/X` and rename it
//! into `new/`; intake reads files from `new/` and, once their outcome is committed, moves each to
//! `accepted/` or to `rejected/` beside an `.error.json`. File system only: what a request means
//! and whether it is admitted is decided elsewhere.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::wire::TaskOperation;
use crate::model::ProblemDetails;

/// The spool's directories under its root.
#[derive(Debug, Clone)]
pub struct Spool {
    root: PathBuf,
}

/// A request file's bytes as read from `new/`.
pub(super) struct RequestFile {
    /// Path in `new/`.
    pub path: PathBuf,
    /// File name in `new/`.
    pub name: String,
    /// The whole content.
    pub bytes: Vec<u8>,
}

/// Where a request file belongs once its outcome is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Destination {
    /// `accepted/<op>.json`: the request created VnfLcmOpOcc `op`.
    Accepted {
        /// The vnfLcmOpOccId.
        op: String,
    },
    /// `accepted/<op>.dup-<intake id>.json`: the request repeated the one that created `op`.
    Duplicate {
        /// The vnfLcmOpOccId the earlier copy created.
        op: String,
        /// The `intake` row id of this copy.
        intake_id: i64,
    },
    /// `accepted/<op>.<task>-<intake id>.json`: a RETRY, FAIL or ROLLBACK of `op`.
    Task {
        /// The vnfLcmOpOccId the task applies to.
        op: String,
        /// Which task.
        task: TaskOperation,
        /// The `intake` row id of this file.
        intake_id: i64,
    },
    /// `rejected/<name>` beside `rejected/<name>.error.json`, which holds `problem`.
    Rejected {
        /// Why; written as the `.error.json` body.
        problem: ProblemDetails,
    },
}

impl Spool {
    /// Opens the spool at `root`, creating `tmp/`, `new/` (mode 2770: group members may submit),
    /// `accepted/` and `rejected/` (2750) if missing. Errors: I/O.
    pub fn open(root: &Path) -> io::Result<Self> {
        let spool = Self {
            root: root.to_path_buf(),
        };
        for (dir, mode) in [
            (spool.tmp_dir(), 0o2770),
            (spool.new_dir(), 0o2770),
            (spool.accepted_dir(), 0o2750),
            (spool.rejected_dir(), 0o2750),
        ] {
            if !dir.is_dir() {
                fs::create_dir_all(&dir)?;
                set_mode(&dir, mode)?;
            }
        }
        Ok(spool)
    }

    /// Where producers write before renaming.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }
    /// Where complete requests appear.
    pub fn new_dir(&self) -> PathBuf {
        self.root.join("new")
    }
    /// Accepted requests, named by their vnfLcmOpOccId.
    pub fn accepted_dir(&self) -> PathBuf {
        self.root.join("accepted")
    }
    /// Rejected requests with their `.error.json`.
    pub fn rejected_dir(&self) -> PathBuf {
        self.root.join("rejected")
    }

    /// Request files now in `new/`: regular `*.json` files not starting with `.`, oldest
    /// modification first (then by name), each with its modification time.
    pub fn scan(&self) -> io::Result<Vec<(PathBuf, SystemTime)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.new_dir())? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !is_request_name(&name) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                out.push((entry.path(), meta.modified()?));
            }
        }
        out.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Submits `bytes` the maildir way: writes `tmp/<unique>.json` with mode 0640 whatever the
    /// umask (the daemon reads it through the spool's group `vnfkeeper`; others cannot, as it may
    /// hold passwords), syncs it, renames it into `new/`. Returns the path in `new/`. Errors: I/O
    /// (e.g. no write permission on the spool).
    pub fn submit(&self, bytes: &[u8]) -> io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt as _;
        let name = unique_name();
        let tmp = self.tmp_dir().join(&name);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o640))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        let dst = self.new_dir().join(&name);
        fs::rename(&tmp, &dst)?;
        Ok(dst)
    }

    /// The path a file named `name` (in `new/`) has at `dest`. For [`Destination::Rejected`] this
    /// is `rejected/<name>`, the name it gets unless that one is taken (see [`Spool::place`]).
    pub(super) fn path_of(&self, dest: &Destination, name: &str) -> PathBuf {
        match dest {
            Destination::Accepted { op } => self.accepted_dir().join(format!("{op}.json")),
            Destination::Duplicate { op, intake_id } => self
                .accepted_dir()
                .join(format!("{op}.dup-{intake_id}.json")),
            Destination::Task {
                op,
                task,
                intake_id,
            } => {
                let task = match task {
                    TaskOperation::Retry => "retry",
                    TaskOperation::Fail => "fail",
                    TaskOperation::Rollback => "rollback",
                };
                self.accepted_dir()
                    .join(format!("{op}.{task}-{intake_id}.json"))
            }
            Destination::Rejected { .. } => self.rejected_dir().join(name),
        }
    }

    /// Whether something already exists at the path a file named `name` has at `dest`.
    pub(super) fn holds(&self, dest: &Destination, name: &str) -> bool {
        self.path_of(dest, name).exists()
    }

    /// Moves the request file `path` (named `name` in `new/`) to `dest`. A rejected file first
    /// gets `rejected/<target>.error.json` (written atomically), then is moved to
    /// `rejected/<target>`, where `<target>` is `name`, or `<stem>.<n>.json` with the lowest free
    /// `n` when that is taken. The error file is written first, so a crash in between leaves the
    /// request in `new/` to be processed again, never a rejected file without its explanation.
    /// Errors: I/O (the file stays in `new/`).
    pub(super) fn place(&self, path: &Path, name: &str, dest: &Destination) -> io::Result<()> {
        let Destination::Rejected { problem } = dest else {
            return fs::rename(path, self.path_of(dest, name));
        };
        let dir = self.rejected_dir();
        let stem = name.strip_suffix(".json").unwrap_or(name);
        let mut target = name.to_owned();
        let mut n = 1;
        while dir.join(&target).exists() {
            target = format!("{stem}.{n}.json");
            n += 1;
        }
        let error_path = dir.join(format!("{target}.error.json"));
        let tmp = dir.join(format!(".{target}.error.json.tmp"));
        let mut body = serde_json::to_vec_pretty(problem).map_err(io::Error::other)?;
        body.push(b'\n');
        fs::write(&tmp, body)?;
        set_mode(&tmp, 0o640)?;
        fs::rename(&tmp, &error_path)?;
        fs::rename(path, dir.join(&target))
    }
}

/// Whether a directory entry is a request file intake should look at.
pub fn is_request_name(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".json")
}

/// Reads the request file at `path` whole. `None` when it vanished meanwhile (another batch moved
/// it) or cannot be opened or read (logged; the next scan tries again).
pub(super) fn read_request(path: &Path) -> Option<RequestFile> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let mut file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %name, error = %e, "cannot open request file; will retry");
            return None;
        }
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.read_to_end(&mut bytes) {
        tracing::warn!(file = %name, error = %e, "cannot read request file; will retry");
        return None;
    }
    Some(RequestFile {
        path: path.to_path_buf(),
        name,
        bytes,
    })
}

/// `<secs>.<micros>.<pid>.<12 hex digits>.json`: unique across processes and submissions.
fn unique_name() -> String {
    let now = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{:06}.{}.{}.json",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_spool() -> (tempfile::TempDir, Spool) {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path()).unwrap();
        (dir, spool)
    }

    #[test]
    fn accepted_names_carry_the_operation_and_for_copies_the_intake_id() {
        let (_dir, spool) = temp_spool();
        let name = |d: &Destination| {
            let p = spool.path_of(d, "x.json");
            assert_eq!(p.parent(), Some(spool.accepted_dir().as_path()));
            p.file_name().unwrap().to_string_lossy().into_owned()
        };
        assert_eq!(
            name(&Destination::Accepted { op: "op1".into() }),
            "op1.json"
        );
        let dup = Destination::Duplicate {
            op: "op1".into(),
            intake_id: 7,
        };
        assert_eq!(name(&dup), "op1.dup-7.json");
        let rollback = Destination::Task {
            op: "op1".into(),
            task: TaskOperation::Rollback,
            intake_id: 9,
        };
        assert_eq!(name(&rollback), "op1.rollback-9.json");
    }

    #[test]
    fn a_rejected_file_never_overwrites_an_earlier_one_and_keeps_its_explanation() {
        let (_dir, spool) = temp_spool();
        let problem = ProblemDetails::new(400, "invalid request", Vec::new());
        let rejected = Destination::Rejected {
            problem: problem.clone(),
        };
        for _ in 0..2 {
            let path = spool.new_dir().join("r.json");
            fs::rename(spool.submit(b"{}").unwrap(), &path).unwrap();
            spool.place(&path, "r.json", &rejected).unwrap();
            assert!(spool.holds(&rejected, "r.json"));
        }
        let rej = spool.rejected_dir();
        for f in ["r.json", "r.1.json"] {
            let body = fs::read(rej.join(format!("{f}.error.json"))).unwrap();
            let back: ProblemDetails = serde_json::from_slice(&body).unwrap();
            assert_eq!(back, problem);
        }
        assert!(spool.scan().unwrap().is_empty());
    }

    #[test]
    fn read_request_skips_a_vanished_file() {
        let (_dir, spool) = temp_spool();
        assert!(read_request(&spool.new_dir().join("gone.json")).is_none());
        let path = spool.submit(b"{\"a\":1}").unwrap();
        let file = read_request(&path).unwrap();
        assert_eq!(file.bytes, b"{\"a\":1}");
        assert!(is_request_name(&file.name));
    }
}
