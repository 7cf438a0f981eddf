//! The spool directory on disk, with maildir semantics: producers write `tmp/X` and rename it
//! into `new/`; intake reads files from `new/` and, once their outcome is committed, keeps a copy
//! with every secret redacted in `accepted/` or in `rejected/` beside an `.error.json`, and
//! removes the original. File system only: what a request means, what its kept copy holds and
//! whether it is admitted are decided elsewhere.
//!
//! No directory entry is trusted: entries are looked at with `lstat` (a symbolic link is never
//! followed), opened with `O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC|O_NOCTTY`, checked with `fstat` to be
//! a regular file and read up to the size limit + 1 byte (open(2), fstat(2)). Anything else is
//! refused: moved (the entry itself, never what a link points at) to `rejected/` beside an
//! `.error.json` naming the reason, or to `quarantine/` when that cannot be done. A FIFO, socket,
//! device node or file with more than one hard link is not moved but removed, and kept in
//! `rejected/` as an inert record of what it was.
//!
//! The file step after the commit, in this order so that a crash at any point is finished by the
//! next scan and never loses or repeats a request: (1) rename `new/<name>` to the hidden
//! `new/.<name>.taken` (from here on the file is committed *and* taken: a scan lists it with
//! [`Spool::unfinished`] and intake redoes the step for its committed outcome); (2) write the
//! sidecar `<copy>.sha256` (the keyed digest of the original bytes, as the `intake` row holds
//! it: `hmac-sha256:<hex>`, see `store::SecretsKey::digest`) and, for a rejected file, the
//! `.error.json`; (3) write the copy; (4) remove `new/.<name>.taken`. Every write is a new file
//! renamed into place, so a reader never sees half a file; the copies and sidecars are the
//! daemon's own files, mode 0640 (group `vnfkeeper` from the setgid directory), or 0600 for a
//! rejected file that could not be redacted.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read as _, Write};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{
    DirEntryExt as _, FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sha2::{Digest as _, Sha256};

use vnfkeeper_core::model::ProblemDetails;
use vnfkeeper_core::wire::TaskOperation;

/// The spool's directories under its root.
#[derive(Debug, Clone)]
pub struct Spool {
    root: PathBuf,
    /// Entries of `new/` already logged as not taken (ignored names, entries that could be
    /// neither rejected nor quarantined), so that each is logged once, not at every rescan.
    /// Pruned by [`Spool::scan`] to the entries still present.
    reported: Arc<Mutex<HashSet<EntryKey>>>,
}

/// A directory entry of `new/`: its inode number and its file name (an inode reused under the
/// same name is a different key only when the number differs; good enough for "log once").
type EntryKey = (u64, OsString);

/// A request file's bytes as read from `new/`.
pub(super) struct RequestFile {
    /// Path in `new/`.
    pub path: PathBuf,
    /// File name in `new/`, as [`display_name`] shows it.
    pub name: String,
    /// The whole content, at most the limit given to [`read_request`].
    pub bytes: Vec<u8>,
    /// The file's owner (`fstat` on the descriptor read): who submitted it.
    pub owner_uid: u32,
    /// What the submitting command said about it ([`SubmitLabel`]), if anything.
    pub label: Option<SubmitLabel>,
}

/// The extended attribute `vnfkeeper submit` and the task verbs set on a spool file: a
/// [`SubmitLabel`] as JSON, at most [`LABEL_MAX`] bytes.
pub const LABEL_XATTR: &std::ffi::CStr = c"user.vnfkeeper.submit";
/// The largest [`LABEL_XATTR`] value intake reads.
pub const LABEL_MAX: usize = 1024;

/// What the CLI says about a spool file it submits, beyond what `fstat` tells: the name of the
/// file the operator submitted and, when it runs as root through sudo, `SUDO_USER`. Claims of
/// the file's owner: intake records `sudoUser` only for a file owned by root.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitLabel {
    /// The operator's file name (its last component), for `vnfkeeper submit FILE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `SUDO_USER` of the submitting command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sudo_user: Option<String>,
}

impl SubmitLabel {
    /// The label of the submitting process: `file` and, when it runs as uid 0 with a plain
    /// `SUDO_USER` (letters, digits, `._-`), that user.
    pub fn of_caller(file: Option<&Path>) -> Self {
        let sudo_user = std::env::var("SUDO_USER").ok().filter(|s| {
            rustix::process::getuid().is_root()
                && !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        });
        Self {
            file: file.and_then(Path::file_name).map(display_name),
            sudo_user,
        }
    }

    /// Reads the label of the open file `fd`: `None` when it has none, it is larger than
    /// [`LABEL_MAX`] or not a label; names are escaped as [`display_name`] does and cut to 255
    /// characters.
    fn read(fd: std::os::fd::BorrowedFd<'_>) -> Option<Self> {
        let mut buf = vec![0u8; LABEL_MAX];
        let n = rustix::fs::fgetxattr(fd, LABEL_XATTR, &mut buf).ok()?;
        let label: Self = serde_json::from_slice(buf.get(..n)?).ok()?;
        let clean =
            |s: String| -> String { display_name(OsStr::new(&s)).chars().take(255).collect() };
        Some(Self {
            file: label.file.map(clean),
            sudo_user: label.sudo_user.map(clean),
        })
    }
}

/// A spool entry intake will not read, and why.
#[derive(Debug)]
pub(super) struct Refused {
    /// Path in `new/`.
    pub path: PathBuf,
    /// File name in `new/`, as [`display_name`] shows it.
    pub name: String,
    /// Why: written as the `.error.json` body when it is rejected.
    pub problem: ProblemDetails,
}

/// What [`read_request`] found at a path in `new/`.
pub(super) enum Read {
    /// A regular file within the limit, read whole.
    File(RequestFile),
    /// Something intake must not take; reject it.
    Refused(Refused),
    /// Vanished (another batch moved it) or a transient error (logged): the next scan looks again.
    Skip,
}

/// Where a refused entry went (see [`Spool::refuse`]).
#[derive(Debug)]
pub(super) enum RefusedTo {
    /// `rejected/<name>` beside its `.error.json`.
    Rejected,
    /// `quarantine/<name>`, without an error file: moving it to `rejected/` failed with `error`.
    Quarantined {
        /// Its path under `quarantine/`.
        to: PathBuf,
        /// Why it could not be rejected.
        error: io::Error,
    },
    /// Nowhere: it stays in `new/` (logged once; the next scan tries again).
    Stuck,
}

/// An entry of `new/` found by [`Spool::scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A regular file within the size limit: taken once it stops changing (the caller compares
    /// two looks) or when inotify says it was renamed in or closed after writing.
    Regular(FileLook),
    /// Not a regular file (symbolic link, FIFO, socket, device, directory) or over the size
    /// limit: to be refused at once by the next batch.
    Refuse,
}

/// What `lstat` says about a regular file, to tell whether it changed between two looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLook {
    /// Inode number (`st_ino`).
    pub ino: u64,
    /// Size in bytes (`st_size`).
    pub size: u64,
    /// Modification time (`st_mtime` with nanoseconds).
    pub modified: SystemTime,
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
pub(super) fn taken_name(name: &str) -> String {
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
            reported: Arc::default(),
        };
        spool.create_dirs()?;
        Ok(spool)
    }

    /// Creates whichever of `tmp/`, `new/`, `accepted/` and `rejected/` (and the root) is
    /// missing, with the modes [`Spool::open`] gives them; `true` when one was. Used again when
    /// the spool or `new/` was removed while the daemon runs. Errors: I/O; one of the four that
    /// is a symbolic link (never followed: intake would read and write wherever it points) or
    /// not a directory.
    pub fn create_dirs(&self) -> io::Result<bool> {
        let spool = self;
        let mut created = false;
        for (dir, mode) in [
            (spool.tmp_dir(), 0o2770),
            (spool.new_dir(), 0o2770),
            (spool.accepted_dir(), 0o2750),
            (spool.rejected_dir(), 0o2750),
        ] {
            match fs::symlink_metadata(&dir) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "{}: a symbolic link; the spool's directories must be directories \
                             (a link is never followed)",
                            dir.display()
                        ),
                    ));
                }
                Ok(m) if !m.is_dir() => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{}: not a directory", dir.display()),
                    ));
                }
                _ => {}
            }
            if !dir.is_dir() {
                fs::create_dir_all(&dir)?;
                set_mode(&dir, mode)?;
                created = true;
            }
        }
        Ok(created)
    }

    /// The spool's root directory.
    pub fn root(&self) -> &Path {
        &self.root
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
    /// Entries that could not be moved to `rejected/` (created 2750 when first needed).
    pub fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }

    /// The entries of `new/` intake should look at, by `lstat` (never following a link): every
    /// entry with a request name ([`is_request_name`]), regular files oldest modification first
    /// (then by name), then the entries to refuse. Dot files are skipped silently (in progress,
    /// or the trigger files of `reconcile --now`); any other name is left where it is and logged
    /// once as not a request. `limit` is the size limit in bytes. Errors: I/O on `new/` itself.
    pub fn scan(&self, limit: u64) -> io::Result<Vec<(PathBuf, Found)>> {
        let mut regular = Vec::new();
        let mut refuse = Vec::new();
        let mut present = HashSet::new();
        for entry in fs::read_dir(self.new_dir())? {
            let entry = entry?;
            let os_name = entry.file_name();
            let key = (entry.ino(), os_name.clone());
            let name = display_name(&os_name);
            if name.starts_with('.') {
                continue;
            }
            if !is_request_name(&name) {
                if self.report_once(key.clone()) {
                    tracing::warn!(file = %name, "spool entry in new/ ignored: not a request file name (requests end in .json; dot files are in progress)");
                }
                present.insert(key);
                continue;
            }
            present.insert(key);
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() && meta.len() <= limit {
                let look = FileLook {
                    ino: meta.ino(),
                    size: meta.len(),
                    modified: meta.modified()?,
                };
                regular.push((entry.path(), Found::Regular(look)));
            } else {
                refuse.push((entry.path(), Found::Refuse));
            }
        }
        self.lock_reported().retain(|k| present.contains(k));
        let modified = |f: &Found| match f {
            Found::Regular(look) => Some(look.modified),
            Found::Refuse => None,
        };
        regular.sort_by(|a, b| {
            modified(&a.1)
                .cmp(&modified(&b.1))
                .then_with(|| a.0.cmp(&b.0))
        });
        refuse.sort_by(|a, b| a.0.cmp(&b.0));
        regular.extend(refuse);
        Ok(regular)
    }

    /// Moves a refused entry (the entry itself: a link is moved as a link) to `rejected/` beside
    /// its `.error.json`; when that fails (e.g. no space for the error file), to `quarantine/`;
    /// when that fails too it stays in `new/` and is logged once.
    pub(super) fn refuse(&self, r: &Refused) -> RefusedTo {
        let error = match self.reject_entry(&r.path, &r.name, &r.problem) {
            Ok(()) => return RefusedTo::Rejected,
            Err(e) => e,
        };
        match self.quarantine(&r.path, &r.name) {
            Ok(to) => RefusedTo::Quarantined { to, error },
            Err(e) => {
                if self.first_report(&r.path) {
                    tracing::error!(file = %r.name, reason = %r.problem.detail, error = %error, quarantine_error = %e,
                        "spool entry refused but could be neither rejected ({error}) nor quarantined ({e}); it stays in new/");
                }
                RefusedTo::Stuck
            }
        }
    }

    /// Moves the refused entry `path` itself (never what a link points at; it was never read, so
    /// there is nothing to redact) to `rejected/<target>` after writing
    /// `rejected/<target>.error.json`, where `<target>` is `name` or `<stem>.<n>.json`, the lowest
    /// free `n`. The error file comes first, so a crash in between leaves the entry in `new/`.
    /// Errors: I/O (the entry stays in `new/`).
    ///
    /// A FIFO, socket or device node, and a regular file with more than one hard link, are not
    /// moved: `rejected/<target>` is then an inert record of the entry (a 0640 JSON file, see
    /// [`inert_record`]) and the entry is removed from `new/`, so that an operator's
    /// `grep -r` in `rejected/` cannot hang on a FIFO or read a device, and no second name of a
    /// file outside the spool is kept. The error file's `keptCopy` says so.
    fn reject_entry(&self, path: &Path, name: &str, problem: &ProblemDetails) -> io::Result<()> {
        let dir = self.rejected_dir();
        let target = free_name(&dir, name);
        let record = inert_record(path)?;
        let mut body = serde_json::to_value(problem).map_err(io::Error::other)?;
        if record.is_some()
            && let serde_json::Value::Object(m) = &mut body
        {
            m.insert(
                "keptCopy".into(),
                format!(
                    "rejected/{target} is a record of the entry (its type, mode, owner, inode, \
                     links, size, device numbers), not the entry itself, which was removed: a FIFO \
                     or device would block or feed readers, and a second name of a file elsewhere \
                     is not kept"
                )
                .into(),
            );
        }
        let mut text = serde_json::to_vec_pretty(&body).map_err(io::Error::other)?;
        text.push(b'\n');
        write_new(&dir.join(format!("{target}.error.json")), &text, 0o640)?;
        match record {
            Some(record) => {
                write_new(&dir.join(&target), &record, 0o640)?;
                fs::remove_file(path)
            }
            None => fs::rename(path, dir.join(&target)),
        }
    }

    /// Moves `path` to `quarantine/<name>` (or `<stem>.<n>.json`, the lowest free `n`).
    fn quarantine(&self, path: &Path, name: &str) -> io::Result<PathBuf> {
        let dir = self.quarantine_dir();
        if !dir.is_dir() {
            fs::create_dir_all(&dir)?;
            set_mode(&dir, 0o2750)?;
        }
        let target = dir.join(free_name(&dir, name));
        fs::rename(path, &target)?;
        Ok(target)
    }

    /// Whether a problem with the entry at `path` in `new/` should be logged: `true` the first
    /// time it is asked about that entry (by inode number and name), `false` until the entry
    /// has left `new/` (see [`Spool::scan`]).
    pub(super) fn first_report(&self, path: &Path) -> bool {
        let ino = fs::symlink_metadata(path).map_or(0, |m| m.ino());
        self.report_once((ino, path.file_name().unwrap_or_default().to_owned()))
    }

    /// Records `key` as reported; `true` the first time.
    fn report_once(&self, key: EntryKey) -> bool {
        self.lock_reported().insert(key)
    }

    fn lock_reported(&self) -> std::sync::MutexGuard<'_, HashSet<EntryKey>> {
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Submits `bytes` the maildir way: writes `tmp/<unique>.json` with mode 0640 whatever the
    /// umask (the daemon reads it through the spool's group `vnfkeeper`; others cannot, as it may
    /// hold passwords), syncs it, renames it into `new/`. Returns the path in `new/`. Errors: I/O
    /// (e.g. no write permission on the spool).
    pub fn submit(&self, bytes: &[u8]) -> io::Result<PathBuf> {
        self.submit_labelled(bytes, None)
    }

    /// [`Self::submit`], with `label` ([`SubmitLabel`]) set as the extended attribute
    /// [`LABEL_XATTR`] of the file before it is renamed into `new/`. A file system without user
    /// extended attributes (`ENOTSUP`) gets none: the label is best effort, the request is not.
    pub fn submit_labelled(
        &self,
        bytes: &[u8],
        label: Option<&SubmitLabel>,
    ) -> io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt as _;
        let name = unique_name();
        let tmp = self.tmp_dir().join(&name);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o640))?;
        if let Some(label) = label {
            let value = serde_json::to_vec(label).map_err(io::Error::other)?;
            match rustix::fs::fsetxattr(&f, LABEL_XATTR, &value, rustix::fs::XattrFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOTSUP) => {}
                Err(e) => return Err(e.into()),
            }
        }
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

    /// Whether something (a dangling link included) already exists at the path a file named
    /// `name` has at `dest`.
    pub(super) fn holds(&self, dest: &Destination, name: &str) -> bool {
        occupied(&self.path_of(dest, name))
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
    /// the module documentation. `digest` is the keyed digest of the original bytes, written as
    /// the sidecar `<copy>.sha256`. A rejected file gets `rejected/<target>` and
    /// `rejected/<target>.error.json`, where `<target>` is `name`, or `<stem>.<n>.json` with the
    /// lowest free `n` when that is taken; a redone step reuses the target whose sidecar holds
    /// `digest`. The `.error.json` is the committed ProblemDetails, plus `keptCopy` saying that the
    /// copy is owner-only when it could not be redacted. Errors: I/O (the file stays in `new/`,
    /// hidden once step 1 is done, and the next scan redoes the step).
    pub(super) fn place(
        &self,
        path: &Path,
        name: &str,
        dest: &Destination,
        kept: &KeptCopy,
        digest: &str,
    ) -> io::Result<()> {
        let taken = self.new_dir().join(taken_name(name));
        let redo = path == taken;
        if !redo {
            fs::rename(path, &taken)?;
            crate::failpoint::hit("intake-after-take");
        }
        let sha256 = digest;
        let mut digest = digest.as_bytes().to_vec();
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

/// `<copy>.sha256`: the sidecar holding the keyed digest of the original request bytes.
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
        let free = !occupied(&copy) && !occupied(&sidecar(&copy));
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
pub(super) fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let create = || {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
    };
    // A temporary file left by an interrupted earlier write is replaced (not looked for first:
    // one directory operation less per file in the common case).
    let mut f = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            create()?
        }
        other => other?,
    };
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    f.write_all(bytes)?;
    drop(f);
    fs::rename(&tmp, path)
}

/// `name`, or `<stem>.<n>.json` with the lowest `n` from 1 that names nothing in `dir` (a
/// dangling link counts as something).
fn free_name(dir: &Path, name: &str) -> String {
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let mut target = name.to_owned();
    let mut n = 1;
    while occupied(&dir.join(&target)) {
        target = format!("{stem}.{n}.json");
        n += 1;
    }
    target
}

/// Whether `path` names an entry, without following a link (`Path::exists` says no for a
/// dangling link, and a rename would then replace it).
fn occupied(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Whether a displayed name ([`display_name`]) is a request file intake should look at.
pub fn is_request_name(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".json")
}

/// Longest displayed name kept whole, in bytes; longer ones are shortened (see [`display_name`])
/// so that `rejected/<name>.<n>.json.error.json` stays within `NAME_MAX` (255 bytes).
const MAX_DISPLAY_NAME: usize = 200;

/// A file name as logs, error files, the `intake` table and `rejected/` show it: printable
/// characters as they are; `\` doubled; control and other non-printable characters escaped as
/// Rust's `char::escape_debug` does (a newline is `\n`, so it cannot start a forged log line);
/// bytes that are not UTF-8 as `\xNN`. The mapping is one-to-one, so two names never show the
/// same. A result over 200 bytes is cut at a character boundary and ends with `~` and the first
/// 16 hex digits of the SHA-256 of the raw name (and `.json` when the name ended so).
pub fn display_name(name: &OsStr) -> String {
    let mut out = String::with_capacity(name.len());
    for chunk in name.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' | '\'' => out.push(c),
                c if c.is_control() || c.escape_debug().nth(1).is_some() => {
                    out.extend(c.escape_debug());
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if out.len() <= MAX_DISPLAY_NAME {
        return out;
    }
    let suffix = if out.ends_with(".json") { ".json" } else { "" };
    let mut cut = MAX_DISPLAY_NAME - 32;
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    let hex = vnfkeeper_core::digest::hex(&Sha256::digest(name.as_bytes())[..8]);
    format!("{}~{hex}{suffix}", &out[..cut])
}

/// The inert record kept in `rejected/` instead of the entry at `path` when moving the entry
/// itself would keep something live there: a FIFO, socket, character or block device, or a
/// regular file with more than one hard link. The record is pretty JSON: `entry` (what it was),
/// `mode` (octal permission bits), `uid`, `gid`, `inode`, `links`, `size` and, for a device,
/// `major` and `minor`. `None` for anything else (moved as it is: a symbolic link stays a link,
/// never followed). By `lstat`. Errors: I/O.
fn inert_record(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let m = fs::symlink_metadata(path)?;
    let t = m.file_type();
    let device = t.is_char_device() || t.is_block_device();
    let inert = t.is_fifo() || t.is_socket() || device || (t.is_file() && m.nlink() > 1);
    if !inert {
        return Ok(None);
    }
    let entry = if t.is_file() {
        format!("a regular file with {} hard links", m.nlink())
    } else {
        kind_reason(t)
            .split(',')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let mut record = serde_json::json!({
        "entry": entry,
        "mode": format!("{:04o}", m.mode() & 0o7777),
        "uid": m.uid(),
        "gid": m.gid(),
        "inode": m.ino(),
        "links": m.nlink(),
        "size": m.size(),
    });
    if device {
        record["major"] = rustix::fs::major(m.rdev()).into();
        record["minor"] = rustix::fs::minor(m.rdev()).into();
    }
    let mut text = serde_json::to_vec_pretty(&record).map_err(io::Error::other)?;
    text.push(b'\n');
    Ok(Some(text))
}

/// What a non-regular entry is, for its refusal reason.
fn kind_reason(t: fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link; spool entries must be regular files"
    } else if t.is_dir() {
        "a directory, not a regular file"
    } else if t.is_fifo() {
        "a FIFO, not a regular file"
    } else if t.is_socket() {
        "a socket, not a regular file"
    } else if t.is_char_device() {
        "a character device, not a regular file"
    } else if t.is_block_device() {
        "a block device, not a regular file"
    } else {
        "not a regular file"
    }
}

/// Reads the entry at `path` in `new/` if it is a regular file of at most `limit` bytes:
/// `lstat` first (a link, FIFO, socket, device or directory is refused without being opened),
/// then `open` with `O_NOFOLLOW|O_NONBLOCK|O_NOCTTY` (and `O_CLOEXEC`, which std always sets),
/// `fstat` on the descriptor (the entry may have been swapped since), and at most `limit` + 1
/// bytes read. Refused: anything not a regular file, a file over `limit` bytes (by `fstat` or
/// by what could be read), a file with more than one hard link (a second name of a file
/// elsewhere), a file vnfkeeper may not read (`EACCES`/`EPERM`). Skipped (the next
/// scan looks again): a vanished entry, any other I/O error (logged).
pub(super) fn read_request(path: &Path, limit: u64) -> Read {
    let Some(os_name) = path.file_name() else {
        return Read::Skip;
    };
    let name = display_name(os_name);
    let refuse = |status: u16, reason: String| {
        Read::Refused(Refused {
            path: path.to_path_buf(),
            name: name.clone(),
            problem: ProblemDetails::new(
                status,
                format!("spool entry not taken: {reason}"),
                vec![vnfkeeper_core::model::FieldProblem {
                    pointer: String::new(),
                    reason,
                }],
            ),
        })
    };
    let skip = |what: &str, e: &io::Error| {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(file = %name, error = %e, "cannot {what} request file ({e}); will retry");
        }
        Read::Skip
    };
    match fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return refuse(400, kind_reason(m.file_type()).into()),
        Ok(_) => {}
        Err(e) => return skip("look at", &e),
    }
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        // Swapped for a link between lstat and open.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return refuse(400, kind_reason_of_link());
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return refuse(403, format!("vnfkeeper may not read it ({e})"));
        }
        Err(e) => return skip("open", &e),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return skip("fstat", &e),
    };
    if !meta.file_type().is_file() {
        return refuse(400, kind_reason(meta.file_type()).into());
    }
    if meta.nlink() > 1 {
        return refuse(
            400,
            format!(
                "a file with {} hard links; spool entries must have one (a second name of a file \
                 elsewhere is never read)",
                meta.nlink()
            ),
        );
    }
    if meta.len() > limit {
        return refuse(
            413,
            format!("{} bytes, over the limit of {limit}", meta.len()),
        );
    }
    let label = {
        use std::os::fd::AsFd as _;
        SubmitLabel::read(file.as_fd())
    };
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    if let Err(e) = file.take(limit + 1).read_to_end(&mut bytes) {
        return skip("read", &e);
    }
    if bytes.len() as u64 > limit {
        return refuse(
            413,
            format!("more than {limit} bytes (it grew while read), over the limit of {limit}"),
        );
    }
    Read::File(RequestFile {
        path: path.to_path_buf(),
        name,
        bytes,
        owner_uid: meta.uid(),
        label,
    })
}

fn kind_reason_of_link() -> String {
    "a symbolic link; spool entries must be regular files".to_owned()
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
        assert!(spool.scan(100).unwrap().is_empty());
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
        assert!(spool.scan(1 << 20).unwrap().is_empty());
        spool.place(&taken, "r.json", &dest, &kept, "0002").unwrap();
        assert!(copy.exists() && !spool.rejected_dir().join("r.2.json").exists());
        assert!(spool.unfinished().unwrap().is_empty());
        assert_eq!(untaken_name(".r.json.taken"), Some("r.json"));
        assert_eq!(untaken_name(".x.taken"), None);
    }

    #[test]
    fn read_request_skips_a_vanished_file_and_reads_a_regular_one_whole() {
        let (_dir, spool) = temp_spool();
        let gone = read_request(&spool.new_dir().join("gone.json"), 100);
        assert!(matches!(gone, Read::Skip));
        let path = spool.submit(b"{\"a\":1}").unwrap();
        let Read::File(file) = read_request(&path, 100) else {
            panic!("a regular file was not read")
        };
        assert_eq!(file.bytes, b"{\"a\":1}");
        assert!(is_request_name(&file.name));
    }

    /// The reason a refused entry at `path` gets (panics when it is not refused).
    fn refusal(path: &Path, limit: u64) -> (u16, String) {
        match read_request(path, limit) {
            Read::Refused(r) => {
                assert_eq!(r.path, path);
                (r.problem.status, r.problem.detail)
            }
            Read::File(_) => panic!("{} was read", path.display()),
            Read::Skip => panic!("{} was skipped", path.display()),
        }
    }

    #[test]
    fn entries_that_are_not_regular_files_are_refused_without_being_read() {
        let (dir, spool) = temp_spool();
        let new = spool.new_dir();
        let fifo = new.join("fifo.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening a FIFO for reading without O_NONBLOCK would block this test until a writer came.
        assert_eq!(
            refusal(&fifo, 100),
            (
                400,
                "spool entry not taken: a FIFO, not a regular file".into()
            )
        );

        let sock = new.join("sock.json");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(
            refusal(&sock, 100)
                .1
                .ends_with("a socket, not a regular file")
        );

        let sub = new.join("dir.json");
        fs::create_dir(&sub).unwrap();
        assert!(
            refusal(&sub, 100)
                .1
                .ends_with("a directory, not a regular file")
        );

        let target = dir.path().join("valid.json");
        fs::write(&target, b"{}").unwrap();
        for (name, to) in [
            ("zero.json", Path::new("/dev/zero")),
            ("ok.json", target.as_path()),
        ] {
            let link = new.join(name);
            std::os::unix::fs::symlink(to, &link).unwrap();
            let (status, detail) = refusal(&link, 100);
            assert_eq!(status, 400);
            assert!(
                detail.ends_with("a symbolic link; spool entries must be regular files"),
                "{detail}"
            );
        }
    }

    #[test]
    fn size_is_checked_by_fstat_before_reading_and_at_most_limit_plus_one_byte_is_read() {
        let (_dir, spool) = temp_spool();
        let big = spool.new_dir().join("big.json");
        // 3 GiB sparse: it costs no disk, and reading it whole would cost 3 GiB of memory.
        fs::File::create(&big).unwrap().set_len(3 << 30).unwrap();
        let (status, detail) = refusal(&big, 1 << 20);
        assert_eq!(status, 413);
        assert!(
            detail.ends_with("3221225472 bytes, over the limit of 1048576"),
            "{detail}"
        );

        let at = spool.new_dir().join("at.json");
        fs::write(&at, [b' '; 10]).unwrap();
        assert!(matches!(read_request(&at, 10), Read::File(f) if f.bytes.len() == 10));
        assert!(refusal(&at, 9).1.ends_with("10 bytes, over the limit of 9"));
    }

    #[test]
    fn a_refused_link_is_moved_itself_with_its_reason_and_never_replaces_another_entry() {
        let (dir, spool) = temp_spool();
        let target = dir.path().join("secret");
        fs::write(&target, b"do not touch").unwrap();
        // A dangling link already in rejected/ must not be replaced by the next one's move.
        std::os::unix::fs::symlink("/nonexistent", spool.rejected_dir().join("l.json")).unwrap();
        let link = spool.new_dir().join("l.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let Read::Refused(r) = read_request(&link, 100) else {
            panic!("link not refused")
        };
        assert!(matches!(spool.refuse(&r), RefusedTo::Rejected));
        let moved = spool.rejected_dir().join("l.1.json");
        assert_eq!(fs::read_link(&moved).unwrap(), target);
        assert_eq!(
            fs::read_link(spool.rejected_dir().join("l.json")).unwrap(),
            Path::new("/nonexistent")
        );
        assert_eq!(fs::read(&target).unwrap(), b"do not touch");
        let err: ProblemDetails = serde_json::from_slice(
            &fs::read(spool.rejected_dir().join("l.1.json.error.json")).unwrap(),
        )
        .unwrap();
        assert!(err.detail.contains("symbolic link"), "{}", err.detail);
        assert!(fs::symlink_metadata(&link).is_err());
    }

    #[test]
    fn an_entry_that_cannot_be_rejected_is_quarantined_or_else_stays() {
        let (_dir, spool) = temp_spool();
        // rejected/ replaced by a file: the error file cannot be written there.
        fs::remove_dir(spool.rejected_dir()).unwrap();
        fs::write(spool.rejected_dir(), b"").unwrap();
        let sub = spool.new_dir().join("d.json");
        fs::create_dir(&sub).unwrap();
        let Read::Refused(r) = read_request(&sub, 100) else {
            panic!("directory not refused")
        };
        let RefusedTo::Quarantined { to, .. } = spool.refuse(&r) else {
            panic!("not quarantined")
        };
        assert_eq!(to, spool.quarantine_dir().join("d.json"));
        assert!(to.is_dir() && !sub.exists());

        // quarantine/ unusable too: the entry stays where it is.
        fs::remove_dir(&to).unwrap();
        fs::remove_dir(spool.quarantine_dir()).unwrap();
        fs::write(spool.quarantine_dir(), b"").unwrap();
        fs::create_dir(&sub).unwrap();
        assert!(matches!(spool.refuse(&r), RefusedTo::Stuck));
        assert!(sub.is_dir());
    }

    #[test]
    fn scan_looks_without_following_links_and_skips_dot_files_and_other_names() {
        let (_dir, spool) = temp_spool();
        let new = spool.new_dir();
        fs::write(new.join("a.json"), b"{}").unwrap();
        fs::write(new.join(".in-progress.json"), b"{").unwrap();
        fs::write(new.join("notes.txt"), b"").unwrap();
        std::os::unix::fs::symlink("/dev/zero", new.join("z.json")).unwrap();
        fs::File::create(new.join("huge.json"))
            .unwrap()
            .set_len(101)
            .unwrap();
        let found = spool.scan(100).unwrap();
        let names: Vec<_> = found
            .iter()
            .map(|(p, f)| {
                (
                    p.file_name().unwrap().to_str().unwrap(),
                    matches!(f, Found::Regular(_)),
                )
            })
            .collect();
        assert_eq!(
            names,
            [("a.json", true), ("huge.json", false), ("z.json", false)]
        );
        let Found::Regular(look) = &found[0].1 else {
            unreachable!()
        };
        assert_eq!(look.size, 2);
    }

    #[test]
    fn displayed_names_escape_control_characters_and_keep_distinct_names_distinct() {
        use std::os::unix::ffi::OsStrExt as _;
        let show = |b: &[u8]| display_name(OsStr::from_bytes(b));
        assert_eq!(show(b"a\nb.json"), "a\\nb.json");
        assert!(!show(b"x\n\r\x1b[1m.json").contains(['\n', '\r', '\x1b']));
        assert_eq!(show(b"caf\xc3\xa9.json"), "caf\u{e9}.json");
        let (ff, fe) = (show(b"\xff.json"), show(b"\xfe.json"));
        assert_eq!((ff.as_str(), fe.as_str()), ("\\xff.json", "\\xfe.json"));
        // A backslash is doubled, so a literal "\\xff" cannot pass for the byte 0xff.
        assert_eq!(show(b"\\xff.json"), "\\\\xff.json");
        assert_ne!(show(b"\\xff.json"), ff);
        // Long names are cut but stay distinct and keep their extension.
        let long_a = show(
            &[b'a'; 250]
                .iter()
                .chain(b".json")
                .copied()
                .collect::<Vec<_>>(),
        );
        let long_b = show(
            &[b'a'; 251]
                .iter()
                .chain(b".json")
                .copied()
                .collect::<Vec<_>>(),
        );
        assert!(long_a.len() <= MAX_DISPLAY_NAME && long_a.ends_with(".json"));
        assert_ne!(long_a, long_b);
    }
}
