//! Companion mode against the testbed's Tacker stand-in (no hosts, no root): the daemon keeps
//! exactly one subscription of its own in Tacker (created at start after Tacker's callback test,
//! re-created after being deleted in Tacker, its id stored), and records Tacker's operations by
//! polling Tacker's API — with notification delivery switched off entirely, the same end state
//! (each op occ once, its states once, the follow-up it calls for) is reached as with
//! notifications on. No credential reaches the daemon's log.

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::tacker::{Operator, VNFD, register_pv_package};
use support::{Install, free_port, wait_until};
use testbed::cloud::tacker::NotifyFaults;
use testbed::cloud::{CloudOptions, Testbed};
use vnfkeeper::store::{RecordedOpOcc, Store};
use vnfkeeper_core::model::InstantiationState;
use vnfkeeper_core::model::OperationState;
use vnfkeeper_core::tacker::Followup;

const USER: &str = "tacker-notify";
const PASSWORD: &str = "Cb-S3cret!companion";

/// A daemon in companion mode against `tb` (poll every 5 s), and its callback URI.
fn daemon(install: &Install, tb: &Testbed) -> (support::Daemon, String) {
    daemon_with(install, tb, None)
}

/// [`daemon`], with `[tacker.packages]` mapping [`VNFD`] to `package` when given.
fn daemon_with(
    install: &Install,
    tb: &Testbed,
    package: Option<&Path>,
) -> (support::Daemon, String) {
    let port = free_port();
    let (mut text, _) =
        support::tacker::companion_config(install, tb, port, (USER, PASSWORD), VNFD);
    std::fs::write(&install.config, &text).unwrap();
    // `config check` refuses a clouds.yaml entry that does not exist (`tacker.cloud`).
    std::fs::write(
        &install.config,
        format!("{text}cloud = \"no-such-entry\"\n"),
    )
    .unwrap();
    let check = install.cli(&["config", "check"]);
    assert!(!check.status.success());
    let err = String::from_utf8_lossy(&check.stderr);
    assert!(err.contains("tacker.cloud"), "{err}");
    if let Some(p) = package {
        text.push_str(&format!(
            "\n[tacker.packages]\n\"{VNFD}\" = \"{}\"\n",
            p.display()
        ));
    }
    std::fs::write(&install.config, &text).unwrap();
    let check = install.cli(&["config", "check"]);
    assert!(check.status.success(), "{check:?}");
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(
        out.contains("callback_uri = ") && !out.contains(PASSWORD),
        "{out}"
    );
    (
        install.start(),
        format!("http://127.0.0.1:{port}/vnfkeeper/notifications"),
    )
}

fn store(db: &Path) -> Store {
    Store::open(db).unwrap()
}

fn stored_subscription(db: &Path) -> Option<String> {
    store(db)
        .reader()
        .tacker_subscription()
        .unwrap()
        .map(|s| s.subscription_id)
}

/// Another subscriber's callback (answers everything 204); its URL.
async fn other_subscriber() -> String {
    let app = axum::Router::new().route(
        "/cb",
        axum::routing::get(|| async { axum::http::StatusCode::NO_CONTENT })
            .post(|| async { axum::http::StatusCode::NO_CONTENT }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/cb", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    url
}

/// (operation, final state, states in order, follow-up) of the recorded occurrences of `inst`.
fn end_state(
    db: &Path,
    inst: &str,
) -> Vec<(String, OperationState, Vec<OperationState>, Followup)> {
    store(db)
        .reader()
        .tacker_op_occs()
        .unwrap()
        .into_iter()
        .filter(|o: &RecordedOpOcc| o.occ.vnf_instance_id == inst)
        .map(|o| {
            (
                o.occ.operation,
                o.occ.state,
                o.states.into_iter().map(|(s, _)| s).collect(),
                o.followup,
            )
        })
        .collect()
}

fn both_completed(db: &Path, inst: &str) -> bool {
    let e = end_state(db, inst);
    e.len() == 2 && e.iter().all(|(_, s, ..)| *s == OperationState::Completed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_is_kept_exactly_once_and_recreated_after_deletion() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    register_pv_package(&tb);
    let (mut d, callback) = daemon(&install, &tb);
    let db = install.database.clone();
    assert!(
        wait_until(Duration::from_secs(30), || stored_subscription(&db)
            .is_some()),
        "no subscription stored: {}",
        d.log_text()
    );
    let first = stored_subscription(&db).unwrap();
    // Tacker's callback test passed (the stand-in refuses the subscription otherwise).
    assert_eq!(tb.cloud().tacker_subscription_ids(), vec![first.clone()]);

    // Deleted in Tacker → re-created by the next sync (poll_interval_secs = 5), stored.
    assert!(tb.cloud().tacker_delete_subscription(&first));
    assert!(
        wait_until(Duration::from_secs(30), || {
            let ids = tb.cloud().tacker_subscription_ids();
            ids.len() == 1 && ids[0] != first && stored_subscription(&db).as_ref() == Some(&ids[0])
        }),
        "not re-created: {:?}\n{}",
        tb.cloud().tacker_subscription_ids(),
        d.log_text()
    );
    // The next syncs keep it: still exactly one.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(tb.cloud().tacker_subscription_ids().len(), 1);
    let kept = stored_subscription(&db).unwrap();

    // A second copy of ours made by hand (same callbackUri; Tacker's callback test passes) is
    // deleted by the next sync; another subscriber's is left alone.
    let op = Operator::login(&tb).await;
    let sub = |uri: &str| {
        json!({"callbackUri": uri, "authentication": {"authType": ["BASIC"],
            "paramsBasic": {"userName": USER, "password": PASSWORD}}})
    };
    let (st, v, _) = op.post("/subscriptions", sub(&callback)).await;
    assert_eq!(st, 201, "{v}");
    let copy = v["id"].as_str().unwrap().to_string();
    let other = other_subscriber().await;
    let (st, v, _) = op.post("/subscriptions", sub(&other)).await;
    assert_eq!(st, 201, "{v}");
    let other_id = v["id"].as_str().unwrap().to_string();
    assert!(
        wait_until(Duration::from_secs(30), || {
            let ids = tb.cloud().tacker_subscription_ids();
            !ids.contains(&copy) && ids.contains(&kept) && ids.contains(&other_id)
        }),
        "{:?}",
        tb.cloud().tacker_subscription_ids()
    );
    assert_eq!(stored_subscription(&db), Some(kept));

    d.stop();
    let log = d.log_text();
    assert!(log.contains("Tacker subscription created"), "{log}");
    assert!(!log.contains(PASSWORD), "the password reached the log");
    tb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_alone_reaches_the_same_end_state_as_notifications() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    register_pv_package(&tb);
    let (mut d, _) = daemon(&install, &tb);
    let db = install.database.clone();
    assert!(wait_until(Duration::from_secs(30), || {
        stored_subscription(&db).is_some()
    }));
    let op = Operator::login(&tb).await;

    // With notifications.
    let (inst_a, ..) = op.lifecycle(&tb).await;
    assert!(
        wait_until(Duration::from_secs(30), || both_completed(&db, &inst_a)),
        "{:?}",
        end_state(&db, &inst_a)
    );
    let with_notifications = end_state(&db, &inst_a);
    let notified = store(&db)
        .reader()
        .tacker_notifications(Some(&inst_a))
        .unwrap()
        .len();
    // Creation + 3 states of each operation.
    assert_eq!(notified, 7);

    // Notification delivery switched off entirely: the poll finds the same — with Tacker
    // paging its lists by one entry (`*_page_size = 1`), so only following every
    // `Link: rel="next"` finds the new instance and its operations.
    tb.cloud().tacker_set_notify_faults(NotifyFaults {
        drop: 1.0,
        ..NotifyFaults::default()
    });
    tb.cloud().tacker_set_page_size(1);
    let (inst_b, ..) = op.lifecycle(&tb).await;
    assert!(
        wait_until(Duration::from_secs(30), || both_completed(&db, &inst_b)),
        "{:?}\n{}",
        end_state(&db, &inst_b),
        d.log_text()
    );
    assert!(
        store(&db)
            .reader()
            .tacker_notifications(Some(&inst_b))
            .unwrap()
            .is_empty()
    );
    let by_polling = end_state(&db, &inst_b);
    // Same operations, same end states and follow-ups; the states in between are those a poll
    // happened to see.
    let ends = |v: &[(String, OperationState, Vec<OperationState>, Followup)]| {
        let mut v: Vec<_> = v
            .iter()
            .map(|(o, s, states, f)| (o.clone(), *s, *states.last().unwrap(), *f))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(ends(&with_notifications), ends(&by_polling));
    assert_eq!(
        ends(&by_polling),
        vec![
            (
                "INSTANTIATE".to_string(),
                OperationState::Completed,
                OperationState::Completed,
                Followup::Manage
            ),
            (
                "TERMINATE".to_string(),
                OperationState::Completed,
                OperationState::Completed,
                Followup::Retire
            ),
        ]
    );
    for (_, _, states, _) in &by_polling {
        let mut dedup = states.clone();
        dedup.dedup();
        assert_eq!(&dedup, states, "each state recorded once");
    }

    // Every notification twice and in shuffled order: recorded once each, same end state.
    tb.cloud().tacker_set_page_size(0);
    tb.cloud().tacker_set_notify_faults(NotifyFaults {
        duplicate: 1.0,
        reorder_ms: 300,
        ..NotifyFaults::default()
    });
    let (inst_c, ..) = op.lifecycle(&tb).await;
    assert!(wait_until(Duration::from_secs(30), || {
        both_completed(&db, &inst_c)
            && store(&db)
                .reader()
                .tacker_notifications(Some(&inst_c))
                .unwrap()
                .len()
                == 7
    }));
    assert_eq!(ends(&end_state(&db, &inst_c)), ends(&with_notifications));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        store(&db)
            .reader()
            .tacker_notifications(Some(&inst_c))
            .unwrap()
            .len(),
        7
    );
    let sent = tb.cloud().tacker_notify_counters();
    assert!(sent.sent >= 7 + 14, "{sent:?}");

    let insts = store(&db).reader().tacker_vnf_instances().unwrap();
    let b = insts.iter().find(|i| i.instance.id == inst_b).unwrap();
    assert_eq!(b.instance.state, InstantiationState::NotInstantiated);

    d.stop();
    assert!(!d.log_text().contains(PASSWORD));
    tb.shutdown().await;
}

/// The seed's PV cluster INSTANTIATE request body and its package directory.
fn seed() -> (Value, std::path::PathBuf) {
    let root = support::repo_root();
    let env: Value = serde_json::from_slice(
        &std::fs::read(root.join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
            .unwrap(),
    )
    .unwrap();
    (
        env["request"].clone(),
        root.join(env["vnfPackage"].as_str().unwrap()),
    )
}

/// `vnfkeeper ops --json` of `inst`.
fn ops_json(install: &Install, inst: &str) -> Vec<Value> {
    let out = install.cli(&["ops", "--vnf", inst, "--json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The daemon adopts Tacker's COMPLETED INSTANTIATE as exactly one operation of origin
/// `tacker` linked to the op occ, although every notification arrives twice and the daemon
/// restarts; `ops` and `status` show the origin. (No hosts here: the management steps
/// themselves run in `tacker_manage`, as root.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_instantiate_is_adopted_once_through_duplicates_and_a_restart() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    register_pv_package(&tb);
    let (request, package) = seed();
    let (mut d, _) = daemon_with(&install, &tb, Some(&package));
    let db = install.database.clone();
    assert!(wait_until(Duration::from_secs(30), || {
        stored_subscription(&db).is_some()
    }));
    tb.cloud().tacker_set_notify_faults(NotifyFaults {
        duplicate: 1.0,
        reorder_ms: 200,
        ..NotifyFaults::default()
    });
    let op = Operator::login(&tb).await;
    let inst = op.create(VNFD).await;
    let (st, v, loc) = op
        .post(&format!("/vnf_instances/{inst}/instantiate"), request)
        .await;
    assert_eq!(st, 202, "{v}");
    let occ = loc.unwrap().rsplit('/').next().unwrap().to_string();
    assert!(
        wait_until(Duration::from_secs(60), || !ops_json(&install, &inst)
            .is_empty()),
        "no operation adopted: {}",
        d.log_text()
    );
    // Every notification delivered (twice each) and a poll after them: still one.
    assert!(wait_until(Duration::from_secs(30), || {
        tb.cloud().tacker_notify_counters().sent >= 2 * 4
    }));
    std::thread::sleep(Duration::from_secs(6));
    d.stop();
    let mut d = install.start();
    std::thread::sleep(Duration::from_secs(8));
    let ops = ops_json(&install, &inst);
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0]["origin"], "tacker");
    assert_eq!(ops[0]["tackerOpOccId"], occ.as_str());
    assert_eq!(ops[0]["operation"], "INSTANTIATE");
    let table = install.cli(&["ops", "--vnf", &inst]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains(&format!("tacker ({occ})")), "{table}");
    let status = install.cli(&["status", "--json"]);
    let status: Vec<Value> = serde_json::from_slice(&status.stdout).unwrap();
    let mine = status.iter().find(|i| i["id"] == inst.as_str()).unwrap();
    assert_eq!(mine["origin"], "tacker");
    d.stop();
    assert!(!d.log_text().contains(PASSWORD));
    tb.shutdown().await;
}
