//! WARN lines at a bounded rate for what an outside client can cause at will: refused
//! notifications, token requests and connections. Each [`Refusal`] kind writes at most one line
//! per [`INTERVAL`]; the refusals in between are counted, and the next line of that kind (the
//! next refusal after the interval, or [`flush`], which the HTTP server calls every second)
//! carries their number in the field `suppressed`. So 5,000 refused requests in two seconds
//! write two lines, not 5,000, and journald's per-service rate limit (10,000 messages in 30 s by
//! default, after which it drops the daemon's own messages too) is never reached through them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Least time between two lines of one kind.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// What was refused: one rate-limited line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A Tacker notification or callback test without the configured credentials (401).
    TackerCredentials,
    /// A Tacker notification that is not valid (400); the line carries the first one's reasons.
    TackerInvalid,
    /// A token request with wrong, missing, incomplete or malformed client credentials (401).
    TokenClient,
    /// A connection closed at once because its source address already has the most
    /// connections one source may have ([`crate::daemon::http::MAX_PER_SOURCE`]).
    SourceLimit,
}

impl Refusal {
    const ALL: [Refusal; 4] = [
        Refusal::TackerCredentials,
        Refusal::TackerInvalid,
        Refusal::TokenClient,
        Refusal::SourceLimit,
    ];

    /// The line's message.
    fn message(self) -> &'static str {
        match self {
            Refusal::TackerCredentials => {
                "Tacker notification refused: missing or wrong credentials"
            }
            Refusal::TackerInvalid => "Tacker notification refused",
            Refusal::TokenClient => "OAuth 2.0 token refused: wrong or missing client credentials",
            Refusal::SourceLimit => {
                "HTTP endpoint: connection refused, its source address has too many open"
            }
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One kind's window: when its last line was written and how many refusals since went unlogged.
#[derive(Clone, Copy)]
struct Window {
    last_line: Option<Instant>,
    suppressed: u64,
}

static WINDOWS: Mutex<[Window; 4]> = Mutex::new(
    [Window {
        last_line: None,
        suppressed: 0,
    }; 4],
);

/// One refusal of `kind` at `now`: `Some(n)` to write a line (`n`: refusals of this kind not
/// logged before it), `None` to only count it.
fn note(kind: Refusal, now: Instant) -> Option<u64> {
    let mut windows = WINDOWS.lock().unwrap_or_else(|p| p.into_inner());
    let w = &mut windows[kind.index()];
    match w.last_line {
        Some(t) if now.saturating_duration_since(t) < INTERVAL => {
            w.suppressed += 1;
            None
        }
        _ => {
            w.last_line = Some(now);
            Some(std::mem::take(&mut w.suppressed))
        }
    }
}

/// Records one refusal of `kind`: a WARN line now (field `suppressed`: refusals of this kind not
/// logged since the previous line) unless one was written less than [`INTERVAL`] ago; then only
/// counted.
pub fn refused(kind: Refusal) {
    if let Some(suppressed) = note(kind, Instant::now()) {
        tracing::warn!(suppressed, "{}", kind.message());
    }
}

/// [`refused`] with a detail (a validation reason naming fields, never their values) written
/// in the line when there is one.
pub fn refused_with(kind: Refusal, detail: &str) {
    if let Some(suppressed) = note(kind, Instant::now()) {
        tracing::warn!(suppressed, detail, "{}", kind.message());
    }
}

/// Writes, for every kind whose last line is at least [`INTERVAL`] old and that counted
/// refusals since, one line with their number: the count is not lost when the refusals stop.
pub fn flush() {
    for (kind, n) in due(Instant::now()) {
        tracing::warn!(
            suppressed = n,
            "{} ({n} more in the last {} s, one line per {} s)",
            kind.message(),
            INTERVAL.as_secs(),
            INTERVAL.as_secs()
        );
    }
}

/// The kinds with unlogged refusals whose last line is at least [`INTERVAL`] before `now`, and
/// their counts (reset, the line time set to `now`).
fn due(now: Instant) -> Vec<(Refusal, u64)> {
    let mut windows = WINDOWS.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for kind in Refusal::ALL {
        let w = &mut windows[kind.index()];
        if w.suppressed > 0
            && w.last_line
                .is_none_or(|t| now.saturating_duration_since(t) >= INTERVAL)
        {
            out.push((kind, std::mem::take(&mut w.suppressed)));
            w.last_line = Some(now);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_rest_counted() {
        // One kind only in this test: the windows are process-wide.
        let k = Refusal::SourceLimit;
        let t0 = Instant::now();
        assert_eq!(note(k, t0), Some(0));
        for i in 1..5_000u64 {
            assert_eq!(note(k, t0 + Duration::from_millis(i / 3)), None);
        }
        // Not yet due: the first line is less than an interval old.
        assert!(
            due(t0 + Duration::from_secs(9))
                .iter()
                .all(|(r, _)| *r != k)
        );
        let flushed = due(t0 + INTERVAL);
        assert!(flushed.contains(&(k, 4_999)), "{flushed:?}");
        // Counted once: nothing left, and the next refusal waits another interval.
        assert!(due(t0 + 3 * INTERVAL).iter().all(|(r, _)| *r != k));
        assert_eq!(note(k, t0 + INTERVAL + Duration::from_secs(1)), None);
        assert_eq!(note(k, t0 + 2 * INTERVAL + Duration::from_secs(1)), Some(1));
    }
}
