//! ProblemDetails (RFC 7807, SOL013 §6.3): the error shape of rejected requests and failed operations.

use serde::{Deserialize, Serialize};

/// SOL013 ProblemDetails plus `errors`, the list of defective fields of a rejected request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemDetails {
    /// HTTP-style status: 400 invalid, 401 unauthenticated, 404 unknown target, 409 conflict with current state, 413 too large.
    pub status: u16,
    /// Short summary of the problem type, e.g. `Bad Request`.
    pub title: String,
    /// What is wrong, for an operator; never contains a secret.
    pub detail: String,
    /// Each defective field, by RFC 6901 JSON pointer into the envelope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldProblem>,
}

/// One defective field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldProblem {
    /// RFC 6901 pointer into the envelope (`""` = the whole file).
    pub pointer: String,
    /// Why the field is wrong.
    pub reason: String,
}

impl ProblemDetails {
    /// A problem with the standard title for `status`.
    pub fn new(status: u16, detail: impl Into<String>, errors: Vec<FieldProblem>) -> Self {
        let title = match status {
            400 => "Bad Request",
            401 => "Unauthorized",
            404 => "Not Found",
            409 => "Conflict",
            413 => "Payload Too Large",
            422 => "Unprocessable Entity",
            500 => "Internal Server Error",
            _ => "Error",
        };
        Self {
            status,
            title: title.into(),
            detail: detail.into(),
            errors,
        }
    }
}
