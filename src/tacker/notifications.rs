//! The endpoint Tacker sends LCM notifications to (`[tacker]`): the subscriber side of SOL003
//! v3.3.1 §5.4.20 (`callbackUri`) with the authentication of SOL013 §8.3.4: HTTP Basic (the
//! subscription's `paramsBasic`) or an OAuth 2.0 Bearer token from vnfkeeper's own token
//! endpoint (`paramsOauth2ClientCredentials`, `oauth.rs`), as `tacker.auth_type` says.
//!
//! - `GET <callback_path>`: Tacker's test of the callback URI when a subscription is created
//!   (`test_notification`): 204 when authenticated.
//! - `POST <callback_path>`: one notification (`wire::notification`). Checked in this order, each
//!   failure without a side effect: credentials (401 with `WWW-Authenticate: Basic` or
//!   `Bearer`), size (413
//!   above `max_body_kib`), content (400, a ProblemDetails naming each defective field by its
//!   JSON pointer). A valid one is **committed to the store before the 204** (Tacker sends each
//!   notification once and does not retry, so a 204 means vnfkeeper has it); a duplicate (same
//!   `id`, or same `vnfLcmOpOccId` and `operationState`) is answered 204 and recorded once. A
//!   store failure is a 500.
//! - **Group commit**: the handlers hand valid notifications to one committer task, which
//!   records everything waiting in one transaction (at most [`BATCH`]) and answers each handler
//!   after that commit. Under load one commit serves many senders; alone, a notification is
//!   committed at once. No 204 precedes the commit of its notification.
//!
//! Served by the daemon's HTTP server (`http.rs`), on its own task: nothing here touches the main
//! loop.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

use super::credentials::Credentials;
use crate::store::Db;
use vnfkeeper_core::model::{FieldProblem, ProblemDetails, Timestamp};
use vnfkeeper_core::wire::notification;

/// Most notifications one transaction of the committer records.
pub const BATCH: usize = 256;

/// One valid notification waiting for the committer, and where its outcome goes: whether it was
/// new, or the store's error as text.
type Job = (
    notification::Notification,
    tokio::sync::oneshot::Sender<Result<bool, String>>,
);

/// The credentials Tacker must present on the callback (`tacker.auth_type`).
pub enum Check {
    /// `BASIC`: `Authorization: Basic` with `tacker.username` and the password (RFC 7617).
    Basic(Arc<Credentials>),
    /// `OAUTH2_CLIENT_CREDENTIALS`: `Authorization: Bearer` with a live token of this issuer
    /// (RFC 6750 §2.1; the token endpoint is `oauth.rs`).
    Bearer(Arc<super::oauth::Tokens>),
}

/// What the endpoint needs: the credentials Tacker must present, the size limit, and the
/// committer that records notifications in the store.
pub struct Callback {
    pub(super) check: Check,
    pub(super) max_body_bytes: usize,
    commits: tokio::sync::mpsc::Sender<Job>,
}

/// Records the notifications the handlers send, many per transaction (see the module comment);
/// wakes `wake` after a commit that recorded a new one. Ends when every sender is gone.
async fn committer(
    db: Db,
    mut jobs: tokio::sync::mpsc::Receiver<Job>,
    wake: Option<Arc<tokio::sync::Notify>>,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(BATCH);
    while jobs.recv_many(&mut batch, BATCH).await > 0 {
        let now = Timestamp(chrono::Utc::now());
        let outcome = db.write(|tx| {
            batch
                .iter()
                .map(|(n, _)| tx.record_notification(n, now))
                .collect::<crate::store::Result<Vec<bool>>>()
        });
        match outcome {
            Ok(new) => {
                crate::failpoint::hit("tacker-notification-committed");
                if new.iter().any(|n| *n)
                    && let Some(w) = &wake
                {
                    w.notify_one();
                }
                for ((_, answer), new) in batch.drain(..).zip(new) {
                    let _ = answer.send(Ok(new));
                }
            }
            Err(e) => {
                let why = e.to_string();
                for (_, answer) in batch.drain(..) {
                    let _ = answer.send(Err(why.clone()));
                }
            }
        }
    }
}

impl Callback {
    /// The endpoint's state over `db`, with the credentials Tacker must present (`check`) and
    /// the size limit
    /// (`tacker.max_body_kib` in bytes); starts its committer task on the current runtime.
    /// `wake` is notified after a commit that recorded a new notification: companion mode then
    /// reads Tacker's API at once (a notification is a hint; the API is the truth).
    pub fn start(
        db: Db,
        check: Check,
        max_body_bytes: usize,
        wake: Option<Arc<tokio::sync::Notify>>,
    ) -> Arc<Self> {
        let (commits, jobs) = tokio::sync::mpsc::channel(4 * BATCH);
        tokio::spawn(committer(db, jobs, wake));
        Arc::new(Self {
            check,
            max_body_bytes,
            commits,
        })
    }
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl Callback {
    /// Whether the request carries the configured credentials: `Authorization: Basic
    /// <base64(user:password)>` (RFC 7617) or `Authorization: Bearer <token>` (RFC 6750 §2.1)
    /// as `tacker.auth_type` says; compared in constant time.
    pub(super) fn authorized(&self, headers: &HeaderMap) -> bool {
        let credentials = match &self.check {
            Check::Basic(credentials) => credentials,
            Check::Bearer(tokens) => return tokens.authorized(headers),
        };
        let Some(value) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let Some((scheme, token)) = value.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(given) = base64::engine::general_purpose::STANDARD.decode(token.trim()) else {
            return false;
        };
        credentials.with(|username, password, _| {
            let mut want = Vec::with_capacity(username.len() + 1 + password.expose().len());
            want.extend_from_slice(username.as_bytes());
            want.push(b':');
            want.extend_from_slice(password.expose().as_bytes());
            bool::from(given.ct_eq(&want))
        })
    }
}

/// The routes on `path`: `GET` (the callback test) and `POST` (a notification); other methods
/// 405.
pub fn router(path: &str, callback: Arc<Callback>) -> Router {
    Router::new()
        .route(path, get(test).post(notify))
        .with_state(callback)
}

pub(super) fn problem(
    status: StatusCode,
    detail: impl Into<String>,
    errors: Vec<FieldProblem>,
) -> Response {
    let p = ProblemDetails::new(status.as_u16(), detail, errors);
    let body = serde_json::to_vec(&p).unwrap_or_default();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        )],
        body,
    )
        .into_response()
}

pub(super) fn unauthorized(check: &Check) -> Response {
    let (detail, challenge) = match check {
        Check::Basic(_) => (
            "missing or wrong credentials (HTTP Basic, the subscription's paramsBasic)",
            "Basic realm=\"vnfkeeper\"",
        ),
        Check::Bearer(_) => (
            "missing, unknown or expired access token (the subscription's paramsOauth2ClientCredentials)",
            "Bearer realm=\"vnfkeeper\", error=\"invalid_token\"",
        ),
    };
    let mut r = problem(StatusCode::UNAUTHORIZED, detail, Vec::new());
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    r
}

/// How much of a body over the limit is still read (and dropped) so that the client gets the
/// 413 instead of a reset connection; a larger declared body is refused without reading.
pub(super) const DRAIN_BYTES: usize = 1 << 20;

/// The body of a Tacker request (`what`: "notification", "hook request"), at most `max` bytes.
/// Errors, as the answer to send: 413 when its declared or read length is past `max` (a longer
/// body is read on up to [`DRAIN_BYTES`] more and dropped, so the client gets the 413 instead of
/// a reset connection; a larger declared one is not read), 400 when the client's stream failed.
pub(super) async fn bounded_body(
    headers: &HeaderMap,
    mut body: axum::body::Body,
    max: usize,
    what: &str,
) -> Result<Vec<u8>, Response> {
    use http_body_util::BodyExt as _;
    let too_large = || {
        problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the {what} is larger than {max} bytes (tacker.max_body_kib)"),
            Vec::new(),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > (max + DRAIN_BYTES) as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            problem(
                StatusCode::BAD_REQUEST,
                format!("the body could not be read: {e}"),
                Vec::new(),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len();
        if seen <= max {
            buf.extend_from_slice(&data);
        } else if seen > max + DRAIN_BYTES {
            break;
        }
    }
    if seen > max {
        return Err(too_large());
    }
    Ok(buf)
}

/// 400 for a Tacker request (`what`) that did not parse: every field problem by its RFC 6901
/// pointer in the detail and in `errors`; the refusal is logged at a bounded rate.
pub(super) fn invalid_body(what: &str, errors: Vec<FieldProblem>) -> Response {
    let detail = format!(
        "the {what} is not valid: {}",
        errors
            .iter()
            .map(|e| format!(
                "{}: {}",
                if e.pointer.is_empty() {
                    "/"
                } else {
                    &e.pointer
                },
                e.reason
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    crate::ratelog::refused_with(crate::ratelog::Refusal::TackerInvalid, &detail);
    problem(StatusCode::BAD_REQUEST, detail, errors)
}

/// `GET`: Tacker's callback test.
async fn test(State(cb): State<Arc<Callback>>, headers: HeaderMap) -> Response {
    if !cb.authorized(&headers) {
        return unauthorized(&cb.check);
    }
    StatusCode::NO_CONTENT.into_response()
}

/// `POST`: one notification, committed before the 204.
async fn notify(State(cb): State<Arc<Callback>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if !cb.authorized(&parts.headers) {
        crate::ratelog::refused(crate::ratelog::Refusal::TackerCredentials);
        return unauthorized(&cb.check);
    }
    let bytes = match bounded_body(&parts.headers, body, cb.max_body_bytes, "notification").await {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let n = match notification::parse(&bytes) {
        Ok(n) => n,
        Err(errors) => return invalid_body("notification", errors),
    };
    let (answer, outcome) = tokio::sync::oneshot::channel();
    let id = n.id.clone();
    let summary = (
        n.notification_type,
        n.vnf_instance_id.clone(),
        n.occurrence.clone(),
    );
    let outcome = match cb.commits.send((n, answer)).await {
        Ok(()) => outcome
            .await
            .unwrap_or_else(|_| Err("the committer stopped".into())),
        Err(_) => Err("the committer stopped".into()),
    };
    let (notification_type, vnf_instance_id, occurrence) = summary;
    match outcome {
        Ok(new) => {
            let o = occurrence.as_ref();
            tracing::info!(
                notification_id = %id,
                notification_type = notification_type.as_str(),
                vnf_instance_id = %vnf_instance_id,
                tacker_op_occ_id = o.map(|o| o.vnf_lcm_op_occ_id.as_str()),
                operation = o.map(|o| o.operation.as_str()),
                operation_state = o.map(|o| o.operation_state.as_str()),
                duplicate = !new,
                "Tacker notification {}",
                if new { "recorded" } else { "already recorded" }
            );
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, notification_id = %id, "Tacker notification not recorded");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the notification could not be stored",
                Vec::new(),
            )
        }
    }
}
