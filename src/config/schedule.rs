//! The reconcile schedule (`reconcile.schedule`): a crontab(5) line, optionally with a leading
//! seconds field and a trailing year, parsed by the `croner` crate into a [`Schedule`].

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A parsed `reconcile.schedule`.
///
/// Fields as in crontab(5): `min hour dom mon dow`, day of week 0–7 (0 and 7 = Sunday) or
/// names, and when both day of month and day of week are restricted a day matching either one
/// fires (crontab(5), "Note: The day of a command's execution can be specified by two fields");
/// an optional seconds field in front (6 fields) and an optional year at the end (7 fields);
/// `@hourly`-style aliases.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule(Cron);

impl Schedule {
    /// The first time strictly after `t` that the schedule fires; `None` when it never fires
    /// again (a past year) or the search gives up (croner's limit).
    pub fn next_after(&self, t: &DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.0.find_next_occurrence(t, false).ok()
    }
}

/// Parses a cron schedule ([`Schedule`] gives the syntax). Errors: [`ScheduleError`], a message
/// for the operator.
pub fn parse_schedule(text: &str) -> Result<Schedule, ScheduleError> {
    let fields = text.split_whitespace().count();
    let alias = fields == 1 && text.trim_start().starts_with('@');
    if !alias && !(5..=7).contains(&fields) {
        return Err(ScheduleError::FieldCount(fields));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Optional)
        .build()
        .parse(text)
        .map(Schedule)
        .map_err(|e| ScheduleError::Invalid {
            text: text.to_owned(),
            reason: e.to_string(),
        })
}

/// Why `reconcile.schedule` was refused ([`parse_schedule`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Neither 5 crontab fields, 6/7 fields with seconds (and year), nor an `@` alias.
    #[error(
        "expected 5 crontab fields (min hour dom mon dow) or 6/7 fields starting with seconds, got {0}"
    )]
    FieldCount(usize),
    /// croner refused the expression (a value out of range, an unknown name, …).
    #[error("invalid cron expression `{text}`: {reason}")]
    Invalid {
        /// The schedule as written.
        text: String,
        /// croner's message.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Timelike};

    fn next(s: &str, after: DateTime<Utc>) -> DateTime<Utc> {
        parse_schedule(s).unwrap().next_after(&after).unwrap()
    }

    #[test]
    fn crontab_day_numbers_mean_what_crontab_says() {
        // 2026-11-21 is a Saturday.
        let sat = Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap();
        assert_eq!(next("0 9 * * 1-5", sat).weekday(), chrono::Weekday::Mon);
        assert_eq!(next("0 9 * * 0", sat).weekday(), chrono::Weekday::Sun);
        assert_eq!(next("0 9 * * 7", sat).weekday(), chrono::Weekday::Sun);
        assert_eq!(next("0 9 * * 5-7", sat).weekday(), chrono::Weekday::Sun);
        // With seconds, day numbers keep crontab's meaning (1 = Monday).
        let n = next("30 0 9 * * 1", sat);
        assert_eq!((n.weekday(), n.second()), (chrono::Weekday::Mon, 30));
        assert_eq!(
            next("0 0 9 * * Mon-Fri", sat).weekday(),
            chrono::Weekday::Mon
        );
        assert!(parse_schedule("0 9 * * 8").is_err());
        assert!(parse_schedule("@hourly").is_ok());
        assert_eq!(
            parse_schedule("every minute").unwrap_err(),
            ScheduleError::FieldCount(2)
        );
    }

    #[test]
    fn day_of_month_or_day_of_week_as_in_crontab() {
        // "0 0 1 * 1": the 1st of the month or any Monday. After Saturday 2026-11-21 the next
        // is Monday 2026-11-23 (not the next Monday that is a 1st).
        let sat = Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap();
        let n = next("0 0 1 * 1", sat);
        assert_eq!((n.month(), n.day()), (11, 23));
        let n = next("0 0 1 * 1", n);
        assert_eq!((n.month(), n.day()), (11, 30));
        let n = next("0 0 1 * 1", n);
        assert_eq!((n.month(), n.day()), (12, 1));
    }
}
