//! SQL of healing through Tacker (`migrations/V16__tacker_heal.sql`): a vnfkeeper HEAL of
//! origin `tacker` that waits for Tacker's heal (`tacker_heal` `TO_SEND`, then `SENT` with
//! Tacker's `vnfLcmOpOccId` in `tacker_op_occ_id`); the engine does not run it until Tacker's
//! HEAL COMPLETED. Decisions are the core's (`tacker::tacker_heal_route`,
//! `tacker_vnfc_instance_ids`, `heal_sent_before`).

use rusqlite::{OptionalExtension as _, params};

use crate::store::decode::{Cells, OPERATION_STATES};
use crate::store::{NewEvent, ReaderRef, Result, Tx};
use vnfkeeper_core::model::{
    EventKind, OpOccId, OperationState, ProblemDetails, Timestamp, VnfInstanceId, VnfcId,
};
use vnfkeeper_core::tacker::OpOccSeen;

/// A vnfkeeper HEAL of one VNF waiting for Tacker, with what it asked Tacker for.
pub(super) struct AskedHeal {
    /// vnfkeeper's operation id.
    pub op_id: OpOccId,
    /// The Tacker op occ id it stored when it sent its request (`None` before).
    pub tacker_op_occ_id: Option<String>,
    /// The VNFCs it heals: `vnfcInstanceId` of its request, vnfkeeper's ids (empty: the whole
    /// VNF).
    pub targets: Vec<VnfcId>,
}

/// A vnfkeeper HEAL waiting for Tacker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingHeal {
    /// vnfkeeper's operation id.
    pub op_id: String,
    /// The VNF instance (Tacker's id too).
    pub vnf_instance_id: String,
    /// When vnfkeeper's operation started (reconcile recorded it).
    pub start_time: Timestamp,
    /// Tacker's `vnfLcmOpOccId` once sent; `None`: not sent yet (or sent and not recorded: a
    /// crash between the POST and this write).
    pub tacker_op_occ_id: Option<String>,
    /// The state recorded of Tacker's occurrence, once polled.
    pub tacker_state: Option<OperationState>,
}

impl ReaderRef<'_> {
    /// The recorded Tacker op occs of `vnf` with their latest state, by first sight. Errors:
    /// the store's; a state outside the schema's list.
    pub fn tacker_occ_states(&self, vnf: &str) -> Result<Vec<(String, OperationState)>> {
        let mut st = self.conn.prepare(
            "SELECT vnf_lcm_op_occ_id, operation_state FROM tacker_op_occ
             WHERE vnf_instance_id = ?1 ORDER BY first_seen_at, vnf_lcm_op_occ_id",
        )?;
        let rows = st.query_map([vnf], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, state) = row?;
            let c = Cells::new("tacker_op_occ", &id);
            let state = c.spelling(
                "operation_state",
                &state,
                OperationState::parse,
                OPERATION_STATES,
            )?;
            out.push((id, state));
        }
        Ok(out)
    }

    /// The vnfkeeper HEALs waiting for Tacker, oldest first. Errors: the store's.
    pub fn tacker_heals_waiting(&self) -> Result<Vec<WaitingHeal>> {
        let mut st = self.conn.prepare(
            "SELECT o.id, o.vnf_instance_id, o.start_time, o.tacker_op_occ_id, t.operation_state
             FROM vnf_lcm_op_occ o LEFT JOIN tacker_op_occ t
               ON t.vnf_lcm_op_occ_id = o.tacker_op_occ_id
             WHERE o.tacker_heal IS NOT NULL ORDER BY o.seq",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (op_id, vnf, start, occ, state) = row?;
            let c = Cells::new("vnf_lcm_op_occ", &op_id);
            let tacker_state = match state {
                Some(s) => Some(c.spelling(
                    "operation_state",
                    &s,
                    OperationState::parse,
                    OPERATION_STATES,
                )?),
                None => None,
            };
            out.push(WaitingHeal {
                start_time: c.time("start_time", &start)?,
                op_id,
                vnf_instance_id: vnf,
                tacker_op_occ_id: occ,
                tacker_state,
            });
        }
        Ok(out)
    }

    /// Tacker op occ ids some vnfkeeper operation is linked to. Errors: the store's.
    pub fn linked_tacker_op_occs(&self) -> Result<Vec<String>> {
        let mut st = self.conn.prepare(
            "SELECT tacker_op_occ_id FROM vnf_lcm_op_occ WHERE tacker_op_occ_id IS NOT NULL",
        )?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }
}

impl Tx<'_> {
    /// Makes the just-inserted HEAL `op_id` one of origin `tacker`; `wait`: it waits for
    /// Tacker's heal (`TO_SEND`) — else it runs at once (a configuration repair of Tacker's
    /// stack). Errors: the store's.
    pub fn make_tacker_heal(&mut self, op_id: &OpOccId, wait: bool) -> Result<()> {
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET origin = 'tacker',
                 tacker_heal = CASE WHEN ?2 THEN 'TO_SEND' ELSE NULL END,
                 epoch = COALESCE(?3, epoch) WHERE id = ?1",
            params![op_id.as_str(), wait, self.epoch.map(|e| e.0)],
        )?;
        Ok(())
    }

    /// Records that vnfkeeper's waiting HEAL `op_id` was sent to Tacker as `occ` (Tacker's
    /// occurrence recorded too, in the state given): `SENT`, linked, a `TACKER_HEAL_SENT`
    /// event. Returns false (nothing written) when it is not waiting unsent. Errors: the store's.
    pub fn mark_tacker_heal_sent(
        &mut self,
        op_id: &OpOccId,
        occ: &OpOccSeen,
        now: Timestamp,
    ) -> Result<bool> {
        let unsent: bool = self.tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM vnf_lcm_op_occ WHERE id = ?1
                 AND tacker_heal = 'TO_SEND' AND tacker_op_occ_id IS NULL)",
            [op_id.as_str()],
            |r| r.get(0),
        )?;
        if !unsent {
            return Ok(false);
        }
        // Tacker's occurrence first: `tacker_op_occ_id` references it.
        self.record_tacker_poll(std::slice::from_ref(occ), &[], now)?;
        let n = self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET tacker_heal = 'SENT', tacker_op_occ_id = ?2,
                 status_detail = ?3, epoch = COALESCE(?4, epoch)
             WHERE id = ?1 AND tacker_heal = 'TO_SEND' AND tacker_op_occ_id IS NULL",
            params![
                op_id.as_str(),
                occ.id,
                format!("waiting for Tacker's HEAL {}", occ.id),
                self.epoch.map(|e| e.0)
            ],
        )?;
        if n == 1 {
            let message = format!("heal sent to Tacker: its HEAL {} runs it", occ.id);
            let evidence = serde_json::json!({"tackerOpOccId": occ.id}).to_string();
            self.append_event(
                &NewEvent {
                    kind: EventKind::TackerHealSent,
                    vnf_instance_id: Some(&VnfInstanceId::from(&occ.vnf_instance_id)),
                    vnf_lcm_op_occ_id: Some(op_id),
                    vnfc_id: None,
                    message: &message,
                    evidence: Some(&evidence),
                },
                now,
            )?;
        }
        Ok(n == 1)
    }

    /// The vnfkeeper operation linked to Tacker's `occ_id` that waits for it, if any: it
    /// stops waiting (the engine runs its post-steps). Returns its id. Errors: the store's.
    pub fn release_tacker_heal(&mut self, occ_id: &str) -> Result<Option<String>> {
        let id: Option<String> = self
            .tx
            .query_row(
                "SELECT id FROM vnf_lcm_op_occ WHERE tacker_op_occ_id = ?1
                 AND tacker_heal = 'SENT'",
                [occ_id],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(id) = &id {
            self.tx.execute(
                "UPDATE vnf_lcm_op_occ SET tacker_heal = NULL,
                     status_detail = 'Tacker healed: post-steps queued',
                     epoch = COALESCE(?2, epoch) WHERE id = ?1",
                params![id, self.epoch.map(|e| e.0)],
            )?;
        }
        Ok(id)
    }

    /// Ids of `vnf`'s operations waiting for Tacker's heal. Errors: the store's.
    pub(super) fn tacker_heals_of(&self, vnf: &VnfInstanceId) -> Result<Vec<OpOccId>> {
        let mut st = self.tx.prepare(
            "SELECT id FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1 AND tacker_heal IS NOT NULL",
        )?;
        let rows = st.query_map([vnf.as_str()], |r| r.get::<_, String>(0).map(OpOccId::from))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// The HEALs of `vnf` waiting for Tacker, oldest first. Errors: the store's; a request
    /// that is not JSON.
    pub(super) fn tacker_heals_asked(&self, vnf: &VnfInstanceId) -> Result<Vec<AskedHeal>> {
        let rows: Vec<(String, Option<String>)> = {
            let mut st = self.tx.prepare(
                "SELECT id, tacker_op_occ_id FROM vnf_lcm_op_occ
                 WHERE vnf_instance_id = ?1 AND tacker_heal IS NOT NULL ORDER BY seq",
            )?;
            let rows = st.query_map([vnf.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<std::result::Result<_, _>>()?
        };
        let mut out = Vec::new();
        for (id, occ) in rows {
            let op_id = OpOccId::from(&id);
            let params = self.reader().operation_params(&op_id)?.map(|(p, _)| p);
            let body: serde_json::Value = match params {
                Some(p) => serde_json::from_str(&p).map_err(|_| {
                    Cells::new("vnf_lcm_op_occ", &id).corrupt("operation_params", "not JSON")
                })?,
                None => serde_json::Value::Null,
            };
            let targets = body["vnfcInstanceId"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(VnfcId::from))
                .collect();
            out.push(AskedHeal {
                op_id,
                tacker_op_occ_id: occ,
                targets,
            });
        }
        Ok(out)
    }

    /// vnfkeeper's waiting HEAL `op_id` ends `FAILED_TEMP` with `error` (Tacker's error, or
    /// why vnfkeeper could not send it); it no longer waits. Errors: the store's.
    pub fn fail_tacker_heal(
        &mut self,
        op_id: &OpOccId,
        error: &ProblemDetails,
        now: Timestamp,
    ) -> Result<()> {
        let error = crate::store::decode::to_json("error", error)?;
        self.tx.execute(
            "UPDATE vnf_lcm_op_occ SET tacker_heal = NULL, epoch = COALESCE(?2, epoch)
             WHERE id = ?1",
            params![op_id.as_str(), self.epoch.map(|e| e.0)],
        )?;
        self.set_operation_state(
            op_id.as_str(),
            OperationState::FailedTemp,
            Some(&error),
            now,
        )?;
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::store::{HealAdoption, NewOperation, RequestBody, Store};
    use OperationState::*;
    use vnfkeeper_core::model::LcmOperationType;
    use vnfkeeper_core::tacker::{OpOccSeen, Origin};

    fn occ(id: &str, op: &str, state: OperationState) -> OpOccSeen {
        OpOccSeen {
            id: id.into(),
            vnf_instance_id: "vnf-1".into(),
            operation: op.into(),
            state,
            is_automatic_invocation: true,
        }
    }

    /// Reconcile's automatic HEAL `id` of VNFC `w1` of `vnf-1` at `t`, made a Tacker heal that
    /// waits for Tacker (`wait`) or not.
    pub(in crate::store::tacker) fn heal_op(store: &mut Store, id: &str, t: Timestamp, wait: bool) {
        store
            .write(|tx| {
                let body =
                    RequestBody::split(LcmOperationType::Heal, r#"{"vnfcInstanceId":["w1"]}"#);
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from(id),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::Heal,
                        operation_params: &body,
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: true,
                        status_detail: None,
                    },
                    t,
                )?;
                tx.make_tacker_heal(&OpOccId::from(id), wait)
            })
            .unwrap();
    }

    fn runnable(store: &Store) -> Vec<String> {
        store
            .reader()
            .runnable_heads(10, &Default::default())
            .unwrap()
            .into_iter()
            .map(|o| o.id.into_string())
            .collect()
    }

    /// A HEAL waiting for Tacker is never run by the engine; once sent its Tacker id is
    /// stored (once); Tacker's HEAL COMPLETED releases that same operation (no new one);
    /// a failed one ends FAILED_TEMP with the error.
    #[test]
    fn a_heal_waits_for_tacker_is_linked_once_and_released_by_its_completion() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let t = |s: &str| Timestamp::parse(&format!("2026-11-26T01:00:0{s}Z")).unwrap();
        let inst = occ("oi", "INSTANTIATE", Completed);
        store
            .write(|tx| {
                tx.record_tacker_poll(std::slice::from_ref(&inst), &[], t("0"))?;
                let body = RequestBody::split(LcmOperationType::Instantiate, "{}");
                let id = tx
                    .adopt_tacker_instantiate(&inst, &body, None, t("0"))?
                    .unwrap();
                tx.set_operation_state(&id, Processing, None, t("0"))?;
                tx.set_operation_state(&id, Completed, None, t("0"))?;
                Ok(())
            })
            .unwrap();
        heal_op(&mut store, "h1", t("1"), true);
        assert!(runnable(&store).is_empty());
        let w = store.reader().tacker_heals_waiting().unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].op_id.as_str(), &w[0].tacker_op_occ_id), ("h1", &None));
        let op = &store.reader().operations(Some("vnf-1")).unwrap()[1];
        assert_eq!((op.origin, op.operation_state), (Origin::Tacker, Starting));

        let sent = occ("th", "HEAL", Starting);
        assert!(
            store
                .write(|tx| tx.mark_tacker_heal_sent(&OpOccId::from("h1"), &sent, t("2")))
                .unwrap()
        );
        assert!(
            !store
                .write(|tx| tx.mark_tacker_heal_sent(
                    &OpOccId::from("h1"),
                    &occ("other", "HEAL", Starting),
                    t("2")
                ))
                .unwrap()
        );
        let w = store.reader().tacker_heals_waiting().unwrap();
        assert_eq!(w[0].tacker_op_occ_id.as_deref(), Some("th"));
        assert_eq!(w[0].tacker_state, Some(Starting));
        assert_eq!(store.reader().linked_tacker_op_occs().unwrap().len(), 2);
        assert_eq!(
            store.reader().tacker_occ_states("vnf-1").unwrap()[1],
            ("th".to_string(), Starting)
        );
        assert!(runnable(&store).is_empty());

        let done = occ("th", "HEAL", Completed);
        store
            .write(|tx| tx.record_tacker_poll(std::slice::from_ref(&done), &[], t("3")))
            .unwrap();
        assert_eq!(store.reader().tacker_followups_pending().unwrap().len(), 1);
        assert_eq!(
            store
                .write(|tx| tx.adopt_tacker_heal(&done, &["x".into()], t("4")))
                .unwrap(),
            HealAdoption::Released("h1".into())
        );
        assert_eq!(runnable(&store), vec!["h1".to_string()]);
        assert!(store.reader().tacker_heals_waiting().unwrap().is_empty());
        assert_eq!(store.reader().operations(Some("vnf-1")).unwrap().len(), 2);
        assert_eq!(
            store
                .write(|tx| tx.adopt_tacker_heal(&done, &[], t("5")))
                .unwrap(),
            HealAdoption::Before
        );

        // A heal Tacker failed: FAILED_TEMP with the error, no longer waiting.
        store
            .write(|tx| {
                tx.set_operation_state("h1", Processing, None, t("5"))?;
                tx.set_operation_state("h1", Completed, None, t("5"))
            })
            .unwrap();
        heal_op(&mut store, "h2", t("6"), true);
        store
            .write(|tx| {
                tx.fail_tacker_heal(
                    &OpOccId::from("h2"),
                    &ProblemDetails::new(500, "boom", vec![]),
                    t("7"),
                )
            })
            .unwrap();
        let ops = store.reader().operations(Some("vnf-1")).unwrap();
        assert_eq!(ops[2].operation_state, FailedTemp);
        assert!(ops[2].error.as_ref().is_some_and(|e| e.detail == "boom"));
        assert!(store.reader().tacker_heals_waiting().unwrap().is_empty());
        // A configuration repair of a Tacker VNF runs at once.
        store
            .write(|tx| tx.set_operation_state("h2", Failed, None, t("8")))
            .unwrap();
        heal_op(&mut store, "h3", t("9"), false);
        assert_eq!(runnable(&store), vec!["h3".to_string()]);

        // Tacker terminates the VNF while a heal waits for it: the retirement is not blocked,
        // the heal ends FAILED.
        store
            .write(|tx| {
                tx.set_operation_state("h3", Processing, None, t("9"))?;
                tx.set_operation_state("h3", Completed, None, t("9"))
            })
            .unwrap();
        heal_op(&mut store, "h4", t("9"), true);
        let term = occ("tt", "TERMINATE", Completed);
        let retired = store
            .write(|tx| {
                tx.record_tacker_poll(std::slice::from_ref(&term), &[], t("9"))?;
                tx.retire_tacker_vnf(&term, t("9"))
            })
            .unwrap();
        assert_eq!(retired, crate::store::Retired::Now);
        let ops = store.reader().operations(Some("vnf-1")).unwrap();
        assert_eq!(ops.last().unwrap().operation_state, Failed);
        assert!(store.reader().tacker_heals_waiting().unwrap().is_empty());
    }
}
