//! What intake decided about one request file (`intake.outcome`): the audit of every file that
//! reached the spool, accepted or not.

use std::fmt;

/// The outcome recorded for a request file, one of the `intake.outcome` CHECK values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntakeOutcome {
    /// Valid: it created an LCM operation occurrence or carried out a task (RETRY, FAIL,
    /// ROLLBACK).
    Accepted,
    /// Same content or idempotency key as an accepted request: matched to that occurrence, nothing
    /// new created.
    Duplicate,
    /// Refused; `intake.problem` holds the ProblemDetails.
    Rejected,
}

impl IntakeOutcome {
    /// The stored spelling: `ACCEPTED`, `DUPLICATE` or `REJECTED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "ACCEPTED",
            Self::Duplicate => "DUPLICATE",
            Self::Rejected => "REJECTED",
        }
    }

    /// Parses the stored spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ACCEPTED" => Some(Self::Accepted),
            "DUPLICATE" => Some(Self::Duplicate),
            "REJECTED" => Some(Self::Rejected),
            _ => None,
        }
    }
}

impl fmt::Display for IntakeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::IntakeOutcome::{self, *};

    #[test]
    fn spelling_round_trips() {
        for o in [Accepted, Duplicate, Rejected] {
            assert_eq!(IntakeOutcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(IntakeOutcome::parse("accepted"), None);
    }
}
