//! The spool directory on disk, with maildir semantics: producers write `tmp/X` and rename it
//! into `new/`; intake reads files from `new/` and, once their outcome is committed, keeps a copy
//! with every secret redacted in `accepted/` or in `rejected/` beside an `.error.json`, and
//! removes the original. File system only: what a request means, what its kept copy holds and
//! whether it is admitted are decided elsewhere.
//!
//! The file step after the commit, in this order so that a crash at any point is finished by the
//! next scan and never loses or repeats a request: (1) rename `new/<name>` to the hidden
//! `new/.<name>.taken` (from here on the file is committed *and* taken: a scan lists it with
//! [`Spool::unfinished`] and intake redoes the step for its committed outcome); (2) write the
//! sidecar `<copy>.sha256` (hex SHA-256 of the original bytes) and, for a rejected file, the
//! `.error.json`; (3) write the copy; (4) remove `new/.<name>.taken`. Every write is a new file
//! renamed into place, so a reader never sees half a file; the copies and sidecars are the
//! daemon's own files, mode 0640 (group `vnfkeeper` from the setgid directory), or 0600 for a
//! rejected file that could not be redacted.

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

/// The copy of a request file kept in `accepted/` or `rejected/`: the original with every secret
/// replaced by `"***"` (decided by `admission`), readable by group `vnfkeeper` (mode 0640) unless
/// it could not be redacted (not JSON), then owner-only (0600).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeptCopy {
    /// The content written.
    pub bytes: Vec<u8>,
    /// Whether it stays owner-only (0600) because it could not be redacted.
    pub private: bool,
}

impl KeptCopy {
    /// A copy for group `vnfkeeper` (0640).
    pub fn shared(bytes: Vec<u8>) -> Self {
        Self {
            bytes,
            private: false,
        }
    }
    /// A copy for the daemon's user only (0600).
    pub fn private(bytes: Vec<u8>) -> Self {
        Self {
            bytes,
            private: true,
        }
    }
    fn mode(&self) -> u32 {
        if self.private { 0o600 } else { 0o640 }
    }
}

/// Suffix of a request file in `new/` whose outcome is committed and whose file step is under way
/// (`new/.<name>.taken`, hidden from [`Spool::scan`]).
const TAKEN_SUFFIX: &str = ".taken";

/// The hidden name of `name` while its file step is under way.
fn taken_name(name: &str) -> String {
    format!(".{name}{TAKEN_SUFFIX}")
}

/// The request file name of a hidden `.<name>.taken` entry, if `entry` is one.
pub(super) fn untaken_name(entry: &str) -> Option<&str> {
    entry
        .strip_prefix('.')?
        .strip_suffix(TAKEN_SUFFIX)
        .filter(|n| is_request_name(n))
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

    /// Request files whose outcome was committed but whose file step did not finish (a crash or
    /// an I/O error after step 1 of the module's order): the hidden `new/.<name>.taken` entries.
    /// Intake processes them like files in `new/`; their committed outcome says where they go.
    /// Errors: I/O reading `new/`.
    pub fn unfinished(&self) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.new_dir())? {
            let entry = entry?;
            if entry.file_name().to_str().and_then(untaken_name).is_some()
                && entry.file_type()?.is_file()
            {
                out.push(entry.path());
            }
        }
        out.sort();
        Ok(out)
    }

    /// Keeps `kept` for the request file `path` (named `name` in `new/`, or its hidden
    /// `.<name>.taken` when a step is redone) at `dest` and removes the original, in the order of
    /// the module documentation. `sha256` is the hex digest of the original bytes, written as the
    /// sidecar `<copy>.sha256`. A rejected file gets `rejected/<target>` and
    /// `rejected/<target>.error.json`, where `<target>` is `name`, or `<stem>.<n>.json` with the
    /// lowest free `n` when that is taken; a redone step reuses the target whose sidecar holds
    /// `sha256`. The `.error.json` is the committed ProblemDetails, plus `keptCopy` saying that the
    /// copy is owner-only when it could not be redacted. Errors: I/O (the file stays in `new/`,
    /// hidden once step 1 is done, and the next scan redoes the step).
    pub(super) fn place(
        &self,
        path: &Path,
        name: &str,
        dest: &Destination,
        kept: &KeptCopy,
        sha256: &str,
    ) -> io::Result<()> {
        let taken = self.new_dir().join(taken_name(name));
        let redo = path == taken;
        if !redo {
            fs::rename(path, &taken)?;
            crate::failpoint::hit("intake-after-take");
        }
        let mut digest = sha256.as_bytes().to_vec();
        digest.push(b'\n');
        let copy = match dest {
            Destination::Rejected { problem } => {
                let dir = self.rejected_dir();
                let target = rejected_target(&dir, name, redo.then_some(sha256));
                let copy = dir.join(&target);
                write_new(&sidecar(&copy), &digest, 0o640)?;
                let mut body = serde_json::to_value(problem).map_err(io::Error::other)?;
                if kept.private
                    && let serde_json::Value::Object(m) = &mut body
                {
                    m.insert(
                        "keptCopy".into(),
                        format!(
                            "rejected/{target} is readable by the vnfkeeper user only (mode 0600): \
                             it is not JSON, so secrets in it could not be redacted"
                        )
                        .into(),
                    );
                }
                let mut text = serde_json::to_vec_pretty(&body).map_err(io::Error::other)?;
                text.push(b'\n');
                write_new(&dir.join(format!("{target}.error.json")), &text, 0o640)?;
                copy
            }
            _ => {
                let copy = self.path_of(dest, name);
                write_new(&sidecar(&copy), &digest, 0o640)?;
                copy
            }
        };
        write_new(&copy, &kept.bytes, kept.mode())?;
        fs::remove_file(&taken)
    }
}

/// `<copy>.sha256`: the sidecar holding the hex SHA-256 of the original request bytes.
fn sidecar(copy: &Path) -> PathBuf {
    let mut s = copy.as_os_str().to_owned();
    s.push(".sha256");
    PathBuf::from(s)
}

/// The name a rejected file `name` gets in `dir`: the first of `name`, `<stem>.1.json`, … that is
/// free or, when `redo_sha256` is given, whose sidecar already holds that digest.
fn rejected_target(dir: &Path, name: &str, redo_sha256: Option<&str>) -> String {
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let mut target = name.to_owned();
    let mut n = 1;
    loop {
        let copy = dir.join(&target);
        let free = !copy.exists() && !sidecar(&copy).exists();
        let ours = redo_sha256.is_some_and(|sha| {
            fs::read_to_string(sidecar(&copy)).is_ok_and(|s| s.trim_end() == sha)
        });
        if free || ours {
            return target;
        }
        target = format!("{stem}.{n}.json");
        n += 1;
    }
}

/// Writes `bytes` to `path` as a new file of `mode` (whatever the umask) renamed into place, so
/// that a reader sees the old file or the whole new one. The group is the directory's (setgid).
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    f.write_all(bytes)?;
    drop(f);
    fs::rename(&tmp, path)
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
            let kept = KeptCopy::shared(b"{}".to_vec());
            spool
                .place(&path, "r.json", &rejected, &kept, "ab")
                .unwrap();
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

    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn the_kept_copy_replaces_the_original_with_its_mode_and_digest() {
        let (_dir, spool) = temp_spool();
        let path = spool.submit(b"{\"password\": \"hunter2\"}").unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let dest = Destination::Accepted { op: "op1".into() };
        let kept = KeptCopy::shared(b"{\"password\": \"***\"}".to_vec());
        spool.place(&path, &name, &dest, &kept, "cafe").unwrap();
        let copy = spool.accepted_dir().join("op1.json");
        assert_eq!(fs::read(&copy).unwrap(), kept.bytes);
        assert_eq!(mode(&copy), 0o640);
        assert_eq!(fs::read_to_string(sidecar(&copy)).unwrap(), "cafe\n");
        assert_eq!(mode(&sidecar(&copy)), 0o640);
        assert!(!path.exists());
        assert!(spool.unfinished().unwrap().is_empty());
        let names: Vec<_> = fs::read_dir(spool.accepted_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");

        // Not JSON: kept owner-only, and the explanation says so.
        let path = spool.submit(b"\xff password=hunter2").unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let problem = ProblemDetails::new(400, "not UTF-8", Vec::new());
        let dest = Destination::Rejected { problem };
        let kept = KeptCopy::private(b"\xff password=hunter2".to_vec());
        spool.place(&path, &name, &dest, &kept, "beef").unwrap();
        let copy = spool.rejected_dir().join(&name);
        assert_eq!(mode(&copy), 0o600);
        let error = spool.rejected_dir().join(format!("{name}.error.json"));
        assert_eq!(mode(&error), 0o640);
        let text = fs::read_to_string(&error).unwrap();
        assert!(text.contains("keptCopy") && text.contains("0600"), "{text}");
        assert!(!text.contains("hunter2"));
    }

    #[test]
    fn a_step_interrupted_after_the_file_was_taken_is_finished_once() {
        let (_dir, spool) = temp_spool();
        let problem = ProblemDetails::new(400, "invalid request", Vec::new());
        let dest = Destination::Rejected { problem };
        let kept = KeptCopy::shared(b"{}".to_vec());
        // An earlier, different rejected file of the same name.
        let first = spool.submit(b"{}").unwrap();
        let named = spool.new_dir().join("r.json");
        fs::rename(&first, &named).unwrap();
        spool.place(&named, "r.json", &dest, &kept, "0001").unwrap();
        // Crash after step 1 and the sidecar: the hidden file and a sidecar without its copy.
        let second = spool.submit(b"{}").unwrap();
        let taken = spool.new_dir().join(taken_name("r.json"));
        fs::rename(&second, &taken).unwrap();
        let copy = spool.rejected_dir().join("r.1.json");
        fs::write(sidecar(&copy), "0002\n").unwrap();
        assert_eq!(spool.unfinished().unwrap(), std::slice::from_ref(&taken));
        assert!(spool.scan().unwrap().is_empty());
        spool.place(&taken, "r.json", &dest, &kept, "0002").unwrap();
        assert!(copy.exists() && !spool.rejected_dir().join("r.2.json").exists());
        assert!(spool.unfinished().unwrap().is_empty());
        assert_eq!(untaken_name(".r.json.taken"), Some("r.json"));
        assert_eq!(untaken_name(".x.taken"), None);
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
