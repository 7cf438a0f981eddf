//! SQL of `vnfkeeper events VNF`: one ordered timeline of what happened to a VNF instance,
//! merged from the audit trail (`event`, migration V1), the intake records (`intake`, V1) and
//! the step journal (`step_journal`, V4).
//!
//! What comes from where (and why nothing is shown twice):
//! - **Events** are the backbone: requests accepted, rejected, duplicated and tasks accepted
//!   (`REQUEST_*`, `TASK_ACCEPTED`), operation state changes (`STATE_CHANGED`), reconcile
//!   decisions with their evidence (`RECONCILE_*`), maintenance pauses (`MAINTENANCE_*`, also
//!   those of `pause --all`, which have no instance id), host keys, adjusted HOTs.
//! - **Intake rows** are written in the same transaction as their request event, so they are
//!   not entries of their own: the event's entry carries its intake row (file name as stored,
//!   outcome, the problem of a rejection). Accepted, duplicate and task events name their row
//!   in their evidence (`intakeId`); a `REQUEST_REJECTED` event is paired with the rejected row
//!   of the same instance committed at the same time (both in id order). An intake row no event
//!   claims (a database written before its event existed) is an entry of its own
//!   (source `intake`).
//! - **Steps** write no events: each journal row is one entry (source `step`, kind
//!   `STEP_<STATE>`) at the time it finished, or at its start while it is still `STARTED`. The
//!   journal keeps the last attempt of a stage (`attempts` counts them) and is cleared when an
//!   operation is rolled back or re-planned, so earlier attempts are not in the timeline (their
//!   `STATE_CHANGED` events are).
//!
//! Order: by time, then (entries of the same microsecond) steps (by operation arrival, then
//! position in the plan), events (by id), intake rows without an event (by id).

use std::collections::HashMap;

use rusqlite::params;
use serde_json::Value;

use super::decode::Cells;
use super::rows::IntakeRow;
use super::{ReaderRef, Result, collect_checked};

use vnfkeeper_core::model::{
    EventKind, IntakeOutcome, LcmOperationType, OpOccId, ProblemDetails, StepState, Timestamp,
    VnfInstanceId, VnfcId,
};

/// Where a [`TimelineEntry`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimelineSource {
    /// A step journal row (first on a tie: the engine journals a step before it changes the
    /// operation's state).
    Step,
    /// A row of the audit trail (`event`).
    Event,
    /// An intake record that no event claims.
    Intake,
}

impl TimelineSource {
    /// `event`, `intake` or `step` (the `source` field of `events --json`).
    pub fn as_str(self) -> &'static str {
        match self {
            TimelineSource::Event => "event",
            TimelineSource::Intake => "intake",
            TimelineSource::Step => "step",
        }
    }
}

/// The intake record behind a request entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntakeFacts {
    /// `intake.id`.
    pub id: i64,
    /// The spool file's name as stored (escaped by `maildir::display_name`).
    pub file_name: Option<String>,
    /// What intake decided.
    pub outcome: IntakeOutcome,
    /// The envelope's idempotency key.
    pub request_id: Option<String>,
    /// Why it was rejected.
    pub problem: Option<ProblemDetails>,
    /// Who submitted the spool file, when recorded.
    pub submitter: Option<super::Submitter>,
}

impl From<IntakeRow> for IntakeFacts {
    fn from(r: IntakeRow) -> Self {
        Self {
            id: r.id,
            file_name: r.file_name,
            outcome: r.outcome,
            request_id: r.request_id,
            problem: r.problem,
            submitter: r.submitter,
        }
    }
}

/// The journal row behind a step entry (its last attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFacts {
    /// The stage's stable key in the plan, e.g. `k8s.install@<vnfcInstanceId>`.
    pub stage_key: String,
    /// 1-based position in the plan.
    pub step_no: i64,
    /// Step name, e.g. `heat.create`.
    pub name: String,
    /// VNFC the step ran on; empty for cloud steps.
    pub host: String,
    /// Where the stage is.
    pub state: StepState,
    /// Attempts so far.
    pub attempts: i64,
    /// Start of the last attempt.
    pub started_at: Timestamp,
    /// End of the last attempt; `None` while it runs (or when it was interrupted).
    pub finished_at: Option<Timestamp>,
    /// Remote exit status of the last attempt.
    pub exit_status: Option<i64>,
    /// What the check found, or the masked stderr tail of a failure.
    pub detail: Option<String>,
}

/// One entry of a VNF instance's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry {
    /// When it happened (UTC).
    pub at: Timestamp,
    /// Where it comes from.
    pub source: TimelineSource,
    /// `event.id` (source `event`).
    pub event_id: Option<i64>,
    /// The event kind (`REQUEST_ACCEPTED`, `STATE_CHANGED`, `RECONCILE_HEAL_STARTED`, …),
    /// `REQUEST_<OUTCOME>` for an intake row without event, `STEP_<STATE>` for a step.
    pub kind: String,
    /// The instance; `None` for a pause of every instance (`pause --all`).
    pub vnf_instance_id: Option<VnfInstanceId>,
    /// vnfLcmOpOccId concerned, if any.
    pub operation_id: Option<OpOccId>,
    /// Its operation type (when the operation is known).
    pub operation: Option<LcmOperationType>,
    /// vnfcInstanceId concerned (reconcile decisions, host keys).
    pub vnfc_id: Option<VnfcId>,
    /// One line for humans (a step's detail may add lines).
    pub message: String,
    /// The event's evidence, as JSON.
    pub evidence: Option<Value>,
    /// The intake record of a request entry.
    pub intake: Option<IntakeFacts>,
    /// The journal row of a step entry.
    pub step: Option<StepFacts>,
}

/// Events of one instance, and pauses of every instance, from `?2` on (`?2` is stored-form
/// text; `''` for all). Served by the index `event_by_instance` (both arms).
const EVENTS_SQL: &str =
    "SELECT e.id, e.at, e.kind, e.vnf_instance_id, e.vnf_lcm_op_occ_id, o.operation,
        e.vnfc_id, e.message, e.evidence
 FROM event e LEFT JOIN vnf_lcm_op_occ o ON o.id = e.vnf_lcm_op_occ_id
 WHERE e.vnf_instance_id = ?1 AND e.at >= ?2
 UNION ALL
 SELECT e.id, e.at, e.kind, e.vnf_instance_id, e.vnf_lcm_op_occ_id, NULL, e.vnfc_id, e.message,
        e.evidence
 FROM event e
 WHERE e.vnf_instance_id IS NULL AND e.kind IN ('MAINTENANCE_PAUSED', 'MAINTENANCE_RESUMED')
   AND e.at >= ?2";

/// Whether the instance `?1` has a row, an event or an intake record: three index searches
/// (`vnf_instance`'s key, `event_by_instance`, `intake_by_instance`).
const KNOWN_SQL: &str = "SELECT EXISTS (SELECT 1 FROM vnf_instance WHERE id = ?1)
     OR EXISTS (SELECT 1 FROM event WHERE vnf_instance_id = ?1)
     OR EXISTS (SELECT 1 FROM intake WHERE vnf_instance_id = ?1)";

/// Intake rows of the instance `?1` from `?2` on, in order, through `intake_by_instance`
/// (migration V10).
fn intake_sql() -> String {
    format!(
        "SELECT {} FROM intake WHERE vnf_instance_id = ?1 AND committed_at >= ?2 ORDER BY id",
        IntakeRow::COLUMNS
    )
}

/// Journal rows of the instance's operations (through `op_by_instance`), from `?2` on.
const STEPS_SQL: &str =
    "SELECT o.seq, j.vnf_lcm_op_occ_id, o.operation, j.stage_key, j.step_no, j.name, j.host,
        j.state, j.attempts, j.started_at, j.finished_at, j.exit_status, j.detail
 FROM vnf_lcm_op_occ o JOIN step_journal j ON j.vnf_lcm_op_occ_id = o.id
 WHERE o.vnf_instance_id = ?1 AND j.started_at IS NOT NULL
   AND COALESCE(j.finished_at, j.started_at) >= ?2";

/// Sort key: time, source, then the source's own order.
type Order = (Timestamp, TimelineSource, i64, i64);

impl ReaderRef<'_> {
    /// Whether an event of `kind` names `vnf_instance_id` (served by the `event_by_instance`
    /// index). Errors: the store's.
    pub fn has_event_of(&self, vnf_instance_id: &VnfInstanceId, kind: EventKind) -> Result<bool> {
        Ok(self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM event WHERE vnf_instance_id = ?1 AND kind = ?2)",
            params![vnf_instance_id.as_str(), kind.as_str()],
            |r| r.get(0),
        )?)
    }

    /// Whether anything names `vnf_instance_id`: its `vnf_instance` row, an event or an intake
    /// record (a rejected INSTANTIATE names an instance that never existed).
    pub fn vnf_known(&self, vnf_instance_id: &VnfInstanceId) -> Result<bool> {
        Ok(self
            .conn
            .query_row(KNOWN_SQL, [vnf_instance_id.as_str()], |r| r.get(0))?)
    }

    /// The timeline of `vnf_instance_id` (see the module documentation for its sources and
    /// order), entries at or after `since` only when given. `None` when nothing names the
    /// instance ([`Self::vnf_known`]). Errors: the store's; a row that does not decode
    /// (`StoreError::Corrupt` naming table, row and column: an evidence that is not JSON, an
    /// unknown step state).
    pub fn timeline(
        &self,
        vnf_instance_id: &VnfInstanceId,
        since: Option<Timestamp>,
    ) -> Result<Option<Vec<TimelineEntry>>> {
        if !self.vnf_known(vnf_instance_id)? {
            return Ok(None);
        }
        let since = since.map(Timestamp::to_rfc3339).unwrap_or_default();
        let mut entries: Vec<(Order, TimelineEntry)> = Vec::new();

        let mut st = self.conn.prepare(EVENTS_SQL)?;
        let rows = st.query_map(params![vnf_instance_id.as_str(), since], event_entry)?;
        let mut events = collect_checked(rows)?;
        events.sort_by_key(|e| e.event_id);

        // Intake rows of this instance, keyed by id; each event of a request claims its own.
        let mut st = self.conn.prepare(&intake_sql())?;
        let rows = st.query_map(
            params![vnf_instance_id.as_str(), since],
            IntakeRow::from_row,
        )?;
        let mut intake: HashMap<i64, IntakeRow> = collect_checked(rows)?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        let mut rejected: Vec<i64> = intake
            .values()
            .filter(|r| r.outcome == IntakeOutcome::Rejected)
            .map(|r| r.id)
            .collect();
        rejected.sort_unstable();
        for e in &mut events {
            // The event kinds written in the same transaction as an intake row.
            let Some(kind) = EventKind::parse(&e.kind) else {
                continue;
            };
            if !kind.is_request() {
                continue;
            }
            let claimed = if kind == EventKind::RequestRejected {
                rejected
                    .iter()
                    .position(|id| intake.get(id).is_some_and(|r| r.committed_at == e.at))
                    .map(|i| rejected.remove(i))
            } else {
                e.evidence
                    .as_ref()
                    .and_then(|v| v.get("intakeId"))
                    .and_then(Value::as_i64)
            };
            e.intake = claimed
                .and_then(|id| intake.remove(&id))
                .map(IntakeFacts::from);
        }
        for e in events {
            let order = (e.at, TimelineSource::Event, e.event_id.unwrap_or(0), 0);
            entries.push((order, e));
        }
        for (id, r) in intake {
            let order = (r.committed_at, TimelineSource::Intake, id, 0);
            entries.push((order, orphan_intake_entry(vnf_instance_id, r)));
        }

        let mut st = self.conn.prepare(STEPS_SQL)?;
        let rows = st.query_map(params![vnf_instance_id.as_str(), since], step_entry)?;
        for (order, mut s) in collect_checked(rows)? {
            s.vnf_instance_id = Some(vnf_instance_id.clone());
            entries.push((order, s));
        }

        entries.sort_by_key(|a| a.0);
        Ok(Some(entries.into_iter().map(|(_, e)| e).collect()))
    }
}

fn event_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<TimelineEntry>> {
    let id: i64 = r.get(0)?;
    let key = id.to_string();
    let c = Cells::new("event", &key);
    let at: String = r.get(1)?;
    let operation: Option<String> = r.get(5)?;
    let evidence: Option<String> = r.get(8)?;
    let op_id: Option<String> = r.get(4)?;
    let (kind, message) = (r.get(2)?, r.get(7)?);
    let (vnf, vnfc): (Option<String>, Option<String>) = (r.get(3)?, r.get(6)?);
    Ok((|| {
        let op_key = op_id.as_deref().unwrap_or_default();
        Ok(TimelineEntry {
            at: c.time("at", &at)?,
            source: TimelineSource::Event,
            event_id: Some(id),
            kind,
            vnf_instance_id: vnf.map(VnfInstanceId::from),
            operation: operation
                .map(|o| {
                    Cells::new("vnf_lcm_op_occ", op_key).spelling(
                        "operation",
                        &o,
                        LcmOperationType::parse,
                        "INSTANTIATE, SCALE, HEAL or TERMINATE",
                    )
                })
                .transpose()?,
            operation_id: op_id.clone().map(OpOccId::from),
            vnfc_id: vnfc.map(VnfcId::from),
            message,
            evidence: c.json("evidence", evidence, "JSON")?,
            intake: None,
            step: None,
        })
    })())
}

fn orphan_intake_entry(vnf_instance_id: &VnfInstanceId, r: IntakeRow) -> TimelineEntry {
    let file = r.file_name.as_deref().unwrap_or("(no name)");
    let message = match &r.problem {
        Some(p) => format!("spool file {file} rejected: {}", p.detail),
        None => format!("spool file {file} {}", r.outcome.as_str().to_lowercase()),
    };
    TimelineEntry {
        at: r.committed_at,
        source: TimelineSource::Intake,
        event_id: None,
        kind: format!("REQUEST_{}", r.outcome.as_str()),
        vnf_instance_id: Some(vnf_instance_id.clone()),
        operation_id: r.vnf_lcm_op_occ_id.clone(),
        operation: None,
        vnfc_id: None,
        message,
        evidence: None,
        intake: Some(r.into()),
        step: None,
    }
}

fn step_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<(Order, TimelineEntry)>> {
    let seq: i64 = r.get(0)?;
    let op_id: String = r.get(1)?;
    let operation: String = r.get(2)?;
    let stage_key: String = r.get(3)?;
    let state: String = r.get(7)?;
    let started: String = r.get(9)?;
    let finished: Option<String> = r.get(10)?;
    let (step_no, name, host, attempts, exit_status, detail): (
        i64,
        String,
        String,
        i64,
        Option<i64>,
        Option<String>,
    ) = (
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(8)?,
        r.get(11)?,
        r.get(12)?,
    );
    let row = format!("({op_id}, {stage_key})");
    Ok((|| {
        let c = Cells::new("step_journal", &row);
        let state = c.spelling(
            "state",
            &state,
            StepState::parse,
            "PENDING, STARTED, DONE, SKIPPED or FAILED",
        )?;
        let operation = Cells::new("vnf_lcm_op_occ", &op_id).spelling(
            "operation",
            &operation,
            LcmOperationType::parse,
            "INSTANTIATE, SCALE, HEAL or TERMINATE",
        )?;
        let started_at = c.time("started_at", &started)?;
        let finished_at = c.opt_time("finished_at", finished)?;
        let step = StepFacts {
            stage_key,
            step_no,
            name,
            host,
            state,
            attempts,
            started_at,
            finished_at,
            exit_status,
            detail,
        };
        let at = finished_at.unwrap_or(started_at);
        let entry = TimelineEntry {
            at,
            source: TimelineSource::Step,
            event_id: None,
            kind: format!("STEP_{}", state.as_str()),
            vnf_instance_id: None,
            operation_id: Some(OpOccId::from(&op_id)),
            operation: Some(operation),
            vnfc_id: (!step.host.is_empty()).then(|| VnfcId::from(&step.host)),
            message: step_message(&step),
            evidence: None,
            intake: None,
            step: Some(step),
        };
        Ok(((at, TimelineSource::Step, seq, step_no), entry))
    })())
}

/// `step 3 heat.create: done (attempt 2, exit 0): <detail>`.
fn step_message(s: &StepFacts) -> String {
    let mut m = format!(
        "step {} {}: {}",
        s.step_no,
        s.name,
        s.state.as_str().to_lowercase()
    );
    let mut extra = Vec::new();
    if s.attempts > 1 {
        extra.push(format!("attempt {}", s.attempts));
    }
    if let Some(x) = s.exit_status {
        extra.push(format!("exit {x}"));
    }
    if !extra.is_empty() {
        m.push_str(&format!(" ({})", extra.join(", ")));
    }
    let state = s.state.as_str().to_lowercase();
    if let Some(d) = s
        .detail
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty() && *d != state)
    {
        m.push_str(&format!(": {d}"));
    }
    m
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{NewEvent, NewIntake, NewOperation, RequestBody, Store};
    use vnfkeeper_core::model::{MaintenancePause, PauseScope, StageKey, VnfcId};

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    fn intake<'a>(
        file: &'a str,
        outcome: &'a str,
        vnf: &'a str,
        op: Option<&'a str>,
        problem: Option<&'a str>,
    ) -> NewIntake<'a> {
        NewIntake {
            file_name: file,
            content_sha256: "00",
            request_id: None,
            outcome,
            vnf_instance_id: Some(vnf),
            vnf_lcm_op_occ_id: op,
            problem,
            warnings: None,
        }
    }

    /// The timeline's queries and the verbs' poll by file name read indexes only: none scans
    /// `intake`, `event`, `vnf_lcm_op_occ` or `step_journal`, tables that keep the whole history.
    #[test]
    fn the_timeline_and_the_file_poll_search_indexes() {
        // Without statistics, as the daemon's database has none (it never runs ANALYZE).
        let (_dir, store) = store();
        let file = crate::store::intake_of_file_sql();
        for sql in [KNOWN_SQL, EVENTS_SQL, &intake_sql(), STEPS_SQL, &file] {
            let sql = sql.replace("?1", "'vnf-1'").replace("?2", "''");
            let mut st = store
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            let plan: Vec<String> = st
                .query_map([], |r| r.get::<_, String>(3))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            for d in &plan {
                let scan =
                    d.starts_with("SCAN ") && !d.contains(" INDEX ") && d != "SCAN CONSTANT ROW";
                assert!(!scan, "a full scan in {plan:?} for {sql}");
            }
        }
    }

    /// vnf-1's history at 06:00 … 06:09 plus noise of vnf-2, written as intake, the engine,
    /// reconcile and `pause` write it.
    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let problem =
            json!({"status": 400, "title": "Bad Request", "detail": "flavourId: unknown"})
                .to_string();
        store
            .write(|tx| {
                // 06:00 a rejected INSTANTIATE, and vnf-2's accepted one at the same instant.
                let at = t("2026-11-24T06:00:00Z");
                tx.insert_intake(
                    &intake("bad.json", "REJECTED", "vnf-1", None, Some(&problem)),
                    at,
                )?;
                tx.append_event(
                    &NewEvent {
                        vnf_instance_id: Some(&VnfInstanceId::from("vnf-1")),
                        message: "spool file bad.json rejected: flavourId: unknown",
                        evidence: Some(&problem),
                        ..NewEvent::of(EventKind::RequestRejected)
                    },
                    at,
                )?;
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-2"), at)?;
                tx.append_event(
                    &NewEvent {
                        vnf_instance_id: Some(&VnfInstanceId::from("vnf-2")),
                        message: "other",
                        ..NewEvent::of(EventKind::RequestAccepted)
                    },
                    at,
                )?;
                // 06:01 the accepted one.
                let at = t("2026-11-24T06:01:00Z");
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), at)?;
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from("op-1"),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::Instantiate,
                        operation_params: &RequestBody::split(LcmOperationType::Instantiate, "{}"),
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    at,
                )?;
                let id = tx.insert_intake(
                    &intake("good.json", "ACCEPTED", "vnf-1", Some("op-1"), None),
                    at,
                )?;
                let ev = json!({"file": "good.json", "intakeId": id}).to_string();
                tx.append_event(
                    &NewEvent {
                        vnf_instance_id: Some(&VnfInstanceId::from("vnf-1")),
                        vnf_lcm_op_occ_id: Some(&OpOccId::from("op-1")),
                        message: "INSTANTIATE request accepted from spool file good.json",
                        evidence: Some(&ev),
                        ..NewEvent::of(EventKind::RequestAccepted)
                    },
                    at,
                )?;
                // 06:02 an intake row no event claims (an older database).
                tx.insert_intake(
                    &intake("old.json", "DUPLICATE", "vnf-1", Some("op-1"), None),
                    t("2026-11-24T06:02:00Z"),
                )?;
                // 06:03 … 06:05 two steps; the second still runs.
                tx.journal_start(
                    &OpOccId::from("op-1"),
                    &StageKey::from("heat.create"),
                    1,
                    "heat.create",
                    "",
                    t("2026-11-24T06:03:00Z"),
                )?;
                tx.journal_start(
                    &OpOccId::from("op-1"),
                    &StageKey::from("k8s.install@c1"),
                    2,
                    "k8s.install",
                    "c1",
                    t("2026-11-24T06:04:00Z"),
                )?;
                tx.journal_finish(
                    &OpOccId::from("op-1"),
                    &StageKey::from("heat.create"),
                    StepState::Done,
                    None,
                    "stack CREATE_COMPLETE",
                    t("2026-11-24T06:05:00Z"),
                )?;
                // 06:06 a step that ends in the same microsecond as the next event.
                let at = t("2026-11-24T06:06:00Z");
                tx.journal_start(
                    &OpOccId::from("op-1"),
                    &StageKey::from("heat.wait"),
                    3,
                    "heat.wait",
                    "",
                    at,
                )?;
                tx.journal_finish(
                    &OpOccId::from("op-1"),
                    &StageKey::from("heat.wait"),
                    StepState::Done,
                    None,
                    "done",
                    at,
                )?;
                // 06:06 a reconcile decision with its evidence; 06:07 a pause of every instance.
                tx.append_event(
                    &NewEvent {
                        vnf_instance_id: Some(&VnfInstanceId::from("vnf-1")),
                        vnfc_id: Some(&VnfcId::from("c1")),
                        message: "server SHUTOFF, first seen",
                        evidence: Some(r#"{"pass": 7, "server": {"status": "SHUTOFF"}}"#),
                        ..NewEvent::of(EventKind::ReconcileDeferredGrace)
                    },
                    t("2026-11-24T06:06:00Z"),
                )?;
                Ok(())
            })
            .unwrap();
        let all = MaintenancePause {
            scope: PauseScope::All,
            paused_by: "uid 0 (root)".into(),
            reason: Some("cloud upgrade".into()),
            since: t("2026-11-24T06:07:00Z"),
            until: None,
        };
        store
            .write(|tx| tx.set_maintenance_pause(&all, all.since).map(|_| ()))
            .unwrap();
        (dir, store)
    }

    #[test]
    fn the_timeline_merges_events_intake_and_steps_in_time_order() {
        let (_dir, store) = store();
        let q = store.reader();
        let tl = q
            .timeline(&VnfInstanceId::from("vnf-1"), None)
            .unwrap()
            .unwrap();
        let kinds: Vec<(&str, &str)> = tl
            .iter()
            .map(|e| (e.source.as_str(), e.kind.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("event", "REQUEST_REJECTED"),
                ("event", "REQUEST_ACCEPTED"),
                ("intake", "REQUEST_DUPLICATE"),
                ("step", "STEP_STARTED"),
                ("step", "STEP_DONE"),
                ("step", "STEP_DONE"),
                ("event", "RECONCILE_DEFERRED_GRACE"),
                ("event", "MAINTENANCE_PAUSED"),
            ]
        );
        // Each request event carries its own intake row; none is shown twice.
        let rejected = tl[0].intake.as_ref().unwrap();
        assert_eq!(rejected.file_name.as_deref(), Some("bad.json"));
        assert_eq!(rejected.problem.as_ref().unwrap().title, "Bad Request");
        let accepted = tl[1].intake.as_ref().unwrap();
        assert_eq!(
            (accepted.file_name.as_deref(), accepted.outcome),
            (Some("good.json"), IntakeOutcome::Accepted)
        );
        assert_eq!(tl[1].operation, Some(LcmOperationType::Instantiate));
        assert_eq!(
            tl[2].intake.as_ref().unwrap().file_name.as_deref(),
            Some("old.json")
        );
        // The running step at its start, the finished one at its end.
        let running = tl[3].step.as_ref().unwrap();
        assert_eq!(
            (running.name.as_str(), running.finished_at),
            ("k8s.install", None)
        );
        assert_eq!(tl[3].vnfc_id.as_ref().map(VnfcId::as_str), Some("c1"));
        assert_eq!(tl[4].at, t("2026-11-24T06:05:00Z"));
        assert_eq!(
            tl[4].step.as_ref().unwrap().started_at,
            t("2026-11-24T06:03:00Z")
        );
        assert!(
            tl[4].message.contains("stack CREATE_COMPLETE"),
            "{}",
            tl[4].message
        );
        assert_eq!(tl[5].message, "step 3 heat.wait: done", "first on a tie");
        assert_eq!(
            tl[6].evidence.as_ref().unwrap()["server"]["status"],
            "SHUTOFF"
        );
        assert_eq!(tl[7].vnf_instance_id, None);
        assert!(tl.iter().all(|e| e.message != "other"));

        // --since: from 06:04 on (the running step started then).
        let tl = q
            .timeline(
                &VnfInstanceId::from("vnf-1"),
                Some(t("2026-11-24T06:04:00Z")),
            )
            .unwrap()
            .unwrap();
        let kinds: Vec<&str> = tl.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "STEP_STARTED",
                "STEP_DONE",
                "STEP_DONE",
                "RECONCILE_DEFERRED_GRACE",
                "MAINTENANCE_PAUSED"
            ]
        );
        assert!(
            q.timeline(
                &VnfInstanceId::from("vnf-1"),
                Some(t("2026-11-25T00:00:00Z"))
            )
            .unwrap()
            .unwrap()
            .is_empty()
        );

        // Unknown: nothing names it. A pause of every instance does not make one known.
        assert_eq!(
            q.timeline(&VnfInstanceId::from("vnf-9"), None).unwrap(),
            None
        );
        assert!(q.vnf_known(&VnfInstanceId::from("vnf-2")).unwrap());
    }

    #[test]
    fn an_evidence_that_is_not_json_is_an_error_naming_the_row() {
        let (_dir, mut store) = store();
        store
            .write(|tx| {
                tx.append_event(
                    &NewEvent {
                        vnf_instance_id: Some(&VnfInstanceId::from("vnf-1")),
                        message: "m",
                        evidence: Some("{not json"),
                        ..NewEvent::of(EventKind::StateChanged)
                    },
                    t("2026-11-24T06:08:00Z"),
                )
            })
            .unwrap();
        match store.reader().timeline(&VnfInstanceId::from("vnf-1"), None) {
            Err(crate::store::StoreError::Corrupt {
                table: "event",
                column: "evidence",
                ..
            }) => {}
            other => panic!("expected Corrupt event.evidence, got {other:?}"),
        }
    }
}
