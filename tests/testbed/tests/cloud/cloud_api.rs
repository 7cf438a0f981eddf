//! Keystone, Nova, Neutron, Cinder, Glance APIs of the simulated cloud (no hosts).

use crate::cloud_common;

use std::time::{Duration, Instant};

use cloud_common::{Client, start};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testbed::cloud::FaultRule;

#[tokio::test]
async fn keystone_password_auth_returns_token_and_catalog() {
    let (tb, _d) = start().await;
    let http = reqwest::Client::new();
    let base = tb.base_url();
    // Version discovery works without a token.
    let r = http
        .get(format!("{base}/identity/v3"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // No token / bad token → 401.
    let r = http
        .get(format!("{base}/compute/v2.1/servers"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http
        .get(format!("{base}/compute/v2.1/servers"))
        .header("x-auth-token", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Wrong password → 401.
    let bad = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin",
        "domain": {"name": "Default"}, "password": "wrong"}}}}});
    let r = http
        .post(format!("{base}/identity/v3/auth/tokens"))
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    let c = Client::login(&tb).await;
    let (st, v) = c.get("/compute/v2.1/servers").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["servers"], json!([]));

    let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin",
        "domain": {"name": "Default"}, "password": cloud_common::password(tb.clouds_yaml())}}},
        "scope": {"project": {"name": "testbed", "domain": {"name": "Default"}}}}});
    let r = http
        .post(format!("{base}/identity/v3/auth/tokens"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    let cat = v["token"]["catalog"].as_array().unwrap();
    for ty in [
        "identity",
        "compute",
        "network",
        "block-storage",
        "volumev3",
        "orchestration",
        "image",
    ] {
        let e = cat
            .iter()
            .find(|e| e["type"] == ty)
            .unwrap_or_else(|| panic!("{ty} in catalog"));
        let public = e["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["interface"] == "public")
            .unwrap();
        assert_eq!(public["region"], "RegionOne");
        assert!(public["url"].as_str().unwrap().starts_with(&base));
    }
    assert_eq!(v["token"]["project"]["name"], "testbed");
    let yaml = std::fs::read_to_string(tb.clouds_yaml()).unwrap();
    assert!(yaml.contains("auth_url: http://127.0.0.1:"), "{yaml}");
    tb.shutdown().await;
}

/// A template with an ASG of 5 servers (Nova-created ports) and an ASG of 3 volumes.
fn many_body(name: &str) -> Value {
    json!({
        "stack_name": name,
        "template": {
            "heat_template_version": "2018-08-31",
            "resources": {
                "servers": {"type": "OS::Heat::AutoScalingGroup", "properties": {
                    "min_size": 0, "max_size": 10, "desired_capacity": 5,
                    "resource": {"type": "OS::Nova::Server", "properties": {
                        "flavor": "m1.tiny", "image": "cirros-0.5.2-x86_64-disk", "networks": [{"network": "net0"}]}}}},
                "vols": {"type": "OS::Heat::AutoScalingGroup", "properties": {
                    "min_size": 0, "max_size": 10, "desired_capacity": 3,
                    "resource": {"type": "OS::Cinder::Volume", "properties": {"size": 1}}}}
            }
        }
    })
}

async fn walk(c: &Client, first: &str, key: &str) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut url = first.to_string();
    let mut pages = 0;
    loop {
        let (st, v) = c.get(&url).await;
        assert_eq!(st, StatusCode::OK, "{url}: {v}");
        pages += 1;
        ids.extend(
            v[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["id"].as_str().unwrap().to_string()),
        );
        let next = v[format!("{key}_links")]
            .as_array()
            .and_then(|l| l.iter().find(|x| x["rel"] == "next"));
        match next {
            Some(n) => url = n["href"].as_str().unwrap().to_string(),
            None => break,
        }
        assert!(pages < 20);
    }
    (ids, pages)
}

#[tokio::test]
async fn pagination_with_limit_marker_and_next_links() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(many_body("many")).await;
    let s = c.wait("many", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");

    let (all, pages) = walk(&c, "/compute/v2.1/servers/detail?limit=2", "servers").await;
    assert_eq!(all.len(), 5);
    assert_eq!(pages, 3);
    let (unpaged, _) = walk(&c, "/compute/v2.1/servers", "servers").await;
    assert_eq!(all, unpaged, "same order with and without pagination");
    let (ports, _) = walk(&c, "/network/v2.0/ports?limit=2", "ports").await;
    assert_eq!(ports.len(), 5);
    let (vols, vpages) = walk(
        &c,
        &format!("/volume/v3/{}/volumes/detail?limit=2", c.project),
        "volumes",
    )
    .await;
    assert_eq!(vols.len(), 3);
    assert_eq!(vpages, 2);
    // Marker semantics: items after the marker.
    let (_, v) = c
        .get(&format!("/compute/v2.1/servers?marker={}&limit=10", all[1]))
        .await;
    let after: Vec<&str> = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        after,
        all[2..].iter().map(String::as_str).collect::<Vec<_>>()
    );
    // A full last page carries a next link that leads to an empty page (as in Nova).
    let (_, v) = c
        .get(&format!("/compute/v2.1/servers?marker={}&limit=3", all[1]))
        .await;
    let next = v["servers_links"][0]["href"].as_str().unwrap().to_string();
    let (_, v) = c.get(&next).await;
    assert_eq!(v["servers"], json!([]));
    // Unknown marker → 400.
    let (st, _) = c
        .get("/compute/v2.1/servers?marker=00000000-0000-0000-0000-000000000000")
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // Filters.
    let (_, v) = c
        .get(&format!("/network/v2.0/ports?device_id={}", all[0]))
        .await;
    assert_eq!(v["ports"].as_array().unwrap().len(), 1);
    let ip = v["ports"][0]["fixed_ips"][0]["ip_address"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ip.starts_with("10.231.0."), "{ip}");
    let (_, v) = c
        .get(&format!("/network/v2.0/ports?fixed_ips=ip_address%3D{ip}"))
        .await;
    assert_eq!(v["ports"].as_array().unwrap().len(), 1);
    let (_, v) = c.get("/compute/v2.1/servers?status=SHUTOFF").await;
    assert_eq!(v["servers"], json!([]));
    // Server shape.
    let (st, v) = c
        .req(
            Method::GET,
            &format!("/compute/v2.1/servers/{}", all[0]),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let s = &v["server"];
    assert_eq!(s["status"], "ACTIVE");
    assert_eq!(s["OS-EXT-STS:power_state"], 1);
    assert_eq!(s["OS-EXT-AZ:availability_zone"], "nova");
    let addrs = s["addresses"].as_object().unwrap();
    assert_eq!(addrs.len(), 1);
    assert_eq!(addrs.values().next().unwrap()[0]["addr"], ip);
    // Images include the template's image.
    let (_, v) = c
        .get("/image/v2/images?name=cirros-0.5.2-x86_64-disk")
        .await;
    assert_eq!(v["images"].as_array().unwrap().len(), 1);
    tb.shutdown().await;
}

#[tokio::test]
async fn nova_actions_and_microversions() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(many_body("acts")).await;
    c.wait("acts", &id).await;
    let (_, v) = c.get("/compute/v2.1/servers").await;
    let sid = v["servers"][0]["id"].as_str().unwrap().to_string();
    let r = c
        .http
        .get(format!("{}/compute/v2.1/servers/{sid}", c.base))
        .header("x-auth-token", &c.token)
        .header("x-openstack-nova-api-version", "2.47")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-openstack-nova-api-version"], "2.47");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["server"]["flavor"]["original_name"], "m1.tiny");
    let (_, v) = c.get("/compute/v2.1").await;
    assert_eq!(v["version"]["version"], "2.79");

    let (st, _) = c
        .req(
            Method::POST,
            &format!("/compute/v2.1/servers/{sid}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    wait_status(&c, &sid, "SHUTOFF").await;
    let (st, _) = c
        .req(
            Method::POST,
            &format!("/compute/v2.1/servers/{sid}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT);
    let (st, _) = c
        .req(
            Method::POST,
            &format!("/compute/v2.1/servers/{sid}/action"),
            Some(json!({"os-start": null})),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    wait_status(&c, &sid, "ACTIVE").await;
    let (st, _) = c
        .req(
            Method::POST,
            &format!("/compute/v2.1/servers/{sid}/action"),
            Some(json!({"reboot": {"type": "HARD"}})),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    wait_status(&c, &sid, "ACTIVE").await;

    // ERROR via fault injection (HTTP), with a fault object.
    let r = c
        .http
        .post(format!("{}/testbed/servers/{sid}/error", c.base))
        .json(&json!({"message": "disk on fire"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (_, v) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
    assert_eq!(v["server"]["status"], "ERROR");
    assert_eq!(v["server"]["fault"]["message"], "disk on fire");
    assert_eq!(v["server"]["fault"]["code"], 500);
    // Delete.
    let (st, _) = c
        .req(
            Method::DELETE,
            &format!("/compute/v2.1/servers/{sid}"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    for _ in 0..200 {
        let (st, _) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
        if st == StatusCode::NOT_FOUND {
            tb.shutdown().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("server not deleted");
}

async fn wait_status(c: &Client, sid: &str, want: &str) {
    for _ in 0..200 {
        let (_, v) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
        if v["server"]["status"] == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("server {sid} never became {want}");
}

#[tokio::test]
async fn fault_injection_5xx_latency_and_counters() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let cloud = tb.cloud().clone();
    cloud.reset_request_counts();

    // 503 for the next 2 compute requests (HTTP API).
    let r = c
        .http
        .post(format!("{}/testbed/faults/compute", c.base))
        .json(&json!({"status": 503, "count": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        c.get("/compute/v2.1/servers").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        c.get("/compute/v2.1/servers").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(c.get("/compute/v2.1/servers").await.0, StatusCode::OK);
    // Other services are not affected.
    assert_eq!(c.get("/network/v2.0/ports").await.0, StatusCode::OK);

    // Latency (Rust API).
    cloud.add_api_fault(
        "network",
        FaultRule {
            latency_ms: 300,
            probability: 1.0,
            ..Default::default()
        },
    );
    let t = Instant::now();
    assert_eq!(c.get("/network/v2.0/ports").await.0, StatusCode::OK);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    cloud.clear_api_faults(Some("network"));
    let t = Instant::now();
    c.get("/network/v2.0/ports").await;
    assert!(t.elapsed() < Duration::from_millis(300));

    // A share of requests: probability 0.5 over 200 requests.
    cloud.add_api_fault(
        "image",
        FaultRule {
            status: Some(500),
            probability: 0.5,
            ..Default::default()
        },
    );
    let mut failed = 0;
    for _ in 0..200 {
        if c.get("/image/v2/images").await.0 == StatusCode::INTERNAL_SERVER_ERROR {
            failed += 1;
        }
    }
    assert!((50..150).contains(&failed), "{failed} of 200 failed");
    cloud.clear_api_faults(None);

    // Counters (HTTP API and Rust API agree).
    let totals = cloud.request_totals();
    assert_eq!(totals["compute"], 3);
    assert_eq!(totals["network"], 3);
    assert_eq!(totals["image"], 200);
    let counts = cloud.request_counts();
    assert_eq!(counts["compute"]["GET /compute/v2.1/servers"], 3);
    let v: Value = c
        .http
        .get(format!("{}/testbed/counters", c.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["totals"]["compute"], 3);
    // Host list answers without a farm, and farm-only faults say so.
    let v: Value = c
        .http
        .get(format!("{}/testbed/hosts", c.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["servers"], json!([]));
    tb.shutdown().await;
}

/// `changes-since=<t>` as a URL query value.
fn since_q(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn ids_status(v: &Value) -> Vec<(String, String)> {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn changes_since_lists_changed_and_deleted_servers_as_nova_does() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(many_body("chg")).await;
    c.wait("chg", &id).await;
    let (_, v) = c.get("/compute/v2.1/servers/detail").await;
    let all = ids_status(&v);
    assert!(all.len() >= 3, "{all:?}");
    let (a, b) = (all[0].0.clone(), all[1].0.clone());

    // Nothing changed after a moment in the future: an empty page, no deleted ones either.
    let later = chrono::Utc::now() + chrono::Duration::seconds(5);
    let (st, v) = c
        .get(&format!(
            "/compute/v2.1/servers/detail?changes-since={}",
            since_q(later)
        ))
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(ids_status(&v), vec![]);

    // `updated` has second resolution: wait for the next second, then change two servers.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mark = chrono::Utc::now();
    tb.cloud()
        .inject_server_error(&a, "changes-since test")
        .await
        .unwrap();
    tb.cloud().inject_server_vanish(&b).await.unwrap();
    let (st, v) = c
        .get(&format!(
            "/compute/v2.1/servers/detail?changes-since={}",
            since_q(mark)
        ))
        .await;
    assert_eq!(st, StatusCode::OK);
    let mut got = ids_status(&v);
    got.sort();
    let mut want = vec![
        (a.clone(), "ERROR".to_string()),
        (b.clone(), "DELETED".to_string()),
    ];
    want.sort();
    assert_eq!(
        got, want,
        "only the two changed servers, the deleted one as DELETED"
    );
    let srv_a = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == a.as_str())
        .unwrap();
    assert!(srv_a["updated"].as_str().unwrap() >= since_q(mark).as_str());
    assert_eq!(srv_a["fault"]["message"], "changes-since test");
    // The plain listing does not show the deleted server.
    let (_, v) = c.get("/compute/v2.1/servers/detail").await;
    assert!(ids_status(&v).iter().all(|(i, _)| *i != b));
    // Other ISO 8601 spellings are accepted (offset, fraction, no zone = UTC).
    for q in [
        mark.format("%Y-%m-%dT%H:%M:%S+00:00").to_string(),
        mark.format("%Y-%m-%dT%H:%M:%S").to_string(),
    ] {
        let (st, v) = c
            .get(&format!(
                "/compute/v2.1/servers/detail?changes-since={}",
                q.replace('+', "%2B")
            ))
            .await;
        assert_eq!(st, StatusCode::OK, "{q}");
        assert_eq!(ids_status(&v).len(), 2, "{q}");
    }

    // A malformed time: 400 with Nova's badRequest body.
    let (st, v) = c
        .get("/compute/v2.1/servers/detail?changes-since=yesterday")
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(v["badRequest"]["code"], 400);
    assert!(
        v["badRequest"]["message"]
            .as_str()
            .unwrap()
            .contains("changes-since"),
        "{v}"
    );
    tb.shutdown().await;
}

/// A host backend that records the requests it gets (no hosts).
struct Recorder(std::sync::Mutex<Vec<testbed::cloud::HostRequest>>);

impl testbed::cloud::HostBackend for Recorder {
    fn start(
        &self,
        req: testbed::cloud::HostRequest,
    ) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<testbed::cloud::HostStarted>> {
        let started = testbed::cloud::HostStarted {
            server_id: req.server_id.clone(),
            ip: req.ip,
            host_key:
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA8tHBybsWOA2E+/5oT9sQaJw8HjBTGJD13UXcWrMJpq"
                    .into(),
        };
        self.0.lock().unwrap().push(req);
        Box::pin(async move { Ok(started) })
    }
    fn stop(&self, _: &str) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn delete(&self, _: &str) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn delete_volume(&self, _: &str) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn shutdown(&self) -> testbed::cloud::backend::BoxFut<'_, ()> {
        Box::pin(async {})
    }
    fn stop_sshd(&self, _: &str) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn start_sshd(&self, _: &str) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn set_hang(
        &self,
        _: &str,
        _: bool,
    ) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn rotate_host_key(
        &self,
        _: &str,
    ) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<String>> {
        Box::pin(async { anyhow::bail!("not recorded") })
    }
    fn bind_pv(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn unbind_pv(
        &self,
        _: &str,
        _: &str,
        _: bool,
    ) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn set_node_ready(
        &self,
        _: &str,
        _: &str,
        _: bool,
    ) -> testbed::cloud::backend::BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn hosts_json(&self) -> Value {
        json!([])
    }
}

#[tokio::test]
async fn image_properties_show_in_glance_and_pick_the_host_profile() {
    use testbed::hosts::HostProfile;
    let dir = tempfile::tempdir().unwrap();
    let rec = std::sync::Arc::new(Recorder(std::sync::Mutex::new(Vec::new())));
    let tb = testbed::cloud::Testbed::start(testbed::cloud::CloudOptions {
        farm: Some(rec.clone()),
        ..testbed::cloud::CloudOptions::no_hosts(dir.path())
    })
    .await
    .unwrap();
    let c = Client::login(&tb).await;

    // over the testbed API, as `testbed serve` users do; bad bodies are refused
    let http = reqwest::Client::new();
    let url = format!(
        "{}/testbed/images/ubuntu-20.04-server-cloudimg-amd64/properties",
        tb.base_url()
    );
    let r = http
        .post(&url)
        .json(&json!({"os_distro": "ubuntu", "os_version": "20.04"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let image_id = r.json::<Value>().await.unwrap()["image_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = http
        .post(&url)
        .json(&json!({"os_version": 20.04}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Glance shows them as top-level keys of the image; other images have none
    let (st, v) = c.get(&format!("/image/v2/images/{image_id}")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["os_distro"], "ubuntu");
    assert_eq!(v["os_version"], "20.04");
    assert_eq!(v["name"], "ubuntu-20.04-server-cloudimg-amd64");
    let (_, v) = c
        .get("/image/v2/images?name=cirros-0.5.2-x86_64-disk")
        .await;
    assert!(v["images"][0].get("os_distro").is_none(), "{v}");

    let body = json!({
        "stack_name": "prof",
        "template": {
            "heat_template_version": "2018-08-31",
            "resources": {
                "u": {"type": "OS::Nova::Server", "properties": {"name": "u1",
                    "flavor": "m1.tiny", "image": "ubuntu-20.04-server-cloudimg-amd64", "networks": [{"network": "net0"}]}},
                "c": {"type": "OS::Nova::Server", "properties": {"name": "c1",
                    "flavor": "m1.tiny", "image": "cirros-0.5.2-x86_64-disk", "networks": [{"network": "net0"}]}}
            }
        }
    });
    let id = c.create_stack(body).await;
    let s = c.wait("prof", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    let mut got: Vec<(String, HostProfile)> = rec
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.hostname.clone(), r.profile))
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("c1".to_string(), HostProfile::Debian),
            ("u1".to_string(), HostProfile::Ubuntu2004)
        ]
    );
    tb.shutdown().await;
}

/// What Tacker v2's local NFVO does with a package's software image through openstacksdk
/// (create, upload the data, list by tag, delete), and what a real Heat's
/// `OS::Neutron::FloatingIP` calls on the `public` network (create with a port, delete), the
/// way the Image API v2 and the Networking API v2.0 answer them.
#[tokio::test]
async fn glance_image_create_upload_delete_and_neutron_floating_ip_create_delete() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;

    let (st, v) = c
        .req(
            Method::POST,
            "/image/v2/images",
            Some(json!({"name": "workerNode-image", "disk_format": "qcow2", "container_format": "bare",
                "min_disk": 0, "min_ram": 0, "visibility": "private", "tags": ["inst-1"],
                "owner_specified.openstack.object": "images/workerNode-image"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"], "queued");
    assert_eq!(v["size"], Value::Null);
    assert_eq!(
        v["owner_specified.openstack.object"],
        "images/workerNode-image"
    );
    let id = v["id"].as_str().unwrap().to_string();
    // a wrong type is refused, nothing recorded
    let (st, _) = c
        .req(
            Method::POST,
            "/image/v2/images",
            Some(json!({"name": "x", "min_disk": "big"})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (_, v) = c.get("/image/v2/images?name=x").await;
    assert_eq!(v["images"], json!([]));

    let data = vec![7u8; 4096];
    let r = reqwest::Client::new()
        .put(format!("{}/image/v2/images/{id}/file", tb.base_url()))
        .header("x-auth-token", &c.token)
        .header("content-type", "application/octet-stream")
        .body(data.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let (_, v) = c.get(&format!("/image/v2/images/{id}")).await;
    assert_eq!(v["status"], "active");
    assert_eq!(v["size"], 4096);
    use sha2::Digest as _;
    let want: String = sha2::Sha512::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v["os_hash_value"], want.as_str());
    // a second upload is refused (the image is no longer queued)
    let r = reqwest::Client::new()
        .put(format!("{}/image/v2/images/{id}/file", tb.base_url()))
        .header("x-auth-token", &c.token)
        .body(data)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let (_, v) = c.get("/image/v2/images?tag=inst-1").await;
    let names: Vec<&str> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["workerNode-image"]);
    let (st, _) = c
        .req(Method::DELETE, &format!("/image/v2/images/{id}"), None)
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, _) = c.get(&format!("/image/v2/images/{id}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, v) = c.get("/image/v2/images?tag=inst-1").await;
    assert_eq!(v["images"], json!([]));

    // floating IPs: the `public` network exists; create one on a port, then delete it
    let (_, v) = c.get("/network/v2.0/networks?name=public&fields=id").await;
    let public = v["networks"][0]["id"].as_str().unwrap().to_string();
    let (_, v) = c.get("/network/v2.0/networks?name=testbed-net").await;
    let net = v["networks"][0]["id"].as_str().unwrap().to_string();
    let (st, v) = c
        .req(
            Method::POST,
            "/network/v2.0/ports",
            Some(json!({"port": {"network_id": net, "name": "p1"}})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let port = v["port"]["id"].as_str().unwrap().to_string();
    let fixed = v["port"]["fixed_ips"][0]["ip_address"].clone();
    let (st, v) = c
        .req(
            Method::POST,
            "/network/v2.0/floatingips",
            Some(json!({"floatingip": {"floating_network_id": public, "port_id": port}})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let fip = v["floatingip"]["id"].as_str().unwrap().to_string();
    assert_eq!(v["floatingip"]["port_id"], port.as_str());
    assert_eq!(v["floatingip"]["fixed_ip_address"], fixed);
    assert_eq!(v["floatingip"]["status"], "ACTIVE");
    // an unknown network or port is refused
    let (st, _) = c
        .req(
            Method::POST,
            "/network/v2.0/floatingips",
            Some(json!({"floatingip": {"floating_network_id": "nope"}})),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = c
        .req(
            Method::POST,
            "/network/v2.0/floatingips",
            Some(json!({"floatingip": {"floating_network_id": public, "port_id": "nope"}})),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, v) = c
        .get(&format!("/network/v2.0/floatingips?port_id={port}"))
        .await;
    assert_eq!(v["floatingips"].as_array().unwrap().len(), 1, "{v}");
    let (st, _) = c
        .req(
            Method::DELETE,
            &format!("/network/v2.0/floatingips/{fip}"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, _) = c
        .req(
            Method::DELETE,
            &format!("/network/v2.0/floatingips/{fip}"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, v) = c.get("/network/v2.0/floatingips").await;
    assert_eq!(v["floatingips"], json!([]));
    tb.shutdown().await;
}
