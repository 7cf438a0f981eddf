//! The reconcile loop against the testbed cloud with fault injection: a plain VNF of the
//! pv-k8s-cluster package (no cluster parameters: cloud steps only, servers without hosts) is
//! instantiated by the engine; then passes run in-process with an explicit `now`, so grace
//! periods and backoff are tested without waiting. The engine side of HEAL is not asserted
//! here (it is built separately): these tests assert the HEAL operation the loop starts, its
//! HealVnfRequest and its audit rows.

use crate::support;
use vnfkeeper_core::model::{
    LcmOperationType, MaintenancePause, OpOccId, OperationState, PauseScope, Timestamp,
    VnfInstanceId,
};

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use testbed::cloud::{CloudOptions, FaultRule, Testbed};
use vnfkeeper::cloud::OpenStackCloud;
use vnfkeeper::engine::{Engine, EngineLimits};
use vnfkeeper::intake::spool::{self, IntakeContext, Outcome, Spool};
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, PassReport, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::{Db, Store};
use vnfkeeper_core::policy::{MaxUnhealthy, Policy};

struct Bed {
    _dir: tempfile::TempDir,
    tb: Testbed,
    db: Db,
    vnf: VnfInstanceId,
    rec: Reconciler<OpenStackCloud>,
    engine: Engine<OpenStackCloud>,
}

fn at(secs: i64) -> Timestamp {
    Timestamp(chrono::Utc::now() + chrono::Duration::seconds(secs))
}

impl Bed {
    /// A record-only testbed cloud, an instantiated plain VNF (`level`: instantiation level).
    async fn new(level: Option<&str>, policy: Policy) -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let tb = Testbed::start(CloudOptions::no_hosts(dir.path()))
            .await
            .unwrap();
        let db = Db::new(Store::open(&dir.path().join("state.db")).unwrap());
        let cloud = Arc::new(
            OpenStackCloud::connect(tb.clouds_yaml(), "testbed", Duration::from_secs(30))
                .await
                .unwrap(),
        );
        let remote = Arc::new(SshRemote::new(SshConfig::default()));
        let engine = Engine::new(
            db.clone(),
            cloud.clone(),
            remote.clone(),
            EngineLimits::default(),
        );
        let fixture =
            support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
        let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        env["request"]["additionalParams"]
            .as_object_mut()
            .unwrap()
            .remove("k8s_cluster_installation_param");
        if let Some(l) = level {
            env["request"]["instantiationLevelId"] = json!(l);
        }
        let (op, vnf) = submit(dir.path(), &db, &env);
        let state = engine.run(&op).await.unwrap();
        assert_eq!(state, OperationState::Completed);
        let rec = Reconciler::new(
            cloud,
            remote,
            policy,
            ProbeSettings {
                timeout: Duration::from_secs(10),
                max_parallel_hosts: 16,
            },
        );
        Bed {
            _dir: dir,
            tb,
            db,
            vnf,
            rec,
            engine,
        }
    }

    async fn pass(&self, kind: PassKind, now: Timestamp) -> PassReport {
        let snap = self
            .db
            .with(|s| reconcile::snapshot(s.reader(), None))
            .unwrap();
        let mut report = self.rec.evaluate(&snap, kind, now).await;
        self.db
            .write(|tx| reconcile::record(tx, &mut report, now))
            .unwrap();
        report
    }

    fn servers_of(&self, vdu: &str) -> Vec<String> {
        self.db
            .with(|s| s.reader().vnfcs(&self.vnf))
            .unwrap()
            .into_iter()
            .filter(|v| v.vdu_id == vdu)
            .map(|v| v.server_id.unwrap())
            .collect()
    }

    fn heals(&self) -> Vec<vnfkeeper::store::OperationRow> {
        self.db
            .with(|s| s.reader().operations(Some(self.vnf.as_str())))
            .unwrap()
            .into_iter()
            .filter(|o| o.operation == LcmOperationType::Heal)
            .collect()
    }

    /// `(kind, vnfc_id, op id, evidence)` of the reconcile audit rows, through the view.
    fn decisions(&self) -> Vec<(String, Option<String>, Option<String>, Value)> {
        let path = self._dir.path().join("state.db");
        let conn = rusqlite_conn(&path);
        let mut st = conn
            .prepare("SELECT decision, vnfc_id, vnf_lcm_op_occ_id, evidence FROM reconcile_decisions ORDER BY id")
            .unwrap();
        st.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or(Value::Null),
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    fn fail_operation(&self, id: &str) {
        for to in [
            OperationState::Processing,
            OperationState::FailedTemp,
            OperationState::Failed,
        ] {
            self.db
                .write(|tx| tx.set_operation_state(id, to, None, Timestamp(chrono::Utc::now())))
                .unwrap();
        }
    }
}

/// Puts envelope `env` through intake (the spool under `dir`, as the daemon would):
/// (vnfLcmOpOccId, vnfInstanceId) of the accepted operation.
fn submit(dir: &std::path::Path, db: &Db, env: &Value) -> (OpOccId, VnfInstanceId) {
    let spool = Spool::open(&dir.join("spool")).unwrap();
    let path = spool.submit(env.to_string().as_bytes()).unwrap();
    let root = support::repo_root();
    let ctx = IntakeContext {
        packages_dir: &root,
        package_store: &dir.join("package-store"),
        cloud_configured: true,
    };
    let out = db
        .with(|s| spool::process(&spool, s, &[path], &ctx, Timestamp(chrono::Utc::now())))
        .unwrap();
    match &out[0] {
        Outcome::Accepted {
            vnf_lcm_op_occ_id,
            vnf_instance_id,
            ..
        } => (vnf_lcm_op_occ_id.clone(), vnf_instance_id.clone()),
        o => panic!("{o:?}"),
    }
}

fn rusqlite_conn(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

fn vnfc_of_server(bed: &Bed, server: &str) -> String {
    bed.db
        .with(|s| s.reader().vnfcs(&bed.vnf))
        .unwrap()
        .into_iter()
        .find(|v| v.server_id.as_deref() == Some(server))
        .unwrap()
        .id
        .into_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_5xx_heals_nothing_then_a_worker_in_error_gets_an_automatic_heal() {
    let bed = Bed::new(None, Policy::default()).await;
    // Healthy cloud: nothing to do, nothing recorded.
    let r = bed.pass(PassKind::Cloud, at(0)).await;
    assert!(r.started.is_empty() && r.cloud_error.is_none());
    assert!(bed.decisions().is_empty(), "{:?}", bed.decisions());

    // Nova answers 503 for the whole pass, while a worker is really in ERROR: nothing healed,
    // every VNFC recorded as unknown.
    let worker = bed.servers_of("workerNode")[0].clone();
    bed.tb
        .cloud()
        .inject_server_error(&worker, "hypervisor lost")
        .await
        .unwrap();
    bed.tb.cloud().add_api_fault(
        "compute",
        FaultRule {
            status: Some(503),
            ..FaultRule::default()
        },
    );
    let r = bed.pass(PassKind::Cloud, at(1)).await;
    assert!(r.cloud_error.is_some());
    assert!(r.started.is_empty());
    assert!(bed.heals().is_empty());
    let d = bed.decisions();
    assert_eq!(d.len(), 4, "{d:?}");
    assert!(d.iter().all(|(k, ..)| k == "DEFERRED_UNKNOWN"), "{d:?}");
    // A second failing pass repeats nothing in the audit trail.
    bed.pass(PassKind::Cloud, at(2)).await;
    assert_eq!(bed.decisions().len(), 4);
    // Nothing was read, so the recorded Nova status stays the engine's.
    let vnfc = vnfc_of_server(&bed, &worker);
    let nova = |bed: &Bed| {
        let row = bed
            .db
            .with(|s| s.reader().vnfcs(&bed.vnf))
            .unwrap()
            .into_iter()
            .find(|v| v.id.as_str() == vnfc)
            .unwrap();
        let at = bed
            .db
            .with(|s| s.reader().vnfc_synced_at(bed.vnf.as_str()))
            .unwrap()[vnfc.as_str()];
        (row.server_status, at)
    };
    assert_eq!(nova(&bed).0.as_deref(), Some("ACTIVE"));

    // The API recovers: the worker in ERROR is healed at once (confirmed by Nova).
    bed.tb.cloud().clear_api_faults(None);
    let t3 = at(3);
    let r = bed.pass(PassKind::Cloud, t3).await;
    assert_eq!(r.started.len(), 1, "{:#?}", r.outcomes);
    // The cloud-only pass stored the status it read, with its time.
    let (status, observed) = nova(&bed);
    assert_eq!(status.as_deref(), Some("ERROR"));
    assert_eq!(observed.to_rfc3339(), t3.to_rfc3339());
    let heals = bed.heals();
    assert_eq!(heals.len(), 1);
    let op = &heals[0];
    assert!(op.is_automatic_invocation);
    assert_eq!(op.operation_state, OperationState::Starting);
    let (params, _) = bed
        .db
        .with(|s| s.reader().operation_params(&op.id))
        .unwrap()
        .unwrap();
    let params: Value = serde_json::from_str(&params).unwrap();
    assert_eq!(params["vnfcInstanceId"], json!([vnfc]));
    assert!(
        params["cause"].as_str().unwrap().contains("ERROR"),
        "{params}"
    );
    assert!(
        params.get("additionalParams").is_none(),
        "a rebuild, not a repair: {params}"
    );
    let d = bed.decisions();
    let started: Vec<_> = d.iter().filter(|(k, ..)| k == "HEAL_STARTED").collect();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].1.as_deref(), Some(vnfc.as_str()));
    assert_eq!(started[0].2.as_deref(), Some(op.id.as_str()));
    assert_eq!(started[0].3["cloud"]["state"], "confirmed");
    // One heal in flight per VNF: the next pass starts nothing more.
    let r = bed.pass(PassKind::Cloud, at(4)).await;
    assert!(r.started.is_empty());
    assert_eq!(bed.heals().len(), 1);
    assert!(bed.decisions().iter().any(|(k, ..)| k == "IN_FLIGHT"));
    bed.tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_three_workers_failing_trips_max_unhealthy() {
    // instantiation_level_2: 3 masters, 3 workers, 1 storage server; 40 % of 7 = 2 allowed.
    let bed = Bed::new(Some("instantiation_level_2"), Policy::default()).await;
    let workers = bed.servers_of("workerNode");
    assert_eq!(workers.len(), 3);
    for w in &workers {
        bed.tb
            .cloud()
            .inject_server_error(w, "rack down")
            .await
            .unwrap();
    }
    let r = bed.pass(PassKind::Cloud, at(0)).await;
    assert!(r.started.is_empty());
    assert!(bed.heals().is_empty());
    let d = bed.decisions();
    let sc: Vec<_> = d.iter().filter(|(k, ..)| k == "SHORT_CIRCUIT").collect();
    assert_eq!(sc.len(), 1, "{d:?}");
    assert_eq!(sc[0].1, None);
    assert_eq!(sc[0].3["unhealthy"].as_array().unwrap().len(), 3);
    assert_eq!(sc[0].3["allowed"], 2);
    // The alert flag of the view.
    let conn = rusqlite_conn(&bed._dir.path().join("state.db"));
    let alerts: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM reconcile_decisions WHERE alert = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(alerts, 1);
    bed.tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_failing_stops_after_its_retry_budget() {
    let policy = Policy {
        retry_budget: 2,
        retry_backoff: Duration::from_secs(10),
        max_unhealthy: MaxUnhealthy::Percent(100),
        ..Policy::default()
    };
    let bed = Bed::new(None, policy).await;
    let worker = bed.servers_of("workerNode")[0].clone();
    bed.tb
        .cloud()
        .inject_server_error(&worker, "bad host")
        .await
        .unwrap();
    // Attempt 1 at once.
    let r = bed.pass(PassKind::Cloud, at(0)).await;
    assert_eq!(r.started.len(), 1);
    bed.fail_operation(r.started[0].1.as_str());
    // The server is still in ERROR: attempt 2 waits 10 s × 2^1 = 20 s.
    let r = bed.pass(PassKind::Cloud, at(5)).await;
    assert!(r.started.is_empty());
    assert!(
        bed.decisions()
            .iter()
            .any(|(k, ..)| k == "DEFERRED_BACKOFF")
    );
    let r = bed.pass(PassKind::Cloud, at(21)).await;
    assert_eq!(r.started.len(), 1, "{:#?}", r.outcomes);
    bed.fail_operation(r.started[0].1.as_str());
    // Budget of 2 used up: an alert, no third heal, however long we wait.
    let r = bed.pass(PassKind::Cloud, at(10_000)).await;
    assert!(r.started.is_empty());
    assert_eq!(bed.heals().len(), 2);
    let d = bed.decisions();
    let alert: Vec<_> = d.iter().filter(|(k, ..)| k == "BUDGET_EXHAUSTED").collect();
    assert_eq!(alert.len(), 1, "{d:?}");
    assert_eq!(alert[0].3["counters"]["heal_attempts"], 2);
    // Once: the lasting condition is not recorded again.
    bed.pass(PassKind::Cloud, at(10_015)).await;
    assert_eq!(
        bed.decisions()
            .iter()
            .filter(|(k, ..)| k == "BUDGET_EXHAUSTED")
            .count(),
        1
    );
    bed.tb.shutdown().await;
}

/// `(kind, message, evidence)` of the MAINTENANCE_* events, oldest first.
fn pause_events(bed: &Bed) -> Vec<(String, String, Value)> {
    let conn = rusqlite_conn(&bed._dir.path().join("state.db"));
    let mut st = conn
        .prepare(
            "SELECT kind, message, evidence FROM event WHERE kind LIKE 'MAINTENANCE%' ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or(Value::Null),
        ))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn pause(bed: &Bed, scope: PauseScope, until: Option<Timestamp>) -> MaintenancePause {
    let p = MaintenancePause {
        scope,
        paused_by: "uid 0 (root)".into(),
        reason: Some("replacing a line card".into()),
        since: at(0),
        until,
    };
    bed.db
        .write(|tx| tx.set_maintenance_pause(&p, at(0)))
        .unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_vnf_is_recorded_as_paused_and_healed_in_the_first_pass_after_resume() {
    let bed = Bed::new(None, Policy::default()).await;
    pause(&bed, PauseScope::Vnf(bed.vnf.clone()), None);
    let worker = bed.servers_of("workerNode")[0].clone();
    bed.tb
        .cloud()
        .inject_server_error(&worker, "hypervisor lost")
        .await
        .unwrap();
    for n in 1..=2 {
        let r = bed.pass(PassKind::Cloud, at(n)).await;
        assert!(r.started.is_empty(), "pass {n}: {:#?}", r.outcomes);
    }
    assert!(bed.heals().is_empty());
    let d = bed.decisions();
    assert_eq!(d.len(), 1, "one row for the lasting condition: {d:?}");
    assert_eq!(d[0].0, "PAUSED");
    assert_eq!(
        d[0].1.as_deref(),
        Some(vnfc_of_server(&bed, &worker).as_str())
    );
    assert_eq!(
        d[0].3["cloud"]["state"], "confirmed",
        "the evidence: {}",
        d[0].3
    );
    assert_eq!(d[0].3["pause"]["paused_by"], "uid 0 (root)");
    // Observation goes on: two failed observations counted.
    assert_eq!(d[0].3["counters"]["cloud_failures"], 1);

    let lifted = bed
        .db
        .write(|tx| {
            tx.lift_maintenance_pause(&PauseScope::Vnf(bed.vnf.clone()), "uid 0 (root)", at(3))
        })
        .unwrap();
    assert!(lifted.is_some());
    let r = bed.pass(PassKind::Cloud, at(4)).await;
    assert_eq!(r.started.len(), 1, "{:#?}", r.outcomes);
    assert_eq!(bed.heals().len(), 1);
    let e = pause_events(&bed);
    let kinds: Vec<&str> = e.iter().map(|(k, ..)| k.as_str()).collect();
    assert_eq!(kinds, ["MAINTENANCE_PAUSED", "MAINTENANCE_RESUMED"]);
    assert_eq!(e[1].2["expired"], false);
    bed.tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_until_a_time_ends_by_itself_and_the_heal_follows() {
    let bed = Bed::new(None, Policy::default()).await;
    // The global pause, ending at +60 s.
    let p = pause(&bed, PauseScope::All, Some(at(60)));
    let worker = bed.servers_of("workerNode")[0].clone();
    bed.tb
        .cloud()
        .inject_server_error(&worker, "hypervisor lost")
        .await
        .unwrap();
    let r = bed.pass(PassKind::Cloud, at(30)).await;
    assert!(r.started.is_empty() && r.expired_pauses.is_empty());
    assert_eq!(bed.decisions()[0].0, "PAUSED");
    let stored = bed.db.with(|s| s.reader().maintenance_pauses()).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        (&stored[0].scope, stored[0].until.map(|u| u.0.timestamp())),
        (&p.scope, p.until.map(|u| u.0.timestamp()))
    );
    let p = stored[0].clone();
    // The pass after `until`: the pause is removed with an event, and the heal starts.
    let r = bed.pass(PassKind::Cloud, at(61)).await;
    assert_eq!(r.expired_pauses, vec![p]);
    assert_eq!(r.started.len(), 1, "{:#?}", r.outcomes);
    assert!(
        bed.db
            .with(|s| s.reader().maintenance_pauses())
            .unwrap()
            .is_empty()
    );
    let e = pause_events(&bed);
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(e[1].0, "MAINTENANCE_RESUMED");
    assert_eq!(e[1].2["expired"], true);
    assert_eq!(e[1].2["pause"]["scope"], "*");
    bed.tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_heal_of_a_paused_vnf_runs() {
    let bed = Bed::new(None, Policy::default()).await;
    pause(&bed, PauseScope::Vnf(bed.vnf.clone()), None);
    let worker = bed.servers_of("workerNode")[0].clone();
    let vnfc = vnfc_of_server(&bed, &worker);
    let env = json!({
        "operation": "HEAL",
        "vnfInstanceId": bed.vnf,
        "request": {"vnfcInstanceId": [vnfc], "cause": "operator: replace the worker"},
    });
    let (op, _) = submit(bed._dir.path(), &bed.db, &env);
    let state = bed.engine.run(&op).await.unwrap();
    assert_eq!(state, OperationState::Completed);
    assert_ne!(
        bed.servers_of("workerNode")[0],
        worker,
        "the server was replaced"
    );
    // Still paused: the operator's heal did not lift it.
    assert_eq!(
        bed.db
            .with(|s| s.reader().maintenance_pauses())
            .unwrap()
            .len(),
        1
    );
    bed.tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instantiate_with_maintenance_pause_starts_paused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(Store::open(&dir.path().join("state.db")).unwrap());
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]["maintenance_pause"] =
        json!({"reason": "burn-in", "until": "2099-01-01T00:00:00Z"});
    let (op, vnf) = submit(dir.path(), &db, &env);
    let pauses = db.with(|s| s.reader().maintenance_pauses()).unwrap();
    assert_eq!(pauses.len(), 1);
    assert_eq!(pauses[0].scope, PauseScope::Vnf(vnf));
    assert_eq!(pauses[0].paused_by, format!("INSTANTIATE request {op}"));
    assert_eq!(pauses[0].reason.as_deref(), Some("burn-in"));
    assert_eq!(
        pauses[0].until,
        Some(Timestamp::parse("2099-01-01T00:00:00Z").unwrap())
    );
}
