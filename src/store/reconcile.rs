//! SQL the reconcile loop needs (issue 5, C5): what to observe (instantiated VNF instances, their
//! VNFCs and unfinished operations, the INSTANTIATE request that set their intended state) and the
//! loop's own memory, table `reconcile_state` (`migrations/V3__reconcile.sql`).

use std::collections::HashMap;

use rusqlite::{OptionalExtension, params};

use super::{ReaderRef, Result, Tx};
use crate::model::Timestamp;

/// One `reconcile_state` row: what the loop remembers about a VNFC (or, with `vnfc_id` empty,
/// about a VNF instance). Times are RFC 3339 text as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileStateRow {
    /// vnfInstanceId.
    pub vnf_instance_id: String,
    /// vnfcInstanceId, or `""` for the VNF-level row.
    pub vnfc_id: String,
    /// Nova server id when last observed.
    pub server_id: Option<String>,
    /// When that server was first seen (start of the startup grace).
    pub server_since: Option<String>,
    /// Consecutive failed cloud observations.
    pub cloud_failures: i64,
    /// Time of the first of them.
    pub cloud_first_failure_at: Option<String>,
    /// Consecutive failed probes.
    pub probe_failures: i64,
    /// Time of the first of them.
    pub probe_first_failure_at: Option<String>,
    /// Start of the current healthy stretch.
    pub healthy_since: Option<String>,
    /// Automatic heals since the retry budget was last reset.
    pub heal_attempts: i64,
    /// Time of the last automatic heal.
    pub last_heal_at: Option<String>,
    /// Kind and reason of the last decision recorded.
    pub last_decision: Option<String>,
    /// VNF row: JSON array of Bound PersistentVolume names.
    pub pv_bound: Option<String>,
    /// VNF row: when `pv_bound` was observed.
    pub pv_observed_at: Option<String>,
}

const STATE_COLUMNS: &str = "vnf_instance_id, vnfc_id, server_id, server_since, cloud_failures, \
    cloud_first_failure_at, probe_failures, probe_first_failure_at, healthy_since, heal_attempts, \
    last_heal_at, last_decision, pv_bound, pv_observed_at";

fn state_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReconcileStateRow> {
    Ok(ReconcileStateRow {
        vnf_instance_id: r.get(0)?,
        vnfc_id: r.get(1)?,
        server_id: r.get(2)?,
        server_since: r.get(3)?,
        cloud_failures: r.get(4)?,
        cloud_first_failure_at: r.get(5)?,
        probe_failures: r.get(6)?,
        probe_first_failure_at: r.get(7)?,
        healthy_since: r.get(8)?,
        heal_attempts: r.get(9)?,
        last_heal_at: r.get(10)?,
        last_decision: r.get(11)?,
        pv_bound: r.get(12)?,
        pv_observed_at: r.get(13)?,
    })
}

impl ReaderRef<'_> {
    /// Every `reconcile_state` row, keyed by `(vnf_instance_id, vnfc_id)`.
    pub fn reconcile_states(&self) -> Result<HashMap<(String, String), ReconcileStateRow>> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {STATE_COLUMNS} FROM reconcile_state"))?;
        let rows = st.query_map([], state_from_row)?;
        let mut out = HashMap::new();
        for r in rows {
            let r = r?;
            out.insert((r.vnf_instance_id.clone(), r.vnfc_id.clone()), r);
        }
        Ok(out)
    }

    /// Ids of operations not in a final state (`COMPLETED`, `FAILED`, `ROLLED_BACK`), by VNF
    /// instance, in arrival order. One query for all instances.
    pub fn unfinished_operations_by_instance(&self) -> Result<HashMap<String, Vec<String>>> {
        let mut st = self.conn.prepare(
            "SELECT vnf_instance_id, id FROM vnf_lcm_op_occ
             WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK') ORDER BY seq",
        )?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for r in rows {
            let (vnf, op) = r?;
            out.entry(vnf).or_default().push(op);
        }
        Ok(out)
    }

    /// `operation_params` (the InstantiateVnfRequest, JSON text) of the instance's last
    /// `COMPLETED` INSTANTIATE, if any: the intended state the loop compares against.
    pub fn last_completed_instantiate(&self, vnf_instance_id: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT operation_params FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1
                 AND operation = 'INSTANTIATE' AND operation_state = 'COMPLETED'
                 ORDER BY seq DESC LIMIT 1",
                [vnf_instance_id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// `updated_at` of every VNFC (RFC 3339), by vnfc id: the engine rewrites the row when it
    /// records a new server, so this is when the current server was recorded.
    pub fn vnfc_updated_at(&self) -> Result<HashMap<String, String>> {
        let mut st = self.conn.prepare("SELECT id, updated_at FROM vnfc")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Id of the instance's most recent automatic HEAL (`is_automatic_invocation = 1`), if any.
    pub fn last_automatic_heal(&self, vnf_instance_id: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1 AND operation = 'HEAL'
                 AND is_automatic_invocation = 1 ORDER BY seq DESC LIMIT 1",
                [vnf_instance_id],
                |r| r.get(0),
            )
            .optional()?)
    }
}

impl Tx<'_> {
    /// Inserts or replaces one `reconcile_state` row.
    pub fn put_reconcile_state(&mut self, s: &ReconcileStateRow, now: Timestamp) -> Result<()> {
        self.tx.execute(
            &format!(
                "INSERT OR REPLACE INTO reconcile_state ({STATE_COLUMNS}, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
            ),
            params![
                s.vnf_instance_id,
                s.vnfc_id,
                s.server_id,
                s.server_since,
                s.cloud_failures,
                s.cloud_first_failure_at,
                s.probe_failures,
                s.probe_first_failure_at,
                s.healthy_since,
                s.heal_attempts,
                s.last_heal_at,
                s.last_decision,
                s.pv_bound,
                s.pv_observed_at,
                now.to_rfc3339()
            ],
        )?;
        Ok(())
    }

    /// Removes the memory of VNFCs of `vnf_instance_id` that no longer exist (keeps the VNF row).
    pub fn prune_reconcile_state(&mut self, vnf_instance_id: &str) -> Result<()> {
        self.tx.execute(
            "DELETE FROM reconcile_state WHERE vnf_instance_id = ?1 AND vnfc_id <> ''
             AND vnfc_id NOT IN (SELECT id FROM vnfc WHERE vnf_instance_id = ?1)",
            [vnf_instance_id],
        )?;
        Ok(())
    }
}
