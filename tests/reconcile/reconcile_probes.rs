//! Reconcile's SSH probes on real hosts (needs root): the seed's PersistentVolume cluster is
//! instantiated on the testbed, an export line is deleted behind vnfkeeper's back, a full pass
//! (probes) finds the drift, reconcile starts a configuration-only HEAL of the storage server, and
//! the engine repairs the export without rebuilding the server.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use support::bed::{Bed, fast_limits};
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, PassReport, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::Db;
use vnfkeeper_core::model::{LcmOperationType, OperationState, Timestamp};
use vnfkeeper_core::policy::Policy;

fn at(secs: i64) -> Timestamp {
    Timestamp(chrono::Utc::now() + chrono::Duration::seconds(secs))
}

async fn pass(
    db: &Db,
    rec: &Reconciler<vnfkeeper::cloud::OpenStackCloud>,
    now: Timestamp,
) -> PassReport {
    let snap = db.with(|s| reconcile::snapshot(s.reader(), None)).unwrap();
    let mut report = rec.evaluate(&snap, PassKind::Full, now).await;
    db.write(|tx| reconcile::record(tx, &mut report, now))
        .unwrap();
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn a_deleted_export_line_is_repaired_without_rebuilding_the_server() {
    let bed = Bed::new("vkq", 90, fast_limits()).await;
    let (op, vnf) = bed.submit_instantiate();
    assert_eq!(
        bed.engine.run(&op).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&op)
    );
    let policy = Policy::default();
    let rec = Reconciler::new(
        bed.cloud.clone(),
        Arc::new(SshRemote::new(SshConfig::default())),
        policy.clone(),
        ProbeSettings {
            timeout: Duration::from_secs(30),
            max_parallel_hosts: 16,
        },
    );
    // Past the startup grace: a healthy cluster gives no decision that starts anything.
    let t0 = policy.startup_grace.as_secs() as i64 + 1;
    let r = pass(&bed.db, &rec, at(t0)).await;
    assert!(r.started.is_empty(), "healthy cluster: {r:?}");

    // An operator's mistake: the pv2 line vanishes from /etc/exports and is unexported.
    let vnfcs = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let storage = vnfcs.iter().find(|v| v.vdu_id == "storage_server").unwrap();
    let server = storage.server_id.clone().unwrap();
    let out = bed
        .farm
        .exec(
            &server,
            "sed -i '\\#^/volume/nfs/pv2 #d' /etc/exports && exportfs -ra && ! grep -q pv2 /etc/exports",
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    // A probe that finds drift is a positive observation (not an unknown), and the repair it
    // asks for is not destructive (check-then-apply on the same server): it starts at once.
    let r = pass(&bed.db, &rec, at(t0 + 10)).await;
    assert_eq!(r.started.len(), 1, "{r:?}");
    let heal = bed
        .db
        .with(|s| s.reader().operations(Some(vnf.as_str())))
        .unwrap()
        .into_iter()
        .find(|o| o.operation == LcmOperationType::Heal)
        .unwrap();
    assert!(heal.is_automatic_invocation);
    let (params, _) = bed
        .db
        .with(|s| s.reader().operation_params(&heal.id))
        .unwrap()
        .unwrap();
    let params: serde_json::Value = serde_json::from_str(&params).unwrap();
    assert_eq!(params["vnfcInstanceId"], serde_json::json!([storage.id]));
    assert_eq!(
        params["additionalParams"]["configuration_only"], true,
        "{params}"
    );

    // The engine rewrites the export; the server is the same.
    assert_eq!(
        bed.engine.run(&heal.id).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&heal.id)
    );
    bed.print_journal(&heal.id);
    let after = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let same = after.iter().find(|v| v.id == storage.id).unwrap();
    assert_eq!(
        same.server_id.as_deref(),
        Some(server.as_str()),
        "not rebuilt"
    );
    let exports = bed
        .farm
        .exec(&server, "cat /etc/exports; exportfs")
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&exports.stdout);
    assert!(text.contains("/volume/nfs/pv2 "), "{text}");
    let journal = bed.db.with(|s| s.reader().journal(&heal.id)).unwrap();
    assert!(
        journal.iter().all(|j| !j.name.starts_with("heat.")),
        "no cloud step in a configuration repair: {journal:?}"
    );
    assert!(
        bed.farm.mkfs_log(&server).await.unwrap().len() == 1,
        "mkfs only at instantiate"
    );
    // The next pass finds the cluster healthy again.
    let r = pass(
        &bed.db,
        &rec,
        at(t0 + 2 * policy.grace.as_secs() as i64 + 20),
    )
    .await;
    assert!(r.started.is_empty(), "{r:?}");
}
