//! VNF package snapshots: at intake the operator's package (a directory or a CSAR `.zip`) is read
//! once, safely, checked, and copied into the package store of the state directory,
//! content-addressed:
//!
//! ```text
//! <store>/sha256/<digest>/<package-relative files>   dirs 0750, files 0640, written once
//! <store>/tmp/<uuid>/                                a snapshot being written (renamed when complete)
//! ```
//!
//! `<digest>` is [`PackageFiles::digest`]. The operation records the digest and the snapshot's
//! path; the engine and reconcile read only that copy, so a package changed or swapped after
//! acceptance is never used. A snapshot is written to `tmp/`, loaded and checked there, and
//! renamed into place in one step; a second request with the same files finds it and writes
//! nothing (deduplicated).
//!
//! Reading the operator's directory never follows a symbolic link: every component below the
//! package root is opened with `O_NOFOLLOW` relative to its parent's descriptor (`openat`), its
//! type checked with `fstat` after `lstat`, and only directories and regular files are taken;
//! a symbolic link, FIFO, socket or device anywhere in the package refuses it. Sizes and counts
//! are bounded by [`Limits`] while reading (a file is read up to its limit + 1 byte).

use std::collections::HashMap;
use std::ffi::CStr;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};

use vnfkeeper_core::package::{
    Limits, PackageDigest, PackageFiles, Snapshot, VnfPackage, Vnfd, csar,
};

/// Deepest directory nesting read inside a package.
const MAX_DEPTH: usize = 32;

/// VNFDs of snapshots already loaded, by digest: a digest names one content, so its VNFD never
/// changes and the YAML is parsed once per process, not once per request (the intake benchmark
/// sends thousands of INSTANTIATEs naming one package). At most [`VNFD_CACHE`] entries.
static VNFDS: LazyLock<Mutex<HashMap<PackageDigest, Arc<Vnfd>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Most VNFDs kept in [`VNFDS`]; the cache is emptied when full.
const VNFD_CACHE: usize = 64;

fn cached(digest: PackageDigest) -> Option<Arc<Vnfd>> {
    VNFDS.lock().ok()?.get(&digest).cloned()
}

fn remember(digest: PackageDigest, vnfd: Arc<Vnfd>) {
    if let Ok(mut m) = VNFDS.lock() {
        if m.len() >= VNFD_CACHE {
            m.clear();
        }
        m.insert(digest, vnfd);
    }
}

/// Why a package could not be snapshotted.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The operator's package is unsafe, too large, inconsistent or not a VNF package: the
    /// request is rejected (422) with this reason.
    #[error("{0}")]
    Package(String),
    /// The package store could not be written (disk full, permissions): not the request's fault.
    #[error("cannot write the package store {dir}: {source}")]
    Store {
        /// The store directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
}

/// Why a snapshot the engine is about to use is refused ([`verify`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The snapshot directory cannot be read as a package (missing, unsafe entry, too large).
    #[error("VNF package snapshot {}: {reason}", dir.display())]
    Unreadable {
        /// The snapshot directory.
        dir: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// Its files are not those accepted: a file was edited, added or removed since.
    #[error(
        "VNF package snapshot {} changed since acceptance: its files have digest {actual}, the operation recorded {recorded}",
        dir.display()
    )]
    Changed {
        /// The snapshot directory.
        dir: PathBuf,
        /// The digest of its files now.
        actual: PackageDigest,
        /// The digest the operation recorded at acceptance.
        recorded: PackageDigest,
    },
}

/// Reads the package at `source` (a directory, or a regular file ending in `.zip`), checks its
/// manifest and VNFD, copies it into `store` (unless a snapshot with the same digest exists) and
/// returns the snapshot with the files read (for checking the paths a request references).
pub fn take(
    source: &Path,
    store: &Path,
    limits: &Limits,
) -> Result<(Snapshot, PackageFiles), SnapshotError> {
    let files = read_package(source, limits)?;
    files
        .verify_manifest()
        .map_err(|e| SnapshotError::Package(e.0))?;
    if files.get("TOSCA-Metadata/TOSCA.meta").is_none() {
        return Err(SnapshotError::Package(
            "no TOSCA-Metadata/TOSCA.meta (ETSI GS NFV-SOL 004 §4.1)".into(),
        ));
    }
    let digest = files.digest();
    let dir = store.join("sha256").join(digest.to_string());
    let vnfd = match (dir.is_dir(), cached(digest)) {
        (true, Some(v)) => v,
        (true, None) => Arc::new(load(&dir)?),
        (false, _) => Arc::new(write_new(&files, store, &dir)?),
    };
    remember(digest, vnfd.clone());
    let snapshot = Snapshot {
        digest,
        dir,
        source: source.to_path_buf(),
        vnfd,
    };
    Ok((snapshot, files))
}

/// Checks that the snapshot `dir` still holds exactly the files named by `digest` (the engine
/// calls this before it uses a snapshot: a file edited, added or removed in the package store
/// since acceptance is refused, never used). Errors: [`VerifyError`], naming the snapshot.
pub fn verify(dir: &Path, digest: PackageDigest) -> Result<(), VerifyError> {
    let files = read_package(dir, &vnfkeeper_core::package::files::LIMITS).map_err(|e| {
        VerifyError::Unreadable {
            dir: dir.to_path_buf(),
            reason: e.to_string(),
        }
    })?;
    let actual = files.digest();
    if actual == digest {
        Ok(())
    } else {
        Err(VerifyError::Changed {
            dir: dir.to_path_buf(),
            actual,
            recorded: digest,
        })
    }
}

/// Loads the VNFD of a snapshot directory. Errors: the package's own defect, as a
/// [`SnapshotError::Package`] (the path of the store is not shown).
fn load(dir: &Path) -> Result<Vnfd, SnapshotError> {
    VnfPackage::load(dir).map(|p| p.vnfd).map_err(|e| {
        let text = e.to_string();
        let prefix = format!("VNF package {}: ", dir.display());
        SnapshotError::Package(text.strip_prefix(&prefix).unwrap_or(&text).to_owned())
    })
}

/// Writes `files` under `<store>/tmp/<uuid>`, loads the VNFD from there and renames the
/// directory to `dir`. Another writer that got there first wins; ours is removed.
fn write_new(files: &PackageFiles, store: &Path, dir: &Path) -> Result<Vnfd, SnapshotError> {
    let store_err = |source| SnapshotError::Store {
        dir: store.to_path_buf(),
        source,
    };
    let tmp_root = store.join("tmp");
    for d in [store, &tmp_root, &store.join("sha256")] {
        mkdir_0750(d, true).map_err(store_err)?;
    }
    let tmp = tmp_root.join(uuid::Uuid::new_v4().to_string());
    let result = write_files(files, &tmp)
        .map_err(store_err)
        .and_then(|()| load(&tmp));
    let vnfd = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    match fs::rename(&tmp, dir) {
        Ok(()) => {
            if let Some(parent) = dir.parent() {
                let _ = fs::File::open(parent).and_then(|d| d.sync_all());
            }
            Ok(vnfd)
        }
        Err(_) if dir.is_dir() => {
            let _ = fs::remove_dir_all(&tmp);
            Ok(vnfd)
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(store_err(e))
        }
    }
}

fn mkdir_0750(d: &Path, exist_ok: bool) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o750).create(d) {
        Ok(()) => fs::set_permissions(d, fs::Permissions::from_mode(0o750)),
        Err(e) if exist_ok && e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

fn write_files(files: &PackageFiles, root: &Path) -> io::Result<()> {
    mkdir_0750(root, false)?;
    for (rel, content) in files.iter() {
        let path = root.join(rel);
        let mut parent = root.to_path_buf();
        for comp in Path::new(rel)
            .parent()
            .into_iter()
            .flat_map(Path::components)
        {
            parent.push(comp);
            mkdir_0750(&parent, true)?;
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o640)
            .open(&path)?;
        f.set_permissions(fs::Permissions::from_mode(0o640))?;
        f.write_all(content)?;
        f.sync_all()?;
    }
    Ok(())
}

/// Reads the operator's package at `source` into memory under `limits`: a directory (walked
/// without following any symbolic link below it) or a CSAR `.zip` file ([`csar::unpack`]).
/// `source` itself is the path the operator named; it is resolved once. Errors: a reason
/// naming the offending file.
pub fn read_package(source: &Path, limits: &Limits) -> Result<PackageFiles, SnapshotError> {
    let bad = |why: String| SnapshotError::Package(why);
    let meta = fs::metadata(source).map_err(|e| bad(format!("{}: {e}", source.display())))?;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    if meta.is_dir() {
        let fd = rustix::fs::open(source, flags | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| bad(format!("{}: {e}", source.display())))?;
        let mut files = PackageFiles::new();
        let mut entries = 0usize;
        walk(&fd, "", 0, &mut files, &mut entries, limits)?;
        return Ok(files);
    }
    let is_zip = source
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
    if !meta.is_file() || !is_zip {
        return Err(bad(format!(
            "{} is neither a directory nor a CSAR .zip file",
            source.display()
        )));
    }
    let fd = rustix::fs::openat(CWD, source, flags, Mode::empty())
        .map_err(|e| bad(format!("{}: {e}", source.display())))?;
    let bytes = read_regular(fd, limits.max_total_bytes, &source.display().to_string())?;
    csar::unpack(&bytes, limits).map_err(|e| bad(format!("{}: {}", source.display(), e.0)))
}

/// Reads the directory `dir` (package path `prefix`) recursively into `files`.
fn walk(
    dir: &OwnedFd,
    prefix: &str,
    depth: usize,
    files: &mut PackageFiles,
    entries: &mut usize,
    limits: &Limits,
) -> Result<(), SnapshotError> {
    let bad = |why: String| SnapshotError::Package(why);
    if depth > MAX_DEPTH {
        return Err(bad(format!(
            "`{prefix}` is nested deeper than {MAX_DEPTH} directories"
        )));
    }
    let shown = |name: &str| format!("{prefix}{name}");
    let reader = rustix::fs::Dir::read_from(dir).map_err(|e| bad(format!("`{prefix}`: {e}")))?;
    let mut names: Vec<String> = Vec::new();
    for entry in reader {
        let entry = entry.map_err(|e| bad(format!("`{prefix}`: {e}")))?;
        let raw: &CStr = entry.file_name();
        let bytes = raw.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let name = std::str::from_utf8(bytes)
            .map_err(|_| bad(format!("`{prefix}` holds a file name that is not UTF-8")))?;
        names.push(name.to_owned());
    }
    names.sort();
    for name in names {
        *entries += 1;
        if *entries > limits.max_files {
            return Err(bad(format!(
                "more than {} files and directories (the limit)",
                limits.max_files
            )));
        }
        let rel = shown(&name);
        vnfkeeper_core::package::files::check_path(&rel).map_err(|e| bad(e.0))?;
        let st = rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| bad(format!("`{rel}`: {e}")))?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind == FileType::Symlink {
            return Err(bad(format!(
                "`{rel}` is a symbolic link; a package is copied from regular files only"
            )));
        }
        if kind != FileType::Directory && kind != FileType::RegularFile {
            return Err(bad(format!(
                "`{rel}` is not a regular file or directory ({kind:?})"
            )));
        }
        let mut flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOFOLLOW;
        if kind == FileType::Directory {
            flags |= OFlags::DIRECTORY;
        }
        // O_NOFOLLOW: a component swapped for a symbolic link since the lstat fails here.
        let fd = rustix::fs::openat(dir, name.as_str(), flags, Mode::empty())
            .map_err(|e| bad(format!("`{rel}`: {e} (changed while read?)")))?;
        let now = rustix::fs::fstat(&fd).map_err(|e| bad(format!("`{rel}`: {e}")))?;
        if FileType::from_raw_mode(now.st_mode) != kind || now.st_ino != st.st_ino {
            return Err(bad(format!("`{rel}` changed while it was read")));
        }
        if kind == FileType::Directory {
            walk(&fd, &format!("{rel}/"), depth + 1, files, entries, limits)?;
        } else {
            let content = read_regular(fd, limits.max_file_bytes, &rel)?;
            files.insert(&rel, content, limits).map_err(|e| bad(e.0))?;
        }
    }
    Ok(())
}

/// Reads an open regular file up to `limit` + 1 bytes. Errors: not a regular file, or larger
/// than `limit`.
fn read_regular(fd: OwnedFd, limit: u64, shown: &str) -> Result<Vec<u8>, SnapshotError> {
    let bad = |why: String| SnapshotError::Package(why);
    let st = rustix::fs::fstat(fd.as_fd()).map_err(|e| bad(format!("`{shown}`: {e}")))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(bad(format!("`{shown}` is not a regular file")));
    }
    let mut content = Vec::new();
    fs::File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut content)
        .map_err(|e| bad(format!("`{shown}`: {e}")))?;
    if content.len() as u64 > limit {
        return Err(bad(format!(
            "`{shown}` is larger than {limit} bytes (the limit)"
        )));
    }
    Ok(content)
}
