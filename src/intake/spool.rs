//! The spool directory (maildir semantics): producers write `tmp/X` and rename it into `new/`;
//! intake validates each file, commits the outcome to SQLite, and only then moves the file to
//! `accepted/<vnfLcmOpOccId>.json` or to `rejected/<name>` beside `<name>.error.json`.
//!
//! Crash safety: the database is the truth. A file still in `new/` after a crash is processed
//! again; if its content and name were already committed, it is only moved where it belongs
//! ("recovered"), so every file ends in exactly one place and creates at most one operation.
//! Duplicates (same content, or same `requestId` and content) are accepted idempotently: the
//! copy goes to `accepted/<vnfLcmOpOccId>.dup-<intake id>.json` and no new operation is created.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::wire::{self, Envelope, FieldError, LcmEnvelope, TaskEnvelope, TaskOperation};
use crate::model::{
    FieldProblem, InstantiationState, IntakeOutcome, LcmOperationType, OperationState, PendingTask,
    ProblemDetails, Timestamp,
};

use crate::store::{NewEvent, NewIntake, NewOperation, Store, StoreError, Tx};

/// The spool's directories under its root.
#[derive(Debug, Clone)]
pub struct Spool {
    root: PathBuf,
}

/// What intake did with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A new operation occurrence was recorded in `STARTING`.
    Accepted {
        /// File name in `new/`.
        file: String,
        /// The new vnfLcmOpOccId.
        vnf_lcm_op_occ_id: String,
        /// vnfInstanceId.
        vnf_instance_id: String,
        /// The operation (or task) requested, e.g. `INSTANTIATE`, `RETRY`.
        operation: String,
        /// Why it waits, if it does.
        status_detail: Option<String>,
        /// Normalisations applied or noticed.
        warnings: Vec<FieldProblem>,
    },
    /// Same request as an earlier one: no new operation.
    Duplicate {
        /// File name in `new/`.
        file: String,
        /// The operation the earlier copy created.
        vnf_lcm_op_occ_id: String,
    },
    /// Refused; `<name>.error.json` explains why.
    Rejected {
        /// File name in `new/`.
        file: String,
        /// vnfInstanceId, if the file named one.
        vnf_instance_id: Option<String>,
        /// Why.
        problem: ProblemDetails,
    },
    /// Committed before a crash but not yet moved; moved now, nothing recorded twice.
    Recovered {
        /// File name in `new/`.
        file: String,
        /// Where it went.
        to: PathBuf,
    },
}

/// What intake needs besides the spool and the store.
#[derive(Debug, Clone)]
pub struct IntakeContext<'a> {
    /// Relative `vnfPackage` paths are resolved against this directory.
    pub packages_dir: &'a Path,
    /// Whether a cloud is configured (only changes the "why it waits" text).
    pub cloud_configured: bool,
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
    pub fn scan(&self) -> io::Result<Vec<(PathBuf, std::time::SystemTime)>> {
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
}

/// Whether a directory entry is a request file intake should look at.
pub fn is_request_name(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".json")
}

fn unique_name() -> String {
    let now = std::time::SystemTime::now()
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

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// One file read and checked, before the database is consulted.
struct Candidate {
    path: PathBuf,
    name: String,
    sha256: String,
    verdict: Verdict,
}

enum Verdict {
    Lcm(LcmCandidate),
    Task {
        env: TaskEnvelope,
    },
    Invalid {
        vnf_instance_id: Option<String>,
        problem: ProblemDetails,
    },
}

/// A valid LCM request with what was derived from it.
struct LcmCandidate {
    env: LcmEnvelope,
    /// The SOL003 body as JSON text, stored verbatim.
    raw_request: String,
    /// Canonical package directory (INSTANTIATE).
    package: Option<PathBuf>,
    warnings: Vec<FieldProblem>,
}

/// Where a file goes once the transaction committed.
enum Move {
    Accept { to: PathBuf },
    Reject { problem: ProblemDetails },
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
    let decided = store.write(|tx| {
        let mut decided = Vec::with_capacity(candidates.len());
        for c in &candidates {
            decided.push(decide(spool, tx, c, ctx, now)?);
        }
        Ok(decided)
    })?;
    crate::failpoint::hit("intake-after-commit");
    let mut outcomes = Vec::with_capacity(decided.len());
    for (c, (outcome, mv)) in candidates.iter().zip(decided) {
        let result = match mv {
            Move::Accept { to } => fs::rename(&c.path, &to),
            Move::Reject { problem } => reject_file(spool, &c.path, &c.name, &problem),
        };
        if let Err(e) = result {
            // The outcome is committed; the next scan finds the file again and recovers it.
            tracing::warn!(file = %c.name, error = %e, "could not move request file; will retry");
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Reads and validates files on every core (the database work after it is serial), keeping order.
fn read_candidates(files: &[PathBuf], ctx: &IntakeContext<'_>) -> Vec<Candidate> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || files.len() < 16 {
        return files
            .iter()
            .filter_map(|p| read_candidate(p, ctx))
            .collect();
    }
    let chunk = files.len().div_ceil(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .filter_map(|p| read_candidate(p, ctx))
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

fn read_candidate(path: &Path, ctx: &IntakeContext<'_>) -> Option<Candidate> {
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
    let sha256 = hex(&Sha256::digest(&bytes));
    let verdict = if bytes.len() > wire::MAX_REQUEST_BYTES {
        Verdict::Invalid {
            vnf_instance_id: None,
            problem: ProblemDetails::new(
                413,
                format!(
                    "request file is {} bytes; the limit is {} bytes",
                    bytes.len(),
                    wire::MAX_REQUEST_BYTES
                ),
                vec![FieldProblem {
                    pointer: String::new(),
                    reason: format!("file larger than {} bytes", wire::MAX_REQUEST_BYTES),
                }],
            ),
        }
    } else {
        match wire::parse_envelope(&bytes) {
            Err(errors) => Verdict::Invalid {
                vnf_instance_id: sniff_instance_id(&bytes),
                problem: invalid_request(errors),
            },
            Ok(parsed) => {
                let warnings = parsed.warnings.into_iter().collect();
                match parsed.envelope {
                    Envelope::Task(env) => Verdict::Task { env },
                    Envelope::Lcm(env) => match check_package(&env, ctx) {
                        Err(problem) => Verdict::Invalid {
                            vnf_instance_id: Some(env.vnf_instance_id.clone()),
                            problem,
                        },
                        Ok(package) => {
                            let raw_request = env.request.to_string();
                            Verdict::Lcm(LcmCandidate {
                                env,
                                raw_request,
                                package,
                                warnings,
                            })
                        }
                    },
                }
            }
        }
    };
    Some(Candidate {
        path: path.to_path_buf(),
        name,
        sha256,
        verdict,
    })
}

fn invalid_request(errors: Vec<FieldError>) -> ProblemDetails {
    let n = errors.len();
    let first = errors
        .first()
        .map(|e| format!("{}: {}", pointer_text(&e.pointer), e.reason));
    let detail = match (n, first) {
        (1, Some(f)) => format!("invalid request: {f}"),
        (_, Some(f)) => format!("invalid request: {n} defects, first {f}"),
        _ => "invalid request".to_owned(),
    };
    ProblemDetails::new(400, detail, errors.into_iter().collect())
}

fn pointer_text(p: &str) -> &str {
    if p.is_empty() { "(whole file)" } else { p }
}

/// Best effort: the `vnfInstanceId` of an invalid file, for the audit trail and logs.
fn sniff_instance_id(bytes: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let id = v.get("vnfInstanceId")?.as_str()?;
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then(|| id.to_owned())
}

/// Resolves `vnfPackage` and checks that every file the request references is in it.
fn check_package(
    env: &LcmEnvelope,
    ctx: &IntakeContext<'_>,
) -> Result<Option<PathBuf>, ProblemDetails> {
    let Some(pkg) = env.vnf_package.as_deref() else {
        return Ok(None);
    };
    let unprocessable = |pointer: &str, reason: String| {
        ProblemDetails::new(
            422,
            format!("{pointer}: {reason}"),
            vec![FieldProblem {
                pointer: pointer.into(),
                reason,
            }],
        )
    };
    let path = Path::new(pkg);
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(unprocessable("/vnfPackage", "must not contain `..`".into()));
    }
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        ctx.packages_dir.join(path)
    };
    let root = match fs::canonicalize(&path) {
        Ok(p) if p.is_dir() => p,
        Ok(_) => {
            return Err(unprocessable(
                "/vnfPackage",
                format!(
                    "{} is not a directory (unpack .zip packages into a directory)",
                    path.display()
                ),
            ));
        }
        Err(e) => {
            return Err(unprocessable(
                "/vnfPackage",
                format!("{}: {e}", path.display()),
            ));
        }
    };
    let mut errors = Vec::new();
    for (pointer, rel) in env.package_paths() {
        let rel = rel.strip_prefix("./").unwrap_or(&rel);
        match fs::canonicalize(root.join(rel)) {
            Ok(p) if p.starts_with(&root) && p.is_file() => {}
            Ok(p) if !p.starts_with(&root) => errors.push(FieldProblem {
                pointer,
                reason: format!("`{rel}` resolves outside the VNF package"),
            }),
            Ok(_) => errors.push(FieldProblem {
                pointer,
                reason: format!("`{rel}` is not a file in the VNF package"),
            }),
            Err(_) => errors.push(FieldProblem {
                pointer,
                reason: format!("`{rel}` not found in the VNF package {}", root.display()),
            }),
        }
    }
    if errors.is_empty() {
        Ok(Some(root))
    } else {
        let detail = format!(
            "{} file(s) referenced by the request are missing from the VNF package",
            errors.len()
        );
        Err(ProblemDetails::new(422, detail, errors))
    }
}

fn conflict(status: u16, pointer: &str, reason: String) -> ProblemDetails {
    ProblemDetails::new(
        status,
        format!("{pointer}: {reason}"),
        vec![FieldProblem {
            pointer: pointer.into(),
            reason,
        }],
    )
}

/// Decides one candidate against the database (inside the batch transaction) and records it.
fn decide(
    spool: &Spool,
    tx: &mut Tx<'_>,
    c: &Candidate,
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<(Outcome, Move), StoreError> {
    let earlier = tx.intake_by_sha256(&c.sha256)?;
    // A file committed before a crash but never moved: move it, record nothing again.
    if let Some(prev) = earlier
        .iter()
        .find(|r| r.file_name.as_deref() == Some(&c.name))
    {
        match (prev.outcome, prev.vnf_lcm_op_occ_id.as_deref()) {
            (IntakeOutcome::Accepted | IntakeOutcome::Duplicate, Some(op)) => {
                let duplicate = prev.outcome == IntakeOutcome::Duplicate;
                let to = accepted_path(spool, op, duplicate, prev.id, &c.verdict);
                if !to.exists() {
                    return Ok((
                        Outcome::Recovered {
                            file: c.name.clone(),
                            to: to.clone(),
                        },
                        Move::Accept { to },
                    ));
                }
            }
            (IntakeOutcome::Rejected, _) if !spool.rejected_dir().join(&c.name).exists() => {
                if let Some(problem) = prev.problem.clone() {
                    let to = spool.rejected_dir().join(&c.name);
                    return Ok((
                        Outcome::Recovered {
                            file: c.name.clone(),
                            to,
                        },
                        Move::Reject { problem },
                    ));
                }
            }
            _ => {}
        }
    }
    match &c.verdict {
        Verdict::Invalid {
            vnf_instance_id,
            problem,
        } => record_rejection(tx, c, vnf_instance_id.as_deref(), problem, now),
        Verdict::Task { env } => decide_task(spool, tx, c, env, now),
        Verdict::Lcm(lcm) => {
            let env = &lcm.env;
            // Same content as an accepted request: idempotent duplicate.
            if let Some(prev) = earlier
                .iter()
                .find(|r| r.outcome == IntakeOutcome::Accepted)
            {
                let op = prev.vnf_lcm_op_occ_id.clone().unwrap_or_default();
                return record_duplicate(spool, tx, c, &env.vnf_instance_id, &op, now);
            }
            if let Some(rid) = env.request_id.as_deref()
                && let Some(op) = tx.operation_by_request_id(rid)?
            {
                let problem = conflict(
                    409,
                    "/requestId",
                    format!(
                        "requestId `{rid}` was already used by VnfLcmOpOcc {} for a different request",
                        op.id
                    ),
                );
                return record_rejection(tx, c, Some(&env.vnf_instance_id), &problem, now);
            }
            if let Err(problem) = check_instance_state(tx, env)? {
                return record_rejection(tx, c, Some(&env.vnf_instance_id), &problem, now);
            }
            record_acceptance(spool, tx, c, lcm, ctx, now)
        }
    }
}

/// Checks the request against the instance's state once its queued operations are done.
fn check_instance_state(
    tx: &Tx<'_>,
    env: &LcmEnvelope,
) -> Result<Result<(), ProblemDetails>, StoreError> {
    let op = LcmOperationType::from(env.operation);
    let id = &env.vnf_instance_id;
    let Some(instance) = tx.instance(id)? else {
        if op == LcmOperationType::Instantiate {
            return Ok(Ok(()));
        }
        return Ok(Err(conflict(
            404,
            "/vnfInstanceId",
            format!("VNF instance `{id}` is unknown"),
        )));
    };
    let queued = tx.unfinished_operations(id)?;
    let prospective = instance
        .instantiation_state
        .after(queued.iter().map(|o| o.operation));
    if !prospective.allows(op) {
        let why = match (op, queued.last()) {
            (LcmOperationType::Instantiate, Some(last)) => format!(
                "VNF instance `{id}` will be INSTANTIATED once VnfLcmOpOcc {} ({}) completes; TERMINATE it first",
                last.id, last.operation
            ),
            (LcmOperationType::Instantiate, None) => {
                format!("VNF instance `{id}` is already INSTANTIATED; TERMINATE it first")
            }
            (_, Some(last)) => format!(
                "VNF instance `{id}` will be NOT_INSTANTIATED once VnfLcmOpOcc {} ({}) completes",
                last.id, last.operation
            ),
            (_, None) => format!("VNF instance `{id}` is NOT_INSTANTIATED; INSTANTIATE it first"),
        };
        return Ok(Err(conflict(409, "/vnfInstanceId", why)));
    }
    if op == LcmOperationType::Scale
        && let Err(problem) = check_scale_level(tx, env, &instance, &queued)?
    {
        return Ok(Err(problem));
    }
    // HEAL of named VNFCs: they must exist when the instance's VNFCs are known. A VNFC is named
    // by its id, or by `<VDU>-<index>` when it is managed individually (adjusted HOT).
    if op == LcmOperationType::Heal
        && instance.instantiation_state == InstantiationState::Instantiated
    {
        let known: Vec<String> = tx
            .reader()
            .vnfcs(id)?
            .into_iter()
            .flat_map(|v| {
                let name = v
                    .vnfc_index
                    .map(|i| crate::heat::template::indexed(&v.vdu_id, i as u32));
                std::iter::once(v.id).chain(name)
            })
            .collect();
        let wanted = env.request.get("vnfcInstanceId").and_then(|v| v.as_array());
        let mut errors = Vec::new();
        for (i, v) in wanted.into_iter().flatten().enumerate() {
            if let Some(vnfc) = v.as_str()
                && !known.iter().any(|k| k == vnfc)
            {
                errors.push(FieldProblem {
                    pointer: format!("/request/vnfcInstanceId/{i}"),
                    reason: format!("VNFC `{vnfc}` is not a VNFC of VNF instance `{id}`"),
                });
            }
        }
        if !errors.is_empty() {
            return Ok(Err(ProblemDetails::new(
                404,
                "HEAL names unknown VNFCs",
                errors,
            )));
        }
    }
    Ok(Ok(()))
}

/// SCALE: the aspect exists in the VNFD and the level after every SCALE queued before this one
/// and this one stays within `0..=max_scale_level` (SOL003 §5.4.5.3.1: 422 otherwise).
fn check_scale_level(
    tx: &Tx<'_>,
    env: &LcmEnvelope,
    instance: &crate::store::InstanceRow,
    queued: &[crate::store::OperationRow],
) -> Result<Result<(), ProblemDetails>, StoreError> {
    let reader = tx.reader();
    // The instantiate that defines the VNFD: the last one queued, else the completed one.
    let mut base = reader.instantiate_request(&instance.id)?;
    let mut levels = instance.scale_status.clone();
    let mut pending = Vec::new();
    for q in queued {
        match q.operation {
            LcmOperationType::Instantiate => {
                base = reader.operation_params(&q.id)?;
                levels.clear();
                pending.clear();
            }
            LcmOperationType::Terminate => {
                base = None;
                pending.clear();
            }
            LcmOperationType::Scale => pending.push(q.id.clone()),
            LcmOperationType::Heal => {}
        }
    }
    let Some((params, Some(package))) = base else {
        return Ok(Ok(()));
    };
    let Ok(pkg) = crate::package::VnfPackage::load(Path::new(&package)) else {
        return Ok(Ok(())); // the engine reports an unreadable package with its own error
    };
    if levels.is_empty()
        && let Ok(req) = serde_json::from_str::<wire::InstantiateVnfRequest>(&params)
    {
        levels =
            crate::plan::scale::initial_levels(&pkg.vnfd, req.instantiation_level_id.as_deref());
    }
    for id in pending {
        if let Some((p, _)) = reader.operation_params(&id)?
            && let Ok(r) = serde_json::from_str::<wire::ScaleVnfRequest>(&p)
            && let Ok(next) = crate::plan::scale::apply(&pkg.vnfd, &levels, &r)
        {
            levels = next;
        }
    }
    let Ok(req) = serde_json::from_value::<wire::ScaleVnfRequest>(env.request.clone()) else {
        return Ok(Ok(()));
    };
    if let Err(e) = crate::plan::scale::apply(&pkg.vnfd, &levels, &req) {
        let pointer = e.pointer.clone().unwrap_or_else(|| "/request".into());
        let reason = if queued.is_empty() {
            e.reason.clone()
        } else {
            format!("{} (counting the operations queued before it)", e.reason)
        };
        return Ok(Err(ProblemDetails::new(
            422,
            format!("{pointer}: {reason}"),
            vec![FieldProblem { pointer, reason }],
        )));
    }
    Ok(Ok(()))
}

fn record_acceptance(
    spool: &Spool,
    tx: &mut Tx<'_>,
    c: &Candidate,
    lcm: &LcmCandidate,
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<(Outcome, Move), StoreError> {
    let LcmCandidate {
        env,
        raw_request,
        package,
        warnings,
    } = lcm;
    let op_id = uuid::Uuid::new_v4().to_string();
    let operation = LcmOperationType::from(env.operation);
    tx.create_instance_if_missing(&env.vnf_instance_id, now)?;
    let ahead = tx.unfinished_operations(&env.vnf_instance_id)?;
    let status_detail = match ahead.last() {
        Some(prev) => format!(
            "queued behind VnfLcmOpOcc {} ({} {})",
            prev.id, prev.operation, prev.operation_state
        ),
        None if !ctx.cloud_configured => {
            "waiting for a cloud: the configuration has no [cloud] section".to_owned()
        }
        None => "waiting for the operation engine".to_owned(),
    };
    let package_text = package.as_ref().map(|p| p.display().to_string());
    tx.insert_operation(
        &NewOperation {
            id: &op_id,
            vnf_instance_id: &env.vnf_instance_id,
            operation,
            operation_params: raw_request,
            vnf_package: package_text.as_deref(),
            request_id: env.request_id.as_deref(),
            is_automatic_invocation: false,
            status_detail: Some(&status_detail),
        },
        now,
    )?;
    let warnings_json = (!warnings.is_empty()).then(|| json(&warnings));
    let intake_id = tx.insert_intake(
        &NewIntake {
            file_name: &c.name,
            content_sha256: &c.sha256,
            request_id: env.request_id.as_deref(),
            outcome: "ACCEPTED",
            vnf_instance_id: Some(&env.vnf_instance_id),
            vnf_lcm_op_occ_id: Some(&op_id),
            problem: None,
            warnings: warnings_json.as_deref(),
        },
        now,
    )?;
    let message = format!("{operation} request accepted from spool file {}", c.name);
    let evidence = serde_json::json!({"file": c.name, "sha256": c.sha256, "intakeId": intake_id, "warnings": warnings});
    tx.append_event(
        &NewEvent {
            kind: "REQUEST_ACCEPTED",
            vnf_instance_id: Some(&env.vnf_instance_id),
            vnf_lcm_op_occ_id: Some(&op_id),
            vnfc_id: None,
            message: &message,
            evidence: Some(&evidence.to_string()),
        },
        now,
    )?;
    let to = accepted_path(spool, &op_id, false, intake_id, &c.verdict);
    Ok((
        Outcome::Accepted {
            file: c.name.clone(),
            vnf_lcm_op_occ_id: op_id,
            vnf_instance_id: env.vnf_instance_id.clone(),
            operation: operation.as_str().to_owned(),
            status_detail: Some(status_detail),
            warnings: warnings.to_vec(),
        },
        Move::Accept { to },
    ))
}

fn decide_task(
    spool: &Spool,
    tx: &mut Tx<'_>,
    c: &Candidate,
    env: &TaskEnvelope,
    now: Timestamp,
) -> Result<(Outcome, Move), StoreError> {
    let task = match env.operation {
        TaskOperation::Retry => "RETRY",
        TaskOperation::Fail => "FAIL",
        TaskOperation::Rollback => "ROLLBACK",
    };
    let Some(op) = tx.reader().operation(&env.vnf_lcm_op_occ_id)? else {
        let problem = conflict(
            404,
            "/vnfLcmOpOccId",
            format!("VnfLcmOpOcc `{}` is unknown", env.vnf_lcm_op_occ_id),
        );
        return record_rejection(tx, c, None, &problem, now);
    };
    if op.operation_state != OperationState::FailedTemp || op.pending_task.is_some() {
        let why = match &op.pending_task {
            Some(p) => format!("VnfLcmOpOcc {} already has a pending {p}", op.id),
            None => format!(
                "{task} needs FAILED_TEMP, but VnfLcmOpOcc {} is {}",
                op.id, op.operation_state
            ),
        };
        let problem = conflict(409, "/vnfLcmOpOccId", why);
        return record_rejection(tx, c, Some(&op.vnf_instance_id), &problem, now);
    }
    // FAIL is a state change only; RETRY and ROLLBACK are carried out by the engine.
    if env.operation == TaskOperation::Fail {
        tx.set_operation_state(&op.id, OperationState::Failed, None, now)?;
    } else {
        let pending = match env.operation {
            TaskOperation::Retry => PendingTask::Retry,
            _ => PendingTask::Rollback,
        };
        tx.set_pending_task(&op.id, pending)?;
    }
    let intake_id = tx.insert_intake(
        &NewIntake {
            file_name: &c.name,
            content_sha256: &c.sha256,
            request_id: env.request_id.as_deref(),
            outcome: "ACCEPTED",
            vnf_instance_id: Some(&op.vnf_instance_id),
            vnf_lcm_op_occ_id: Some(&op.id),
            problem: None,
            warnings: None,
        },
        now,
    )?;
    let message = format!(
        "{task} of VnfLcmOpOcc {} accepted from spool file {}",
        op.id, c.name
    );
    tx.append_event(
        &NewEvent {
            kind: "TASK_ACCEPTED",
            vnf_instance_id: Some(&op.vnf_instance_id),
            vnf_lcm_op_occ_id: Some(&op.id),
            vnfc_id: None,
            message: &message,
            evidence: Some(
                &serde_json::json!({"file": c.name, "task": task, "intakeId": intake_id})
                    .to_string(),
            ),
        },
        now,
    )?;
    let to = accepted_path(spool, &op.id, false, intake_id, &c.verdict);
    Ok((
        Outcome::Accepted {
            file: c.name.clone(),
            vnf_lcm_op_occ_id: op.id.clone(),
            vnf_instance_id: op.vnf_instance_id.clone(),
            operation: task.to_owned(),
            status_detail: None,
            warnings: Vec::new(),
        },
        Move::Accept { to },
    ))
}

fn record_duplicate(
    spool: &Spool,
    tx: &mut Tx<'_>,
    c: &Candidate,
    vnf_instance_id: &str,
    op_id: &str,
    now: Timestamp,
) -> Result<(Outcome, Move), StoreError> {
    let intake_id = tx.insert_intake(
        &NewIntake {
            file_name: &c.name,
            content_sha256: &c.sha256,
            request_id: None,
            outcome: "DUPLICATE",
            vnf_instance_id: Some(vnf_instance_id),
            vnf_lcm_op_occ_id: Some(op_id),
            problem: None,
            warnings: None,
        },
        now,
    )?;
    let message = format!(
        "spool file {} repeats the request of VnfLcmOpOcc {op_id}; no new operation",
        c.name
    );
    tx.append_event(
        &NewEvent {
            kind: "REQUEST_DUPLICATE",
            vnf_instance_id: Some(vnf_instance_id),
            vnf_lcm_op_occ_id: Some(op_id),
            vnfc_id: None,
            message: &message,
            evidence: Some(
                &serde_json::json!({"file": c.name, "sha256": c.sha256, "intakeId": intake_id})
                    .to_string(),
            ),
        },
        now,
    )?;
    let to = accepted_path(spool, op_id, true, intake_id, &c.verdict);
    Ok((
        Outcome::Duplicate {
            file: c.name.clone(),
            vnf_lcm_op_occ_id: op_id.to_owned(),
        },
        Move::Accept { to },
    ))
}

fn record_rejection(
    tx: &mut Tx<'_>,
    c: &Candidate,
    vnf_instance_id: Option<&str>,
    problem: &ProblemDetails,
    now: Timestamp,
) -> Result<(Outcome, Move), StoreError> {
    let problem_json = json(problem);
    tx.insert_intake(
        &NewIntake {
            file_name: &c.name,
            content_sha256: &c.sha256,
            request_id: None,
            outcome: "REJECTED",
            vnf_instance_id,
            vnf_lcm_op_occ_id: None,
            problem: Some(&problem_json),
            warnings: None,
        },
        now,
    )?;
    let message = format!("spool file {} rejected: {}", c.name, problem.detail);
    tx.append_event(
        &NewEvent {
            kind: "REQUEST_REJECTED",
            vnf_instance_id,
            vnf_lcm_op_occ_id: None,
            vnfc_id: None,
            message: &message,
            evidence: Some(&problem_json),
        },
        now,
    )?;
    Ok((
        Outcome::Rejected {
            file: c.name.clone(),
            vnf_instance_id: vnf_instance_id.map(str::to_owned),
            problem: problem.clone(),
        },
        Move::Reject {
            problem: problem.clone(),
        },
    ))
}

/// Where an accepted file goes: `<op>.json`, `<op>.dup-<intake id>.json` for a duplicate, or
/// `<op>.<task>-<intake id>.json` for a RETRY/FAIL/ROLLBACK envelope.
fn accepted_path(
    spool: &Spool,
    op: &str,
    duplicate: bool,
    intake_id: i64,
    verdict: &Verdict,
) -> PathBuf {
    let name = match verdict {
        Verdict::Task { env } => {
            let task = match env.operation {
                TaskOperation::Retry => "retry",
                TaskOperation::Fail => "fail",
                TaskOperation::Rollback => "rollback",
            };
            format!("{op}.{task}-{intake_id}.json")
        }
        _ if duplicate => format!("{op}.dup-{intake_id}.json"),
        _ => format!("{op}.json"),
    };
    spool.accepted_dir().join(name)
}

/// Writes `rejected/<name>.error.json` (atomically), then moves the file to `rejected/<name>`.
/// The error file is written first, so a crash in between leaves the request in `new/` to be
/// processed again, never a rejected file without its explanation.
fn reject_file(spool: &Spool, path: &Path, name: &str, problem: &ProblemDetails) -> io::Result<()> {
    let dir = spool.rejected_dir();
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

fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl From<wire::LcmOperation> for LcmOperationType {
    fn from(op: wire::LcmOperation) -> Self {
        match op {
            wire::LcmOperation::Instantiate => Self::Instantiate,
            wire::LcmOperation::Scale => Self::Scale,
            wire::LcmOperation::Heal => Self::Heal,
            wire::LcmOperation::Terminate => Self::Terminate,
        }
    }
}
