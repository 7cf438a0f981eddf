//! Bring-up benchmark: one stack with 20 servers (19 workers in an AutoScalingGroup of nested
//! templates with their own ports, plus a storage server with a Cinder volume) on real hosts;
//! measures wall time from stack create to CREATE_COMPLETE and from delete to nothing left.
//! Targets: up ≤ 5 s, down ≤ 3 s. Also times 1,200 record-only servers (no hosts).
//!
//! Run as root: `cargo bench -p testbed --bench bringup`. Without root only the no-hosts part runs.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use testbed::cloud::{CloudOptions, Testbed};

const PREFIX: &str = "tbb";
const SUBNET: &str = "10.231.60.0/24";

const WORKER: &str = "heat_template_version: 2013-05-23
parameters:
  flavor: {type: string}
  image: {type: string}
  net: {type: string}
resources:
  workerNode:
    type: OS::Nova::Server
    properties:
      name: workerNode
      flavor: {get_param: flavor}
      image: {get_param: image}
      networks:
      - port: {get_resource: workerNode_CP}
  workerNode_CP:
    type: OS::Neutron::Port
    properties:
      network: {get_param: net}
";

fn body(name: &str, workers: u32) -> Value {
    json!({
        "stack_name": name,
        "files": {"worker.yaml": WORKER},
        "parameters": {"nfv": {"VDU": {"workerNode": {"desired_capacity": workers}}}},
        "template": {
            "heat_template_version": "2013-05-23",
            "parameters": {"nfv": {"type": "json"}},
            "resources": {
                "worker_instance": {"type": "OS::Heat::AutoScalingGroup", "properties": {
                    "min_size": 0, "max_size": 2000,
                    "desired_capacity": {"get_param": ["nfv", "VDU", "workerNode", "desired_capacity"]},
                    "resource": {"type": "worker.yaml", "properties": {"flavor": "m1.small", "image": "ubuntu", "net": "net0"}}}},
                "storage_server_volume": {"type": "OS::Cinder::Volume", "properties": {"size": 1}},
                "storage_server_CP": {"type": "OS::Neutron::Port", "properties": {"network": "net0"}},
                "storage_server": {"type": "OS::Nova::Server", "properties": {
                    "name": "storage_server", "flavor": "m1.small", "image": "ubuntu",
                    "block_device_mapping_v2": [{"device_name": "vdb", "volume_id": {"get_resource": "storage_server_volume"}, "boot_index": -1}],
                    "networks": [{"port": {"get_resource": "storage_server_CP"}}]}}
            }
        }
    })
}

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    project: String,
}

impl Api {
    async fn login(tb: &Testbed) -> Api {
        let yaml: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(tb.clouds_yaml()).unwrap()).unwrap();
        let pw = yaml["clouds"]["testbed"]["auth"]["password"]
            .as_str()
            .unwrap()
            .to_string();
        let http = reqwest::Client::new();
        let r = http
            .post(format!("{}/identity/v3/auth/tokens", tb.base_url()))
            .json(&json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin",
                "domain": {"name": "Default"}, "password": pw}}}, "scope": {"project": {"name": "testbed", "domain": {"name": "Default"}}}}}))
            .send()
            .await
            .unwrap();
        let token = r.headers()["x-subject-token"].to_str().unwrap().to_string();
        let v: Value = r.json().await.unwrap();
        Api {
            http,
            base: tb.base_url(),
            token,
            project: v["token"]["project"]["id"].as_str().unwrap().to_string(),
        }
    }

    fn url(&self, p: &str) -> String {
        format!("{}/heat-api/v1/{}{p}", self.base, self.project)
    }

    async fn status(&self, name: &str, id: &str) -> (String, String) {
        let v: Value = self
            .http
            .get(self.url(&format!("/stacks/{name}/{id}")))
            .header("x-auth-token", &self.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (
            v["stack"]["stack_status"].as_str().unwrap().to_string(),
            v["stack"]["stack_status_reason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }

    async fn wait(&self, name: &str, id: &str, limit: Duration) -> String {
        let t = Instant::now();
        loop {
            let (s, r) = self.status(name, id).await;
            if !s.ends_with("IN_PROGRESS") {
                assert!(s.ends_with("COMPLETE"), "{s}: {r}");
                return s;
            }
            assert!(t.elapsed() < limit, "{name} still {s} after {limit:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Returns (up, down) wall times.
    async fn cycle(&self, tb: &Testbed, name: &str, workers: u32) -> (Duration, Duration) {
        let t = Instant::now();
        let r = self
            .http
            .post(self.url("/stacks"))
            .header("x-auth-token", &self.token)
            .json(&body(name, workers))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let v: Value = r.json().await.unwrap();
        let id = v["stack"]["id"].as_str().unwrap().to_string();
        self.wait(name, &id, Duration::from_secs(120)).await;
        let up = t.elapsed();
        assert_eq!(tb.cloud().record_counts().0, workers as usize + 1);
        let t = Instant::now();
        let r = self
            .http
            .delete(self.url(&format!("/stacks/{name}/{id}")))
            .header("x-auth-token", &self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert_eq!(
            self.wait(name, &id, Duration::from_secs(120)).await,
            "DELETE_COMPLETE"
        );
        let down = t.elapsed();
        assert_eq!(tb.cloud().record_counts(), (0, 0, 0));
        let fh = tb.cloud().farm_hosts();
        assert!(fh.is_null() || fh == json!([]), "hosts left: {fh}");
        (up, down)
    }
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Records only: 1,200 servers.
    {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = CloudOptions::no_hosts(dir.path());
        opts.subnet = "10.232.0.0/16".into(); // 1,200 addresses do not fit the default /24
        let tb = Testbed::start(opts).await.unwrap();
        let api = Api::login(&tb).await;
        let (up, down) = api.cycle(&tb, "records", 1199).await;
        println!(
            "1200 servers without hosts: up {:.3} s, down {:.3} s",
            up.as_secs_f64(),
            down.as_secs_f64()
        );
        tb.shutdown().await;
    }
    if !is_root() {
        println!("20 servers with hosts: skipped (needs root)");
        return;
    }
    let _ = testbed::hosts::down_all(PREFIX).await;
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("testbed-bench-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = testbed::cloud::farm::start_farm(dir.path(), PREFIX, SUBNET)
        .await
        .expect("farm");
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = SUBNET.into();
    opts.farm = Some(farm);
    let tb = Testbed::start(opts).await.unwrap();
    let api = Api::login(&tb).await;
    let mut ups = Vec::new();
    let mut downs = Vec::new();
    for i in 0..3 {
        let (up, down) = api.cycle(&tb, &format!("bench{i}"), 19).await;
        println!(
            "run {i}: 20 servers with hosts: up {:.3} s, down {:.3} s",
            up.as_secs_f64(),
            down.as_secs_f64()
        );
        ups.push(up);
        downs.push(down);
    }
    ups.sort();
    downs.sort();
    println!(
        "20 servers with hosts (median of 3): up {:.3} s (target <= 5 s), down {:.3} s (target <= 3 s)",
        ups[1].as_secs_f64(),
        downs[1].as_secs_f64()
    );
    tb.shutdown().await;
    let rep = testbed::hosts::down_all(PREFIX).await.unwrap();
    assert!(rep.is_empty(), "leftovers after shutdown: {rep:?}");
}
