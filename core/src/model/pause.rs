//! Maintenance pauses: an operator's "I am working on this VNF, do not heal it". While a pause
//! is in force, reconcile keeps observing and recording the VNF but starts no automatic
//! operation; operations an operator submits still run. A pause covers one VNF instance or every
//! instance (`vnfkeeper pause --all`), names who set it and why, and may end by itself at
//! `until`. Comparable switches: Cluster API's `cluster.x-k8s.io/paused` annotation, Masakari's
//! segment `enabled`, magnum-auto-healer's `auto_healing_enabled` label.

use std::time::Duration;

use super::{Timestamp, VnfInstanceId};

/// What a pause covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PauseScope {
    /// Every VNF instance (stored as `*`, which no vnfInstanceId can be: those are
    /// `[A-Za-z0-9._-]`).
    All,
    /// One VNF instance.
    Vnf(VnfInstanceId),
}

impl PauseScope {
    /// The stored form: the vnfInstanceId, or `*` for every instance.
    pub fn as_key(&self) -> &str {
        match self {
            PauseScope::All => "*",
            PauseScope::Vnf(id) => id.as_str(),
        }
    }

    /// The inverse of [`Self::as_key`].
    pub fn from_key(key: &str) -> Self {
        if key == "*" {
            PauseScope::All
        } else {
            PauseScope::Vnf(key.into())
        }
    }

    /// The vnfInstanceId, `None` for [`PauseScope::All`].
    pub fn vnf_instance_id(&self) -> Option<&VnfInstanceId> {
        match self {
            PauseScope::All => None,
            PauseScope::Vnf(id) => Some(id),
        }
    }
}

/// One maintenance pause as stored (table `maintenance_pause`, `V9__maintenance_pause.sql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenancePause {
    /// What it covers.
    pub scope: PauseScope,
    /// Who set it: `uid N (name)` for the CLI, `INSTANTIATE request <vnfLcmOpOccId>` at intake.
    pub paused_by: String,
    /// Why (free text, one line), if given.
    pub reason: Option<String>,
    /// When it was set.
    pub since: Timestamp,
    /// When it ends by itself (`None`: until `vnfkeeper resume`).
    pub until: Option<Timestamp>,
}

impl MaintenancePause {
    /// In force at `now`: no `until`, or `now` before it.
    pub fn active_at(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|u| now < u)
    }

    /// One line for humans: `paused by <who> [until <time>] [(<reason>)]`.
    pub fn describe(&self) -> String {
        let mut s = format!("paused by {}", self.paused_by);
        if let Some(u) = self.until {
            s.push_str(&format!(" until {u}"));
        }
        if let Some(r) = &self.reason {
            s.push_str(&format!(" ({r})"));
        }
        s
    }
}

/// The pause in force for VNF `vnf` at `now`: its own, else the global one; `None` when neither
/// is in force.
pub fn in_force<'a>(
    pauses: &'a [MaintenancePause],
    vnf: &VnfInstanceId,
    now: Timestamp,
) -> Option<&'a MaintenancePause> {
    let own = pauses
        .iter()
        .find(|p| p.scope.vnf_instance_id() == Some(vnf) && p.active_at(now));
    own.or_else(|| {
        pauses
            .iter()
            .find(|p| p.scope == PauseScope::All && p.active_at(now))
    })
}

/// The pauses whose `until` has passed at `now` (to be removed, each with a
/// `MAINTENANCE_RESUMED` event).
pub fn expired(pauses: &[MaintenancePause], now: Timestamp) -> Vec<&MaintenancePause> {
    pauses.iter().filter(|p| !p.active_at(now)).collect()
}

/// Why a `--until` or `--since` argument was refused ([`parse_until`], [`parse_since`]); each
/// message quotes the argument as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeArgError {
    /// Neither an RFC 3339 time nor a span.
    #[error(
        "`{0}`: expected an RFC 3339 time (e.g. 2026-11-24T18:00:00Z) or a span such as 90m, 2h, 1d"
    )]
    NotTimeOrSpan(String),
    /// A span of zero, of a fraction of a second, of more than 366 days, or in an unknown unit.
    #[error(
        "`{0}`: expected an RFC 3339 time (e.g. 2026-11-24T18:00:00Z) or a span such as 90m, 2h, 1d (at most 366d)"
    )]
    SpanOutOfRange(String),
    /// A span the clock cannot represent.
    #[error("`{0}`: too long")]
    TooLong(String),
    /// `--until` names a time not after now.
    #[error("`{text}`: {at} is not in the future")]
    NotInFuture {
        /// The argument as given.
        text: String,
        /// The time it names.
        at: Timestamp,
    },
}

/// Parses a span with `humantime` (`90m`, `2h`, `1d`, `1h30m`, `2w`; `m` is minutes, `M`
/// months), of whole seconds, more than zero and at most 366 days. Errors: [`TimeArgError`]
/// quoting `text` — `NotTimeOrSpan` for text that is no span, `SpanOutOfRange` for a span out
/// of bounds or with a fraction of a second.
fn parse_span(text: &str, t: &str) -> Result<chrono::Duration, TimeArgError> {
    let span = humantime::parse_duration(t).map_err(|e| match e {
        // A number and a unit, but one of them out of what a span may be.
        humantime::DurationError::UnknownUnit { .. } | humantime::DurationError::NumberOverflow => {
            TimeArgError::SpanOutOfRange(text.to_owned())
        }
        _ => TimeArgError::NotTimeOrSpan(text.to_owned()),
    })?;
    if span.is_zero() || span.subsec_nanos() != 0 || span > Duration::from_secs(366 * 86_400) {
        return Err(TimeArgError::SpanOutOfRange(text.to_owned()));
    }
    chrono::Duration::from_std(span).map_err(|_| TimeArgError::TooLong(text.to_owned()))
}

/// Parses `--until`: an RFC 3339 time (`2026-11-24T18:00:00Z`) or a span from `now` — a
/// span such as `90m`, `2h`, `1h30m` (see `parse_span`). Errors:
/// [`TimeArgError`], naming both forms, or a time not after `now`.
pub fn parse_until(text: &str, now: Timestamp) -> Result<Timestamp, TimeArgError> {
    let t = text.trim();
    let at = match Timestamp::parse(t) {
        Ok(at) => at,
        Err(_) => Timestamp(now.0 + parse_span(text, t)?),
    };
    if at <= now {
        return Err(TimeArgError::NotInFuture {
            text: text.to_owned(),
            at,
        });
    }
    Ok(at)
}

/// Parses `vnfkeeper events --since`: an RFC 3339 time (`2026-11-24T18:00:00Z`, any offset) or
/// a span back from `now` in the form `--until` takes (`90m`: the last 90 minutes; `1d`).
/// A time in the future is accepted (it selects nothing). Errors: [`TimeArgError`], naming
/// both forms.
pub fn parse_since(text: &str, now: Timestamp) -> Result<Timestamp, TimeArgError> {
    let t = text.trim();
    match Timestamp::parse(t) {
        Ok(at) => Ok(at),
        Err(_) => Ok(Timestamp(now.0 - parse_span(text, t)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    fn pause(scope: PauseScope, until: Option<&str>) -> MaintenancePause {
        MaintenancePause {
            scope,
            paused_by: "uid 0 (root)".into(),
            reason: None,
            since: t("2026-11-24T06:00:00Z"),
            until: until.map(t),
        }
    }

    #[test]
    fn a_pause_ends_at_until_and_the_vnfs_own_goes_before_the_global_one() {
        let now = t("2026-11-24T07:00:00Z");
        let own = pause(PauseScope::Vnf("v1".into()), Some("2026-11-24T08:00:00Z"));
        let all = pause(PauseScope::All, None);
        let both = [all.clone(), own.clone()];
        assert_eq!(in_force(&both, &"v1".into(), now), Some(&own));
        assert_eq!(in_force(&both, &"v2".into(), now), Some(&all));
        let later = t("2026-11-24T08:00:00Z");
        assert_eq!(
            in_force(&both, &"v1".into(), later),
            Some(&all),
            "own one ended"
        );
        assert_eq!(
            in_force(std::slice::from_ref(&own), &"v1".into(), later),
            None
        );
        assert_eq!(expired(&both, later), vec![&own]);
        assert!(expired(&both, now).is_empty());
    }

    #[test]
    fn until_is_a_time_or_a_span_in_the_future() {
        let now = t("2026-11-24T07:00:00Z");
        assert_eq!(parse_until("90m", now), Ok(t("2026-11-24T08:30:00Z")));
        assert_eq!(parse_until("1d", now), Ok(t("2026-11-25T07:00:00Z")));
        // humantime's forms: combined units and weeks.
        assert_eq!(parse_until("1h30m", now), Ok(t("2026-11-24T08:30:00Z")));
        assert_eq!(parse_until("2w", now), Ok(t("2026-12-08T07:00:00Z")));
        assert_eq!(
            parse_until("2026-11-24T09:00:00+01:00", now),
            Ok(t("2026-11-24T08:00:00Z"))
        );
        for bad in [
            "",
            "0m",
            "5",
            "500ms",
            "-1h",
            "h",
            "400d",
            "2026-11-24T06:00:00Z",
        ] {
            assert!(parse_until(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn since_is_a_time_or_a_span_back_from_now() {
        let now = t("2026-11-24T07:00:00Z");
        assert_eq!(parse_since("90m", now), Ok(t("2026-11-24T05:30:00Z")));
        assert_eq!(parse_since(" 1d ", now), Ok(t("2026-11-23T07:00:00Z")));
        assert_eq!(
            parse_since("2026-11-24T09:00:00+01:00", now),
            Ok(t("2026-11-24T08:00:00Z"))
        );
        for bad in [
            "",
            "0m",
            "5",
            "500ms",
            "2x",
            "-1h",
            "h",
            "400d",
            "yesterday",
        ] {
            let e = parse_since(bad, now).unwrap_err();
            assert!(e.to_string().contains("RFC 3339"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_global_scope_is_a_key_no_instance_can_have() {
        assert_eq!(PauseScope::from_key("*"), PauseScope::All);
        assert_eq!(PauseScope::All.as_key(), "*");
        let v = PauseScope::Vnf("vnf-1".into());
        assert_eq!(PauseScope::from_key(v.as_key()), v);
        assert!(crate::wire::rules::identifier("*").is_err());
    }
}
