//! SQL of the one-object views, `vnfkeeper status VNF` and `vnfkeeper ops show ID`: the newest
//! reconcile decision of each VNFC of an instance (from the audit trail, `event`, migration V1)
//! and an operation's stored request and plan as the store keeps them (secrets already
//! replaced by `"***"`, migration V5; never joined with the sealed secrets here).

use std::collections::BTreeMap;

use rusqlite::OptionalExtension;
use serde_json::Value;

use super::decode::Cells;
use super::{ReaderRef, Result, collect_checked};
use vnfkeeper_core::model::Timestamp;

/// The newest decision reconcile recorded about one VNFC (or, with `vnfc_id` `None`, about
/// the VNF as a whole): an event of kind `RECONCILE_*` or `TACKER_HEAL_*`.
#[derive(Debug, Clone, PartialEq)]
pub struct LastDecision {
    /// vnfcInstanceId the decision is about; `None` for a VNF-level decision.
    pub vnfc_id: Option<String>,
    /// When it was recorded.
    pub at: Timestamp,
    /// The event kind, e.g. `RECONCILE_HEAL_STARTED`, `RECONCILE_DEFERRED_GRACE`.
    pub kind: String,
    /// The reason, one line (the event's message).
    pub reason: String,
    /// The HEAL operation it queued, for `RECONCILE_HEAL_STARTED`.
    pub vnf_lcm_op_occ_id: Option<String>,
    /// The facts behind it (`pass`, `role`, `cloud`, `probes`, `counters`), as recorded.
    pub evidence: Option<Value>,
}

const LAST_DECISIONS_SQL: &str = "SELECT e.id, e.vnfc_id, e.at, e.kind, e.message, \
     e.vnf_lcm_op_occ_id, e.evidence FROM event e
     WHERE e.id IN (SELECT MAX(id) FROM event
                    WHERE vnf_instance_id = ?1
                      AND (kind LIKE 'RECONCILE\\_%' ESCAPE '\\' OR kind LIKE 'TACKER\\_HEAL\\_%' ESCAPE '\\')
                    GROUP BY vnfc_id)
     ORDER BY e.id";

impl ReaderRef<'_> {
    /// The newest reconcile decision per VNFC of `vnf_instance_id` (key `None`: the VNF-level
    /// one), read through the index `event_by_instance`. Errors: the store's; an evidence that
    /// is not JSON is `StoreError::Corrupt`.
    pub fn last_decisions(
        &self,
        vnf_instance_id: &str,
    ) -> Result<BTreeMap<Option<String>, LastDecision>> {
        let mut st = self.conn.prepare(LAST_DECISIONS_SQL)?;
        let rows = st.query_map([vnf_instance_id], |r| {
            let id: i64 = r.get(0)?;
            let at: String = r.get(2)?;
            let evidence: Option<String> = r.get(6)?;
            let vnfc_id: Option<String> = r.get(1)?;
            let kind: String = r.get(3)?;
            let reason: String = r.get(4)?;
            let op: Option<String> = r.get(5)?;
            Ok((|| {
                let key = id.to_string();
                let c = Cells::new("event", &key);
                Ok(LastDecision {
                    vnfc_id,
                    at: c.time("at", &at)?,
                    kind,
                    reason,
                    vnf_lcm_op_occ_id: op,
                    evidence: c.json("evidence", evidence, "a JSON object")?,
                })
            })())
        })?;
        Ok(collect_checked(rows)?
            .into_iter()
            .map(|d| (d.vnfc_id.clone(), d))
            .collect())
    }

    /// An operation's request body exactly as stored in `operation_params` (every secret
    /// replaced by `"***"` since migration V5; the sealed secrets are not read) and its stored
    /// plan (JSON `{"stages": […], …}`), if it has one. `None`: no such operation.
    pub fn stored_request(&self, op_id: &str) -> Result<Option<(String, Option<String>)>> {
        Ok(self
            .conn
            .query_row(
                "SELECT operation_params, plan FROM vnf_lcm_op_occ WHERE id = ?1",
                [op_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// The intake record that created operation `op_id` (outcome `ACCEPTED`), if it came from
    /// the spool.
    pub fn intake_of_operation(&self, op_id: &str) -> Result<Option<super::IntakeRow>> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {} FROM intake WHERE vnf_lcm_op_occ_id = ?1 AND outcome = 'ACCEPTED' \
             ORDER BY id LIMIT 1",
            super::IntakeRow::COLUMNS
        ))?;
        let rows = st.query_map([op_id], super::IntakeRow::from_row)?;
        Ok(collect_checked(rows)?.into_iter().next())
    }

    /// When each VNFC's Nova status was last read, by vnfcInstanceId: `vnfc.server_status_at`
    /// (the engine's read or a change reconcile saw), `updated_at` on rows older than that
    /// column.
    pub fn vnfc_synced_at(&self, vnf_instance_id: &str) -> Result<BTreeMap<String, Timestamp>> {
        let mut st = self.conn.prepare(
            "SELECT id, COALESCE(server_status_at, updated_at) FROM vnfc WHERE vnf_instance_id = ?1",
        )?;
        let rows = st.query_map([vnf_instance_id], |r| {
            let id: String = r.get(0)?;
            let at: String = r.get(1)?;
            Ok(Cells::new("vnfc", &id)
                .time("server_status_at", &at)
                .map(|t| (id.clone(), t)))
        })?;
        Ok(collect_checked(rows)?.into_iter().collect())
    }
}
