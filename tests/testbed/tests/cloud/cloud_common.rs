//! Helpers shared by the `cloud_*` tests: an authenticated raw HTTP client and stack bodies.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testbed::cloud::{CloudOptions, Testbed};

/// Starts a no-hosts testbed in a temporary directory.
pub async fn start() -> (Testbed, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tb = Testbed::start(CloudOptions::no_hosts(dir.path()))
        .await
        .expect("testbed starts");
    (tb, dir)
}

/// Reads `auth.password` of the `testbed` cloud from clouds.yaml.
pub fn password(clouds_yaml: &Path) -> String {
    let v: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(clouds_yaml).unwrap()).unwrap();
    v["clouds"]["testbed"]["auth"]["password"]
        .as_str()
        .unwrap()
        .to_string()
}

/// An authenticated client.
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
    pub project: String,
}

impl Client {
    pub async fn login(tb: &Testbed) -> Client {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": password(tb.clouds_yaml())}}},
            "scope": {"project": {"name": "testbed", "domain": {"name": "Default"}}}}});
        let r = http
            .post(format!("{}/identity/v3/auth/tokens", tb.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let token = r.headers()["x-subject-token"].to_str().unwrap().to_string();
        let v: Value = r.json().await.unwrap();
        Client {
            http,
            base: tb.base_url(),
            token,
            project: v["token"]["project"]["id"].as_str().unwrap().to_string(),
        }
    }

    /// Sends a request to `{base}{path}` (or an absolute URL) and returns status and JSON (Null if empty).
    pub async fn req(&self, m: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{}", self.base, path)
        };
        let mut r = self
            .http
            .request(m, url)
            .header("x-auth-token", &self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let st = resp.status();
        let text = resp.text().await.unwrap();
        (
            st,
            if text.trim().is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap_or(json!(text))
            },
        )
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.req(Method::GET, path, None).await
    }

    pub fn heat(&self, path: &str) -> String {
        format!("/heat-api/v1/{}{}", self.project, path)
    }

    /// Creates a stack; returns its id.
    pub async fn create_stack(&self, body: Value) -> String {
        let (st, v) = self
            .req(Method::POST, &self.heat("/stacks"), Some(body))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        v["stack"]["id"].as_str().unwrap().to_string()
    }

    /// Polls a stack until it leaves *_IN_PROGRESS; returns the stack JSON.
    pub async fn wait(&self, name: &str, id: &str) -> Value {
        for _ in 0..1000 {
            let (st, v) = self.get(&self.heat(&format!("/stacks/{name}/{id}"))).await;
            assert_eq!(st, StatusCode::OK, "{v}");
            if !v["stack"]["stack_status"]
                .as_str()
                .unwrap()
                .ends_with("IN_PROGRESS")
            {
                return v["stack"].clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (_, v) = self.get(&self.heat(&format!("/stacks/{name}/{id}"))).await;
        let res = self.resources(name, id, 3).await;
        let busy: Vec<String> = res
            .iter()
            .filter(|r| {
                r["resource_status"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("IN_PROGRESS")
            })
            .map(|r| {
                format!(
                    "{} {} {}",
                    r["resource_name"], r["resource_type"], r["resource_status"]
                )
            })
            .collect();
        panic!(
            "stack {name} did not finish: {} {}; busy: {busy:?}",
            v["stack"]["stack_status"], v["stack"]["stack_status_reason"]
        );
    }

    /// Resources of a stack with nested_depth.
    pub async fn resources(&self, name: &str, id: &str, depth: u32) -> Vec<Value> {
        let (st, v) = self
            .get(&self.heat(&format!(
                "/stacks/{name}/{id}/resources?nested_depth={depth}"
            )))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v["resources"].as_array().unwrap().clone()
    }
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The nfv parameter for the pv_k8s test BaseHOT.
pub fn pv_nfv(workers: u32) -> Value {
    json!({
        "VDU": {
            "masterNode": {"computeFlavourId": "m1.medium", "vcImageId": "ubuntu-22.04-server-cloudimg-amd64", "desired_capacity": 1},
            "workerNode": {"computeFlavourId": "m1.medium", "vcImageId": "ubuntu-22.04-server-cloudimg-amd64", "desired_capacity": workers},
            "storage_server": {"computeFlavourId": "m1.small", "vcImageId": "ubuntu-22.04-server-cloudimg-amd64", "locationConstraints": null}
        },
        "CP": {
            "masterNode_CP1": {"network": "f0c82461-36b5-4d86-8322-b0bc19cda65f"},
            "workerNode_CP2": {"network": "f0c82461-36b5-4d86-8322-b0bc19cda65f"},
            "storage_server_CP1": {"network": "net0"},
            "storage_server_CP": {"network": "net0"}
        }
    })
}

/// A stack-create body for the test BaseHOT in tests/data/pv_k8s (template as a YAML string,
/// nested templates in files, nfv as an object).
pub fn pv_body(name: &str, workers: u32) -> Value {
    let d = data_dir().join("pv_k8s");
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    json!({
        "stack_name": name,
        "template": read("base_hot_k8s_cluster.yaml"),
        "files": {
            "complex_nested_master.yaml": read("complex_nested_master.yaml"),
            "complex_nested_worker.yaml": read("complex_nested_worker.yaml"),
        },
        "parameters": {"nfv": pv_nfv(workers)},
        "disable_rollback": true,
    })
}

/// Servers of a resource listing: (resource_name, physical id, stack self link).
pub fn servers(res: &[Value]) -> Vec<(String, String, String)> {
    res.iter()
        .filter(|r| r["resource_type"] == "OS::Nova::Server")
        .map(|r| {
            let stack = r["links"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["rel"] == "stack")
                .unwrap()["href"]
                .as_str()
                .unwrap()
                .to_string();
            (
                r["resource_name"].as_str().unwrap().to_string(),
                r["physical_resource_id"].as_str().unwrap().to_string(),
                stack,
            )
        })
        .collect()
}

pub fn phys(res: &[Value], name: &str) -> String {
    res.iter().find(|r| r["resource_name"] == name).unwrap()["physical_resource_id"]
        .as_str()
        .unwrap()
        .to_string()
}
