//! UTC timestamps as stored and printed: RFC 3339 with microseconds, so they sort as text.

use chrono::{DateTime, SecondsFormat, Utc};

/// A UTC instant. Stored as text like `2026-11-21T06:00:00.123456Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    /// The stored text form (RFC 3339, microseconds, `Z`).
    pub fn to_rfc3339(self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::Micros, true)
    }

    /// Parses the stored text form. Errors: text that is not RFC 3339.
    pub fn parse(s: &str) -> Result<Self, chrono::ParseError> {
        Ok(Self(DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc)))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_microseconds() {
        let t = Timestamp::parse("2026-11-21T06:00:00.123456Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-21T06:00:00.123456Z");
        assert!(t < Timestamp::parse("2026-11-21T06:00:00.123457Z").unwrap());
    }
}
