//! The registry VNF (cir-k8s-cluster seed) on the testbed (needs root): INSTANTIATE brings up a
//! real `docker-registry` on the registry host with its data on the Cinder volume, a test pushes an
//! image with `skopeo`, a registry container stopped behind vnfkeeper's back is found by a
//! reconcile pass and started again by a configuration-only HEAL (same VM, no mkfs), a whole-VNF
//! HEAL rebuilds the VM on the kept port and volume (no second mkfs) and the image is still
//! served with the same digest, TERMINATE removes the VNF.

use crate::support;
use vnfkeeper_core::model::{LcmOperationType, OperationState, Timestamp, VnfInstanceId};

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::bed::{Bed, fast_limits};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::VnfcRow;
use vnfkeeper_core::policy::Policy;

const VNF: &str = "vnf-cir-registry";

fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(
        support::repo_root()
            .join("fixtures/requests/good")
            .join(name),
    )
    .unwrap()
}

async fn run(bed: &Bed, bytes: &[u8]) -> OperationState {
    let op = match bed.submit(bytes) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    if state != OperationState::Completed {
        bed.print_journal(&op);
        eprintln!("{:?}", bed.error_of(&op));
    }
    state
}

fn registry_row(bed: &Bed) -> VnfcRow {
    let rows = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(VNF)))
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows.into_iter().next().unwrap()
}

/// Runs `skopeo ARGS` in the test's (root) namespace, which reaches the hosts over the testbed
/// bridge; returns stdout, panics with stderr on failure.
fn skopeo(args: &[&str]) -> String {
    let out = Command::new("skopeo").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn digest(ip: &str) -> String {
    skopeo(&[
        "inspect",
        "--tls-verify=false",
        "--format",
        "{{.Digest}}",
        &format!("docker://{ip}:5000/test/hello:1.0"),
    ])
    .trim()
    .to_owned()
}

fn catalog(ip: &str) -> Value {
    let out = Command::new("curl")
        .args(["-s", "-m", "5", &format!("http://{ip}:5000/v2/_catalog")])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

async fn host_text(bed: &Bed, server: &str, path: &str) -> String {
    String::from_utf8(bed.farm.read_file(server, path).await.unwrap_or_default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn registry_instantiate_push_heal_keeps_images_then_terminate() {
    let bed = Bed::new("vkrg", 74, fast_limits()).await;

    // INSTANTIATE: the registry answers /v2/ from outside the VM, its data on the volume.
    let state = run(
        &bed,
        &fixture_bytes("cir-k8s-cluster.10-registry-instantiate.json"),
    )
    .await;
    assert_eq!(state, OperationState::Completed);
    let first = registry_row(&bed);
    let ip = first.ip_address.clone().unwrap();
    let server = first.server_id.clone().unwrap();
    assert_eq!(first.volumes.len(), 1, "{:?}", first.volumes);
    assert_eq!(catalog(&ip), serde_json::json!({"repositories": []}));
    assert_eq!(bed.farm.mkfs_log(&server).await.unwrap().len(), 1);
    let mounted = bed
        .farm
        .exec(&server, "mountpoint /var/lib/vnfkeeper/registry")
        .await
        .unwrap();
    assert!(mounted.status.success(), "{mounted:?}");
    let docker_log = host_text(&bed, &server, "/var/lib/testbed/docker.log").await;
    assert!(
        docker_log.contains("docker load -i /var/lib/vnfkeeper/registry-image.tar"),
        "{docker_log}"
    );

    // A real client pushes a real image (the package's docker-save tar).
    let archive = support::repo_root()
        .join("fixtures/packages/cir-private-registry/Files/images/private_registry.tar");
    skopeo(&[
        "copy",
        "-q",
        "--dest-tls-verify=false",
        &format!("docker-archive:{}", archive.display()),
        &format!("docker://{ip}:5000/test/hello:1.0"),
    ]);
    let pushed = digest(&ip);
    assert!(pushed.starts_with("sha256:"), "{pushed}");

    // Reconcile: the registry container stopped behind vnfkeeper's back is drift of the registry
    // VNFC (`registry.run`), repaired by a configuration-only HEAL: the same VM, no mkfs, the
    // image served again.
    let policy = Policy::default();
    let rec = Reconciler::new(
        bed.cloud.clone(),
        std::sync::Arc::new(SshRemote::new(SshConfig::default())),
        policy.clone(),
        ProbeSettings {
            timeout: Duration::from_secs(30),
            max_parallel_hosts: 16,
        },
    );
    let at = |secs: i64| Timestamp(chrono::Utc::now() + chrono::Duration::seconds(secs));
    let pass = |now: Timestamp| {
        let rec = &rec;
        let db = &bed.db;
        async move {
            let snap = db.with(|s| reconcile::snapshot(s.reader(), None)).unwrap();
            let mut report = rec.evaluate(&snap, PassKind::Full, now).await;
            db.write(|tx| reconcile::record(tx, &mut report, now))
                .unwrap();
            report
        }
    };
    let t0 = policy.startup_grace.as_secs() as i64 + 1;
    let r = pass(at(t0)).await;
    assert!(r.started.is_empty(), "a healthy registry: {r:?}");
    let stop = bed
        .farm
        .exec(&server, "docker stop private_registry")
        .await
        .unwrap();
    assert!(stop.status.success(), "{stop:?}");
    assert_eq!(catalog(&ip), Value::Null, "stopped: no answer");
    let r = pass(at(t0 + 10)).await;
    assert_eq!(r.started.len(), 1, "{r:?}");
    let repair = bed
        .db
        .with(|s| s.reader().operations(Some(VNF)))
        .unwrap()
        .into_iter()
        .find(|o| o.operation == LcmOperationType::Heal)
        .unwrap();
    assert!(repair.is_automatic_invocation);
    assert_eq!(
        bed.engine.run(&repair.id).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&repair.id)
    );
    assert_eq!(
        registry_row(&bed).server_id.as_deref(),
        Some(server.as_str()),
        "not rebuilt"
    );
    assert_eq!(bed.farm.mkfs_log(&server).await.unwrap().len(), 1);
    assert_eq!(digest(&ip), pushed, "served again, the same image");
    let r = pass(at(t0 + 20)).await;
    assert!(r.started.is_empty(), "repaired: {r:?}");

    // HEAL of the whole VNF: a new server on the same port and volume; no second mkfs; the image
    // is still there with the same digest.
    let state = run(
        &bed,
        &fixture_bytes("cir-k8s-cluster.15-registry-heal.json"),
    )
    .await;
    assert_eq!(state, OperationState::Completed);
    let healed = registry_row(&bed);
    let new_server = healed.server_id.clone().unwrap();
    assert_ne!(new_server, server, "the VM was rebuilt");
    assert_eq!(healed.ip_address.as_deref(), Some(ip.as_str()), "IP kept");
    assert_eq!(healed.volumes[0].volume_id, first.volumes[0].volume_id);
    assert!(
        bed.farm.mkfs_log(&new_server).await.unwrap().is_empty(),
        "no mkfs on the kept volume"
    );
    assert_eq!(digest(&ip), pushed, "same image after heal");
    assert_eq!(
        catalog(&ip),
        serde_json::json!({"repositories": ["test/hello"]})
    );
    let runs = host_text(&bed, &new_server, "/var/lib/testbed/docker.log")
        .await
        .lines()
        .filter(|l| l.starts_with("docker run "))
        .count();
    assert_eq!(runs, 1, "one docker run on the new VM");

    // TERMINATE: the stack and its server are gone, the registry no longer answers.
    let state = run(
        &bed,
        &fixture_bytes("cir-k8s-cluster.95-registry-terminate.json"),
    )
    .await;
    assert_eq!(state, OperationState::Completed);
    assert!(
        bed.db
            .with(|s| s.reader().vnfcs(&VnfInstanceId::from(VNF)))
            .unwrap()
            .is_empty()
    );
    assert_eq!(catalog(&ip), Value::Null);
}
