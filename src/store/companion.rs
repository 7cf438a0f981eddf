//! SQL of companion mode with Tacker (`migrations/V14__tacker_companion.sql`): vnfkeeper's one
//! subscription, and what polling Tacker's API learned — operation occurrences with each state
//! recorded once (decided by `companion::decide_occ` and `companion::followup`) and the managed
//! VNF instances.

use rusqlite::{OptionalExtension as _, params};

use super::decode::{Cells, OPERATION_STATES};
use super::{ReaderRef, Result, Tx, collect_checked};
use crate::companion::{Followup, InstanceSeen, OccChange, OpOccSeen, decide_occ, followup};
use crate::model::{InstantiationState, OperationState, Timestamp};

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

impl ReaderRef<'_> {
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
                    OpOccSeen {
                        state: c.spelling(
                            "operation_state",
                            &state,
                            OperationState::parse,
                            OPERATION_STATES,
                        )?,
                        id: id.clone(),
                        vnf_instance_id: vnf,
                        operation,
                        is_automatic_invocation: auto,
                    },
                    c.time("first_seen_at", &first)?,
                    Followup::parse(follow.as_deref())
                        .ok_or_else(|| c.corrupt("followup", "expected MANAGE, RETIRE or NULL"))?,
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
        let listed = super::decode::to_json("vnf_instance_id", &ids)?;
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
}
