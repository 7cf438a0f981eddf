//! Intake of one batch of spool files, in the order that makes it crash-safe: read and examine
//! every file (in parallel), decide and record every outcome in one SQLite transaction, and only
//! then move each file to `accepted/` or `rejected/` as its committed outcome says.
//!
//! The database is the truth. A file still in `new/` after a crash is processed again; if its
//! content and name were already committed, it is only moved where it belongs ("recovered"), so
//! every file ends in exactly one place and creates at most one operation.

use std::path::{Path, PathBuf};

use super::admission::{self, Examined};
use super::maildir::{self, Destination};
use crate::model::Timestamp;
use crate::store::{Store, StoreError, Tx};

pub use super::admission::{IntakeContext, Outcome};
pub use super::maildir::{Spool, is_request_name};

/// One file read and examined, before the database is consulted.
struct Candidate {
    /// Path in `new/`.
    path: PathBuf,
    request: Examined,
}

/// Processes `files` (paths in `new/`) as one batch: reads and validates each, records all
/// outcomes in one SQLite transaction, then moves each file. Files that vanished meanwhile are
/// skipped. Errors: only database errors (then nothing was committed and no file was moved, so
/// the batch is simply retried later).
pub fn process(
    spool: &Spool,
    store: &mut Store,
    files: &[PathBuf],
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<Vec<Outcome>, StoreError> {
    let candidates = read_candidates(files, ctx);
    let bases = admission::load_scale_bases(store.reader(), candidates.iter().map(|c| &c.request))?;
    let decided = store.write(|tx| {
        let mut decided = Vec::with_capacity(candidates.len());
        for c in &candidates {
            decided.push(decide(spool, tx, c, ctx, &bases, now)?);
        }
        Ok(decided)
    })?;
    crate::failpoint::hit("intake-after-commit");
    let mut outcomes = Vec::with_capacity(decided.len());
    for (c, (outcome, dest)) in candidates.iter().zip(decided) {
        if let Err(e) = spool.place(&c.path, &c.request.name, &dest) {
            // The outcome is committed; the next scan finds the file again and recovers it.
            let file = &c.request.name;
            tracing::warn!(file = %file, error = %e, "could not move request file; will retry");
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Reads and validates files on every core (the database work after it is serial), keeping order.
fn read_candidates(files: &[PathBuf], ctx: &IntakeContext<'_>) -> Vec<Candidate> {
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
) -> Option<Candidate> {
    let file = maildir::read_request(path)?;
    Some(Candidate {
        path: file.path,
        request: admission::examine(file.name, &file.bytes, ctx, batch),
    })
}

/// Decides one candidate inside the batch transaction. A file whose outcome was committed before
/// a crash but which was never moved is only moved, nothing is recorded again; any other file is
/// decided and recorded by the admission rules.
fn decide(
    spool: &Spool,
    tx: &mut Tx<'_>,
    c: &Candidate,
    ctx: &IntakeContext<'_>,
    bases: &admission::ScaleBases,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    let req = &c.request;
    let earlier = tx.intake_by_sha256(&req.sha256)?;
    if let Some(dest) = admission::committed_destination(&earlier, req)
        && !spool.holds(&dest, &req.name)
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
