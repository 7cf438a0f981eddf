//! The real Tacker 16.0.0 (`tacker-server` and `tacker-conductor` from PyPI) on the testbed's
//! real Keystone and Heat (needs root: MariaDB and RabbitMQ packages, `/run`): Tacker's own
//! sample package `sol_v2_kubernetes_vnf_package` (built by `scripts/tacker-sample-package`,
//! vnfkeeper's MgmtDriver script in place of Tacker's sample driver) is onboarded through
//! Tacker's package API, instantiated through `/vnflcm/v2` with `vimConnectionInfo` pointing at
//! the real Keystone — Tacker uploads the package's image to the simulated Glance and drives
//! the real Heat, which drives the simulated Nova and Neutron (ports, floating IPs on `public`)
//! — and terminated. A vnfkeeper daemon in companion mode subscribes to the real Tacker (which
//! tests the callback first), and records Tacker's own notifications and polled op occs of both
//! operations; a worker heal started in Tacker runs vnfkeeper's MgmtDriver script in Tacker's
//! conductor, which asks the daemon, and fails in Tacker with the daemon's refusal (the VNF is
//! not adopted: no package is mapped) with no server changed. Then the control plane stops and
//! leaves nothing.
//!
//! About three minutes on a loaded 2-core machine, so it is outside the default run
//! (`default-filter` in `.config/nextest.toml`); run it with
//! `cargo nextest run --ignore-default-filter --run-ignored all -E 'test(/^tacker_real::/)'`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support;
use support::tacker::Operator;
use testbed::cloud::{CloudOptions, ControlPlane, Testbed};
use vnfkeeper::store::Store;
use vnfkeeper_core::model::OperationState;

const TAG: &str = "vkrtk";
const USER: &str = "tacker-notify";
const PASSWORD: &str = "Cb-S3cret!real-tacker";
/// How long one Tacker operation through the real Heat may take on a loaded machine.
const WITHIN: Duration = Duration::from_secs(300);

/// Waits until Tacker's op occ `occ` leaves `STARTING`/`PROCESSING`; its body.
async fn settled(op: &Operator, occ: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let o = op.get(&format!("/vnf_lcm_op_occs/{occ}")).await;
        if !matches!(
            o["operationState"].as_str(),
            Some("STARTING" | "PROCESSING" | "ROLLING_BACK")
        ) {
            return o;
        }
        assert!(
            t0.elapsed() < WITHIN,
            "op occ {occ} still {}",
            o["operationState"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `POST /vnf_instances/{inst}/{action}`; waits for Tacker's end of it and returns the op occ.
async fn run(op: &Operator, inst: &str, action: &str, body: Value) -> Value {
    let (st, v, loc) = op
        .post(&format!("/vnf_instances/{inst}/{action}"), body)
        .await;
    assert_eq!(st, 202, "{action}: {v}");
    let occ = loc.unwrap().rsplit('/').next().unwrap().to_string();
    settled(op, &occ).await
}

/// Onboards `zip` through `/vnfpkgm/v1` (create, upload, wait for ONBOARDED); its `vnfdId`.
async fn onboard(http: &reqwest::Client, tacker: &str, token: &str, zip: &Path) -> String {
    let pkgs = format!("{tacker}/vnfpkgm/v1/vnf_packages");
    let r = http
        .post(&pkgs)
        .header("x-auth-token", token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["onboardingState"], "CREATED", "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let r = http
        .put(format!("{pkgs}/{id}/package_content"))
        .header("x-auth-token", token)
        .header("content-type", "application/zip")
        .body(std::fs::read(zip).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let t0 = Instant::now();
    loop {
        let v: Value = http
            .get(format!("{pkgs}/{id}"))
            .header("x-auth-token", token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["onboardingState"] == "ONBOARDED" {
            assert_eq!(v["operationalState"], "ENABLED", "{v}");
            return v["vnfdId"].as_str().unwrap().to_string();
        }
        assert_ne!(v["onboardingState"], "ERROR", "{v}");
        assert!(
            t0.elapsed() < WITHIN,
            "package still {}",
            v["onboardingState"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `GET {base}{path}` on the simulated services with the real Keystone's token.
async fn sim_get(http: &reqwest::Client, base: &str, token: &str, path: &str) -> (u16, Value) {
    let r = http
        .get(format!("{base}{path}"))
        .header("x-auth-token", token)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

/// The Nova server ids of an `instantiatedVnfInfo`'s `vnfcResourceInfo`
/// (`computeResource.resourceId`, SOL003 §5.5.3.5), in its order.
fn server_ids(info: &Value) -> Vec<String> {
    info["vnfcResourceInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["computeResource"]["resourceId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A vnfkeeper daemon in companion mode against the real Tacker (through the real Keystone's
/// catalog), following the instances of `vnfd`.
fn companion(install: &support::Install, tb: &Testbed, vnfd: &str) -> (support::Daemon, u16) {
    let port = support::free_port();
    let (text, _) = support::tacker::companion_config(install, tb, port, (USER, PASSWORD), vnfd);
    std::fs::write(&install.config, &text).unwrap();
    let check = install.cli(&["config", "check"]);
    assert!(check.status.success(), "{check:?}");
    (install.start(), port)
}

/// The op occs vnfkeeper recorded of `inst`: (operation, last state, states in order).
fn recorded(db: &Path, inst: &str) -> Vec<(String, OperationState, Vec<OperationState>)> {
    Store::open(db)
        .unwrap()
        .reader()
        .tacker_op_occs()
        .unwrap()
        .into_iter()
        .filter(|o| o.occ.vnf_instance_id == inst)
        .map(|o| {
            (
                o.occ.operation,
                o.occ.state,
                o.states.into_iter().map(|(s, _)| s).collect(),
            )
        })
        .collect()
}

/// Pids with our tag and listeners on `ports`: what must be gone after the teardown.
fn leftovers(ports: &[u16]) -> (Vec<String>, Vec<u16>) {
    let want = format!("{}={TAG}", testbed::cloud::real::TAG_ENV);
    let pids = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
                .unwrap_or(false)
        })
        .map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("{pid} {}", comm.trim())
        })
        .collect();
    let open = ports
        .iter()
        .copied()
        .filter(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
        .collect();
    (pids, open)
}

fn port_of(url: &str) -> u16 {
    let rest = url.trim_start_matches("http://127.0.0.1:");
    rest.split(['/', ':']).next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (MariaDB and RabbitMQ packages, /run); about 3 minutes: outside the default run"]
async fn real_tacker_onboards_instantiates_through_real_heat_and_terminates() {
    let _lease = tokio::task::spawn_blocking(|| testbed::hosts::Lease::control_plane(TAG))
        .await
        .unwrap()
        .unwrap();
    testbed::cloud::real::kill_tagged(TAG).await;
    let dir = tempfile::Builder::new()
        .prefix("vk-tacker-real-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let tb = Testbed::start(CloudOptions {
        control_plane: ControlPlane::RealWithTacker(TAG.into()),
        ..CloudOptions::no_hosts(dir.path())
    })
    .await
    .unwrap();
    let real = tb.real().unwrap();
    eprintln!(
        "real control plane with Tacker up in {:.1} s",
        real.start_time.as_secs_f64()
    );
    let tacker = real.tacker_url.clone().unwrap();
    let ports = [
        port_of(&real.keystone_url),
        port_of(&real.heat_url),
        port_of(&tacker),
    ];
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();

    // Keystone's catalog names Tacker's API (type nfv-orchestration, unversioned URL).
    let (token, body) = real.admin_token().await.unwrap();
    let urls: Vec<&str> = body["token"]["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "nfv-orchestration")
        .flat_map(|s| s["endpoints"].as_array().unwrap())
        .map(|e| e["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, [tacker.as_str(); 3], "{}", body["token"]["catalog"]);

    // /vnflcm/v2 with a token and the Version header; without either it refuses.
    let op = Operator::login_real(&tb).await;
    assert_eq!(op.get("/subscriptions").await, json!([]));
    let st = |r: reqwest::Response| r.status().as_u16();
    let r = http
        .get(format!("{tacker}/vnflcm/v2/subscriptions"))
        .header("version", "2.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(st(r), 401);
    let r = http
        .get(format!("{tacker}/vnflcm/v2/subscriptions"))
        .header("x-auth-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(st(r), 400);

    // Tacker's sample package with vnfkeeper's MgmtDriver, onboarded through Tacker's own API.
    let out =
        std::process::Command::new(support::repo_root().join("scripts/tacker-sample-package"))
            .arg(dir.path().join("package"))
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let zip = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let vnfd = onboard(&http, &tacker, &token, &zip).await;

    // vnfkeeper subscribes itself: Tacker tests the callback (GET) before it stores it.
    let install = support::Install::new();
    let (daemon, port) = companion(&install, &tb, &vnfd);
    // The settings of vnfkeeper's MgmtDriver script where Tacker's conductor looks for them.
    let conf = real.mgmt_driver_config();
    let pw = conf.with_extension("password");
    std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        &conf,
        format!(
            "[vnfkeeper]\nurl = http://127.0.0.1:{port}/vnfkeeper/mgmt-hooks\nauth_type = BASIC\n\
             username = {USER}\npassword_file = {}\ntimeout_secs = 120\npoll_secs = 1\n",
            pw.display()
        ),
    )
    .unwrap();
    assert!(
        support::wait_until(Duration::from_secs(120), || {
            Store::open(&install.database)
                .unwrap()
                .reader()
                .tacker_subscription()
                .unwrap()
                .is_some()
        }),
        "no subscription: {}",
        daemon.log_text()
    );
    let subs = op.get("/subscriptions").await;
    let ours = subs.as_array().unwrap();
    assert_eq!(ours.len(), 1, "{subs}");
    assert!(
        ours[0]["callbackUri"]
            .as_str()
            .unwrap()
            .ends_with("/vnfkeeper/notifications"),
        "{subs}"
    );
    assert_eq!(
        ours[0]["filter"]["vnfInstanceSubscriptionFilter"]["vnfdIds"],
        json!([vnfd]),
        "{subs}"
    );

    // Create and instantiate through /vnflcm/v2, the VIM being this Keystone (Tacker's guide's
    // request for this package, without the cluster installation parameters).
    let sim = tb.base_url();
    let (_, nets) = sim_get(
        &http,
        &sim,
        &token,
        "/network/v2.0/networks?name=testbed-net",
    )
    .await;
    let net = nets["networks"][0]["id"].as_str().unwrap().to_string();
    let yaml: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(tb.clouds_yaml()).unwrap()).unwrap();
    let password = yaml["clouds"]["testbed"]["auth"]["password"].clone();
    let ext_link = |id: &str, cpd: &str, cfg: &str| {
        json!({"id": id, "resourceId": net, "extCps": [{"cpdId": cpd, "cpConfig": {cfg: {"cpProtocolData": [
            {"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "numDynamicAddresses": 1}]}}]}}}]})
    };
    let request = json!({
        "flavourId": "simple",
        "vimConnectionInfo": {"vim1": {
            "vimId": uuid::Uuid::new_v4().to_string(),
            "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3",
            "interfaceInfo": {"endpoint": real.keystone_url},
            "accessInfo": {"username": "admin", "password": password, "project": "admin",
                "projectDomain": "Default", "userDomain": "Default", "region": "RegionOne"}}},
        "additionalParams": {"lcm-operation-user-data": "./UserData/userdata_standard.py",
            "lcm-operation-user-data-class": "StandardUserData"},
        "extVirtualLinks": [ext_link("net0_master", "masterNode_CP1", "Master_CP1"),
            ext_link("net0_worker", "workerNode_CP1", "Worker_CP1")],
    });
    let (st, v, _) = op
        .post(
            "/vnf_instances",
            json!({"vnfdId": vnfd, "vnfInstanceName": "real-tacker"}),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["instantiationState"], "NOT_INSTANTIATED");
    let inst = v["id"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    let o = run(&op, &inst, "instantiate", request).await;
    assert_eq!(o["operationState"], "COMPLETED", "{o}");
    eprintln!(
        "INSTANTIATE COMPLETED in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    let v = op.get(&format!("/vnf_instances/{inst}")).await;
    assert_eq!(v["instantiationState"], "INSTANTIATED", "{v}");
    let info = &v["instantiatedVnfInfo"];
    let mut vdus: Vec<&str> = info["vnfcResourceInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["vduId"].as_str().unwrap())
        .collect();
    vdus.sort_unstable();
    assert_eq!(vdus, ["masterNode", "workerNode", "workerNode"], "{info}");
    let servers = server_ids(info);
    for s in &servers {
        let (st, v) = sim_get(&http, &sim, &token, &format!("/compute/v2.1/servers/{s}")).await;
        assert_eq!(st, 200, "server {s} in the simulated Nova: {v}");
        assert_eq!(v["server"]["status"], "ACTIVE", "{v}");
    }
    // Tacker's vnfcInfo ids are `<vduId>-<server id>` (what vnfkeeper sends back in a heal).
    for c in info["vnfcInfo"].as_array().unwrap() {
        let id = c["id"].as_str().unwrap();
        let rid = c["vnfcResourceInfoId"].as_str().unwrap();
        assert!(id.ends_with(&format!("-{rid}")), "{c}");
    }
    // The package's image went to Glance tagged with the instance; each port has its
    // floating IP on `public`.
    let (_, images) = sim_get(&http, &sim, &token, &format!("/image/v2/images?tag={inst}")).await;
    let mut names: Vec<&str> = images["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["masterNode-image", "workerNode-image"], "{images}");
    let (_, fips) = sim_get(&http, &sim, &token, "/network/v2.0/floatingips").await;
    assert_eq!(fips["floatingips"].as_array().unwrap().len(), 3, "{fips}");

    // vnfkeeper recorded Tacker's INSTANTIATE as it went (Tacker's own notifications, then the
    // poll): STARTING, PROCESSING, COMPLETED.
    let db = install.database.clone();
    assert!(
        support::wait_until(Duration::from_secs(60), || {
            recorded(&db, &inst)
                .iter()
                .any(|(o, s, _)| o == "INSTANTIATE" && *s == OperationState::Completed)
        }),
        "INSTANTIATE not recorded COMPLETED: {:?}\n{}",
        recorded(&db, &inst),
        daemon.log_text()
    );
    let notes = Store::open(&db)
        .unwrap()
        .reader()
        .tacker_notifications(Some(&inst))
        .unwrap();
    eprintln!(
        "vnfkeeper recorded {} notification(s) of Tacker about {inst}: {:?}",
        notes.len(),
        notes
            .iter()
            .map(|n| format!(
                "{} {}",
                n.notification.notification_type.as_str(),
                n.notification
                    .occurrence
                    .as_ref()
                    .map(|o| format!("{} {:?}", o.operation, o.operation_state))
                    .unwrap_or_default()
            ))
            .collect::<Vec<_>>()
    );
    assert!(
        notes.iter().any(|n| n
            .notification
            .occurrence
            .as_ref()
            .is_some_and(|o| o.operation_state == OperationState::Completed)),
        "no COMPLETED notification from Tacker recorded"
    );

    // A worker heal in Tacker: Tacker's real conductor runs vnfkeeper's script as the VNFD's
    // heal_start; vnfkeeper has not adopted this VNF (no `[tacker.packages]` entry), refuses
    // the hook, and Tacker's operation fails with vnfkeeper's reason before anything changed.
    let worker = info["vnfcInfo"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["vduId"] == "workerNode")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let o = run(&op, &inst, "heal", json!({"vnfcInstanceId": [worker]})).await;
    assert_eq!(o["operationState"], "FAILED_TEMP", "{o}");
    assert_eq!(o["error"]["title"], "Mgmt driver execution failed", "{o}");
    let detail = o["error"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("heal_start failed:") && detail.contains("vnfkeeper"),
        "{detail}"
    );
    assert!(!detail.contains(PASSWORD), "{detail}");
    eprintln!("Tacker's HEAL: FAILED_TEMP: {detail}");
    let after = op.get(&format!("/vnf_instances/{inst}")).await;
    let mut ids_after = server_ids(&after["instantiatedVnfInfo"]);
    let mut ids_before = servers.clone();
    ids_after.sort();
    ids_before.sort();
    assert_eq!(ids_after, ids_before, "a server changed");
    let occ = o["id"].as_str().unwrap();
    // Tacker 16.0.0 takes `fail` without a body (with one: 500, "lcm_op_occ_fail() got an
    // unexpected keyword argument 'body'").
    let r = http
        .post(format!("{tacker}/vnflcm/v2/vnf_lcm_op_occs/{occ}/fail"))
        .header("x-auth-token", op.token())
        .header("version", "2.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["operationState"], "FAILED", "{v}");

    // Terminate: Heat deletes the stack, Tacker its images.
    let o = run(
        &op,
        &inst,
        "terminate",
        json!({"terminationType": "FORCEFUL"}),
    )
    .await;
    assert_eq!(o["operationState"], "COMPLETED", "{o}");
    let v = op.get(&format!("/vnf_instances/{inst}")).await;
    assert_eq!(v["instantiationState"], "NOT_INSTANTIATED", "{v}");
    for s in &servers {
        let (st, _) = sim_get(&http, &sim, &token, &format!("/compute/v2.1/servers/{s}")).await;
        assert_eq!(st, 404, "server {s} still there");
    }
    // Tacker's local NFVO deletes the images when it is told of the COMPLETED, which may come
    // after the op occ reads COMPLETED.
    let t0 = Instant::now();
    loop {
        let (_, images) =
            sim_get(&http, &sim, &token, &format!("/image/v2/images?tag={inst}")).await;
        if images["images"] == json!([]) {
            break;
        }
        assert!(t0.elapsed() < WITHIN, "images left: {images}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (_, fips) = sim_get(&http, &sim, &token, "/network/v2.0/floatingips").await;
    assert_eq!(fips["floatingips"], json!([]));
    assert!(
        support::wait_until(Duration::from_secs(60), || {
            recorded(&db, &inst)
                .iter()
                .any(|(o, s, _)| o == "TERMINATE" && *s == OperationState::Completed)
        }),
        "TERMINATE not recorded COMPLETED: {:?}",
        recorded(&db, &inst)
    );
    for (o, s, states) in recorded(&db, &inst) {
        eprintln!("vnfkeeper recorded Tacker's {o}: {s:?}, seen {states:?}");
    }
    drop(daemon);

    // The teardown stops everything: no tagged process, no listener.
    tb.shutdown().await;
    let (pids, open) = leftovers(&ports);
    assert!(pids.is_empty(), "processes left: {pids:?}");
    assert!(open.is_empty(), "ports still answering: {open:?}");
    assert!(testbed::cloud::real::kill_tagged(TAG).await.is_empty());
}
