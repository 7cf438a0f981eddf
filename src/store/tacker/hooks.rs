//! SQL of vnfkeeper as Tacker v2's MgmtDriver (`migrations/V21__tacker_mgmt_hooks.sql`): a
//! hook request (`vnfkeeper_core::mgmt_hook`) becomes, in one transaction, the vnfkeeper
//! operation of origin `tacker` that runs it (or joins the one already running it), recorded in
//! `tacker_hook` with a `TACKER_HOOK_RECEIVED` event; the driver script then reads its outcome.
//!
//! **Never both paths for one Tacker operation.** A `*_end` hook's operation is the same one
//! the notification path would create after Tacker's COMPLETED (`adopt_tacker_heal`,
//! `adopt_tacker_scale`): linked to Tacker's `vnfLcmOpOccId` (at most one per occurrence, a
//! unique index) and the occurrence marked handled in the same transaction. Tacker reports
//! COMPLETED only after its `*_end` script returned, so the notification path finds the
//! occurrence handled and creates nothing; a notification path that got there first (a hook
//! re-sent later) is joined instead. `*_start` hooks run steps the notification path never
//! runs (it comes after the fact).

use rusqlite::{OptionalExtension as _, params};

use crate::store::{HealAdoption, NewEvent, NewOperation, ReaderRef, RequestBody, Result, Tx};
use vnfkeeper_core::mgmt_hook::{HookParams, HookRequest, MgmtHook};
use vnfkeeper_core::model::{
    EventKind, LcmOperationType, OpOccId, OperationState, ProblemDetails, Timestamp, VnfInstanceId,
    VnfcId,
};
use vnfkeeper_core::tacker::{OpOccSeen, Origin};
use vnfkeeper_core::wire::sol003::ScaleType;

/// What a hook request led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookReceipt {
    /// The vnfkeeper operation that runs the hook; `new`: created by this request (else an
    /// earlier request's, or the notification path's, joined).
    Operation {
        /// Its id.
        op_id: OpOccId,
        /// Created now.
        new: bool,
    },
    /// Nothing to run for this hook (the reason, for the script to print).
    Nothing(String),
    /// Refused (nothing recorded but the reason where the notification path records it too).
    Refused(ProblemDetails),
}

/// A hook's operation as the driver script sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// The hook.
    pub hook: MgmtHook,
    /// Tacker's `vnfLcmOpOccId`.
    pub vnf_lcm_op_occ_id: String,
    /// The operation's state (`FAILED_TEMP` is never shown: a hook's failed operation ends
    /// `FAILED`, Tacker's own operation is what is retried).
    pub state: OperationState,
    /// Its error once failed.
    pub error: Option<ProblemDetails>,
}

impl ReaderRef<'_> {
    /// The hook `op_id` runs and the VNFCs it runs on, when it runs one. Errors: the store's;
    /// a row that does not decode.
    pub fn tacker_hook_of(&self, op_id: &OpOccId) -> Result<Option<(MgmtHook, Vec<VnfcId>)>> {
        let row: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT hook, targets FROM tacker_hook WHERE op_id = ?1",
                [op_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((hook, targets)) = row else {
            return Ok(None);
        };
        let c = crate::store::decode::Cells::new("tacker_hook", op_id.as_str());
        let hook = MgmtHook::parse(&hook).ok_or_else(|| c.corrupt("hook", "not a hook"))?;
        let targets: Vec<VnfcId> = serde_json::from_str(&targets)
            .map_err(|_| c.corrupt("targets", "not a JSON array of VNFC ids"))?;
        Ok(Some((hook, targets)))
    }
}

impl Tx<'_> {
    /// Records hook request `req` and the operation that runs it (see the module comment), or
    /// joins the unfinished one of an earlier identical request, or says why nothing runs or
    /// why it is refused: 409 for a VNF vnfkeeper did not adopt or has no VNFCs of, or one
    /// busy with an earlier operation for an `*_end` hook, or — for a `*_start` hook that
    /// would queue an operation — one held by an operation in `FAILED_TEMP`, or a `heal_start`
    /// of another heal than the one a HEAL waiting for Tacker asked for; 422 for ids that name
    /// no VNFC.
    /// A `FAILED_TEMP` hook operation of the VNF left by a script that gave up ends `FAILED`
    /// first (it would hold the VNF's queue). Errors: the store's.
    pub fn receive_tacker_hook(
        &mut self,
        req: &HookRequest,
        now: Timestamp,
    ) -> Result<HookReceipt> {
        let vnf = VnfInstanceId::from(&req.vnf_instance_id);
        self.settle_failed_hooks(&vnf, now)?;
        let occ = req.vnf_lcm_op_occ_id.as_str();
        let joined: Option<String> = self
            .tx
            .query_row(
                "SELECT h.op_id FROM tacker_hook h JOIN vnf_lcm_op_occ o ON o.id = h.op_id
                 WHERE h.vnf_lcm_op_occ_id = ?1 AND h.hook = ?2 AND h.vnf_instance_id = ?3
                   AND o.operation_state IN ('STARTING', 'PROCESSING')
                 ORDER BY o.seq DESC LIMIT 1",
                params![occ, req.hook.as_str(), vnf.as_str()],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(op_id) = joined {
            return Ok(HookReceipt::Operation {
                op_id: OpOccId::from(&op_id),
                new: false,
            });
        }
        if !req.hook.is_start()
            && let Some(op_id) = self.linked_operation(occ, &vnf)?
        {
            // Tacker runs `heal_end` before it reports its HEAL COMPLETED, and waits for the
            // hook: a HEAL of vnfkeeper's waiting for that heal runs its post-steps now.
            if req.hook == MgmtHook::HealEnd {
                self.release_waiting_heal(occ, &vnf, "replaced the servers (heal_end)", now)?;
            }
            self.insert_hook_row(&op_id, req, &[], now)?;
            return Ok(HookReceipt::Operation { op_id, new: false });
        }
        let refuse = |status: u16, why: String| {
            Ok(HookReceipt::Refused(ProblemDetails::new(
                status,
                why,
                vec![],
            )))
        };
        let adopted = self
            .instance(&vnf)?
            .is_some_and(|i| i.origin == Origin::Tacker);
        if !adopted {
            return refuse(
                409,
                format!("VNF instance {vnf}: its INSTANTIATE was not adopted by vnfkeeper"),
            );
        }
        let vnfcs = self.reader().vnfcs(&vnf)?;
        if vnfcs.is_empty() {
            return refuse(
                409,
                format!(
                    "VNF instance {vnf} has no VNFC vnfkeeper knows (its INSTANTIATE's management steps have not run)"
                ),
            );
        }
        let (op_id, targets) = match (req.hook, &req.params) {
            (MgmtHook::HealStart, HookParams::Heal { vnfc_instance_id }) => {
                let targets =
                    match vnfkeeper_core::tacker::tacker_heal_targets(vnfc_instance_id, &vnfcs) {
                        Ok(t) => t,
                        Err(why) => return refuse(422, why.to_string()),
                    };
                // A HEAL waiting for Tacker holds the VNF's queue: the heal it asked for runs
                // nothing here (reconcile checked it before sending); any other heal would
                // queue behind it and is refused, never let through unchecked.
                if let Some(w) = self.tacker_heals_asked(&vnf)?.first() {
                    let (waiting, asked_occ) = (&w.op_id, &w.tacker_op_occ_id);
                    if vnfkeeper_core::tacker::is_heal_vnfkeeper_asked_for(
                        asked_occ.as_deref(),
                        &w.targets,
                        occ,
                        &targets,
                        &vnfcs,
                    ) {
                        return Ok(HookReceipt::Nothing(format!(
                            "vnfkeeper's HEAL {waiting} asked Tacker for this heal; reconcile checked it before sending"
                        )));
                    }
                    return refuse(
                        409,
                        format!(
                            "VNF instance {vnf}: vnfkeeper's HEAL {waiting} waits for the heal it asked Tacker for{}; \
                             Tacker's {occ} is another heal and is not run before that one ended \
                             (`vnfkeeper ops show {waiting}`)",
                            asked_occ
                                .as_deref()
                                .map(|o| format!(" ({o})"))
                                .unwrap_or_default()
                        ),
                    );
                }
                if let Some(why) = self.held_by_failed_temp(&vnf, occ)? {
                    return refuse(409, why);
                }
                let body = serde_json::json!({"vnfcInstanceId": targets}).to_string();
                let id = self.insert_hook_operation(req, LcmOperationType::Heal, &body, now)?;
                (id, targets)
            }
            (MgmtHook::ScaleStart, HookParams::Scale(s)) => {
                if s.scale_type == ScaleType::ScaleOut {
                    return Ok(HookReceipt::Nothing(
                        "nothing runs before a SCALE_OUT".into(),
                    ));
                }
                let mut victims = Vec::new();
                for server in &req.remove_resources {
                    match vnfcs
                        .iter()
                        .find(|v| v.server_id.as_deref() == Some(server.as_str()))
                    {
                        Some(v) if !victims.contains(&v.id) => victims.push(v.id.clone()),
                        Some(_) => {}
                        None => {
                            return refuse(
                                422,
                                format!(
                                    "removeResources: server {server} is no VNFC vnfkeeper knows"
                                ),
                            );
                        }
                    }
                }
                if victims.is_empty() {
                    return refuse(
                        422,
                        "removeResources names no server: the Grant request of a SCALE_IN lists the servers it removes".into(),
                    );
                }
                if let Some(why) = self.held_by_failed_temp(&vnf, occ)? {
                    return refuse(409, why);
                }
                let body = serde_json::to_string(s).unwrap_or_default();
                let id = self.insert_hook_operation(req, LcmOperationType::Scale, &body, now)?;
                (id, victims)
            }
            (MgmtHook::HealEnd | MgmtHook::ScaleEnd, params) => {
                let seen = OpOccSeen {
                    id: occ.to_string(),
                    vnf_instance_id: req.vnf_instance_id.clone(),
                    operation: req.hook.operation().as_str().to_string(),
                    state: OperationState::Processing,
                    is_automatic_invocation: false,
                };
                let recorded: bool = self.tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM tacker_op_occ WHERE vnf_lcm_op_occ_id = ?1)",
                    [occ],
                    |r| r.get(0),
                )?;
                if !recorded {
                    self.record_tacker_poll(std::slice::from_ref(&seen), &[], now)?;
                }
                let out = match params {
                    HookParams::Heal { vnfc_instance_id } => {
                        self.adopt_tacker_heal(&seen, vnfc_instance_id, now)?
                    }
                    HookParams::Scale(s) => self.adopt_tacker_scale(&seen, s, now)?,
                };
                match out {
                    HealAdoption::Created(id) | HealAdoption::Released(id) => {
                        (OpOccId::from(&id), Vec::new())
                    }
                    HealAdoption::Before => match self.linked_operation(occ, &vnf)? {
                        Some(op_id) => {
                            self.insert_hook_row(&op_id, req, &[], now)?;
                            return Ok(HookReceipt::Operation { op_id, new: false });
                        }
                        None => {
                            return refuse(
                                409,
                                format!(
                                    "Tacker's {occ} was refused or handled before; see `vnfkeeper events --vnf {vnf}`"
                                ),
                            );
                        }
                    },
                    HealAdoption::Waiting => {
                        return refuse(
                            409,
                            format!(
                                "VNF instance {vnf} has an unfinished operation; send the hook again later"
                            ),
                        );
                    }
                    HealAdoption::Refused(p) => return Ok(HookReceipt::Refused(p)),
                }
            }
            (hook, _) => {
                return refuse(422, format!("{hook}: the request is not the operation's"));
            }
        };
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET origin = 'tacker', epoch = COALESCE(?2, epoch) WHERE id = ?1",
            params![op_id.as_str(), self.epoch.map(|e| e.0)],
        )?;
        self.insert_hook_row(&op_id, req, &targets, now)?;
        let message = format!(
            "Tacker's {} {occ} ran vnfkeeper's MgmtDriver {}: queued as {op_id}",
            req.hook.operation().as_str(),
            req.hook
        );
        let evidence = serde_json::json!({
            "tackerOpOccId": occ, "hook": req.hook.as_str(), "vnfcIds": targets,
        })
        .to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::TackerHookReceived,
                vnf_instance_id: Some(&vnf),
                vnf_lcm_op_occ_id: Some(&op_id),
                vnfc_id: None,
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        Ok(HookReceipt::Operation { op_id, new: true })
    }

    /// The outcome of hook operation `op_id` (`None`: no hook ran as it). A `FAILED_TEMP` one
    /// ends `FAILED` now. Errors: the store's.
    pub fn tacker_hook_outcome(
        &mut self,
        op_id: &OpOccId,
        now: Timestamp,
    ) -> Result<Option<HookOutcome>> {
        let row: Option<(String, String)> = self
            .tx
            .query_row(
                "SELECT hook, vnf_lcm_op_occ_id FROM tacker_hook WHERE op_id = ?1",
                [op_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((hook, occ)) = row else {
            return Ok(None);
        };
        let c = crate::store::decode::Cells::new("tacker_hook", op_id.as_str());
        let hook = MgmtHook::parse(&hook).ok_or_else(|| c.corrupt("hook", "not a hook"))?;
        let Some(op) = self.reader().operation(op_id)? else {
            return Ok(None);
        };
        let state = if op.operation_state == OperationState::FailedTemp {
            self.fail_hook_operation(op_id, now)?;
            OperationState::Failed
        } else {
            op.operation_state
        };
        Ok(Some(HookOutcome {
            hook,
            vnf_lcm_op_occ_id: occ,
            state,
            error: op.error,
        }))
    }

    /// The vnfkeeper operation of `vnf` linked to Tacker's `occ` that has not failed.
    fn linked_operation(&self, occ: &str, vnf: &VnfInstanceId) -> Result<Option<OpOccId>> {
        Ok(self
            .tx
            .query_row(
                "SELECT id FROM vnf_lcm_op_occ WHERE tacker_op_occ_id = ?1
                   AND vnf_instance_id = ?2 AND operation_state <> 'FAILED'",
                params![occ, vnf.as_str()],
                |r| r.get::<_, String>(0),
            )
            .optional()?
            .map(OpOccId::from))
    }

    fn insert_hook_operation(
        &mut self,
        req: &HookRequest,
        operation: LcmOperationType,
        body: &str,
        now: Timestamp,
    ) -> Result<OpOccId> {
        let id = OpOccId::from(&uuid::Uuid::new_v4().to_string());
        let detail = format!(
            "Tacker's {} {} (vnfkeeper's MgmtDriver {})",
            operation.as_str(),
            req.vnf_lcm_op_occ_id,
            req.hook
        );
        self.insert_operation(
            &NewOperation {
                id: &id,
                vnf_instance_id: &VnfInstanceId::from(&req.vnf_instance_id),
                operation,
                operation_params: &RequestBody::split(operation, body),
                vnf_package: None,
                request_id: None,
                is_automatic_invocation: false,
                status_detail: Some(&detail),
            },
            now,
        )?;
        Ok(id)
    }

    fn insert_hook_row(
        &mut self,
        op_id: &OpOccId,
        req: &HookRequest,
        targets: &[VnfcId],
        now: Timestamp,
    ) -> Result<()> {
        let targets = crate::store::decode::to_json("targets", &targets)?;
        self.tx.execute(
            "INSERT INTO tacker_hook (op_id, vnf_instance_id, vnf_lcm_op_occ_id, hook, targets, received_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (op_id) DO NOTHING",
            params![
                op_id.as_str(),
                req.vnf_instance_id,
                req.vnf_lcm_op_occ_id,
                req.hook.as_str(),
                targets,
                now.to_rfc3339()
            ],
        )?;
        Ok(())
    }

    /// Why a `*_start` hook's new operation for Tacker's `occ` cannot run now: an operation of
    /// `vnf` in `FAILED_TEMP` that no operator's task (retry, fail, rollback) resolves yet holds
    /// the VNF's queue, and the hook's operation would wait behind it until the script gives up
    /// — with Tacker's operation held that long. `None`: nothing holds it. Errors: the store's.
    fn held_by_failed_temp(&self, vnf: &VnfInstanceId, occ: &str) -> Result<Option<String>> {
        Ok(self
            .unfinished_operations(vnf)?
            .into_iter()
            .find(|o| o.operation_state == OperationState::FailedTemp && o.pending_task.is_none())
            .map(|o| {
                format!(
                    "VNF instance {vnf}: vnfkeeper's {} {} is FAILED_TEMP and holds the VNF's \
                     operations until an operator acts (`vnfkeeper retry|fail|rollback {}`); \
                     Tacker's {occ} is not run before",
                    o.operation.as_str(),
                    o.id,
                    o.id
                )
            }))
    }

    /// Hook operations of `vnf` left `FAILED_TEMP` end `FAILED`.
    fn settle_failed_hooks(&mut self, vnf: &VnfInstanceId, now: Timestamp) -> Result<()> {
        let ids: Vec<String> = {
            let mut st = self.tx.prepare(
                "SELECT o.id FROM vnf_lcm_op_occ o JOIN tacker_hook h ON h.op_id = o.id
                 WHERE o.vnf_instance_id = ?1 AND o.operation_state = 'FAILED_TEMP'",
            )?;
            let rows = st.query_map([vnf.as_str()], |r| r.get(0))?;
            rows.collect::<std::result::Result<_, _>>()?
        };
        for id in ids {
            self.fail_hook_operation(&OpOccId::from(&id), now)?;
        }
        Ok(())
    }

    /// A hook's failed operation ends `FAILED` (Tacker fails its own operation, and a retry in
    /// Tacker sends the hook again); an `*_end` hook's operation lets go of Tacker's occurrence
    /// (kept in `tacker_hook`) so that the retry's hook, or its COMPLETED, is followed again.
    fn fail_hook_operation(&mut self, op_id: &OpOccId, now: Timestamp) -> Result<()> {
        self.set_operation_state(op_id.as_str(), OperationState::Failed, None, now)?;
        let occ: Option<String> = self
            .tx
            .query_row(
                "SELECT tacker_op_occ_id FROM vnf_lcm_op_occ WHERE id = ?1",
                [op_id.as_str()],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        if let Some(occ) = occ {
            self.tx.execute(
                "UPDATE vnf_lcm_op_occ SET tacker_op_occ_id = NULL, epoch = COALESCE(?2, epoch)
                 WHERE id = ?1",
                params![op_id.as_str(), self.epoch.map(|e| e.0)],
            )?;
            self.tx.execute(
                "UPDATE tacker_op_occ SET handled_at = NULL WHERE vnf_lcm_op_occ_id = ?1",
                [occ],
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use OperationState::*;

    fn t(s: u32) -> Timestamp {
        Timestamp::parse(&format!("2026-11-27T01:00:{s:02}Z")).unwrap()
    }

    fn occ(id: &str, op: &str, state: OperationState) -> OpOccSeen {
        OpOccSeen {
            id: id.into(),
            vnf_instance_id: "vnf-1".into(),
            operation: op.into(),
            state,
            is_automatic_invocation: false,
        }
    }

    fn hook(body: serde_json::Value) -> HookRequest {
        vnfkeeper_core::mgmt_hook::parse(body.to_string().as_bytes()).unwrap()
    }

    fn heal(h: &str, ids: &[&str]) -> HookRequest {
        hook(
            serde_json::json!({"hook": h, "vnfInstanceId": "vnf-1", "vnfLcmOpOccId": "th",
                                "request": {"vnfcInstanceId": ids}}),
        )
    }

    /// A Tacker-owned VNF adopted by vnfkeeper with a worker and the storage server.
    fn adopted() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        store
            .write(|tx| {
                let inst = occ("oi", "INSTANTIATE", Completed);
                tx.record_tacker_poll(std::slice::from_ref(&inst), &[], t(0))?;
                let body = RequestBody::split(LcmOperationType::Instantiate, "{}");
                let id = tx.adopt_tacker_instantiate(&inst, &body, None, t(0))?.unwrap();
                tx.set_operation_state(id.as_str(), Processing, None, t(0))?;
                tx.set_operation_state(id.as_str(), Completed, None, t(0))?;
                tx.tx.execute_batch(
                    "INSERT INTO vnfc (id, vnf_instance_id, vdu_id, stack_name, stack_id,
                       resource_name, server_id, created_at, updated_at) VALUES
                       ('w1', 'vnf-1', 'workerNode', 's', 's', 'r1', 'srv-1', '2026-11-27T01:00:00Z', '2026-11-27T01:00:00Z'),
                       ('st', 'vnf-1', 'storage_server', 's', 's', 'r2', 'srv-9', '2026-11-27T01:00:00Z', '2026-11-27T01:00:00Z');",
                )?;
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    /// Reconcile's automatic HEAL `auto` of VNFC `w1`, waiting for the heal it asks Tacker for.
    fn waiting_heal(store: &mut Store) {
        crate::store::tacker::heal::tests::heal_op(store, "auto", t(1), true);
    }

    fn op_of(r: HookReceipt) -> (OpOccId, bool) {
        match r {
            HookReceipt::Operation { op_id, new } => (op_id, new),
            other => panic!("no operation: {other:?}"),
        }
    }

    /// heal_start queues one HEAL of origin `tacker` over the named VNFC (re-sent: joined);
    /// heal_end queues the post-steps linked to Tacker's occurrence, so that Tacker's
    /// COMPLETED creates nothing more (never both paths); a failed hook operation ends FAILED
    /// and lets go of the occurrence, so a retried Tacker operation is followed again.
    #[test]
    fn hooks_queue_one_operation_each_and_the_notification_path_adds_none() {
        let (_d, mut store) = adopted();
        let (start, new) = op_of(
            store
                .write(|tx| {
                    tx.receive_tacker_hook(&heal("heal_start", &["workerNode-srv-1"]), t(1))
                })
                .unwrap(),
        );
        assert!(new);
        assert_eq!(
            store.reader().tacker_hook_of(&start).unwrap(),
            Some((MgmtHook::HealStart, vec![VnfcId::from("w1")]))
        );
        let (again, new) = op_of(
            store
                .write(|tx| {
                    tx.receive_tacker_hook(&heal("heal_start", &["workerNode-srv-1"]), t(2))
                })
                .unwrap(),
        );
        assert_eq!((again.clone(), new), (start.clone(), false));
        let row = store.reader().operation(&start).unwrap().unwrap();
        assert_eq!(
            (row.origin, row.operation),
            (Origin::Tacker, LcmOperationType::Heal)
        );
        assert_eq!(row.tacker_op_occ_id, None);
        let kinds: i64 = store
            .reader()
            .conn
            .query_row(
                "SELECT count(*) FROM event WHERE kind = 'TACKER_HOOK_RECEIVED'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kinds, 1);
        // An id that names no VNFC (another Tacker occurrence): refused, nothing queued.
        let mut unknown = heal("heal_start", &["workerNode-nope"]);
        unknown.vnf_lcm_op_occ_id = "th2".into();
        let r = store
            .write(|tx| tx.receive_tacker_hook(&unknown, t(2)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Refused(ref p) if p.status == 422),
            "{r:?}"
        );
        store
            .write(|tx| {
                tx.set_operation_state(start.as_str(), Processing, None, t(3))?;
                tx.set_operation_state(start.as_str(), Completed, None, t(3))
            })
            .unwrap();
        let o = store
            .write(|tx| tx.tacker_hook_outcome(&start, t(3)))
            .unwrap()
            .unwrap();
        assert_eq!((o.hook, o.state), (MgmtHook::HealStart, Completed));

        let (end, new) = op_of(
            store
                .write(|tx| tx.receive_tacker_hook(&heal("heal_end", &["workerNode-srv-1"]), t(4)))
                .unwrap(),
        );
        assert!(new);
        let row = store.reader().operation(&end).unwrap().unwrap();
        assert_eq!(row.tacker_op_occ_id.as_deref(), Some("th"));
        assert_eq!(
            store.reader().tacker_hook_of(&end).unwrap().unwrap().0,
            MgmtHook::HealEnd
        );
        // Tacker's COMPLETED (notification or poll) after its heal_end returned: no follow-up.
        store
            .write(|tx| tx.record_tacker_poll(&[occ("th", "HEAL", Completed)], &[], t(5)))
            .unwrap();
        assert!(
            store
                .reader()
                .tacker_followups_pending()
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.reader().operations(Some("vnf-1")).unwrap().len(), 3);

        // heal_end fails: the outcome is FAILED with the reason, the occurrence let go; the
        // hook of a retried Tacker operation queues a new operation.
        store
            .write(|tx| {
                tx.set_operation_state(end.as_str(), Processing, None, t(6))?;
                let e = crate::store::decode::to_json(
                    "error",
                    &ProblemDetails::new(409, "node not Ready", vec![]),
                )?;
                tx.set_operation_state(end.as_str(), FailedTemp, Some(&e), t(6))
            })
            .unwrap();
        let o = store
            .write(|tx| tx.tacker_hook_outcome(&end, t(7)))
            .unwrap()
            .unwrap();
        assert_eq!(o.state, Failed);
        assert_eq!(o.error.unwrap().detail, "node not Ready");
        let row = store.reader().operation(&end).unwrap().unwrap();
        assert_eq!((row.operation_state, row.tacker_op_occ_id), (Failed, None));
        let (retry, new) = op_of(
            store
                .write(|tx| tx.receive_tacker_hook(&heal("heal_end", &["workerNode-srv-1"]), t(8)))
                .unwrap(),
        );
        assert!(new && retry != end);
    }

    /// heal_start of a heal reconcile asked Tacker for (a HEAL waiting for Tacker) runs
    /// nothing: it would queue behind that waiting operation and never run.
    #[test]
    fn heal_start_of_a_heal_vnfkeeper_asked_for_runs_nothing() {
        let (_d, mut store) = adopted();
        waiting_heal(&mut store);
        let r = store
            .write(|tx| tx.receive_tacker_hook(&heal("heal_start", &["workerNode-srv-1"]), t(2)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Nothing(ref why) if why.contains("auto")),
            "{r:?}"
        );
        assert_eq!(store.reader().operations(Some("vnf-1")).unwrap().len(), 2);
    }

    /// heal_end of a heal reconcile asked Tacker for joins that waiting HEAL and releases it:
    /// Tacker reports its HEAL COMPLETED only after the hook returned, so waiting for that
    /// would never end. Its COMPLETED later adds nothing.
    #[test]
    fn heal_end_of_a_heal_vnfkeeper_asked_for_releases_it() {
        let (_d, mut store) = adopted();
        waiting_heal(&mut store);
        store
            .write(|tx| {
                tx.mark_tacker_heal_sent(
                    &OpOccId::from("auto"),
                    &occ("th", "HEAL", OperationState::Starting),
                    t(2),
                )
            })
            .unwrap();
        let waiting = |store: &Store| store.reader().tacker_heals_waiting().unwrap().len();
        assert_eq!(waiting(&store), 1);
        let r = store
            .write(|tx| tx.receive_tacker_hook(&heal("heal_end", &["workerNode-srv-1"]), t(3)))
            .unwrap();
        assert_eq!(op_of(r), (OpOccId::from("auto"), false));
        assert_eq!(waiting(&store), 0, "the HEAL no longer waits for Tacker");
        let released: i64 = store
            .reader()
            .conn
            .query_row(
                "SELECT count(*) FROM event WHERE kind = 'TACKER_HEAL_COMPLETED'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(released, 1);
        // Tacker's COMPLETED afterwards: handled before, nothing new.
        let done = store
            .write(|tx| {
                tx.adopt_tacker_heal(
                    &occ("th", "HEAL", OperationState::Completed),
                    &["workerNode-srv-1".into()],
                    t(4),
                )
            })
            .unwrap();
        assert!(matches!(done, HealAdoption::Before), "{done:?}");
        assert_eq!(store.reader().operations(Some("vnf-1")).unwrap().len(), 2);
    }

    /// While reconcile's heal of a worker waits for Tacker, an operator's heal of the storage
    /// server started in Tacker is not taken for it (its heal_start would otherwise run nothing
    /// and Tacker would rebuild the storage server unchecked): refused, nothing queued —
    /// before the Tacker id of reconcile's heal is stored (other VNFCs) and after (another
    /// occurrence, even of the same VNFCs). Once that heal failed and waits for an operator in
    /// FAILED_TEMP, start hooks are refused naming it; once it ended, the storage server's
    /// heal_start queues its check.
    #[test]
    fn another_heal_while_vnfkeeper_waits_for_its_own_is_refused_not_passed() {
        let (_d, mut store) = adopted();
        let auto = OpOccId::from("auto");
        waiting_heal(&mut store);
        let ops = |store: &Store| store.reader().operations(Some("vnf-1")).unwrap().len();
        let storage = heal("heal_start", &["storage_server-srv-9"]);
        let r = store
            .write(|tx| tx.receive_tacker_hook(&storage, t(2)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Refused(ref p) if p.status == 409 && p.detail.contains("auto") && p.detail.contains("Tacker's th ")),
            "{r:?}"
        );
        store
            .write(|tx| {
                tx.set_operation_state(auto.as_str(), Processing, None, t(3))?;
                tx.mark_tacker_heal_sent(&auto, &occ("ta", "HEAL", Starting), t(3))
            })
            .unwrap();
        for h in [storage.clone(), heal("heal_start", &["workerNode-srv-1"])] {
            let r = store.write(|tx| tx.receive_tacker_hook(&h, t(4))).unwrap();
            assert!(
                matches!(r, HookReceipt::Refused(ref p) if p.status == 409 && p.detail.contains("(ta)")),
                "{r:?}"
            );
        }
        // Its own heal_start, by Tacker's id: nothing to run.
        let mut own = heal("heal_start", &["workerNode-srv-1"]);
        own.vnf_lcm_op_occ_id = "ta".into();
        let r = store
            .write(|tx| tx.receive_tacker_hook(&own, t(4)))
            .unwrap();
        assert!(matches!(r, HookReceipt::Nothing(_)), "{r:?}");
        assert_eq!(ops(&store), 2);

        // Tacker's heal failed: reconcile's HEAL waits for an operator in FAILED_TEMP.
        store
            .write(|tx| {
                tx.fail_tacker_heal(
                    &auto,
                    &ProblemDetails::new(500, "port in use", vec![]),
                    t(5),
                )
            })
            .unwrap();
        let r = store
            .write(|tx| tx.receive_tacker_hook(&storage, t(6)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Refused(ref p) if p.status == 409 && p.detail.contains("auto is FAILED_TEMP")),
            "{r:?}"
        );
        let scale_in = hook(
            serde_json::json!({"hook": "scale_start", "vnfInstanceId": "vnf-1",
            "vnfLcmOpOccId": "ts", "removeResources": ["srv-1"],
            "request": {"type": "SCALE_IN", "aspectId": "worker_instance"}}),
        );
        let r = store
            .write(|tx| tx.receive_tacker_hook(&scale_in, t(6)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Refused(ref p) if p.status == 409 && p.detail.contains("auto is FAILED_TEMP")),
            "{r:?}"
        );
        assert_eq!(ops(&store), 2);
        store
            .write(|tx| tx.set_operation_state(auto.as_str(), Failed, None, t(7)))
            .unwrap();
        let (op, new) = op_of(
            store
                .write(|tx| tx.receive_tacker_hook(&storage, t(8)))
                .unwrap(),
        );
        assert!(new);
        assert_eq!(
            store.reader().tacker_hook_of(&op).unwrap(),
            Some((MgmtHook::HealStart, vec![VnfcId::from("st")]))
        );
    }

    /// scale_start of a SCALE_IN runs on the VNFCs of the Grant's removed servers; of a
    /// SCALE_OUT nothing; a VNF vnfkeeper did not adopt is refused.
    #[test]
    fn scale_start_takes_its_victims_from_the_grant() {
        let (_d, mut store) = adopted();
        let scale = |t: &str, remove: &[&str]| {
            hook(
                serde_json::json!({"hook": "scale_start", "vnfInstanceId": "vnf-1",
                "vnfLcmOpOccId": "ts", "removeResources": remove,
                "request": {"type": t, "aspectId": "worker_instance"}}),
            )
        };
        let r = store
            .write(|tx| tx.receive_tacker_hook(&scale("SCALE_OUT", &[]), t(1)))
            .unwrap();
        assert!(matches!(r, HookReceipt::Nothing(_)), "{r:?}");
        let r = store
            .write(|tx| tx.receive_tacker_hook(&scale("SCALE_IN", &["srv-404"]), t(1)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Refused(ref p) if p.status == 422),
            "{r:?}"
        );
        let (op, _) = op_of(
            store
                .write(|tx| tx.receive_tacker_hook(&scale("SCALE_IN", &["srv-1"]), t(2)))
                .unwrap(),
        );
        assert_eq!(
            store.reader().tacker_hook_of(&op).unwrap(),
            Some((MgmtHook::ScaleStart, vec![VnfcId::from("w1")]))
        );
        let mut other = scale("SCALE_IN", &["srv-1"]);
        other.vnf_instance_id = "vnf-2".into();
        let r = store
            .write(|tx| tx.receive_tacker_hook(&other, t(3)))
            .unwrap();
        assert!(
            matches!(r, HookReceipt::Refused(ref p) if p.status == 409),
            "{r:?}"
        );
    }
}
