//! The fast observation (pure): what one Nova `GET /servers/detail?changes-since=<t>` poll
//! means to reconcile, and the `changes-since` time of the next poll.
//!
//! Compute API v2.1 "List Servers Detailed": `changes-since` lists the servers whose `updated`
//! is at or after the time, **deleted servers included** (status `DELETED`). One request per poll,
//! whatever the number of servers (pages only when more than Nova's page size changed at once).
//!
//! The poll does not judge a server itself: a failing status it sees for the first time (Nova
//! `ERROR`, `DELETED`, `SHUTOFF`, any other non-`ACTIVE` status that is not transitional) names
//! the VNF of that server, and that VNF gets a cloud pass at once — the same listing (servers,
//! ports, volumes), the same [`super::decide`], the same memory. So a server the poll sees in
//! `ERROR` once is one observation (the pass), a `DELETED` server is a server missing from a
//! successful listing, and grace, "two observations", `max_unhealthy` and one heal per VNF keep
//! their exact meaning. A poll that finds nothing new asks for nothing more ([`ChangesPoll::plan`]
//! is then empty).
//!
//! The time of the next poll is the server's, never ours: the answer's `Date` header (RFC 9110
//! §6.6.1, second resolution) minus how long the poll took, rounded up, minus an overlap of
//! [`OVERLAP`] (Nova's `updated` also has second resolution). Without a `Date` header it is our
//! poll's start minus [`MARGIN`] (clock skew up to that margin is tolerated). A failed poll keeps
//! the time of the last successful one, so nothing is missed; a server already acted on with the
//! same status and `updated` is not reported again.
//!
//! A failing server of a VNF with an unfinished operation is not observed then (one operation
//! per VNF), but it is not forgotten either: a later poll does not list it again unless it
//! changes, so it waits, and its VNF gets its pass at the first poll after the operation ended —
//! unless the server stopped being recorded for a VNFC (replaced, terminated) or was listed
//! `ACTIVE` or transitional again in between.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::model::Timestamp;

/// Subtracted from the server's time of the last poll (two seconds: the `Date` header and Nova's
/// `updated` both have second resolution).
pub const OVERLAP: Duration = Duration::from_secs(2);

/// Subtracted from our own clock when the answer had no `Date` header.
pub const MARGIN: Duration = Duration::from_secs(30);

/// Nova statuses in which a server is on its way somewhere: wait, do not judge (the cloud pass
/// makes them `CloudView::Transitional`).
pub const TRANSITIONAL: &[&str] = &[
    "BUILD",
    "REBUILD",
    "REBOOT",
    "HARD_REBOOT",
    "MIGRATING",
    "RESIZE",
    "VERIFY_RESIZE",
    "REVERT_RESIZE",
    "PASSWORD",
];

/// What a Nova status alone says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// `ACTIVE` (ports and volumes are the cloud pass's to check).
    Active,
    /// One of [`TRANSITIONAL`].
    Transitional,
    /// Anything else: `ERROR`, `DELETED`, `SHUTOFF`, `SUSPENDED`, `PAUSED`, … (case-insensitive).
    Failing,
}

/// Classifies a Nova `status`.
pub fn classify(status: &str) -> StatusClass {
    let s = status.to_ascii_uppercase();
    if s == "ACTIVE" {
        StatusClass::Active
    } else if TRANSITIONAL.contains(&s.as_str()) {
        StatusClass::Transitional
    } else {
        StatusClass::Failing
    }
}

/// One server of a `changes-since` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Server id.
    pub server_id: String,
    /// Nova `status` (`DELETED` for a deleted server).
    pub status: String,
    /// Nova `updated`, as given.
    pub updated: Option<String>,
}

/// A server recorded for a VNFC of an instantiated VNF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Its vnfInstanceId.
    pub vnf_instance_id: crate::model::VnfInstanceId,
    /// The VNF has an unfinished operation (the pass would skip it: one operation per VNF).
    pub busy: bool,
}

/// State of the fast observation between polls.
#[derive(Debug, Clone)]
pub struct ChangesPoll {
    since: Timestamp,
    /// Failing servers already reported: id → (status, updated).
    seen: HashMap<String, (String, Option<String>)>,
    /// Failing servers reported while their VNF had an unfinished operation, by id: planned
    /// once it has none (at most one entry per recorded server).
    deferred: HashMap<String, Changed>,
}

impl ChangesPoll {
    /// The first poll asks from `now − MARGIN` (`now`: our clock when the loop starts; earlier
    /// failures are the first cloud pass's).
    pub fn new(now: Timestamp) -> Self {
        Self {
            since: Timestamp(now.0 - chrono::Duration::from_std(MARGIN).unwrap_or_default()),
            seen: HashMap::new(),
            deferred: HashMap::new(),
        }
    }

    /// The `changes-since` of the next poll.
    pub fn since(&self) -> Timestamp {
        self.since
    }

    /// A poll answered `page`. `started`: our clock when it was sent; `took`: how long it took;
    /// `server_date`: the answer's `Date` header, if any. Advances the next poll's time (never
    /// backwards) and returns the failing servers not reported before with the same status and
    /// `updated`, in page order.
    pub fn succeeded(
        &mut self,
        started: Timestamp,
        took: Duration,
        server_date: Option<Timestamp>,
        page: &[Changed],
    ) -> Vec<Changed> {
        let next = match server_date {
            Some(d) => {
                let took = Duration::from_secs(took.as_secs() + u64::from(took.subsec_nanos() > 0));
                d.0 - chrono::Duration::from_std(took + OVERLAP).unwrap_or_default()
            }
            None => started.0 - chrono::Duration::from_std(MARGIN).unwrap_or_default(),
        };
        if next > self.since.0 {
            self.since = Timestamp(next);
        }
        let mut fresh = Vec::new();
        let mut seen = HashMap::new();
        for c in page {
            if classify(&c.status) != StatusClass::Failing {
                // Back to ACTIVE or on its way: nothing left to observe for it.
                self.deferred.remove(&c.server_id);
                continue;
            }
            let key = (c.status.to_ascii_uppercase(), c.updated.clone());
            if self.seen.get(&c.server_id) != Some(&key) {
                fresh.push(c.clone());
            }
            seen.insert(c.server_id.clone(), key);
        }
        // The page covers the overlap window: a server not in it is not listed again unless it
        // changes, so forgetting it is safe and keeps the map as small as one window.
        self.seen = seen;
        fresh
    }

    /// Whether a failing server waits for its VNF's operation to end ([`ChangesPoll::plan`]
    /// then needs the recorded servers even when a poll found nothing new).
    pub fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// The VNFs to observe now: those of `fresh` servers recorded for a VNFC, and of servers
    /// deferred before whose VNF has no unfinished operation any more. A server of a VNF with
    /// an unfinished operation is deferred (the pass would leave that VNF alone); servers not
    /// recorded for a VNFC (strangers, or replaced or terminated since) are dropped. Empty
    /// when nothing new failed and nothing waits: the poll was the only request.
    pub fn plan(
        &mut self,
        fresh: &[Changed],
        recorded: &HashMap<String, Recorded>,
    ) -> BTreeSet<crate::model::VnfInstanceId> {
        for c in fresh {
            self.deferred.insert(c.server_id.clone(), c.clone());
        }
        let mut vnfs = BTreeSet::new();
        self.deferred.retain(|id, _| match recorded.get(id) {
            None => false,
            Some(r) if r.busy => true,
            Some(r) => {
                vnfs.insert(r.vnf_instance_id.clone());
                false
            }
        });
        vnfs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    fn changed(id: &str, status: &str, updated: &str) -> Changed {
        Changed {
            server_id: id.into(),
            status: status.into(),
            updated: Some(updated.into()),
        }
    }

    fn recorded() -> HashMap<String, Recorded> {
        [
            ("srv-a", "vnf-1", false),
            ("srv-b", "vnf-1", false),
            ("srv-c", "vnf-2", false),
            ("srv-d", "vnf-3", true),
        ]
        .into_iter()
        .map(|(s, v, busy)| {
            (
                s.to_string(),
                Recorded {
                    vnf_instance_id: v.into(),
                    busy,
                },
            )
        })
        .collect()
    }

    #[test]
    fn statuses_are_classified_as_the_cloud_pass_does() {
        assert_eq!(classify("ACTIVE"), StatusClass::Active);
        assert_eq!(classify("active"), StatusClass::Active);
        for s in ["BUILD", "REBOOT", "HARD_REBOOT", "RESIZE"] {
            assert_eq!(classify(s), StatusClass::Transitional, "{s}");
        }
        for s in [
            "ERROR",
            "DELETED",
            "SHUTOFF",
            "SUSPENDED",
            "PAUSED",
            "SOFT_DELETED",
        ] {
            assert_eq!(classify(s), StatusClass::Failing, "{s}");
        }
    }

    #[test]
    fn an_unchanged_fleet_makes_no_request_besides_the_one_poll() {
        let mut p = ChangesPoll::new(t("2026-11-26T05:00:00Z"));
        let fresh = p.succeeded(
            t("2026-11-26T05:00:00Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:00Z")),
            &[],
        );
        assert!(fresh.is_empty());
        assert!(p.plan(&fresh, &recorded()).is_empty());
        // Servers that changed but are ACTIVE or on their way (a heal's new server) ask for
        // nothing either.
        let page = [
            changed("srv-a", "ACTIVE", "2026-11-26T05:00:01Z"),
            changed("srv-c", "BUILD", "2026-11-26T05:00:01Z"),
        ];
        let fresh = p.succeeded(
            t("2026-11-26T05:00:02Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:02Z")),
            &page,
        );
        assert!(p.plan(&fresh, &recorded()).is_empty());
    }

    #[test]
    fn a_page_with_a_server_in_error_is_one_observation_of_its_vnf() {
        let mut p = ChangesPoll::new(t("2026-11-26T05:00:00Z"));
        let page = [changed("srv-a", "ERROR", "2026-11-26T05:00:01Z")];
        let fresh = p.succeeded(
            t("2026-11-26T05:00:02Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:02Z")),
            &page,
        );
        assert_eq!(
            p.plan(&fresh, &recorded()),
            [crate::model::VnfInstanceId::from("vnf-1")].into()
        );
        // The next poll overlaps the last one and lists it again, unchanged: no second pass,
        // so it stays one observation.
        let fresh = p.succeeded(
            t("2026-11-26T05:00:04Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:04Z")),
            &page,
        );
        assert!(fresh.is_empty());
        // It changes again (a new fault): that is new.
        let page = [changed("srv-a", "ERROR", "2026-11-26T05:00:05Z")];
        let fresh = p.succeeded(
            t("2026-11-26T05:00:06Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:06Z")),
            &page,
        );
        assert_eq!(fresh.len(), 1);
    }

    #[test]
    fn deleted_and_shutoff_servers_name_their_vnf_and_busy_vnfs_and_strangers_are_skipped() {
        let mut p = ChangesPoll::new(t("2026-11-26T05:00:00Z"));
        let page = [
            changed("srv-b", "DELETED", "2026-11-26T05:00:01Z"),
            changed("srv-c", "SHUTOFF", "2026-11-26T05:00:01Z"),
            changed("srv-d", "ERROR", "2026-11-26T05:00:01Z"),
            changed("not-ours", "ERROR", "2026-11-26T05:00:01Z"),
        ];
        let fresh = p.succeeded(
            t("2026-11-26T05:00:02Z"),
            Duration::from_millis(20),
            None,
            &page,
        );
        assert_eq!(fresh.len(), 4);
        assert_eq!(
            p.plan(&fresh, &recorded()),
            ["vnf-1".into(), "vnf-2".into()].into()
        );
    }

    #[test]
    fn a_server_failing_during_an_operation_is_observed_after_it() {
        let mut p = ChangesPoll::new(t("2026-11-26T05:00:00Z"));
        let page = [
            changed("srv-d", "ERROR", "2026-11-26T05:00:01Z"),
            changed("srv-e", "SHUTOFF", "2026-11-26T05:00:01Z"),
        ];
        let mut rec = recorded();
        rec.insert(
            "srv-e".into(),
            Recorded {
                vnf_instance_id: "vnf-3".into(),
                busy: true,
            },
        );
        let fresh = p.succeeded(
            t("2026-11-26T05:00:02Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:02Z")),
            &page,
        );
        // vnf-3 has an unfinished operation: nothing now, both wait.
        assert!(p.plan(&fresh, &rec).is_empty());
        assert!(p.has_deferred());
        // Later polls do not list them again (unchanged); vnf-3 still busy: still waiting.
        let fresh = p.succeeded(
            t("2026-11-26T05:00:10Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:10Z")),
            &[],
        );
        assert!(p.plan(&fresh, &rec).is_empty());
        // srv-e comes back ACTIVE (the operation started it): it no longer waits.
        let fresh = p.succeeded(
            t("2026-11-26T05:00:20Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:20Z")),
            &[changed("srv-e", "ACTIVE", "2026-11-26T05:00:19Z")],
        );
        assert!(p.plan(&fresh, &rec).is_empty());
        // The operation ended: vnf-3 is observed once, for srv-d.
        for r in rec.values_mut() {
            r.busy = false;
        }
        let fresh = p.succeeded(
            t("2026-11-26T05:00:30Z"),
            Duration::from_millis(20),
            Some(t("2026-11-26T05:00:30Z")),
            &[],
        );
        assert_eq!(p.plan(&fresh, &rec), ["vnf-3".into()].into());
        assert!(!p.has_deferred());
        assert!(p.plan(&[], &rec).is_empty());
    }

    #[test]
    fn a_deferred_server_replaced_by_the_operation_is_dropped() {
        let mut p = ChangesPoll::new(t("2026-11-26T05:00:00Z"));
        let fresh = p.succeeded(
            t("2026-11-26T05:00:02Z"),
            Duration::from_millis(20),
            None,
            &[changed("srv-d", "ERROR", "2026-11-26T05:00:01Z")],
        );
        let mut rec = recorded();
        assert!(p.plan(&fresh, &rec).is_empty());
        // The heal replaced it: srv-d is no longer recorded for a VNFC.
        rec.remove("srv-d");
        assert!(p.plan(&[], &rec).is_empty());
        assert!(!p.has_deferred());
    }

    #[test]
    fn the_next_time_is_the_servers_minus_the_poll_and_the_overlap_and_never_goes_back() {
        let mut p = ChangesPoll::new(t("2026-11-26T05:00:00Z"));
        assert_eq!(p.since(), t("2026-11-26T04:59:30Z"));
        // Nova's clock is 90 s ahead of ours: its Date decides.
        p.succeeded(
            t("2026-11-26T05:00:00Z"),
            Duration::from_millis(1200),
            Some(t("2026-11-26T05:01:30Z")),
            &[],
        );
        assert_eq!(p.since(), t("2026-11-26T05:01:26Z"));
        // No Date header: our clock minus the margin, but never backwards.
        p.succeeded(
            t("2026-11-26T05:00:02Z"),
            Duration::from_millis(10),
            None,
            &[],
        );
        assert_eq!(p.since(), t("2026-11-26T05:01:26Z"));
        p.succeeded(
            t("2026-11-26T05:03:00Z"),
            Duration::from_millis(10),
            None,
            &[],
        );
        assert_eq!(p.since(), t("2026-11-26T05:02:30Z"));
    }
}
