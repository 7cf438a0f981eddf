//! SQL the engine needs: the step journal, VNFC records, instance lifecycle, and which
//! operations may run now.

use rusqlite::{OptionalExtension, params};

use super::decode::to_json;
use super::{NewEvent, OperationRow, ReaderRef, Result, StoreError, Tx, VnfcRow, collect_checked};
use vnfkeeper_core::model::{
    EventKind, InstantiationState, OpOccId, OperationState, StageKey, StepState, Timestamp,
    VnfInstanceId, VnfcId,
};
use vnfkeeper_core::plan::vnfcs::ObservedVnfc;

// WHERE terms of the partial indexes of migration V6, spelled exactly as there (SQLite uses a
// partial index only for a query with the index's WHERE term among its own terms). The tick's
// queries name their index with `INDEXED BY`: the planner would otherwise walk the whole table in
// `seq` order while most rows are still runnable, and any table later grows finished rows; with
// `INDEXED BY` a query whose index cannot serve it fails to prepare instead of scanning.
/// `op_unfinished`, for an operation aliased `i`.
const UNFINISHED_I: &str = "i.operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK')";
/// `op_runnable`.
const RUNNABLE: &str = "operation_state IN ('STARTING', 'PROCESSING', 'ROLLING_BACK')
   OR (operation_state = 'FAILED_TEMP' AND pending_task IS NOT NULL)";
/// `op_terminate_waiting`.
const TERMINATE_WAITING: &str = "operation = 'TERMINATE' AND operation_state = 'STARTING'";

/// [`ReaderRef::runnable_heads`]: runnable operations with nothing unfinished ahead of them.
fn runnable_heads_sql() -> String {
    format!(
        "SELECT {} FROM vnf_lcm_op_occ o INDEXED BY op_runnable WHERE ({RUNNABLE}) AND o.tacker_heal IS NULL AND NOT EXISTS (
             SELECT 1 FROM vnf_lcm_op_occ i WHERE i.vnf_instance_id = o.vnf_instance_id
             AND i.seq < o.seq AND {UNFINISHED_I}) ORDER BY seq",
        OperationRow::COLUMNS
    )
}

/// [`ReaderRef::terminations_waiting`].
fn terminations_waiting_sql() -> String {
    format!(
        "SELECT {} FROM vnf_lcm_op_occ o INDEXED BY op_terminate_waiting
         WHERE {TERMINATE_WAITING} AND EXISTS (
             SELECT 1 FROM vnf_lcm_op_occ i WHERE i.vnf_instance_id = o.vnf_instance_id
             AND i.seq < o.seq AND {UNFINISHED_I}) ORDER BY seq",
        OperationRow::COLUMNS
    )
}

/// [`ReaderRef::queue`].
fn queue_sql() -> String {
    format!(
        "SELECT {} FROM vnf_lcm_op_occ i WHERE i.vnf_instance_id = ?1 AND {UNFINISHED_I}
         ORDER BY seq",
        OperationRow::COLUMNS
    )
}

/// One `step_journal` row: how one stage of an operation's plan went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRow {
    /// The stage's stable key in the plan, e.g. `k8s.install@<vnfcInstanceId>`.
    pub stage_key: StageKey,
    /// 1-based position of the stage in the plan.
    pub step_no: i64,
    /// Step name, e.g. `storage.mount`.
    pub name: String,
    /// VNFC the step ran on (empty for cloud steps).
    pub host: String,
    /// Where the stage is.
    pub state: StepState,
    /// Attempts so far.
    pub attempts: i64,
    /// When the last attempt started (`None`: not yet).
    pub started_at: Option<Timestamp>,
    /// When the stage finished (DONE, SKIPPED or FAILED; `None` while pending or running).
    pub finished_at: Option<Timestamp>,
    /// Remote exit status of the last attempt.
    pub exit_status: Option<i64>,
    /// What the check found, or the masked stderr tail of a failure.
    pub detail: Option<String>,
}

/// `(id, operation_params, vnf_package, operation_secrets)` of an operation, as stored.
type StoredRequest = (String, String, Option<String>, Option<Vec<u8>>);

impl ReaderRef<'_> {
    /// The journal of an operation, in plan order. Errors: [`super::StoreError::Corrupt`] for a
    /// state outside the schema's list.
    pub fn journal(&self, op_id: &OpOccId) -> Result<Vec<JournalRow>> {
        let mut st = self.conn.prepare(
            "SELECT stage_key, step_no, name, host, state, attempts, exit_status, detail,
                    started_at, finished_at
             FROM step_journal WHERE vnf_lcm_op_occ_id = ?1 ORDER BY step_no, stage_key",
        )?;
        let rows = st.query_map([op_id.as_str()], |r| {
            let key: String = r.get(0)?;
            let state: String = r.get(4)?;
            let Some(state) = StepState::parse(&state) else {
                return Ok(Err(corrupt_state(op_id.as_str(), &key, state)));
            };
            let row = format!("{op_id}/{key}");
            let c = super::decode::Cells::new("step_journal", &row);
            let started_at = match c.opt_time("started_at", r.get(8)?) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            let finished_at = match c.opt_time("finished_at", r.get(9)?) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            Ok(Ok(JournalRow {
                started_at,
                finished_at,
                stage_key: StageKey::from(key),
                step_no: r.get(1)?,
                name: r.get(2)?,
                host: r.get(3)?,
                state,
                attempts: r.get(5)?,
                exit_status: r.get(6)?,
                detail: r.get(7)?,
            }))
        })?;
        collect_checked(rows)
    }

    /// Keys of the stages of `op_id` journaled DONE.
    pub fn done_stages(&self, op_id: &OpOccId) -> Result<std::collections::BTreeSet<StageKey>> {
        let mut st = self.conn.prepare(
            "SELECT stage_key FROM step_journal WHERE vnf_lcm_op_occ_id = ?1 AND state = 'DONE'",
        )?;
        let rows = st.query_map([op_id.as_str()], |r| {
            r.get::<_, String>(0).map(StageKey::from)
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Up to `limit` queue heads the engine can run now, oldest first: `STARTING`, `PROCESSING`
    /// or `ROLLING_BACK` (interrupted), or `FAILED_TEMP` with a pending RETRY or ROLLBACK; skipping the VNF instances in `busy` (an operation of theirs is in flight).
    ///
    /// Cost: the rows of the partial index `op_runnable` (migration V6) visited until `limit` are
    /// found, each with one probe of `op_unfinished` for "is it the head?": finished operations
    /// and FAILED_TEMP ones waiting for an operator are never visited.
    pub fn runnable_heads(
        &self,
        limit: usize,
        busy: &std::collections::HashSet<VnfInstanceId>,
    ) -> Result<Vec<OperationRow>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let mut st = self.conn.prepare_cached(&runnable_heads_sql())?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let vnf: String = r.get("vnf_instance_id")?;
            if busy.contains(vnf.as_str()) {
                continue;
            }
            out.push(OperationRow::from_row(r)??);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// TERMINATEs in `STARTING` with an unfinished operation of their VNF instance ahead of them
    /// (the candidates of `plan::terminate::supersedes_ahead`), oldest first. Cost: the rows of
    /// the partial index `op_terminate_waiting` (migration V6), one `op_unfinished` probe each.
    pub fn terminations_waiting(&self) -> Result<Vec<OperationRow>> {
        let mut st = self.conn.prepare_cached(&terminations_waiting_sql())?;
        let rows = st.query_map([], OperationRow::from_row)?;
        collect_checked(rows)
    }

    /// The queue of a VNF instance: its operations not in a final state, oldest first (the
    /// first is the head). Served by the partial index `op_unfinished`.
    pub fn queue(&self, vnf_instance_id: &VnfInstanceId) -> Result<Vec<OperationRow>> {
        let mut st = self.conn.prepare_cached(&queue_sql())?;
        let rows = st.query_map([vnf_instance_id.as_str()], OperationRow::from_row)?;
        collect_checked(rows)
    }

    /// The request body (JSON text, with its secrets decrypted and put back) and package path
    /// of an operation. Errors: [`StoreError::SecretsKey`] when the body holds secrets and this
    /// reader has no key (the CLI's read-only connection).
    pub fn operation_params(&self, op_id: &OpOccId) -> Result<Option<(String, Option<String>)>> {
        let row: Option<(String, Option<String>, Option<Vec<u8>>)> = self
            .conn
            .query_row(
                "SELECT operation_params, vnf_package, operation_secrets FROM vnf_lcm_op_occ WHERE id = ?1",
                [op_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        row.map(|(params, pkg, sealed)| {
            Ok((
                super::secrets::join(self.key, op_id.as_str(), params, sealed)?,
                pkg,
            ))
        })
        .transpose()
    }

    /// The plan an operation recorded with [`Tx::set_operation_plan`], if any.
    pub fn operation_plan(&self, op_id: &OpOccId) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT plan FROM vnf_lcm_op_occ WHERE id = ?1",
                [op_id.as_str()],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }

    /// The request bodies of the instance's COMPLETED CHANGE_EXT_CONN operations that came after
    /// its last COMPLETED INSTANTIATE, in arrival order (secrets put back as in
    /// [`Self::operation_params`]): the changes to apply to that INSTANTIATE's external VLs.
    pub fn ext_conn_changes(&self, vnf_instance_id: &VnfInstanceId) -> Result<Vec<String>> {
        let mut st = self.conn.prepare(
            "SELECT id, operation_params, vnf_package, operation_secrets FROM vnf_lcm_op_occ
             WHERE vnf_instance_id = ?1 AND operation = 'CHANGE_EXT_CONN'
               AND operation_state = 'COMPLETED'
               AND seq > (SELECT COALESCE(MAX(seq), 0) FROM vnf_lcm_op_occ
                          WHERE vnf_instance_id = ?1 AND operation = 'INSTANTIATE'
                            AND operation_state = 'COMPLETED')
             ORDER BY seq",
        )?;
        let rows = st.query_map([vnf_instance_id.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, params, _pkg, sealed): StoredRequest = row?;
            out.push(super::secrets::join(self.key, &id, params, sealed)?);
        }
        Ok(out)
    }

    /// The request and package of the instance's last COMPLETED INSTANTIATE: what its cluster
    /// looks like (roles, credentials, install script) for SCALE and HEAL. Secrets are put back
    /// as in [`Self::operation_params`].
    pub fn instantiate_request(
        &self,
        vnf_instance_id: &VnfInstanceId,
    ) -> Result<Option<(String, Option<String>)>> {
        let row: Option<StoredRequest> = self
            .conn
            .query_row(
                "SELECT id, operation_params, vnf_package, operation_secrets FROM vnf_lcm_op_occ
                 WHERE vnf_instance_id = ?1 AND operation = 'INSTANTIATE' AND operation_state = 'COMPLETED'
                 ORDER BY seq DESC LIMIT 1",
                [vnf_instance_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        row.map(|(id, params, pkg, sealed)| {
            Ok((super::secrets::join(self.key, &id, params, sealed)?, pkg))
        })
        .transpose()
    }

    /// N of "step k/N" for an operation, once planned.
    pub fn steps_total(&self, op_id: &OpOccId) -> Result<Option<i64>> {
        Ok(self
            .conn
            .query_row(
                "SELECT steps_total FROM vnf_lcm_op_occ WHERE id = ?1",
                [op_id.as_str()],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }
}

impl Tx<'_> {
    /// Journals that the stage `key` (position `step_no`, step `name` on `host`) starts
    /// (attempt + 1).
    pub fn journal_start(
        &mut self,
        op_id: &OpOccId,
        key: &StageKey,
        step_no: i64,
        name: &str,
        host: &str,
        now: Timestamp,
    ) -> Result<()> {
        self.tx.execute(
            "INSERT INTO step_journal (vnf_lcm_op_occ_id, stage_key, step_no, name, host, state, attempts, started_at, epoch)
             VALUES (?1, ?2, ?3, ?4, ?5, 'STARTED', 1, ?6, ?7)
             ON CONFLICT (vnf_lcm_op_occ_id, stage_key) DO UPDATE
             SET state = 'STARTED', attempts = attempts + 1, step_no = ?3, started_at = ?6,
                 finished_at = NULL, epoch = ?7",
            params![
                op_id.as_str(),
                key.as_str(),
                step_no,
                name,
                host,
                now.to_rfc3339(),
                self.epoch.map(|e| e.0)
            ],
        )?;
        Ok(())
    }

    /// Journals how the stage `key` ended, with exit status and detail.
    pub fn journal_finish(
        &mut self,
        op_id: &OpOccId,
        key: &StageKey,
        state: StepState,
        exit_status: Option<u32>,
        detail: &str,
        now: Timestamp,
    ) -> Result<()> {
        self.tx.execute(
            "UPDATE step_journal SET state = ?3, exit_status = ?4, detail = ?5, finished_at = ?6,
                 epoch = COALESCE(?7, epoch)
             WHERE vnf_lcm_op_occ_id = ?1 AND stage_key = ?2",
            params![
                op_id.as_str(),
                key.as_str(),
                state.as_str(),
                exit_status,
                detail,
                now.to_rfc3339(),
                self.epoch.map(|e| e.0)
            ],
        )?;
        Ok(())
    }

    /// Forgets the journal of an operation (ROLLBACK, or a RETRY that must re-plan).
    pub fn journal_clear(&mut self, op_id: &OpOccId) -> Result<()> {
        self.tx.execute(
            "DELETE FROM step_journal WHERE vnf_lcm_op_occ_id = ?1",
            [op_id.as_str()],
        )?;
        Ok(())
    }

    /// Records how many steps the operation's plan has (the N of "step k/N").
    pub fn set_steps_total(&mut self, op_id: &OpOccId, total: i64) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET steps_total = ?2, epoch = COALESCE(?3, epoch) WHERE id = ?1",
            params![op_id.as_str(), total, self.epoch.map(|e| e.0)],
        )?;
        Ok(())
    }

    /// What the operation is doing now (shown by `vnfkeeper ops`).
    pub fn set_status_detail(&mut self, op_id: &OpOccId, detail: &str) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET status_detail = ?2, epoch = COALESCE(?3, epoch) WHERE id = ?1",
            params![op_id.as_str(), detail, self.epoch.map(|e| e.0)],
        )?;
        Ok(())
    }

    /// Records the Heat stack of an instance.
    pub fn set_instance_stack(
        &mut self,
        id: &VnfInstanceId,
        stack_name: &str,
        stack_id: Option<&str>,
        now: Timestamp,
    ) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_instance SET stack_name = ?2, stack_id = ?3, updated_at = ?4 WHERE id = ?1",
            params![id.as_str(), stack_name, stack_id, now.to_rfc3339()],
        )?;
        Ok(())
    }

    /// Sets `instantiationState` (and, for INSTANTIATED, the flavour and package).
    pub fn set_instantiation_state(
        &mut self,
        id: &VnfInstanceId,
        state: InstantiationState,
        flavour_id: Option<&str>,
        vnf_package: Option<&str>,
        now: Timestamp,
    ) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_instance SET instantiation_state = ?2, flavour_id = COALESCE(?3, flavour_id),
                 vnf_package = COALESCE(?4, vnf_package), updated_at = ?5 WHERE id = ?1",
            params![id.as_str(), state.as_str(), flavour_id, vnf_package, now.to_rfc3339()],
        )?;
        Ok(())
    }

    /// Ends an operation queued or running ahead of a TERMINATE that no longer waits for it:
    /// `STARTING`/`PROCESSING`/`ROLLING_BACK` → `FAILED_TEMP` → `FAILED`, `FAILED_TEMP` → `FAILED`,
    /// with a ProblemDetails (409) naming the TERMINATE and an audit event. Other states: nothing.
    pub fn supersede(
        &mut self,
        op_id: &OpOccId,
        terminate_id: &OpOccId,
        why: &str,
        now: Timestamp,
    ) -> Result<()> {
        let Some(op) = self.reader().operation(op_id)? else {
            return Ok(());
        };
        let detail = format!("superseded by TERMINATE {terminate_id}: {why}");
        let problem = vnfkeeper_core::model::ProblemDetails::new(409, detail.clone(), Vec::new());
        let json = to_json("error", &problem)?;
        let path: &[OperationState] = match op.operation_state {
            OperationState::Starting | OperationState::Processing | OperationState::RollingBack => {
                &[OperationState::FailedTemp, OperationState::Failed]
            }
            OperationState::FailedTemp => &[OperationState::Failed],
            _ => &[],
        };
        for to in path {
            let from = self.set_operation_state(op_id.as_str(), *to, Some(&json), now)?;
            self.set_status_detail(op_id, &detail)?;
            let message = format!("{} {from} → {to}: {detail}", op.operation);
            self.append_event(
                &NewEvent {
                    kind: EventKind::StateChanged,
                    vnf_instance_id: Some(&op.vnf_instance_id),
                    vnf_lcm_op_occ_id: Some(op_id),
                    vnfc_id: None,
                    message: &message,
                    evidence: Some(&json),
                },
                now,
            )?;
        }
        Ok(())
    }

    /// Records the operation's plan (JSON) once; a later call keeps the first (resume and RETRY
    /// must follow the same plan).
    pub fn set_operation_plan(&mut self, op_id: &OpOccId, plan: &str) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET plan = ?2, epoch = COALESCE(?3, epoch)
             WHERE id = ?1 AND plan IS NULL",
            params![op_id.as_str(), plan, self.epoch.map(|e| e.0)],
        )?;
        Ok(())
    }

    /// Replaces the operation's plan (JSON). Only for a plan that grows: the executor storing
    /// the expansion of a flavour hook's placeholder, and a plan stored by an earlier version
    /// without stages getting them. Every decision already in the plan is kept by the caller.
    pub fn replace_operation_plan(&mut self, op_id: &OpOccId, plan: &str) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET plan = ?2, epoch = COALESCE(?3, epoch) WHERE id = ?1",
            params![op_id.as_str(), plan, self.epoch.map(|e| e.0)],
        )?;
        Ok(())
    }

    /// Records the scale level of each aspect (`scaleStatus`), replacing what was there; `None`
    /// clears it (TERMINATE).
    pub fn set_scale_status(
        &mut self,
        id: &VnfInstanceId,
        scale_status: Option<&std::collections::BTreeMap<String, u32>>,
        now: Timestamp,
    ) -> Result<()> {
        let text = scale_status
            .map(|s| to_json("scale_status", s))
            .transpose()?;
        self.tx.execute(
            "UPDATE vnf_instance SET scale_status = ?2, updated_at = ?3 WHERE id = ?1",
            params![id.as_str(), text, now.to_rfc3339()],
        )?;
        Ok(())
    }

    /// Records the observed VNFCs of an instance: existing rows (same owning stack and resource)
    /// keep their id and pinned host key unless the server changed; new ones get a new id;
    /// rows no longer observed are deleted. `vnfc_index` and `parameters` are written as
    /// observed (individual VNFC management; `NULL` otherwise). Returns the rows as stored.
    pub fn sync_vnfcs(
        &mut self,
        vnf_instance_id: &VnfInstanceId,
        observed: &[ObservedVnfc],
        now: Timestamp,
    ) -> Result<Vec<VnfcRow>> {
        let now = now.to_rfc3339();
        let mut keep = Vec::new();
        for o in observed {
            let existing: Option<(String, Option<String>)> = self
                .tx
                .query_row(
                    "SELECT id, server_id FROM vnfc WHERE vnf_instance_id = ?1 AND stack_id = ?2 AND resource_name = ?3",
                    params![vnf_instance_id.as_str(), o.stack_id, o.resource_name],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let ip = o.cp_addresses.values().next().cloned();
            // A shared address (a VIP in the ports' allowed_address_pairs) and a floating
            // address (by its OS::Neutron::FloatingIP resource name) are recorded with the
            // CPs, never as the VNFC's own address; a CP's own name wins a clash.
            let mut all = o.shared_addresses.clone();
            all.extend(o.floating_addresses.clone());
            all.extend(o.cp_addresses.clone());
            let cps = to_json("cp_addresses", &all)?;
            let vols = to_json("volumes", &o.volumes)?;
            let index = o.index.map(i64::from);
            let parameters = o.parameters.as_ref().map(|p| p.to_string());
            let id = match existing {
                Some((id, server)) => {
                    // A new server behind the same resource (heal) has a new host key.
                    let replaced = server.as_deref() != Some(o.server_id.as_str());
                    self.tx.execute(
                        "UPDATE vnfc SET server_id = ?2, server_status = ?3, ip_address = ?4, cp_addresses = ?5,
                             volumes = ?6, host_key = CASE WHEN ?7 THEN NULL ELSE host_key END, updated_at = ?8,
                             server_status_at = ?8, vnfc_index = ?9, parameters = ?10
                         WHERE id = ?1",
                        params![id, o.server_id, o.server_status, ip, cps, vols, replaced, now, index, parameters],
                    )?;
                    id
                }
                None => {
                    let id = uuid::Uuid::new_v4().to_string();
                    self.tx.execute(
                        "INSERT INTO vnfc (id, vnf_instance_id, vdu_id, stack_name, stack_id, resource_name, server_id,
                             server_status, ip_address, cp_addresses, volumes, created_at, updated_at,
                             server_status_at, vnfc_index, parameters)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?12, ?13, ?14)",
                        params![
                            id.as_str(), vnf_instance_id.as_str(), o.vdu_id, o.stack_name, o.stack_id, o.resource_name,
                            o.server_id, o.server_status, ip, cps, vols, now, index, parameters
                        ],
                    )?;
                    id
                }
            };
            keep.push(VnfcId::from(id));
        }
        let all: Vec<VnfcId> = self
            .reader()
            .vnfcs(vnf_instance_id)?
            .into_iter()
            .map(|v| v.id)
            .collect();
        for id in all.iter().filter(|id| !keep.contains(id)) {
            self.tx
                .execute("DELETE FROM vnfc WHERE id = ?1", [id.as_str()])?;
        }
        self.reader().vnfcs(vnf_instance_id)
    }

    /// Deletes every VNFC row of an instance (terminate, rollback).
    pub fn delete_vnfcs(&mut self, vnf_instance_id: &VnfInstanceId) -> Result<()> {
        self.tx.execute(
            "DELETE FROM vnfc WHERE vnf_instance_id = ?1",
            [vnf_instance_id.as_str()],
        )?;
        Ok(())
    }
}

fn corrupt_state(op_id: &str, key: &str, value: String) -> StoreError {
    StoreError::Corrupt {
        table: "step_journal",
        row: format!("{op_id}/{key}"),
        column: "state",
        reason: format!("`{value}` is not a step state"),
    }
}

#[cfg(test)]
mod scheduler_tests {
    use std::collections::HashSet;

    use super::*;
    use crate::store::{NewOperation, RequestBody, Store};
    use vnfkeeper_core::model::{LcmOperationType, PendingTask};

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-24T03:00:00Z").unwrap()
    }

    fn add(store: &mut Store, vnf: &str, id: &str, op: LcmOperationType) {
        store
            .write(|tx| {
                tx.create_instance_if_missing(&VnfInstanceId::from(vnf), now())?;
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from(id),
                        vnf_instance_id: &VnfInstanceId::from(vnf),
                        operation: op,
                        operation_params: &RequestBody::split(op, "{}"),
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    now(),
                )
            })
            .unwrap();
    }

    fn to(store: &mut Store, id: &str, states: &[OperationState]) {
        for s in states {
            store
                .write(|tx| tx.set_operation_state(id, *s, None, now()))
                .unwrap();
        }
    }

    fn ids(rows: &[crate::store::OperationRow]) -> Vec<&str> {
        rows.iter().map(|r| r.id.as_str()).collect()
    }

    /// The plan SQLite chooses for `sql`, one detail line per step.
    fn plan(store: &Store, sql: &str) -> Vec<String> {
        let mut st = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let rows = st.query_map([], |r| r.get::<_, String>(3)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    #[test]
    fn the_ticks_queries_are_served_by_the_partial_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        // Some rows, and statistics, so that the planner has real choices to make.
        for i in 0..200 {
            add(
                &mut store,
                &format!("vnf-{}", i % 50),
                &format!("op-{i}"),
                LcmOperationType::Scale,
            );
        }
        store.conn.execute_batch("ANALYZE").unwrap();
        let queue = queue_sql().replace("?1", "'vnf-1'");
        let counts = "SELECT COUNT(*) FROM vnf_lcm_op_occ i INDEXED BY op_unfinished \
                      WHERE i.operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK')";
        let cases = [
            (runnable_heads_sql(), "op_runnable"),
            (terminations_waiting_sql(), "op_terminate_waiting"),
            (queue, "op_unfinished"),
            (counts.to_owned(), "op_unfinished"),
        ];
        for (sql, index) in cases {
            let plan = plan(&store, &sql);
            assert!(
                plan.iter().any(|d| d.contains(&format!("INDEX {index}"))),
                "{index} not used: {plan:?}"
            );
            for d in &plan {
                let scan = d.starts_with("SCAN ") && !d.contains(" INDEX ");
                assert!(!scan, "full scan of vnf_lcm_op_occ in {plan:?} for {sql}");
                assert!(
                    !d.contains("TEMP B-TREE"),
                    "sort step in {plan:?} for {sql}"
                );
            }
            // The head check is an index search, not a loop over the instance's rows.
            if sql.contains("NOT EXISTS") || sql.contains(" EXISTS") {
                assert!(
                    plan.iter()
                        .any(|d| d.starts_with("SEARCH i ") && d.contains("INDEX op_unfinished")),
                    "{plan:?}"
                );
            }
        }
    }

    /// `vnfkeeper status` on a long history: its two queries read indexes, never the whole
    /// operation table, and give each instance's unfinished count and newest operation.
    #[test]
    fn status_summaries_come_from_indexes_with_counts_and_the_newest_operation() {
        use LcmOperationType::{Heal, Instantiate, Scale};
        use OperationState::{Completed, FailedTemp, Processing};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        for i in 0..200 {
            let id = format!("old-{i}");
            add(&mut store, &format!("vnf-{}", i % 50), &id, Heal);
            to(&mut store, &id, &[Processing, Completed]);
        }
        add(&mut store, "a", "a1", Instantiate);
        to(&mut store, "a1", &[Processing, Completed]);
        add(&mut store, "a", "a2", Scale);
        to(&mut store, "a2", &[Processing, FailedTemp]);
        add(&mut store, "a", "a3", Heal);
        add(&mut store, "b", "b1", Instantiate);
        to(&mut store, "b1", &[Processing, Completed]);
        store
            .write(|tx| tx.create_instance_if_missing(&VnfInstanceId::from("c"), now()))
            .unwrap();
        store.conn.execute_batch("ANALYZE").unwrap();
        for sql in [
            crate::store::UNFINISHED_BY_INSTANCE_SQL.to_owned(),
            crate::store::newest_operations_sql(),
        ] {
            let plan = plan(&store, &sql);
            for d in &plan {
                let scan_ops = d.starts_with("SCAN ") && !d.contains(" INDEX ");
                assert!(
                    !scan_ops,
                    "full scan of vnf_lcm_op_occ in {plan:?} for {sql}"
                );
            }
        }
        let s = store.reader().operation_summaries().unwrap();
        assert_eq!(s["a"].unfinished, 2);
        assert_eq!(s["a"].last.id, "a3");
        assert_eq!(s["b"].unfinished, 0);
        assert_eq!(s["b"].last.id, "b1");
        assert!(
            !s.contains_key("c"),
            "an instance without operations has no summary"
        );
        assert_eq!(s["vnf-7"].last.id, "old-157");
        assert_eq!(s.len(), 52);
    }

    #[test]
    fn runnable_heads_skip_stuck_finished_busy_and_queued_behind() {
        use LcmOperationType::{Instantiate, Scale, Terminate};
        use OperationState::{Completed, FailedTemp, Processing};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        add(&mut store, "a", "a1", Instantiate); // STARTING head: runnable
        add(&mut store, "b", "b1", Instantiate); // FAILED_TEMP, nothing pending: blocks b2
        to(&mut store, "b1", &[Processing, FailedTemp]);
        add(&mut store, "b", "b2", Scale);
        add(&mut store, "c", "c1", Instantiate); // FAILED_TEMP with RETRY pending: runnable
        to(&mut store, "c1", &[Processing, FailedTemp]);
        store
            .write(|tx| tx.set_pending_task(&OpOccId::from("c1"), PendingTask::Retry))
            .unwrap();
        add(&mut store, "d", "d1", Instantiate); // PROCESSING (interrupted): runnable
        to(&mut store, "d1", &[Processing]);
        add(&mut store, "e", "e1", Instantiate); // COMPLETED, then a SCALE: the SCALE is head
        to(&mut store, "e1", &[Processing, Completed]);
        add(&mut store, "e", "e2", Scale);
        add(&mut store, "f", "f1", Scale); // a TERMINATE waits behind a SCALE
        add(&mut store, "f", "f2", Terminate);
        add(&mut store, "g", "g1", Terminate); // a TERMINATE at the head waits for nothing

        let r = store.reader();
        let none = HashSet::new();
        assert_eq!(
            ids(&r.runnable_heads(10, &none).unwrap()),
            ["a1", "c1", "d1", "e2", "f1", "g1"]
        );
        assert_eq!(ids(&r.runnable_heads(2, &none).unwrap()), ["a1", "c1"]);
        assert!(r.runnable_heads(0, &none).unwrap().is_empty());
        let busy: HashSet<VnfInstanceId> = ["a".into(), "d".into()].into();
        assert_eq!(
            ids(&r.runnable_heads(3, &busy).unwrap()),
            ["c1", "e2", "f1"]
        );
        assert_eq!(ids(&r.terminations_waiting().unwrap()), ["f2"]);
        assert_eq!(
            ids(&r.queue(&VnfInstanceId::from("b")).unwrap()),
            ["b1", "b2"]
        );
        assert_eq!(ids(&r.queue(&VnfInstanceId::from("e")).unwrap()), ["e2"]);
        assert_eq!(r.counts().unwrap(), (7, 9));
    }
}
