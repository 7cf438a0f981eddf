//! SQL of companion mode with Tacker (`migrations/V14__tacker_companion.sql`): vnfkeeper's one
//! subscription, and what polling Tacker's API learned — operation occurrences with each state
//! recorded once (decided by `tacker::decide_occ` and `tacker::followup`) and the managed
//! VNF instances.

use rusqlite::{OptionalExtension as _, params};

use crate::store::decode::{Cells, OPERATION_STATES};
use crate::store::{NewEvent, NewOperation, ReaderRef, RequestBody, Result, Tx, collect_checked};
use vnfkeeper_core::model::{
    EventKind, InstantiationState, LcmOperationType, OpOccId, OperationState, ProblemDetails,
    Timestamp, VnfInstanceId,
};
use vnfkeeper_core::package::Snapshot;
use vnfkeeper_core::tacker::{Followup, InstanceSeen, OccChange, OpOccSeen, decide_occ, followup};

/// vnfkeeper's subscription in Tacker, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    /// Tacker's `id` of it.
    pub subscription_id: String,
    /// The `callbackUri` it was created with.
    pub callback_uri: String,
    /// When vnfkeeper created or adopted it.
    pub created_at: Timestamp,
    /// When Tacker last listed it.
    pub verified_at: Timestamp,
}

/// An operation occurrence as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedOpOcc {
    /// What Tacker said last.
    pub occ: OpOccSeen,
    /// Each state it was seen in, once, in the order seen.
    pub states: Vec<(OperationState, Timestamp)>,
    /// What vnfkeeper must do about it.
    pub followup: Followup,
    /// When it was first seen.
    pub first_seen_at: Timestamp,
}

/// A managed VNF instance as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedInstance {
    /// What Tacker showed last.
    pub instance: InstanceSeen,
    /// When Tacker stopped listing it.
    pub deleted_at: Option<Timestamp>,
}

/// What one poll changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollRecord {
    /// Occurrences seen for the first time.
    pub new_occs: usize,
    /// States recorded (first sights included).
    pub new_states: usize,
}

/// A Tacker operation occurrence whose follow-up vnfkeeper has not acted on yet (neither
/// handled nor refused), with the `vnfdId` of its instance as last polled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFollowup {
    /// The occurrence as recorded.
    pub occ: OpOccSeen,
    /// `MANAGE` or `RETIRE`.
    pub followup: Followup,
    /// The instance's `vnfdId` (`None`: the instance was never polled).
    pub vnfd_id: Option<String>,
}

/// What [`Tx::retire_tacker_vnf`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// The VNF is now `NOT_INSTANTIATED`, its VNFCs forgotten, its history kept.
    Now,
    /// vnfkeeper never adopted the instance (or it is a spool VNF): nothing to retire; the
    /// follow-up is marked handled.
    NotAdopted,
    /// An operation of the VNF is queued or running: the retirement waits for a later poll.
    Waiting,
}

/// What [`Tx::adopt_tacker_heal`] (or [`Tx::adopt_tacker_scale`]: never `Released`) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealAdoption {
    /// The vnfkeeper HEAL was created now (its id).
    Created(String),
    /// Handled or refused before: nothing new.
    Before,
    /// vnfkeeper has not read the VNF's VNFCs yet (its INSTANTIATE's steps are queued or
    /// running): tried again at a later poll.
    Waiting,
    /// Refused; the reason is recorded.
    Refused(ProblemDetails),
    /// Tacker's HEAL was the one vnfkeeper asked for (healing through Tacker): the vnfkeeper
    /// HEAL linked to it stopped waiting and runs its post-steps (its id); no new operation.
    Released(String),
}

/// A `tacker_op_occ` row's occurrence, its `operation_state` decoded.
fn op_occ_seen(
    c: &Cells<'_>,
    id: &str,
    vnf_instance_id: String,
    operation: String,
    state: &str,
    is_automatic_invocation: bool,
) -> Result<OpOccSeen> {
    Ok(OpOccSeen {
        state: c.spelling(
            "operation_state",
            state,
            OperationState::parse,
            OPERATION_STATES,
        )?,
        id: id.to_owned(),
        vnf_instance_id,
        operation,
        is_automatic_invocation,
    })
}

/// A `tacker_op_occ.followup` cell: `MANAGE`, `RETIRE` or NULL.
fn followup_cell(c: &Cells<'_>, followup: Option<&str>) -> Result<Followup> {
    Followup::parse(followup)
        .ok_or_else(|| c.corrupt("followup", "expected MANAGE, RETIRE or NULL"))
}

impl ReaderRef<'_> {
    /// The follow-ups not acted on yet (`tacker_op_occ.followup` set, `handled_at` and `problem`
    /// NULL), by first sight then id. Errors: the store's; a row that does not decode.
    pub fn tacker_followups_pending(&self) -> Result<Vec<PendingFollowup>> {
        let mut st = self.conn.prepare_cached(
            "SELECT o.vnf_lcm_op_occ_id, o.vnf_instance_id, o.operation, o.operation_state,
                    o.is_automatic_invocation, o.followup, i.vnfd_id
             FROM tacker_op_occ o
             LEFT JOIN tacker_vnf_instance i ON i.vnf_instance_id = o.vnf_instance_id
             WHERE o.followup IS NOT NULL AND o.handled_at IS NULL AND o.problem IS NULL
             ORDER BY o.first_seen_at, o.vnf_lcm_op_occ_id",
        )?;
        let rows = st.query_map([], |r| {
            let id: String = r.get(0)?;
            let vnf: String = r.get(1)?;
            let operation: String = r.get(2)?;
            let state: String = r.get(3)?;
            let auto: bool = r.get(4)?;
            let follow: Option<String> = r.get(5)?;
            let vnfd_id: Option<String> = r.get(6)?;
            Ok((|| {
                let c = Cells::new("tacker_op_occ", &id);
                Ok(PendingFollowup {
                    occ: op_occ_seen(&c, &id, vnf, operation, &state, auto)?,
                    followup: followup_cell(&c, follow.as_deref())?,
                    vnfd_id,
                })
            })())
        })?;
        collect_checked(rows)
    }

    /// What vnfkeeper did about a Tacker occurrence: `(handled_at, problem)`; `None` when it
    /// is not recorded. Errors: the store's; a row that does not decode.
    pub fn tacker_followup_outcome(
        &self,
        vnf_lcm_op_occ_id: &str,
    ) -> Result<Option<(Option<Timestamp>, Option<ProblemDetails>)>> {
        let row = self
            .conn
            .query_row(
                "SELECT handled_at, problem FROM tacker_op_occ WHERE vnf_lcm_op_occ_id = ?1",
                [vnf_lcm_op_occ_id],
                |r| {
                    Ok((
                        r.get::<_, Option<String>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                    ))
                },
            )
            .optional()?;
        row.map(|(at, problem)| {
            let c = Cells::new("tacker_op_occ", vnf_lcm_op_occ_id);
            Ok((
                c.opt_time("handled_at", at)?,
                c.json("problem", problem, "a ProblemDetails JSON object")?,
            ))
        })
        .transpose()
    }

    /// The stored subscription, if any. Errors: the store's; a row that does not decode.
    pub fn tacker_subscription(&self) -> Result<Option<StoredSubscription>> {
        let row = self
            .conn
            .query_row(
                "SELECT subscription_id, callback_uri, created_at, verified_at
                 FROM tacker_subscription WHERE singleton = 1",
                [],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                },
            )
            .optional()?;
        row.map(|(id, uri, created, verified)| {
            let c = Cells::new("tacker_subscription", &id);
            Ok(StoredSubscription {
                created_at: c.time("created_at", &created)?,
                verified_at: c.time("verified_at", &verified)?,
                subscription_id: id.clone(),
                callback_uri: uri,
            })
        })
        .transpose()
    }

    /// The recorded operation occurrences, by first sight then id. Errors: the store's; a row
    /// that does not decode.
    pub fn tacker_op_occs(&self) -> Result<Vec<RecordedOpOcc>> {
        let mut st = self.conn.prepare(
            "SELECT vnf_lcm_op_occ_id, vnf_instance_id, operation, operation_state,
                    is_automatic_invocation, first_seen_at, followup
             FROM tacker_op_occ ORDER BY first_seen_at, vnf_lcm_op_occ_id",
        )?;
        let rows = st.query_map([], |r| {
            let id: String = r.get(0)?;
            let vnf: String = r.get(1)?;
            let operation: String = r.get(2)?;
            let state: String = r.get(3)?;
            let auto: bool = r.get(4)?;
            let first: String = r.get(5)?;
            let follow: Option<String> = r.get(6)?;
            Ok((|| {
                let c = Cells::new("tacker_op_occ", &id);
                Ok((
                    op_occ_seen(&c, &id, vnf, operation, &state, auto)?,
                    c.time("first_seen_at", &first)?,
                    followup_cell(&c, follow.as_deref())?,
                ))
            })())
        })?;
        let occs = collect_checked(rows)?;
        let mut out = Vec::with_capacity(occs.len());
        for (occ, first_seen_at, followup) in occs {
            let states = self.occ_states(&occ.id)?;
            out.push(RecordedOpOcc {
                occ,
                states,
                followup,
                first_seen_at,
            });
        }
        Ok(out)
    }

    fn occ_states(&self, id: &str) -> Result<Vec<(OperationState, Timestamp)>> {
        let mut st = self.conn.prepare_cached(
            "SELECT operation_state, seen_at FROM tacker_op_occ_state
             WHERE vnf_lcm_op_occ_id = ?1 ORDER BY seen_at, rowid",
        )?;
        let rows = st.query_map([id], |r| {
            let state: String = r.get(0)?;
            let at: String = r.get(1)?;
            Ok((|| {
                let c = Cells::new("tacker_op_occ_state", id);
                Ok((
                    c.spelling(
                        "operation_state",
                        &state,
                        OperationState::parse,
                        OPERATION_STATES,
                    )?,
                    c.time("seen_at", &at)?,
                ))
            })())
        })?;
        collect_checked(rows)
    }

    /// The recorded VNF instances, by id. Errors: the store's; a row that does not decode.
    pub fn tacker_vnf_instances(&self) -> Result<Vec<RecordedInstance>> {
        let mut st = self.conn.prepare(
            "SELECT vnf_instance_id, vnfd_id, instantiation_state, vnfc_count, deleted_at
             FROM tacker_vnf_instance ORDER BY vnf_instance_id",
        )?;
        let rows = st.query_map([], |r| {
            let id: String = r.get(0)?;
            let vnfd: String = r.get(1)?;
            let state: String = r.get(2)?;
            let count: i64 = r.get(3)?;
            let deleted: Option<String> = r.get(4)?;
            Ok((|| {
                let c = Cells::new("tacker_vnf_instance", &id);
                Ok(RecordedInstance {
                    instance: InstanceSeen {
                        state: c.spelling(
                            "instantiation_state",
                            &state,
                            InstantiationState::parse,
                            "NOT_INSTANTIATED or INSTANTIATED",
                        )?,
                        vnfc_count: usize::try_from(count)
                            .map_err(|_| c.corrupt("vnfc_count", "negative"))?,
                        id: id.clone(),
                        vnfd_id: vnfd,
                    },
                    deleted_at: c.opt_time("deleted_at", deleted)?,
                })
            })())
        })?;
        collect_checked(rows)
    }
}

impl Tx<'_> {
    /// Creates, once per Tacker `vnfLcmOpOccId` (`occ`), the vnfkeeper INSTANTIATE of origin
    /// `tacker` that runs the management steps after Tacker's INSTANTIATE COMPLETED: the VNF
    /// instance (origin `tacker`) when missing, the operation in `STARTING` with `body` (the
    /// op occ's `operationParams`, validated by intake) and the package snapshot, a
    /// `TACKER_OPERATION_ADOPTED` event, and `handled_at` on the occurrence. Returns the new
    /// operation's id; `None` when the occurrence was handled or refused already (a re-poll,
    /// a duplicate notification, a restart) — the unique index `op_by_tacker_op_occ` (V15) keeps
    /// it at one even if this were called twice. A spool VNF with the same id is refused with a
    /// problem instead. Errors: the store's.
    pub fn adopt_tacker_instantiate(
        &mut self,
        occ: &OpOccSeen,
        body: &RequestBody,
        package: Option<&Snapshot>,
        now: Timestamp,
    ) -> Result<Option<String>> {
        if self.followup_done(&occ.id)? {
            return Ok(None);
        }
        let at = now.to_rfc3339();
        self.tx.execute(
            "INSERT INTO vnf_instance (id, origin, created_at, updated_at)
             VALUES (?1, 'tacker', ?2, ?2) ON CONFLICT (id) DO NOTHING",
            params![occ.vnf_instance_id, at],
        )?;
        let origin: String = self.tx.query_row(
            "SELECT origin FROM vnf_instance WHERE id = ?1",
            [&occ.vnf_instance_id],
            |r| r.get(0),
        )?;
        if origin != "tacker" {
            let problem = ProblemDetails::new(
                409,
                format!(
                    "VNF instance {} is a spool VNF of vnfkeeper's; a Tacker INSTANTIATE of the same id is not adopted",
                    occ.vnf_instance_id
                ),
                vec![],
            );
            self.refuse_tacker_followup(occ, &problem, now)?;
            return Ok(None);
        }
        let op_id = uuid::Uuid::new_v4().to_string();
        let package_text = package.map(|p| p.dir.display().to_string());
        self.insert_operation(
            &NewOperation {
                id: &OpOccId::from(&op_id),
                vnf_instance_id: &VnfInstanceId::from(&occ.vnf_instance_id),
                operation: LcmOperationType::Instantiate,
                operation_params: body,
                vnf_package: package_text.as_deref(),
                request_id: None,
                is_automatic_invocation: occ.is_automatic_invocation,
                status_detail: Some("management steps after Tacker's INSTANTIATE"),
            },
            now,
        )?;
        if let Some(p) = package {
            self.record_package_snapshot(&OpOccId::from(&op_id), p.digest, &p.source)?;
        }
        let message = format!(
            "Tacker's INSTANTIATE {} COMPLETED: management steps queued as {op_id}",
            occ.id
        );
        self.link_adopted(
            &op_id,
            occ,
            &message,
            &serde_json::json!({"tackerOpOccId": occ.id}),
            now,
        )?;
        Ok(Some(op_id))
    }

    /// Creates, once per Tacker `vnfLcmOpOccId`, the vnfkeeper HEAL of origin `tacker` that runs
    /// the flavour's `heal_end` after Tacker's HEAL COMPLETED: its targets are the VNFCs Tacker's
    /// `vnfcInstanceId`s (`tacker_ids`; empty: every VNFC) name
    /// (`tacker::tacker_heal_targets`, against the VNFC rows as last read, before the heal),
    /// stored as the `vnfcInstanceId` of its HealVnfRequest. Refused (the reason recorded) for a
    /// VNF vnfkeeper did not adopt or an id that names no VNFC; waits while the VNF has no VNFC
    /// rows and an operation of it is unfinished. Errors: the store's.
    pub fn adopt_tacker_heal(
        &mut self,
        occ: &OpOccSeen,
        tacker_ids: &[String],
        now: Timestamp,
    ) -> Result<HealAdoption> {
        if self.followup_done(&occ.id)? {
            return Ok(HealAdoption::Before);
        }
        let vnf = VnfInstanceId::from(&occ.vnf_instance_id);
        if let Some(op_id) = self.release_waiting_heal(&occ.id, &vnf, "COMPLETED", now)? {
            return Ok(HealAdoption::Released(op_id));
        }
        let refuse = |tx: &mut Self, status: u16, why: String| -> Result<HealAdoption> {
            let problem = ProblemDetails::new(status, why, vec![]);
            tx.refuse_tacker_followup(occ, &problem, now)?;
            Ok(HealAdoption::Refused(problem))
        };
        let adopted = self
            .instance(&vnf)?
            .is_some_and(|i| i.origin == vnfkeeper_core::tacker::Origin::Tacker);
        if !adopted {
            return refuse(
                self,
                409,
                format!("VNF instance {vnf}: its INSTANTIATE was not adopted by vnfkeeper"),
            );
        }
        let vnfcs = self.reader().vnfcs(&vnf)?;
        if vnfcs.is_empty() {
            if !self.unfinished_operations(&vnf)?.is_empty() {
                return Ok(HealAdoption::Waiting);
            }
            return refuse(
                self,
                409,
                format!("VNF instance {vnf} has no VNFC vnfkeeper knows"),
            );
        }
        let targets = match vnfkeeper_core::tacker::tacker_heal_targets(tacker_ids, &vnfcs) {
            Ok(t) => t,
            Err(why) => return refuse(self, 422, why.to_string()),
        };
        let body = RequestBody::split(
            LcmOperationType::Heal,
            &serde_json::json!({"vnfcInstanceId": targets}).to_string(),
        );
        let op_id = uuid::Uuid::new_v4().to_string();
        self.insert_operation(
            &NewOperation {
                id: &OpOccId::from(&op_id),
                vnf_instance_id: &vnf,
                operation: LcmOperationType::Heal,
                operation_params: &body,
                vnf_package: None,
                request_id: None,
                is_automatic_invocation: occ.is_automatic_invocation,
                status_detail: Some("management steps after Tacker's HEAL"),
            },
            now,
        )?;
        let message = format!(
            "Tacker's HEAL {} COMPLETED: heal_end of {} VNFC(s) queued as {op_id}",
            occ.id,
            targets.len()
        );
        self.link_adopted(
            &op_id,
            occ,
            &message,
            &serde_json::json!({"tackerOpOccId": occ.id, "vnfcInstanceId": targets}),
            now,
        )?;
        Ok(HealAdoption::Created(op_id))
    }

    /// Creates, once per Tacker `vnfLcmOpOccId`, the vnfkeeper SCALE of origin `tacker` that
    /// runs the management steps after Tacker's SCALE COMPLETED
    /// (`tacker::tacker_scale_stages`): its request is `request`, Tacker's
    /// `operationParams` as a `ScaleVnfRequest` (SOL003 §5.5.2.5, checked by the caller).
    /// Refused (the reason recorded) for a VNF vnfkeeper did not adopt; waits while the VNF
    /// has no VNFC rows and an operation of it is unfinished (its INSTANTIATE's steps) — also
    /// while any operation of the VNF is unfinished, so that the VNFCs "before" the scale are
    /// the ones that operation left. Errors: the store's.
    pub fn adopt_tacker_scale(
        &mut self,
        occ: &OpOccSeen,
        request: &vnfkeeper_core::wire::sol003::ScaleVnfRequest,
        now: Timestamp,
    ) -> Result<HealAdoption> {
        if self.followup_done(&occ.id)? {
            return Ok(HealAdoption::Before);
        }
        let vnf = VnfInstanceId::from(&occ.vnf_instance_id);
        let adopted = self
            .instance(&vnf)?
            .is_some_and(|i| i.origin == vnfkeeper_core::tacker::Origin::Tacker);
        if !adopted {
            let problem = ProblemDetails::new(
                409,
                format!("VNF instance {vnf}: its INSTANTIATE was not adopted by vnfkeeper"),
                vec![],
            );
            self.refuse_tacker_followup(occ, &problem, now)?;
            return Ok(HealAdoption::Refused(problem));
        }
        if !self.unfinished_operations(&vnf)?.is_empty() {
            return Ok(HealAdoption::Waiting);
        }
        let text = serde_json::to_string(request).unwrap_or_default();
        let body = RequestBody::split(LcmOperationType::Scale, &text);
        let op_id = uuid::Uuid::new_v4().to_string();
        let what = match request.scale_type {
            vnfkeeper_core::wire::sol003::ScaleType::ScaleOut => "SCALE_OUT",
            vnfkeeper_core::wire::sol003::ScaleType::ScaleIn => "SCALE_IN",
        };
        self.insert_operation(
            &NewOperation {
                id: &OpOccId::from(&op_id),
                vnf_instance_id: &vnf,
                operation: LcmOperationType::Scale,
                operation_params: &body,
                vnf_package: None,
                request_id: None,
                is_automatic_invocation: occ.is_automatic_invocation,
                status_detail: Some("management steps after Tacker's SCALE"),
            },
            now,
        )?;
        let message = format!(
            "Tacker's SCALE {} ({what} of {} by {}) COMPLETED: management steps queued as {op_id}",
            occ.id, request.aspect_id, request.number_of_steps
        );
        self.link_adopted(
            &op_id,
            occ,
            &message,
            &serde_json::json!({"tackerOpOccId": occ.id, "type": what,
                "aspectId": request.aspect_id, "numberOfSteps": request.number_of_steps}),
            now,
        )?;
        Ok(HealAdoption::Created(op_id))
    }

    /// Links the vnfkeeper operation `op_id`, just inserted, to Tacker's occurrence `occ`
    /// (origin `tacker`, `tacker_op_occ_id`), records its `TACKER_OPERATION_ADOPTED` event
    /// (`message`, `evidence`) and marks the occurrence's follow-up handled, all in the caller's
    /// transaction. Errors: the store's (the unique `tacker_op_occ_id` index: one operation
    /// per occurrence).
    fn link_adopted(
        &mut self,
        op_id: &str,
        occ: &OpOccSeen,
        message: &str,
        evidence: &serde_json::Value,
        now: Timestamp,
    ) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET origin = 'tacker', tacker_op_occ_id = ?2,
                 epoch = COALESCE(?3, epoch) WHERE id = ?1",
            params![op_id, occ.id, self.epoch.map(|e| e.0)],
        )?;
        let evidence = evidence.to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::TackerOperationAdopted,
                vnf_instance_id: Some(&VnfInstanceId::from(&occ.vnf_instance_id)),
                vnf_lcm_op_occ_id: Some(&OpOccId::from(op_id)),
                vnfc_id: None,
                message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        self.mark_followup_handled(&occ.id, &now.to_rfc3339())
    }

    /// Records why vnfkeeper does not act on a Tacker occurrence's follow-up (`problem`: an
    /// `operationParams` intake refuses, a `vnfdId` without a package, an operation type not
    /// followed yet) and a `TACKER_OPERATION_REFUSED` event; the occurrence is not pending any
    /// more. Nothing when it was handled or refused already. Errors: the store's.
    pub fn refuse_tacker_followup(
        &mut self,
        occ: &OpOccSeen,
        problem: &ProblemDetails,
        now: Timestamp,
    ) -> Result<()> {
        if self.followup_done(&occ.id)? {
            return Ok(());
        }
        let text = crate::store::decode::to_json("problem", problem)?;
        self.tx.execute(
            "UPDATE tacker_op_occ SET problem = ?2 WHERE vnf_lcm_op_occ_id = ?1",
            params![occ.id, text],
        )?;
        let message = format!(
            "Tacker's {} {} is not followed by management steps: {}",
            occ.operation, occ.id, problem.detail
        );
        let evidence = serde_json::json!({"tackerOpOccId": occ.id, "problem": problem}).to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::TackerOperationRefused,
                vnf_instance_id: Some(&VnfInstanceId::from(&occ.vnf_instance_id)),
                vnf_lcm_op_occ_id: None,
                vnfc_id: None,
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        Ok(())
    }

    /// Retires the Tacker-owned VNF of a COMPLETED Tacker TERMINATE (`occ`): its VNFCs and their
    /// reconcile memory forgotten, no stack, no scale status, `NOT_INSTANTIATED` — so reconcile
    /// stops watching it — while its operations, journal and events stay; a `VNF_RETIRED`
    /// event. vnfkeeper never touches the stack (Tacker deleted it). Its operations in
    /// `FAILED_TEMP` waiting for an operator, and its HEALs waiting for Tacker's heal, end
    /// `FAILED` (they cannot be retried or run); while another is
    /// queued, running or has a RETRY/ROLLBACK pending, nothing is written and the retirement
    /// waits for a later poll. Errors: the store's.
    pub fn retire_tacker_vnf(&mut self, occ: &OpOccSeen, now: Timestamp) -> Result<Retired> {
        if self.followup_done(&occ.id)? {
            return Ok(Retired::NotAdopted);
        }
        let at = now.to_rfc3339();
        let vnf = VnfInstanceId::from(&occ.vnf_instance_id);
        let adopted = self
            .instance(&vnf)?
            .is_some_and(|i| i.origin == vnfkeeper_core::tacker::Origin::Tacker);
        if !adopted {
            self.mark_followup_handled(&occ.id, &at)?;
            return Ok(Retired::NotAdopted);
        }
        let waiting_for_tacker = self.tacker_heals_of(&vnf)?;
        let unfinished = self.unfinished_operations(&vnf)?;
        if unfinished.iter().any(|o| {
            !waiting_for_tacker.contains(&o.id)
                && (o.operation_state != OperationState::FailedTemp || o.pending_task.is_some())
        }) {
            return Ok(Retired::Waiting);
        }
        // A heal waiting for Tacker can never be run on a terminated VNF: FAILED_TEMP, then
        // FAILED below with the others.
        for id in &waiting_for_tacker {
            let problem = ProblemDetails::new(
                409,
                format!("Tacker terminated the VNF ({}) before its heal ran", occ.id),
                vec![],
            );
            self.fail_tacker_heal(id, &problem, now)?;
        }
        let unfinished = self.unfinished_operations(&vnf)?;
        // FAILED_TEMP operations waiting for an operator can never be retried: the VNF is gone.
        let reason = ProblemDetails::new(
            409,
            format!(
                "Tacker terminated the VNF ({}): the operation cannot be retried",
                occ.id
            ),
            vec![],
        );
        let reason = crate::store::decode::to_json("error", &reason)?;
        for o in &unfinished {
            self.set_operation_state(o.id.as_str(), OperationState::Failed, Some(&reason), now)?;
        }
        self.delete_vnfcs(&vnf)?;
        self.prune_reconcile_state(&vnf)?;
        self.tx.execute(
            "UPDATE vnf_instance SET stack_id = NULL WHERE id = ?1",
            [vnf.as_str()],
        )?;
        self.set_scale_status(&vnf, None, now)?;
        self.set_instantiation_state(&vnf, InstantiationState::NotInstantiated, None, None, now)?;
        let message = format!(
            "Tacker's TERMINATE {} COMPLETED: VNF retired (history kept)",
            occ.id
        );
        let evidence = serde_json::json!({"tackerOpOccId": occ.id}).to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::VnfRetired,
                vnf_instance_id: Some(&vnf),
                vnf_lcm_op_occ_id: None,
                vnfc_id: None,
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        self.mark_followup_handled(&occ.id, &at)?;
        Ok(Retired::Now)
    }

    /// Whether the occurrence's follow-up was handled or refused (or the occurrence is unknown).
    fn followup_done(&self, id: &str) -> Result<bool> {
        let row: Option<(Option<String>, Option<String>)> = self
            .tx
            .query_row(
                "SELECT handled_at, problem FROM tacker_op_occ WHERE vnf_lcm_op_occ_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        Ok(row.is_none_or(|(h, p)| h.is_some() || p.is_some()))
    }

    /// Releases the vnfkeeper HEAL waiting for Tacker's HEAL `occ_id` of `vnf`, if one waits
    /// ([`Tx::release_tacker_heal`]): Tacker replaced the servers (`how`: its HEAL
    /// `COMPLETED`, or its `heal_end` hook ran), so the post-steps are queued; records a
    /// `TACKER_HEAL_COMPLETED` event and the follow-up of `occ_id` as handled. Returns the
    /// released operation's id. Errors: the store's.
    pub(super) fn release_waiting_heal(
        &mut self,
        occ_id: &str,
        vnf: &VnfInstanceId,
        how: &str,
        now: Timestamp,
    ) -> Result<Option<String>> {
        let Some(op_id) = self.release_tacker_heal(occ_id)? else {
            return Ok(None);
        };
        let message = format!(
            "Tacker's HEAL {occ_id} (asked by vnfkeeper) {how}: post-steps of {op_id} queued"
        );
        let evidence = serde_json::json!({"tackerOpOccId": occ_id}).to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::TackerHealCompleted,
                vnf_instance_id: Some(vnf),
                vnf_lcm_op_occ_id: Some(&OpOccId::from(&op_id)),
                vnfc_id: None,
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        self.mark_followup_handled(occ_id, &now.to_rfc3339())?;
        Ok(Some(op_id))
    }

    fn mark_followup_handled(&mut self, id: &str, at: &str) -> Result<()> {
        self.tx.execute(
            "UPDATE tacker_op_occ SET handled_at = ?2 WHERE vnf_lcm_op_occ_id = ?1",
            params![id, at],
        )?;
        Ok(())
    }

    /// Stores `subscription_id` as vnfkeeper's subscription, verified at `now`; `created_at`
    /// becomes `now` when the id changes. Errors: the store's.
    pub fn set_tacker_subscription(
        &mut self,
        subscription_id: &str,
        callback_uri: &str,
        now: Timestamp,
    ) -> Result<()> {
        self.tx.execute(
            "INSERT INTO tacker_subscription
                 (singleton, subscription_id, callback_uri, created_at, verified_at)
             VALUES (1, ?1, ?2, ?3, ?3)
             ON CONFLICT (singleton) DO UPDATE SET
                 created_at = CASE WHEN subscription_id = excluded.subscription_id
                                   THEN created_at ELSE excluded.created_at END,
                 subscription_id = excluded.subscription_id,
                 callback_uri = excluded.callback_uri,
                 verified_at = excluded.verified_at",
            params![subscription_id, callback_uri, now.to_rfc3339()],
        )?;
        Ok(())
    }

    /// Records one poll: every occurrence in `occs` (a state not recorded before for it is
    /// added, with the follow-up it calls for), and the managed instances Tacker showed
    /// (`instances`; a recorded instance missing from them is marked deleted at `now`).
    /// Errors: the store's.
    pub fn record_tacker_poll(
        &mut self,
        occs: &[OpOccSeen],
        instances: &[InstanceSeen],
        now: Timestamp,
    ) -> Result<PollRecord> {
        let at = now.to_rfc3339();
        let mut out = PollRecord::default();
        for o in occs {
            let recorded: Option<String> = self
                .tx
                .query_row(
                    "SELECT operation_state FROM tacker_op_occ WHERE vnf_lcm_op_occ_id = ?1",
                    [&o.id],
                    |r| r.get(0),
                )
                .optional()?;
            let seen_before: Vec<OperationState> = {
                let mut st = self.tx.prepare_cached(
                    "SELECT operation_state FROM tacker_op_occ_state WHERE vnf_lcm_op_occ_id = ?1",
                )?;
                let rows = st.query_map([&o.id], |r| r.get::<_, String>(0))?;
                let mut v = Vec::new();
                for r in rows {
                    v.extend(OperationState::parse(&r?));
                }
                v
            };
            let change = decide_occ(
                recorded.as_deref().and_then(OperationState::parse),
                o.state,
                &seen_before,
            );
            let OccChange::Entered(state) = change else {
                continue;
            };
            if recorded.is_none() {
                out.new_occs += 1;
            }
            self.tx.execute(
                "INSERT INTO tacker_op_occ (vnf_lcm_op_occ_id, vnf_instance_id, operation,
                     operation_state, is_automatic_invocation, first_seen_at, updated_at, followup)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)
                 ON CONFLICT (vnf_lcm_op_occ_id) DO UPDATE SET
                     operation_state = excluded.operation_state,
                     updated_at = excluded.updated_at,
                     followup = COALESCE(excluded.followup, followup)",
                params![
                    o.id,
                    o.vnf_instance_id,
                    o.operation,
                    state.as_str(),
                    o.is_automatic_invocation,
                    at,
                    followup(&o.operation, state).as_str(),
                ],
            )?;
            self.tx.execute(
                "INSERT OR IGNORE INTO tacker_op_occ_state (vnf_lcm_op_occ_id, operation_state, seen_at)
                 VALUES (?1, ?2, ?3)",
                params![o.id, state.as_str(), at],
            )?;
            out.new_states += 1;
        }
        for i in instances {
            self.tx.execute(
                "INSERT INTO tacker_vnf_instance (vnf_instance_id, vnfd_id, instantiation_state,
                     vnfc_count, deleted_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, NULL, ?5)
                 ON CONFLICT (vnf_instance_id) DO UPDATE SET
                     vnfd_id = excluded.vnfd_id,
                     instantiation_state = excluded.instantiation_state,
                     vnfc_count = excluded.vnfc_count,
                     deleted_at = NULL,
                     updated_at = excluded.updated_at",
                params![i.id, i.vnfd_id, i.state.as_str(), i.vnfc_count as i64, at],
            )?;
        }
        let ids: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
        let listed = crate::store::decode::to_json("vnf_instance_id", &ids)?;
        self.tx.execute(
            "UPDATE tacker_vnf_instance SET deleted_at = ?1, updated_at = ?1
             WHERE deleted_at IS NULL
               AND vnf_instance_id NOT IN (SELECT value FROM json_each(?2))",
            params![at, listed],
        )?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn occ(id: &str, op: &str, state: OperationState) -> OpOccSeen {
        OpOccSeen {
            id: id.into(),
            vnf_instance_id: "vnf-1".into(),
            operation: op.into(),
            state,
            is_automatic_invocation: false,
        }
    }

    fn inst(id: &str, state: InstantiationState) -> InstanceSeen {
        InstanceSeen {
            id: id.into(),
            vnfd_id: "vnfd".into(),
            state,
            vnfc_count: 3,
        }
    }

    #[test]
    fn subscription_is_one_row_and_keeps_its_creation_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let t1 = Timestamp::parse("2026-11-26T01:00:00Z").unwrap();
        let t2 = Timestamp::parse("2026-11-26T02:00:00Z").unwrap();
        assert_eq!(store.reader().tacker_subscription().unwrap(), None);
        store
            .write(|tx| tx.set_tacker_subscription("s1", "http://cb", t1))
            .unwrap();
        store
            .write(|tx| tx.set_tacker_subscription("s1", "http://cb", t2))
            .unwrap();
        let s = store.reader().tacker_subscription().unwrap().unwrap();
        assert_eq!((s.created_at, s.verified_at), (t1, t2));
        store
            .write(|tx| tx.set_tacker_subscription("s2", "http://cb", t2))
            .unwrap();
        let s = store.reader().tacker_subscription().unwrap().unwrap();
        assert_eq!((s.subscription_id.as_str(), s.created_at), ("s2", t2));
    }

    #[test]
    fn polls_record_each_state_once_with_its_followup() {
        use OperationState::*;
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let t = |s: &str| Timestamp::parse(&format!("2026-11-26T01:00:0{s}Z")).unwrap();
        let a = store
            .write(|tx| {
                tx.record_tacker_poll(
                    &[occ("o1", "INSTANTIATE", Processing)],
                    &[inst("vnf-1", InstantiationState::NotInstantiated)],
                    t("1"),
                )
            })
            .unwrap();
        assert_eq!(
            a,
            PollRecord {
                new_occs: 1,
                new_states: 1
            }
        );
        let again = [
            occ("o1", "INSTANTIATE", Completed),
            occ("o2", "TERMINATE", Starting),
        ];
        let b = store
            .write(|tx| {
                tx.record_tacker_poll(
                    &again,
                    &[inst("vnf-1", InstantiationState::Instantiated)],
                    t("2"),
                )
            })
            .unwrap();
        assert_eq!(
            b,
            PollRecord {
                new_occs: 1,
                new_states: 2
            }
        );
        let c = store
            .write(|tx| tx.record_tacker_poll(&again, &[], t("3")))
            .unwrap();
        assert_eq!(c, PollRecord::default());
        let occs = store.reader().tacker_op_occs().unwrap();
        assert_eq!(occs.len(), 2);
        assert_eq!(occs[0].occ.state, Completed);
        assert_eq!(occs[0].followup, Followup::Manage);
        assert_eq!(
            occs[0].states,
            vec![(Processing, t("1")), (Completed, t("2"))]
        );
        assert_eq!(occs[1].followup, Followup::None);
        let insts = store.reader().tacker_vnf_instances().unwrap();
        assert_eq!(insts[0].instance.state, InstantiationState::Instantiated);
        assert_eq!(insts[0].deleted_at, Some(t("3")));
    }

    /// A COMPLETED Tacker INSTANTIATE is adopted as exactly one vnfkeeper operation of origin
    /// `tacker`, whatever the number of re-polls and adoption attempts; TERMINATE retires the
    /// VNF once its operations are finished, keeping its history.
    #[test]
    fn a_tacker_operation_is_adopted_once_and_terminate_retires_the_vnf() {
        use OperationState::*;
        use vnfkeeper_core::tacker::Origin;
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let t = |s: &str| Timestamp::parse(&format!("2026-11-26T01:00:0{s}Z")).unwrap();
        let inst_ = inst("vnf-1", InstantiationState::Instantiated);
        let done = occ("o1", "INSTANTIATE", Completed);
        store
            .write(|tx| {
                tx.record_tacker_poll(
                    std::slice::from_ref(&done),
                    std::slice::from_ref(&inst_),
                    t("1"),
                )
            })
            .unwrap();
        let pending = store.reader().tacker_followups_pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].vnfd_id.as_deref(), Some("vnfd"));
        let body = RequestBody::split(LcmOperationType::Instantiate, r#"{"flavourId":"simple"}"#);
        let first = store
            .write(|tx| tx.adopt_tacker_instantiate(&done, &body, None, t("2")))
            .unwrap();
        let op_id = first.expect("created");
        // Again (a duplicate notification, a re-poll, a restart): nothing new.
        store
            .write(|tx| {
                tx.record_tacker_poll(
                    std::slice::from_ref(&done),
                    std::slice::from_ref(&inst_),
                    t("3"),
                )
            })
            .unwrap();
        assert!(
            store
                .reader()
                .tacker_followups_pending()
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .write(|tx| tx.adopt_tacker_instantiate(&done, &body, None, t("4")))
                .unwrap(),
            None
        );
        let ops = store.reader().operations(Some("vnf-1")).unwrap();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].id, op_id);
        assert_eq!(ops[0].origin, Origin::Tacker);
        assert_eq!(ops[0].tacker_op_occ_id.as_deref(), Some("o1"));
        assert_eq!(ops[0].operation_state, Starting);
        let row = store.reader().instances().unwrap();
        assert_eq!(row[0].origin, Origin::Tacker);
        // The unique index refuses a second operation for the same Tacker occurrence.
        let dup = store.write(|tx| {
            tx.tx.execute(
                "INSERT INTO vnf_lcm_op_occ (id, vnf_instance_id, operation, operation_state,
                     state_entered_time, start_time, operation_params, origin, tacker_op_occ_id)
                 VALUES ('x', 'vnf-1', 'INSTANTIATE', 'STARTING', 't', 't', '{}', 'tacker', 'o1')",
                [],
            )?;
            Ok(())
        });
        assert!(dup.is_err());

        // A HEAL before vnfkeeper read the VNFCs (the INSTANTIATE's steps queued): waits; one
        // of a VNF vnfkeeper never adopted: refused with the reason.
        let early = occ("oh", "HEAL", Completed);
        store
            .write(|tx| tx.record_tacker_poll(std::slice::from_ref(&early), &[], t("4")))
            .unwrap();
        assert_eq!(
            store
                .write(|tx| tx.adopt_tacker_heal(&early, &[], t("4")))
                .unwrap(),
            HealAdoption::Waiting
        );
        let mut stranger = occ("ox", "HEAL", Completed);
        stranger.vnf_instance_id = "vnf-2".into();
        store
            .write(|tx| tx.record_tacker_poll(std::slice::from_ref(&stranger), &[], t("4")))
            .unwrap();
        let refused = store
            .write(|tx| tx.adopt_tacker_heal(&stranger, &[], t("4")))
            .unwrap();
        assert!(
            matches!(refused, HealAdoption::Refused(ref p) if p.status == 409),
            "{refused:?}"
        );
        assert_eq!(
            store
                .write(|tx| tx.adopt_tacker_heal(&stranger, &[], t("4")))
                .unwrap(),
            HealAdoption::Before
        );
        store
            .write(|tx| {
                tx.refuse_tacker_followup(&early, &ProblemDetails::new(409, "x", vec![]), t("4"))
            })
            .unwrap();

        // TERMINATE COMPLETED while the management steps are unfinished: waits.
        let term = occ("o2", "TERMINATE", Completed);
        store
            .write(|tx| tx.record_tacker_poll(std::slice::from_ref(&term), &[inst_], t("5")))
            .unwrap();
        assert_eq!(
            store
                .write(|tx| tx.retire_tacker_vnf(&term, t("6")))
                .unwrap(),
            Retired::Waiting
        );
        store
            .write(|tx| {
                tx.set_operation_state(&op_id, Processing, None, t("6"))?;
                tx.set_operation_state(&op_id, FailedTemp, None, t("6"))?;
                tx.set_instantiation_state(
                    &VnfInstanceId::from("vnf-1"),
                    InstantiationState::Instantiated,
                    Some("simple"),
                    None,
                    t("6"),
                )
            })
            .unwrap();
        assert_eq!(
            store
                .write(|tx| tx.retire_tacker_vnf(&term, t("7")))
                .unwrap(),
            Retired::Now
        );
        let row = store.reader().instances().unwrap();
        assert_eq!(
            row[0].instantiation_state,
            InstantiationState::NotInstantiated
        );
        assert_eq!(store.reader().operations(Some("vnf-1")).unwrap().len(), 1);
        assert!(
            store
                .reader()
                .tacker_followups_pending()
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .write(|tx| tx.retire_tacker_vnf(&term, t("8")))
                .unwrap(),
            Retired::NotAdopted
        );

        // A refusal is recorded with its reason, once, and is not pending any more.
        let heal = occ("o3", "HEAL", Completed);
        store
            .write(|tx| tx.record_tacker_poll(std::slice::from_ref(&heal), &[], t("9")))
            .unwrap();
        let problem = ProblemDetails::new(501, "not yet", vec![]);
        store
            .write(|tx| tx.refuse_tacker_followup(&heal, &problem, t("9")))
            .unwrap();
        assert!(
            store
                .reader()
                .tacker_followups_pending()
                .unwrap()
                .is_empty()
        );
        let (handled, refused) = store
            .reader()
            .tacker_followup_outcome("o3")
            .unwrap()
            .unwrap();
        assert_eq!(handled, None);
        assert_eq!(refused.map(|p| p.detail), Some("not yet".to_string()));
    }
}
