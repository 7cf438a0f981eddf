//! The daemon epoch (migration V20): the fencing token of the daemon's own writes.
//!
//! A daemon raises the epoch once at start ([`Store::hold_epoch`]) and keeps the value it got.
//! From then on [`Store::write`] reads the current epoch first inside its `BEGIN IMMEDIATE`
//! transaction (under SQLite's write lock, so no other writer can raise it meanwhile): when it
//! is no longer the held one, another daemon has started on this database since (a split brain
//! that got past `daemon.lock` and the cluster's fencing), and the transaction is rolled back
//! with [`StoreError::Fenced`] before it wrote anything. The daemon exits on it at once.
//!
//! Rows the daemon writes carry its epoch: every statement of [`Tx`] that inserts or updates a
//! row of `event`, `step_journal` or `vnf_lcm_op_occ` sets `epoch` itself from the
//! transaction's held epoch (`COALESCE(?, epoch)` in an UPDATE: a command holds none, so the
//! rows it inserts stay NULL and the rows it changes keep the epoch of the daemon that wrote
//! them last). Stamping costs no statement of its own: an earlier version stamped through
//! `TEMP` triggers, which wrote each row a second time.
//!
//! Debug builds (every test run) add a guard: `TEMP` triggers of the daemon's connection that
//! abort any statement leaving a `step_journal` or `vnf_lcm_op_occ` row it wrote without the
//! held epoch, so a write path that forgets to stamp fails the tests that run it.

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

/// Debug builds only: the statements of the guard (see the module's documentation) for
/// `epoch`: `TEMP` triggers aborting a statement that leaves a row it inserted or updated in
/// `step_journal` or `vnf_lcm_op_occ` without `epoch`.
#[cfg(debug_assertions)]
fn stamp_guard(epoch: Epoch) -> String {
    let e = epoch.0;
    let mut sql = String::new();
    for table in ["step_journal", "vnf_lcm_op_occ"] {
        for when in ["INSERT", "UPDATE"] {
            let name = format!("{table}_epoch_guard_{}", when.to_lowercase());
            sql.push_str(&format!(
                "DROP TRIGGER IF EXISTS temp.{name};
                 CREATE TEMP TRIGGER {name} AFTER {when} ON main.{table}
                 WHEN NEW.epoch IS NOT {e}
                 BEGIN SELECT RAISE(ABORT, '{UNSTAMPED} {table}'); END;\n"
            ));
        }
    }
    sql
}

/// The message of the debug guard's abort, followed by the table's name.
#[cfg(debug_assertions)]
const UNSTAMPED: &str = "a daemon write left a row without its epoch in";

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
        #[cfg(debug_assertions)]
        tx.execute_batch(&stamp_guard(epoch))?;
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
    /// Every write path of [`Tx`] that changes an operation or a journal row stamps the held
    /// epoch itself: before each, a command's connection (no epoch) clears the stamps; after
    /// each, the row it wrote carries the daemon's epoch again. A command's store changing the
    /// row keeps the last daemon's stamp; the rows it inserts stay NULL.
    #[test]
    fn every_write_path_of_a_held_store_stamps_its_epoch() {
        use vnfkeeper_core::model::{PendingTask, ProblemDetails};
        use vnfkeeper_core::package::PackageDigest;
        use vnfkeeper_core::tacker::OpOccSeen;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let op = OpOccId::from("op-1");
        let mut daemon = Store::open(&path).unwrap();
        let held = daemon.hold_epoch("node-a", now(), None).unwrap();
        let command = rusqlite::Connection::open(&path).unwrap();
        let clear = || {
            command
                .execute_batch(
                    "UPDATE vnf_lcm_op_occ SET epoch = NULL; UPDATE step_journal SET epoch = NULL;",
                )
                .unwrap();
        };

        // Each write path, run by the daemon on rows a command cleared; then the table it wrote.
        type Path = (&'static str, &'static str, fn(&mut Tx<'_>) -> Result<()>);
        let paths: Vec<Path> = vec![
            ("insert_operation", "vnf_lcm_op_occ", |tx| {
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now())?;
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from("op-1"),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::Heal,
                        operation_params: &RequestBody::split(LcmOperationType::Heal, "{}"),
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    now(),
                )
            }),
            ("set_operation_state", "vnf_lcm_op_occ", |tx| {
                tx.set_operation_state("op-1", OperationState::Processing, None, now())
                    .map(drop)
            }),
            ("set_pending_task", "vnf_lcm_op_occ", |tx| {
                tx.set_pending_task(&OpOccId::from("op-1"), PendingTask::Retry)
            }),
            ("set_steps_total", "vnf_lcm_op_occ", |tx| {
                tx.set_steps_total(&OpOccId::from("op-1"), 3)
            }),
            ("set_status_detail", "vnf_lcm_op_occ", |tx| {
                tx.set_status_detail(&OpOccId::from("op-1"), "working")
            }),
            ("set_operation_plan", "vnf_lcm_op_occ", |tx| {
                tx.set_operation_plan(&OpOccId::from("op-1"), "{}")
            }),
            ("replace_operation_plan", "vnf_lcm_op_occ", |tx| {
                tx.replace_operation_plan(&OpOccId::from("op-1"), "{\"stages\":[]}")
            }),
            ("record_package_snapshot", "vnf_lcm_op_occ", |tx| {
                tx.record_package_snapshot(
                    &OpOccId::from("op-1"),
                    PackageDigest([7; 32]),
                    std::path::Path::new("/srv/packages/p"),
                )
            }),
            ("journal_start", "step_journal", |tx| {
                tx.journal_start(
                    &OpOccId::from("op-1"),
                    &StageKey::from("s1"),
                    1,
                    "cloud.stack_create",
                    "",
                    now(),
                )
            }),
            ("journal_finish", "step_journal", |tx| {
                tx.journal_finish(
                    &OpOccId::from("op-1"),
                    &StageKey::from("s1"),
                    StepState::Done,
                    Some(0),
                    "",
                    now(),
                )
            }),
            ("make_tacker_heal", "vnf_lcm_op_occ", |tx| {
                tx.make_tacker_heal(&OpOccId::from("op-1"), true)
            }),
            ("mark_tacker_heal_sent", "vnf_lcm_op_occ", |tx| {
                let occ = OpOccSeen {
                    id: "tacker-occ-1".into(),
                    vnf_instance_id: "vnf-1".into(),
                    operation: "HEAL".into(),
                    state: OperationState::Processing,
                    is_automatic_invocation: false,
                };
                assert!(tx.mark_tacker_heal_sent(&OpOccId::from("op-1"), &occ, now())?);
                Ok(())
            }),
            ("release_tacker_heal", "vnf_lcm_op_occ", |tx| {
                assert!(tx.release_tacker_heal("tacker-occ-1")?.is_some());
                Ok(())
            }),
            ("fail_tacker_heal", "vnf_lcm_op_occ", |tx| {
                tx.fail_tacker_heal(
                    &OpOccId::from("op-1"),
                    &ProblemDetails::new(500, "boom", vec![]),
                    now(),
                )
            }),
        ];
        for (name, table, path) in paths {
            clear();
            daemon.write(path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                epochs(&daemon, &format!("SELECT epoch FROM {table}")),
                vec![Some(held.0)],
                "{name} did not stamp {table}"
            );
        }

        // A command's store: a change keeps the daemon's stamp, an insert stays NULL.
        daemon
            .write(|tx| {
                tx.journal_finish(&op, &StageKey::from("s1"), StepState::Done, None, "", now())
            })
            .unwrap();
        drop(daemon);
        let mut cli = Store::open(&path).unwrap();
        cli.write(|tx| tx.set_status_detail(&op, "by hand"))
            .unwrap();
        cli.write(|tx| {
            tx.journal_start(
                &op,
                &StageKey::from("s2"),
                2,
                "storage.mkfs",
                "vnfc-1",
                now(),
            )
        })
        .unwrap();
        assert_eq!(
            epochs(&cli, "SELECT epoch FROM vnf_lcm_op_occ"),
            vec![Some(held.0)]
        );
        assert_eq!(
            epochs(&cli, "SELECT epoch FROM step_journal ORDER BY step_no"),
            vec![Some(held.0), None]
        );
    }

    /// Debug builds: a daemon's statement that leaves a row without its epoch (a write path
    /// that forgot to stamp) is aborted by the guard, and nothing of its transaction is kept.
    #[cfg(debug_assertions)]
    #[test]
    fn the_debug_guard_aborts_an_unstamped_daemon_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut daemon = Store::open(&path).unwrap();
        daemon.hold_epoch("node-a", now(), None).unwrap();
        let vnf = VnfInstanceId::from("vnf-1");
        let op = OpOccId::from("op-1");
        daemon
            .write(|tx| {
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
                )
            })
            .unwrap();
        for sql in [
            "UPDATE vnf_lcm_op_occ SET status_detail = 'x', epoch = NULL",
            "INSERT INTO step_journal (vnf_lcm_op_occ_id, stage_key, step_no, name, state)
             VALUES ('op-1', 's1', 1, 'n', 'STARTED')",
        ] {
            let err = daemon.write(|tx| Ok(tx.tx.execute(sql, [])?)).unwrap_err();
            assert!(err.to_string().contains(UNSTAMPED), "{sql}: {err}");
        }
        assert_eq!(
            epochs(&daemon, "SELECT epoch FROM vnf_lcm_op_occ"),
            vec![Some(1)]
        );
        assert!(epochs(&daemon, "SELECT epoch FROM step_journal").is_empty());
    }
}
