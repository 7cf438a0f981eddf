//! API fault injection (5xx answers and latency) and request counters.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One fault rule for a service.
///
/// A request to the service is affected when `path_contains` (if set) is a substring of its path
/// and, then, with probability `probability`; `count` (if set) limits how many requests are affected
/// in total (it counts down; the rule is removed at zero).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FaultRule {
    /// HTTP status to answer instead of the real handler (e.g. 500, 503); `None` = no error, only latency.
    #[serde(default)]
    pub status: Option<u16>,
    /// Added latency in milliseconds before the request is handled (or failed).
    #[serde(default)]
    pub latency_ms: u64,
    /// Share of matching requests affected, 0.0–1.0 (default 1.0).
    #[serde(default = "one")]
    pub probability: f64,
    /// How many requests are affected before the rule expires (`None` = forever).
    #[serde(default)]
    pub count: Option<u64>,
    /// Only requests whose path contains this substring.
    #[serde(default)]
    pub path_contains: Option<String>,
    /// Only requests with this method (e.g. `GET`).
    #[serde(default)]
    pub method: Option<String>,
}

fn one() -> f64 {
    1.0
}

/// Every matching request, forever, with no error and no latency: set `status` and/or
/// `latency_ms` (and optionally `count`, `path_contains`, `method`). Same defaults as the JSON form.
impl Default for FaultRule {
    fn default() -> Self {
        Self {
            status: None,
            latency_ms: 0,
            probability: one(),
            count: None,
            path_contains: None,
            method: None,
        }
    }
}

/// Fault rules per service name (`identity`, `compute`, `network`, `volume`, `image`, `orchestration`).
#[derive(Clone, Debug, Default)]
pub struct FaultTable {
    rules: BTreeMap<String, Vec<FaultRule>>,
}

/// What to do with one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultDecision {
    /// Delay before answering.
    pub delay: Duration,
    /// Status to answer with instead of handling the request.
    pub status: Option<u16>,
}

impl FaultTable {
    /// Adds a rule for a service.
    pub fn add(&mut self, service: &str, rule: FaultRule) {
        self.rules
            .entry(service.to_string())
            .or_default()
            .push(rule);
    }

    /// Removes every rule of a service (or of all services with `None`).
    pub fn clear(&mut self, service: Option<&str>) {
        match service {
            Some(s) => {
                self.rules.remove(s);
            }
            None => self.rules.clear(),
        }
    }

    /// The rules currently installed.
    pub fn list(&self) -> BTreeMap<String, Vec<FaultRule>> {
        self.rules.clone()
    }

    /// Decides the fate of one request; consumes rule counts.
    pub fn decide(&mut self, service: &str, method: &str, path: &str) -> FaultDecision {
        let mut d = FaultDecision::default();
        let Some(rules) = self.rules.get_mut(service) else {
            return d;
        };
        for rule in rules.iter_mut() {
            if let Some(p) = &rule.path_contains
                && !path.contains(p.as_str())
            {
                continue;
            }
            if let Some(m) = &rule.method
                && !m.eq_ignore_ascii_case(method)
            {
                continue;
            }
            if rule.count == Some(0) {
                continue;
            }
            if rule.probability < 1.0 && super::state::random_unit() >= rule.probability {
                continue;
            }
            if let Some(c) = rule.count.as_mut() {
                *c -= 1;
            }
            d.delay += Duration::from_millis(rule.latency_ms);
            if d.status.is_none() {
                d.status = rule.status;
            }
        }
        rules.retain(|r| r.count != Some(0));
        d
    }
}
