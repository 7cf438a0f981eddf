//! SQL the reconcile loop needs: what to observe (instantiated VNF instances, their
//! VNFCs and unfinished operations, the INSTANTIATE request that set their intended state) and the
//! loop's own memory, table `reconcile_state` (`migrations/V3__reconcile.sql`).

use std::collections::HashMap;

use rusqlite::{OptionalExtension, params};

use super::decode::{Cells, to_json};
use super::{ReaderRef, Result, Tx, collect_checked};
use vnfkeeper_core::model::{OpOccId, Timestamp, VnfInstanceId, VnfcId};
use vnfkeeper_core::wire::sol003::InstantiateVnfRequest;

/// One `reconcile_state` row: what the loop remembers about a VNFC (or, with `vnfc_id` empty,
/// about a VNF instance).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileStateRow {
    /// vnfInstanceId.
    pub vnf_instance_id: String,
    /// vnfcInstanceId, or `""` for the VNF-level row.
    pub vnfc_id: String,
    /// Nova server id when last observed.
    pub server_id: Option<String>,
    /// When that server was first seen (start of the startup grace).
    pub server_since: Option<Timestamp>,
    /// Consecutive failed cloud observations.
    pub cloud_failures: i64,
    /// Time of the first of them.
    pub cloud_first_failure_at: Option<Timestamp>,
    /// Consecutive failed probes.
    pub probe_failures: i64,
    /// Time of the first of them.
    pub probe_first_failure_at: Option<Timestamp>,
    /// Start of the current healthy stretch.
    pub healthy_since: Option<Timestamp>,
    /// Automatic heals since the retry budget was last reset.
    pub heal_attempts: i64,
    /// Time of the last automatic heal.
    pub last_heal_at: Option<Timestamp>,
    /// The last decision recorded, as the policy keys it for de-duplication (its event kind and
    /// its reason without digits); only compared for equality, never interpreted.
    pub last_decision: Option<String>,
    /// VNF row: names of the Bound PersistentVolumes (stored as a JSON array).
    pub pv_bound: Option<Vec<String>>,
    /// VNF row: when `pv_bound` was observed.
    pub pv_observed_at: Option<Timestamp>,
}

const STATE_COLUMNS: &str = "vnf_instance_id, vnfc_id, server_id, server_since, cloud_failures, \
    cloud_first_failure_at, probe_failures, probe_first_failure_at, healthy_since, heal_attempts, \
    last_heal_at, last_decision, pv_bound, pv_observed_at";

fn state_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<ReconcileStateRow>> {
    Ok(decode_state(r))
}

fn decode_state(r: &rusqlite::Row<'_>) -> Result<ReconcileStateRow> {
    let vnf_instance_id: String = r.get(0)?;
    let vnfc_id: String = r.get(1)?;
    let key = format!("({vnf_instance_id}, {vnfc_id})");
    let c = Cells::new("reconcile_state", &key);
    Ok(ReconcileStateRow {
        server_id: r.get(2)?,
        server_since: c.opt_time("server_since", r.get(3)?)?,
        cloud_failures: r.get(4)?,
        cloud_first_failure_at: c.opt_time("cloud_first_failure_at", r.get(5)?)?,
        probe_failures: r.get(6)?,
        probe_first_failure_at: c.opt_time("probe_first_failure_at", r.get(7)?)?,
        healthy_since: c.opt_time("healthy_since", r.get(8)?)?,
        heal_attempts: r.get(9)?,
        last_heal_at: c.opt_time("last_heal_at", r.get(10)?)?,
        last_decision: r.get(11)?,
        pv_bound: c.json("pv_bound", r.get(12)?, "a JSON array of strings")?,
        pv_observed_at: c.opt_time("pv_observed_at", r.get(13)?)?,
        vnf_instance_id,
        vnfc_id,
    })
}

impl ReaderRef<'_> {
    /// Every `reconcile_state` row, keyed by `(vnf_instance_id, vnfc_id)`.
    pub fn reconcile_states(&self) -> Result<HashMap<(String, String), ReconcileStateRow>> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {STATE_COLUMNS} FROM reconcile_state"))?;
        let rows = st.query_map([], state_from_row)?;
        Ok(collect_checked(rows)?
            .into_iter()
            .map(|r| ((r.vnf_instance_id.clone(), r.vnfc_id.clone()), r))
            .collect())
    }

    /// The reconcile memory row of one VNFC (`vnfc_id` `None`: the VNF's own row, stored under
    /// `""`), if recorded. A keyed read (primary key `(vnf_instance_id, vnfc_id)`), so recording
    /// a pass stays linear in the fleet.
    pub fn reconcile_state(
        &self,
        vnf_instance_id: &VnfInstanceId,
        vnfc_id: Option<&VnfcId>,
    ) -> Result<Option<ReconcileStateRow>> {
        let vnfc_id = vnfc_id.map_or("", VnfcId::as_str);
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {STATE_COLUMNS} FROM reconcile_state WHERE vnf_instance_id = ?1 AND vnfc_id = ?2"
        ))?;
        let rows = st.query_map(params![vnf_instance_id.as_str(), vnfc_id], state_from_row)?;
        Ok(collect_checked(rows)?.into_iter().next())
    }

    /// Ids of operations not in a final state (`COMPLETED`, `FAILED`, `ROLLED_BACK`), by VNF
    /// instance, in arrival order. One query for all instances.
    pub fn unfinished_operations_by_instance(
        &self,
    ) -> Result<HashMap<VnfInstanceId, Vec<OpOccId>>> {
        let mut st = self.conn.prepare(
            "SELECT vnf_instance_id, id FROM vnf_lcm_op_occ
             WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK') ORDER BY seq",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                VnfInstanceId::from(r.get::<_, String>(0)?),
                OpOccId::from(r.get::<_, String>(1)?),
            ))
        })?;
        let mut out: HashMap<VnfInstanceId, Vec<OpOccId>> = HashMap::new();
        for r in rows {
            let (vnf, op) = r?;
            out.entry(vnf).or_default().push(op);
        }
        Ok(out)
    }

    /// The InstantiateVnfRequest (`operation_params`) of the instance's last `COMPLETED`
    /// INSTANTIATE, if any: the intended state the loop compares against. Errors:
    /// [`StoreError::Corrupt`](super::StoreError::Corrupt) when the stored body is not an
    /// InstantiateVnfRequest (SOL003 §5.5.2.4).
    pub fn last_completed_instantiate(
        &self,
        vnf_instance_id: &VnfInstanceId,
    ) -> Result<Option<InstantiateVnfRequest>> {
        let row: Option<(String, String, Option<Vec<u8>>)> = self
            .conn
            .query_row(
                "SELECT id, operation_params, operation_secrets FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1
                 AND operation = 'INSTANTIATE' AND operation_state = 'COMPLETED'
                 ORDER BY seq DESC LIMIT 1",
                [vnf_instance_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((id, params, sealed)) = row else {
            return Ok(None);
        };
        let params = super::secrets::join(self.key, &id, params, sealed)?;
        Cells::new("vnf_lcm_op_occ", &id).json(
            "operation_params",
            Some(params),
            "an InstantiateVnfRequest",
        )
    }

    /// `updated_at` of every VNFC, by vnfc id: the engine rewrites the row when it records a new
    /// server, so this is when the current server was recorded.
    pub fn vnfc_updated_at(&self) -> Result<HashMap<String, Timestamp>> {
        let mut st = self.conn.prepare("SELECT id, updated_at FROM vnfc")?;
        let rows = st.query_map([], |r| {
            let (id, text): (String, String) = (r.get(0)?, r.get(1)?);
            Ok(Cells::new("vnfc", &id)
                .time("updated_at", &text)
                .map(|t| (id, t)))
        })?;
        Ok(collect_checked(rows)?.into_iter().collect())
    }

    /// Id of the instance's most recent automatic HEAL (`is_automatic_invocation = 1`), if any.
    pub fn last_automatic_heal(&self, vnf_instance_id: &VnfInstanceId) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1 AND operation = 'HEAL'
                 AND is_automatic_invocation = 1 ORDER BY seq DESC LIMIT 1",
                [vnf_instance_id.as_str()],
                |r| r.get(0),
            )
            .optional()?)
    }
}

impl Tx<'_> {
    /// Records the Nova status reconcile observed for `vnfc`'s server `server_id` (`vnfc.
    /// server_status`, `server_status_at`; `migrations/V22__vnfc_server_status_at.sql`), only
    /// while that server is still the one recorded: an engine step that replaced it since the
    /// pass's snapshot keeps its own. `updated_at` is left alone. Returns whether a row changed.
    pub fn observe_server_status(
        &mut self,
        vnfc: &VnfcId,
        server_id: &str,
        status: &str,
        now: Timestamp,
    ) -> Result<bool> {
        Ok(self.tx.execute(
            "UPDATE vnfc SET server_status = ?3, server_status_at = ?4
             WHERE id = ?1 AND server_id = ?2 AND server_status IS NOT ?3",
            params![vnfc.as_str(), server_id, status, now.to_rfc3339()],
        )? > 0)
    }

    /// Inserts or replaces one `reconcile_state` row.
    pub fn put_reconcile_state(&mut self, s: &ReconcileStateRow, now: Timestamp) -> Result<()> {
        let time = |t: Option<Timestamp>| t.map(Timestamp::to_rfc3339);
        let pv_bound = s
            .pv_bound
            .as_ref()
            .map(|b| to_json("pv_bound", b))
            .transpose()?;
        self.tx.execute(
            &format!(
                "INSERT OR REPLACE INTO reconcile_state ({STATE_COLUMNS}, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
            ),
            params![
                s.vnf_instance_id,
                s.vnfc_id,
                s.server_id,
                time(s.server_since),
                s.cloud_failures,
                time(s.cloud_first_failure_at),
                s.probe_failures,
                time(s.probe_first_failure_at),
                time(s.healthy_since),
                s.heal_attempts,
                time(s.last_heal_at),
                s.last_decision,
                pv_bound,
                time(s.pv_observed_at),
                now.to_rfc3339()
            ],
        )?;
        Ok(())
    }

    /// Removes the memory of VNFCs of `vnf_instance_id` that no longer exist (keeps the VNF row).
    pub fn prune_reconcile_state(&mut self, vnf_instance_id: &VnfInstanceId) -> Result<()> {
        self.tx.execute(
            "DELETE FROM reconcile_state WHERE vnf_instance_id = ?1 AND vnfc_id <> ''
             AND vnfc_id NOT IN (SELECT id FROM vnfc WHERE vnf_instance_id = ?1)",
            [vnf_instance_id.as_str()],
        )?;
        Ok(())
    }
}
