//! Kubespray clusters trust private registries too (needs root): the registry VNF of the cir seed
//! is instantiated and an image pushed to it with `skopeo`; the seed's kubespray INSTANTIATE
//! request (its `ansible` block filled in with the testbed's Ansible server) carries one
//! `private_registry_connection_info` entry naming that registry by a host name (HTTP, with a
//! `hosts_string` and credentials). Every master and worker then pulls the image with `skopeo`
//! reading only the files vnfkeeper wrote (`insecure-registries` of `/etc/docker/daemon.json`,
//! `/etc/hosts`), the LB is left alone, the auth file is 0600; the two workers the seed's SCALE_OUT
//! adds pull too; a worker whose hosts line was removed fails the pull until reconcile's
//! configuration-only HEAL repairs it; the registry password is in no remote command line and no journal row.

use crate::support;
use vnfkeeper_core::model::{LcmOperationType, OpOccId, OperationState, Timestamp, VnfInstanceId};

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::bed::{Bed, fast_limits};
use testbed::hosts::{ANSIBLE_SERVER_FILE, AnsibleServer};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::VnfcRow;
use vnfkeeper_core::policy::Policy;

const NET: u8 = 83;
const REGISTRY_VNF: &str = "vnf-cir-registry";
const NAME: &str = "registry.vnfkeeper.test";
const IMAGE: &str = "test/hello:1.0";
/// The registry password of the request: must appear nowhere it is scanned for.
const PASSWORD: &str = "vk-ks-trust-Pw-4e7a";

fn fixture(name: &str) -> Value {
    let bytes = std::fs::read(
        support::repo_root()
            .join("fixtures/requests/good")
            .join(name),
    )
    .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn run(bed: &Bed, body: &Value) -> (OpOccId, VnfInstanceId, OperationState) {
    let (op, vnf) = match bed.submit(&serde_json::to_vec(body).unwrap()) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id,
            vnf_instance_id,
            ..
        } => (vnf_lcm_op_occ_id, vnf_instance_id),
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    if state != OperationState::Completed {
        bed.print_journal(&op);
        eprintln!("{:?}", bed.error_of(&op));
    }
    (op, vnf, state)
}

/// The bed's Ansible server (as in `engine_kubespray.rs`).
async fn ansible_server(bed: &Bed) -> AnsibleServer {
    let path = bed
        .tb
        .clouds_yaml()
        .parent()
        .unwrap()
        .join(ANSIBLE_SERVER_FILE);
    match AnsibleServer::read(&path) {
        Ok(a) => a,
        Err(_) => bed
            .farm
            .start_ansible_server(std::net::Ipv4Addr::new(10, 231, NET, 254))
            .await
            .expect("Ansible server"),
    }
}

/// `sh -c cmd` as root on `server`: (success, stdout and stderr).
async fn on(bed: &Bed, server: &str, cmd: &str) -> (bool, String) {
    let out = bed.farm.exec(server, cmd).await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A real client pull on `server` of `IMAGE` from `registry` reading the node's trust files (as
/// in `engine_registry_trust.rs`): the pulled manifest's digest, or the client's error.
async fn pull(bed: &Bed, server: &str, registry: &str) -> Result<String, String> {
    let cmd = format!(
        r#"set -e
conf=$(mktemp); dest=$(mktemp -d)
python3 - "$conf" <<'PY'
import json, sys
try:
    regs = json.load(open("/etc/docker/daemon.json")).get("insecure-registries") or []
except (OSError, ValueError):
    regs = []
with open(sys.argv[1], "w") as f:
    for r in regs:
        f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n\n' % r)
PY
skopeo --registries-conf "$conf" copy -q docker://{registry}/{IMAGE} "dir:$dest"
skopeo --registries-conf "$conf" inspect --format '{{{{.Digest}}}}' "dir:$dest"
rm -rf "$conf" "$dest""#
    );
    match on(bed, server, &cmd).await {
        (true, out) => Ok(out.lines().last().unwrap_or("").trim().to_owned()),
        (false, out) => Err(out),
    }
}

fn vnfcs(bed: &Bed, vnf: &str) -> Vec<VnfcRow> {
    bed.db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(vnf)))
        .unwrap()
}

fn is_node(r: &VnfcRow) -> bool {
    r.vdu_id == "masterNode" || r.vdu_id == "workerNode"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn kubespray_nodes_pull_from_a_private_registry_after_instantiate_and_scale_out() {
    let bed = Bed::new("vkp", NET, fast_limits()).await;
    let a = ansible_server(&bed).await;

    // The registry VNF and an image pushed to it by a real client.
    let (_, _, state) = run(
        &bed,
        &fixture("cir-k8s-cluster.10-registry-instantiate.json"),
    )
    .await;
    assert_eq!(state, OperationState::Completed);
    let ip = vnfcs(&bed, REGISTRY_VNF)[0].ip_address.clone().unwrap();
    let archive = support::repo_root()
        .join("fixtures/packages/cir-private-registry/Files/images/private_registry.tar");
    let out = Command::new("skopeo")
        .args([
            "copy",
            "-q",
            "--dest-tls-verify=false",
            &format!("docker-archive:{}", archive.display()),
            &format!("docker://{ip}:5000/{IMAGE}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new("skopeo")
        .args([
            "inspect",
            "--tls-verify=false",
            "--format",
            "{{.Digest}}",
            &format!("docker://{ip}:5000/{IMAGE}"),
        ])
        .output()
        .unwrap();
    let pushed = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(pushed.starts_with("sha256:"), "{pushed}");

    // The kubespray cluster with the registry by name.
    let server = format!("{NAME}:5000");
    let mut req = fixture("k8s-mgmtdriver-kubespray.10-instantiate.json");
    let k = &mut req["request"]["additionalParams"]["k8s_cluster_installation_param"];
    k["ansible"]["ip_address"] = a.ip_address.to_string().into();
    k["ansible"]["username"] = a.username.clone().into();
    k["ansible"]["password"] = a.password.clone().into();
    k["ansible"]["kubespray_root_path"] = a.kubespray_root_path.clone().into();
    k["ansible"]["transferring_inventory_path"] =
        format!("{}/inventory/vnf-kubespray", a.kubespray_root_path).into();
    k["private_registry_connection_info"] = json!([
        {"connection_type": "0", "server": server, "username": "user01", "password": PASSWORD,
         "hosts_string": format!("{ip} {NAME}")}
    ]);
    let (inst_op, vnf, state) = run(&bed, &req).await;
    assert_eq!(state, OperationState::Completed);
    let rows = vnfcs(&bed, vnf.as_str());
    let nodes: Vec<&VnfcRow> = rows.iter().filter(|r| is_node(r)).collect();
    assert!(nodes.len() >= 2, "{rows:?}");
    for r in &nodes {
        let s = r.server_id.clone().unwrap();
        assert_eq!(
            pull(&bed, &s, &server).await,
            Ok(pushed.clone()),
            "{} pulls",
            r.id
        );
        let (ok, out) = on(
            &bed,
            &s,
            "stat -c %a /root/.docker/config.json; readlink /var/lib/kubelet/config.json",
        )
        .await;
        assert!(ok, "{out}");
        assert_eq!(out, "600\n/root/.docker/config.json\n", "{}", r.id);
    }
    // The LB is no node: nothing written there.
    let lb = rows.iter().find(|r| r.vdu_id == "externalLB").unwrap();
    let (_, hosts) = on(&bed, lb.server_id.as_deref().unwrap(), "cat /etc/hosts").await;
    assert!(!hosts.contains(NAME), "{hosts}");
    let trust = bed.db.with(|s| s.reader().registry_trust(&vnf)).unwrap();
    assert_eq!(trust.len(), nodes.len(), "{trust:?}");
    assert!(trust.iter().all(|t| t.applied_at.is_some()), "{trust:?}");

    // Drift on one worker: its hosts line lost, so the pull fails; a reconcile pass finds it and
    // starts a configuration-only HEAL of that worker, which repairs it.
    let target = nodes.iter().find(|r| r.vdu_id == "workerNode").unwrap();
    let ts = target.server_id.clone().unwrap();
    let (ok, out) = on(&bed, &ts, &format!("sed -i '/ {NAME}$/d' /etc/hosts")).await;
    assert!(ok, "{out}");
    assert!(pull(&bed, &ts, &server).await.is_err(), "no name, no pull");
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
    let now = Timestamp(
        chrono::Utc::now() + chrono::Duration::seconds(policy.startup_grace.as_secs() as i64 + 1),
    );
    let snap = bed
        .db
        .with(|s| reconcile::snapshot(s.reader(), None))
        .unwrap();
    let mut report = rec.evaluate(&snap, PassKind::Full, now).await;
    bed.db
        .write(|tx| reconcile::record(tx, &mut report, now))
        .unwrap();
    assert_eq!(report.started.len(), 1, "{report:?}");
    let heal = bed
        .db
        .with(|s| s.reader().operations(Some(vnf.as_str())))
        .unwrap()
        .into_iter()
        .find(|o| o.operation == LcmOperationType::Heal)
        .unwrap();
    let (params, _) = bed
        .db
        .with(|s| s.reader().operation_params(&heal.id))
        .unwrap()
        .unwrap();
    let params: Value = serde_json::from_str(&params).unwrap();
    assert_eq!(params["vnfcInstanceId"], json!([target.id]), "{params}");
    assert_eq!(params["additionalParams"]["configuration_only"], true);
    assert_eq!(
        bed.engine.run(&heal.id).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&heal.id)
    );
    bed.print_journal(&heal.id);
    assert_eq!(
        bed.db
            .with(|s| s.reader().vnfcs(&vnf))
            .unwrap()
            .iter()
            .find(|r| r.id == target.id)
            .unwrap()
            .server_id,
        Some(ts.clone()),
        "not rebuilt"
    );
    assert_eq!(
        pull(&bed, &ts, &server).await,
        Ok(pushed.clone()),
        "repaired"
    );

    // SCALE_OUT (the seed's: two workers): the new workers pull too.
    let before: Vec<String> = nodes.iter().map(|r| r.id.to_string()).collect();
    let (scale_op, _, state) =
        run(&bed, &fixture("k8s-mgmtdriver-kubespray.20-scale-out.json")).await;
    assert_eq!(state, OperationState::Completed);
    let rows = vnfcs(&bed, vnf.as_str());
    let added: Vec<&VnfcRow> = rows
        .iter()
        .filter(|r| is_node(r) && !before.iter().any(|b| r.id == *b))
        .collect();
    assert_eq!(
        added.len(),
        2,
        "the seed's SCALE_OUT adds two workers: {rows:?}"
    );
    for r in &added {
        assert_eq!(
            pull(&bed, r.server_id.as_deref().unwrap(), &server).await,
            Ok(pushed.clone()),
            "the new worker {} pulls",
            r.id
        );
    }

    // No registry password (nor its auth token) in any remote command or journal row.
    let token = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("user01:{PASSWORD}"))
    };
    let mut scanned = 0;
    for h in bed.farm.hosts() {
        for line in bed.farm.command_log(&h.server_id).await.unwrap_or_default() {
            assert!(!line.contains(PASSWORD) && !line.contains(&token), "{line}");
            scanned += 1;
        }
    }
    for op in [&inst_op, &heal.id, &scale_op] {
        for j in bed.db.with(|s| s.reader().journal(op)).unwrap() {
            let d = j.detail.unwrap_or_default();
            assert!(!d.contains(PASSWORD) && !d.contains(&token), "{d}");
            scanned += 1;
        }
    }
    assert!(scanned > 20, "{scanned} lines scanned");
    eprintln!(
        "{} nodes and the {} new workers pulled {pushed}; {scanned} command and journal lines scanned",
        nodes.len(),
        added.len()
    );
}
