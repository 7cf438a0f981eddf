//! SQL of the notifications received from Tacker (table `tacker_notification`,
//! `migrations/V12__tacker_notifications.sql`): recorded once each, read back typed.

mod adoption;
mod heal;
mod hooks;

pub use adoption::{
    HealAdoption, PendingFollowup, PollRecord, RecordedInstance, RecordedOpOcc, Retired,
    StoredSubscription,
};
pub use heal::WaitingHeal;
pub use hooks::{HookOutcome, HookReceipt};
use rusqlite::params;

use super::decode::Cells;
use super::{ReaderRef, Result, Tx, collect_checked};
use vnfkeeper_core::model::{OperationState, Timestamp};
use vnfkeeper_core::wire::notification::{
    Notification, NotificationStatus, NotificationType, OccurrenceChange,
};

const COLUMNS: &str = "id, received_at, notification_type, subscription_id, time_stamp, \
                       vnf_instance_id, vnf_lcm_op_occ_id, operation, operation_state, \
                       notification_status, is_automatic_invocation";

/// A notification as recorded: what Tacker said and when vnfkeeper received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedNotification {
    /// When the endpoint committed it.
    pub received_at: Timestamp,
    /// The checked notification.
    pub notification: Notification,
}

fn decode(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<ReceivedNotification>> {
    let id: String = r.get(0)?;
    let received_at: String = r.get(1)?;
    let notification_type: String = r.get(2)?;
    let time_stamp: String = r.get(4)?;
    let occ_id: Option<String> = r.get(6)?;
    let operation: Option<String> = r.get(7)?;
    let state: Option<String> = r.get(8)?;
    let status: Option<String> = r.get(9)?;
    let automatic: Option<bool> = r.get(10)?;
    let subscription_id: String = r.get(3)?;
    let vnf_instance_id: String = r.get(5)?;
    Ok((|| {
        let c = Cells::new("tacker_notification", &id);
        let occurrence = match (occ_id, operation, state, status, automatic) {
            (Some(occ), Some(operation), Some(state), Some(status), Some(automatic)) => {
                Some(OccurrenceChange {
                    notification_status: c.spelling(
                        "notification_status",
                        &status,
                        NotificationStatus::parse,
                        "START or RESULT",
                    )?,
                    operation_state: c.spelling(
                        "operation_state",
                        &state,
                        OperationState::parse,
                        "an operationState",
                    )?,
                    operation,
                    vnf_lcm_op_occ_id: occ,
                    is_automatic_invocation: automatic,
                })
            }
            (None, None, None, None, None) => None,
            _ => {
                return Err(c.corrupt("vnf_lcm_op_occ_id", "the operation columns are partly NULL"));
            }
        };
        Ok(ReceivedNotification {
            received_at: c.time("received_at", &received_at)?,
            notification: Notification {
                notification_type: c.spelling(
                    "notification_type",
                    &notification_type,
                    NotificationType::parse,
                    "a notificationType",
                )?,
                time_stamp: c.time("time_stamp", &time_stamp)?,
                id: id.clone(),
                subscription_id,
                vnf_instance_id,
                occurrence,
            },
        })
    })())
}

impl ReaderRef<'_> {
    /// The notifications received, oldest first (by receipt, then id); only those about
    /// `vnf_instance_id` when given. Errors: the store's; a row that does not decode.
    pub fn tacker_notifications(
        &self,
        vnf_instance_id: Option<&str>,
    ) -> Result<Vec<ReceivedNotification>> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM tacker_notification
             WHERE ?1 IS NULL OR vnf_instance_id = ?1 ORDER BY received_at, id"
        ))?;
        let rows = st.query_map([vnf_instance_id], decode)?;
        collect_checked(rows)
    }
}

impl Tx<'_> {
    /// Records `n`, received at `now`, unless it is a duplicate: the same `id`, or (an operation
    /// occurrence) the same `vnfLcmOpOccId` and `operationState` as one recorded before.
    /// Returns whether it was new. Errors: the store's.
    pub fn record_notification(&mut self, n: &Notification, now: Timestamp) -> Result<bool> {
        let o = n.occurrence.as_ref();
        let inserted = self.tx.execute(
            &format!(
                "INSERT OR IGNORE INTO tacker_notification ({COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
            ),
            params![
                n.id,
                now.to_rfc3339(),
                n.notification_type.as_str(),
                n.subscription_id,
                n.time_stamp.to_rfc3339(),
                n.vnf_instance_id,
                o.map(|o| o.vnf_lcm_op_occ_id.as_str()),
                o.map(|o| o.operation.as_str()),
                o.map(|o| o.operation_state.as_str()),
                o.map(|o| o.notification_status.as_str()),
                o.map(|o| o.is_automatic_invocation),
            ],
        )?;
        Ok(inserted == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn occ(id: &str, occ: &str, state: OperationState) -> Notification {
        Notification {
            id: id.into(),
            notification_type: NotificationType::VnfLcmOperationOccurrence,
            subscription_id: "sub".into(),
            time_stamp: Timestamp::parse("2026-11-26T00:00:00Z").unwrap(),
            vnf_instance_id: "vnf-1".into(),
            occurrence: Some(OccurrenceChange {
                notification_status: NotificationStatus::Result,
                operation_state: state,
                operation: "HEAL".into(),
                vnf_lcm_op_occ_id: occ.into(),
                is_automatic_invocation: true,
            }),
        }
    }

    #[test]
    fn a_notification_is_recorded_once_by_id_and_by_occurrence_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let now = Timestamp::parse("2026-11-26T01:00:00Z").unwrap();
        let a = occ("n1", "occ-1", OperationState::Processing);
        let mut created = a.clone();
        created.id = "n0".into();
        created.notification_type = NotificationType::VnfIdentifierCreation;
        created.occurrence = None;
        let same_id = occ("n1", "occ-2", OperationState::Completed);
        let same_state = occ("n2", "occ-1", OperationState::Processing);
        let next = occ("n3", "occ-1", OperationState::Completed);
        let new: Vec<bool> = [&created, &a, &same_id, &same_state, &next]
            .into_iter()
            .map(|n| store.write(|tx| tx.record_notification(n, now)).unwrap())
            .collect();
        assert_eq!(new, [true, true, false, false, true]);
        let back: Vec<Notification> = store
            .reader()
            .tacker_notifications(Some("vnf-1"))
            .unwrap()
            .into_iter()
            .map(|r| r.notification)
            .collect();
        assert_eq!(back, [created, a, next]);
        assert!(
            store
                .reader()
                .tacker_notifications(Some("vnf-2"))
                .unwrap()
                .is_empty()
        );
    }
}
