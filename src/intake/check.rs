//! At start, before intake takes anything: the spool's filed copies against the database.
//!
//! Every copy intake files in `accepted/` or `rejected/` is written after its `intake` row was
//! committed, beside a sidecar `<copy>.sha256` holding the row's digest. A copy without its row
//! means the database lost committed transactions (a crash that took the WAL with it, a restored
//! backup older than the spool): a request accepted then would be accepted again as a new
//! operation when re-sent. The daemon refuses to start on it ([`SpoolError::Unrecorded`]) unless
//! the operator asks for [`recover`], which records those copies again without running them.
//!
//! The comparison is one scan of each directory (only `*.sha256` sidecars are read, each at most
//! 128 bytes), one `GROUP BY` query and a multiset difference of digests. Entries refused unread
//! (links, FIFOs, devices, oversized files) have no sidecar and no row by design, and are not
//! compared. Sidecars an earlier version wrote (the plain SHA-256) are converted to keyed digests
//! first ([`crate::store::SecretsKey::rekey`]), as the store converts its rows at open.

use std::fs;
use std::io::{self, Read as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use vnfkeeper_core::model::{
    EventKind, LcmOperationType, OpOccId, OperationState, ProblemDetails, Timestamp, VnfInstanceId,
};

use super::maildir::{self, Spool};
use crate::store::{NewEvent, NewIntake, NewOperation, RequestBody, Store, StoreError, Tx};

/// How many unrecorded copies a refusal names; the rest are counted.
const NAMED: usize = 10;

/// Longest sidecar read (a keyed digest is 76 bytes with its newline).
const SIDECAR_MAX: u64 = 128;

/// Longest `.error.json` read when a rejected copy is recorded again.
const ERROR_FILE_MAX: u64 = 64 * 1024;

/// A copy filed in `accepted/` or `rejected/`, by its sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filed {
    /// `accepted` or `rejected`.
    pub dir: &'static str,
    /// The copy's file name (the sidecar's without `.sha256`), as `maildir::display_name` shows it.
    pub name: String,
    /// The digest its sidecar holds (keyed).
    pub digest: String,
}

impl Filed {
    /// `accepted/<name>` or `rejected/<name>`.
    pub fn shown(&self) -> String {
        format!("{}/{}", self.dir, self.name)
    }
}

/// Why the spool and the database do not agree, or could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// Filed copies without their `intake` row. Exit 78: an operator must decide.
    #[error(
        "{} filed request {} in {spool} {} no record in the database ({}): the database lost \
         committed transactions (a crash that took state.db-wal with it, or a backup older than \
         the spool). Refusing to start, since a request accepted then would be accepted again. \
         Recovery: restore the latest backup (README \"Restore from backup\"); then start once \
         with `vnfkeeper daemon --recover-spool`, which records the copies still missing as \
         FAILED operations and rejections (never run), so that their requestIds stay used",
        .copies.len(),
        if .copies.len() == 1 { "copy" } else { "copies" },
        if .copies.len() == 1 { "has" } else { "have" },
        named(.copies),
    )]
    Unrecorded {
        /// The spool's root.
        spool: String,
        /// Every copy without its row, in name order.
        copies: Vec<Filed>,
    },
    /// A directory or sidecar could not be read or converted.
    #[error("comparing the spool with the database: {0}")]
    Io(io::Error),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The first [`NAMED`] copies, `, `-joined, and how many more.
fn named(copies: &[Filed]) -> String {
    let mut text: Vec<String> = copies.iter().take(NAMED).map(Filed::shown).collect();
    if copies.len() > NAMED {
        text.push(format!("and {} more", copies.len() - NAMED));
    }
    text.join(", ")
}

/// Reads at most `max` bytes of the regular file `path`, never following a link or blocking on
/// a FIFO. `Ok(None)` when it is not a regular file or vanished.
fn read_small(path: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Every sidecar of `accepted/` and `rejected/` with the digest it holds, in name order; a
/// sidecar holding a plain SHA-256 (an earlier version's) is rewritten with its keyed digest
/// first. Errors: I/O (naming the path), or no key.
fn filed(spool: &Spool, store: &Store) -> Result<Vec<Filed>, SpoolError> {
    let key = store.secrets_key()?;
    let at = |p: &Path| {
        let p = p.display().to_string();
        move |e: io::Error| SpoolError::Io(io::Error::new(e.kind(), format!("{p}: {e}")))
    };
    let mut out = Vec::new();
    for (dir, path) in [
        ("accepted", spool.accepted_dir()),
        ("rejected", spool.rejected_dir()),
    ] {
        let entries = match fs::read_dir(&path) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(at(&path)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(at(&path))?;
            let os_name = entry.file_name();
            let shown = maildir::display_name(&os_name);
            let Some(copy) = shown.strip_suffix(".sha256") else {
                continue;
            };
            if shown.starts_with('.') {
                continue;
            }
            let sidecar = entry.path();
            let Some(bytes) = read_small(&sidecar, SIDECAR_MAX).map_err(at(&sidecar))? else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let stored = text.trim_end();
            let digest = match key.rekey(stored) {
                None => stored.to_owned(),
                Some(keyed) => {
                    let mut line = keyed.clone().into_bytes();
                    line.push(b'\n');
                    maildir::write_new(&sidecar, &line, 0o640).map_err(at(&sidecar))?;
                    keyed
                }
            };
            out.push(Filed {
                dir,
                name: copy.to_owned(),
                digest,
            });
        }
    }
    out.sort_by(|a, b| (a.dir, &a.name).cmp(&(b.dir, &b.name)));
    Ok(out)
}

/// The filed copies of `spool` that have no `intake` row in `store`: for each digest, the copies
/// beyond the number of rows holding it. Errors: I/O, the database.
pub fn unrecorded(spool: &Spool, store: &Store) -> Result<Vec<Filed>, SpoolError> {
    let filed = filed(spool, store)?;
    let mut rows = store.reader().intake_digest_counts()?;
    Ok(filed
        .into_iter()
        .filter(|f| match rows.get_mut(&f.digest) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect())
}

/// Compares `spool` with `store` ([`unrecorded`]); with `recover`, records the unrecorded copies
/// ([`recover`]) and returns how many, else refuses them. Errors: [`SpoolError::Unrecorded`],
/// I/O, the database.
pub fn check(
    spool: &Spool,
    store: &mut Store,
    recover: bool,
    now: Timestamp,
) -> Result<usize, SpoolError> {
    let missing = unrecorded(spool, store)?;
    if missing.is_empty() {
        return Ok(0);
    }
    if !recover {
        return Err(SpoolError::Unrecorded {
            spool: spool.root().display().to_string(),
            copies: missing,
        });
    }
    self::recover(spool, store, &missing, now)?;
    Ok(missing.len())
}

/// What an accepted copy's name says (`maildir::Spool::path_of`): the operation it created, a
/// duplicate of it, or a task on it.
enum AcceptedName<'a> {
    Operation(&'a str),
    Duplicate(&'a str),
    Task(&'a str),
}

fn accepted_name(name: &str) -> Option<AcceptedName<'_>> {
    let stem = name.strip_suffix(".json")?;
    match stem.split_once('.') {
        None => Some(AcceptedName::Operation(stem)),
        Some((op, rest)) if rest.starts_with("dup-") => Some(AcceptedName::Duplicate(op)),
        Some((op, _)) => Some(AcceptedName::Task(op)),
    }
}

/// A JSON string member of `doc`, if it is one.
fn text<'a>(doc: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    doc.get(key).and_then(serde_json::Value::as_str)
}

/// Records `missing` (copies without their `intake` row) in one transaction, operations first:
/// an accepted LCM request's copy (`accepted/<op>.json`) becomes operation `<op>` in `FAILED`
/// (never run: its secrets were not kept) with its `requestId` and its `intake` row
/// (`ACCEPTED`), so that the same file re-sent is a duplicate and its `requestId` is not
/// accepted again; a duplicate's or a task's copy gets its `intake` row (`DUPLICATE`,
/// `ACCEPTED`); a rejected copy its `REJECTED` row with the problem of its `.error.json`. Each
/// row holds the sidecar's digest, the file name `accepted/<name>` or `rejected/<name>` and an
/// event saying it was recorded again. Copies are read as JSON (redacted; at most the request
/// size limit); one that is not is recorded with what its name says. Errors: I/O, the database.
pub fn recover(
    spool: &Spool,
    store: &mut Store,
    missing: &[Filed],
    now: Timestamp,
) -> Result<(), SpoolError> {
    let read_json = |path: &Path, max: u64| -> serde_json::Value {
        read_small(path, max)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    let limit = vnfkeeper_core::wire::MAX_REQUEST_BYTES as u64;
    let mut ordered: Vec<&Filed> = missing.iter().collect();
    // Operations before the duplicates and tasks that refer to them.
    ordered.sort_by_key(|f| {
        !(f.dir == "accepted" && matches!(accepted_name(&f.name), Some(AcceptedName::Operation(_))))
    });
    store.write(|tx| {
        for f in ordered {
            let path: PathBuf = match f.dir {
                "accepted" => spool.accepted_dir().join(&f.name),
                _ => spool.rejected_dir().join(&f.name),
            };
            let doc = read_json(&path, limit);
            if f.dir == "rejected" {
                let error = spool.rejected_dir().join(format!("{}.error.json", f.name));
                let problem = match read_json(&error, ERROR_FILE_MAX) {
                    serde_json::Value::Null => None,
                    p => Some(p.to_string()),
                };
                record_again(tx, f, &doc, "REJECTED", None, problem.as_deref(), now)?;
                continue;
            }
            match accepted_name(&f.name) {
                Some(AcceptedName::Operation(op)) => {
                    let op = recreate_operation(tx, f, op, &doc, now)?;
                    record_again(tx, f, &doc, "ACCEPTED", op.as_deref(), None, now)?;
                }
                Some(AcceptedName::Duplicate(op)) => {
                    let op = tx.reader().operation(&op.into())?.map(|o| o.id);
                    record_again(
                        tx,
                        f,
                        &doc,
                        "DUPLICATE",
                        op.as_ref().map(|o| o.as_str()),
                        None,
                        now,
                    )?;
                }
                Some(AcceptedName::Task(op)) => {
                    let op = tx.reader().operation(&op.into())?.map(|o| o.id);
                    record_again(
                        tx,
                        f,
                        &doc,
                        "ACCEPTED",
                        op.as_ref().map(|o| o.as_str()),
                        None,
                        now,
                    )?;
                }
                None => record_again(tx, f, &doc, "ACCEPTED", None, None, now)?,
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// Operation `op` again from its accepted copy `doc`, in `FAILED` with a problem saying why it
/// was not run; `None` (nothing created) when the copy is not an LCM request envelope, and the
/// existing id when the operation is still there.
fn recreate_operation(
    tx: &mut Tx<'_>,
    f: &Filed,
    op: &str,
    doc: &serde_json::Value,
    now: Timestamp,
) -> Result<Option<String>, StoreError> {
    let op = OpOccId::from(op);
    if tx.reader().operation(&op)?.is_some() {
        return Ok(Some(op.as_str().to_owned()));
    }
    let (Some(operation), Some(instance), Some(request)) = (
        text(doc, "operation").and_then(LcmOperationType::parse),
        text(doc, "vnfInstanceId"),
        doc.get("request").filter(|r| r.is_object()),
    ) else {
        return Ok(None);
    };
    let instance = VnfInstanceId::from(instance);
    tx.create_instance_if_missing(&instance, now)?;
    let body = RequestBody::redacted(request, &[]);
    tx.insert_operation(
        &NewOperation {
            id: &op,
            vnf_instance_id: &instance,
            operation,
            operation_params: &body,
            vnf_package: None,
            request_id: text(doc, "requestId"),
            is_automatic_invocation: false,
            status_detail: None,
        },
        now,
    )?;
    let problem = ProblemDetails::new(
        500,
        format!(
            "recorded again from spool/{} by `vnfkeeper daemon --recover-spool` after the \
             database lost it; not run (its secrets were not kept). Submit it again with a new \
             requestId if it is still wanted",
            f.shown()
        ),
        Vec::new(),
    );
    let error = serde_json::to_string(&problem).map_err(|e| StoreError::Encode {
        column: "error",
        reason: e.to_string(),
    })?;
    tx.set_operation_state(op.as_str(), OperationState::FailedTemp, Some(&error), now)?;
    tx.set_operation_state(op.as_str(), OperationState::Failed, None, now)?;
    Ok(Some(op.as_str().to_owned()))
}

/// The `intake` row and event of a copy recorded again.
fn record_again(
    tx: &mut Tx<'_>,
    f: &Filed,
    doc: &serde_json::Value,
    outcome: &str,
    op: Option<&str>,
    problem: Option<&str>,
    now: Timestamp,
) -> Result<(), StoreError> {
    let shown = f.shown();
    let instance = text(doc, "vnfInstanceId");
    let request_id = text(doc, "requestId");
    let id = tx.insert_intake(
        &NewIntake {
            file_name: &shown,
            content_sha256: &f.digest,
            request_id,
            outcome,
            vnf_instance_id: instance,
            vnf_lcm_op_occ_id: op,
            problem,
            warnings: None,
        },
        now,
    )?;
    let kind = match outcome {
        "REJECTED" => EventKind::RequestRejected,
        "DUPLICATE" => EventKind::RequestDuplicate,
        _ => EventKind::RequestAccepted,
    };
    let message = format!(
        "spool/{shown} recorded again by `vnfkeeper daemon --recover-spool` (the database had \
         lost its record); not run"
    );
    let evidence = serde_json::json!({"file": shown, "intakeId": id, "recovered": true});
    let instance = instance.map(VnfInstanceId::from);
    let op = op.map(OpOccId::from);
    tx.append_event(
        &NewEvent {
            kind,
            vnf_instance_id: instance.as_ref(),
            vnf_lcm_op_occ_id: op.as_ref(),
            vnfc_id: None,
            message: &message,
            evidence: Some(&evidence.to_string()),
        },
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DIGEST_PREFIX;

    #[test]
    fn accepted_names_say_operation_duplicate_or_task() {
        assert!(matches!(
            accepted_name("3f2a.json"),
            Some(AcceptedName::Operation("3f2a"))
        ));
        assert!(matches!(
            accepted_name("3f2a.dup-7.json"),
            Some(AcceptedName::Duplicate("3f2a"))
        ));
        assert!(matches!(
            accepted_name("3f2a.retry-9.json"),
            Some(AcceptedName::Task("3f2a"))
        ));
        assert!(accepted_name("3f2a.txt").is_none());
    }

    #[test]
    fn a_refusal_names_ten_copies_and_counts_the_rest() {
        let copies: Vec<Filed> = (0..12)
            .map(|i| Filed {
                dir: "accepted",
                name: format!("op{i:02}.json"),
                digest: format!("{DIGEST_PREFIX}{i}"),
            })
            .collect();
        let e = SpoolError::Unrecorded {
            spool: "/s".into(),
            copies,
        }
        .to_string();
        assert!(
            e.starts_with("12 filed request copies in /s have no record"),
            "{e}"
        );
        assert!(e.contains("accepted/op09.json, and 2 more"), "{e}");
        assert!(!e.contains("op10"), "{e}");
        assert!(
            e.contains("Restore from backup") && e.contains("--recover-spool"),
            "{e}"
        );
    }
}
