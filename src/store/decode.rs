//! Decoding stored text into types, once, at the store boundary: a value that does not decode is
//! [`StoreError::Corrupt`] naming the table, the row and the column, never a silent default.

use std::fmt::Display;

use serde::de::DeserializeOwned;

use super::{Result, StoreError};
use vnfkeeper_core::model::Timestamp;

/// The `operation_state` spellings (SOL003 §5.5.4.3 `LcmOperationStateType`), for errors.
pub(super) const OPERATION_STATES: &str =
    "STARTING, PROCESSING, COMPLETED, FAILED_TEMP, FAILED, ROLLING_BACK or ROLLED_BACK";

/// One stored row being decoded: its table and primary key, for the errors.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cells<'k> {
    table: &'static str,
    row: &'k str,
}

impl<'k> Cells<'k> {
    /// The row of `table` whose primary key (as text) is `row`.
    pub(super) fn new(table: &'static str, row: &'k str) -> Self {
        Self { table, row }
    }

    /// [`StoreError::Corrupt`] for `column` of this row.
    pub(super) fn corrupt(&self, column: &'static str, reason: impl Display) -> StoreError {
        StoreError::Corrupt {
            table: self.table,
            row: self.row.to_owned(),
            column,
            reason: reason.to_string(),
        }
    }

    /// A time column (RFC 3339 text, see [`Timestamp`]).
    pub(super) fn time(&self, column: &'static str, text: &str) -> Result<Timestamp> {
        Timestamp::parse(text).map_err(|e| {
            self.corrupt(
                column,
                format!("expected an RFC 3339 time, found `{text}` ({e})"),
            )
        })
    }

    /// A nullable time column.
    pub(super) fn opt_time(
        &self,
        column: &'static str,
        text: Option<String>,
    ) -> Result<Option<Timestamp>> {
        text.map(|t| self.time(column, &t)).transpose()
    }

    /// A column of one of a fixed set of spellings (`expected` lists them for the error).
    pub(super) fn spelling<T>(
        &self,
        column: &'static str,
        text: &str,
        parse: impl FnOnce(&str) -> Option<T>,
        expected: &str,
    ) -> Result<T> {
        parse(text)
            .ok_or_else(|| self.corrupt(column, format!("expected {expected}, found `{text}`")))
    }

    /// A nullable JSON column decoded into `T` (`expected` describes its shape for the error).
    /// The JSON text itself is not repeated in the error.
    pub(super) fn json<T: DeserializeOwned>(
        &self,
        column: &'static str,
        text: Option<String>,
        expected: &str,
    ) -> Result<Option<T>> {
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| self.corrupt(column, format!("expected {expected} ({e})")))
        })
        .transpose()
    }
}

/// JSON text of a value being stored. Errors: [`StoreError::Encode`] (a map with non-string keys,
/// a failing `Serialize`).
pub(super) fn to_json(column: &'static str, value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Encode {
        column,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use vnfkeeper_core::model::{OpOccId, VnfInstanceId};

    use serde_json::json;

    use super::super::{NewIntake, NewOperation, RequestBody, Store, StoreError};
    use crate::store::ReconcileStateRow;
    use vnfkeeper_core::model::{
        IntakeOutcome, LcmOperationType, OperationState, PendingTask, Timestamp,
    };
    use vnfkeeper_core::{model::AttachedVolume, plan::vnfcs::ObservedVnfc};

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-21T06:00:00Z").unwrap()
    }

    /// A store with instance `vnf-1`, operation `op-1` (FAILED_TEMP, pending RETRY), one VNFC
    /// and one intake record; returns it with the VNFC's id.
    fn store() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let observed = ObservedVnfc {
            vdu_id: "workerNode".into(),
            stack_name: "vnf-vnf-1".into(),
            stack_id: "sid".into(),
            resource_name: "workerNode".into(),
            server_id: "srv-1".into(),
            server_status: Some("ACTIVE".into()),
            created: None,
            cp_addresses: BTreeMap::from([("workerNode_CP2".into(), "10.0.0.5".into())]),
            shared_addresses: BTreeMap::new(),
            floating_addresses: BTreeMap::new(),
            volumes: vec![AttachedVolume {
                resource: Some("vol".into()),
                volume_id: "vol-1".into(),
                device: None,
            }],
            index: Some(0),
            parameters: Some(json!({"VDU": {"workerNode-0": {"computeName": "workerNode-0"}}})),
        };
        let vnfcs = store
            .write(|tx| {
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now())?;
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from("op-1"),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::Instantiate,
                        operation_params: &RequestBody::split(LcmOperationType::Instantiate, "{}"),
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    now(),
                )?;
                tx.set_operation_state("op-1", OperationState::FailedTemp, None, now())?;
                tx.set_pending_task(&OpOccId::from("op-1"), PendingTask::Retry)?;
                tx.insert_intake(
                    &NewIntake {
                        file_name: "a.json",
                        content_sha256: "00",
                        request_id: None,
                        outcome: "ACCEPTED",
                        vnf_instance_id: Some("vnf-1"),
                        vnf_lcm_op_occ_id: Some("op-1"),
                        problem: None,
                        warnings: None,
                    },
                    now(),
                )?;
                tx.sync_vnfcs(&VnfInstanceId::from("vnf-1"), &[observed], now())
            })
            .unwrap();
        let id = vnfcs[0].id.to_string();
        (dir, store, id)
    }

    /// The `(table, row, column)` of a Corrupt error, else a panic naming what came instead.
    fn corrupt<T: std::fmt::Debug>(r: super::Result<T>) -> (&'static str, String, &'static str) {
        match r {
            Err(StoreError::Corrupt {
                table, row, column, ..
            }) => (table, row, column),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn rows_come_back_as_the_types_that_were_written() {
        let (_dir, store, id) = store();
        let v = &store.reader().vnfcs(&VnfInstanceId::from("vnf-1")).unwrap()[0];
        assert_eq!(v.id, id);
        assert_eq!(v.cp_addresses["workerNode_CP2"], "10.0.0.5");
        assert_eq!(v.volumes[0].volume_id, "vol-1");
        assert_eq!(v.created_at, now());
        assert_eq!(
            v.parameters.as_ref().unwrap()["VDU"]["workerNode-0"]["computeName"],
            "workerNode-0"
        );
        let op = store
            .reader()
            .operation(&OpOccId::from("op-1"))
            .unwrap()
            .unwrap();
        assert_eq!(op.pending_task, Some(PendingTask::Retry));
        assert_eq!((op.start_time, op.state_entered_time), (now(), now()));
        let intake = store.reader().intake().unwrap();
        assert_eq!(intake[0].outcome, IntakeOutcome::Accepted);
        assert_eq!(intake[0].committed_at, now());
        let inst = &store.reader().instances().unwrap()[0];
        assert!(inst.scale_status.is_empty());
        assert_eq!(store.reader().vnfc_updated_at().unwrap()[&id], now());
    }

    #[test]
    fn a_json_column_that_does_not_decode_names_table_row_and_column() {
        let (_dir, store, id) = store();
        store
            .conn
            .execute("UPDATE vnfc SET cp_addresses = '{not json'", [])
            .unwrap();
        let err = store.reader().vnfcs(&VnfInstanceId::from("vnf-1"));
        let shown = err.as_ref().unwrap_err().to_string();
        assert_eq!(corrupt(err), ("vnfc", id.clone(), "cp_addresses"));
        assert!(
            shown.starts_with(&format!(
                "corrupt database: table vnfc, row {id}, column cp_addresses: expected a JSON \
                 object of strings ("
            )),
            "{shown}"
        );
        // Valid JSON of the wrong shape is as corrupt as broken JSON.
        store
            .conn
            .execute(
                "UPDATE vnfc SET cp_addresses = NULL, volumes = '{\"volumeId\": 1}'",
                [],
            )
            .unwrap();
        assert_eq!(
            corrupt(store.reader().vnfcs(&VnfInstanceId::from("vnf-1"))),
            ("vnfc", id, "volumes")
        );
        store
            .conn
            .execute("UPDATE vnf_instance SET scale_status = '[1]'", [])
            .unwrap();
        assert_eq!(
            corrupt(store.reader().instances()),
            ("vnf_instance", "vnf-1".into(), "scale_status")
        );
        store
            .conn
            .execute("UPDATE vnf_lcm_op_occ SET error = '\"boom\"'", [])
            .unwrap();
        assert_eq!(
            corrupt(store.reader().operations(None)),
            ("vnf_lcm_op_occ", "op-1".into(), "error")
        );
    }

    #[test]
    fn a_time_that_does_not_decode_names_table_row_and_column() {
        let (_dir, store, id) = store();
        store
            .conn
            .execute("UPDATE vnfc SET created_at = 'yesterday'", [])
            .unwrap();
        let err = store.reader().vnfcs(&VnfInstanceId::from("vnf-1"));
        assert!(
            err.as_ref()
                .unwrap_err()
                .to_string()
                .contains("expected an RFC 3339 time, found `yesterday`"),
            "{err:?}"
        );
        assert_eq!(corrupt(err), ("vnfc", id.clone(), "created_at"));
        store
            .conn
            .execute("UPDATE vnfc SET updated_at = '2026-13-01'", [])
            .unwrap();
        assert_eq!(
            corrupt(store.reader().vnfc_updated_at()),
            ("vnfc", id, "updated_at")
        );
        store
            .conn
            .execute("UPDATE vnf_lcm_op_occ SET start_time = ''", [])
            .unwrap();
        assert_eq!(
            corrupt(store.reader().operation(&OpOccId::from("op-1"))),
            ("vnf_lcm_op_occ", "op-1".into(), "start_time")
        );
        store
            .conn
            .execute("UPDATE intake SET committed_at = 'now'", [])
            .unwrap();
        assert_eq!(
            corrupt(store.reader().intake()),
            ("intake", "1".into(), "committed_at")
        );
    }

    #[test]
    fn a_spelling_the_schema_forbids_names_table_row_and_column() {
        let (_dir, store, _) = store();
        // The CHECKs keep these out; a file edited with them off must still not be misread.
        store
            .conn
            .pragma_update(None, "ignore_check_constraints", "ON")
            .unwrap();
        store
            .conn
            .execute("UPDATE vnf_lcm_op_occ SET pending_task = 'CANCEL'", [])
            .unwrap();
        let err = store.reader().operations(Some("vnf-1"));
        assert!(
            err.as_ref()
                .unwrap_err()
                .to_string()
                .ends_with("column pending_task: expected RETRY or ROLLBACK, found `CANCEL`"),
            "{err:?}"
        );
        assert_eq!(
            corrupt(err),
            ("vnf_lcm_op_occ", "op-1".into(), "pending_task")
        );
        store
            .conn
            .execute("UPDATE intake SET outcome = 'MAYBE'", [])
            .unwrap();
        assert_eq!(
            corrupt(store.reader().intake()),
            ("intake", "1".into(), "outcome")
        );
    }

    #[test]
    fn reconcile_memory_round_trips_and_a_bad_column_is_corrupt() {
        let (_dir, mut store, id) = store();
        let row = ReconcileStateRow {
            vnf_instance_id: "vnf-1".into(),
            vnfc_id: String::new(),
            healthy_since: Some(now()),
            pv_bound: Some(vec!["nfs-pv1".into()]),
            pv_observed_at: Some(now()),
            last_decision: Some("RECONCILE_DEFERRED_GRACE:x".into()),
            ..ReconcileStateRow::default()
        };
        store
            .write(|tx| tx.put_reconcile_state(&row, now()))
            .unwrap();
        let states = store.reader().reconcile_states().unwrap();
        assert_eq!(states[&("vnf-1".to_owned(), String::new())], row);
        // The keyed read finds the same row, and nothing under another key.
        assert_eq!(
            store
                .reader()
                .reconcile_state(&"vnf-1".into(), None)
                .unwrap(),
            Some(row.clone())
        );
        assert_eq!(
            store
                .reader()
                .reconcile_state(&"vnf-1".into(), Some(&"x".into()))
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .reader()
                .reconcile_state(&"vnf-2".into(), None)
                .unwrap(),
            None
        );
        store
            .conn
            .execute(
                "UPDATE reconcile_state SET last_heal_at = 'soon', vnfc_id = ?1",
                [&id],
            )
            .unwrap();
        assert_eq!(
            corrupt(store.reader().reconcile_states()),
            ("reconcile_state", format!("(vnf-1, {id})"), "last_heal_at")
        );
        store
            .conn
            .execute(
                "UPDATE reconcile_state SET last_heal_at = NULL, pv_bound = '{}'",
                [],
            )
            .unwrap();
        assert_eq!(
            corrupt(store.reader().reconcile_states()),
            ("reconcile_state", format!("(vnf-1, {id})"), "pv_bound")
        );
    }

    #[test]
    fn an_illegal_transition_names_the_operation() {
        let (_dir, mut store, _) = store();
        let err = store
            .write(|tx| tx.set_operation_state("op-1", OperationState::Completed, None, now()));
        let shown = err.as_ref().unwrap_err().to_string();
        assert_eq!(
            corrupt(err),
            ("vnf_lcm_op_occ", "op-1".into(), "operation_state")
        );
        assert!(
            shown.ends_with("illegal operation state transition FAILED_TEMP -> COMPLETED"),
            "{shown}"
        );
    }
}
