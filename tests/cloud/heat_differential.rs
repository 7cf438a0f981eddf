//! The simulated Heat checked against real Heat 27.0.1 (needs root: the MariaDB and RabbitMQ
//! packages, `/run`): one testbed runs both (`ControlPlane::Real`; the simulated Keystone and
//! Heat stay reachable through `clouds-simulated.yaml`), over the same simulated Nova, Neutron,
//! Cinder and Glance (servers are records). Every template the tests put on a stack goes through
//! both Heats: the adjusted HOT of the INSTANTIATE (`vnfkeeper hot adjust`) of the individual-VNFC,
//! CIR, PV and kubespray packages (the last with an `OS::Neutron::Net`, `Subnet` and a
//! `FloatingIP` on the load balancer), of the private registry (the template vnfkeeper writes
//! from the VNFD, its volume in the server's block device mapping), of the PV package with a
//! floating IP beside each node's port (`support::floating_pv_package`), and the Tacker
//! stand-in's package (`tests/testbed/tests/data/pv_k8s`: a VIP port, outputs). Then the same
//! PATCH updates (a changed `nfv` parameter, a mark-unhealthy and a converge — for a server
//! whose volume its replacement attaches again, after stopping it and detaching the volume as
//! vnfkeeper's HEAL does) and the delete; the templates' stacks run concurrently; after each
//! step both stacks must have the same resources (by path, type and status; members of a
//! scaling group by count), the same server and port properties as Nova and Neutron record them,
//! the same outputs (addresses masked) and output errors, and the same update decisions (which
//! resources kept their physical ids, which were replaced, added or removed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use vnfkeeper::cloud::{Cloud, OpenStackCloud, PollPolicy, StackCreate, StackRef, StackStatus};

use crate::support;

const WAIT: Duration = Duration::from_secs(300);

/// The adjusted HOT of an INSTANTIATE of the package in directory `package` (relative: under
/// `fixtures/packages`): `{"template", "files", "parameters"}`.
fn adjusted(package: impl AsRef<Path>, flavour: &str, request: &str) -> Value {
    let root = support::repo_root();
    let out = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .current_dir(&root)
        .args(["hot", "adjust", "--package"])
        .arg(root.join("fixtures/packages").join(package))
        .args([
            "--flavour",
            flavour,
            "--operation",
            "instantiate",
            "--request",
        ])
        .arg(root.join("fixtures/requests/good").join(request))
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One stack's state, with what differs by construction (ids, random member names, addresses)
/// taken out.
#[derive(Debug, PartialEq, Eq)]
struct View {
    status: String,
    /// (path, type, status), sorted; a scaling group's member is `<group>/member`.
    resources: Vec<(String, String, String)>,
    /// Per server (by path): (name with the stack names and Heat short ids masked, image, zone,
    /// number of addresses, status).
    servers: Vec<(String, String, String, String, usize, String)>,
    /// Per port (by path): (network — `<path>` for a network of the stack —, path of the server
    /// it is attached to).
    ports: Vec<(String, String, String)>,
    /// Output key → (value with IPv4 addresses masked, `output_error`).
    outputs: BTreeMap<String, (Value, Option<String>)>,
}

/// `value` with every IPv4 address in its strings replaced by `IP`: both Heats' servers share
/// one simulated Neutron, so their addresses differ by construction.
fn mask_addresses(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(
            s.split_inclusive(|c: char| !(c.is_ascii_digit() || c == '.'))
                .map(|part| {
                    let (word, rest) = part.split_at(
                        part.find(|c: char| !(c.is_ascii_digit() || c == '.'))
                            .unwrap_or(part.len()),
                    );
                    if word.parse::<std::net::Ipv4Addr>().is_ok() {
                        format!("IP{rest}")
                    } else {
                        part.to_string()
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(mask_addresses).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), mask_addresses(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// path → physical ids, for update decisions.
type Ids = BTreeMap<String, BTreeSet<String>>;

/// Decisions a step must show: path → (kept, added, removed) physical ids.
type Expected<'a> = &'a [(&'a str, (usize, usize, usize))];

/// A Heat short id (`[a-z0-9]{12}`) or stack name suffix: masked in server names.
fn mask(name: &str, stack_name: &str) -> String {
    let name = name.replace(stack_name, "STACK");
    name.split('-')
        .map(|p| {
            if p.len() == 12
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            {
                "ID"
            } else {
                p
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

async fn view(cloud: &OpenStackCloud, s: &StackRef) -> (View, Ids) {
    let stack = cloud.stack(s).await.unwrap();
    let res = cloud.stack_resources(s, 5).await.unwrap();
    // nested stack id → index of the resource that made it
    let maker: BTreeMap<&str, usize> = res
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.nested_stack.as_ref().map(|n| (n.id.as_str(), i)))
        .collect();
    let path = |i: usize| -> String {
        let mut parts = Vec::new();
        let mut cur = i;
        loop {
            let r = &res[cur];
            let parent = maker.get(r.stack.id.as_str()).copied();
            let member =
                parent.is_some_and(|p| res[p].resource_type == "OS::Heat::AutoScalingGroup");
            parts.push(if member {
                "member".to_string()
            } else {
                r.resource_name.clone()
            });
            match parent {
                Some(p) => cur = p,
                None => break,
            }
        }
        parts.reverse();
        parts.join("/")
    };
    let mut ids: Ids = BTreeMap::new();
    let mut resources = Vec::new();
    let mut server_paths = BTreeMap::new();
    let mut port_paths = BTreeMap::new();
    // Networks the stack made (`OS::Neutron::Net`): named by path, their ids differ by
    // construction.
    let mut net_paths = BTreeMap::new();
    for (i, r) in res.iter().enumerate() {
        let p = path(i);
        resources.push((
            p.clone(),
            r.resource_type.clone(),
            r.resource_status.clone(),
        ));
        ids.entry(p.clone())
            .or_default()
            .insert(r.physical_resource_id.clone());
        match r.resource_type.as_str() {
            "OS::Nova::Server" => {
                server_paths.insert(r.physical_resource_id.clone(), p);
            }
            "OS::Neutron::Port" => {
                port_paths.insert(r.physical_resource_id.clone(), p);
            }
            "OS::Neutron::Net" => {
                net_paths.insert(r.physical_resource_id.clone(), format!("<{p}>"));
            }
            _ => {}
        }
    }
    resources.sort();
    let nova: BTreeMap<String, vnfkeeper::cloud::Server> = cloud
        .servers()
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    let mut servers: Vec<_> = server_paths
        .iter()
        .map(|(id, p)| {
            let s = &nova[id];
            (
                p.clone(),
                mask(&s.name, &stack.stack_name),
                s.image.clone().unwrap_or_default(),
                s.availability_zone.clone().unwrap_or_default(),
                s.addresses.values().map(Vec::len).sum(),
                s.status.clone(),
            )
        })
        .collect();
    servers.sort();
    let neutron: BTreeMap<String, vnfkeeper::cloud::Port> = cloud
        .ports()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.id.clone(), p))
        .collect();
    let mut ports: Vec<_> = port_paths
        .iter()
        .map(|(id, p)| {
            let port = &neutron[id];
            (
                p.clone(),
                net_paths
                    .get(&port.network_id)
                    .cloned()
                    .unwrap_or_else(|| port.network_id.clone()),
                server_paths
                    .get(&port.device_id)
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect();
    ports.sort();
    let outputs = stack
        .outputs
        .iter()
        .map(|o| {
            (
                o.output_key.clone(),
                (mask_addresses(&o.output_value), o.output_error.clone()),
            )
        })
        .collect();
    (
        View {
            status: stack.stack_status.as_str().to_string(),
            resources,
            servers,
            ports,
            outputs,
        },
        ids,
    )
}

/// Per path: (kept, added, removed) physical ids from `before` to `after`.
fn decisions(before: &Ids, after: &Ids) -> BTreeMap<String, (usize, usize, usize)> {
    let empty = BTreeSet::new();
    before
        .keys()
        .chain(after.keys())
        .map(|p| {
            let b = before.get(p).unwrap_or(&empty);
            let a = after.get(p).unwrap_or(&empty);
            (
                p.clone(),
                (
                    a.intersection(b).count(),
                    a.difference(b).count(),
                    b.difference(a).count(),
                ),
            )
        })
        .collect()
}

/// One step applied to a stack on one cloud.
enum Step {
    /// PATCH with these parameters.
    Patch(Value),
    /// Mark the first server (by path, then physical id) whose path starts with this prefix
    /// unhealthy, then PATCH `{}`.
    HealServer(&'static str),
    /// [`Step::HealServer`] of a server whose volumes its replacement attaches again (the PV
    /// flavour's storage server), done the way vnfkeeper's HEAL does it: Heat creates the
    /// replacement before it deletes the server (and detaches only its ports,
    /// `Server.prepare_for_replace`), so the server is stopped (`os-stop`) and its volumes
    /// detached (`os-volume_attachments`, until Cinder reports them `available`) first.
    HealKeepingVolumes(&'static str),
}

/// Polls `done` every 200 ms for at most [`WAIT`].
async fn until<F, Fut>(what: &str, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = std::time::Instant::now();
    while !done().await {
        assert!(t0.elapsed() < WAIT, "{what}: not reached within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies `step`; returns the wait's result (`UPDATE_COMPLETE` or the failure).
async fn apply(
    cloud: &OpenStackCloud,
    s: &StackRef,
    step: &Step,
) -> Result<vnfkeeper::cloud::Stack, vnfkeeper::cloud::CloudError> {
    match step {
        Step::Patch(p) => cloud.update_stack_patch(s, p.clone()).await.unwrap(),
        Step::HealServer(prefix) | Step::HealKeepingVolumes(prefix) => {
            let res = cloud.stack_resources(s, 5).await.unwrap();
            let (_, ids) = view(cloud, s).await;
            let target = ids
                .iter()
                .filter(|(p, _)| p.starts_with(prefix))
                .flat_map(|(_, set)| set.iter())
                .next()
                .cloned()
                .unwrap_or_else(|| panic!("no server under {prefix}"));
            let r = res
                .iter()
                .find(|r| r.physical_resource_id == target)
                .unwrap();
            if matches!(step, Step::HealKeepingVolumes(_)) {
                let volumes: Vec<String> = cloud
                    .volumes()
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|v| v.attachments.iter().any(|a| a.server_id == target))
                    .map(|v| v.id)
                    .collect();
                assert!(!volumes.is_empty(), "{target} has no volume");
                cloud.stop_server(&target).await.unwrap();
                until("SHUTOFF", || async {
                    cloud.server(&target).await.unwrap().unwrap().status == "SHUTOFF"
                })
                .await;
                for v in &volumes {
                    cloud.detach_volume(&target, v).await.unwrap();
                    until("available", || async {
                        cloud.volume(v).await.unwrap().unwrap().status == "available"
                    })
                    .await;
                }
            }
            cloud
                .mark_unhealthy(&r.stack, &r.resource_name, "differential check")
                .await
                .unwrap();
            cloud.update_stack_patch(s, json!({})).await.unwrap();
        }
    }
    cloud
        .wait_stack(s, &[StackStatus::UpdateComplete], WAIT)
        .await
}

/// Runs `adjusted` and `steps` through both Heats and compares them after each step; each step
/// comes with decisions it must show (path → (kept, added, removed)), checked on the real Heat.
async fn differential(
    sim: &'static OpenStackCloud,
    real: &'static OpenStackCloud,
    name: &str,
    adjusted: &Value,
    steps: &[(Step, Expected<'_>)],
) {
    let req = StackCreate {
        stack_name: name.to_string(),
        template: adjusted["template"].clone(),
        files: serde_json::from_value(adjusted["files"].clone()).unwrap(),
        parameters: adjusted["parameters"].as_object().unwrap().clone(),
        timeout_mins: None,
        disable_rollback: true,
    };
    let create = |cloud: &'static OpenStackCloud| {
        let req = &req;
        async move {
            let s = cloud.create_stack(req).await.unwrap();
            cloud
                .wait_stack(&s, &[StackStatus::CreateComplete], WAIT)
                .await
                .unwrap_or_else(|e| panic!("{name}: create: {e}"));
            s
        }
    };
    let (a, b) = tokio::join!(create(sim), create(real));
    let stacks = [a, b];
    let (vs, mut is) = view(sim, &stacks[0]).await;
    let (vr, mut ir) = view(real, &stacks[1]).await;
    assert_eq!(
        vs, vr,
        "{name}: after create (left: simulated, right: real)"
    );
    for (i, (step, expected)) in steps.iter().enumerate() {
        let (a, b) = tokio::join!(apply(sim, &stacks[0], step), apply(real, &stacks[1], step));
        a.unwrap_or_else(|e| panic!("{name}: step {i} on the simulated Heat: {e}"));
        b.unwrap_or_else(|e| panic!("{name}: step {i} on the real Heat: {e}"));
        let (vs, is2) = view(sim, &stacks[0]).await;
        let (vr, ir2) = view(real, &stacks[1]).await;
        assert_eq!(
            vs, vr,
            "{name}: after step {i} (left: simulated, right: real)"
        );
        let real_decisions = decisions(&ir, &ir2);
        assert_eq!(
            decisions(&is, &is2),
            real_decisions,
            "{name}: update decisions of step {i} (left: simulated, right: real)"
        );
        for (path, d) in *expected {
            assert_eq!(
                real_decisions.get(*path),
                Some(d),
                "{name}: step {i}, {path}: {real_decisions:?}"
            );
        }
        is = is2;
        ir = ir2;
    }
    let delete = |cloud: &'static OpenStackCloud, s: &StackRef| {
        let s = s.clone();
        async move {
            cloud.delete_stack(&s).await.unwrap();
            cloud
                .wait_stack(&s, &[StackStatus::DeleteComplete], WAIT)
                .await
                .unwrap_or_else(|e| panic!("{name}: delete: {e}"));
        }
    };
    tokio::join!(delete(sim, &stacks[0]), delete(real, &stacks[1]));
}

/// Every network the `nfv` parameter names, the floating IPs' network `public`, and every image,
/// registered in the simulation (the simulated Heat records whatever a template names; a real
/// Heat looks them up).
fn register(tb: &testbed::cloud::Testbed, adjusted: &Value) {
    tb.cloud().add_network("public");
    let nfv = &adjusted["parameters"]["nfv"];
    for cp in nfv["CP"].as_object().into_iter().flatten() {
        if let Some(n) = cp.1["network"].as_str() {
            tb.cloud().add_network(n);
        }
    }
    for vdu in nfv["VDU"].as_object().into_iter().flatten() {
        if let Some(i) = vdu.1["vcImageId"].as_str() {
            tb.cloud().set_image_properties(i, BTreeMap::new());
        }
    }
}

/// A real Heat validates a template synchronously (Glance, Nova and Neutron lookups): under the
/// load of the whole test suite a `POST /stacks` took more than 30 s, hence 180 s for both clouds.
/// Stacks are polled every second at most (the product's policy grows to 20 s between polls,
/// which would leave a finished step waiting for its next poll).
async fn connect(path: &Path) -> &'static OpenStackCloud {
    let cloud = OpenStackCloud::connect(path, "testbed", Duration::from_secs(180))
        .await
        .unwrap()
        .with_poll_policy(PollPolicy {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(1),
            factor: 1.5,
            jitter: 0.2,
        });
    Box::leak(Box::new(cloud))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (MariaDB and RabbitMQ packages, /run)"]
async fn simulated_heat_matches_real_heat_on_the_project_templates() {
    const TAG: &str = "vkdiff";
    // The tag's lease first: a run of this test in another process (another checkout) waits
    // here instead of having its control plane killed as leftovers.
    let _lease = tokio::task::spawn_blocking(|| testbed::hosts::Lease::control_plane(TAG))
        .await
        .unwrap()
        .unwrap();
    testbed::cloud::real::kill_tagged(TAG).await;
    let dir = tempfile::Builder::new()
        .prefix("vk-heat-diff-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let tb = testbed::cloud::Testbed::start(testbed::cloud::CloudOptions {
        control_plane: testbed::cloud::ControlPlane::Real(TAG.into()),
        ..testbed::cloud::CloudOptions::no_hosts(dir.path())
    })
    .await
    .unwrap();
    eprintln!(
        "real control plane up in {:.1} s",
        tb.real().map(|r| r.start_time.as_secs_f64()).unwrap_or(0.0)
    );
    let t0 = std::time::Instant::now();
    let real = connect(tb.clouds_yaml()).await;
    let sim = connect(&dir.path().join(testbed::cloud::SIMULATED_CLOUDS_YAML)).await;

    let individual = adjusted(
        "individual-vnfc-management",
        "simple",
        "individual-vnfc-management.10-instantiate.json",
    );
    register(&tb, &individual);
    let cir = adjusted(
        "cir-k8s-cluster",
        "simple",
        "cir-k8s-cluster.20-instantiate.json",
    );
    register(&tb, &cir);
    let mut cir_nfv = cir["parameters"]["nfv"].clone();
    cir_nfv["VDU"]["workerNode"]["desired_capacity"] = json!(3);
    let pv = adjusted(
        "pv-k8s-cluster",
        "simple",
        "pv-k8s-cluster.10-instantiate.json",
    );
    register(&tb, &pv);
    let mut pv_nfv = pv["parameters"]["nfv"].clone();
    pv_nfv["VDU"]["workerNode"]["desired_capacity"] = json!(3);

    let cir_steps: [(Step, Expected); 2] = [
        (
            Step::Patch(json!({"nfv": cir_nfv})),
            &[
                ("worker_instance/member", (2, 1, 0)),
                ("worker_instance/member/workerNode", (2, 1, 0)),
                ("master_instance/member/masterNode", (1, 0, 0)),
            ],
        ),
        (
            Step::HealServer("worker_instance/member/workerNode"),
            &[
                ("worker_instance/member", (3, 0, 0)),
                ("worker_instance/member/workerNode", (2, 1, 1)),
                ("worker_instance/member/workerNode_CP2", (3, 0, 0)),
            ],
        ),
    ];
    let pv_steps: [(Step, Expected); 2] = [
        (
            Step::Patch(json!({"nfv": pv_nfv})),
            &[
                ("worker_instance/member/workerNode", (2, 1, 0)),
                ("storage_server", (1, 0, 0)),
                ("storage_server_volume", (1, 0, 0)),
            ],
        ),
        (
            Step::HealKeepingVolumes("storage_server"),
            &[
                ("storage_server", (0, 1, 1)),
                ("storage_server_volume", (1, 0, 0)),
                ("storage_server_CP", (1, 0, 0)),
                ("worker_instance/member/workerNode", (3, 0, 0)),
            ],
        ),
    ];

    // kubespray: an external load balancer with a floating IP, an internal network and subnet.
    let kubespray = adjusted(
        "k8s-mgmtdriver-kubespray",
        "simple",
        "k8s-mgmtdriver-kubespray.10-instantiate.json",
    );
    register(&tb, &kubespray);
    let mut kubespray_nfv = kubespray["parameters"]["nfv"].clone();
    kubespray_nfv["VDU"]["workerNode"]["desired_capacity"] = json!(3);
    let kubespray_steps: [(Step, Expected); 2] = [
        (
            Step::Patch(json!({"nfv": kubespray_nfv})),
            &[
                ("worker_instance/member/workerNode", (2, 1, 0)),
                ("externalLB", (1, 0, 0)),
                ("externalLB_instance", (1, 0, 0)),
                ("internalVL1", (1, 0, 0)),
                ("internalVL1_subnet", (1, 0, 0)),
            ],
        ),
        (
            Step::HealServer("worker_instance/member/workerNode"),
            &[
                ("worker_instance/member/workerNode", (2, 1, 1)),
                ("externalLB_instance", (1, 0, 0)),
            ],
        ),
    ];
    // The private registry: a template vnfkeeper writes from the VNFD, its image store a
    // Cinder volume in the server's block device mapping, kept by a heal.
    let registry = adjusted(
        "cir-private-registry",
        "simple",
        "cir-k8s-cluster.10-registry-instantiate.json",
    );
    register(&tb, &registry);
    // The PV package with a floating IP beside each node's port in the nested templates.
    let floating_dir = tempfile::tempdir().unwrap();
    let floating = adjusted(
        support::floating_pv_package(floating_dir.path()),
        "simple",
        "pv-k8s-cluster.10-instantiate.json",
    );
    register(&tb, &floating);
    let mut floating_nfv = floating["parameters"]["nfv"].clone();
    floating_nfv["VDU"]["workerNode"]["desired_capacity"] = json!(3);
    let floating_steps: [(Step, Expected); 2] = [
        (
            Step::Patch(json!({"nfv": floating_nfv})),
            &[
                ("worker_instance/member/workerNode", (2, 1, 0)),
                (
                    "worker_instance/member/workerNode_CP2_floating_ip",
                    (2, 1, 0),
                ),
            ],
        ),
        (
            Step::HealServer("worker_instance/member/workerNode"),
            &[
                ("worker_instance/member/workerNode", (2, 1, 1)),
                ("worker_instance/member/workerNode_CP2", (3, 0, 0)),
                (
                    "worker_instance/member/workerNode_CP2_floating_ip",
                    (3, 0, 0),
                ),
            ],
        ),
    ];
    // The Tacker stand-in's package (tests/testbed/tests/data/pv_k8s): a VIP port, outputs.
    let standin = {
        let p = support::tacker::pv_package();
        json!({"template": p.template, "files": p.files, "parameters": p.parameters})
    };
    register(&tb, &standin);
    let mut standin_nfv = standin["parameters"]["nfv"].clone();
    standin_nfv["VDU"]["workerNode"]["desired_capacity"] = json!(3);
    let standin_steps: [(Step, Expected); 2] = [
        (
            Step::Patch(json!({"nfv": standin_nfv})),
            &[
                ("worker_instance/member/workerNode", (2, 1, 0)),
                ("storage_server", (1, 0, 0)),
                ("vip_CP", (1, 0, 0)),
            ],
        ),
        (
            Step::HealKeepingVolumes("storage_server"),
            &[
                ("storage_server", (0, 1, 1)),
                ("storage_server_volume", (1, 0, 0)),
                ("worker_instance/member/workerNode", (3, 0, 0)),
            ],
        ),
    ];

    // The templates' stacks are independent: driven concurrently (each step still runs on
    // both Heats before the two are compared).
    tokio::join!(
        differential(
            sim,
            real,
            "diff-individual",
            &individual,
            &[(
                Step::HealServer("VDU1-1/"),
                &[
                    ("VDU1-1/VDU1", (0, 1, 1)),
                    ("VDU1-1/VDU1_CP1", (1, 0, 0)),
                    ("VDU1-0/VDU1", (1, 0, 0)),
                ],
            )],
        ),
        differential(sim, real, "diff-cir", &cir, &cir_steps),
        differential(sim, real, "diff-pv", &pv, &pv_steps),
        differential(sim, real, "diff-kubespray", &kubespray, &kubespray_steps),
        differential(
            sim,
            real,
            "diff-registry",
            &registry,
            &[(
                Step::HealKeepingVolumes("PrivateRegistryVDU-0/PrivateRegistryVDU"),
                &[
                    ("PrivateRegistryVDU-0/PrivateRegistryVDU", (0, 1, 1)),
                    ("PrivateRegistryVDU-0/RegistryData", (1, 0, 0)),
                    ("PrivateRegistryVDU-0/CP1", (1, 0, 0)),
                ],
            )],
        ),
        differential(sim, real, "diff-floating", &floating, &floating_steps),
        differential(sim, real, "diff-standin", &standin, &standin_steps),
    );
    eprintln!(
        "seven templates through both Heats: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(sim.servers().await.unwrap().is_empty(), "servers left");
    assert!(sim.ports().await.unwrap().is_empty(), "ports left");
    assert!(sim.volumes().await.unwrap().is_empty(), "volumes left");
    tb.shutdown().await;
}
