//! Companion mode with OpenStack Tacker, the decisions: which of Tacker's subscriptions to keep,
//! create or delete so that exactly one of vnfkeeper's exists (SOL003 v3.3.1 §5.4.18–19,
//! `LccnSubscription`), what a polled VNF LCM operation occurrence (`VnfLcmOpOcc`, SOL003
//! §5.5.2.13) changes in what vnfkeeper has recorded, and what vnfkeeper must do about it.
//!
//! Pure: the `vnfkeeper` crate lists, polls and writes, and hands these functions what it saw.

use crate::model::{InstantiationState, OperationState};

/// A subscription as Tacker lists it (`GET /vnflcm/v2/subscriptions`): only what identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSeen {
    /// `id`.
    pub id: String,
    /// `callbackUri`.
    pub callback_uri: String,
}

/// What to do so that exactly one subscription of vnfkeeper's exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionPlan {
    /// The subscription to keep (and store), when one of ours exists.
    pub keep: Option<String>,
    /// Create one (none of ours exists).
    pub create: bool,
    /// Extra copies of ours to delete (never another subscriber's).
    pub delete: Vec<String>,
}

/// Decides over Tacker's listing: ours are the subscriptions whose `callbackUri` is
/// `callback_uri` (compared exactly: it is the URI vnfkeeper sent). The one stored before
/// (`stored`) is kept when it is still there, else the first of ours in Tacker's order; the
/// other copies of ours are deleted; none of ours → create.
pub fn plan_subscriptions(
    seen: &[SubscriptionSeen],
    callback_uri: &str,
    stored: Option<&str>,
) -> SubscriptionPlan {
    let ours: Vec<&SubscriptionSeen> = seen
        .iter()
        .filter(|s| s.callback_uri == callback_uri)
        .collect();
    let keep = stored
        .and_then(|id| ours.iter().find(|s| s.id == id))
        .or(ours.first())
        .map(|s| s.id.clone());
    SubscriptionPlan {
        create: keep.is_none(),
        delete: ours
            .iter()
            .filter(|s| Some(&s.id) != keep.as_ref())
            .map(|s| s.id.clone())
            .collect(),
        keep,
    }
}

/// An operation occurrence as Tacker's API shows it (`GET /vnflcm/v2/vnf_lcm_op_occs`, SOL003
/// §5.5.2.13): the fields vnfkeeper records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpOccSeen {
    /// `id` (the `vnfLcmOpOccId` of notifications).
    pub id: String,
    /// `vnfInstanceId`.
    pub vnf_instance_id: String,
    /// `operation` (SOL003 `LcmOperationType` spelling).
    pub operation: String,
    /// `operationState`.
    pub state: OperationState,
    /// `isAutomaticInvocation`.
    pub is_automatic_invocation: bool,
}

/// A managed VNF instance as Tacker's API shows it (`GET /vnflcm/v2/vnf_instances/{id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSeen {
    /// `id`.
    pub id: String,
    /// `vnfdId`.
    pub vnfd_id: String,
    /// `instantiationState`.
    pub state: InstantiationState,
    /// How many entries `instantiatedVnfInfo.vnfcResourceInfo` has (0 when not instantiated).
    pub vnfc_count: usize,
}

/// What a polled operation occurrence changes in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OccChange {
    /// Recorded already in this state: nothing to write.
    Unchanged,
    /// A state not recorded before for this occurrence (first sight included): record the
    /// state, and the follow-up it calls for.
    Entered(OperationState),
}

/// Compares what Tacker reports (`observed`) with what was recorded last (`recorded`; `None`:
/// never seen). A state seen before is not recorded again (`seen_before`: the states already
/// recorded for this occurrence, e.g. `PROCESSING` again after a retry of a `FAILED_TEMP`).
pub fn decide_occ(
    recorded: Option<OperationState>,
    observed: OperationState,
    seen_before: &[OperationState],
) -> OccChange {
    if recorded == Some(observed) || seen_before.contains(&observed) {
        OccChange::Unchanged
    } else {
        OccChange::Entered(observed)
    }
}

/// What vnfkeeper must do after a Tacker operation reached a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followup {
    /// Nothing (still running, failed on Tacker's side, or not an operation vnfkeeper follows).
    None,
    /// Run the management steps of the operation (INSTANTIATE, SCALE, HEAL COMPLETED).
    Manage,
    /// Retire the VNF from vnfkeeper's state, keeping its history (TERMINATE COMPLETED).
    Retire,
}

impl Followup {
    /// The stored spelling: `MANAGE`, `RETIRE`; `None` is not stored.
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Self::None => None,
            Self::Manage => Some("MANAGE"),
            Self::Retire => Some("RETIRE"),
        }
    }

    /// Parses a stored spelling (`None` for NULL).
    pub fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None => Some(Self::None),
            Some("MANAGE") => Some(Self::Manage),
            Some("RETIRE") => Some(Self::Retire),
            Some(_) => None,
        }
    }
}

/// The follow-up of `operation` (SOL003 `LcmOperationType` spelling) in `state`: only COMPLETED
/// calls for one.
pub fn followup(operation: &str, state: OperationState) -> Followup {
    if state != OperationState::Completed {
        return Followup::None;
    }
    match operation {
        "INSTANTIATE" | "SCALE" | "SCALE_TO_LEVEL" | "HEAL" => Followup::Manage,
        "TERMINATE" => Followup::Retire,
        _ => Followup::None,
    }
}

/// A SOL013 §5.2 attribute filter `(in,attr,v1,v2,…)` (values with `,`, `(`, `)` or `'` are
/// quoted with `'`, a `'` doubled); `None` for an empty list.
pub fn filter_in(attr: &str, values: &[String]) -> Option<String> {
    if values.is_empty() {
        return None;
    }
    let quoted: Vec<String> = values
        .iter()
        .map(|v| {
            if v.contains([',', '(', ')', '\'']) {
                format!("'{}'", v.replace('\'', "''"))
            } else {
                v.clone()
            }
        })
        .collect();
    Some(format!("(in,{attr},{})", quoted.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use OperationState::*;

    fn s(id: &str, uri: &str) -> SubscriptionSeen {
        SubscriptionSeen {
            id: id.into(),
            callback_uri: uri.into(),
        }
    }

    const OURS: &str = "http://vnfkeeper:9890/vnfkeeper/notifications";

    #[test]
    fn none_of_ours_creates_one_and_leaves_others_alone() {
        let p = plan_subscriptions(&[s("a", "http://other/cb")], OURS, Some("gone"));
        assert_eq!(
            p,
            SubscriptionPlan {
                keep: None,
                create: true,
                delete: vec![]
            }
        );
    }

    #[test]
    fn the_stored_one_is_kept_and_extra_copies_deleted() {
        let seen = [s("a", OURS), s("b", "http://other/cb"), s("c", OURS)];
        let p = plan_subscriptions(&seen, OURS, Some("c"));
        assert_eq!(p.keep.as_deref(), Some("c"));
        assert!(!p.create);
        assert_eq!(p.delete, vec!["a".to_string()]);
        // Without a stored id (or a stale one) the first of ours is kept.
        let p = plan_subscriptions(&seen, OURS, Some("gone"));
        assert_eq!(p.keep.as_deref(), Some("a"));
        assert_eq!(p.delete, vec!["c".to_string()]);
    }

    #[test]
    fn callback_uri_is_compared_exactly() {
        let p = plan_subscriptions(&[s("a", &format!("{OURS}/"))], OURS, None);
        assert!(p.create);
        assert!(p.delete.is_empty());
    }

    #[test]
    fn occ_states_are_recorded_once() {
        assert_eq!(
            decide_occ(None, Starting, &[]),
            OccChange::Entered(Starting)
        );
        assert_eq!(
            decide_occ(Some(Starting), Completed, &[Starting]),
            OccChange::Entered(Completed)
        );
        assert_eq!(
            decide_occ(Some(Completed), Completed, &[Starting, Completed]),
            OccChange::Unchanged
        );
        // PROCESSING again after a retry is not a new state of this occurrence.
        assert_eq!(
            decide_occ(Some(FailedTemp), Processing, &[Processing, FailedTemp]),
            OccChange::Unchanged
        );
    }

    #[test]
    fn only_completed_operations_call_for_follow_up() {
        assert_eq!(followup("INSTANTIATE", Completed), Followup::Manage);
        assert_eq!(followup("HEAL", Completed), Followup::Manage);
        assert_eq!(followup("SCALE", Completed), Followup::Manage);
        assert_eq!(followup("TERMINATE", Completed), Followup::Retire);
        assert_eq!(followup("MODIFY_INFO", Completed), Followup::None);
        assert_eq!(followup("INSTANTIATE", FailedTemp), Followup::None);
        assert_eq!(followup("HEAL", Processing), Followup::None);
        for f in [Followup::None, Followup::Manage, Followup::Retire] {
            assert_eq!(Followup::parse(f.as_str()), Some(f));
        }
        assert_eq!(Followup::parse(Some("x")), None);
    }

    #[test]
    fn filter_in_quotes_what_sol013_requires() {
        assert_eq!(filter_in("vnfInstanceId", &[]), None);
        assert_eq!(
            filter_in("vnfInstanceId", &["a".into(), "b".into()]).as_deref(),
            Some("(in,vnfInstanceId,a,b)")
        );
        assert_eq!(
            filter_in("x", &["it's,".into()]).as_deref(),
            Some("(in,x,'it''s,')")
        );
    }
}
