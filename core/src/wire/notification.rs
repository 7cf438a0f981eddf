//! LCM notifications as Tacker's `/vnflcm/v2` sends them to a subscriber's `callbackUri`
//! (SOL003 v3.3.1 §5.5.2.17 `VnfLcmOperationOccurrenceNotification`, §5.5.2.18
//! `VnfIdentifierCreationNotification`, §5.5.2.19 `VnfIdentifierDeletionNotification`; delivery
//! per SOL013 §8). They are hints, not truth: Tacker sends each once, without retry, so what they
//! say is checked against Tacker's API later; here they are only parsed and checked.
//!
//! Checked: the attributes of cardinality 1 (`id`, `notificationType`, `subscriptionId`,
//! `timeStamp`, `vnfInstanceId`, `_links`; for an operation occurrence also
//! `notificationStatus`, `operationState`, `operation`, `isAutomaticInvocation`,
//! `vnfLcmOpOccId`), their types and values. Other attributes (`affectedVnfcs`, `changedInfo`,
//! `error`, …) are accepted and not kept: they may carry `vimConnectionInfo` with credentials.

use serde_json::Value;

use super::FieldError;
use super::check::{Card, Checker};
use super::rules;
use crate::model::{OperationState, Timestamp};

/// `notificationType` (SOL003 §5.5.2.17–19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationType {
    /// `VnfLcmOperationOccurrenceNotification`: an LCM operation started or changed state.
    VnfLcmOperationOccurrence,
    /// `VnfIdentifierCreationNotification`: a VNF instance resource was created.
    VnfIdentifierCreation,
    /// `VnfIdentifierDeletionNotification`: a VNF instance resource was deleted.
    VnfIdentifierDeletion,
}

impl NotificationType {
    /// Every type, in SOL003's order.
    pub const ALL: [Self; 3] = [
        Self::VnfLcmOperationOccurrence,
        Self::VnfIdentifierCreation,
        Self::VnfIdentifierDeletion,
    ];

    /// The SOL003 spelling, as sent and stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VnfLcmOperationOccurrence => "VnfLcmOperationOccurrenceNotification",
            Self::VnfIdentifierCreation => "VnfIdentifierCreationNotification",
            Self::VnfIdentifierDeletion => "VnfIdentifierDeletionNotification",
        }
    }

    /// Parses the SOL003 spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// `notificationStatus` (SOL003 §5.5.2.17): `START` when an operation starts (or a retry or
/// rollback of it), `RESULT` when it reached a result state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationStatus {
    /// `START`.
    Start,
    /// `RESULT`.
    Result,
}

impl NotificationStatus {
    /// The SOL003 spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "START",
            Self::Result => "RESULT",
        }
    }

    /// Parses the SOL003 spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "START" => Some(Self::Start),
            "RESULT" => Some(Self::Result),
            _ => None,
        }
    }
}

/// The values of SOL003 §5.5.4.5 `LcmOperationType` (Tacker v2 sends these).
pub const LCM_OPERATION_TYPES: [&str; 12] = [
    "INSTANTIATE",
    "SCALE",
    "SCALE_TO_LEVEL",
    "CHANGE_FLAVOUR",
    "TERMINATE",
    "HEAL",
    "OPERATE",
    "CHANGE_EXT_CONN",
    "MODIFY_INFO",
    "CREATE_SNAPSHOT",
    "REVERT_TO_SNAPSHOT",
    "CHANGE_VNFPKG",
];

/// What a `VnfLcmOperationOccurrenceNotification` adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OccurrenceChange {
    /// `notificationStatus`.
    pub notification_status: NotificationStatus,
    /// `operationState` (SOL003 §5.5.4.3; the same seven states vnfkeeper's own operations have).
    pub operation_state: OperationState,
    /// `operation`: one of [`LCM_OPERATION_TYPES`].
    pub operation: String,
    /// `vnfLcmOpOccId`: Tacker's operation occurrence.
    pub vnf_lcm_op_occ_id: String,
    /// `isAutomaticInvocation`.
    pub is_automatic_invocation: bool,
}

/// A checked notification: what vnfkeeper keeps of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// `id`: the notification's identifier (duplicates have the same).
    pub id: String,
    /// `notificationType`.
    pub notification_type: NotificationType,
    /// `subscriptionId`: the subscription it was sent for.
    pub subscription_id: String,
    /// `timeStamp`: when Tacker generated it.
    pub time_stamp: Timestamp,
    /// `vnfInstanceId`.
    pub vnf_instance_id: String,
    /// For a `VnfLcmOperationOccurrenceNotification`: the operation and its state.
    pub occurrence: Option<OccurrenceChange>,
}

/// Parses and checks one notification body (JSON). Errors: every defect found, each with the
/// RFC 6901 pointer of its attribute in the body (`""` for the body as a whole: not JSON, not an
/// object). Values are never echoed.
pub fn parse(body: &[u8]) -> Result<Notification, Vec<FieldError>> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        vec![FieldError {
            pointer: String::new(),
            reason: format!("the body is not JSON: {e}"),
        }]
    })?;
    let mut c = Checker::default();
    let Some(o) = c.object(&v, "", "the notification") else {
        return Err(c.errors);
    };
    let id_of = |c: &mut Checker, key: &str| {
        c.str_field(&o, key, Card::One)
            .and_then(|(s, p)| c.rule(&p, key, rules::identifier(s)).map(|()| s.to_owned()))
    };
    let id = id_of(&mut c, "id");
    let subscription_id = id_of(&mut c, "subscriptionId");
    let vnf_instance_id = id_of(&mut c, "vnfInstanceId");
    let notification_type = c
        .str_field(&o, "notificationType", Card::One)
        .and_then(|(s, p)| {
            let t = NotificationType::parse(s);
            if t.is_none() {
                c.err(
                    &p,
                    "notificationType must be VnfLcmOperationOccurrenceNotification, \
                     VnfIdentifierCreationNotification or VnfIdentifierDeletionNotification",
                );
            }
            t
        });
    let time_stamp = c.str_field(&o, "timeStamp", Card::One).and_then(|(s, p)| {
        let t = Timestamp::parse(s).ok();
        if t.is_none() {
            c.err(&p, "timeStamp must be an RFC 3339 date-time");
        }
        t
    });
    let occurrence = match notification_type {
        Some(NotificationType::VnfLcmOperationOccurrence) => occurrence(&mut c, &o),
        _ => None,
    };
    links(&mut c, &o, notification_type);
    match (
        id,
        notification_type,
        subscription_id,
        time_stamp,
        vnf_instance_id,
    ) {
        (Some(id), Some(notification_type), Some(subscription_id), Some(time_stamp), Some(vnf))
            if c.errors.is_empty() =>
        {
            Ok(Notification {
                id,
                notification_type,
                subscription_id,
                time_stamp,
                vnf_instance_id: vnf,
                occurrence,
            })
        }
        _ => Err(c.errors),
    }
}

fn occurrence(c: &mut Checker, o: &super::check::Obj<'_>) -> Option<OccurrenceChange> {
    let status = c
        .str_field(o, "notificationStatus", Card::One)
        .and_then(|(s, p)| {
            let v = NotificationStatus::parse(s);
            if v.is_none() {
                c.err(&p, "notificationStatus must be START or RESULT");
            }
            v
        });
    let state = c
        .str_field(o, "operationState", Card::One)
        .and_then(|(s, p)| {
            let v = OperationState::parse(s);
            if v.is_none() {
                c.err(
                    &p,
                    "operationState must be one of STARTING, PROCESSING, COMPLETED, FAILED_TEMP, \
                     FAILED, ROLLING_BACK, ROLLED_BACK",
                );
            }
            v
        });
    let operation = c.str_field(o, "operation", Card::One).and_then(|(s, p)| {
        if LCM_OPERATION_TYPES.contains(&s) {
            Some(s.to_owned())
        } else {
            c.err(
                &p,
                "operation must be an LcmOperationType of SOL003 §5.5.4.5",
            );
            None
        }
    });
    let automatic = c.bool_field(o, "isAutomaticInvocation", Card::One);
    let occ = c
        .str_field(o, "vnfLcmOpOccId", Card::One)
        .and_then(|(s, p)| {
            c.rule(&p, "vnfLcmOpOccId", rules::identifier(s))
                .map(|()| s.to_owned())
        });
    Some(OccurrenceChange {
        notification_status: status?,
        operation_state: state?,
        operation: operation?,
        vnf_lcm_op_occ_id: occ?,
        is_automatic_invocation: automatic?,
    })
}

/// `_links` (1): `vnfInstance` and `subscription` (1), and for an operation occurrence
/// `vnfLcmOpOcc` (1), each a `Link` with a string `href`.
fn links(c: &mut Checker, o: &super::check::Obj<'_>, t: Option<NotificationType>) {
    let Some(l) = c.obj_field(o, "_links", Card::One) else {
        return;
    };
    let mut names = vec!["vnfInstance", "subscription"];
    if t == Some(NotificationType::VnfLcmOperationOccurrence) {
        names.push("vnfLcmOpOcc");
    }
    for name in names {
        if let Some(link) = c.obj_field(&l, name, Card::One) {
            c.str_field(&link, "href", Card::One);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ() -> Value {
        serde_json::json!({
            "id": "4b0b3b62-5f4f-4c1e-9d7c-1e0f1f0e7a11",
            "notificationType": "VnfLcmOperationOccurrenceNotification",
            "subscriptionId": "sub-1",
            "timeStamp": "2026-11-26T02:00:00Z",
            "notificationStatus": "RESULT",
            "operationState": "COMPLETED",
            "vnfInstanceId": "vnf-1",
            "operation": "INSTANTIATE",
            "isAutomaticInvocation": false,
            "vnfLcmOpOccId": "occ-1",
            "affectedVnfcs": [{"id": "c1", "vduId": "VDU1", "changeType": "ADDED"}],
            "_links": {
                "vnfInstance": {"href": "http://tacker/vnflcm/v2/vnf_instances/vnf-1"},
                "subscription": {"href": "http://tacker/vnflcm/v2/subscriptions/sub-1"},
                "vnfLcmOpOcc": {"href": "http://tacker/vnflcm/v2/vnf_lcm_op_occs/occ-1"}
            }
        })
    }

    fn pointers(v: &Value) -> Vec<String> {
        parse(&serde_json::to_vec(v).unwrap())
            .unwrap_err()
            .into_iter()
            .map(|e| e.pointer)
            .collect()
    }

    #[test]
    fn an_operation_occurrence_notification_is_kept_as_its_fields() {
        let n = parse(&serde_json::to_vec(&occ()).unwrap()).unwrap();
        assert_eq!(
            n.notification_type,
            NotificationType::VnfLcmOperationOccurrence
        );
        assert_eq!(n.vnf_instance_id, "vnf-1");
        let o = n.occurrence.unwrap();
        assert_eq!(o.operation_state, OperationState::Completed);
        assert_eq!(o.notification_status, NotificationStatus::Result);
        assert_eq!(o.vnf_lcm_op_occ_id, "occ-1");
        assert_eq!(o.operation, "INSTANTIATE");
    }

    #[test]
    fn identifier_notifications_need_no_operation_fields() {
        let mut v = occ();
        let m = v.as_object_mut().unwrap();
        for k in [
            "notificationStatus",
            "operationState",
            "operation",
            "isAutomaticInvocation",
            "vnfLcmOpOccId",
        ] {
            m.remove(k);
        }
        m["_links"].as_object_mut().unwrap().remove("vnfLcmOpOcc");
        for t in [
            "VnfIdentifierCreationNotification",
            "VnfIdentifierDeletionNotification",
        ] {
            v["notificationType"] = t.into();
            let n = parse(&serde_json::to_vec(&v).unwrap()).unwrap();
            assert_eq!(n.notification_type.as_str(), t);
            assert!(n.occurrence.is_none());
        }
        let m = v.as_object_mut().unwrap();
        m.insert(
            "notificationType".into(),
            "VnfLcmOperationOccurrenceNotification".into(),
        );
        assert_eq!(
            pointers(&v),
            [
                "/notificationStatus",
                "/operationState",
                "/operation",
                "/isAutomaticInvocation",
                "/vnfLcmOpOccId",
                "/_links/vnfLcmOpOcc"
            ]
        );
    }

    #[test]
    fn each_defect_is_named_by_its_pointer() {
        let mut v = occ();
        v["operationState"] = "DONE".into();
        v["timeStamp"] = "yesterday".into();
        v["id"] = "../etc".into();
        v["isAutomaticInvocation"] = "no".into();
        v["_links"]["vnfInstance"]["href"] = 3.into();
        assert_eq!(
            pointers(&v),
            [
                "/id",
                "/timeStamp",
                "/operationState",
                "/isAutomaticInvocation",
                "/_links/vnfInstance/href"
            ]
        );
        let mut v = occ();
        v["notificationType"] = "VnfPackageChangeNotification".into();
        assert_eq!(pointers(&v), ["/notificationType"]);
        assert_eq!(pointers(&serde_json::json!([1])), [""]);
        let e = parse(b"{\"id\": ").unwrap_err();
        assert_eq!(e[0].pointer, "");
        assert!(e[0].reason.contains("not JSON"), "{e:?}");
    }
}
