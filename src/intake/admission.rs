//! Admission rules: whether a request file is accepted, a duplicate of an earlier request, or
//! rejected, and the record of that outcome in the batch's transaction. A file is first examined
//! on its own (size, envelope, VNF package contents), then decided against the database: the
//! instance's state once its queued operations are done, scale level bounds, HEAL targets, and
//! the preconditions of RETRY, FAIL and ROLLBACK.
//!
//! The rules are pure functions of the examined request and the rows read for it; the functions
//! that read the rows, and those that record an outcome, go through the store's [`Tx`].
//! Duplicates (same content as an accepted request) are accepted idempotently: an `intake` row
//! and an event, no new operation.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest as _, Sha256};

use super::maildir::{Destination, KeptCopy};
use super::snapshot::{self, SnapshotError};
use crate::store::{
    InstanceRow, IntakeRow, NewEvent, NewIntake, NewOperation, OperationRow, ReaderRef,
    RequestBody, StoreError, Tx, VnfcRow,
};
use vnfkeeper_core::model::{
    EventKind, FieldProblem, InstantiationState, IntakeOutcome, LcmOperationType, OpOccId,
    OperationState, PendingTask, ProblemDetails, Timestamp, VnfInstanceId,
};
use vnfkeeper_core::package::Snapshot;
use vnfkeeper_core::package::Vnfd;
use vnfkeeper_core::wire::{self, Envelope, FieldError, LcmEnvelope, TaskEnvelope, TaskOperation};

/// What intake did with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A new operation occurrence was recorded in `STARTING`.
    Accepted {
        /// File name in `new/`.
        file: String,
        /// The new vnfLcmOpOccId.
        vnf_lcm_op_occ_id: OpOccId,
        /// vnfInstanceId.
        vnf_instance_id: VnfInstanceId,
        /// The operation (or task) requested, e.g. `INSTANTIATE`, `RETRY`.
        operation: String,
        /// Why it waits, if it does.
        status_detail: Option<String>,
        /// Normalisations applied or noticed.
        warnings: Vec<FieldProblem>,
        /// For an accepted FAIL task: the type of the operation it ended in `FAILED`
        /// (`None` for everything else).
        ended: Option<LcmOperationType>,
    },
    /// Same request as an earlier one: no new operation.
    Duplicate {
        /// File name in `new/`.
        file: String,
        /// The operation the earlier copy created.
        vnf_lcm_op_occ_id: OpOccId,
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
    /// A spool entry that is not a regular file of at most the size limit, and that could not be
    /// moved to `rejected/`: moved to `quarantine/` instead (no `.error.json`).
    Quarantined {
        /// File name in `new/`, as `maildir::display_name` shows it.
        file: String,
        /// Where it went.
        to: PathBuf,
        /// Why it was refused and why it is not in `rejected/`.
        reason: String,
    },
    /// Committed earlier (before a crash, or a move that failed) but still in `new/`; moved now,
    /// nothing recorded twice.
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
    /// The package store: accepted requests' packages are copied here (`<state>/package-store`,
    /// see [`super::snapshot`]).
    pub package_store: &'a Path,
    /// Whether a cloud is configured (only changes the "why it waits" text).
    pub cloud_configured: bool,
}

/// A request file examined on its own, before the database is consulted.
pub(super) struct Examined {
    /// File name in `new/`.
    pub name: String,
    /// SHA-256 of the content; never stored as it is (see `digest`).
    pub sha256: [u8; 32],
    /// Keyed digest of the content (`SecretsKey::digest` of `sha256`, set by `spool::process`
    /// before the database is consulted): the identity of a request for duplicates and
    /// recovery, as the `intake` row and the `.sha256` sidecar keep it.
    pub digest: String,
    /// What the content is.
    pub verdict: Verdict,
    /// The copy kept in `accepted/` or `rejected/`: the content with every secret redacted.
    pub kept: KeptCopy,
    /// Who submitted the file (its owner), recorded on its `intake` row; `None` for a request
    /// not read from the spool.
    pub submitter: Option<Submitter>,
}

/// The submitter of a spool file: its owner's uid and, when the password database names it,
/// the user name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Submitter {
    /// Owner uid of the file (`fstat`).
    pub uid: u32,
    /// That uid's user name at intake.
    pub name: Option<String>,
    /// The operator's file name, as the submitting command labelled the spool file.
    pub file: Option<String>,
    /// `SUDO_USER` of the submitting command (only for a file owned by root).
    pub sudo_user: Option<String>,
}

/// What a request file's content is.
pub(super) enum Verdict {
    /// A valid INSTANTIATE, SCALE, HEAL or TERMINATE.
    Lcm(Box<LcmRequest>),
    /// A valid RETRY, FAIL or ROLLBACK.
    Task(TaskEnvelope),
    /// Rejected without consulting the database.
    Invalid {
        /// vnfInstanceId, if the file names a plausible one.
        vnf_instance_id: Option<String>,
        /// Why.
        problem: ProblemDetails,
    },
}

/// A valid LCM request with what was derived from it.
pub(super) struct LcmRequest {
    env: LcmEnvelope,
    /// Pointers (`/request/...`) of the secrets validation found in it.
    secret_pointers: Vec<String>,
    /// The SOL003 body as the store keeps it (secrets split off), made here on the reading
    /// threads rather than inside the serial write transaction.
    body: RequestBody,
    /// The snapshot of the package it names (INSTANTIATE).
    package: Option<Snapshot>,
    warnings: Vec<FieldProblem>,
}

/// Examines the content `bytes` of the file `name`: at most [`wire::MAX_REQUEST_BYTES`] (413
/// otherwise), a valid envelope (400 with every defect otherwise), and for a request naming a
/// `vnfPackage`, a package that can be snapshotted ([`snapshot::take`]) holding every file the
/// request references (422 otherwise). Reads the package and writes its snapshot, nothing else.
pub(super) fn examine(
    name: String,
    bytes: &[u8],
    ctx: &IntakeContext<'_>,
    batch: &BatchPackages,
) -> Examined {
    let sha256: [u8; 32] = Sha256::digest(bytes).into();
    let verdict = match parse(bytes) {
        Err((vnf_instance_id, problem)) => Verdict::Invalid {
            vnf_instance_id,
            problem,
        },
        Ok(parsed) => match parsed.envelope {
            Envelope::Task(env) => Verdict::Task(env),
            Envelope::Lcm(env) => match check_package(&env, &parsed.package_paths, ctx, batch) {
                Err(problem) => Verdict::Invalid {
                    vnf_instance_id: Some(env.vnf_instance_id.clone()),
                    problem,
                },
                Ok(package) => {
                    let in_body: Vec<String> = parsed
                        .secret_pointers
                        .iter()
                        .filter_map(|p| p.strip_prefix("/request").map(str::to_owned))
                        .collect();
                    let body = RequestBody::redacted(&env.request, &in_body);
                    Verdict::Lcm(Box::new(LcmRequest {
                        env,
                        secret_pointers: parsed.secret_pointers,
                        body,
                        package,
                        warnings: parsed.warnings,
                    }))
                }
            },
        },
    };
    let kept = kept_copy(bytes, &verdict);
    Examined {
        name,
        sha256,
        digest: String::new(),
        verdict,
        kept,
        submitter: None,
    }
}

/// The content checks of [`examine`] that need neither the database nor the package: at most
/// [`wire::MAX_REQUEST_BYTES`] (413 otherwise) and a valid envelope (400 with every defect,
/// by JSON pointer, otherwise). Errors: the file's vnfInstanceId when it names a plausible one,
/// and the ProblemDetails intake records for it.
fn parse(bytes: &[u8]) -> Result<wire::Parsed, (Option<String>, ProblemDetails)> {
    if bytes.len() > wire::MAX_REQUEST_BYTES {
        return Err((
            None,
            ProblemDetails::new(
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
        ));
    }
    wire::parse_envelope(bytes)
        .map_err(|errors| (sniff_instance_id(bytes), invalid_request(errors)))
}

/// `vnfkeeper submit`'s check before it writes into the spool: what intake checks of a file on
/// its own ([`parse`]: size, the envelope with every defect), the same ProblemDetails intake
/// would record. Not checked here (the daemon does, with its rights): the package a request
/// names and the files it references (422), and everything that needs the database (404, 409).
pub(crate) fn precheck(bytes: &[u8]) -> Result<wire::Parsed, ProblemDetails> {
    parse(bytes).map_err(|(_, problem)| problem)
}

/// A request vnfkeeper did not read from its spool — a Tacker INSTANTIATE's envelope
/// (`tacker::instantiate_envelope`), named `name` in logs — examined exactly as a spool file
/// is ([`examine`]: size, envelope validation with every defect, package snapshot and the files
/// the request references). Returns the body as the store keeps it (secrets split off) and the
/// package snapshot; errors: the ProblemDetails a spool file would be rejected with, or a task
/// envelope (refused: only LCM requests come from Tacker).
pub(crate) fn examine_external(
    name: &str,
    bytes: &[u8],
    ctx: &IntakeContext<'_>,
) -> Result<(RequestBody, Option<Snapshot>), ProblemDetails> {
    match examine(name.to_owned(), bytes, ctx, &BatchPackages::default()).verdict {
        Verdict::Lcm(lcm) => {
            let LcmRequest { body, package, .. } = *lcm;
            Ok((body, package))
        }
        Verdict::Task(_) => Err(ProblemDetails::new(
            400,
            "a task envelope is not an LCM request".to_owned(),
            vec![],
        )),
        Verdict::Invalid { problem, .. } => Err(problem),
    }
}

/// The copy of a request file that intake keeps (see [`KeptCopy`]): a valid LCM request with every
/// secret its validation found replaced by `"***"` ([`wire::redact::redact`]); a task envelope as
/// it is (it holds no secret); an invalid file that parses as JSON redacted by field name
/// ([`wire::redact::redact_by_name`], as no validated walk exists); anything else (too large,
/// not UTF-8, not JSON) as it is but private to the daemon (mode 0600). A file without any
/// secret keeps its exact bytes.
fn kept_copy(bytes: &[u8], verdict: &Verdict) -> KeptCopy {
    let json = || -> Option<serde_json::Value> {
        if bytes.len() > wire::MAX_REQUEST_BYTES {
            return None;
        }
        serde_json::from_slice(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)).ok()
    };
    let redacted = |doc: serde_json::Value| {
        let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        out.push(b'\n');
        KeptCopy::shared(out)
    };
    match verdict {
        Verdict::Task(_) => KeptCopy::shared(bytes.to_vec()),
        Verdict::Lcm(lcm) => {
            let pointers = &lcm.secret_pointers;
            match json() {
                _ if pointers.is_empty() => KeptCopy::shared(bytes.to_vec()),
                Some(doc) => redacted(wire::redact::redact(&doc, pointers).0),
                None => KeptCopy::private(bytes.to_vec()),
            }
        }
        Verdict::Invalid { .. } => match json() {
            Some(doc) => match wire::redact::redact_by_name(&doc) {
                (_, 0) => KeptCopy::shared(bytes.to_vec()),
                (doc, _) => redacted(doc),
            },
            None => KeptCopy::private(bytes.to_vec()),
        },
    }
}

/// `req`'s submitter as its `intake` row records it, when known.
fn submitter(req: &Examined) -> Option<crate::store::Submitter> {
    req.submitter.as_ref().map(|s| crate::store::Submitter {
        uid: s.uid,
        name: s.name.clone(),
        sudo_user: s.sudo_user.clone(),
        file: s.file.clone(),
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
    ProblemDetails::new(400, detail, errors)
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

/// Resolves `vnfPackage` (relative paths against `ctx.packages_dir`, `..` refused), snapshots
/// it into `ctx.package_store` and checks that every file the request references
/// (`package_paths`, as validation found them) is a file of the snapshot. `Ok(None)` when the
/// envelope names no package. Errors: 422 naming each defective field (the package itself:
/// `/vnfPackage` with the reason), 500 when the package store cannot be written.
fn check_package(
    env: &LcmEnvelope,
    package_paths: &[(String, String)],
    ctx: &IntakeContext<'_>,
    batch: &BatchPackages,
) -> Result<Option<Snapshot>, ProblemDetails> {
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
    let root = fs::canonicalize(&path)
        .map_err(|e| unprocessable("/vnfPackage", format!("{}: {e}", path.display())))?;
    let (snap, files) = batch.take(&root, || {
        match snapshot::take(
            &root,
            ctx.package_store,
            &vnfkeeper_core::package::files::LIMITS,
        ) {
            Ok((snap, files)) => Ok((snap, Arc::new(files))),
            Err(SnapshotError::Package(why)) => Err(unprocessable(
                "/vnfPackage",
                format!("VNF package {}: {why}", root.display()),
            )),
            Err(e @ SnapshotError::Store { .. }) => {
                let reason = e.to_string();
                Err(ProblemDetails::new(
                    500,
                    format!("/vnfPackage: {reason}"),
                    vec![FieldProblem {
                        pointer: "/vnfPackage".into(),
                        reason,
                    }],
                ))
            }
        }
    })?;
    let mut errors = Vec::new();
    for (pointer, rel) in package_paths {
        let rel = rel.strip_prefix("./").unwrap_or(rel);
        if files.get(rel).is_some() {
            continue;
        }
        let is_dir = files.iter().any(|(p, _)| {
            p.strip_prefix(rel)
                .is_some_and(|rest| rest.starts_with('/'))
        });
        let reason = if is_dir {
            format!("`{rel}` is not a file in the VNF package")
        } else {
            format!("`{rel}` not found in the VNF package {}", root.display())
        };
        errors.push(FieldProblem {
            pointer: pointer.clone(),
            reason,
        });
    }
    // A VNFD of several flavours (one file each): the request's must be one of them.
    if let Some(flavour) = env.request.get("flavourId").and_then(|f| f.as_str())
        && let Err(why) = snap.vnfd.for_flavour(flavour)
    {
        return Err(unprocessable("/request/flavourId", why.to_string()));
    }
    if errors.is_empty() {
        Ok(Some(snap))
    } else {
        let detail = format!(
            "{} file(s) referenced by the request are missing from the VNF package",
            errors.len()
        );
        Err(ProblemDetails::new(422, detail, errors))
    }
}

/// What one package snapshot gave: the snapshot and the files read, or the rejection.
type Taken = Result<(Snapshot, Arc<vnfkeeper_core::package::PackageFiles>), ProblemDetails>;

/// The packages snapshotted in one intake batch, by canonical path: requests of one batch that
/// name the same package share one read of it (a batch of thousands of INSTANTIATEs of one
/// package reads it once). Each batch starts empty, so a package changed between batches is
/// read again.
#[derive(Default)]
pub(super) struct BatchPackages(Mutex<HashMap<PathBuf, Arc<OnceLock<Taken>>>>);

impl BatchPackages {
    /// The result for `root`: `take()` the first time in this batch, the same result after
    /// (threads asking at once wait for the first).
    fn take(&self, root: &Path, take: impl FnOnce() -> Taken) -> Taken {
        let cell = match self.0.lock() {
            Ok(mut m) => m.entry(root.to_path_buf()).or_default().clone(),
            Err(_) => return take(),
        };
        cell.get_or_init(take).clone()
    }
}

/// The VNFDs a batch's SCALE and HEAL requests are checked against, by package path as stored
/// (`vnf_package`): loaded before the batch's write transaction, so no package is read inside
/// it.
pub(super) type BaseVnfds = HashMap<String, BaseVnfd>;

/// One base package of [`BaseVnfds`]: its VNFD, and the whole package when it was loaded from
/// its path (a completed INSTANTIATE's), for the BaseHOT a flavour may need to know its roles.
#[derive(Clone)]
pub(super) struct BaseVnfd {
    vnfd: Arc<Vnfd>,
    package: Option<Arc<vnfkeeper_core::package::VnfPackage>>,
}

impl BaseVnfd {
    /// The flavour driver of `req` over this package, for the flavour's refusals (no package
    /// files: refusals read only the VNFD and the BaseHOT).
    fn driver(
        &self,
        vnf_instance_id: &str,
        req: wire::InstantiateVnfRequest,
    ) -> Box<dyn vnfkeeper_core::flavour::MgmtDriver> {
        let hot = self
            .package
            .as_ref()
            .and_then(|p| p.base_hot(&req.flavour_id).ok());
        let floating_ip_ports = hot
            .as_ref()
            .map(|b| b.floating_ip_ports())
            .unwrap_or_default();
        let base_hot = hot.map(|b| b.template);
        let vnfd = self.vnfd.for_flavour(&req.flavour_id).unwrap_or(&self.vnfd);
        vnfkeeper_core::flavour::select(vnfkeeper_core::flavour::Inputs {
            vnf_instance_id: vnf_instance_id.into(),
            vnfd: vnfd.clone(),
            req,
            files: BTreeMap::new(),
            base_hot,
            floating_ip_ports,
        })
    }
}

/// Loads [`BaseVnfds`] for `reqs` (one batch): the snapshots of the batch's own INSTANTIATEs
/// and, for each SCALE and HEAL, the packages its instance's INSTANTIATEs use
/// ([`ReaderRef::scale_base_packages`]). A package that does not load is left out (the check
/// then passes, and the engine reports the package). Errors: database only.
pub(super) fn load_base_vnfds<'e>(
    reader: ReaderRef<'_>,
    reqs: impl Iterator<Item = &'e Examined>,
) -> Result<BaseVnfds, StoreError> {
    let mut bases = BaseVnfds::new();
    for req in reqs {
        let Verdict::Lcm(lcm) = &req.verdict else {
            continue;
        };
        if let Some(s) = &lcm.package {
            let base = BaseVnfd {
                vnfd: s.vnfd.clone(),
                package: None,
            };
            bases.insert(s.dir.display().to_string(), base);
        }
        if !matches!(
            LcmOperationType::from(lcm.env.operation),
            LcmOperationType::Scale | LcmOperationType::Heal
        ) {
            continue;
        }
        for path in reader.scale_base_packages(&VnfInstanceId::from(&lcm.env.vnf_instance_id))? {
            if bases.contains_key(&path) {
                continue;
            }
            match vnfkeeper_core::package::VnfPackage::load(Path::new(&path)) {
                Ok(pkg) => {
                    let base = BaseVnfd {
                        vnfd: Arc::new(pkg.vnfd.clone()),
                        package: Some(Arc::new(pkg)),
                    };
                    bases.insert(path, base);
                }
                Err(e) => {
                    tracing::debug!(vnf_package = %path, error = %e, "SCALE check: package not loaded")
                }
            }
        }
    }
    Ok(bases)
}

/// Where the outcome committed for this very file (same name and content, among `earlier`: the
/// `intake` rows with its content hash) puts it, or `None` when nothing was committed for it (or
/// the committed row cannot say where). A file found in `new/` with a committed outcome was
/// committed before a crash but never moved.
pub(super) fn committed_destination(earlier: &[IntakeRow], req: &Examined) -> Option<Destination> {
    let prev = earlier
        .iter()
        .find(|r| r.file_name.as_deref() == Some(req.name.as_str()))?;
    match (
        prev.outcome,
        prev.vnf_lcm_op_occ_id.as_ref().map(OpOccId::as_str),
    ) {
        (IntakeOutcome::Accepted | IntakeOutcome::Duplicate, Some(op)) => {
            let op = op.to_owned();
            Some(match &req.verdict {
                Verdict::Task(env) => Destination::Task {
                    op,
                    task: env.operation,
                    intake_id: prev.id,
                },
                _ if prev.outcome == IntakeOutcome::Duplicate => Destination::Duplicate {
                    op,
                    intake_id: prev.id,
                },
                _ => Destination::Accepted { op },
            })
        }
        (IntakeOutcome::Rejected, _) => prev
            .problem
            .clone()
            .map(|problem| Destination::Rejected { problem }),
        _ => None,
    }
}

/// Decides `req` against the database inside the batch transaction and records the outcome: an
/// `intake` row and an event, plus the new operation (accepted LCM request) or the task's effect
/// (accepted RETRY/FAIL/ROLLBACK). `earlier` are the `intake` rows with the same content hash.
/// Reads what the decision needs, decides ([`judge_lcm`], [`check_task`]: pure), then records
/// the [`Admission`] in one call. Returns what intake reports and where the file goes. Errors:
/// database only.
pub(super) fn decide(
    tx: &mut Tx<'_>,
    req: &Examined,
    earlier: &[IntakeRow],
    ctx: &IntakeContext<'_>,
    bases: &BaseVnfds,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    let admission = match &req.verdict {
        Verdict::Invalid {
            vnf_instance_id,
            problem,
        } => Admission::Reject {
            vnf_instance_id: vnf_instance_id.clone(),
            problem: problem.clone(),
        },
        Verdict::Task(env) => {
            let op = tx
                .reader()
                .operation(&OpOccId::from(&env.vnf_lcm_op_occ_id))?;
            match check_task(env, op.as_ref()) {
                Ok(op) => Admission::Task {
                    env,
                    op: op.clone(),
                },
                Err((vnf_instance_id, problem)) => Admission::Reject {
                    vnf_instance_id: vnf_instance_id.map(str::to_owned),
                    problem,
                },
            }
        }
        Verdict::Lcm(lcm) => match duplicate_of(earlier) {
            Some(op) => Admission::Duplicate {
                vnf_instance_id: lcm.env.vnf_instance_id.clone(),
                op,
            },
            None => {
                let facts = LcmFacts::read(tx, &lcm.env)?;
                match judge_lcm(&lcm.env, &facts, bases) {
                    Ok(ahead) => Admission::Accept { lcm, ahead },
                    Err(problem) => Admission::Reject {
                        vnf_instance_id: Some(lcm.env.vnf_instance_id.clone()),
                        problem,
                    },
                }
            }
        },
    };
    record(tx, req, admission, ctx, now)
}

/// What intake decided for one request, before anything of it is written.
enum Admission<'r> {
    /// Rejected with `problem` (about `vnf_instance_id` when it is known).
    Reject {
        vnf_instance_id: Option<String>,
        problem: ProblemDetails,
    },
    /// The same content as the request that created operation `op`.
    Duplicate { vnf_instance_id: String, op: String },
    /// A task (RETRY/FAIL/ROLLBACK) accepted for `op`.
    Task {
        env: &'r TaskEnvelope,
        op: OperationRow,
    },
    /// An LCM request accepted, queued behind `ahead` (the instance's unfinished operations).
    Accept {
        lcm: &'r LcmRequest,
        ahead: Vec<OperationRow>,
    },
}

/// Records `admission` of `req`: the `intake` row, the event, and the operation or the task's
/// effect. Errors: database only.
fn record(
    tx: &mut Tx<'_>,
    req: &Examined,
    admission: Admission<'_>,
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    match admission {
        Admission::Reject {
            vnf_instance_id,
            problem,
        } => record_rejection(tx, req, vnf_instance_id.as_deref(), &problem, now),
        Admission::Duplicate {
            vnf_instance_id,
            op,
        } => record_duplicate(tx, req, &vnf_instance_id, &op, now),
        Admission::Task { env, op } => record_task(tx, req, env, &op, now),
        Admission::Accept { lcm, ahead } => record_acceptance(tx, req, lcm, &ahead, ctx, now),
    }
}

/// What the store holds that an LCM request's admission depends on, read before deciding.
struct LcmFacts {
    /// The operation that already used the request's `requestId`, if any.
    request_id_user: Option<OperationRow>,
    /// The instance, if the database knows it, and its unfinished operations (oldest first).
    instance: Option<(InstanceRow, Vec<OperationRow>)>,
    /// HEAL of an instantiated instance: its VNFCs (empty otherwise).
    vnfcs: Vec<VnfcRow>,
    /// HEAL of an instantiated instance: its last completed INSTANTIATE's request and package.
    heal_base: Option<(String, Option<String>)>,
    /// SCALE: the base INSTANTIATE's stored request and package, and the stored requests of
    /// the SCALEs queued before this one (see [`scale_start`]).
    scale: ScaleFacts,
}

/// The stored requests a SCALE's level check replays.
#[derive(Default)]
struct ScaleFacts {
    /// The base INSTANTIATE's request and package path, when there is a base.
    base: Option<(String, Option<String>)>,
    /// The queued SCALEs' requests, in arrival order.
    pending: Vec<String>,
}

impl LcmFacts {
    /// Reads the facts for `env`. Errors: database only.
    fn read(tx: &Tx<'_>, env: &LcmEnvelope) -> Result<Self, StoreError> {
        let request_id_user = match env.request_id.as_deref() {
            Some(rid) => tx.operation_by_request_id(rid)?,
            None => None,
        };
        let Some(instance) = tx.instance(&VnfInstanceId::from(&env.vnf_instance_id))? else {
            return Ok(Self {
                request_id_user,
                instance: None,
                vnfcs: Vec::new(),
                heal_base: None,
                scale: ScaleFacts::default(),
            });
        };
        let queued = tx.unfinished_operations(&instance.id)?;
        let op = LcmOperationType::from(env.operation);
        let reader = tx.reader();
        let (vnfcs, heal_base) = if op == LcmOperationType::Heal
            && instance.instantiation_state == InstantiationState::Instantiated
        {
            (
                reader.vnfcs(&instance.id)?,
                reader.instantiate_request(&instance.id)?,
            )
        } else {
            (Vec::new(), None)
        };
        let mut scale = ScaleFacts::default();
        if op == LcmOperationType::Scale {
            let start = scale_start(&instance, &queued);
            scale.base = match start.base {
                ScaleBase::Completed => reader.instantiate_request(&instance.id)?,
                ScaleBase::Queued(id) => reader.operation_params(&OpOccId::from(id))?,
                ScaleBase::Terminated => None,
            };
            for id in &start.pending {
                if let Some((p, _)) = reader.operation_params(&OpOccId::from(*id))? {
                    scale.pending.push(p);
                }
            }
        }
        Ok(Self {
            request_id_user,
            instance: Some((instance, queued)),
            vnfcs,
            heal_base,
            scale,
        })
    }
}

/// Judges an LCM request on `facts` (pure): `Ok(ahead)` to accept it behind the instance's
/// unfinished operations `ahead` (none for an instance not yet known), else the rejection.
fn judge_lcm(
    env: &LcmEnvelope,
    facts: &LcmFacts,
    bases: &BaseVnfds,
) -> Result<Vec<OperationRow>, ProblemDetails> {
    if let (Some(rid), Some(op)) = (env.request_id.as_deref(), &facts.request_id_user) {
        return Err(request_id_reused(rid, op));
    }
    let op = LcmOperationType::from(env.operation);
    let Some((instance, queued)) = &facts.instance else {
        return check_unknown_instance(env).map(|()| Vec::new());
    };
    if instance.origin == vnfkeeper_core::tacker::Origin::Tacker {
        // Tacker owns this VNF and its Heat stack: its lifecycle goes through Tacker.
        return Err(conflict(
            409,
            "/vnfInstanceId",
            format!(
                "VNF instance {} is owned by Tacker (companion mode): request {op} from Tacker",
                instance.id
            ),
        ));
    }
    check_state(env, instance, queued)?;
    if op == LcmOperationType::Scale {
        check_scale_level(env, instance, queued, &facts.scale, bases)?;
    }
    if op == LcmOperationType::Heal
        && instance.instantiation_state == InstantiationState::Instantiated
    {
        check_heal_targets(env, &facts.vnfcs)?;
        check_heal_flavour(env, facts, bases)?;
    }
    Ok(queued.clone())
}

/// Same content as an accepted request: the operation that request created (the copy is an
/// idempotent duplicate).
fn duplicate_of(earlier: &[IntakeRow]) -> Option<String> {
    earlier
        .iter()
        .find(|r| r.outcome == IntakeOutcome::Accepted)
        .map(|r| {
            r.vnf_lcm_op_occ_id
                .as_ref()
                .map(OpOccId::to_string)
                .unwrap_or_default()
        })
}

/// 409: the `requestId` was already used by `op` for a request with different content.
fn request_id_reused(rid: &str, op: &OperationRow) -> ProblemDetails {
    conflict(
        409,
        "/requestId",
        format!(
            "requestId `{rid}` was already used by VnfLcmOpOcc {} for a different request",
            op.id
        ),
    )
}

/// RETRY, FAIL and ROLLBACK (SOL003 §5.4.14–16) apply to a known occurrence (404 otherwise) in
/// `FAILED_TEMP` with no task pending (409 otherwise). Returns the occurrence, or the rejection
/// with the vnfInstanceId it concerns.
fn check_task<'r>(
    env: &TaskEnvelope,
    op: Option<&'r OperationRow>,
) -> Result<&'r OperationRow, (Option<&'r str>, ProblemDetails)> {
    let Some(op) = op else {
        let problem = conflict(
            404,
            "/vnfLcmOpOccId",
            format!("VnfLcmOpOcc `{}` is unknown", env.vnf_lcm_op_occ_id),
        );
        return Err((None, problem));
    };
    if op.operation_state != OperationState::FailedTemp || op.pending_task.is_some() {
        let why = match &op.pending_task {
            Some(p) => format!("VnfLcmOpOcc {} already has a pending {p}", op.id),
            None => format!(
                "{} needs FAILED_TEMP, but VnfLcmOpOcc {} is {}",
                task_name(env.operation),
                op.id,
                op.operation_state
            ),
        };
        let problem = conflict(409, "/vnfLcmOpOccId", why);
        return Err((Some(op.vnf_instance_id.as_str()), problem));
    }
    Ok(op)
}

fn task_name(task: TaskOperation) -> &'static str {
    match task {
        TaskOperation::Retry => "RETRY",
        TaskOperation::Fail => "FAIL",
        TaskOperation::Rollback => "ROLLBACK",
    }
}

/// An instance the database does not know: only INSTANTIATE creates one (404 otherwise).
fn check_unknown_instance(env: &LcmEnvelope) -> Result<(), ProblemDetails> {
    if LcmOperationType::from(env.operation) == LcmOperationType::Instantiate {
        return Ok(());
    }
    Err(conflict(
        404,
        "/vnfInstanceId",
        format!("VNF instance `{}` is unknown", env.vnf_instance_id),
    ))
}

/// The instantiation state the instance will have once `queued` (its unfinished operations, in
/// arrival order) are done must allow the operation: INSTANTIATE needs NOT_INSTANTIATED, the
/// others INSTANTIATED (SOL003 §5.4.4–5.4.9: 409 Conflict otherwise).
fn check_state(
    env: &LcmEnvelope,
    instance: &InstanceRow,
    queued: &[OperationRow],
) -> Result<(), ProblemDetails> {
    let op = LcmOperationType::from(env.operation);
    let id = &env.vnf_instance_id;
    let prospective = instance
        .instantiation_state
        .after(queued.iter().map(|o| o.operation));
    if prospective.allows(op) {
        return Ok(());
    }
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
    Err(conflict(409, "/vnfInstanceId", why))
}

/// HEAL of named VNFCs: each `vnfcInstanceId` must be one of `vnfcs` (the instance's VNFCs),
/// named by its id, or by `<VDU>-<index>` when it is managed individually (adjusted HOT). 404
/// naming each unknown entry otherwise.
fn check_heal_targets(env: &LcmEnvelope, vnfcs: &[VnfcRow]) -> Result<(), ProblemDetails> {
    let id = &env.vnf_instance_id;
    let known: Vec<String> = vnfcs
        .iter()
        .flat_map(|v| {
            let name = v
                .vnfc_index
                .map(|i| vnfkeeper_core::heat::template::indexed(&v.vdu_id, i as u32));
            std::iter::once(v.id.to_string()).chain(name)
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
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ProblemDetails::new(404, "HEAL names unknown VNFCs", errors))
    }
}

/// HEAL that rebuilds servers: what the instance's flavour refuses to rebuild
/// (`MgmtDriver::rebuild_refusal`, 409), from the last completed INSTANTIATE's request and its
/// package in `bases`. Targets may be VNFC ids or
/// `<VDU>-<index>` names. A base the check cannot read is not this check's to report.
fn check_heal_flavour(
    env: &LcmEnvelope,
    facts: &LcmFacts,
    bases: &BaseVnfds,
) -> Result<(), ProblemDetails> {
    let Some((params, Some(package))) = &facts.heal_base else {
        return Ok(());
    };
    let (Some(base), Ok(req)) = (
        bases.get(package),
        serde_json::from_str::<wire::InstantiateVnfRequest>(params),
    ) else {
        return Ok(());
    };
    let wanted = env.request.get("vnfcInstanceId").and_then(|v| v.as_array());
    let targets: Vec<vnfkeeper_core::model::VnfcId> = wanted
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .filter_map(|name| {
            facts.vnfcs.iter().find(|v| {
                v.id == name
                    || v.vnfc_index.is_some_and(|i| {
                        vnfkeeper_core::heat::template::indexed(&v.vdu_id, i as u32) == name
                    })
            })
        })
        .map(|v| v.id.clone())
        .collect();
    let configuration_only = env
        .request
        .pointer("/additionalParams/configuration_only")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    if configuration_only {
        return Ok(());
    }
    let driver = base.driver(&env.vnf_instance_id, req);
    match driver.rebuild_refusal(&facts.vnfcs, &targets) {
        Some(why) => Err(conflict(409, "/request/vnfcInstanceId", why)),
        None => Ok(()),
    }
}

/// Which INSTANTIATE defines the VNFD a SCALE is checked against.
#[derive(Debug, PartialEq, Eq)]
enum ScaleBase<'a> {
    /// The instance's last completed INSTANTIATE.
    Completed,
    /// An INSTANTIATE queued ahead of the SCALE (its vnfLcmOpOccId).
    Queued(&'a str),
    /// A TERMINATE is queued ahead: nothing to check against.
    Terminated,
}

/// What the queue ahead of a SCALE leaves for its level check.
#[derive(Debug, PartialEq, Eq)]
struct ScaleStart<'a> {
    base: ScaleBase<'a>,
    /// The levels to start from (empty: those right after the base INSTANTIATE).
    levels: BTreeMap<String, u32>,
    /// The SCALEs queued after the base, in order (vnfLcmOpOccIds).
    pending: Vec<&'a str>,
}

/// Replays `queued` (the instance's unfinished operations, in arrival order) over the instance:
/// a queued INSTANTIATE becomes the base and resets the levels, a TERMINATE leaves no base, a
/// SCALE is applied before the one being checked.
fn scale_start<'a>(instance: &InstanceRow, queued: &'a [OperationRow]) -> ScaleStart<'a> {
    let mut start = ScaleStart {
        base: ScaleBase::Completed,
        levels: instance.scale_status.clone(),
        pending: Vec::new(),
    };
    for q in queued {
        match q.operation {
            LcmOperationType::Instantiate => {
                start.base = ScaleBase::Queued(q.id.as_str());
                start.levels.clear();
                start.pending.clear();
            }
            LcmOperationType::Terminate => {
                start.base = ScaleBase::Terminated;
                start.pending.clear();
            }
            LcmOperationType::Scale => start.pending.push(q.id.as_str()),
            LcmOperationType::Heal | LcmOperationType::ChangeExtConn => {}
        }
    }
    start
}

/// SCALE: the base INSTANTIATE's request and the pending SCALEs (`scale`, read before), the
/// base's VNFD from `bases` (loaded before the transaction), for [`check_scale_bounds`]. A base
/// without package, a package not in `bases` (it did not load) or an unparsable stored request
/// is not this check's to report (the engine reports it).
fn check_scale_level(
    env: &LcmEnvelope,
    instance: &InstanceRow,
    queued: &[OperationRow],
    scale: &ScaleFacts,
    bases: &BaseVnfds,
) -> Result<(), ProblemDetails> {
    let levels = scale_start(instance, queued).levels;
    let Some((params, Some(package))) = &scale.base else {
        return Ok(());
    };
    let Some(base) = bases.get(package) else {
        return Ok(()); // the engine reports an unreadable package with its own error
    };
    let instantiate = serde_json::from_str::<wire::InstantiateVnfRequest>(params).ok();
    let vnfd = instantiate
        .as_ref()
        .and_then(|i| base.vnfd.for_flavour(&i.flavour_id).ok())
        .unwrap_or(&base.vnfd);
    if let (Some(inst), Some(aspect)) = (
        &instantiate,
        env.request.get("aspectId").and_then(|a| a.as_str()),
    ) && let Some(why) = base
        .driver(&env.vnf_instance_id, inst.clone())
        .scale_refusal(aspect)
    {
        let pointer = "/request/aspectId".to_owned();
        return Err(ProblemDetails::new(
            422,
            format!("{pointer}: {why}"),
            vec![FieldProblem {
                pointer,
                reason: why,
            }],
        ));
    }
    let pending: Vec<wire::ScaleVnfRequest> = scale
        .pending
        .iter()
        .filter_map(|p| serde_json::from_str(p).ok())
        .collect();
    let Ok(req) = serde_json::from_value::<wire::ScaleVnfRequest>(env.request.clone()) else {
        return Ok(());
    };
    check_scale_bounds(
        vnfd,
        levels,
        instantiate.as_ref(),
        &pending,
        &req,
        !queued.is_empty(),
    )
}

/// SCALE: the aspect exists in the VNFD and the level after every SCALE queued before this one
/// (`pending`; one that would fail is skipped, as it will fail) and this one stays within
/// `0..=max_scale_level` (SOL003 §5.4.5.3.1: 422 otherwise). `levels` empty means "right after
/// `instantiate`" (its instantiation level's scale levels). `behind_others`: other operations are
/// queued ahead, which the reason then says.
fn check_scale_bounds(
    vnfd: &Vnfd,
    mut levels: BTreeMap<String, u32>,
    instantiate: Option<&wire::InstantiateVnfRequest>,
    pending: &[wire::ScaleVnfRequest],
    req: &wire::ScaleVnfRequest,
    behind_others: bool,
) -> Result<(), ProblemDetails> {
    if levels.is_empty()
        && let Some(inst) = instantiate
    {
        levels = vnfkeeper_core::plan::scale::initial_levels(
            vnfd,
            inst.instantiation_level_id.as_deref(),
        );
    }
    for r in pending {
        if let Ok(next) = vnfkeeper_core::plan::scale::apply(vnfd, &levels, r) {
            levels = next;
        }
    }
    let Err(e) = vnfkeeper_core::plan::scale::apply(vnfd, &levels, req) else {
        return Ok(());
    };
    let pointer = e.pointer.clone().unwrap_or_else(|| "/request".into());
    let reason = if behind_others {
        format!("{} (counting the operations queued before it)", e.reason)
    } else {
        e.reason.clone()
    };
    Err(ProblemDetails::new(
        422,
        format!("{pointer}: {reason}"),
        vec![FieldProblem { pointer, reason }],
    ))
}

/// Why an accepted operation waits: behind the last of `ahead` (the instance's unfinished
/// operations), for a cloud when none is configured, else for the engine.
fn waiting_reason(ahead: &[OperationRow], cloud_configured: bool) -> String {
    match ahead.last() {
        Some(prev) => format!(
            "queued behind VnfLcmOpOcc {} ({} {})",
            prev.id, prev.operation, prev.operation_state
        ),
        None if !cloud_configured => {
            "waiting for a cloud: the configuration has no [cloud] section".to_owned()
        }
        None => "waiting for the operation engine".to_owned(),
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

/// Records an accepted LCM request: the instance if new, the operation in `STARTING` with why it
/// waits (behind `ahead`, the instance's unfinished operations as [`check_instance`] read them),
/// the `intake` row and a `REQUEST_ACCEPTED` event.
fn record_acceptance(
    tx: &mut Tx<'_>,
    req: &Examined,
    lcm: &LcmRequest,
    ahead: &[OperationRow],
    ctx: &IntakeContext<'_>,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    let LcmRequest {
        env,
        body,
        package,
        warnings,
        ..
    } = lcm;
    let op_id = OpOccId::new(uuid::Uuid::new_v4().to_string());
    let vnf = VnfInstanceId::from(&env.vnf_instance_id);
    let operation = LcmOperationType::from(env.operation);
    tx.create_instance_if_missing(&vnf, now)?;
    let status_detail = waiting_reason(ahead, ctx.cloud_configured);
    let package_text = package.as_ref().map(|p| p.dir.display().to_string());
    // The snapshot goes into the row as it is inserted (one write of the row, not two).
    tx.insert_operation_with_snapshot(
        &NewOperation {
            id: &op_id,
            vnf_instance_id: &vnf,
            operation,
            operation_params: body,
            vnf_package: package_text.as_deref(),
            request_id: env.request_id.as_deref(),
            is_automatic_invocation: false,
            status_detail: Some(&status_detail),
        },
        package.as_ref().map(|s| (s.digest, s.source.as_path())),
        now,
    )?;
    if let Some(p) = instantiate_pause(env, op_id.as_str(), now) {
        tx.set_maintenance_pause(&p, now)?;
    }
    let warnings_json = (!warnings.is_empty()).then(|| json(&warnings));
    let intake_id = tx.insert_intake_by(
        &NewIntake {
            file_name: &req.name,
            content_sha256: &req.digest,
            request_id: env.request_id.as_deref(),
            outcome: "ACCEPTED",
            vnf_instance_id: Some(&env.vnf_instance_id),
            vnf_lcm_op_occ_id: Some(op_id.as_str()),
            problem: None,
            warnings: warnings_json.as_deref(),
        },
        submitter(req).as_ref(),
        now,
    )?;
    let message = format!("{operation} request accepted from spool file {}", req.name);
    let evidence =
        serde_json::json!({"file": req.name, "intakeId": intake_id, "warnings": warnings});
    tx.append_event(
        &NewEvent {
            kind: EventKind::RequestAccepted,
            vnf_instance_id: Some(&vnf),
            vnf_lcm_op_occ_id: Some(&op_id),
            vnfc_id: None,
            message: &message,
            evidence: Some(&evidence.to_string()),
        },
        now,
    )?;
    Ok((
        Outcome::Accepted {
            file: req.name.clone(),
            vnf_lcm_op_occ_id: op_id.clone(),
            vnf_instance_id: vnf.clone(),
            operation: operation.as_str().to_owned(),
            status_detail: Some(status_detail),
            warnings: warnings.to_vec(),
            ended: None,
        },
        Destination::Accepted {
            op: op_id.into_string(),
        },
    ))
}

/// The maintenance pause an INSTANTIATE asks for in `additionalParams.maintenance_pause`
/// (checked by the validator: `reason` plain text, `until` RFC 3339), set by "INSTANTIATE
/// request <op id>" at `now`. `None` for other operations and without the key.
fn instantiate_pause(
    env: &LcmEnvelope,
    op_id: &str,
    now: Timestamp,
) -> Option<vnfkeeper_core::model::MaintenancePause> {
    let Ok(wire::LcmRequest::Instantiate(req)) = env.typed_request() else {
        return None;
    };
    let mp = req.additional_params?.maintenance_pause?;
    Some(vnfkeeper_core::model::MaintenancePause {
        scope: vnfkeeper_core::model::PauseScope::Vnf(VnfInstanceId::from(&env.vnf_instance_id)),
        paused_by: format!("INSTANTIATE request {op_id}"),
        reason: mp.reason,
        since: now,
        // Validated as RFC 3339; were it not, the pause would last until `resume` (the safe
        // side: no automatic heal), never end early.
        until: mp.until.as_deref().and_then(|u| Timestamp::parse(u).ok()),
    })
}

/// Records an accepted task on `op`: FAIL is a state change only (to `FAILED`); RETRY and
/// ROLLBACK become the occurrence's pending task, carried out by the engine. Then the `intake`
/// row and a `TASK_ACCEPTED` event.
fn record_task(
    tx: &mut Tx<'_>,
    req: &Examined,
    env: &TaskEnvelope,
    op: &OperationRow,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    match env.operation {
        TaskOperation::Fail => {
            tx.set_operation_state(op.id.as_str(), OperationState::Failed, None, now)?;
        }
        TaskOperation::Retry => tx.set_pending_task(&op.id, PendingTask::Retry)?,
        TaskOperation::Rollback => tx.set_pending_task(&op.id, PendingTask::Rollback)?,
    }
    let task = task_name(env.operation);
    let intake_id = tx.insert_intake_by(
        &NewIntake {
            file_name: &req.name,
            content_sha256: &req.digest,
            request_id: env.request_id.as_deref(),
            outcome: "ACCEPTED",
            vnf_instance_id: Some(op.vnf_instance_id.as_str()),
            vnf_lcm_op_occ_id: Some(op.id.as_str()),
            problem: None,
            warnings: None,
        },
        submitter(req).as_ref(),
        now,
    )?;
    let message = format!(
        "{task} of VnfLcmOpOcc {} accepted from spool file {}",
        op.id, req.name
    );
    tx.append_event(
        &NewEvent {
            kind: EventKind::TaskAccepted,
            vnf_instance_id: Some(&op.vnf_instance_id),
            vnf_lcm_op_occ_id: Some(&op.id),
            vnfc_id: None,
            message: &message,
            evidence: Some(
                &serde_json::json!({"file": req.name, "task": task, "intakeId": intake_id})
                    .to_string(),
            ),
        },
        now,
    )?;
    Ok((
        Outcome::Accepted {
            file: req.name.clone(),
            vnf_lcm_op_occ_id: op.id.clone(),
            vnf_instance_id: op.vnf_instance_id.clone(),
            operation: task.to_owned(),
            status_detail: None,
            warnings: Vec::new(),
            ended: (env.operation == TaskOperation::Fail).then_some(op.operation),
        },
        Destination::Task {
            op: op.id.to_string(),
            task: env.operation,
            intake_id,
        },
    ))
}

/// Records a duplicate of the request that created `op_id`: the `intake` row and a
/// `REQUEST_DUPLICATE` event, no operation.
fn record_duplicate(
    tx: &mut Tx<'_>,
    req: &Examined,
    vnf_instance_id: &str,
    op_id: &str,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    let intake_id = tx.insert_intake_by(
        &NewIntake {
            file_name: &req.name,
            content_sha256: &req.digest,
            request_id: None,
            outcome: "DUPLICATE",
            vnf_instance_id: Some(vnf_instance_id),
            vnf_lcm_op_occ_id: Some(op_id),
            problem: None,
            warnings: None,
        },
        submitter(req).as_ref(),
        now,
    )?;
    let message = format!(
        "spool file {} repeats the request of VnfLcmOpOcc {op_id}; no new operation",
        req.name
    );
    tx.append_event(
        &NewEvent {
            kind: EventKind::RequestDuplicate,
            vnf_instance_id: Some(&VnfInstanceId::from(vnf_instance_id)),
            vnf_lcm_op_occ_id: Some(&OpOccId::from(op_id)),
            vnfc_id: None,
            message: &message,
            evidence: Some(
                &serde_json::json!({"file": req.name, "intakeId": intake_id}).to_string(),
            ),
        },
        now,
    )?;
    Ok((
        Outcome::Duplicate {
            file: req.name.clone(),
            vnf_lcm_op_occ_id: OpOccId::from(op_id),
        },
        Destination::Duplicate {
            op: op_id.to_owned(),
            intake_id,
        },
    ))
}

/// Records a rejection: the `intake` row with the problem and a `REQUEST_REJECTED` event.
fn record_rejection(
    tx: &mut Tx<'_>,
    req: &Examined,
    vnf_instance_id: Option<&str>,
    problem: &ProblemDetails,
    now: Timestamp,
) -> Result<(Outcome, Destination), StoreError> {
    let problem_json = json(problem);
    tx.insert_intake_by(
        &NewIntake {
            file_name: &req.name,
            content_sha256: &req.digest,
            request_id: None,
            outcome: "REJECTED",
            vnf_instance_id,
            vnf_lcm_op_occ_id: None,
            problem: Some(&problem_json),
            warnings: None,
        },
        submitter(req).as_ref(),
        now,
    )?;
    let message = format!("spool file {} rejected: {}", req.name, problem.detail);
    let vnf = vnf_instance_id.map(VnfInstanceId::from);
    tx.append_event(
        &NewEvent {
            kind: EventKind::RequestRejected,
            vnf_instance_id: vnf.as_ref(),
            vnf_lcm_op_occ_id: None,
            vnfc_id: None,
            message: &message,
            evidence: Some(&problem_json),
        },
        now,
    )?;
    Ok((
        Outcome::Rejected {
            file: req.name.clone(),
            vnf_instance_id: vnf_instance_id.map(str::to_owned),
            problem: problem.clone(),
        },
        Destination::Rejected {
            problem: problem.clone(),
        },
    ))
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-21T06:00:00Z").unwrap()
    }

    fn temp_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        (dir, store)
    }

    /// The rules read only the operation, the instance and the body.
    fn lcm(operation: wire::LcmOperation, request: serde_json::Value) -> LcmEnvelope {
        LcmEnvelope {
            operation,
            vnf_instance_id: "vnf-1".into(),
            vnf_package: None,
            request_id: None,
            request,
        }
    }

    fn task(operation: TaskOperation, op: &str) -> TaskEnvelope {
        TaskEnvelope {
            operation,
            vnf_lcm_op_occ_id: op.into(),
            request_id: None,
        }
    }

    fn queue(tx: &mut Tx<'_>, id: &str, operation: LcmOperationType) -> Result<(), StoreError> {
        tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now())?;
        tx.insert_operation(
            &NewOperation {
                id: &OpOccId::from(id),
                vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                operation,
                operation_params: &RequestBody::split(operation, "{}"),
                vnf_package: None,
                request_id: None,
                is_automatic_invocation: false,
                status_detail: None,
            },
            now(),
        )
    }

    fn instance_and_queue(store: &Store) -> (InstanceRow, Vec<OperationRow>) {
        let instance = store.reader().instances().unwrap().remove(0);
        let queued = store.reader().operations(Some("vnf-1")).unwrap();
        (instance, queued)
    }

    fn scale(steps: u32, out: bool) -> wire::ScaleVnfRequest {
        serde_json::from_value(serde_json::json!({
            "type": if out { "SCALE_OUT" } else { "SCALE_IN" },
            "aspectId": "worker_instance",
            "numberOfSteps": steps,
        }))
        .unwrap()
    }

    #[test]
    fn a_request_is_checked_against_the_state_its_queue_leaves() {
        use wire::LcmOperation::{Instantiate, Scale, Terminate};
        let unknown = check_unknown_instance(&lcm(Scale, serde_json::json!({}))).unwrap_err();
        assert_eq!(
            (unknown.status, unknown.errors[0].pointer.as_str()),
            (404, "/vnfInstanceId")
        );
        assert!(check_unknown_instance(&lcm(Instantiate, serde_json::json!({}))).is_ok());

        let (_dir, mut store) = temp_store();
        store
            .write(|tx| queue(tx, "op-1", LcmOperationType::Instantiate))
            .unwrap();
        let (instance, queued) = instance_and_queue(&store);
        let again = check_state(&lcm(Instantiate, serde_json::json!({})), &instance, &queued);
        let again = again.unwrap_err();
        assert_eq!(again.status, 409);
        assert!(
            again
                .detail
                .contains("will be INSTANTIATED once VnfLcmOpOcc op-1 (INSTANTIATE)"),
            "{}",
            again.detail
        );
        assert!(check_state(&lcm(Scale, serde_json::json!({})), &instance, &queued).is_ok());

        store
            .write(|tx| queue(tx, "op-2", LcmOperationType::Terminate))
            .unwrap();
        let (instance, queued) = instance_and_queue(&store);
        let scale = check_state(&lcm(Scale, serde_json::json!({})), &instance, &queued);
        assert!(
            scale
                .unwrap_err()
                .detail
                .contains("will be NOT_INSTANTIATED once VnfLcmOpOcc op-2 (TERMINATE)")
        );
        assert!(check_state(&lcm(Terminate, serde_json::json!({})), &instance, &queued).is_err());
        assert!(check_state(&lcm(Instantiate, serde_json::json!({})), &instance, &queued).is_ok());
    }

    #[test]
    fn a_tacker_owned_vnf_refuses_spool_requests() {
        use vnfkeeper_core::tacker::{OpOccSeen, Origin};
        use wire::LcmOperation::{Heal, Instantiate, Scale, Terminate};
        let (_dir, mut store) = temp_store();
        let occ = OpOccSeen {
            id: "occ-1".into(),
            vnf_instance_id: "vnf-1".into(),
            operation: "INSTANTIATE".into(),
            state: OperationState::Completed,
            is_automatic_invocation: false,
        };
        store
            .write(|tx| {
                tx.record_tacker_poll(std::slice::from_ref(&occ), &[], now())?;
                let body = RequestBody::split(LcmOperationType::Instantiate, "{}");
                tx.adopt_tacker_instantiate(&occ, &body, None, now())
            })
            .unwrap();
        assert_eq!(
            store.reader().instances().unwrap()[0].origin,
            Origin::Tacker
        );
        for op in [Instantiate, Scale, Heal, Terminate] {
            let env = lcm(op, serde_json::json!({}));
            let facts = store.write(|tx| LcmFacts::read(tx, &env)).unwrap();
            let refused = judge_lcm(&env, &facts, &BaseVnfds::default()).unwrap_err();
            assert_eq!(refused.status, 409);
            assert!(
                refused.detail.contains("owned by Tacker"),
                "{}",
                refused.detail
            );
        }
    }

    #[test]
    fn a_scale_start_follows_the_last_instantiate_or_terminate_queued() {
        let (_dir, mut store) = temp_store();
        store
            .write(|tx| {
                queue(tx, "s1", LcmOperationType::Scale)?;
                let levels = BTreeMap::from([("worker_instance".to_owned(), 2)]);
                tx.set_scale_status(&VnfInstanceId::from("vnf-1"), Some(&levels), now())
            })
            .unwrap();
        let (instance, queued) = instance_and_queue(&store);
        let start = scale_start(&instance, &queued);
        assert_eq!(start.base, ScaleBase::Completed);
        assert_eq!(start.levels, instance.scale_status);
        assert_eq!(start.pending, ["s1"]);

        store
            .write(|tx| {
                queue(tx, "i1", LcmOperationType::Instantiate)?;
                queue(tx, "s2", LcmOperationType::Scale)?;
                queue(tx, "h1", LcmOperationType::Heal)
            })
            .unwrap();
        let (instance, queued) = instance_and_queue(&store);
        let start = scale_start(&instance, &queued);
        assert_eq!(start.base, ScaleBase::Queued("i1"));
        assert!(start.levels.is_empty());
        assert_eq!(start.pending, ["s2"]);

        store
            .write(|tx| queue(tx, "t1", LcmOperationType::Terminate))
            .unwrap();
        let (instance, queued) = instance_and_queue(&store);
        let start = scale_start(&instance, &queued);
        assert_eq!(start.base, ScaleBase::Terminated);
        assert!(start.pending.is_empty());
    }

    #[test]
    fn scale_bounds_count_the_scales_queued_before_and_skip_those_that_will_fail() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/packages/pv-k8s-cluster");
        let vnfd = vnfkeeper_core::package::VnfPackage::load(&root)
            .unwrap()
            .vnfd;
        let levels = vnfkeeper_core::plan::scale::initial_levels(&vnfd, None);
        let max = vnfd.aspects["worker_instance"].max_scale_level;
        let room = max - levels["worker_instance"];
        // A SCALE_IN below 0 fails and is skipped; the SCALE_OUTs fill the room to the maximum.
        let pending = [scale(max + 1, false), scale(room, true)];
        let one_more = scale(1, true);
        let e = check_scale_bounds(&vnfd, levels.clone(), None, &pending, &one_more, true);
        let e = e.unwrap_err();
        assert_eq!(e.status, 422);
        assert_eq!(e.errors[0].pointer, "/request/numberOfSteps");
        assert!(
            e.errors[0]
                .reason
                .ends_with("(counting the operations queued before it)"),
            "{}",
            e.errors[0].reason
        );
        let back = scale(room, false);
        assert!(check_scale_bounds(&vnfd, levels, None, &pending, &back, true).is_ok());
    }

    #[test]
    fn tasks_need_a_failed_temp_occurrence_without_a_pending_task() {
        let retry = task(TaskOperation::Retry, "op-1");
        let (vnf, unknown) = check_task(&retry, None).unwrap_err();
        assert_eq!((vnf, unknown.status), (None, 404));

        let (_dir, mut store) = temp_store();
        store
            .write(|tx| queue(tx, "op-1", LcmOperationType::Instantiate))
            .unwrap();
        let op = store
            .reader()
            .operation(&OpOccId::from("op-1"))
            .unwrap()
            .unwrap();
        let (vnf, starting) = check_task(&retry, Some(&op)).unwrap_err();
        assert_eq!((vnf, starting.status), (Some("vnf-1"), 409));
        assert!(
            starting
                .detail
                .contains("RETRY needs FAILED_TEMP, but VnfLcmOpOcc op-1 is STARTING"),
            "{}",
            starting.detail
        );

        store
            .write(|tx| {
                tx.set_operation_state("op-1", OperationState::Processing, None, now())?;
                tx.set_operation_state("op-1", OperationState::FailedTemp, None, now())?;
                Ok(())
            })
            .unwrap();
        let op = store
            .reader()
            .operation(&OpOccId::from("op-1"))
            .unwrap()
            .unwrap();
        assert_eq!(check_task(&retry, Some(&op)).unwrap().id, "op-1");

        store
            .write(|tx| tx.set_pending_task(&OpOccId::from("op-1"), PendingTask::Rollback))
            .unwrap();
        let op = store
            .reader()
            .operation(&OpOccId::from("op-1"))
            .unwrap()
            .unwrap();
        let fail = task(TaskOperation::Fail, "op-1");
        let (_, pending) = check_task(&fail, Some(&op)).unwrap_err();
        assert!(pending.detail.contains("already has a pending ROLLBACK"));
    }

    #[test]
    fn heal_targets_name_each_unknown_vnfc_by_its_position() {
        let env = lcm(
            wire::LcmOperation::Heal,
            serde_json::json!({"vnfcInstanceId": ["workerNode-0", 7, "gone"]}),
        );
        let e = check_heal_targets(&env, &[]).unwrap_err();
        assert_eq!(e.status, 404);
        let pointers: Vec<_> = e.errors.iter().map(|f| f.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            ["/request/vnfcInstanceId/0", "/request/vnfcInstanceId/2"]
        );
        let whole = lcm(wire::LcmOperation::Heal, serde_json::json!({}));
        assert!(check_heal_targets(&whole, &[]).is_ok());
    }

    #[test]
    fn a_committed_file_goes_back_where_its_outcome_put_it() {
        let (_dir, mut store) = temp_store();
        let problem = ProblemDetails::new(400, "invalid request", Vec::new());
        let problem_json = json(&problem);
        let rows = [
            ("a.json", "ACCEPTED", Some("op-1"), None),
            ("b.json", "DUPLICATE", Some("op-1"), None),
            ("c.json", "REJECTED", None, Some(problem_json.as_str())),
        ];
        let ids = store
            .write(|tx| {
                queue(tx, "op-1", LcmOperationType::Instantiate)?;
                let mut ids = Vec::new();
                for (file_name, outcome, op, problem) in rows {
                    let row = NewIntake {
                        file_name,
                        content_sha256: "5ha",
                        request_id: None,
                        outcome,
                        vnf_instance_id: None,
                        vnf_lcm_op_occ_id: op,
                        problem,
                        warnings: None,
                    };
                    ids.push(tx.insert_intake(&row, now())?);
                }
                Ok(ids)
            })
            .unwrap();
        let earlier = store.write(|tx| tx.intake_by_sha256("5ha")).unwrap();
        let examined = |name: &str, verdict| Examined {
            kept: KeptCopy::shared(Vec::new()),
            name: name.into(),
            sha256: [0; 32],
            digest: "5ha".into(),
            verdict,
            submitter: None,
        };
        let invalid = || Verdict::Invalid {
            vnf_instance_id: None,
            problem: problem.clone(),
        };
        let at = |name, verdict| committed_destination(&earlier, &examined(name, verdict));
        let op = || "op-1".to_owned();
        assert_eq!(
            at("a.json", invalid()),
            Some(Destination::Accepted { op: op() })
        );
        let dup = Destination::Duplicate {
            op: op(),
            intake_id: ids[1],
        };
        assert_eq!(at("b.json", invalid()), Some(dup));
        let rejected = Destination::Rejected {
            problem: problem.clone(),
        };
        assert_eq!(at("c.json", invalid()), Some(rejected));
        assert_eq!(at("d.json", invalid()), None);
        let retry = Verdict::Task(task(TaskOperation::Retry, "op-1"));
        let retried = Destination::Task {
            op: op(),
            task: TaskOperation::Retry,
            intake_id: ids[0],
        };
        assert_eq!(at("a.json", retry), Some(retried));
        assert_eq!(duplicate_of(&earlier), Some(op()));
    }

    /// The fixture request `name` (its `request`) and package, as facts of an instantiated
    /// instance `vnf-1` with `vnfcs` whose last completed INSTANTIATE used them.
    fn instantiated(name: &str, vnfcs: Vec<VnfcRow>) -> (LcmFacts, BaseVnfds) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = fs::read_to_string(root.join("fixtures/requests/good").join(name)).unwrap();
        let env: serde_json::Value = serde_json::from_str(&text).unwrap();
        let package = root.join(env["vnfPackage"].as_str().unwrap());
        let pkg = vnfkeeper_core::package::VnfPackage::load(&package).unwrap();
        let path = package.display().to_string();
        let base = (env["request"].to_string(), Some(path.clone()));
        let instance = InstanceRow {
            id: "vnf-1".into(),
            instantiation_state: InstantiationState::Instantiated,
            flavour_id: Some("simple".into()),
            vnf_package: Some(path.clone()),
            stack_name: None,
            stack_id: None,
            created_at: now(),
            updated_at: now(),
            scale_status: BTreeMap::new(),
            origin: vnfkeeper_core::tacker::Origin::Spool,
        };
        let facts = LcmFacts {
            request_id_user: None,
            instance: Some((instance, Vec::new())),
            vnfcs,
            heal_base: Some(base.clone()),
            scale: ScaleFacts {
                base: Some(base),
                pending: Vec::new(),
            },
        };
        let bases = [(
            path,
            BaseVnfd {
                vnfd: Arc::new(pkg.vnfd.clone()),
                package: Some(Arc::new(pkg)),
            },
        )]
        .into();
        (facts, bases)
    }

    fn vnfc(id: &str, vdu: &str) -> VnfcRow {
        VnfcRow {
            id: id.into(),
            vnf_instance_id: "vnf-1".into(),
            vdu_id: vdu.into(),
            vnfc_index: None,
            stack_name: "s".into(),
            stack_id: "sid".into(),
            resource_name: vdu.into(),
            server_id: Some(format!("srv-{id}")),
            server_status: Some("ACTIVE".into()),
            ip_address: None,
            cp_addresses: Default::default(),
            volumes: Vec::new(),
            host_key: None,
            created_at: now(),
            parameters: None,
        }
    }

    /// What the flavour refuses is refused at intake: a SCALE of the registry VNF (422), a
    /// rebuild of a kubespray master alone (409); a configuration-only heal of that master and
    /// a worker's heal are accepted.
    #[test]
    fn the_flavours_refusals_are_refused_at_intake() {
        use wire::LcmOperation::{Heal, Scale};
        let (facts, bases) =
            instantiated("cir-k8s-cluster.10-registry-instantiate.json", Vec::new());
        let scale = lcm(
            Scale,
            serde_json::json!({"type": "SCALE_OUT", "aspectId": "registry_instance"}),
        );
        let refused = judge_lcm(&scale, &facts, &bases).unwrap_err();
        assert_eq!(refused.status, 422);
        assert!(
            refused.detail.contains("does not support SCALE"),
            "{}",
            refused.detail
        );

        let vnfcs = vec![
            vnfc("m0", "masterNode"),
            vnfc("w0", "workerNode"),
            vnfc("lb", "externalLB"),
        ];
        let (facts, bases) = instantiated("k8s-mgmtdriver-kubespray.10-instantiate.json", vnfcs);
        let heal = |body| judge_lcm(&lcm(Heal, body), &facts, &bases);
        let refused = heal(serde_json::json!({"vnfcInstanceId": ["m0"]})).unwrap_err();
        assert_eq!(refused.status, 409);
        assert!(
            refused.detail.contains("kubespray master"),
            "{}",
            refused.detail
        );
        heal(serde_json::json!({"vnfcInstanceId": ["m0"],
                                "additionalParams": {"configuration_only": true}}))
        .unwrap();
        heal(serde_json::json!({"vnfcInstanceId": ["w0"]})).unwrap();
        heal(serde_json::json!({})).unwrap();

        // A kubeadm cluster with one master: rebuilding it alone loses the cluster.
        let vnfcs = vec![
            vnfc("m0", "masterNode"),
            vnfc("w0", "workerNode"),
            vnfc("w1", "workerNode"),
        ];
        let (facts, bases) = instantiated("cir-k8s-cluster.20-instantiate.json", vnfcs);
        let heal = |body| judge_lcm(&lcm(Heal, body), &facts, &bases);
        let refused = heal(serde_json::json!({"vnfcInstanceId": ["m0", "w0"]})).unwrap_err();
        assert_eq!(refused.status, 409);
        assert!(
            refused.detail.contains("every master") && refused.detail.contains("w1"),
            "{}",
            refused.detail
        );
        heal(serde_json::json!({"vnfcInstanceId": ["m0", "w0", "w1"]})).unwrap();
        heal(serde_json::json!({"vnfcInstanceId": ["m0"],
                                "additionalParams": {"configuration_only": true}}))
        .unwrap();
        heal(serde_json::json!({"vnfcInstanceId": ["w1"]})).unwrap();
        heal(serde_json::json!({})).unwrap();
    }
}
