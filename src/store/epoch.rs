//! The daemon epoch (migration V20): the fencing token of the daemon's own writes.
//!
//! A daemon raises the epoch once at start ([`Store::hold_epoch`]) and keeps the value it got.
//! From then on [`Store::write`] reads the current epoch first inside its `BEGIN IMMEDIATE`
//! transaction (under SQLite's write lock, so no other writer can raise it meanwhile): when it
//! is no longer the held one, another daemon has started on this database since (a split brain
//! that got past `daemon.lock` and the cluster's fencing), and the transaction is rolled back
//! with [`StoreError::Fenced`] before it wrote anything. The daemon exits on it at once.
//!
//! Rows the daemon writes carry its epoch: `event.epoch` when appended, `step_journal.epoch` and
//! `vnf_lcm_op_occ.epoch` through temporary triggers of the daemon's connection (a `TEMP`
//! trigger exists only on the connection that made it, so a command's writes stay NULL).

use rusqlite::{OptionalExtension as _, TransactionBehavior, params};
use vnfkeeper_core::model::{EventKind, Timestamp};

use super::{NewEvent, Result, Store, StoreError, Tx};

/// A daemon epoch: the value of `daemon_epoch.epoch` a daemon raised at its start. Larger is
/// newer; 0 means no daemon has started on the database yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub i64);

impl std::fmt::Display for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What the store calls when a write finds itself fenced, before it returns
/// [`StoreError::Fenced`]: the daemon's hook logs and exits the process (it never returns).
pub type OnFenced = fn(held: Epoch, current: Epoch);

/// The epoch a store holds and what to do when it is fenced.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence {
    pub(super) epoch: Epoch,
    pub(super) on_fenced: Option<OnFenced>,
}

/// The statements stamping the held epoch on the rows this connection writes.
fn stamp_triggers(epoch: Epoch) -> String {
    let e = epoch.0;
    let mut sql = String::new();
    for table in ["step_journal", "vnf_lcm_op_occ"] {
        for when in ["INSERT", "UPDATE"] {
            let name = format!("{table}_epoch_{}", when.to_lowercase());
            sql.push_str(&format!(
                "DROP TRIGGER IF EXISTS temp.{name};
                 CREATE TEMP TRIGGER {name} AFTER {when} ON main.{table}
                 WHEN NEW.epoch IS NOT {e}
                 BEGIN UPDATE main.{table} SET epoch = {e} WHERE rowid = NEW.rowid; END;\n"
            ));
        }
    }
    sql
}

impl Store {
    /// Raises the daemon epoch by one in one write transaction, records who raised it (`node`,
    /// `now`) and a `DAEMON_STARTED` event, and from then on holds that epoch: every later
    /// [`Store::write`] checks it first, and the journal rows, operations and events this
    /// connection writes carry it. `on_fenced` runs when a write finds another epoch (the
    /// daemon passes a hook that exits). Errors: SQLite's.
    pub fn hold_epoch(
        &mut self,
        node: &str,
        now: Timestamp,
        on_fenced: Option<OnFenced>,
    ) -> Result<Epoch> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE daemon_epoch SET epoch = epoch + 1, node = ?1, started_at = ?2 WHERE id = 1",
            params![node, now.to_rfc3339()],
        )?;
        let epoch = Epoch(tx.query_row(
            "SELECT epoch FROM daemon_epoch WHERE id = 1",
            [],
            |r| r.get(0),
        )?);
        tx.execute_batch(&stamp_triggers(epoch))?;
        let mut w = Tx {
            tx,
            key: self.key.as_ref(),
            epoch: Some(epoch),
        };
        let evidence = serde_json::json!({ "epoch": epoch.0, "node": node }).to_string();
        let message = format!("daemon started on {node} with epoch {epoch}");
        w.append_event(
            &NewEvent {
                kind: EventKind::DaemonStarted,
                vnf_instance_id: None,
                vnf_lcm_op_occ_id: None,
                vnfc_id: None,
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        w.tx.commit()?;
        self.fence = Some(Fence { epoch, on_fenced });
        Ok(epoch)
    }

    /// The epoch this store holds ([`Store::hold_epoch`]); `None` for a command's store.
    pub fn epoch(&self) -> Option<Epoch> {
        self.fence.map(|f| f.epoch)
    }
}

/// Inside a write transaction: `Err(Fenced)` when `fence`'s epoch is no longer the database's.
pub(super) fn check(tx: &rusqlite::Transaction<'_>, fence: Option<Fence>) -> Result<()> {
    let Some(fence) = fence else {
        return Ok(());
    };
    let current: Option<i64> = tx
        .prepare_cached("SELECT epoch FROM daemon_epoch WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let current = Epoch(current.unwrap_or_default());
    if current == fence.epoch {
        return Ok(());
    }
    Err(StoreError::Fenced {
        held: fence.epoch,
        current,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;
    use crate::store::{NewOperation, RequestBody};
    use vnfkeeper_core::model::{
        LcmOperationType, OpOccId, OperationState, StageKey, StepState, VnfInstanceId,
    };

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-27T17:00:00Z").unwrap()
    }

    /// The `current` epoch the fence hook last saw (the hook of these tests does not exit).
    static FENCED_AT: AtomicI64 = AtomicI64::new(0);
    fn record(_held: Epoch, current: Epoch) {
        FENCED_AT.store(current.0, Ordering::SeqCst);
    }

    fn epochs(store: &Store, sql: &str) -> Vec<Option<i64>> {
        let mut st = store.conn.prepare(sql).unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Two daemons on one database with the lock bypassed (a split brain): the second start
    /// raises the epoch; the first one's next write is refused before it runs, and the stage
    /// it journaled DONE stays DONE under its epoch, so the newer daemon skips it.
    #[test]
    fn a_write_under_a_raised_epoch_is_refused_and_done_stages_stay_done() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let op = OpOccId::from("op-1");
        let vnf = VnfInstanceId::from("vnf-1");
        let (s1, s2) = (StageKey::from("s1"), StageKey::from("s2"));

        let mut old = Store::open(&path).unwrap();
        assert_eq!(old.epoch(), None);
        let e1 = old.hold_epoch("node-a", now(), Some(record)).unwrap();
        assert_eq!(e1, Epoch(1));
        old.write(|tx| {
            tx.create_instance_if_missing(&vnf, now())?;
            tx.insert_operation(
                &NewOperation {
                    id: &op,
                    vnf_instance_id: &vnf,
                    operation: LcmOperationType::Instantiate,
                    operation_params: &RequestBody::split(LcmOperationType::Instantiate, "{}"),
                    vnf_package: None,
                    request_id: None,
                    is_automatic_invocation: false,
                    status_detail: None,
                },
                now(),
            )?;
            tx.set_operation_state(op.as_str(), OperationState::Processing, None, now())?;
            tx.journal_start(&op, &s1, 1, "cloud.stack_create", "", now())?;
            tx.journal_finish(&op, &s1, StepState::Done, Some(0), "", now())
        })
        .unwrap();

        // The second daemon: another connection to the same file, lock bypassed.
        let mut new = Store::open(&path).unwrap();
        let e2 = new.hold_epoch("node-b", now(), None).unwrap();
        assert_eq!(e2, Epoch(2));

        let mut ran = false;
        let err = old
            .write(|tx| {
                ran = true;
                tx.journal_start(&op, &s2, 2, "storage.mkfs", "vnfc-1", now())
            })
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Fenced {
                    held: Epoch(1),
                    current: Epoch(2)
                }
            ),
            "{err}"
        );
        assert!(!ran, "the fenced transaction's body ran");
        assert_eq!(
            FENCED_AT.load(Ordering::SeqCst),
            2,
            "the fence hook was not called"
        );
        assert!(err.to_string().contains("epoch 1") && err.to_string().contains("is 2"));
        // It stays fenced: every later write fails too.
        assert!(matches!(
            old.write(|_| Ok(())),
            Err(StoreError::Fenced { .. })
        ));

        // The newer daemon sees s1 DONE (so the executor skips it) and no s2 from the old one.
        let done = new.reader().done_stages(&op).unwrap();
        assert_eq!(done.into_iter().collect::<Vec<_>>(), vec![s1.clone()]);
        new.write(|tx| {
            tx.journal_start(&op, &s2, 2, "storage.mkfs", "vnfc-1", now())?;
            tx.journal_finish(&op, &s2, StepState::Done, Some(0), "", now())
        })
        .unwrap();
        // Stamps: each row carries the epoch that wrote it last.
        assert_eq!(
            epochs(&new, "SELECT epoch FROM step_journal ORDER BY step_no"),
            vec![Some(1), Some(2)]
        );
        assert_eq!(
            epochs(&new, "SELECT epoch FROM vnf_lcm_op_occ"),
            vec![Some(1)]
        );
        new.write(|tx| tx.set_status_detail(&op, "resumed"))
            .unwrap();
        assert_eq!(
            epochs(&new, "SELECT epoch FROM vnf_lcm_op_occ"),
            vec![Some(2)]
        );
        assert_eq!(
            epochs(&new, "SELECT epoch FROM daemon_runs"),
            vec![Some(1), Some(2)]
        );

        // A command's store (no epoch held) is not fenced and stamps nothing.
        drop(new);
        let mut command = Store::open(&path).unwrap();
        command
            .write(|tx| tx.set_status_detail(&op, "by hand"))
            .unwrap();
        assert_eq!(
            epochs(&command, "SELECT epoch FROM vnf_lcm_op_occ"),
            vec![Some(2)]
        );
    }
}
