//! vnfkeeper as Tacker v2's MgmtDriver, proved with Tacker's own code (needs root): the
//! operator's package is Tacker 16.0.0's `sol_v2_kubernetes_vnf_package` (from the sdist,
//! `scripts/tacker-samples`) with vnfkeeper's driver script in place of Tacker's sample driver
//! (README "vnfkeeper as Tacker's MgmtDriver"). The testbed's Tacker stand-in runs each
//! operation's `*_start` and `*_end` hook through Tacker's `VnfLcmDriverV2.
//! _exec_mgmt_driver_script` (`tests/tacker/mgmt/conductor.py` in Tacker's venv), which runs the
//! script as Tacker's conductor does; the script talks to a running vnfkeeper daemon.
//!
//! - A storage-server HEAL in Tacker while a PersistentVolume is Bound fails in Tacker
//!   (`FAILED_TEMP`, Tacker's `MgmtDriverExecutionFailed`) with vnfkeeper's reason, and nothing
//!   changed: the same server, the PV still Bound, no step of vnfkeeper's ran but the check.
//! - A worker HEAL in Tacker: `heal_start` removes the node first, Tacker replaces the server,
//!   `heal_end` joins the new one; Tacker's COMPLETED adds no operation of the notification
//!   path (never both).
//! - Hostile hook requests are refused with a clear error and nothing recorded.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support;
use support::tacker::Operator;
use support::{Install, wait_until};
use testbed::cloud::Testbed;
use testbed::cloud::tacker::MgmtDriverRun;
use vnfkeeper::store::Store;
use vnfkeeper_core::model::{OpOccId, OperationState, StepState, VnfInstanceId};

const VNFD: &str = "pv-k8s-cluster-vnfd";
const USER: &str = "tacker-mgmt";
const PASSWORD: &str = "Mgmt-Dr1ver!s3cret";
/// How long a Tacker operation (with vnfkeeper's hooks) may take.
const WITHIN: Duration = Duration::from_secs(600);

fn store(db: &Path) -> Store {
    Store::open(db).unwrap()
}

/// The operator's package: Tacker's `sol_v2_kubernetes_vnf_package` with the `Vnflcm`
/// interface naming vnfkeeper's script instead of Tacker's `kubernetes_mgmt_v2.py`, and without
/// `instantiate_end` (vnfkeeper runs the cluster install after Tacker's INSTANTIATE COMPLETED).
fn operator_package(dir: &Path) -> PathBuf {
    let contents = support::tacker::samples_dir()
        .join("samples/mgmt_driver/kubernetes/sol_v2_kubernetes_vnf_package/contents");
    let csar = dir.join("csar");
    let st = Command::new("cp")
        .arg("-r")
        .arg(&contents)
        .arg(&csar)
        .status()
        .unwrap();
    assert!(st.success());
    let df = csar.join("Definitions/sample_kubernetes_df_simple.yaml");
    let text = std::fs::read_to_string(&df).unwrap();
    let patched = text
        .replace(
            "          instantiate_end:\n            implementation: mgmt-drivers-kubernetes\n",
            "",
        )
        .replace(
            "file: ../Scripts/kubernetes_mgmt_v2.py",
            "file: ../Scripts/vnfkeeper_mgmt_driver.py",
        );
    assert_ne!(patched, text, "Tacker's sample VNFD changed shape");
    assert!(patched.contains("heal_start:") && !patched.contains("kubernetes_mgmt_v2.py"));
    std::fs::write(&df, patched).unwrap();
    std::fs::remove_file(csar.join("Scripts/kubernetes_mgmt_v2.py")).unwrap();
    std::fs::copy(
        support::repo_root().join("packaging/tacker/vnfkeeper_mgmt_driver.py"),
        csar.join("Scripts/vnfkeeper_mgmt_driver.py"),
    )
    .unwrap();
    csar
}

/// Runs `hook` through Tacker's `_exec_mgmt_driver_script` directly (not through the
/// stand-in); Tacker's answer (`{"ran"}` or the exception's `{"status", "title", "detail"}`).
fn tacker_hook(
    run: &MgmtDriverRun,
    hook: &str,
    operation: &str,
    inst: &str,
    request: Value,
) -> Value {
    let input = json!({
        "csar_dir": run.csar_dir, "flavour_id": "simple", "hook": hook, "operation": operation,
        "vnf_instance_id": inst, "vnfd_id": VNFD, "vnf_lcm_op_occ_id": "occ-of-the-test",
        "request": request,
    });
    let mut child = Command::new(&run.python)
        .arg(&run.conductor)
        .envs(&run.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The stand-in's op occ `occ` once it left `STARTING`/`PROCESSING`.
fn settled(tb: &Testbed, occ: &str) -> Option<String> {
    tb.cloud()
        .tacker_op_occs()
        .into_iter()
        .find(|(id, _, s)| id == occ && s != "STARTING" && s != "PROCESSING")
        .map(|(_, _, s)| s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn tacker_runs_vnfkeeper_as_its_mgmt_driver() {
    let install = Install::new();
    let (farm, tb, _cleanup) = support::testbed_with_hosts("vkmd", 113, install.dir.path()).await;
    let (request, pkg_dir) = support::tacker::seed();

    // The daemon in companion mode, its hook endpoint on the notification listener.
    let port = support::free_port();
    let (mut text, pw) =
        support::tacker::companion_config(&install, &tb, port, (USER, PASSWORD), VNFD);
    text.push_str(&format!(
        "\n[tacker.packages]\n\"{VNFD}\" = \"{}\"\n",
        pkg_dir.display()
    ));
    std::fs::write(&install.config, &text).unwrap();
    let check = install.cli(&["config", "check"]);
    assert!(check.status.success(), "{check:?}");
    let mut d = install.start();

    // The driver script's settings (never on its command line), as on Tacker's conductor host.
    let conf = install.dir.path().join("tacker-mgmt-driver.conf");
    std::fs::write(
        &conf,
        format!(
            "[vnfkeeper]\nurl = http://127.0.0.1:{port}/vnfkeeper/mgmt-hooks\nauth_type = BASIC\n\
             username = {USER}\npassword_file = {}\ntimeout_secs = 900\npoll_secs = 1\n",
            pw.display()
        ),
    )
    .unwrap();
    let run = MgmtDriverRun {
        python: support::tacker::venv_python().to_path_buf(),
        conductor: support::repo_root().join("tests/tacker/mgmt/conductor.py"),
        csar_dir: operator_package(install.dir.path()),
        env: [(
            "VNFKEEPER_MGMT_DRIVER_CONFIG".to_string(),
            conf.display().to_string(),
        )]
        .into_iter()
        .collect(),
    };
    support::tacker::register(&tb, VNFD, &request, &pkg_dir, Some(run.clone()));

    // Tacker instantiates (no hook: the VNFD names none for INSTANTIATE); vnfkeeper adopts it
    // and runs the cluster install, storage server, NFS and PVs.
    let op = Operator::login(&tb).await;
    let inst = op.create(VNFD).await;
    let (st, v, loc) = op
        .post(
            &format!("/vnf_instances/{inst}/instantiate"),
            request.clone(),
        )
        .await;
    assert_eq!(st, 202, "{v}");
    let occ = loc.unwrap().rsplit('/').next().unwrap().to_string();
    assert!(wait_until(WITHIN, || settled(&tb, &occ).is_some()));
    assert_eq!(
        settled(&tb, &occ).as_deref(),
        Some("COMPLETED"),
        "{}",
        op.get(&format!("/vnf_lcm_op_occs/{occ}")).await["error"]
    );
    let db = install.database.clone();
    let vnf = VnfInstanceId::from(&inst);
    assert!(
        wait_until(WITHIN, || {
            store(&db)
                .reader()
                .operations(Some(&inst))
                .unwrap()
                .iter()
                .any(|o| o.operation_state == OperationState::Completed)
        }),
        "INSTANTIATE's management steps did not complete: {}",
        d.log_text()
    );
    let vnfcs = store(&db).reader().vnfcs(&vnf).unwrap();
    assert_eq!(vnfcs.len(), 4, "{vnfcs:?}");
    let stack = store(&db)
        .reader()
        .instances()
        .unwrap()
        .into_iter()
        .find(|i| i.id == inst)
        .and_then(|i| i.stack_id)
        .unwrap();
    let kube = farm.kube(&stack);
    let tacker_id = |vdu: &str| -> String {
        let v = vnfcs.iter().find(|v| v.vdu_id == vdu).unwrap();
        format!("{vdu}-{}", v.server_id.as_deref().unwrap())
    };

    // 1. A storage-server heal in Tacker while a PV is Bound: Tacker's heal_start fails with
    //    vnfkeeper's reason, and nothing changed.
    tb.cloud()
        .inject_bind_pv(&stack, "nfs-pv2", None)
        .await
        .unwrap();
    let nodes_before = kube.nodes().unwrap();
    let servers_before = tb.cloud().record_counts().0;
    let storage = vnfcs.iter().find(|v| v.vdu_id == "storage_server").unwrap();
    let (st, v, loc) = op
        .post(
            &format!("/vnf_instances/{inst}/heal"),
            json!({"vnfcInstanceId": [tacker_id("storage_server")]}),
        )
        .await;
    assert_eq!(st, 202, "{v}");
    let occ = loc.unwrap().rsplit('/').next().unwrap().to_string();
    assert!(wait_until(WITHIN, || settled(&tb, &occ).is_some()));
    assert_eq!(settled(&tb, &occ).as_deref(), Some("FAILED_TEMP"));
    let shown = op.get(&format!("/vnf_lcm_op_occs/{occ}")).await;
    let error = &shown["error"];
    println!("Tacker's op occ error: {error}");
    assert_eq!(error["status"], 422, "{error}");
    assert_eq!(error["title"], "Mgmt driver execution failed", "{error}");
    let detail = error["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("heal_start failed: ") && detail.contains("nfs-pv2"),
        "vnfkeeper's reason, naming the Bound PV, in Tacker's error: {detail}"
    );
    assert!(!detail.contains(PASSWORD));
    assert_eq!(tb.cloud().record_counts().0, servers_before);
    let after = store(&db).reader().vnfcs(&vnf).unwrap();
    assert_eq!(
        after.iter().find(|v| v.id == storage.id).unwrap().server_id,
        storage.server_id,
        "the storage server was not replaced"
    );
    assert_eq!(kube.pv_phase("nfs-pv2").unwrap().as_deref(), Some("Bound"));
    assert_eq!(kube.nodes().unwrap(), nodes_before);
    let ops = store(&db).reader().operations(Some(&inst)).unwrap();
    assert_eq!(ops.len(), 2, "{ops:?}");
    let refused = &ops[1];
    assert_eq!(refused.operation_state, OperationState::Failed);
    let hook = store(&db).reader().tacker_hook_of(&refused.id).unwrap();
    assert_eq!(
        hook.map(|(h, t)| (h.as_str(), t)),
        Some(("heal_start", vec![storage.id.clone()]))
    );
    let journal = store(&db).reader().journal(&refused.id).unwrap();
    assert!(
        journal
            .iter()
            .all(|j| j.state != StepState::Done || j.name == "pv.not_bound"),
        "nothing but the check ran: {journal:?}"
    );
    tb.cloud()
        .inject_unbind_pv(&stack, "nfs-pv2", false)
        .await
        .unwrap();

    // 2. A worker heal in Tacker: heal_start removes the node, Tacker replaces the server,
    //    heal_end joins the new one; Tacker's COMPLETED adds no operation.
    let worker = vnfcs.iter().find(|v| v.vdu_id == "workerNode").unwrap();
    let (st, v, loc) = op
        .post(
            &format!("/vnf_instances/{inst}/heal"),
            json!({"vnfcInstanceId": [tacker_id("workerNode")]}),
        )
        .await;
    assert_eq!(st, 202, "{v}");
    let healed_occ = loc.unwrap().rsplit('/').next().unwrap().to_string();
    assert!(wait_until(WITHIN, || settled(&tb, &healed_occ).is_some()));
    assert_eq!(
        settled(&tb, &healed_occ).as_deref(),
        Some("COMPLETED"),
        "{}",
        op.get(&format!("/vnf_lcm_op_occs/{healed_occ}")).await["error"]
    );
    // Once vnfkeeper has recorded Tacker's COMPLETED (notification or poll) and synced again:
    // still exactly two new operations.
    assert!(
        wait_until(WITHIN, || {
            store(&db)
                .reader()
                .tacker_op_occs()
                .unwrap()
                .iter()
                .any(|o| o.occ.id == healed_occ && o.occ.state == OperationState::Completed)
        }),
        "vnfkeeper never saw Tacker's COMPLETED: {}",
        d.log_text()
    );
    let synced = d.log_text().matches("Tacker synced").count();
    assert!(wait_until(WITHIN, || d
        .log_text()
        .matches("Tacker synced")
        .count()
        > synced));
    let ops = store(&db).reader().operations(Some(&inst)).unwrap();
    assert_eq!(ops.len(), 4, "heal_start and heal_end only: {ops:?}");
    let (start, end) = (&ops[2], &ops[3]);
    let r = store(&db);
    assert_eq!(
        r.reader()
            .tacker_hook_of(&start.id)
            .unwrap()
            .map(|(h, _)| h.as_str()),
        Some("heal_start")
    );
    assert_eq!(
        r.reader()
            .tacker_hook_of(&end.id)
            .unwrap()
            .map(|(h, _)| h.as_str()),
        Some("heal_end")
    );
    assert_eq!(end.tacker_op_occ_id.as_deref(), Some(healed_occ.as_str()));
    for o in [start, end] {
        assert_eq!(o.operation_state, OperationState::Completed, "{o:?}");
    }
    let done = |id: &OpOccId, name: &str| {
        r.reader()
            .journal(id)
            .unwrap()
            .iter()
            .any(|j| j.name == name && j.state == StepState::Done)
    };
    assert!(
        done(&start.id, "k8s.remove_node"),
        "the node removed before Tacker's heal"
    );
    assert!(done(&end.id, "k8s.install"), "the new worker joined");
    let healed = r.reader().vnfcs(&vnf).unwrap();
    let row = healed.iter().find(|v| v.id == worker.id).unwrap();
    assert_ne!(
        row.server_id, worker.server_id,
        "Tacker replaced the server"
    );
    let ip = row.ip_address.clone().unwrap();
    assert!(
        kube.nodes()
            .unwrap()
            .iter()
            .any(|n| n.starts_with("worker") && n.ends_with(&ip.replace('.', "-"))),
        "{ip} is a node again: {:?}",
        kube.nodes().unwrap()
    );
    let (handled, problem) = r
        .reader()
        .tacker_followup_outcome(&healed_occ)
        .unwrap()
        .unwrap();
    assert!(handled.is_some() && problem.is_none());

    // 3. Hostile hook requests: refused with a clear error, nothing recorded.
    let url = format!("http://127.0.0.1:{port}/vnfkeeper/mgmt-hooks");
    let http = reqwest::Client::new();
    let good = json!({"hook": "heal_start", "vnfInstanceId": inst, "vnfLcmOpOccId": "x",
                      "request": {"vnfcInstanceId": [tacker_id("workerNode")]}});
    let r = http.post(&url).json(&good).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .post(&url)
        .basic_auth(USER, Some("wrong"))
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let hostile = json!({"hook": "heal_start", "vnfInstanceId": "../../etc", "vnfLcmOpOccId": "x",
                         "request": {"vnfcInstanceId": ["a\nb"], "healScript": "x"}, "extra": 1});
    let r = http
        .post(&url)
        .basic_auth(USER, Some(PASSWORD))
        .json(&hostile)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    let pointers: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    for p in [
        "/extra",
        "/vnfInstanceId",
        "/request/healScript",
        "/request/vnfcInstanceId/0",
    ] {
        assert!(pointers.contains(&p), "{p} in {body}");
    }
    let r = http
        .post(&url)
        .basic_auth(USER, Some(PASSWORD))
        .json(&json!({"hook": "rm -rf /", "vnfInstanceId": inst, "vnfLcmOpOccId": "x", "request": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("/hook: not a hook vnfkeeper runs"),
        "{body}"
    );
    let r = http
        .post(&url)
        .basic_auth(USER, Some(PASSWORD))
        .body(vec![b' '; 2 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let r = http
        .get(format!("{url}/no-such-op"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Through Tacker's own code: a VNF vnfkeeper does not manage fails Tacker's operation
    // with vnfkeeper's reason; an operation the VNFD names no script for runs nothing.
    let a = tacker_hook(
        &run,
        "heal_start",
        "HEAL",
        "not-a-vnf-of-vnfkeeper",
        json!({"vnfcInstanceId": ["workerNode-x"]}),
    );
    assert_eq!(a["title"], "Mgmt driver execution failed", "{a}");
    assert!(
        a["detail"]
            .as_str()
            .unwrap()
            .contains("was not adopted by vnfkeeper"),
        "{a}"
    );
    let a = tacker_hook(
        &run,
        "terminate_start",
        "TERMINATE",
        &inst,
        json!({"terminationType": "FORCEFUL"}),
    );
    assert_eq!(a, json!({"ran": false}));
    assert_eq!(
        store(&db).reader().operations(Some(&inst)).unwrap().len(),
        4
    );

    d.stop();
    assert!(!d.log_text().contains(PASSWORD));
    tb.shutdown().await;
}
