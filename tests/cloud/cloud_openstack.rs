//! `vnfkeeper::cloud::OpenStackCloud` against the testbed's simulated cloud (no hosts: servers are
//! records only). Covers the lifecycle the engine drives — create from the pv-k8s-cluster
//! BaseHOT, observe, scale by PATCH, heal by mark_unhealthy + PATCH, delete — plus error
//! classification, pagination and request counting.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use testbed::cloud::{CLOUD_NAME, CloudOptions, FaultRule, Testbed};
use vnfkeeper::cloud::{
    Cloud, CloudError, ErrorKind, OpenStackCloud, PollPolicy, StackCreate, StackRef, StackResource,
    StackStatus,
};

// Note: `FaultRule::default()` has `probability: 0.0` (derived Default; only serde defaults it to
// 1.0), so every rule below sets `probability: 1.0` explicitly.

const TIMEOUT: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(60);

async fn start() -> (Testbed, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tb = Testbed::start(CloudOptions::no_hosts(dir.path()))
        .await
        .expect("testbed starts");
    (tb, dir)
}

fn fast_poll() -> PollPolicy {
    PollPolicy {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
        factor: 2.0,
        jitter: 0.2,
    }
}

async fn connect(tb: &Testbed) -> OpenStackCloud {
    OpenStackCloud::connect(tb.clouds_yaml(), CLOUD_NAME, TIMEOUT)
        .await
        .expect("connect")
        .with_poll_policy(fast_poll())
}

fn basehot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/packages/pv-k8s-cluster/BaseHOT/simple")
}

fn yaml(path: &Path) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("read template")).expect("YAML")
}

fn nfv(workers: u32) -> Value {
    json!({
        "VDU": {
            "masterNode": {"computeFlavourId": "m1.medium", "vcImageId": "ubuntu", "desired_capacity": 1},
            "workerNode": {"computeFlavourId": "m1.medium", "vcImageId": "ubuntu", "desired_capacity": workers},
            "storage_server": {"computeFlavourId": "m1.small", "vcImageId": "ubuntu"}
        },
        "CP": {
            "masterNode_CP1": {"network": "net0"},
            "workerNode_CP2": {"network": "net0"},
            "storage_server_CP": {"network": "net0"}
        }
    })
}

/// The create request: top template as JSON, `nested/*.yaml` under the names the top template
/// uses (`masterNode.yaml`, `workerNode.yaml`), the `nfv` parameter as an object.
fn pv_request(name: &str, workers: u32) -> StackCreate {
    let dir = basehot_dir();
    let mut req = StackCreate::new(name, yaml(&dir.join("pv_k8s_cluster_top.hot.yaml")));
    for f in ["masterNode.yaml", "workerNode.yaml"] {
        req.files.insert(
            f.to_string(),
            std::fs::read_to_string(dir.join("nested").join(f)).expect("nested"),
        );
    }
    req.parameters.insert("nfv".into(), nfv(workers));
    req.timeout_mins = Some(10);
    req
}

fn servers_of(res: &[StackResource]) -> Vec<&StackResource> {
    res.iter()
        .filter(|r| r.resource_type == "OS::Nova::Server")
        .collect()
}

fn ids(v: &[vnfkeeper::cloud::Server]) -> BTreeSet<String> {
    v.iter().map(|s| s.id.clone()).collect()
}

#[tokio::test]
async fn lifecycle_create_observe_scale_heal_delete() {
    let (tb, _dir) = start().await;
    let cloud = connect(&tb).await;
    assert_eq!(cloud.find_stack("pv").await.unwrap(), None, "no stack yet");

    // Create and wait.
    let stack = cloud
        .create_stack(&pv_request("pv", 2))
        .await
        .expect("create");
    assert_eq!(stack.name, "pv");
    let st = cloud
        .wait_stack(&stack, &[StackStatus::CreateComplete], WAIT)
        .await
        .expect("create completes");
    assert_eq!(st.stack_status, StackStatus::CreateComplete);
    assert_eq!(st.id, stack.id);
    assert_eq!(
        st.parameter_json("nfv").unwrap()["VDU"]["workerNode"]["desired_capacity"],
        2
    );
    assert_eq!(
        cloud.find_stack("pv").await.unwrap(),
        Some(stack.clone()),
        "302 followed"
    );
    // A second create of the same name is a conflict, not transient.
    let dup = cloud.create_stack(&pv_request("pv", 2)).await.unwrap_err();
    assert_eq!(dup.kind(), ErrorKind::Conflict, "{dup}");
    assert!(!dup.is_transient());

    // Resources, nested_depth=2: 4 servers; workers live in the ASG members' nested stacks.
    let res = cloud.stack_resources(&stack, 2).await.expect("resources");
    let srv = servers_of(&res);
    assert_eq!(srv.len(), 4, "{srv:#?}");
    let workers: Vec<&&StackResource> = srv
        .iter()
        .filter(|r| r.resource_name == "workerNode")
        .collect();
    assert_eq!(workers.len(), 2);
    for w in &workers {
        assert_ne!(w.stack, stack, "a worker is owned by its nested stack");
        assert!(w.parent_resource.is_some(), "{w:?}");
        assert_eq!(w.resource_status, "CREATE_COMPLETE");
    }
    let storage = srv
        .iter()
        .find(|r| r.resource_name == "storage_server")
        .expect("storage server");
    assert_eq!(
        storage.stack, stack,
        "the storage server is in the top stack"
    );
    let asg = res
        .iter()
        .find(|r| r.resource_name == "worker_instance")
        .expect("worker ASG");
    assert!(asg.nested_stack.is_some());
    assert_eq!(
        cloud
            .stack_resources(&stack, 0)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.resource_type == "OS::Nova::Server")
            .count(),
        1
    );

    // Servers, ports, volumes.
    let servers = cloud.servers().await.expect("servers");
    assert_eq!(servers.len(), 4);
    let phys: BTreeSet<String> = srv.iter().map(|r| r.physical_resource_id.clone()).collect();
    assert_eq!(ids(&servers), phys, "Nova ids = Heat physical ids");
    let ports = cloud.ports().await.expect("ports");
    assert_eq!(ports.len(), 4);
    for s in &servers {
        assert_eq!(s.status, "ACTIVE");
        let ips = s.ips();
        assert_eq!(ips.len(), 1, "{s:?}");
        assert_eq!(s.ips_on("net0"), ips, "{s:?}");
        let port = ports
            .iter()
            .find(|p| p.device_id == s.id)
            .expect("port of the server");
        assert_eq!(port.fixed_ips[0].ip_address, ips[0]);
    }
    let storage_id = &storage.physical_resource_id;
    let volumes = cloud.volumes().await.expect("volumes");
    assert_eq!(volumes.len(), 1);
    let vol = &volumes[0];
    assert_eq!(vol.name.as_deref(), Some("storage_server_volume"));
    assert_eq!(vol.size, 5);
    assert_eq!(vol.status, "in-use");
    assert_eq!(vol.attachments.len(), 1);
    assert_eq!(&vol.attachments[0].server_id, storage_id);
    assert_eq!(vol.attachments[0].device.as_deref(), Some("/dev/vdb"));
    let vol_res = res
        .iter()
        .find(|r| r.resource_name == "storage_server_volume")
        .unwrap();
    assert_eq!(vol_res.physical_resource_id, vol.id);

    // Scale out: PATCH desired_capacity 2 → 3 gives a 5th server; the others stay.
    cloud
        .update_stack_patch(&stack, json!({"nfv": nfv(3)}))
        .await
        .expect("patch");
    let st = cloud
        .wait_stack(&stack, &[StackStatus::UpdateComplete], WAIT)
        .await
        .expect("scale completes");
    assert_eq!(
        st.parameter_json("nfv").unwrap()["VDU"]["workerNode"]["desired_capacity"],
        3
    );
    let after_scale = cloud.servers().await.unwrap();
    assert_eq!(after_scale.len(), 5);
    assert!(
        ids(&after_scale).is_superset(&phys),
        "existing servers kept"
    );

    // Heal one worker: mark_unhealthy in its nested stack + PATCH → replaced, others unchanged.
    let res = cloud.stack_resources(&stack, 2).await.unwrap();
    let victim = servers_of(&res)
        .into_iter()
        .find(|r| r.resource_name == "workerNode")
        .unwrap()
        .clone();
    cloud
        .mark_unhealthy(
            &victim.stack,
            &victim.resource_name,
            "test: node unreachable",
        )
        .await
        .expect("mark");
    let marked = cloud.stack_resources(&stack, 2).await.unwrap();
    let m = marked
        .iter()
        .find(|r| r.physical_resource_id == victim.physical_resource_id)
        .unwrap();
    assert_eq!(m.resource_status, "CHECK_FAILED");
    assert_eq!(m.status_reason, "test: node unreachable");
    cloud
        .update_stack_patch(&stack, json!({}))
        .await
        .expect("heal patch");
    cloud
        .wait_stack(&stack, &[StackStatus::UpdateComplete], WAIT)
        .await
        .expect("heal completes");
    let healed = cloud.servers().await.unwrap();
    assert_eq!(healed.len(), 5);
    let before = ids(&after_scale);
    let now = ids(&healed);
    let gone: Vec<&String> = before.difference(&now).collect();
    let new: Vec<&String> = now.difference(&before).collect();
    assert_eq!(
        gone,
        vec![&victim.physical_resource_id],
        "only the marked server was replaced"
    );
    assert_eq!(new.len(), 1);
    let vols = cloud.volumes().await.unwrap();
    assert_eq!(vols[0].id, vol.id, "the volume was kept");
    assert_eq!(&vols[0].attachments[0].server_id, storage_id);

    // Delete.
    cloud.delete_stack(&stack).await.expect("delete");
    let st = cloud
        .wait_stack(&stack, &[StackStatus::DeleteComplete], WAIT)
        .await
        .expect("delete completes");
    assert_eq!(st.stack_status, StackStatus::DeleteComplete);
    assert!(cloud.servers().await.unwrap().is_empty());
    assert!(cloud.ports().await.unwrap().is_empty());
    assert!(cloud.volumes().await.unwrap().is_empty());
    assert_eq!(cloud.find_stack("pv").await.unwrap(), None);
    cloud
        .delete_stack(&stack)
        .await
        .expect("deleting again is fine");
    tb.shutdown().await;
}

#[tokio::test]
async fn pagination_counts_only_pages() {
    let (tb, _dir) = start().await;
    let cloud = connect(&tb).await;
    let stack = cloud.create_stack(&pv_request("pv", 2)).await.unwrap();
    cloud
        .wait_stack(&stack, &[StackStatus::CreateComplete], WAIT)
        .await
        .unwrap();

    // Default page size: one request per list.
    let n0 = cloud.request_count();
    assert_eq!(cloud.servers().await.unwrap().len(), 4);
    assert_eq!(cloud.ports().await.unwrap().len(), 4);
    assert_eq!(cloud.volumes().await.unwrap().len(), 1);
    assert_eq!(cloud.request_count() - n0, 3);

    // inventory(): the three listings concurrently, three requests.
    let n0 = cloud.request_count();
    let inv = cloud.inventory().await.unwrap();
    assert_eq!(
        (inv.servers.len(), inv.ports.len(), inv.volumes.len()),
        (4, 4, 1)
    );
    assert_eq!(cloud.request_count() - n0, 3);

    // Page size 3: 4 servers = 2 pages (the short last page has no next link), 2 requests.
    let paged = cloud.clone().with_page_size(Some(3));
    tb.cloud().reset_request_counts();
    let n0 = paged.request_count();
    let all = paged.servers().await.unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(ids(&all).len(), 4, "no duplicates across pages");
    assert_eq!(paged.request_count() - n0, 2);
    let counted = tb.cloud().request_counts();
    assert_eq!(
        counted["compute"]["GET /compute/v2.1/servers/detail"], 2,
        "{counted:?}"
    );

    // Page size 2: 2 full pages, then an empty one (Nova links a next page after a full one).
    let paged = cloud.clone().with_page_size(Some(2));
    let n0 = paged.request_count();
    assert_eq!(paged.servers().await.unwrap().len(), 4);
    assert_eq!(paged.request_count() - n0, 3);
    let n0 = paged.request_count();
    assert_eq!(paged.ports().await.unwrap().len(), 4);
    assert_eq!(paged.request_count() - n0, 3);
    let n0 = paged.request_count();
    assert_eq!(paged.volumes().await.unwrap().len(), 1);
    assert_eq!(paged.request_count() - n0, 1);

    // Page size 1: 5 requests for 4 servers; the clone shares the counter with the original.
    let paged = cloud.clone().with_page_size(Some(1));
    let n0 = cloud.request_count();
    assert_eq!(paged.servers().await.unwrap().len(), 4);
    assert_eq!(cloud.request_count() - n0, 5);
    tb.shutdown().await;
}

#[tokio::test]
async fn errors_are_classified() {
    let (tb, _dir) = start().await;
    let cloud = connect(&tb).await;

    // 404: not transient, names the URL and Heat's message.
    let missing = StackRef::new("nope", "00000000-0000-0000-0000-000000000000");
    let e = cloud.stack(&missing).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(!e.is_transient());
    assert_eq!(e.status(), Some(404));
    let text = e.to_string();
    assert!(
        text.contains("/stacks/nope/00000000-0000-0000-0000-000000000000"),
        "{text}"
    );
    assert!(text.contains("could not be found"), "{text}");
    assert_eq!(cloud.find_stack("nope").await.unwrap(), None);
    let e = cloud
        .mark_unhealthy(&missing, "vdu", "r")
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    cloud
        .delete_stack(&missing)
        .await
        .expect("404 on delete = already gone");
    let e = cloud
        .wait_stack(&missing, &[StackStatus::CreateComplete], WAIT)
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    let gone = cloud
        .wait_stack(&missing, &[StackStatus::DeleteComplete], WAIT)
        .await
        .unwrap();
    assert_eq!(gone.stack_status, StackStatus::DeleteComplete);

    // Injected 5xx on each service: transient, with status and message.
    for (service, call) in [
        ("compute", 0),
        ("network", 1),
        ("volume", 2),
        ("orchestration", 3),
    ] {
        tb.cloud().add_api_fault(
            service,
            FaultRule {
                status: Some(503),
                count: Some(1),
                probability: 1.0,
                ..FaultRule::default()
            },
        );
        let e = match call {
            0 => cloud.servers().await.map(|_| ()).unwrap_err(),
            1 => cloud.ports().await.map(|_| ()).unwrap_err(),
            2 => cloud.volumes().await.map(|_| ()).unwrap_err(),
            _ => cloud.find_stack("x").await.map(|_| ()).unwrap_err(),
        };
        assert!(e.is_transient(), "{service}: {e}");
        assert_eq!(e.kind(), ErrorKind::Server);
        assert_eq!(e.status(), Some(503));
        assert!(e.to_string().contains("injected fault"), "{e}");
    }
    cloud.servers().await.expect("the fault was used up");
    tb.cloud().add_api_fault(
        "compute",
        FaultRule {
            status: Some(429),
            count: Some(1),
            probability: 1.0,
            ..FaultRule::default()
        },
    );
    let e = cloud.servers().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert!(e.is_transient());

    // A 401 (token revoked) makes the client re-authenticate and resend once.
    tb.cloud().add_api_fault(
        "compute",
        FaultRule {
            status: Some(401),
            count: Some(1),
            probability: 1.0,
            ..FaultRule::default()
        },
    );
    let n0 = cloud.request_count();
    cloud.servers().await.expect("retried after a new token");
    assert_eq!(cloud.request_count() - n0, 2);
    tb.cloud().add_api_fault(
        "compute",
        FaultRule {
            status: Some(401),
            count: Some(2),
            probability: 1.0,
            ..FaultRule::default()
        },
    );
    let e = cloud.servers().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(!e.is_transient());

    // Latency beyond the client timeout: Timeout, transient.
    let short = OpenStackCloud::connect(tb.clouds_yaml(), CLOUD_NAME, Duration::from_millis(500))
        .await
        .unwrap();
    tb.cloud().add_api_fault(
        "compute",
        FaultRule {
            latency_ms: 2000,
            count: Some(1),
            probability: 1.0,
            ..FaultRule::default()
        },
    );
    let t0 = std::time::Instant::now();
    let e = short.servers().await.unwrap_err();
    assert!(
        t0.elapsed() < Duration::from_millis(1800),
        "timed out in {:?}",
        t0.elapsed()
    );
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.is_transient());

    // wait_stack keeps polling through transient errors.
    let stack = cloud.create_stack(&pv_request("pv", 1)).await.unwrap();
    tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            status: Some(500),
            count: Some(3),
            path_contains: Some(stack.id.clone()),
            probability: 1.0,
            ..FaultRule::default()
        },
    );
    let st = cloud
        .wait_stack(&stack, &[StackStatus::CreateComplete], WAIT)
        .await
        .expect("survives 5xx while polling");
    assert_eq!(st.stack_status, StackStatus::CreateComplete);
    assert!(
        tb.cloud()
            .api_faults()
            .get("orchestration")
            .is_none_or(|r| r.is_empty()),
        "faults were hit"
    );
    // A PATCH with a non-object is refused locally.
    assert!(cloud.update_stack_patch(&stack, json!([1])).await.is_err());
    tb.shutdown().await;
}

#[tokio::test]
async fn failed_stack_and_wait_deadline() {
    let (tb, _dir) = start().await;
    let cloud = connect(&tb).await;
    // A port with an address outside the testbed subnet fails the create.
    let template = json!({
        "heat_template_version": "2013-05-23",
        "resources": {"bad_port": {"type": "OS::Neutron::Port",
            "properties": {"network": "net0", "fixed_ips": [{"ip_address": "192.168.99.9"}]}}}
    });
    let stack = cloud
        .create_stack(&StackCreate::new("bad", template))
        .await
        .unwrap();
    let e = cloud
        .wait_stack(&stack, &[StackStatus::CreateComplete], WAIT)
        .await
        .unwrap_err();
    match &e {
        CloudError::StackFailed { status, reason, .. } => {
            assert_eq!(*status, StackStatus::CreateFailed);
            assert!(!reason.is_empty());
        }
        other => panic!("expected StackFailed, got {other:?}"),
    }
    assert!(!e.is_transient());
    let res = cloud.stack_resources(&stack, 0).await.unwrap();
    assert_eq!(res[0].resource_status, "CREATE_FAILED");

    // Full update (PUT) with a good template recovers the stack.
    let good = json!({"heat_template_version": "2013-05-23",
        "resources": {"ok_port": {"type": "OS::Neutron::Port", "properties": {"network": "net0"}}}});
    cloud
        .update_stack(&stack, &StackCreate::new("ignored", good))
        .await
        .expect("put");
    cloud
        .wait_stack(&stack, &[StackStatus::UpdateComplete], WAIT)
        .await
        .expect("update completes");
    let res = cloud.stack_resources(&stack, 0).await.unwrap();
    assert_eq!(res.len(), 1);
    assert_eq!(res[0].resource_name, "ok_port");
    assert_eq!(cloud.ports().await.unwrap().len(), 1);

    // A deadline shorter than the work: WaitTimeout (transient) with the last status.
    let pv = cloud.create_stack(&pv_request("pv", 2)).await.unwrap();
    tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            latency_ms: 300,
            probability: 1.0,
            ..FaultRule::default()
        },
    );
    let e = cloud
        .wait_stack(
            &pv,
            &[StackStatus::Other("NEVER_COMPLETE".into())],
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    assert!(e.is_transient());
    tb.cloud().clear_api_faults(None);
    tb.shutdown().await;
}

#[tokio::test]
async fn connect_errors_and_no_secrets() {
    let (tb, dir) = start().await;
    let text = std::fs::read_to_string(tb.clouds_yaml()).unwrap();
    let password =
        serde_yaml_ng::from_str::<Value>(&text).unwrap()["clouds"][CLOUD_NAME]["auth"]["password"]
            .as_str()
            .unwrap()
            .to_string();

    let cloud = connect(&tb).await;
    let dbg = format!("{cloud:?}");
    assert!(!dbg.contains(&password), "{dbg}");
    cloud.servers().await.unwrap();

    // Unknown cloud name → Config, listing the names.
    let e = OpenStackCloud::connect(tb.clouds_yaml(), "other", TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains(CLOUD_NAME), "{e}");
    // Missing file → Config.
    let e = OpenStackCloud::connect(&dir.path().join("nope.yaml"), CLOUD_NAME, TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);

    // Wrong password → Unauthorized, not transient; neither password appears anywhere.
    let wrong = dir.path().join("wrong.yaml");
    std::fs::write(&wrong, text.replace(&password, "not-the-Secret-42")).unwrap();
    let e = OpenStackCloud::connect(&wrong, CLOUD_NAME, TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(!e.is_transient());
    for shown in [e.to_string(), format!("{e:?}")] {
        assert!(
            !shown.contains("not-the-Secret-42") && !shown.contains(&password),
            "{shown}"
        );
    }

    // Nothing listens: connection error, transient.
    let dead = dir.path().join("dead.yaml");
    let port = crate::support::free_port();
    std::fs::write(
        &dead,
        text.replace(&tb.base_url(), &format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let e = OpenStackCloud::connect(&dead, CLOUD_NAME, TIMEOUT)
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    tb.shutdown().await;
}

/// A `tracing` writer that appends to a shared buffer.
#[derive(Clone, Default)]
struct LogBuf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn requests_are_logged_without_secrets() {
    let logs = LogBuf::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // Global, not thread-local: with tests running in parallel, a thread-local subscriber can
    // miss events whose callsite interest another thread cached first. Other tests' lines end up
    // in the buffer too, which only makes the secret checks below stronger.
    tracing::subscriber::set_global_default(subscriber)
        .expect("only this test installs a subscriber");

    let (tb, _dir) = start().await;
    let text = std::fs::read_to_string(tb.clouds_yaml()).unwrap();
    let password =
        serde_yaml_ng::from_str::<Value>(&text).unwrap()["clouds"][CLOUD_NAME]["auth"]["password"]
            .as_str()
            .unwrap()
            .to_string();
    let cloud = connect(&tb).await;
    cloud.servers().await.unwrap();
    let _ = cloud.stack(&StackRef::new("nope", "1")).await.unwrap_err();
    let wrong = _dir.path().join("wrong.yaml");
    std::fs::write(&wrong, text.replace(&password, "not-the-Secret-42")).unwrap();
    let _ = OpenStackCloud::connect(&wrong, CLOUD_NAME, TIMEOUT)
        .await
        .unwrap_err();
    tb.shutdown().await;

    let out = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let line = out
        .lines()
        .find(|l| l.contains("openstack request") && l.contains("/compute/v2.1/servers/detail"))
        .unwrap_or_else(|| panic!("no request line in:\n{out}"));
    assert!(
        line.contains("method=GET") && line.contains("status=200") && line.contains("ms="),
        "{line}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("/stacks/nope/1") && l.contains("status=404")),
        "{out}"
    );
    assert!(
        !out.contains(&password) && !out.contains("not-the-Secret-42"),
        "{out}"
    );
    assert!(!out.to_ascii_lowercase().contains("x-auth-token"), "{out}");
}

// ---- A minimal HTTP mock for what the testbed cannot show: a catalog with only `volumev3`,
// ---- Cinder `name: null`, next links without a marker, and the exact request bodies.

/// One request the mock received.
#[derive(Clone, Debug)]
struct MockReq {
    method: String,
    path: String,
    query: String,
    token: Option<String>,
    body: Value,
}

type MockLog = std::sync::Arc<std::sync::Mutex<Vec<MockReq>>>;

/// Serves `handler(request, base_url) -> (status, extra headers, JSON body)` on 127.0.0.1, one
/// request per connection (`Connection: close`).
async fn mock<F>(handler: F) -> (String, MockLog)
where
    F: Fn(&MockReq, &str) -> (u16, Vec<(String, String)>, Value) + Send + Sync + 'static,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log: MockLog = Default::default();
    let handler = std::sync::Arc::new(handler);
    let (log2, base2) = (log.clone(), base.clone());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (log, handler, base) = (log2.clone(), handler.clone(), base2.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.lines();
                let mut first = lines.next().unwrap_or("").split(' ');
                let method = first.next().unwrap_or("").to_string();
                let target = first.next().unwrap_or("").to_string();
                let header = |name: &str| {
                    head.lines().skip(1).find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.trim()
                            .eq_ignore_ascii_case(name)
                            .then(|| v.trim().to_string())
                    })
                };
                let len: usize = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                let req = MockReq {
                    method,
                    path: path.to_string(),
                    query: query.to_string(),
                    token: header("x-auth-token"),
                    body,
                };
                log.lock().unwrap().push(req.clone());
                let (status, headers, body) = handler(&req, &base);
                let text = if body.is_null() {
                    String::new()
                } else {
                    body.to_string()
                };
                let mut resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    text.len()
                );
                for (k, v) in headers {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                resp.push_str(&text);
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (base, log)
}

/// Keystone + Cinder (volumev3 only) + Nova + Heat answers for the mock.
fn mock_cloud(req: &MockReq, base: &str) -> (u16, Vec<(String, String)>, Value) {
    let q = |k: &str| {
        req.query.split('&').find_map(|kv| {
            kv.split_once('=')
                .filter(|(a, _)| *a == k)
                .map(|(_, v)| v.to_string())
        })
    };
    if req.method == "POST" && req.path == "/identity/v3/auth/tokens" {
        let ep = |t: &str, p: &str| json!({"type": t, "endpoints": [{"interface": "public", "region": "R", "url": format!("{base}{p}")}]});
        let catalog = json!([
            ep("volumev3", "/volume/v3/proj"),
            ep("compute", "/compute/v2.1"),
            ep("orchestration", "/heat/v1/proj")
        ]);
        return (
            201,
            vec![("x-subject-token".into(), "tok-0123456789".into())],
            json!({"token": {"expires_at": "2099-01-01T00:00:00.000000Z", "catalog": catalog}}),
        );
    }
    if req.token.as_deref() != Some("tok-0123456789") {
        return (
            401,
            vec![],
            json!({"error": {"code": 401, "message": "The request you have made requires authentication."}}),
        );
    }
    let stack = json!({"id": "sid", "stack_name": "pv", "stack_status": "CREATE_COMPLETE", "parameters": {}, "outputs": []});
    match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/volume/v3/proj/volumes/detail") => match q("marker").as_deref() {
            None => (
                200,
                vec![],
                json!({"volumes": [{"id": "v1", "name": null, "status": "available", "size": 1, "attachments": []},
                                   {"id": "v2", "name": "data", "status": "in-use", "size": 5,
                                    "attachments": [{"server_id": "s1", "device": "/dev/vdb"}]}],
                       "volumes_links": [{"rel": "next", "href": format!("{base}/volume/v3/proj/volumes/detail?limit=2&marker=v2")}]}),
            ),
            Some("v2") => (
                200,
                vec![],
                json!({"volumes": [{"id": "v3", "name": "x", "size": 1}]}),
            ),
            Some(_) => (
                400,
                vec![],
                json!({"badRequest": {"code": 400, "message": "bad marker"}}),
            ),
        },
        ("GET", "/compute/v2.1/servers/detail") => match q("marker").as_deref() {
            // A next link without a marker: the client takes the last id; then an empty page
            // that still has a next link: the client stops.
            None => (
                200,
                vec![],
                json!({"servers": [{"id": "s1", "name": "a", "status": "ACTIVE"}],
                       "servers_links": [{"rel": "next", "href": format!("{base}/compute/v2.1/servers/detail?page=2")}]}),
            ),
            Some("s1") => (
                200,
                vec![],
                json!({"servers": [], "servers_links": [{"rel": "next", "href": format!("{base}/compute/v2.1/servers/detail?marker=zz")}]}),
            ),
            Some(_) => (
                400,
                vec![],
                json!({"badRequest": {"code": 400, "message": "bad marker"}}),
            ),
        },
        ("POST", "/heat/v1/proj/stacks") => {
            (201, vec![], json!({"stack": {"id": "sid", "links": []}}))
        }
        ("GET", "/heat/v1/proj/stacks/pv") => (
            302,
            vec![(
                "location".into(),
                format!("{base}/heat/v1/proj/stacks/pv/sid"),
            )],
            Value::Null,
        ),
        // Another origin: the client must not follow (token) and reads the Location instead.
        ("GET", "/heat/v1/proj/stacks/far") => (
            302,
            vec![(
                "location".into(),
                "http://127.0.0.2:9/heat/v1/proj/stacks/far/fid".into(),
            )],
            Value::Null,
        ),
        ("GET", "/heat/v1/proj/stacks/pv/sid") => (200, vec![], json!({"stack": stack})),
        ("PATCH", "/heat/v1/proj/stacks/pv-w-1/nid/resources/workerNode") => {
            (200, vec![], Value::Null)
        }
        ("PATCH", "/heat/v1/proj/stacks/pv/sid") | ("PUT", "/heat/v1/proj/stacks/pv/sid") => {
            (202, vec![], Value::Null)
        }
        ("DELETE", "/heat/v1/proj/stacks/pv/sid") => (204, vec![], Value::Null),
        _ => (
            404,
            vec![],
            json!({"error": {"type": "NotFound", "message": format!("no route {}", req.path)}}),
        ),
    }
}

#[tokio::test]
async fn request_building_against_a_minimal_mock() {
    let (base, log) = mock(mock_cloud).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("clouds.yaml");
    std::fs::write(
        &yaml,
        format!(
            "clouds:\n  m:\n    auth:\n      auth_url: {base}/identity/v3\n      username: u\n      password: pw-secret\n      project_name: p\n    region_name: R\n    interface: public\n"
        ),
    )
    .unwrap();
    let cloud = OpenStackCloud::connect(&yaml, "m", TIMEOUT)
        .await
        .expect("connect")
        .with_page_size(Some(2));
    let auth = log.lock().unwrap()[0].body.clone();
    assert_eq!(auth["auth"]["identity"]["password"]["user"]["name"], "u");
    assert_eq!(auth["auth"]["scope"]["project"]["name"], "p");
    assert_eq!(
        auth["auth"]["scope"]["project"]["domain"]["name"],
        "Default"
    );

    // Cinder only as `volumev3`; `name: null`; two pages following the next link's marker.
    let vols = cloud.volumes().await.expect("volumes");
    assert_eq!(
        vols.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        ["v1", "v2", "v3"]
    );
    assert_eq!(vols[0].name, None);
    assert_eq!(vols[1].attachments[0].device.as_deref(), Some("/dev/vdb"));
    // Nova: next link without marker → last id; empty page with a next link → stop.
    let n0 = cloud.request_count();
    let servers = cloud.servers().await.expect("servers");
    assert_eq!(servers.len(), 1);
    assert_eq!(cloud.request_count() - n0, 2);

    // Heat request bodies.
    let mut req = StackCreate::new(
        "pv",
        json!({"heat_template_version": "2013-05-23", "resources": {}}),
    );
    req.files.insert(
        "masterNode.yaml".into(),
        "heat_template_version: 2013-05-23\n".into(),
    );
    req.parameters.insert(
        "nfv".into(),
        json!({"VDU": {"masterNode": {"desired_capacity": 1}}}),
    );
    req.timeout_mins = Some(5);
    let stack = cloud.create_stack(&req).await.expect("create");
    assert_eq!(stack, StackRef::new("pv", "sid"));
    assert_eq!(
        cloud.find_stack("pv").await.unwrap(),
        Some(stack.clone()),
        "302 followed"
    );
    assert_eq!(
        cloud.find_stack("far").await.unwrap(),
        Some(StackRef::new("far", "fid")),
        "Location parsed"
    );
    let nested = StackRef::new("pv-w-1", "nid");
    cloud
        .mark_unhealthy(&nested, "workerNode", "why")
        .await
        .expect("mark");
    cloud
        .update_stack_patch(&stack, json!({"nfv": {"VDU": {}}}))
        .await
        .expect("patch");
    cloud.update_stack(&stack, &req).await.expect("put");
    cloud.delete_stack(&stack).await.expect("delete");
    let e = cloud
        .stack(&StackRef::new("pv", "other"))
        .await
        .unwrap_err();
    assert!(e.is_not_found());
    assert!(
        !e.to_string().contains("tok-0123456789") && !format!("{e:?}").contains("tok-0123456789")
    );

    let log = log.lock().unwrap().clone();
    let find = |m: &str, p: &str| {
        log.iter()
            .find(|r| r.method == m && r.path == p)
            .cloned()
            .unwrap()
    };
    for r in log.iter().skip(1) {
        assert_eq!(r.token.as_deref(), Some("tok-0123456789"), "{r:?}");
    }
    let vol_pages: Vec<&str> = log
        .iter()
        .filter(|r| r.path == "/volume/v3/proj/volumes/detail")
        .map(|r| r.query.as_str())
        .collect();
    assert_eq!(vol_pages, ["limit=2", "limit=2&marker=v2"]);
    let srv_pages: Vec<&str> = log
        .iter()
        .filter(|r| r.path == "/compute/v2.1/servers/detail")
        .map(|r| r.query.as_str())
        .collect();
    assert_eq!(srv_pages, ["limit=2", "limit=2&marker=s1"]);
    let create = find("POST", "/heat/v1/proj/stacks").body;
    assert_eq!(create["stack_name"], "pv");
    assert!(create["template"].is_object());
    assert_eq!(
        create["files"]["masterNode.yaml"],
        "heat_template_version: 2013-05-23\n"
    );
    assert_eq!(
        create["parameters"]["nfv"]["VDU"]["masterNode"]["desired_capacity"], 1,
        "nfv sent as an object"
    );
    assert_eq!(create["timeout_mins"], 5);
    assert_eq!(create["disable_rollback"], true);
    assert_eq!(
        find(
            "PATCH",
            "/heat/v1/proj/stacks/pv-w-1/nid/resources/workerNode"
        )
        .body,
        json!({"mark_unhealthy": true, "resource_status_reason": "why"})
    );
    assert_eq!(
        find("PATCH", "/heat/v1/proj/stacks/pv/sid").body,
        json!({"parameters": {"nfv": {"VDU": {}}}})
    );
    let put = find("PUT", "/heat/v1/proj/stacks/pv/sid").body;
    assert!(
        put.get("stack_name").is_none() && put["template"].is_object(),
        "{put}"
    );
    assert_eq!(
        find("GET", "/heat/v1/proj/stacks/pv/sid").token.as_deref(),
        Some("tok-0123456789")
    );
}

#[tokio::test]
async fn console_output_is_the_tail_nova_returns() {
    let (tb, _dir) = start().await;
    let cloud = connect(&tb).await;
    let stack = cloud.create_stack(&pv_request("con", 1)).await.unwrap();
    cloud
        .wait_stack(&stack, &[StackStatus::CreateComplete], WAIT)
        .await
        .unwrap();
    let server = cloud.servers().await.unwrap().remove(0).id;

    // No host behind the record: the console holds no host key block.
    let text = cloud.console_output(&server, 100).await.unwrap();
    assert!(text.contains("login:"), "{text}");
    assert_eq!(vnfkeeper_core::console::parse(&text), None);

    // `length` keeps the last lines (a block cut at its start no longer counts).
    let fp = "SHA256:U2n2I1UYgj1BSdckUyZctgaWW8CSlL+QfXh3bjuiIFY";
    let block = format!(
        "-----BEGIN SSH HOST KEY FINGERPRINTS-----\n256 {fp} root@x (ED25519)\n-----END SSH HOST KEY FINGERPRINTS-----\n"
    );
    let noise: String = (0..50).map(|i| format!("noise {i}\n")).collect();
    tb.cloud()
        .set_console_override(Some(format!("{block}{noise}")));
    let all = cloud.console_output(&server, 1000).await.unwrap();
    assert_eq!(
        vnfkeeper_core::console::parse(&all).unwrap().fingerprints,
        vec![fp.to_string()]
    );
    let tail = cloud.console_output(&server, 51).await.unwrap();
    assert_eq!(tail.lines().count(), 51, "{tail}");
    assert_eq!(vnfkeeper_core::console::parse(&tail), None);

    // An unknown server: 404, not transient (the engine then falls back to trust on first use).
    let e = cloud
        .console_output("no-such-server", 10)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(!e.is_transient());
    tb.shutdown().await;
}

/// `servers_changed_since`: one request, only the servers changed at or after the time (a
/// deleted one as DELETED), Nova's `Date` header read as the server's clock; with a page size,
/// every page is followed with the time kept.
#[tokio::test]
async fn servers_changed_since_lists_changes_and_reads_the_date() {
    let (tb, _d) = start().await;
    let ids = tb.cloud().add_idle_servers(5, "chg");
    let cloud = connect(&tb).await;
    // `updated` has second resolution: ask from the next second on.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mark = vnfkeeper_core::model::Timestamp(chrono::Utc::now());
    let before = cloud.request_count();
    let page = cloud.servers_changed_since(mark).await.unwrap();
    assert_eq!(cloud.request_count() - before, 1);
    assert!(page.servers.is_empty(), "{:?}", page.servers);
    let date = page.date.expect("the testbed sends a Date header");
    assert!(
        (date.0 - mark.0).num_seconds().abs() <= 5,
        "{date} vs {mark}"
    );

    tb.cloud()
        .inject_server_error(&ids[0], "changes-since")
        .await
        .unwrap();
    tb.cloud().inject_server_vanish(&ids[1]).await.unwrap();
    tb.cloud()
        .inject_server_power(&ids[2], false)
        .await
        .unwrap();
    let page = cloud.servers_changed_since(mark).await.unwrap();
    let mut got: Vec<(String, String)> = page
        .servers
        .iter()
        .map(|s| (s.id.clone(), s.status.clone()))
        .collect();
    got.sort();
    let mut want = vec![
        (ids[0].clone(), "ERROR".to_string()),
        (ids[1].clone(), "DELETED".to_string()),
        (ids[2].clone(), "SHUTOFF".to_string()),
    ];
    want.sort();
    assert_eq!(got, want);

    // Pages: the time travels with the marker.
    let small = connect(&tb).await.with_page_size(Some(2));
    let before = small.request_count();
    let page = small.servers_changed_since(mark).await.unwrap();
    assert_eq!(page.servers.len(), 3);
    assert_eq!(small.request_count() - before, 2);
    tb.shutdown().await;
}

/// A clouds.yaml of the testbed's application credential: entry `by-id`
/// (`application_credential_id`), `by-name` (`application_credential_name` + `user_id`),
/// `by-username` (the name + `username` and `user_domain_name`), `wrong-secret` and
/// `wrong-user`.
fn application_credential_clouds_yaml(tb: &Testbed) -> String {
    let (cred, user_id) = tb.application_credential();
    let auth_url = format!("{}/identity/v3", tb.cloud().base_url());
    format!(
        "clouds:\n  by-id:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {auth_url}\n      application_credential_id: {id}\n      application_credential_secret: {secret}\n    region_name: RegionOne\n  by-name:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {auth_url}\n      application_credential_name: {name}\n      user_id: {user_id}\n      application_credential_secret: {secret}\n  by-username:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {auth_url}\n      application_credential_name: {name}\n      username: admin\n      user_domain_name: Default\n      application_credential_secret: {secret}\n  wrong-secret:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {auth_url}\n      application_credential_id: {id}\n      application_credential_secret: not-{secret}\n  wrong-user:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {auth_url}\n      application_credential_name: {name}\n      username: mallory\n      application_credential_secret: {secret}\n",
        id = cred.id,
        name = cred.name,
        secret = cred.secret,
    )
}

#[tokio::test]
async fn application_credentials_authenticate_and_list_servers() {
    let (tb, dir) = start().await;
    let cloud = connect(&tb).await;
    let stack = cloud
        .create_stack(&pv_request("appcred", 1))
        .await
        .expect("create");
    cloud
        .wait_stack(&stack, &[StackStatus::CreateComplete], WAIT)
        .await
        .expect("create completes");
    let path = dir.path().join("appcred-clouds.yaml");
    std::fs::write(&path, application_credential_clouds_yaml(&tb)).unwrap();
    for entry in ["by-id", "by-name", "by-username"] {
        let c = OpenStackCloud::connect(&path, entry, TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{entry}: {e}"));
        let servers = c.servers().await.expect("servers");
        assert!(!servers.is_empty(), "{entry}: no servers listed");
        let debug = format!("{c:?}");
        assert!(!debug.contains("appcred-"), "{debug}");
    }
    for entry in ["wrong-secret", "wrong-user"] {
        let e = OpenStackCloud::connect(&path, entry, TIMEOUT)
            .await
            .unwrap_err();
        assert!(matches!(e, CloudError::Auth { .. }), "{entry}: {e:?}");
        assert!(!e.to_string().contains("appcred-"), "{e}");
    }
    tb.shutdown().await;
}
