//! SQL of the metrics' state gauges (`vnfkeeper_operations`, `vnfkeeper_vnf_instances`,
//! `vnfkeeper_vnfcs_unhealthy`, `vnfkeeper_vnfs_paused`): what the database holds now, read at
//! each scrape. Every query is bounded by what is live: unfinished operations through the
//! partial index `op_unfinished` (migration V6), instances, the reconcile memory of existing
//! VNFCs, and the stored pauses.

use std::collections::{BTreeMap, BTreeSet};

use super::decode::Cells;
use super::{ReaderRef, Result, collect_checked};
use vnfkeeper_core::model::{
    EventKind, InstantiationState, LcmOperationType, OperationState, PauseScope, Timestamp,
};

/// The state gauges' values at one moment ([`ReaderRef::state_gauges`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateGauges {
    /// Operations not in a final state (STARTING, PROCESSING, FAILED_TEMP, ROLLING_BACK,
    /// FAILING_TEMP…) by SOL003 operation type and state; absent pairs are 0.
    pub operations: BTreeMap<(LcmOperationType, OperationState), u64>,
    /// VNF instances by SOL003 instantiation state; absent states are 0.
    pub instances: BTreeMap<InstantiationState, u64>,
    /// VNFCs reconcile counts failures of (a failed cloud observation or a failed probe, as
    /// `status VNF` shows "unhealthy since"), by the decision that holds back their heal: the
    /// VNFC's own last decision or, failing that, its VNF's, when it is one of
    /// `RECONCILE_SHORT_CIRCUIT`, `RECONCILE_BUDGET_EXHAUSTED`, `RECONCILE_PV_BOUND_BLOCK`,
    /// `RECONCILE_PAUSED`, `RECONCILE_REBUILD_REFUSED`; `None`: no decision holds it back.
    pub unhealthy_vnfcs: BTreeMap<Option<EventKind>, u64>,
    /// VNF instances under a maintenance pause in force at `now` (one for `*` pauses them all).
    pub paused_vnfs: u64,
}

/// Whether a reconcile decision of `kind` holds back a heal until something changes (a rule,
/// not a wait).
pub fn holds_heal(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::ReconcileShortCircuit
            | EventKind::ReconcileBudgetExhausted
            | EventKind::ReconcilePvBoundBlock
            | EventKind::ReconcilePaused
            | EventKind::ReconcileRebuildRefused
    )
}

/// The event kind of a `reconcile_state.last_decision` key (`KIND:reason`), if it holds a heal.
fn holding(c: &Cells<'_>, key: Option<&str>) -> Result<Option<EventKind>> {
    let Some(key) = key else { return Ok(None) };
    let kind = key.split_once(':').map_or(key, |(k, _)| k);
    let kind = c.spelling("last_decision", kind, EventKind::parse, "an event kind")?;
    Ok(holds_heal(kind).then_some(kind))
}

impl ReaderRef<'_> {
    /// The state gauges at `now`. Errors: the store's; a stored spelling that does not decode
    /// (`StoreError::Corrupt` naming table, row and column).
    pub fn state_gauges(&self, now: Timestamp) -> Result<StateGauges> {
        let mut g = StateGauges::default();
        let mut st = self.conn.prepare_cached(
            "SELECT operation, operation_state, COUNT(*) FROM vnf_lcm_op_occ INDEXED BY op_unfinished
             WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK')
             GROUP BY operation, operation_state",
        )?;
        let rows = st.query_map([], |r| {
            let (op, state, n): (String, String, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let key = format!("{op}/{state}");
            let c = Cells::new("vnf_lcm_op_occ", &key);
            Ok((|| {
                Ok((
                    c.spelling(
                        "operation",
                        &op,
                        LcmOperationType::parse,
                        "an LCM operation",
                    )?,
                    c.spelling(
                        "operation_state",
                        &state,
                        OperationState::parse,
                        "an operation state",
                    )?,
                    n as u64,
                ))
            })())
        })?;
        for (op, state, n) in collect_checked(rows)? {
            g.operations.insert((op, state), n);
        }

        let mut st = self.conn.prepare_cached(
            "SELECT instantiation_state, COUNT(*) FROM vnf_instance GROUP BY instantiation_state",
        )?;
        let rows = st.query_map([], |r| {
            let (state, n): (String, i64) = (r.get(0)?, r.get(1)?);
            let c = Cells::new("vnf_instance", "instantiation_state");
            Ok(c.spelling(
                "instantiation_state",
                &state,
                InstantiationState::parse,
                "an instantiation state",
            )
            .map(|s| (s, n as u64)))
        })?;
        for (state, n) in collect_checked(rows)? {
            g.instances.insert(state, n);
        }

        // (VNF, VNFC or '' for the VNF's own row, failing, last decision)
        let mut st = self.conn.prepare_cached(
            "SELECT s.vnf_instance_id, s.vnfc_id,
                    s.cloud_failures > 0 OR s.probe_failures > 0, s.last_decision
             FROM reconcile_state s
             WHERE s.vnfc_id = '' OR s.vnfc_id IN (SELECT id FROM vnfc)",
        )?;
        let rows = st.query_map([], |r| {
            let (vnf, vnfc): (String, String) = (r.get(0)?, r.get(1)?);
            let failing: bool = r.get(2)?;
            let last: Option<String> = r.get(3)?;
            let key = format!("{vnf}/{vnfc}");
            Ok(
                holding(&Cells::new("reconcile_state", &key), last.as_deref())
                    .map(|h| (vnf, vnfc, failing, h)),
            )
        })?;
        let rows = collect_checked(rows)?;
        let vnf_holds: BTreeMap<&str, EventKind> = rows
            .iter()
            .filter(|(_, vnfc, ..)| vnfc.is_empty())
            .filter_map(|(vnf, _, _, h)| Some((vnf.as_str(), (*h)?)))
            .collect();
        for (vnf, _, _, own) in rows.iter().filter(|(_, c, f, _)| !c.is_empty() && *f) {
            let held = own.or_else(|| vnf_holds.get(vnf.as_str()).copied());
            *g.unhealthy_vnfcs.entry(held).or_default() += 1;
        }

        let pauses: Vec<_> = self
            .maintenance_pauses()?
            .into_iter()
            .filter(|p| p.active_at(now))
            .collect();
        if pauses.iter().any(|p| p.scope == PauseScope::All) {
            g.paused_vnfs = g.instances.values().sum();
        } else {
            let mut st = self.conn.prepare_cached("SELECT id FROM vnf_instance")?;
            let known: BTreeSet<String> = st
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            g.paused_vnfs = pauses
                .iter()
                .filter(|p| matches!(&p.scope, PauseScope::Vnf(id) if known.contains(id.as_str())))
                .count() as u64;
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn gauges_count_live_rows_and_the_rules_holding_heals() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let now = t("2026-11-27T12:00:00Z");
        assert_eq!(
            store.reader().state_gauges(now).unwrap(),
            StateGauges::default()
        );
        store
            .conn
            .execute_batch(
                "INSERT INTO vnf_instance (id, instantiation_state, created_at, updated_at) VALUES
                   ('a', 'INSTANTIATED', 't', 't'), ('b', 'INSTANTIATED', 't', 't'),
                   ('c', 'NOT_INSTANTIATED', 't', 't');
                 INSERT INTO vnf_lcm_op_occ (id, vnf_instance_id, operation, operation_state,
                   state_entered_time, start_time, operation_params) VALUES
                   ('o1', 'a', 'HEAL', 'FAILED_TEMP', 't', 't', '{}'),
                   ('o2', 'b', 'HEAL', 'FAILED_TEMP', 't', 't', '{}'),
                   ('o3', 'b', 'SCALE', 'STARTING', 't', 't', '{}'),
                   ('o4', 'a', 'INSTANTIATE', 'COMPLETED', 't', 't', '{}');
                 INSERT INTO vnfc (id, vnf_instance_id, vdu_id, stack_name, stack_id,
                   resource_name, created_at, updated_at) VALUES
                   ('a1', 'a', 'w', 's', 's', 'r1', 't', 't'),
                   ('a2', 'a', 'w', 's', 's', 'r2', 't', 't'),
                   ('b1', 'b', 'w', 's', 's', 'r1', 't', 't'),
                   ('b2', 'b', 'w', 's', 's', 'r2', 't', 't');
                 INSERT INTO reconcile_state (vnf_instance_id, vnfc_id, cloud_failures,
                   probe_failures, last_decision, updated_at) VALUES
                   ('a', '', 0, 0, 'RECONCILE_SHORT_CIRCUIT:too many', 't'),
                   ('a', 'a1', 1, 0, 'RECONCILE_DEFERRED_GRACE:wait', 't'),
                   ('a', 'a2', 0, 0, NULL, 't'),
                   ('b', 'b1', 0, 2, 'RECONCILE_BUDGET_EXHAUSTED:3 heals', 't'),
                   ('b', 'b2', 1, 0, 'RECONCILE_DEFERRED_GRACE:wait', 't'),
                   ('b', 'gone', 5, 0, NULL, 't');
                 INSERT INTO maintenance_pause (scope, paused_by, since, until) VALUES
                   ('a', 'uid 0 (root)', '2026-11-27T11:00:00Z', NULL),
                   ('b', 'uid 0 (root)', '2026-11-27T10:00:00Z', '2026-11-27T11:00:00Z');",
            )
            .unwrap();
        let g = store.reader().state_gauges(now).unwrap();
        assert_eq!(
            g.operations,
            BTreeMap::from([
                ((LcmOperationType::Scale, OperationState::Starting), 1),
                ((LcmOperationType::Heal, OperationState::FailedTemp), 2),
            ])
        );
        assert_eq!(
            g.instances,
            BTreeMap::from([
                (InstantiationState::NotInstantiated, 1),
                (InstantiationState::Instantiated, 2),
            ])
        );
        // a1: held by its VNF's short-circuit; b1: by its own budget; b2: by nothing; the
        // memory of a VNFC that no longer exists does not count.
        assert_eq!(
            g.unhealthy_vnfcs,
            BTreeMap::from([
                (None, 1),
                (Some(EventKind::ReconcileShortCircuit), 1),
                (Some(EventKind::ReconcileBudgetExhausted), 1),
            ])
        );
        assert_eq!(g.paused_vnfs, 1, "b's pause ended at its until");
        store
            .conn
            .execute(
                "INSERT INTO maintenance_pause (scope, paused_by, since) VALUES ('*', 'x', '2026-11-27T11:00:00Z')",
                [],
            )
            .unwrap();
        assert_eq!(store.reader().state_gauges(now).unwrap().paused_vnfs, 3);
    }
}
