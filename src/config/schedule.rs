//! The reconcile schedule (`reconcile.schedule`): crontab(5) lines and the `cron` crate's
//! form with seconds, parsed into a [`cron::Schedule`].

use std::str::FromStr;

/// Parses a cron schedule. A 5-field crontab line (`min hour dom mon dow`, day of week 0–7 with
/// 0 and 7 = Sunday, as in crontab(5)) gets a seconds field of `0` and its day-of-week numbers
/// are rewritten as names; the 6/7-field form with seconds is the `cron` crate's own, where
/// day-of-week numbers mean something else (1 = Sunday), so there only names are accepted.
/// `@hourly`-style aliases work. Errors: [`ScheduleError`], a message for the operator.
pub fn parse_schedule(text: &str) -> Result<cron::Schedule, ScheduleError> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let normalised = match fields.len() {
        1 if text.trim_start().starts_with('@') => text.trim().to_owned(),
        5 => {
            let dow = crontab_dow_to_names(fields[4])?;
            format!(
                "0 {} {} {} {} {}",
                fields[0], fields[1], fields[2], fields[3], dow
            )
        }
        6 | 7 => {
            if fields[5].chars().any(|c| c.is_ascii_digit()) {
                return Err(ScheduleError::NumericWeekday(fields[5].to_owned()));
            }
            fields.join(" ")
        }
        n => return Err(ScheduleError::FieldCount(n)),
    };
    cron::Schedule::from_str(&normalised).map_err(|e| ScheduleError::Invalid {
        text: text.to_owned(),
        reason: e.to_string(),
    })
}

/// Why `reconcile.schedule` was refused ([`parse_schedule`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Neither 5 crontab fields, 6/7 fields with seconds, nor an `@` alias.
    #[error(
        "expected 5 crontab fields (min hour dom mon dow) or 6/7 fields starting with seconds, got {0}"
    )]
    FieldCount(usize),
    /// A 6/7-field schedule numbers its days of week (ambiguous: the `cron` crate's numbers
    /// differ from crontab's).
    #[error(
        "day of week `{0}` in a 6-field schedule must use names (MON-FRI), because its numbers differ from crontab; or write 5 crontab fields"
    )]
    NumericWeekday(String),
    /// A crontab day of week above 7.
    #[error("day of week {0} is out of range 0-7")]
    WeekdayOutOfRange(usize),
    /// The `cron` crate refused the normalised expression.
    #[error("invalid cron expression `{text}`: {reason}")]
    Invalid {
        /// The schedule as written.
        text: String,
        /// The `cron` crate's message.
        reason: String,
    },
}

/// Rewrites crontab(5) day-of-week numbers (0–7, 0 and 7 = Sunday) as names, keeping `*`, lists,
/// ranges and steps: `1-5` → `MON-FRI`, `0,6` → `SUN,SAT`, `*/2` unchanged.
fn crontab_dow_to_names(field: &str) -> Result<String, ScheduleError> {
    const NAMES: [&str; 8] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let name = |tok: &str| -> Result<String, ScheduleError> {
        match tok.parse::<usize>() {
            Ok(n) if n < NAMES.len() => Ok(NAMES[n].to_owned()),
            Ok(n) => Err(ScheduleError::WeekdayOutOfRange(n)),
            Err(_) => Ok(tok.to_owned()),
        }
    };
    let mut parts = Vec::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        let range = match range.split_once('-') {
            Some((a, b)) => {
                // crontab allows 5-7 (Fri..Sun); cron wants FRI-SAT,SUN for that, so expand 7 at the end.
                let (a, b) = (name(a)?, b);
                if b == "7" {
                    format!("{a}-SAT,SUN")
                } else {
                    format!("{a}-{}", name(b)?)
                }
            }
            None => name(range)?,
        };
        parts.push(match step {
            Some(s) => format!("{range}/{s}"),
            None => range,
        });
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Utc};

    #[test]
    fn crontab_day_numbers_mean_what_crontab_says() {
        // 2026-11-21 is a Saturday; "1-5" must next fire on Monday 2026-11-23.
        let s = parse_schedule("0 9 * * 1-5").unwrap();
        let after = Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap();
        let next = s.after(&after).next().unwrap();
        assert_eq!(next.weekday(), chrono::Weekday::Mon);
        assert_eq!(crontab_dow_to_names("0,6").unwrap(), "SUN,SAT");
        assert_eq!(crontab_dow_to_names("5-7").unwrap(), "FRI-SAT,SUN");
        assert_eq!(crontab_dow_to_names("*/2").unwrap(), "*/2");
        assert!(crontab_dow_to_names("8").is_err());
        assert!(parse_schedule("0 0 9 * * 1").is_err());
        assert!(parse_schedule("0 0 9 * * Mon-Fri").is_ok());
        assert!(parse_schedule("@hourly").is_ok());
    }
}
