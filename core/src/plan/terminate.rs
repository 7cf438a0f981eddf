//! When a queued TERMINATE stops waiting for the operations ahead of it (SOL003 §5.5.2.8
//! TerminateVnfRequest `terminationType`, `gracefulTerminationTimeout`). Pure: `now` is passed in.
//!
//! FORCEFUL does not wait: whatever is queued or running ahead of it for the same VNF instance is
//! ended (`FAILED`, superseded) at once. GRACEFUL lets the operations ahead finish, for at most
//! `gracefulTerminationTimeout` seconds after the TERMINATE was accepted; without a timeout it
//! waits for them like any queued operation.

use chrono::{DateTime, Utc};

use crate::model::Timestamp;
use crate::wire::sol003::{TerminateVnfRequest, TerminationType};

/// `Some(reason)` when the TERMINATE accepted at `accepted_at` no longer waits for the
/// operations ahead of it at `now`; `None` while it still waits.
pub fn supersedes_ahead(
    req: &TerminateVnfRequest,
    accepted_at: Timestamp,
    now: DateTime<Utc>,
) -> Option<String> {
    match req.termination_type {
        TerminationType::Forceful => Some("FORCEFUL termination does not wait".into()),
        TerminationType::Graceful => {
            let timeout = req.graceful_termination_timeout?;
            let waited = (now - accepted_at.0).num_seconds();
            (waited >= timeout as i64).then(|| {
                format!("GRACEFUL termination waited {waited} s of gracefulTerminationTimeout {timeout} s")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: &str, timeout: Option<u64>) -> TerminateVnfRequest {
        let mut v = serde_json::json!({"terminationType": t});
        if let Some(s) = timeout {
            v["gracefulTerminationTimeout"] = s.into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn forceful_at_once_graceful_after_its_timeout_or_never() {
        let at = Timestamp::parse("2026-11-21T10:00:00.000000Z").unwrap();
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert!(supersedes_ahead(&req("FORCEFUL", None), at, at.0).is_some());
        let g = req("GRACEFUL", Some(120));
        assert!(supersedes_ahead(&g, at, t("2026-11-21T10:01:59Z")).is_none());
        assert!(supersedes_ahead(&g, at, t("2026-11-21T10:02:00Z")).is_some());
        assert!(supersedes_ahead(&req("GRACEFUL", None), at, t("2027-01-01T00:00:00Z")).is_none());
    }
}
