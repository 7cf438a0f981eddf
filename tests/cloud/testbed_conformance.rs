//! Testbed conformance: the real OpenStack command-line clients from PyPI
//! (`python-openstackclient` with the Heat, Nova, Cinder plugins and openstacksdk, made once by
//! `scripts/osc-venv` in `$VNFKEEPER_CACHE`) drive a testbed cloud (no hosts) through the
//! `clouds.yaml` it writes, as an operator would drive a real cloud, and every command's `-f json`
//! output is checked for the fields vnfkeeper or Tacker read.
//!
//! What the testbed cannot do is listed by command in [`KNOWN_DIFFERENCES`] (and in
//! `tests/testbed/README.md`, "Conformance"); each listed command is run and must still fail, so
//! the list cannot go stale silently. The venv cannot be made (no python3-venv, no PyPI): the test
//! fails, it does not skip.
//!
//! [`conformance_on_hosts`] (root: servers on real hosts) checks what only a host can show: the
//! console log's cloud-init SSH host key blocks against the key the host's sshd presents
//! (`ssh-keyscan`), and the Ubuntu 20.04 host profile chosen by the image's Glance properties.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use testbed::cloud::{CLOUD_NAME, CloudOptions, Testbed};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's `bin` directory (made once by `scripts/osc-venv`, cached outside the clone).
fn bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = std::process::Command::new(root().join("scripts/osc-venv"))
            .output()
            .expect("run scripts/osc-venv");
        assert!(
            out.status.success(),
            "scripts/osc-venv failed (the conformance test needs python3-venv and PyPI the \
             first time):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// Commands (as `openstack` subcommands) that work against a real cloud but not against the
/// testbed, with why. Each is run by [`conformance_with_the_real_clients`] and must fail.
const KNOWN_DIFFERENCES: &[(&str, &[&str], &str)] = &[];

/// openstacksdk calls made directly (argv: a time before the stack was created, a time an hour
/// ahead): stacks, the stack's resources, servers changed since each time, one server by name.
const SDK_CALLS: &str = r#"
import json, sys
import openstack
conn = openstack.connect()
stacks = [[s.name, s.status] for s in conn.orchestration.stacks()]
stack = conn.orchestration.find_stack("pv")
resources = [[r.name, r.resource_type, r.status] for r in conn.orchestration.resources(stack)]
since_before = [s.name for s in conn.compute.servers(changes_since=sys.argv[1])]
since_later = [s.name for s in conn.compute.servers(changes_since=sys.argv[2])]
srv = conn.compute.find_server("storage_server")
srv = conn.compute.get_server(srv.id)
print(json.dumps({"stacks": stacks, "resources": resources, "since_before": since_before,
                  "since_later": since_later, "server": {"name": srv.name, "status": srv.status}}))
"#;

/// Output of one `openstack` run.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// The `openstack` CLI against one testbed.
struct Osc {
    clouds_yaml: PathBuf,
    cwd: PathBuf,
}

impl Osc {
    async fn run(&self, args: &[&str]) -> Run {
        let mut c = tokio::process::Command::new(bin().join("openstack"));
        c.args(args).current_dir(&self.cwd).env_clear();
        for k in ["PATH", "HOME", "LANG", "LC_ALL"] {
            if let Ok(v) = std::env::var(k) {
                c.env(k, v);
            }
        }
        c.env("OS_CLIENT_CONFIG_FILE", &self.clouds_yaml)
            .env("OS_CLOUD", CLOUD_NAME);
        let out = tokio::time::timeout(Duration::from_secs(120), c.output())
            .await
            .unwrap_or_else(|_| panic!("openstack {args:?} timed out"))
            .expect("run openstack");
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `openstack ARGS -f json`, which must succeed, and parses its output.
    async fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-f", "json"]);
        let r = self.run(&a).await;
        assert!(r.ok, "openstack {a:?} failed:\n{}\n{}", r.stdout, r.stderr);
        serde_json::from_str(&r.stdout)
            .unwrap_or_else(|e| panic!("openstack {a:?}: not JSON ({e}):\n{}", r.stdout))
    }

    /// Runs `openstack ARGS`, which must fail; returns its stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let r = self.run(args).await;
        assert!(!r.ok, "openstack {args:?} succeeded:\n{}", r.stdout);
        r.stderr
    }

    /// Runs a Python program with the venv's interpreter (openstacksdk importable, the same
    /// clouds.yaml and cloud); it must succeed and print one JSON document.
    async fn python(&self, program: &str, args: &[&str]) -> Value {
        let mut c = tokio::process::Command::new(bin().join("python3"));
        c.arg("-c")
            .arg(program)
            .args(args)
            .current_dir(&self.cwd)
            .env_clear();
        for k in ["PATH", "HOME", "LANG", "LC_ALL"] {
            if let Ok(v) = std::env::var(k) {
                c.env(k, v);
            }
        }
        c.env("OS_CLIENT_CONFIG_FILE", &self.clouds_yaml)
            .env("OS_CLOUD", CLOUD_NAME);
        let out = tokio::time::timeout(Duration::from_secs(120), c.output())
            .await
            .expect("python timed out")
            .expect("run python");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "python failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("python: not JSON ({e}):\n{stdout}"))
    }

    /// Polls `stack show NAME` until the status leaves `*_IN_PROGRESS`; returns the stack.
    async fn wait_stack(&self, name: &str) -> Value {
        for _ in 0..120 {
            let s = self.json(&["stack", "show", name]).await;
            if !s["stack_status"]
                .as_str()
                .unwrap_or_default()
                .ends_with("IN_PROGRESS")
            {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("stack {name} still in progress after 30 s");
    }
}

/// The pv-k8s-cluster BaseHOT laid out as `openstack stack create -t` needs it: the nested
/// templates next to the top template (it names them `masterNode.yaml`, `workerNode.yaml`).
fn basehot(dir: &Path) -> PathBuf {
    let src = root().join("fixtures/packages/pv-k8s-cluster/BaseHOT/simple");
    let top = dir.join("pv_k8s_cluster_top.hot.yaml");
    std::fs::copy(src.join("pv_k8s_cluster_top.hot.yaml"), &top).expect("copy top");
    for f in ["masterNode.yaml", "workerNode.yaml"] {
        std::fs::copy(src.join("nested").join(f), dir.join(f)).expect("copy nested");
    }
    top
}

/// An `nfv` parameter as the engine builds it (VDU flavour/image/capacity, CP networks).
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

fn rows_where<'a>(rows: &'a Value, key: &str, val: &str) -> Vec<&'a Value> {
    rows.as_array()
        .unwrap_or_else(|| panic!("not a list: {rows}"))
        .iter()
        .filter(|r| r[key] == val)
        .collect()
}

fn has_keys(v: &Value, keys: &[&str], what: &str) {
    for k in keys {
        assert!(v.get(k).is_some(), "{what}: no field {k:?} in {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_with_the_real_clients() {
    let _ = bin();
    let dir = tempfile::tempdir().expect("tempdir");
    let tb = Testbed::start(CloudOptions::no_hosts(dir.path().join("cloud")))
        .await
        .expect("testbed starts");
    let cwd = dir.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let osc = Osc {
        clouds_yaml: tb.clouds_yaml().to_path_buf(),
        cwd: cwd.clone(),
    };

    // Keystone.
    let tok = osc.json(&["token", "issue"]).await;
    has_keys(
        &tok,
        &["id", "expires", "project_id", "user_id"],
        "token issue",
    );
    let cat = osc.json(&["catalog", "list"]).await;
    for t in ["identity", "orchestration", "compute", "network", "image"] {
        assert_eq!(rows_where(&cat, "Type", t).len(), 1, "catalog {t}: {cat}");
    }
    assert!(
        cat.as_array()
            .unwrap()
            .iter()
            .any(|r| r["Type"].as_str().unwrap_or("").starts_with("volume")),
        "catalog has a volume service: {cat}"
    );

    let before = (chrono::Utc::now() - chrono::Duration::seconds(5))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();

    // Heat: create from the BaseHOT with nested templates and the nfv JSON parameter.
    let top = basehot(&cwd);
    let nfv2 = nfv(2).to_string();
    // `--wait` polls the stack's events (heatclient's poll_for_events) until the stack's own
    // CREATE_COMPLETE event, printing them as its event log.
    let created = osc
        .run(&[
            "stack",
            "create",
            "--wait",
            "--poll",
            "1",
            "-t",
            top.to_str().unwrap(),
            "--parameter",
            &format!("nfv={nfv2}"),
            "pv",
        ])
        .await;
    assert!(created.ok, "stack create --wait: {}", created.stderr);
    assert!(
        created.stdout.contains("[pv]: CREATE_IN_PROGRESS")
            && created.stdout.contains("[pv]: CREATE_COMPLETE"),
        "event log of stack create --wait:\n{}",
        created.stdout
    );
    let s = osc.wait_stack("pv").await;
    let stack_id = s["id"].as_str().expect("stack id").to_string();
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    assert_eq!(s["id"], stack_id.as_str());
    assert_eq!(s["stack_name"], "pv");
    let p: Value =
        serde_json::from_str(s["parameters"]["nfv"].as_str().expect("nfv as a string")).unwrap();
    assert_eq!(p["VDU"]["workerNode"]["desired_capacity"], 2, "{s}");

    // Resources, two levels down: the storage server at the top, master and workers in ASG members.
    let res = osc
        .json(&["stack", "resource", "list", "--nested-depth", "2", "pv"])
        .await;
    for r in res.as_array().unwrap() {
        has_keys(
            r,
            &[
                "resource_name",
                "physical_resource_id",
                "resource_type",
                "resource_status",
                "stack_name",
            ],
            "stack resource list",
        );
    }
    let servers = rows_where(&res, "resource_type", "OS::Nova::Server");
    assert_eq!(servers.len(), 4, "{res}");
    assert_eq!(rows_where(&res, "resource_name", "workerNode").len(), 2);
    let asgs = rows_where(&res, "resource_type", "OS::Heat::AutoScalingGroup");
    assert_eq!(asgs.len(), 2, "{res}");
    let phys = |name: &str| {
        rows_where(&res, "resource_name", name)[0]["physical_resource_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let storage = phys("storage_server");
    let volume = phys("storage_server_volume");
    let port = phys("storage_server_CP");

    // Resource show: as Heat's `format_resource_attributes`, a server's, port's or volume's
    // `attributes` are the service's show body, plus the schema attributes asked for by
    // `--with-attr`; other types show their schema attributes.
    let r = osc
        .json(&[
            "stack",
            "resource",
            "show",
            "--with-attr",
            "networks",
            "--with-attr",
            "first_address",
            "pv",
            "storage_server",
        ])
        .await;
    assert_eq!(r["physical_resource_id"], storage.as_str(), "{r}");
    assert_eq!(r["resource_status"], "CREATE_COMPLETE");
    let a = &r["attributes"];
    has_keys(
        a,
        &[
            "id",
            "name",
            "status",
            "addresses",
            "server_groups",
            "networks",
            "first_address",
        ],
        "OS::Nova::Server attributes",
    );
    assert_eq!(a["id"], storage.as_str(), "{a}");
    assert_eq!(a["name"], "storage_server", "{a}");
    let net0 = a["addresses"]["net0"][0]["addr"]
        .as_str()
        .unwrap_or_else(|| panic!("addresses.net0[0].addr: {a}"))
        .to_string();
    let net0 = net0.as_str();
    assert_eq!(a["networks"]["net0"][0], net0, "{a}");
    assert_eq!(a["first_address"], net0, "{a}");
    assert_eq!(a["server_groups"], json!([]), "{a}");
    let r = osc
        .json(&["stack", "resource", "show", "pv", "storage_server_CP"])
        .await;
    let a = &r["attributes"];
    has_keys(
        a,
        &["id", "fixed_ips", "mac_address", "network_id", "device_id"],
        "OS::Neutron::Port attributes",
    );
    assert_eq!(a["id"], port.as_str(), "{a}");
    assert_eq!(a["fixed_ips"][0]["ip_address"], net0, "{a}");
    assert_eq!(a["device_id"], storage.as_str(), "{a}");
    let r = osc
        .json(&[
            "stack",
            "resource",
            "show",
            "--with-attr",
            "attachments_list",
            "pv",
            "storage_server_volume",
        ])
        .await;
    let a = &r["attributes"];
    has_keys(
        a,
        &["id", "attachments", "attachments_list", "size", "status"],
        "OS::Cinder::Volume attributes",
    );
    assert_eq!(a["status"], "in-use", "{a}");
    assert_eq!(a["attachments"][0]["device"], "/dev/vdb", "{a}");
    assert_eq!(a["attachments_list"][0]["device"], "/dev/vdb", "{a}");
    assert_eq!(
        a["attachments_list"][0]["server_id"],
        storage.as_str(),
        "{a}"
    );
    let r = osc
        .json(&["stack", "resource", "show", "pv", "worker_instance"])
        .await;
    let a = &r["attributes"];
    has_keys(
        a,
        &[
            "current_size",
            "refs",
            "refs_map",
            "outputs",
            "outputs_list",
        ],
        "OS::Heat::AutoScalingGroup attributes",
    );
    assert_eq!(a["current_size"], 2, "{a}");
    assert_eq!(a["refs"].as_array().map(Vec::len), Some(2), "{a}");
    assert_eq!(a["outputs"].as_object().map(|o| o.len()), Some(2), "{a}");

    // Nova.
    let list = osc.json(&["server", "list", "--long"]).await;
    assert_eq!(list.as_array().unwrap().len(), 4, "{list}");
    for s in list.as_array().unwrap() {
        has_keys(
            s,
            &[
                "ID",
                "Name",
                "Status",
                "Networks",
                "Flavor",
                "Image Name",
                "Power State",
            ],
            "server list --long",
        );
        assert_eq!(s["Status"], "ACTIVE", "{s}");
    }
    let sv = osc.json(&["server", "show", &storage]).await;
    has_keys(
        &sv,
        &["id", "name", "status", "addresses", "flavor", "image"],
        "server show",
    );
    assert_eq!(sv["name"], "storage_server");
    assert_eq!(sv["status"], "ACTIVE");
    assert!(sv["addresses"].to_string().contains(net0), "{sv}");

    // changes-since: every server changed since before the create; none after now.
    let later = (chrono::Utc::now() + chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let none = osc
        .json(&["server", "list", "--changes-since", &later])
        .await;
    assert_eq!(none, json!([]), "nothing changed after {later}");
    let all = osc
        .json(&["server", "list", "--changes-since", &before])
        .await;
    assert_eq!(all.as_array().unwrap().len(), 4, "{all}");

    // openstacksdk used directly from Python, as Tacker's drivers and scripts do.
    let sdk = osc.python(SDK_CALLS, &[&before, &later]).await;
    let stacks = sdk["stacks"].as_array().expect("stacks");
    assert!(
        stacks.contains(&json!(["pv", "CREATE_COMPLETE"]))
            || stacks.contains(&json!(["pv", "UPDATE_COMPLETE"])),
        "{sdk}"
    );
    assert_eq!(sdk["since_before"].as_array().unwrap().len(), 4, "{sdk}");
    assert_eq!(sdk["since_later"], json!([]), "{sdk}");
    let kinds: Vec<&str> = sdk["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[1].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"OS::Nova::Server"), "{sdk}");
    assert!(kinds.contains(&"OS::Heat::AutoScalingGroup"), "{sdk}");
    assert_eq!(sdk["server"]["name"], "storage_server", "{sdk}");
    assert_eq!(sdk["server"]["status"], "ACTIVE", "{sdk}");

    // Console log (text, not JSON).
    let r = osc.run(&["console", "log", "show", &storage]).await;
    assert!(r.ok, "console log show: {}", r.stderr);

    // Neutron.
    let ports = osc.json(&["port", "list", "--server", &storage]).await;
    let ports = ports.as_array().unwrap();
    assert!(ports.iter().any(|p| p["ID"] == port.as_str()), "{ports:?}");
    for p in ports {
        has_keys(
            p,
            &["ID", "MAC Address", "Fixed IP Addresses", "Status"],
            "port list",
        );
    }

    // Cinder.
    let vols = osc.json(&["volume", "list"]).await;
    let v = rows_where(&vols, "ID", &volume);
    assert_eq!(v.len(), 1, "{vols}");
    has_keys(
        v[0],
        &["Name", "Status", "Size", "Attached to"],
        "volume list",
    );
    assert_eq!(v[0]["Status"], "in-use");
    let vs = osc.json(&["volume", "show", &volume]).await;
    has_keys(
        &vs,
        &["id", "name", "status", "size", "attachments"],
        "volume show",
    );
    assert_eq!(vs["attachments"][0]["device"], "/dev/vdb", "{vs}");
    assert_eq!(vs["attachments"][0]["server_id"], storage.as_str(), "{vs}");

    // Glance.
    let imgs = osc.json(&["image", "list"]).await;
    assert!(!imgs.as_array().unwrap().is_empty(), "{imgs}");
    for i in imgs.as_array().unwrap() {
        has_keys(i, &["ID", "Name", "Status"], "image list");
    }

    // Mark unhealthy (Tacker's heal), seen in resource show.
    let r = osc
        .run(&[
            "stack",
            "resource",
            "mark",
            "unhealthy",
            "pv",
            "storage_server",
            "conformance",
        ])
        .await;
    assert!(r.ok, "mark unhealthy: {}", r.stderr);
    let r = osc
        .json(&["stack", "resource", "show", "pv", "storage_server"])
        .await;
    assert_eq!(r["resource_status"], "CHECK_FAILED", "{r}");
    assert_eq!(r["resource_status_reason"], "conformance", "{r}");

    // Heal as Tacker does: mark unhealthy, then update with the existing template (and a
    // third worker): the marked server is replaced, the stack ends UPDATE_COMPLETE. Heat creates
    // the replacement before it deletes the server, so the server keeping its volume is stopped
    // and the volume detached first, as vnfkeeper's HEAL does (`server stop`, `server remove
    // volume`: Nova's os-stop and os-volume_attachments through the real client).
    let r = osc.run(&["server", "stop", &storage]).await;
    assert!(r.ok, "server stop: {}", r.stderr);
    let t = std::time::Instant::now();
    loop {
        let s = osc.json(&["server", "show", &storage]).await;
        if s["status"] == "SHUTOFF" {
            break;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(60), "{s}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let r = osc
        .run(&["server", "remove", "volume", &storage, &volume])
        .await;
    assert!(r.ok, "server remove volume: {}", r.stderr);
    let vs = osc.json(&["volume", "show", &volume]).await;
    assert_eq!(vs["status"], "available", "{vs}");
    let nfv3 = nfv(3).to_string();
    let r = osc
        .run(&[
            "stack",
            "update",
            "--existing",
            "--parameter",
            &format!("nfv={nfv3}"),
            "pv",
        ])
        .await;
    assert!(r.ok, "stack update --existing: {}", r.stderr);
    let s = osc.wait_stack("pv").await;
    assert_eq!(s["stack_status"], "UPDATE_COMPLETE", "{s}");
    let res = osc
        .json(&["stack", "resource", "list", "--nested-depth", "2", "pv"])
        .await;
    assert_eq!(rows_where(&res, "resource_name", "workerNode").len(), 3);
    let healed = rows_where(&res, "resource_name", "storage_server")[0];
    assert_ne!(healed["physical_resource_id"], storage.as_str(), "replaced");
    assert_eq!(
        osc.json(&["server", "list"])
            .await
            .as_array()
            .unwrap()
            .len(),
        5
    );

    // 409 and 400 bodies parsed into the clients' messages.
    let e = osc
        .fails(&[
            "stack",
            "create",
            "-t",
            top.to_str().unwrap(),
            "--parameter",
            &format!("nfv={nfv2}"),
            "pv",
        ])
        .await;
    assert!(e.contains("The Stack (pv) already exists."), "{e}");
    let e = osc
        .fails(&[
            "stack",
            "create",
            "-t",
            top.to_str().unwrap(),
            "--parameter",
            &format!("nfv={nfv2}"),
            "1pv",
        ])
        .await;
    assert!(e.contains("Invalid stack name 1pv"), "{e}");

    // 404 bodies parsed into the clients' usual messages.
    let e = osc.fails(&["stack", "show", "nonexistent"]).await;
    assert!(e.contains("Stack not found: nonexistent"), "{e}");
    let e = osc.fails(&["server", "show", "nonexistent"]).await;
    // OSC finds servers through openstacksdk: a 404 on GET, then an empty name filter.
    assert!(e.contains("No Server found for nonexistent"), "{e}");
    let e = osc.fails(&["volume", "show", "nonexistent"]).await;
    assert!(e.contains("No Volume found for nonexistent"), "{e}");

    let fips = osc.json(&["floating", "ip", "list"]).await;
    assert_eq!(fips, json!([]), "no floating IPs in a stack without them");
    // A floating IP of the `public` network, made and removed by the client.
    let fip = osc.json(&["floating", "ip", "create", "public"]).await;
    has_keys(
        &fip,
        &["id", "floating_ip_address", "floating_network_id", "status"],
        "floating ip create",
    );
    let fid = fip["id"].as_str().unwrap().to_string();
    let fips = osc.json(&["floating", "ip", "list"]).await;
    assert_eq!(fips.as_array().unwrap().len(), 1, "{fips}");
    let r = osc.run(&["floating", "ip", "delete", &fid]).await;
    assert!(r.ok, "floating ip delete: {}", r.stderr);
    let fips = osc.json(&["floating", "ip", "list"]).await;
    assert_eq!(fips, json!([]), "the floating IP was deleted");

    // Events: the stack's own and its resources', nested ones with --nested-depth.
    let evs = osc.json(&["stack", "event", "list", "pv"]).await;
    let evs = evs.as_array().expect("event list");
    for e in evs {
        has_keys(
            e,
            &["id", "resource_name", "resource_status", "event_time"],
            "stack event list",
        );
    }
    let statuses = |name: &str| -> Vec<String> {
        evs.iter()
            .filter(|e| e["resource_name"] == name)
            .map(|e| e["resource_status"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        statuses("pv"),
        [
            "CREATE_IN_PROGRESS",
            "CREATE_COMPLETE",
            "UPDATE_IN_PROGRESS",
            "UPDATE_COMPLETE"
        ],
        "{evs:?}"
    );
    assert_eq!(
        statuses("storage_server")[..2],
        ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    );
    let nested = osc
        .json(&["stack", "event", "list", "--nested-depth", "2", "pv"])
        .await;
    assert!(
        nested.as_array().unwrap().len() > evs.len(),
        "nested events: {nested}"
    );

    // Known differences: each still fails, by name.
    for (name, args, why) in KNOWN_DIFFERENCES {
        let r = osc.run(args).await;
        assert!(
            !r.ok,
            "`openstack {name}` now works against the testbed: remove it from KNOWN_DIFFERENCES \
             and tests/testbed/README.md ({why})"
        );
    }

    // Delete, waiting as heatclient does (events after the last one before the delete).
    let r = osc.run(&["stack", "delete", "-y", "--wait", "pv"]).await;
    assert!(r.ok, "stack delete --wait: {}", r.stderr);
    let mut gone = false;
    for _ in 0..120 {
        let r = osc.run(&["stack", "show", "pv", "-f", "json"]).await;
        if !r.ok {
            assert!(r.stderr.contains("Stack not found: pv"), "{}", r.stderr);
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(gone, "stack pv not deleted after 30 s");
    let list = osc.json(&["server", "list"]).await;
    assert_eq!(list, json!([]), "servers left after delete");
    drop(tb);
}

/// A template with one server on an Ubuntu 20.04 image (Glance `os_distro=ubuntu`,
/// `os_version=20.04`) and one on an image without properties.
const TWO_HOSTS_HOT: &str = "heat_template_version: 2018-08-31
resources:
  u1:
    type: OS::Nova::Server
    properties:
      name: focal1
      flavor: m1.small
      image: ubuntu-20.04-server-cloudimg-amd64
      networks: [{network: net0}]
  d1:
    type: OS::Nova::Server
    properties:
      name: plain1
      flavor: m1.small
      image: debian-12-generic-amd64
      networks: [{network: net0}]
";

/// The `ec2:` lines of cloud-init's blocks in a console log: (fingerprints, key lines), each
/// without its syslog prefix.
fn console_blocks(text: &str) -> (Vec<String>, Vec<String>) {
    let mut fps = Vec::new();
    let mut keys = Vec::new();
    let mut block = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let Some((_, body)) = line.split_once(" ec2: ") else {
            continue;
        };
        match body {
            "-----BEGIN SSH HOST KEY FINGERPRINTS-----" => block = Some(&mut fps),
            "-----BEGIN SSH HOST KEY KEYS-----" => block = Some(&mut keys),
            "-----END SSH HOST KEY FINGERPRINTS-----" | "-----END SSH HOST KEY KEYS-----" => {
                block = None
            }
            other => {
                if let Some(b) = block.as_mut() {
                    b.push(other.to_string());
                }
            }
        }
    }
    (fps, keys)
}

/// `ssh-keyscan -t ed25519 IP` → (`ssh-ed25519 BASE64`, its `SHA256:` fingerprint by
/// `ssh-keygen -l`).
async fn keyscan(ip: &str) -> (String, String) {
    let out = tokio::process::Command::new("ssh-keyscan")
        .args(["-T", "5", "-t", "ed25519", ip])
        .output()
        .await
        .expect("ssh-keyscan");
    let line = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| !l.starts_with('#') && l.contains(" ssh-ed25519 "))
        .unwrap_or_else(|| panic!("ssh-keyscan {ip}: {}", String::from_utf8_lossy(&out.stderr)))
        .to_string();
    let key = line.split_once(' ').unwrap().1.to_string();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("k.pub");
    std::fs::write(&f, format!("{key}\n")).unwrap();
    let out = tokio::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(&f)
        .output()
        .await
        .expect("ssh-keygen -l");
    let fp = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("ssh-keygen -l: {}", String::from_utf8_lossy(&out.stderr)))
        .to_string();
    (key, fp)
}

/// `sshpass -p ubuntu ssh ubuntu@IP CMD` → (exit code, stdout, stderr).
async fn ssh_ubuntu(ip: &str, cmd: &str) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new("sshpass")
        .args(["-p", "ubuntu", "ssh", "-o", "StrictHostKeyChecking=no"])
        .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
        .args(["-o", "ConnectTimeout=5", &format!("ubuntu@{ip}"), cmd])
        .output()
        .await
        .expect("sshpass ssh");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first IPv4 address in a `server list`/`server show` `Networks`/`addresses` value.
fn first_ipv4(v: &Value) -> String {
    let text = v.to_string();
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|t| t.parse::<std::net::Ipv4Addr>().is_ok())
        .unwrap_or_else(|| panic!("no address in {v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (testbed hosts: network namespaces)"]
async fn conformance_on_hosts() {
    let _ = bin();
    let dir = tempfile::tempdir().expect("tempdir");
    let (_farm, tb, _cleanup) = support::testbed_with_hosts("tbcf", 17, dir.path()).await;
    let cwd = dir.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let osc = Osc {
        clouds_yaml: tb.clouds_yaml().to_path_buf(),
        cwd: cwd.clone(),
    };

    // The image carries the properties a real Ubuntu cloud image carries.
    tb.cloud().set_image_properties(
        "ubuntu-20.04-server-cloudimg-amd64",
        testbed::hosts::HostProfile::Ubuntu2004.image_properties(),
    );
    let img = osc
        .json(&["image", "show", "ubuntu-20.04-server-cloudimg-amd64"])
        .await;
    let props = img.get("properties").unwrap_or(&img);
    assert_eq!(props["os_distro"], "ubuntu", "{img}");
    assert_eq!(props["os_version"], "20.04", "{img}");

    let hot = cwd.join("two.yaml");
    std::fs::write(&hot, TWO_HOSTS_HOT).unwrap();
    let r = osc
        .run(&["stack", "create", "-t", hot.to_str().unwrap(), "two"])
        .await;
    assert!(r.ok, "stack create: {}", r.stderr);
    let s = osc.wait_stack("two").await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");

    let list = osc.json(&["server", "list"]).await;
    let ip_of = |name: &str| first_ipv4(&rows_where(&list, "Name", name)[0]["Networks"]);
    let id_of = |name: &str| {
        rows_where(&list, "Name", name)[0]["ID"]
            .as_str()
            .unwrap()
            .to_string()
    };

    for name in ["focal1", "plain1"] {
        // The console log: cloud-init's fingerprint and key blocks ("ec2:" lines), matching
        // the key the host's sshd presents.
        let r = osc.run(&["console", "log", "show", &id_of(name)]).await;
        assert!(r.ok, "console log show {name}: {}", r.stderr);
        assert!(
            r.stdout
                .contains(" ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----"),
            "{}",
            r.stdout
        );
        let (fps, keys) = console_blocks(&r.stdout);
        let (scanned_key, scanned_fp) = keyscan(&ip_of(name)).await;
        assert_eq!(fps.len(), 1, "{fps:?}");
        assert_eq!(
            fps[0],
            format!("256 {scanned_fp} root@{name} (ED25519)"),
            "the console's fingerprint is the host's"
        );
        assert_eq!(keys, vec![format!("{scanned_key} root@{name}")]);
        // vnfkeeper reads the same text
        let parsed = vnfkeeper_core::console::parse(&r.stdout).expect("vnfkeeper parses it");
        assert_eq!(parsed.fingerprints, vec![scanned_fp.clone()]);
    }

    // The host profile from the image: the reference MgmtDriver's gate passes on the Ubuntu
    // server only; kubectl exists there only after its install step.
    let gate = "cat /etc/os-release | grep \"PRETTY_NAME=\" | grep -c \"Ubuntu 20.04\"; arch | grep -c x86_64";
    let (_, out, _) = ssh_ubuntu(&ip_of("focal1"), gate).await;
    assert_eq!(out, "1\n1\n");
    let (_, out, _) = ssh_ubuntu(&ip_of("plain1"), gate).await;
    assert_eq!(out, "0\n1\n");
    let (code, _, err) = ssh_ubuntu(&ip_of("focal1"), "kubectl get node").await;
    assert_eq!(code, Some(127), "{err}");
    assert!(err.contains("kubectl: command not found"), "{err}");
    let (code, _, err) = ssh_ubuntu(&ip_of("plain1"), "kubectl get node").await;
    assert_eq!(code, Some(0), "{err}");

    let r = osc.run(&["stack", "delete", "-y", "two"]).await;
    assert!(r.ok, "stack delete: {}", r.stderr);
    tb.shutdown().await;
}
