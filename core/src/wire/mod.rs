//! SOL003 request envelopes as they arrive in the spool: serde types and complete validation.
//!
//! CONTRACT (used by `intake::admission`; keep these signatures):
//! - [`parse_envelope`] takes the raw file bytes and returns either a [`Parsed`] envelope with
//!   warnings, or every defect found as a [`FieldError`] naming its JSON pointer.
//! - Reasons never contain the value of a secret field (passwords, proxy URLs with credentials).
//!
//! Layout: [`rules`] holds the value rules (CIDR, paths, names…), `check`/`validate` walk the
//! JSON collecting every defect, [`sol003`] and [`params`] are the typed bodies returned by
//! [`LcmEnvelope::typed_request`] once a request is valid, and [`Secret`] hides credentials from
//! `Debug`.

pub(crate) mod check;
pub mod notification;
pub mod params;
pub mod redact;
pub mod rules;
mod secret;
pub mod sol003;
mod validate;

use serde::Serialize;
use serde_json::Value;

pub use params::{
    Ansible, CinderVolumeSetupParam, ConnectionType, ExternalLbParam, HealAdditionalParams,
    InstantiateAdditionalParams, K8sClusterInstallationParam, MaintenancePauseParam, MasterNode,
    NfsServerSetupParam, PrivateRegistryConnectionInfo, PrivateRegistryInstallationParam, Proxy,
    PvRegistrationParam, StorageServer, WorkerNode,
};
pub use secret::Secret;
pub use sol003::{
    ChangeExtVnfConnectivityRequest, HealVnfRequest, InstantiateVnfRequest, LcmRequest, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, TerminationType, VimConnectionInfo, VimConnectionInfos,
};

use check::{Card, Checker, Obj, push};

/// Largest request file accepted, in bytes (1 MiB). Larger files are rejected without parsing.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Longest `vnfPackage` path accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_PACKAGE_PATH_BYTES: usize = 4096;

/// One defect (or, in [`Parsed::warnings`], one normalisation) of a request, located by an
/// RFC 6901 JSON pointer into the envelope (`""` is the whole document); the reason never
/// contains a secret value. The same type as [`crate::model::FieldProblem`].
pub use crate::model::FieldProblem as FieldError;

/// The LCM operations a spool envelope can request (SOL003 `LcmOperationType` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LcmOperation {
    /// InstantiateVnfRequest (SOL003 §5.5.2.4).
    Instantiate,
    /// ScaleVnfRequest (SOL003 §5.5.2.5).
    Scale,
    /// HealVnfRequest (SOL003 §5.5.2.9, SOL002 `vnfcInstanceId`).
    Heal,
    /// TerminateVnfRequest (SOL003 §5.5.2.8).
    Terminate,
    /// ChangeExtVnfConnectivityRequest (SOL003 §5.5.2.11).
    ChangeExtConn,
}

/// Task operations on an existing occurrence in `FAILED_TEMP` (SOL003 §5.4.14–16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskOperation {
    /// Resume at the failed step.
    Retry,
    /// End as `FAILED`.
    Fail,
    /// Undo what the operation created, ending as `ROLLED_BACK`.
    Rollback,
}

/// A validated spool envelope.
#[derive(Debug, Clone)]
pub enum Envelope {
    /// INSTANTIATE / SCALE / HEAL / TERMINATE of a VNF instance.
    Lcm(LcmEnvelope),
    /// RETRY / FAIL / ROLLBACK of an operation occurrence.
    Task(TaskEnvelope),
}

/// `{"operation", "vnfInstanceId", "vnfPackage"?, "requestId"?, "request"}`.
#[derive(Debug, Clone)]
pub struct LcmEnvelope {
    /// Requested operation.
    pub operation: LcmOperation,
    /// `vnfInstanceId`: 1–128 characters of `[A-Za-z0-9._-]`.
    pub vnf_instance_id: String,
    /// `vnfPackage`: path of the VNF package directory or .zip (required for INSTANTIATE only).
    pub vnf_package: Option<String>,
    /// `requestId`: optional idempotency key.
    pub request_id: Option<String>,
    /// The SOL003 body exactly as received (stored verbatim).
    pub request: serde_json::Value,
}

impl LcmEnvelope {
    /// Package-relative paths the request references, as `(JSON pointer, relative path)`, so
    /// that intake can check that each exists in the package.
    ///
    /// Only INSTANTIATE bodies reference package files: `script_path`,
    /// `external_lb_param.script_path`, `pv_manifest_file_path`, `certificate_path`,
    /// `image_path` and `lcm-operation-user-data`. Paths are normalised (a leading `./` and `.`
    /// components removed); a path that breaks the package-path rule is left out (parsing
    /// already rejected it).
    pub fn package_paths(&self) -> Vec<(String, String)> {
        if self.operation != LcmOperation::Instantiate {
            return Vec::new();
        }
        let mut w = validate::Walk::default();
        validate::request(&mut w, self.operation, &self.request);
        w.paths
    }

    /// RFC 6901 pointers into the envelope (`/request/...`) of every secret value the request
    /// holds: the SSH passwords of every node group, the storage server, the Ansible server, the
    /// external load balancer and the registry VM, `http_proxy`/`https_proxy`, a private
    /// registry's `username`/`password`, and each `vimConnectionInfo` entry's `accessInfo`
    /// (the object as a whole). Document order; empty for bodies without secrets.
    pub fn secret_pointers(&self) -> Vec<String> {
        request_secret_pointers(self.operation, &self.request)
            .into_iter()
            .map(|p| format!("/request{p}"))
            .collect()
    }

    /// The body as its SOL003 type. Always `Ok` for an envelope returned by
    /// [`parse_envelope`]; an `Err` (pointer `/request`) means `request` was changed or built
    /// by hand. The reason does not echo any value.
    pub fn typed_request(&self) -> Result<LcmRequest, Vec<FieldError>> {
        typed(self.operation, &self.request)
    }
}

/// RFC 6901 pointers into `body` (a SOL003 request body of `op`, pointer `""` is the body) of
/// every secret value it holds, as [`LcmEnvelope::secret_pointers`] lists them. For a body that
/// does not validate, the pointers of the secrets found on the way are still returned.
pub fn request_secret_pointers(op: LcmOperation, body: &Value) -> Vec<String> {
    let mut w = validate::Walk::default();
    validate::request(&mut w, op, body);
    w.secrets
        .into_iter()
        .filter_map(|p| p.strip_prefix("/request").map(str::to_owned))
        .collect()
}

fn typed(op: LcmOperation, body: &Value) -> Result<LcmRequest, Vec<FieldError>> {
    fn de<T: serde::de::DeserializeOwned>(v: &Value, what: &str) -> Result<T, Vec<FieldError>> {
        // The serde message may quote a value (possibly a secret), so it is not passed on.
        T::deserialize(v).map_err(|_| {
            vec![FieldError {
                pointer: "/request".into(),
                reason: format!("request does not match the {what} type"),
            }]
        })
    }
    Ok(match op {
        LcmOperation::Instantiate => {
            LcmRequest::Instantiate(Box::new(de(body, "InstantiateVnfRequest")?))
        }
        LcmOperation::Scale => LcmRequest::Scale(de(body, "ScaleVnfRequest")?),
        LcmOperation::Heal => LcmRequest::Heal(de(body, "HealVnfRequest")?),
        LcmOperation::Terminate => LcmRequest::Terminate(de(body, "TerminateVnfRequest")?),
        LcmOperation::ChangeExtConn => {
            LcmRequest::ChangeExtConn(de(body, "ChangeExtVnfConnectivityRequest")?)
        }
    })
}

/// `{"operation": "RETRY"|"FAIL"|"ROLLBACK", "vnfLcmOpOccId", "requestId"?}`.
#[derive(Debug, Clone)]
pub struct TaskEnvelope {
    /// Requested task.
    pub operation: TaskOperation,
    /// The occurrence it applies to.
    pub vnf_lcm_op_occ_id: String,
    /// `requestId`: optional idempotency key.
    pub request_id: Option<String>,
}

/// A valid envelope plus the normalisations applied or noticed (e.g. host bits in a CIDR).
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The envelope.
    pub envelope: Envelope,
    /// Non-fatal findings, same shape as errors.
    pub warnings: Vec<FieldError>,
    /// What [`LcmEnvelope::secret_pointers`] returns for the envelope (`/request/...`, document
    /// order), found by the validating walk itself; empty for a task envelope.
    pub secret_pointers: Vec<String>,
    /// What [`LcmEnvelope::package_paths`] returns for the envelope, found by the validating
    /// walk itself; empty for a task envelope.
    pub package_paths: Vec<(String, String)>,
}

const LCM_KEYS: &[&str] = &[
    "operation",
    "vnfInstanceId",
    "vnfPackage",
    "request",
    "requestId",
];
const TASK_KEYS: &[&str] = &["operation", "vnfLcmOpOccId", "requestId"];
const OPERATIONS: &str =
    "INSTANTIATE, SCALE, HEAL, TERMINATE, CHANGE_EXT_CONN, RETRY, FAIL, ROLLBACK";

enum Op {
    Lcm(LcmOperation),
    Task(TaskOperation),
}

fn operation(s: &str) -> Option<Op> {
    Some(match s {
        "INSTANTIATE" => Op::Lcm(LcmOperation::Instantiate),
        "SCALE" => Op::Lcm(LcmOperation::Scale),
        "HEAL" => Op::Lcm(LcmOperation::Heal),
        "TERMINATE" => Op::Lcm(LcmOperation::Terminate),
        "CHANGE_EXT_CONN" => Op::Lcm(LcmOperation::ChangeExtConn),
        "RETRY" => Op::Task(TaskOperation::Retry),
        "FAIL" => Op::Task(TaskOperation::Fail),
        "ROLLBACK" => Op::Task(TaskOperation::Rollback),
        _ => return None,
    })
}

fn whole(reason: impl Into<String>) -> Vec<FieldError> {
    vec![FieldError {
        pointer: String::new(),
        reason: reason.into(),
    }]
}

/// Parses and validates one request file. Errors: every defect found, each with its pointer.
///
/// File-level defects (too large, empty, not UTF-8, not JSON, trailing data, not an object)
/// are reported alone with pointer `""`; JSON syntax errors give line and column.
pub fn parse_envelope(bytes: &[u8]) -> Result<Parsed, Vec<FieldError>> {
    let (v, mut warnings) = read_json(bytes)?;
    let mut c = Checker::default();
    let Some(env) = c.object(&v, "", "the request file") else {
        return Err(c.errors);
    };
    let op = envelope_operation(&mut c, &env);
    let request_id = c
        .str_rule(&env, "requestId", Card::Opt, rules::identifier)
        .map(|(s, _)| s.to_string());
    match op {
        Some(Op::Lcm(operation)) => lcm_envelope(c, &env, operation, request_id, warnings),
        Some(Op::Task(operation)) => {
            let id = c.str_rule(&env, "vnfLcmOpOccId", Card::One, rules::identifier);
            match (id, c.errors.is_empty()) {
                (Some((id, _)), true) => {
                    warnings.append(&mut c.warnings);
                    Ok(Parsed {
                        envelope: Envelope::Task(TaskEnvelope {
                            operation,
                            vnf_lcm_op_occ_id: id.to_string(),
                            request_id,
                        }),
                        warnings,
                        secret_pointers: Vec::new(),
                        package_paths: Vec::new(),
                    })
                }
                _ => Err(c.errors),
            }
        }
        None => Err(c.errors),
    }
}

/// The JSON value of a request file's `bytes`, and the warning of a byte order mark skipped.
/// Errors: the file-level defects (too large, not UTF-8, empty, not JSON), alone with pointer
/// `""`; a JSON syntax error gives line and column, never the input text.
fn read_json(bytes: &[u8]) -> Result<(Value, Vec<FieldError>), Vec<FieldError>> {
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(whole(format!(
            "file is {} bytes; requests larger than {MAX_REQUEST_BYTES} bytes (1 MiB) are not read",
            bytes.len()
        )));
    }
    let mut warnings = Vec::new();
    let mut bytes = bytes;
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        bytes = rest;
        warnings.push(FieldError {
            pointer: String::new(),
            reason: "UTF-8 byte order mark ignored".into(),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        whole(format!(
            "file is not UTF-8: invalid byte sequence at byte offset {}",
            e.valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(whole("file is empty (expected a JSON object)"));
    }
    let v: Value = serde_json::from_str(text).map_err(|e| {
        // serde_json syntax messages name the problem and its position, never the input text.
        whole(format!(
            "not valid JSON: {} at line {} column {}",
            syntax_message(&e),
            e.line(),
            e.column()
        ))
    })?;
    Ok((v, warnings))
}

/// The envelope's `operation` (`None` when missing or unknown, recorded in `c`), after
/// checking the envelope's keys against the ones that operation allows (unknown operation:
/// those of any).
fn envelope_operation(c: &mut Checker, env: &Obj<'_>) -> Option<Op> {
    let op = match c.str_field(env, "operation", Card::One) {
        Some((s, p)) => match operation(s) {
            Some(op) => Some(op),
            None => {
                c.err(&p, format!("operation must be one of {OPERATIONS}"));
                None
            }
        },
        None => None,
    };
    match &op {
        Some(Op::Lcm(_)) => c.known_keys(env, "envelope", LCM_KEYS),
        Some(Op::Task(_)) => c.known_keys(env, "envelope", TASK_KEYS),
        None => {
            let all: Vec<&str> = LCM_KEYS.iter().chain(TASK_KEYS).copied().collect();
            c.known_keys(env, "envelope", &all);
        }
    }
    op
}

/// The rest of an LCM envelope `env` of `operation` (the checks so far in `c`, the file's
/// `warnings`): `vnfInstanceId`, `vnfPackage` (INSTANTIATE only), the request body walked by
/// [`validate::request`] and then deserialized into its type. Errors: every defect found.
fn lcm_envelope(
    mut c: Checker,
    env: &Obj<'_>,
    operation: LcmOperation,
    request_id: Option<String>,
    mut warnings: Vec<FieldError>,
) -> Result<Parsed, Vec<FieldError>> {
    let id = c.str_rule(env, "vnfInstanceId", Card::One, rules::identifier);
    let pkg_ptr = push("", "vnfPackage");
    let vnf_package = if operation == LcmOperation::Instantiate {
        c.str_rule(env, "vnfPackage", Card::One, package_location)
            .map(|(s, _)| s.to_string())
    } else {
        if env.map.contains_key("vnfPackage") {
            c.err(
                &pkg_ptr,
                "vnfPackage is only allowed with operation INSTANTIATE",
            );
        }
        None
    };
    let mut w = validate::Walk {
        c,
        ..validate::Walk::default()
    };
    let body = w.c.field(env, "request", Card::One).map(|(b, _)| b);
    if let Some(b) = body {
        validate::request(&mut w, operation, b);
    }
    let validate::Walk {
        mut c,
        paths,
        secrets,
    } = w;
    if c.errors.is_empty()
        && let Some(b) = body
        && let Err(mut e) = typed(operation, b)
    {
        c.errors.append(&mut e);
    }
    if !c.errors.is_empty() {
        return Err(c.errors);
    }
    warnings.append(&mut c.warnings);
    let (Some((id, _)), Some(body)) = (id, body) else {
        return Err(whole(
            "internal error: envelope incomplete after validation",
        ));
    };
    Ok(Parsed {
        envelope: Envelope::Lcm(LcmEnvelope {
            operation,
            vnf_instance_id: id.to_string(),
            vnf_package,
            request_id,
            request: body.clone(),
        }),
        warnings,
        secret_pointers: secrets,
        package_paths: if operation == LcmOperation::Instantiate {
            paths
        } else {
            Vec::new()
        },
    })
}

/// `vnfPackage`: a host path of the package directory or .zip; non-empty, at most
/// [`MAX_PACKAGE_PATH_BYTES`], no control characters.
fn package_location(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty (path of the VNF package directory or .zip)".into());
    }
    if s.len() > MAX_PACKAGE_PATH_BYTES {
        return Err(format!("is longer than {MAX_PACKAGE_PATH_BYTES} bytes"));
    }
    if s.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    Ok(())
}

/// The serde_json message without its " at line L column C" suffix (added back uniformly).
fn syntax_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(i) => full[..i].to_string(),
        None => full,
    }
}

/// The operation type an accepted request of this kind creates (SOL003 §5.5.4.5).
impl From<LcmOperation> for crate::model::LcmOperationType {
    fn from(op: LcmOperation) -> Self {
        match op {
            LcmOperation::Instantiate => Self::Instantiate,
            LcmOperation::Scale => Self::Scale,
            LcmOperation::Heal => Self::Heal,
            LcmOperation::Terminate => Self::Terminate,
            LcmOperation::ChangeExtConn => Self::ChangeExtConn,
        }
    }
}

#[cfg(test)]
mod tests;
