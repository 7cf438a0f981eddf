//! The spool watch: inotify on the spool's root and on `new/`, re-established when either was
//! removed or replaced (inotify(7): a watch ends with `IN_DELETE_SELF`/`IN_IGNORED` when its
//! directory is removed, and follows the old inode when it is renamed away).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc::UnboundedSender;

use crate::intake::spool::Spool;

/// A directory's identity: `(st_dev, st_ino)`.
type DirId = (u64, u64);

/// The watcher and the identities of the directories it watches.
pub(super) struct SpoolWatch {
    watcher: notify::RecommendedWatcher,
    /// `(root, new/)` as watched; `None` while not watched.
    watched: Option<(DirId, DirId)>,
    /// Whether the last attempt to re-establish failed (logged once until it succeeds).
    failing: bool,
    /// Since when a spool directory is seen missing (re-created only after [`GRACE`], so that
    /// an operator's `rm -r new && mkdir new` is not raced).
    missing_since: Option<Instant>,
}

/// How long a missing spool directory is left for its remover to re-create.
const GRACE: Duration = Duration::from_secs(1);

/// What [`SpoolWatch::ensure`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ensured {
    /// The watched directories are the current ones.
    Unchanged,
    /// The watch was re-established (and missing directories re-created): rescan everything.
    Reestablished,
    /// A directory is missing or the watch could not be re-established: ask again soon, and do
    /// not scan now.
    Pending,
}

impl SpoolWatch {
    /// Watches the spool root and `new/` (both non-recursive), sending every event to `events`.
    /// Errors: inotify (e.g. `fs.inotify.max_user_watches` reached) or a missing directory.
    pub(super) fn new(
        spool: &Spool,
        events: UnboundedSender<notify::Result<notify::Event>>,
    ) -> anyhow::Result<Self> {
        let watcher = notify::recommended_watcher(move |res| {
            let _ = events.send(res);
        })
        .context("creating the spool watcher")?;
        let mut watch = Self {
            watcher,
            watched: None,
            failing: false,
            missing_since: None,
        };
        watch.rewatch(spool)?;
        Ok(watch)
    }

    /// Compares the spool root and `new/` with the directories watched. When either was
    /// replaced, watches the current ones; when one is missing for [`GRACE`], re-creates
    /// whatever spool directory is missing (as [`Spool::open`] does) first. Logs each
    /// re-establishment once; a failure is logged once until it succeeds, and is tried again at
    /// the next call.
    pub(super) fn ensure(&mut self, spool: &Spool) -> Ensured {
        if ids(spool).is_none() {
            let since = *self.missing_since.get_or_insert_with(Instant::now);
            if since.elapsed() < GRACE {
                return Ensured::Pending;
            }
        }
        self.missing_since = None;
        let created = match spool.create_dirs() {
            Ok(created) => created,
            Err(e) => {
                if !self.failing {
                    tracing::error!(spool = %spool.root().display(), error = %e, "cannot re-create the spool directories: {e}; trying again at the next scan");
                    self.failing = true;
                }
                return Ensured::Pending;
            }
        };
        let current = ids(spool);
        if !created && current.is_some() && current == self.watched {
            return Ensured::Unchanged;
        }
        match self.rewatch(spool) {
            Ok(()) => {
                self.failing = false;
                tracing::warn!(
                    spool = %spool.root().display(),
                    recreated = created,
                    "the spool directory or its new/ was removed or replaced; watch re-established{}",
                    if created { " (missing directories re-created)" } else { "" }
                );
                Ensured::Reestablished
            }
            Err(e) => {
                if !self.failing {
                    tracing::error!(spool = %spool.root().display(), error = format!("{e:#}"), "cannot re-establish the spool watch: {e:#}; trying again at the next scan");
                    self.failing = true;
                }
                Ensured::Pending
            }
        }
    }

    /// Forgets the watched identities: an event said the spool or `new/` was removed or moved
    /// away, so the next [`SpoolWatch::ensure`] re-establishes the watch even when the directory
    /// re-created meanwhile got the freed inode number back (file systems reuse them at once).
    pub(super) fn invalidate(&mut self) {
        self.watched = None;
    }

    /// Drops the watches (by path; the old ones may be gone already) and adds them again.
    fn rewatch(&mut self, spool: &Spool) -> anyhow::Result<()> {
        let root = spool.root();
        let new = spool.new_dir();
        let _ = self.watcher.unwatch(&new);
        let _ = self.watcher.unwatch(root);
        self.watched = None;
        // Identities first: a directory replaced after this is seen as changed at the next check.
        let current = ids(spool);
        for dir in [root, new.as_path()] {
            self.watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .with_context(|| format!("watching {}", dir.display()))?;
        }
        self.watched = current;
        Ok(())
    }
}

/// The identities of the spool root and of `new/`, `None` if either is missing.
fn ids(spool: &Spool) -> Option<(DirId, DirId)> {
    Some((dir_id(spool.root())?, dir_id(&spool.new_dir())?))
}

fn dir_id(path: &Path) -> Option<DirId> {
    let m = std::fs::metadata(path).ok()?;
    m.is_dir().then(|| (m.dev(), m.ino()))
}
