//! [`CloudError`]: every failure of a cloud call, classified for retry decisions.
//!
//! Errors carry the HTTP method, the request URL (never a token: OpenStack sends tokens in the
//! `X-Auth-Token` header, not in URLs) and the API's own error message, never a password.

use std::path::PathBuf;
use std::time::Duration;

use super::StackStatus;

/// Coarse class of a [`CloudError`], for callers that branch on it (retry, treat as gone, alert).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// HTTP 404 (or 410): the resource or stack does not exist.
    NotFound,
    /// HTTP 409: e.g. Heat's `ActionInProgress`, `StackExists`.
    Conflict,
    /// HTTP 400, 405, 406, 413, 415, 422 and other 4xx not listed here: the request was refused.
    BadRequest,
    /// HTTP 401 or a failed Keystone authentication.
    Unauthorized,
    /// HTTP 403.
    Forbidden,
    /// HTTP 429 (rate limited / over quota of requests).
    RateLimited,
    /// HTTP 5xx.
    Server,
    /// No answer within the client's timeout.
    Timeout,
    /// TCP/TLS connection failure or the connection broke mid-request.
    Connection,
    /// The answer could not be decoded into the expected JSON shape.
    InvalidResponse,
    /// A Heat stack reached a `*_FAILED` (or rollback) status.
    StackFailed,
    /// [`Cloud::wait_stack`](super::Cloud::wait_stack) ran past its deadline.
    WaitTimeout,
    /// The clouds.yaml file or entry is missing or unusable.
    Config,
    /// The service is not in the Keystone catalog (for this region/interface).
    EndpointNotFound,
    /// Anything else reported by the auth/catalog layer.
    Other,
}

/// Failure of a call to the OpenStack APIs.
///
/// `Display` gives one line an operator can act on (method, URL, HTTP status, the service's
/// message). No variant holds a password or token.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The API answered with an HTTP error status.
    #[error("{method} {url}: HTTP {status}{}: {message}", error_type.as_deref().map(|t| format!(" ({t})")).unwrap_or_default())]
    Api {
        /// HTTP method, e.g. `GET`.
        method: String,
        /// Request URL (endpoint from the catalog + path + query).
        url: String,
        /// HTTP status code.
        status: u16,
        /// The service's error type when it gives one (Heat `error.type`, Neutron `type`,
        /// Nova/Cinder top-level key such as `itemNotFound`).
        error_type: Option<String>,
        /// The service's error message (Heat `error.message`/`explanation`, Neutron `message`,
        /// Nova/Cinder `message`), or the start of the body.
        message: String,
    },
    /// No complete answer within the configured per-request timeout.
    #[error("{method} {url}: no answer within {after:?}")]
    Timeout {
        /// HTTP method.
        method: String,
        /// Request URL, or the catalog service type when the URL was not resolved yet.
        url: String,
        /// The timeout that expired.
        after: Duration,
    },
    /// Connection refused/reset, DNS or TLS failure (check the endpoint URLs and `cacert`).
    #[error(
        "{method} {url}: connection failed: {message} (check the endpoint and, for TLS, `cacert` in clouds.yaml)"
    )]
    Connection {
        /// HTTP method.
        method: String,
        /// Request URL or service type.
        url: String,
        /// What the HTTP layer reported.
        message: String,
    },
    /// The body did not decode into the expected shape.
    #[error("{method} {url}: invalid response: {message}")]
    InvalidResponse {
        /// HTTP method.
        method: String,
        /// Request URL.
        url: String,
        /// Decoding error.
        message: String,
    },
    /// A stack ended in a failure status (`*_FAILED`, `ROLLBACK_COMPLETE`).
    #[error("stack {stack}: {status}: {reason}")]
    StackFailed {
        /// `name/id` of the stack.
        stack: String,
        /// Heat `stack_status`, e.g. `CREATE_FAILED`.
        status: StackStatus,
        /// Heat `stack_status_reason`.
        reason: String,
    },
    /// The stack did not reach one of the awaited statuses before the deadline.
    #[error("stack {stack}: still {} after {waited:?} (waiting for {wanted})", status.as_ref().map_or("", StackStatus::as_str))]
    WaitTimeout {
        /// `name/id` of the stack.
        stack: String,
        /// Last status seen (`None` if none could be read).
        status: Option<StackStatus>,
        /// How long the wait lasted.
        waited: Duration,
        /// The awaited statuses, comma-separated.
        wanted: String,
    },
    /// clouds.yaml is missing, unreadable, or the named cloud entry is unusable.
    #[error("cloud configuration {path}: {message}")]
    Config {
        /// The clouds.yaml path.
        path: PathBuf,
        /// What is wrong (never a secret value).
        message: String,
    },
    /// Keystone refused the credentials or the token.
    #[error("{context}: authentication failed: {message}")]
    Auth {
        /// What was attempted (e.g. `connect to cloud 'x'`, or `GET <url>`).
        context: String,
        /// Keystone's message.
        message: String,
    },
    /// The catalog has no endpoint of this service type for the configured region/interface.
    #[error("no endpoint for service type '{service}' in the Keystone catalog: {message}")]
    EndpointNotFound {
        /// Catalog service type, e.g. `orchestration`.
        service: String,
        /// Details from the catalog lookup.
        message: String,
    },
    /// Any other failure of the auth/catalog layer (osauth).
    #[error("{context}: {message}")]
    Other {
        /// What was attempted.
        context: String,
        /// The layer's message.
        message: String,
    },
}

impl CloudError {
    /// The coarse class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CloudError::Api { status, .. } => kind_of_status(*status),
            CloudError::Timeout { .. } => ErrorKind::Timeout,
            CloudError::Connection { .. } => ErrorKind::Connection,
            CloudError::InvalidResponse { .. } => ErrorKind::InvalidResponse,
            CloudError::StackFailed { .. } => ErrorKind::StackFailed,
            CloudError::WaitTimeout { .. } => ErrorKind::WaitTimeout,
            CloudError::Config { .. } => ErrorKind::Config,
            CloudError::Auth { .. } => ErrorKind::Unauthorized,
            CloudError::EndpointNotFound { .. } => ErrorKind::EndpointNotFound,
            CloudError::Other { .. } => ErrorKind::Other,
        }
    }

    /// True when retrying the same call later may succeed: timeouts (including a stack wait that
    /// ran out of time), connection errors, HTTP 5xx and 429. False for 4xx, failed stacks,
    /// configuration and decoding errors.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Timeout
                | ErrorKind::Connection
                | ErrorKind::Server
                | ErrorKind::RateLimited
                | ErrorKind::WaitTimeout
        )
    }

    /// True for HTTP 404/410 answers.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// The HTTP status, for [`CloudError::Api`].
    pub fn status(&self) -> Option<u16> {
        match self {
            CloudError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Maps an HTTP error status to an [`ErrorKind`].
pub(crate) fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        401 => ErrorKind::Unauthorized,
        403 => ErrorKind::Forbidden,
        404 | 410 => ErrorKind::NotFound,
        409 => ErrorKind::Conflict,
        429 => ErrorKind::RateLimited,
        500..=599 => ErrorKind::Server,
        _ => ErrorKind::BadRequest,
    }
}

/// Extracts `(error_type, message)` from an OpenStack error body.
///
/// Shapes handled: Heat/Keystone `{"error": {"type"?, "message"}, "explanation"?}`, Neutron
/// `{"NeutronError": {"type", "message"}}`, Nova/Cinder `{"itemNotFound": {"code", "message"}}`,
/// plain `{"message"}`/`{"faultstring"}`/`{"title"}`; anything else gives the first 300 characters
/// of the body on one line. Heat tracebacks are never included.
pub(crate) fn error_message(body: &str) -> (Option<String>, String) {
    let text =
        |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(e) = m.get("error").filter(|e| e.is_object()) {
            let msg = text(e, "message")
                .or_else(|| text(&serde_json::Value::Object(m.clone()), "explanation"));
            if let Some(msg) = msg {
                return (text(e, "type").or_else(|| text(e, "title")), one_line(&msg));
            }
        }
        for key in ["message", "faultstring", "explanation", "title"] {
            if let Some(msg) = m.get(key).and_then(|x| x.as_str()) {
                return (None, one_line(msg));
            }
        }
        if m.len() == 1
            && let Some((k, v)) = m.iter().next()
            && let Some(msg) = text(v, "message")
        {
            return (text(v, "type").or_else(|| Some(k.clone())), one_line(&msg));
        }
    }
    (None, one_line(body))
}

/// Collapses whitespace and truncates to 300 characters.
fn one_line(s: &str) -> String {
    let mut out: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.chars().count() > 300 {
        out = out.chars().take(300).collect::<String>() + "…";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_each_service() {
        let heat = r#"{"code":404,"title":"Not Found","explanation":"The Stack (x) could not be found.",
            "error":{"type":"EntityNotFound","message":"The Stack (x) could not be found.","traceback":"Traceback..."}}"#;
        assert_eq!(
            error_message(heat),
            (
                Some("EntityNotFound".into()),
                "The Stack (x) could not be found.".into()
            )
        );
        let neutron = r#"{"NeutronError":{"type":"PortNotFound","message":"Port p could not be found.","detail":""}}"#;
        assert_eq!(
            error_message(neutron),
            (
                Some("PortNotFound".into()),
                "Port p could not be found.".into()
            )
        );
        let nova = r#"{"itemNotFound":{"code":404,"message":"Instance i could not be found."}}"#;
        assert_eq!(
            error_message(nova),
            (
                Some("itemNotFound".into()),
                "Instance i could not be found.".into()
            )
        );
        assert_eq!(
            error_message("<html>\n bad  gateway</html>"),
            (None, "<html> bad gateway</html>".into())
        );
        assert_eq!(error_message(&"x".repeat(400)).1.chars().count(), 301);
    }

    #[test]
    fn transient_classification() {
        let api = |status| CloudError::Api {
            method: "GET".into(),
            url: "u".into(),
            status,
            error_type: None,
            message: "m".into(),
        };
        assert!(api(500).is_transient());
        assert!(api(503).is_transient());
        assert!(api(429).is_transient());
        assert!(!api(404).is_transient());
        assert!(api(404).is_not_found());
        assert!(!api(409).is_transient());
        assert!(!api(401).is_transient());
        assert_eq!(api(409).kind(), ErrorKind::Conflict);
        assert!(
            CloudError::Timeout {
                method: "GET".into(),
                url: "u".into(),
                after: Duration::from_secs(1)
            }
            .is_transient()
        );
        assert!(
            !CloudError::StackFailed {
                stack: "s".into(),
                status: "CREATE_FAILED".into(),
                reason: "r".into()
            }
            .is_transient()
        );
        assert_eq!(api(503).to_string(), "GET u: HTTP 503: m",);
    }
}
