//! Intake of one batch of spool files, in the order that makes it crash-safe: read and examine
//! every file (in parallel), decide and record every outcome in one SQLite transaction, and only
//! then move each file to `accepted/` or `rejected/` as its committed outcome says. The three
//! phases are separate functions ([`read`], [`commit`], [`file`]; [`process`] runs them in a
//! row) so that the daemon can overlap those of consecutive batches: batch N+1 is read while N
//! commits, and N's files are moved while N+1 commits.
//!
//! The database is the truth. A file still in `new/` after a crash is processed again; if its
//! content and name were already committed, it is only moved where it belongs ("recovered"), so
//! every file ends in exactly one place and creates at most one operation. A file whose step
//! after the commit had begun (hidden as `new/.<name>.taken`, see [`maildir`]) is finished for
//! its committed outcome.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::admission::{self, Examined};
use super::maildir::{self, Destination, Read, RefusedTo};
use crate::store::{Store, StoreError, Tx};
use vnfkeeper_core::model::Timestamp;
use vnfkeeper_core::wire::MAX_REQUEST_BYTES;

pub use super::admission::{IntakeContext, Outcome};
pub use super::maildir::{FileLook, Found, Spool, display_name, is_request_name};

/// The size limit of a spool file in bytes ([`MAX_REQUEST_BYTES`]), as [`Spool::scan`] takes it.
pub const LIMIT: u64 = MAX_REQUEST_BYTES as u64;

/// One file read and examined, before the database is consulted.
struct Candidate {
    /// Path in `new/`.
    path: PathBuf,
    /// Whether it is a hidden `.<name>.taken` file: committed, its file step not finished.
    taken: bool,
    request: Examined,
}

/// Processes `files` (paths in `new/`) as one batch: [`read`], then [`commit`], then [`file`].
/// Files that vanished meanwhile are skipped. Entries that are not regular files of at most
/// [`LIMIT`] bytes are refused after the commit, without the database (`Outcome::Rejected` or
/// `Outcome::Quarantined`; see `maildir::read_request`). Errors: only database errors (then
/// nothing was committed and no request file was moved, so the batch is simply retried later).
pub fn process(
    spool: &Spool,
    store: &mut Store,
    files: &[PathBuf],
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<Vec<Outcome>, StoreError> {
    let committed = commit(spool, store, read(files, ctx), ctx, now)?;
    Ok(file(spool, committed))
}

/// A batch read and examined ([`read`]), nothing of it decided yet: the input of [`commit`].
pub struct ReadBatch {
    candidates: Vec<Candidate>,
    refused: Vec<maildir::Refused>,
    /// Paths given to [`read`].
    files: usize,
    /// Time [`read`] took.
    read: Duration,
}

/// A batch whose outcomes are committed ([`commit`]) and whose files are not moved yet: the
/// input of [`file`].
pub struct Committed {
    candidates: Vec<Candidate>,
    refused: Vec<maildir::Refused>,
    decided: Vec<(Outcome, Destination)>,
}

/// The first phase of a batch: reads and examines `files` (paths in `new/`) on every core,
/// without the database. Files that vanished meanwhile are skipped. Reads no `intake` row, so a
/// batch may be read while the one before it commits.
pub fn read(files: &[PathBuf], ctx: &IntakeContext<'_>) -> ReadBatch {
    let started = Instant::now();
    let mut candidates = Vec::with_capacity(files.len());
    let mut refused = Vec::new();
    for taken in read_candidates(files, ctx) {
        match taken {
            Taken::Candidate(c) => candidates.push(*c),
            Taken::Refused(r) => refused.push(r),
        }
    }
    ReadBatch {
        candidates,
        refused,
        files: files.len(),
        read: started.elapsed(),
    }
}

/// The second phase: keys each file's digest, reads what the decisions need and decides and
/// records every outcome of `batch` in one SQLite transaction. Nothing is moved. The batch read
/// before it must be committed first (its rows are what duplicates and SCALE checks are decided
/// against), and a batch's files must not be in another batch until [`file`] moved them.
/// Errors: database only (then nothing was committed).
pub fn commit(
    spool: &Spool,
    store: &mut Store,
    batch: ReadBatch,
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<Committed, StoreError> {
    let started = Instant::now();
    let ReadBatch {
        mut candidates,
        refused,
        files,
        read,
    } = batch;
    // Keyed before anything is looked up or kept (see `Examined::digest`).
    for c in &mut candidates {
        c.request.digest = store.digest(&c.request.sha256)?;
    }
    let bases = admission::load_base_vnfds(store.reader(), candidates.iter().map(|c| &c.request))?;
    let loaded = started.elapsed();
    let mut decided_at = loaded;
    let decided = store.write(|tx| {
        let mut decided = Vec::with_capacity(candidates.len());
        for c in &candidates {
            decided.push(decide(spool, tx, c, ctx, &bases, now)?);
        }
        decided_at = started.elapsed();
        Ok(decided)
    })?;
    let committed = started.elapsed();
    crate::failpoint::hit("intake-after-commit");
    tracing::debug!(
        files,
        read_ms = ms(read),
        load_ms = ms(loaded),
        decide_ms = ms(decided_at - loaded),
        commit_ms = ms(committed - decided_at),
        "intake batch: {files} files; read and examined in {:.1} ms; loaded in {:.1} ms, decided in {:.1} ms, committed in {:.1} ms",
        ms(read),
        ms(loaded),
        ms(decided_at - loaded),
        ms(committed - decided_at)
    );
    Ok(Committed {
        candidates,
        refused,
        decided,
    })
}

/// The third phase: moves each file of a committed batch where its committed outcome says
/// (refused entries, which need no database, too) and returns the outcomes to report, in batch
/// order. A file that cannot be moved is left for the next scan, which finishes it.
pub fn file(spool: &Spool, batch: Committed) -> Vec<Outcome> {
    let started = Instant::now();
    let Committed {
        candidates,
        refused,
        decided,
    } = batch;
    let mut outcomes = Vec::with_capacity(decided.len() + refused.len());
    for r in refused {
        match spool.refuse(&r) {
            RefusedTo::Rejected => outcomes.push(Outcome::Rejected {
                file: r.name,
                vnf_instance_id: None,
                problem: r.problem,
            }),
            RefusedTo::Quarantined { to, error } => outcomes.push(Outcome::Quarantined {
                file: r.name,
                to,
                reason: format!(
                    "{}; cannot be moved to rejected/: {error}",
                    r.problem.detail
                ),
            }),
            RefusedTo::Stuck => {}
        }
    }
    let n = candidates.len();
    outcomes.extend(place_all(spool, &candidates, decided));
    tracing::debug!(
        files = n,
        move_ms = ms(started.elapsed()),
        "intake batch: {n} files moved in {:.1} ms",
        ms(started.elapsed())
    );
    outcomes
}

/// The paths under which the file at `path` in `new/` can be found while its batch runs: itself
/// and, for a request file, its other form (`new/<name>` and the hidden `new/.<name>.taken` it
/// becomes once taken, see [`maildir`]). A batch keeps both out of later batches until it moved
/// its files.
pub fn both_forms(path: &Path) -> Vec<PathBuf> {
    let mut forms = vec![path.to_path_buf()];
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return forms;
    };
    match maildir::untaken_name(name) {
        Some(plain) => forms.push(dir.join(plain)),
        None if is_request_name(name) => forms.push(dir.join(maildir::taken_name(name))),
        None => {}
    }
    forms
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Moves every decided candidate to its committed destination ([`Spool::place`]) and returns
/// the outcomes to report, in batch order. Files with a destination of their own (an accepted
/// copy named after its operation or intake row) are placed on every core, as their file steps
/// touch disjoint paths; rejected files (whose name in `rejected/` is chosen by looking at what
/// is there) and files sharing a destination are placed one after another afterwards. A file
/// that cannot be placed is logged once and left for the next scan; it is reported unless it
/// was only to be recovered (nothing moved).
fn place_all(
    spool: &Spool,
    candidates: &[Candidate],
    decided: Vec<(Outcome, Destination)>,
) -> Vec<Outcome> {
    let mut seen = std::collections::HashMap::<PathBuf, usize>::new();
    for (c, (_, dest)) in candidates.iter().zip(&decided) {
        if !matches!(dest, Destination::Rejected { .. }) {
            *seen
                .entry(spool.path_of(dest, &c.request.name))
                .or_default() += 1;
        }
    }
    let own = |c: &Candidate, dest: &Destination| {
        !matches!(dest, Destination::Rejected { .. })
            && seen.get(&spool.path_of(dest, &c.request.name)) == Some(&1)
    };
    let place = |c: &Candidate, outcome: Outcome, dest: &Destination| -> Option<Outcome> {
        let req = &c.request;
        if let Err(e) = spool.place(&c.path, &req.name, dest, &req.kept, &req.digest) {
            // The outcome is committed; the next scan finds the file again and recovers it.
            // Logged once per file, not at every rescan while e.g. the disk stays full.
            if spool.first_report(&c.path) {
                let file = &req.name;
                tracing::warn!(file = %file, error = %e, "could not move request file ({e}); will retry at every scan");
            }
            if matches!(outcome, Outcome::Recovered { .. }) {
                // Nothing moved: no "moved" line.
                return None;
            }
        }
        Some(outcome)
    };
    let mut parallel = Vec::new();
    let mut serial = Vec::new();
    for (i, (c, (outcome, dest))) in candidates.iter().zip(decided).enumerate() {
        if own(c, &dest) {
            parallel.push((i, c, outcome, dest));
        } else {
            serial.push((i, c, outcome, dest));
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut placed: Vec<(usize, Option<Outcome>)> = if threads < 2 || parallel.len() < 16 {
        parallel
            .into_iter()
            .map(|(i, c, o, d)| (i, place(c, o, &d)))
            .collect()
    } else {
        let chunk = parallel.len().div_ceil(threads);
        let mut parts = Vec::new();
        while !parallel.is_empty() {
            let rest = parallel.split_off(parallel.len().min(chunk));
            parts.push(std::mem::replace(&mut parallel, rest));
        }
        std::thread::scope(|s| {
            let workers: Vec<_> = parts
                .into_iter()
                .map(|part| {
                    s.spawn(|| {
                        part.into_iter()
                            .map(|(i, c, o, d)| (i, place(c, o, &d)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect()
        })
    };
    placed.extend(serial.into_iter().map(|(i, c, o, d)| (i, place(c, o, &d))));
    placed.sort_by_key(|(i, _)| *i);
    placed.into_iter().filter_map(|(_, o)| o).collect()
}

/// A path of the batch after reading: a request to decide, or an entry to refuse.
enum Taken {
    Candidate(Box<Candidate>),
    Refused(maildir::Refused),
}

/// Reads and validates files on every core (the database work after it is serial), keeping order.
fn read_candidates(files: &[PathBuf], ctx: &IntakeContext<'_>) -> Vec<Taken> {
    let batch = &admission::BatchPackages::default();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || files.len() < 16 {
        return files
            .iter()
            .filter_map(|p| read_candidate(p, ctx, batch))
            .collect();
    }
    let chunk = files.len().div_ceil(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .filter_map(|p| read_candidate(p, ctx, batch))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    })
}

fn read_candidate(
    path: &Path,
    ctx: &IntakeContext<'_>,
    batch: &admission::BatchPackages,
) -> Option<Taken> {
    match maildir::read_request(path, LIMIT) {
        Read::File(file) => {
            // A hidden `.<name>.taken` file is examined under the name it was committed with.
            let taken = maildir::untaken_name(&file.name).map(str::to_owned);
            let was_taken = taken.is_some();
            let mut request =
                admission::examine(taken.unwrap_or(file.name), &file.bytes, ctx, batch);
            let label = file.label.unwrap_or_default();
            request.submitter = Some(admission::Submitter {
                uid: file.owner_uid,
                name: super::user_name(file.owner_uid),
                file: label.file,
                // Anyone may claim a sudo user; only root's claim is recorded.
                sudo_user: label.sudo_user.filter(|_| file.owner_uid == 0),
            });
            Some(Taken::Candidate(Box::new(Candidate {
                path: file.path,
                taken: was_taken,
                request,
            })))
        }
        Read::Refused(r) => Some(Taken::Refused(r)),
        Read::Skip => None,
    }
}

/// Decides one candidate inside the batch transaction. A file whose outcome was committed before
/// a crash but which was never moved is only moved, nothing is recorded again; any other file is
/// decided and recorded by the admission rules.
fn decide(
    spool: &Spool,
    tx: &mut Tx<'_>,
    c: &Candidate,
    ctx: &IntakeContext<'_>,
    bases: &admission::BaseVnfds,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    let req = &c.request;
    let earlier = tx.intake_by_sha256(&req.digest)?;
    // A normally named file whose destination holds a copy is a new submission of the same
    // bytes under the same name (the copy is written only after the file was hidden).
    if let Some(dest) = admission::committed_destination(&earlier, req)
        && (c.taken || !spool.holds(&dest, &req.name))
    {
        let to = spool.path_of(&dest, &req.name);
        let outcome = Outcome::Recovered {
            file: req.name.clone(),
            to,
        };
        return Ok((outcome, dest));
    }
    admission::decide(tx, req, &earlier, ctx, bases, now)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A batch large enough to be placed on every core: accepted copies (one of them submitted
    /// twice, so a duplicate) and rejected files, interleaved. Every file ends in exactly one
    /// place and the outcomes keep the batch's order.
    #[test]
    fn a_large_batch_places_every_file_once_and_reports_in_batch_order() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(&dir.path().join("spool")).unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let package_store = dir.path().join("package-store");
        let ctx = IntakeContext {
            packages_dir: root,
            package_store: &package_store,
            cloud_configured: false,
        };
        let seed: serde_json::Value = serde_json::from_slice(
            &fs::read(root.join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
                .unwrap(),
        )
        .unwrap();
        let mut files = Vec::new();
        for i in 0..40 {
            let bytes = if i % 2 == 0 {
                let mut env = seed.clone();
                // Files 0 and 2 carry the same request: the second is a duplicate.
                let n = if i == 2 { 0 } else { i };
                env["vnfInstanceId"] = format!("batch-{n}").into();
                env["requestId"] = format!("batch-{n}").into();
                serde_json::to_vec(&env).unwrap()
            } else {
                format!("{{ not json {i}").into_bytes()
            };
            files.push(spool.submit(&bytes).unwrap());
        }
        let now = Timestamp(chrono::Utc::now());
        let outcomes = process(&spool, &mut store, &files, &ctx, now).unwrap();
        assert_eq!(outcomes.len(), 40);
        for (i, (o, path)) in outcomes.iter().zip(&files).enumerate() {
            let name = path.file_name().unwrap().to_str().unwrap();
            let (file, ok) = match o {
                Outcome::Accepted { file, .. } => (file, i % 2 == 0 && i != 2),
                Outcome::Duplicate { file, .. } => (file, i == 2),
                Outcome::Rejected { file, .. } => (file, i % 2 == 1),
                other => panic!("file {i}: {other:?}"),
            };
            assert_eq!(file, name, "outcome {i} is not file {i}'s");
            assert!(ok, "file {i}: {o:?}");
        }
        let names = |d: &Path| {
            let mut v: Vec<String> = fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        };
        // new/ is empty (no hidden .taken, no temporary file); 20 copies + 20 sidecars each.
        assert!(
            names(&spool.new_dir()).is_empty(),
            "{:?}",
            names(&spool.new_dir())
        );
        let accepted = names(&spool.accepted_dir());
        assert_eq!(
            accepted.iter().filter(|n| n.ends_with(".json")).count(),
            20,
            "{accepted:?}"
        );
        assert_eq!(
            accepted.iter().filter(|n| n.ends_with(".sha256")).count(),
            20
        );
        assert_eq!(
            accepted
                .iter()
                .filter(|n| n.contains(".dup-") && n.ends_with(".json"))
                .count(),
            1
        );
        let rejected = names(&spool.rejected_dir());
        for path in files.iter().skip(1).step_by(2) {
            let name = path.file_name().unwrap().to_str().unwrap();
            for suffix in ["", ".sha256", ".error.json"] {
                assert!(
                    rejected.contains(&format!("{name}{suffix}")),
                    "{name}{suffix}: {rejected:?}"
                );
            }
        }
        assert_eq!(rejected.len(), 60, "{rejected:?}");
    }

    #[test]
    fn a_committed_file_that_cannot_be_moved_is_not_reported_as_moved() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(&dir.path().join("spool")).unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let package_store = dir.path().join("package-store");
        let ctx = IntakeContext {
            packages_dir: dir.path(),
            package_store: &package_store,
            cloud_configured: false,
        };
        let now = Timestamp(chrono::Utc::now());
        let path = spool.submit(b"{ not json").unwrap();
        // rejected/ unusable, as on a full disk: the error file cannot be written.
        fs::remove_dir(spool.rejected_dir()).unwrap();
        fs::write(spool.rejected_dir(), b"").unwrap();
        let first = process(&spool, &mut store, std::slice::from_ref(&path), &ctx, now).unwrap();
        assert!(
            matches!(first.as_slice(), [Outcome::Rejected { .. }]),
            "{first:?}"
        );
        // Committed and taken (hidden), not filed.
        let hidden = spool.unfinished().unwrap();
        assert_eq!(hidden.len(), 1, "{hidden:?}");
        assert!(!path.exists());
        // Next scan: recorded already, still cannot be filed: no "moved" outcome.
        let again = process(&spool, &mut store, &hidden, &ctx, now).unwrap();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(spool.unfinished().unwrap(), hidden);
        // Space again: filed, and said so.
        fs::remove_file(spool.rejected_dir()).unwrap();
        fs::create_dir(spool.rejected_dir()).unwrap();
        let moved = process(&spool, &mut store, &hidden, &ctx, now).unwrap();
        let [Outcome::Recovered { to, .. }] = moved.as_slice() else {
            panic!("{moved:?}")
        };
        assert!(spool.unfinished().unwrap().is_empty());
        assert!(to.exists() && !path.exists());
    }
}
