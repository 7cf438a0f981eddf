//! Heat: stacks from BaseHOTs, nested stacks, mark-unhealthy heal, ASG scaling, failures (no hosts).

use crate::cloud_common;

use std::collections::BTreeSet;

use cloud_common::{Client, phys, pv_body, pv_nfv, servers, start};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn pv_basehot_reaches_create_complete_with_nested_servers() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 2)).await;
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    assert_eq!(
        s["stack_status_reason"],
        "Stack CREATE completed successfully"
    );
    // nfv parameter shown as a JSON string, as Heat does.
    let nfv: Value = serde_json::from_str(s["parameters"]["nfv"].as_str().unwrap()).unwrap();
    assert_eq!(nfv["VDU"]["workerNode"]["desired_capacity"], 2);

    // Depth 0: only the storage server is a server; the ASGs link to nested stacks.
    let top = c.resources("pv", &id, 0).await;
    assert_eq!(servers(&top).len(), 1);
    let asg = top
        .iter()
        .find(|r| r["resource_name"] == "worker_instance")
        .unwrap();
    assert_eq!(asg["resource_type"], "OS::Heat::AutoScalingGroup");
    assert!(
        asg["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["rel"] == "nested")
    );
    let vip = top.iter().find(|r| r["resource_name"] == "vip_CP").unwrap();
    assert_eq!(vip["required_by"], json!(["master_instance"]));
    // Depth 2: servers inside the ASG members.
    let all = c.resources("pv", &id, 2).await;
    let srv = servers(&all);
    let names: Vec<&str> = srv.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(srv.len(), 4, "{names:?}");
    assert_eq!(names.iter().filter(|n| **n == "workerNode").count(), 2);
    assert_eq!(names.iter().filter(|n| **n == "masterNode").count(), 1);
    let worker = all
        .iter()
        .find(|r| r["resource_name"] == "workerNode")
        .unwrap();
    assert!(worker["parent_resource"].is_string(), "{worker}");
    // Members are template resources inside the ASG's nested stack.
    let members: Vec<&Value> = all
        .iter()
        .filter(|r| r["resource_type"] == "complex_nested_worker.yaml")
        .collect();
    assert_eq!(members.len(), 2);
    assert_eq!(members[0]["parent_resource"], "worker_instance");
    assert_eq!(members[0]["resource_status"], "CREATE_COMPLETE");

    // Every server is ACTIVE in Nova with a testbed address; the storage server has the volume at /dev/vdb.
    for (_, sid, _) in &srv {
        let (_, v) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
        assert_eq!(v["server"]["status"], "ACTIVE");
    }
    let storage = phys(&all, "storage_server");
    let vol = phys(&all, "storage_server_volume");
    let (_, v) = c
        .get(&format!("/volume/v3/{}/volumes/{vol}", c.project))
        .await;
    assert_eq!(v["volume"]["status"], "in-use");
    assert_eq!(v["volume"]["attachments"][0]["server_id"], storage.as_str());
    assert_eq!(v["volume"]["attachments"][0]["device"], "/dev/vdb");
    assert_eq!(v["volume"]["name"], "storage_server_volume");
    let (_, v) = c.get(&format!("/compute/v2.1/servers/{storage}")).await;
    assert_eq!(v["server"]["name"], "storage_server");
    assert_eq!(
        v["server"]["os-extended-volumes:volumes_attached"][0]["id"],
        vol.as_str()
    );
    // Ports keep the network id they were asked for.
    let (_, v) = c
        .get(&format!("/network/v2.0/ports?device_id={storage}"))
        .await;
    let (_, n) = c
        .get(&format!(
            "/network/v2.0/networks/{}",
            v["ports"][0]["network_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(n["network"]["name"], "net0");
    let (_, v) = c
        .get("/network/v2.0/networks/f0c82461-36b5-4d86-8322-b0bc19cda65f")
        .await;
    assert_eq!(v["network"]["id"], "f0c82461-36b5-4d86-8322-b0bc19cda65f");

    // Outputs.
    let out = |k: &str| {
        s["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["output_key"] == k)
            .unwrap()["output_value"]
            .clone()
    };
    let ip = out("storage_server_ip");
    let (_, v) = c
        .get(&format!("/network/v2.0/ports?device_id={storage}"))
        .await;
    assert_eq!(ip, v["ports"][0]["fixed_ips"][0]["ip_address"]);
    // HOT 2013-05-23 reads `outputs_list` without the member output's name (Heat's
    // `GetAttThenSelect`), which a group cannot answer: real Heat 27.0.1 gives no value and
    // this error (the differential check against real Heat shows it).
    let worker_ips = s["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["output_key"] == "worker_ips")
        .unwrap();
    assert_eq!(worker_ips["output_value"], Value::Null);
    assert_eq!(
        worker_ips["output_error"],
        "The Referenced Attribute (worker_instance outputs_list) is incorrect."
    );
    assert!(
        out("vip")
            .as_str()
            .unwrap()
            .starts_with("https://10.231.0.")
    );
    assert_eq!(out("joined"), "a,b,c");

    // GET /stacks/{name} redirects to /stacks/{name}/{id}; list shows the stack.
    let (st, _) = c.get(&c.heat("/stacks/pv")).await;
    assert_eq!(st, StatusCode::FOUND);
    // As in Heat, /stacks/{name}/resources redirects (query kept) — Tacker lists resources this way.
    let r = c
        .http
        .get(format!(
            "{}{}",
            c.base,
            c.heat("/stacks/pv/resources?nested_depth=2")
        ))
        .header("x-auth-token", &c.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    let loc = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        loc.ends_with(&format!("/stacks/pv/{id}/resources?nested_depth=2")),
        "{loc}"
    );
    let (st, _) = c
        .get(&c.heat(&format!("/stacks/{id}/resources/storage_server")))
        .await;
    assert_eq!(st, StatusCode::FOUND);
    let (_, v) = c.get(&c.heat("/stacks")).await;
    assert_eq!(v["stacks"].as_array().unwrap().len(), 1);
    // Other methods on /stacks/{name} redirect too (Heat's stack_lookup).
    let (st, _) = c
        .req(Method::PATCH, &c.heat("/stacks/pv"), Some(json!({})))
        .await;
    assert_eq!(st, StatusCode::FOUND);
    // Duplicate name → 409.
    let (st, _) = c
        .req(Method::POST, &c.heat("/stacks"), Some(pv_body("pv", 2)))
        .await;
    assert_eq!(st, StatusCode::CONFLICT);

    // Delete → DELETE_COMPLETE, nothing left.
    let (st, _) = c
        .req(Method::DELETE, &c.heat(&format!("/stacks/pv/{id}")), None)
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "DELETE_COMPLETE");
    assert_eq!(tb.cloud().record_counts(), (0, 0, 0));
    let (st, _) = c.get(&c.heat("/stacks/pv")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    tb.shutdown().await;
}

async fn mark(c: &Client, stack_href: &str, res: &str) {
    let (st, v) = c
        .req(
            Method::PATCH,
            &format!("{stack_href}/resources/{res}"),
            Some(json!({"mark_unhealthy": true, "resource_status_reason": "marked by test"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

async fn patch(c: &Client, id: &str, body: Value) -> Value {
    let (st, v) = c
        .req(
            Method::PATCH,
            &c.heat(&format!("/stacks/pv/{id}")),
            Some(body),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let s = c.wait("pv", id).await;
    assert_eq!(s["stack_status"], "UPDATE_COMPLETE", "{s}");
    s
}

#[tokio::test]
async fn mark_unhealthy_then_update_replaces_only_marked() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 2)).await;
    assert_eq!(c.wait("pv", &id).await["stack_status"], "CREATE_COMPLETE");
    let before = c.resources("pv", &id, 2).await;
    let srv_before = servers(&before);
    let vol = phys(&before, "storage_server_volume");

    // Heal one worker: mark the server in its member stack (link rel=stack), then PATCH {}.
    let (_, victim, victim_stack) = srv_before
        .iter()
        .find(|s| s.0 == "workerNode")
        .unwrap()
        .clone();
    mark(&c, &victim_stack, "workerNode").await;
    let marked = c.resources("pv", &id, 2).await;
    let m = marked
        .iter()
        .find(|r| r["physical_resource_id"] == victim.as_str())
        .unwrap();
    assert_eq!(m["resource_status"], "CHECK_FAILED");
    assert_eq!(m["resource_status_reason"], "marked by test");
    let (st, _) = c.get(&format!("/compute/v2.1/servers/{victim}")).await;
    assert_eq!(st, StatusCode::OK);
    patch(&c, &id, json!({})).await;
    let after = c.resources("pv", &id, 2).await;
    let srv_after = servers(&after);
    let old: BTreeSet<String> = srv_before.iter().map(|s| s.1.clone()).collect();
    let new: BTreeSet<String> = srv_after.iter().map(|s| s.1.clone()).collect();
    assert_eq!(
        old.difference(&new).cloned().collect::<Vec<_>>(),
        vec![victim.clone()]
    );
    assert_eq!(new.difference(&old).count(), 1);
    let (st, _) = c.get(&format!("/compute/v2.1/servers/{victim}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // The replacement is in the same member stack, with the same port (same IP).
    let replacement = srv_after.iter().find(|s| !old.contains(&s.1)).unwrap();
    assert_eq!(replacement.2, victim_stack);
    assert_eq!(phys(&after, "storage_server_volume"), vol);

    // Heal the storage server: new server, same volume (data kept). Heat creates the
    // replacement first (the old server's ports are detached from it beforehand), so while the
    // volume is still attached to the old server Nova refuses the replacement.
    let storage = phys(&after, "storage_server");
    let (_, ports_before) = c
        .get(&format!("/network/v2.0/ports?device_id={storage}"))
        .await;
    mark(&c, &c.heat(&format!("/stacks/pv/{id}")), "storage_server").await;
    let (st, v) = c
        .req(
            Method::PATCH,
            &c.heat(&format!("/stacks/pv/{id}")),
            Some(json!({})),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "UPDATE_FAILED", "{s}");
    assert!(
        s["stack_status_reason"]
            .as_str()
            .unwrap()
            .contains("is already attached to a server"),
        "{s}"
    );
    let (st, _) = c.get(&format!("/compute/v2.1/servers/{storage}")).await;
    assert_eq!(
        st,
        StatusCode::OK,
        "the old server stays until an update completes"
    );
    let (_, p) = c
        .get(&format!("/network/v2.0/ports?device_id={storage}"))
        .await;
    assert_eq!(p["ports"], json!([]), "its ports were detached");
    // Detaching from a running server is refused (the testbed cannot unplug a loop device).
    let attachment = format!("/compute/v2.1/servers/{storage}/os-volume_attachments/{vol}");
    let (st, _) = c.req(Method::DELETE, &attachment, None).await;
    assert_eq!(st, StatusCode::CONFLICT);
    // Stop the old server, detach the volume, converge again: the replacement takes it.
    let (st, v) = c
        .req(
            Method::POST,
            &format!("/compute/v2.1/servers/{storage}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    for _ in 0..100 {
        let (_, v) = c.get(&format!("/compute/v2.1/servers/{storage}")).await;
        if v["server"]["status"] == "SHUTOFF" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (st, v) = c
        .get(&format!(
            "/compute/v2.1/servers/{storage}/os-volume_attachments"
        ))
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["volumeAttachments"][0]["volumeId"], vol.as_str(), "{v}");
    let (st, v) = c.req(Method::DELETE, &attachment, None).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let (st, _) = c.get(&attachment).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, v) = c
        .get(&format!("/volume/v3/{}/volumes/{vol}", c.project))
        .await;
    assert_eq!(v["volume"]["status"], "available", "{v}");
    patch(&c, &id, json!({})).await;
    let (st, _) = c.get(&format!("/compute/v2.1/servers/{storage}")).await;
    assert_eq!(
        st,
        StatusCode::NOT_FOUND,
        "the old server is deleted at the end"
    );
    let after2 = c.resources("pv", &id, 2).await;
    let storage2 = phys(&after2, "storage_server");
    assert_ne!(storage, storage2);
    assert_eq!(phys(&after2, "storage_server_volume"), vol);
    let (_, v) = c
        .get(&format!("/volume/v3/{}/volumes/{vol}", c.project))
        .await;
    assert_eq!(
        v["volume"]["attachments"][0]["server_id"],
        storage2.as_str()
    );
    let (_, ports_after) = c
        .get(&format!("/network/v2.0/ports?device_id={storage2}"))
        .await;
    assert_eq!(
        ports_before["ports"][0]["id"],
        ports_after["ports"][0]["id"]
    );
    // Other servers untouched.
    let others = |r: &[Value], skip: &str| -> BTreeSet<String> {
        servers(r)
            .into_iter()
            .map(|s| s.1)
            .filter(|s| s != skip)
            .collect()
    };
    assert_eq!(others(&after, &storage), others(&after2, &storage2));

    // Heal storage server AND volume (Tacker's default): the volume is recreated (new id, empty).
    mark(&c, &c.heat(&format!("/stacks/pv/{id}")), "storage_server").await;
    mark(
        &c,
        &c.heat(&format!("/stacks/pv/{id}")),
        "storage_server_volume",
    )
    .await;
    patch(&c, &id, json!({})).await;
    let after3 = c.resources("pv", &id, 2).await;
    assert_ne!(phys(&after3, "storage_server_volume"), vol);
    assert_ne!(phys(&after3, "storage_server"), storage2);
    let (st, _) = c
        .get(&format!("/volume/v3/{}/volumes/{vol}", c.project))
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // mark_unhealthy false resets CHECK_FAILED.
    let top = c.heat(&format!("/stacks/pv/{id}"));
    mark(&c, &top, "vip_CP").await;
    let (st, _) = c
        .req(
            Method::PATCH,
            &format!("{top}/resources/vip_CP"),
            Some(json!({"mark_unhealthy": false})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let (_, v) = c.get(&format!("{top}/resources/vip_CP")).await;
    assert_eq!(v["resource"]["resource_status"], "CHECK_COMPLETE");
    tb.shutdown().await;
}

fn worker_members(res: &[Value]) -> Vec<(String, String)> {
    res.iter()
        .filter(|r| r["resource_type"] == "complex_nested_worker.yaml")
        .map(|r| {
            (
                r["resource_name"].as_str().unwrap().to_string(),
                r["physical_resource_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn asg_desired_capacity_scales_out_and_in() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 2)).await;
    assert_eq!(c.wait("pv", &id).await["stack_status"], "CREATE_COMPLETE");
    let m2 = worker_members(&c.resources("pv", &id, 1).await);
    assert_eq!(m2.len(), 2);
    let servers2: BTreeSet<String> = servers(&c.resources("pv", &id, 2).await)
        .into_iter()
        .map(|s| s.1)
        .collect();

    // 2 → 3: existing members and servers are kept.
    let s = patch(&c, &id, json!({"parameters": {"nfv": pv_nfv(3)}})).await;
    let nfv: Value = serde_json::from_str(s["parameters"]["nfv"].as_str().unwrap()).unwrap();
    assert_eq!(nfv["VDU"]["workerNode"]["desired_capacity"], 3);
    let m3 = worker_members(&c.resources("pv", &id, 1).await);
    assert_eq!(m3.len(), 3);
    assert!(m2.iter().all(|m| m3.contains(m)));
    let servers3: BTreeSet<String> = servers(&c.resources("pv", &id, 2).await)
        .into_iter()
        .map(|s| s.1)
        .collect();
    assert!(servers2.is_subset(&servers3));
    assert_eq!(servers3.len(), servers2.len() + 1);

    // 3 → 2 after marking one member unhealthy (what Tacker does for its scale-in victims):
    // the marked member goes, the others stay.
    let victim = m3[1].clone();
    let all = c.resources("pv", &id, 1).await;
    let member = all
        .iter()
        .find(|r| r["resource_name"] == victim.0.as_str())
        .unwrap();
    let asg_stack = member["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["rel"] == "stack")
        .unwrap()["href"]
        .as_str()
        .unwrap()
        .to_string();
    mark(&c, &asg_stack, &victim.0).await;
    patch(&c, &id, json!({"parameters": {"nfv": pv_nfv(2)}})).await;
    let back = worker_members(&c.resources("pv", &id, 1).await);
    assert_eq!(back.len(), 2);
    assert!(!back.contains(&victim), "marked member removed");
    assert!(back.contains(&m3[0]) && back.contains(&m3[2]));

    // 2 → 1 without marking: Heat removes the oldest member.
    let mut nfv = pv_nfv(1);
    nfv["VDU"]["workerNode"]["desired_capacity"] = json!(1);
    patch(&c, &id, json!({"parameters": {"nfv": nfv}})).await;
    let one = worker_members(&c.resources("pv", &id, 1).await);
    assert_eq!(one, vec![m3[2].clone()], "oldest removed first");
    // Nested member stacks are addressable.
    let (st, v) = c
        .get(&c.heat(&format!("/stacks/{}/{}", "x", one[0].1)))
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    let all = c.resources("pv", &id, 1).await;
    let href = all
        .iter()
        .find(|r| r["resource_name"] == one[0].0.as_str())
        .unwrap()["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["rel"] == "nested")
        .unwrap()["href"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, v) = c.get(&href).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["stack"]["stack_status"], "UPDATE_COMPLETE");
    let (_, v) = c.get(&format!("{href}/resources")).await;
    assert_eq!(v["resources"].as_array().unwrap().len(), 2);
    tb.shutdown().await;
}

#[tokio::test]
async fn unsupported_constructs_fail_the_stack_with_a_reason() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let body = json!({"stack_name": "bad", "template": {"heat_template_version": "2018-08-31", "resources": {
        "db": {"type": "OS::Trove::Instance", "properties": {}},
        "p": {"type": "OS::Neutron::Port", "properties": {"network": "net0"}}}}});
    let id = c.create_stack(body).await;
    let s = c.wait("bad", &id).await;
    assert_eq!(s["stack_status"], "CREATE_FAILED");
    let reason = s["stack_status_reason"].as_str().unwrap();
    assert!(
        reason.contains("resources.db") && reason.contains("OS::Trove::Instance"),
        "{reason}"
    );
    assert_eq!(tb.cloud().record_counts(), (0, 0, 0), "nothing created");

    let body = json!({"stack_name": "bad2", "template": "heat_template_version: 2018-08-31\nresources:\n  p:\n    type: OS::Neutron::Port\n    properties:\n      network: {repeat: {for_each: {x: [1]}, template: x}}\n"});
    let id = c.create_stack(body).await;
    let s = c.wait("bad2", &id).await;
    let reason = s["stack_status_reason"].as_str().unwrap();
    assert!(
        reason.contains("resources.p") && reason.contains("'repeat'"),
        "{reason}"
    );

    // An empty flavor (a wrong nfv path) fails naming the nested resource.
    let mut body = pv_body("bad3", 2);
    body["parameters"]["nfv"]["VDU"]["workerNode"] =
        json!({"desired_capacity": 2, "vcImageId": "img"});
    let id = c.create_stack(body).await;
    let s = c.wait("bad3", &id).await;
    assert_eq!(s["stack_status"], "CREATE_FAILED");
    let reason = s["stack_status_reason"].as_str().unwrap();
    assert!(
        reason.contains("resources.worker_instance")
            && reason.contains("resources.workerNode")
            && reason.contains("flavor"),
        "{reason}"
    );

    // Bad template text is a 400 at once.
    let (st, _) = c
        .req(
            Method::POST,
            &c.heat("/stacks"),
            Some(json!({"stack_name": "x", "template": {"resources": {}}})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    tb.shutdown().await;
}

#[tokio::test]
async fn fixture_package_basehots_create_and_individual_vnfc_put() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/packages");
    let pv = root.join("pv-k8s-cluster/BaseHOT/simple");
    if pv.join("pv_k8s_cluster_top.hot.yaml").exists() {
        let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap();
        let mut nfv = pv_nfv(2);
        nfv["CP"]["storage_server_CP"] = json!({"network": "net0"});
        let body = json!({"stack_name": "fx", "template": read(pv.join("pv_k8s_cluster_top.hot.yaml")),
            "files": {"masterNode.yaml": read(pv.join("nested/masterNode.yaml")), "workerNode.yaml": read(pv.join("nested/workerNode.yaml"))},
            "parameters": {"nfv": nfv}});
        let id = c.create_stack(body).await;
        let s = c.wait("fx", &id).await;
        assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
        assert_eq!(servers(&c.resources("fx", &id, 2).await).len(), 4);
    }
    // Individual VNFC management: an adjusted HOT with VDU1-0 and VDU1-1 (template resources).
    let vdu = "heat_template_version: 2013-05-23\nparameters:\n  name: {type: string}\n  flavor: {type: string}\n  image: {type: string}\n  zone: {type: string}\n  net: {type: string}\nresources:\n  VDU1:\n    type: OS::Nova::Server\n    properties:\n      name: {get_param: name}\n      flavor: {get_param: flavor}\n      image: {get_param: image}\n      availability_zone: {get_param: zone}\n      networks:\n      - port: {get_resource: VDU1_CP1}\n  VDU1_CP1:\n    type: OS::Neutron::Port\n    properties:\n      network: {get_param: net}\n";
    let top = |n: usize| {
        let mut res = serde_json::Map::new();
        for i in 0..n {
            res.insert(
                format!("VDU1-{i}"),
                json!({"type": "VDU1.yaml", "properties": {
                "name": {"get_param": ["nfv", "VDU", format!("VDU1-{i}"), "computeName"]},
                "flavor": {"get_param": ["nfv", "VDU", format!("VDU1-{i}"), "computeFlavourId"]},
                "image": {"get_param": ["nfv", "VDU", format!("VDU1-{i}"), "vcImageId"]},
                "zone": {"get_param": ["nfv", "VDU", format!("VDU1-{i}"), "locationConstraints"]},
                "net": {"get_param": ["nfv", "CP", format!("VDU1_CP1-{i}"), "network"]}}}),
            );
        }
        json!({"heat_template_version": "2013-05-23", "parameters": {"nfv": {"type": "json"}}, "resources": res})
    };
    let nfv = json!({"VDU": {"VDU1-0": {"computeFlavourId": "m1.tiny", "vcImageId": "img-a", "locationConstraints": "az-1"},
                             "VDU1-1": {"computeFlavourId": "m1.tiny", "vcImageId": "img-a", "locationConstraints": null}},
                     "CP": {"VDU1_CP1-0": {"network": "net1"}, "VDU1_CP1-1": {"network": "net1"}}});
    let id = c.create_stack(json!({"stack_name": "ivm", "template": top(2), "files": {"VDU1.yaml": vdu}, "parameters": {"nfv": nfv}})).await;
    let s = c.wait("ivm", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    let r = c.resources("ivm", &id, 1).await;
    let s0 = r
        .iter()
        .find(|x| x["resource_name"] == "VDU1" && x["parent_resource"] == "VDU1-0")
        .unwrap()["physical_resource_id"]
        .clone();
    let s1 = r
        .iter()
        .find(|x| x["resource_name"] == "VDU1" && x["parent_resource"] == "VDU1-1")
        .unwrap()["physical_resource_id"]
        .clone();
    let (_, v) = c
        .get(&format!("/compute/v2.1/servers/{}", s0.as_str().unwrap()))
        .await;
    assert_eq!(v["server"]["OS-EXT-AZ:availability_zone"], "az-1");
    // Change only VDU1-1's image (PATCH with merged parameters): only that server is replaced.
    let mut nfv2 = nfv.clone();
    nfv2["VDU"]["VDU1-1"]["vcImageId"] = json!("img-b");
    let (st, _) = c
        .req(
            Method::PATCH,
            &c.heat(&format!("/stacks/ivm/{id}")),
            Some(json!({"parameters": {"nfv": nfv2}})),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    assert_eq!(c.wait("ivm", &id).await["stack_status"], "UPDATE_COMPLETE");
    let r = c.resources("ivm", &id, 1).await;
    let n0 = r
        .iter()
        .find(|x| x["resource_name"] == "VDU1" && x["parent_resource"] == "VDU1-0")
        .unwrap()["physical_resource_id"]
        .clone();
    let n1 = r
        .iter()
        .find(|x| x["resource_name"] == "VDU1" && x["parent_resource"] == "VDU1-1")
        .unwrap()["physical_resource_id"]
        .clone();
    assert_eq!(n0, s0);
    assert_ne!(n1, s1);
    // Scale in with PUT (full template without VDU1-1): VDU1-1 and its server go away.
    let (st, v) = c
        .req(Method::PUT, &c.heat(&format!("/stacks/ivm/{id}")), Some(json!({"template": top(1), "files": {"VDU1.yaml": vdu}, "parameters": {"nfv": nfv2}})))
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(c.wait("ivm", &id).await["stack_status"], "UPDATE_COMPLETE");
    let r = c.resources("ivm", &id, 1).await;
    assert_eq!(servers(&r).len(), 1);
    let (st, _) = c
        .get(&format!("/compute/v2.1/servers/{}", n1.as_str().unwrap()))
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // The template endpoint returns the current template.
    let (_, t) = c.get(&c.heat(&format!("/stacks/ivm/{id}/template"))).await;
    assert_eq!(t["resources"].as_object().unwrap().len(), 1);
    tb.shutdown().await;
}

/// Resource show fills `attributes` as Heat's `format_resource_attributes` does: the service's
/// show body for servers, ports and volumes (plus `with_attr`), the schema attributes otherwise.
#[tokio::test]
async fn resource_show_attributes_are_filled_as_heat_fills_them() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 2)).await;
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    let all = c.resources("pv", &id, 2).await;

    // Server: Nova's show body (server_groups from 2.71: none in the testbed), with_attr added.
    let storage = phys(&all, "storage_server");
    let a = attrs(
        &c,
        "pv",
        &id,
        "storage_server",
        "?with_attr=networks&with_attr=first_address",
    )
    .await;
    assert_eq!(a["id"], storage.as_str(), "{a}");
    assert_eq!(a["name"], "storage_server");
    assert_eq!(a["status"], "ACTIVE");
    assert_eq!(a["server_groups"], json!([]));
    let ip = a["addresses"]["net0"][0]["addr"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(a["networks"]["net0"], json!([ip]), "{a}");
    assert_eq!(a["first_address"], ip.as_str());
    let (_, nova) = c.get(&format!("/compute/v2.1/servers/{storage}")).await;
    assert_eq!(a["addresses"], nova["server"]["addresses"]);
    // Without with_attr, schema-only attributes are absent (as in Heat).
    let a = attrs(&c, "pv", &id, "storage_server", "").await;
    assert!(a.get("networks").is_none(), "{a}");

    // Port and volume: Neutron's and Cinder's show bodies.
    let vol = phys(&all, "storage_server_volume");
    let a = attrs(
        &c,
        "pv",
        &id,
        "storage_server_volume",
        "?with_attr=attachments_list",
    )
    .await;
    assert_eq!(a["id"], vol.as_str());
    assert_eq!(a["status"], "in-use");
    assert_eq!(a["size"], 5, "{a}"); // the template's size
    assert_eq!(a["attachments"][0]["device"], "/dev/vdb");
    assert_eq!(a["attachments_list"], a["attachments"]);
    let ports: Vec<&Value> = all
        .iter()
        .filter(|r| r["resource_type"] == "OS::Neutron::Port")
        .collect();
    assert!(!ports.is_empty());
    for p in ports {
        let name = p["resource_name"].as_str().unwrap();
        let a = attrs(
            &c,
            p["stack_name"].as_str().unwrap(),
            p["stack_id"].as_str().unwrap(),
            name,
            "",
        )
        .await;
        assert_eq!(a["id"], p["physical_resource_id"], "{a}");
        assert!(a["fixed_ips"][0]["ip_address"].is_string(), "{a}");
        assert!(a["mac_address"].is_string(), "{a}");
        assert!(a["network_id"].is_string(), "{a}");
    }

    // ASG: the group attributes; outputs per member without an output name.
    let a = attrs(&c, "pv", &id, "worker_instance", "").await;
    assert_eq!(a["current_size"], 2, "{a}");
    let refs = a["refs"].as_array().unwrap();
    assert_eq!(refs.len(), 2);
    let map = a["refs_map"].as_object().unwrap();
    assert_eq!(map.len(), 2);
    for (member, r) in map {
        assert!(refs.contains(r));
        assert!(a["outputs"][member]["mgmt_ip"].is_string(), "{a}");
    }
    assert_eq!(a["outputs_list"].as_array().unwrap().len(), 2);
}

/// `attributes` of `GET …/stacks/{stack}/{id}/resources/{res}{query}` (which must answer 200).
async fn attrs(c: &Client, stack: &str, id: &str, res: &str, query: &str) -> Value {
    let (st, v) = c
        .get(&c.heat(&format!("/stacks/{stack}/{id}/resources/{res}{query}")))
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["resource"]["attributes"].clone()
}

/// Nova's `changes-since`: servers updated at or after the time; an unparsable value is a 400.
#[tokio::test]
async fn server_list_changes_since() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 1)).await;
    c.wait("pv", &id).await;
    let n = |v: &Value| v["servers"].as_array().unwrap().len();
    let (st, v) = c
        .get("/compute/v2.1/servers?changes-since=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(n(&v), 3);
    let (_, v) = c
        .get("/compute/v2.1/servers/detail?changes-since=2999-01-01T00:00:00")
        .await;
    assert_eq!(n(&v), 0, "{v}");
    let (st, v) = c.get("/compute/v2.1/servers?changes-since=yesterday").await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["badRequest"]["code"], 400, "{v}");
}

/// `(resource_name, resource_status)` of an event list.
fn ev_pairs(v: &Value) -> Vec<(String, String)> {
    v["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {v}"))
        .iter()
        .map(|e| {
            (
                e["resource_name"].as_str().unwrap().to_string(),
                e["resource_status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn events_of_a_stack_as_heat_lists_them() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 2)).await;
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");

    // by name: a 302 to the stack's own path, as Heat's stack lookup does
    let (st, _) = c.get(&c.heat("/stacks/pv/events")).await;
    assert_eq!(st, StatusCode::FOUND);
    let (st, v) = c.get(&c.heat(&format!("/stacks/pv/{id}/events"))).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let all = ev_pairs(&v);
    assert_eq!(all[0], ("pv".into(), "CREATE_IN_PROGRESS".into()));
    assert_eq!(
        all.last().unwrap(),
        &("pv".to_string(), "CREATE_COMPLETE".to_string())
    );
    let storage: Vec<&str> = all
        .iter()
        .filter(|(n, _)| n == "storage_server")
        .map(|(_, s)| s.as_str())
        .collect();
    assert_eq!(storage, ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]);
    // the stack's own events: physical id = stack id, link "stack" ending in it
    let e0 = &v["events"][0];
    assert_eq!(e0["physical_resource_id"], id.as_str());
    assert_eq!(e0["logical_resource_id"], "pv");
    let stack_link = e0["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["rel"] == "stack")
        .unwrap()["href"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        stack_link.ends_with(&format!("/stacks/pv/{id}")),
        "{stack_link}"
    );
    assert!(e0["event_time"].as_str().unwrap().ends_with('Z'));

    // marker: only the events after it; limit; sort_dir=desc
    let first = v["events"][0]["id"].as_str().unwrap().to_string();
    let (_, after) = c
        .get(&c.heat(&format!("/stacks/pv/{id}/events?marker={first}&limit=2")))
        .await;
    assert_eq!(ev_pairs(&after), all[1..3].to_vec());
    let (_, desc) = c
        .get(&c.heat(&format!("/stacks/pv/{id}/events?sort_dir=desc&limit=1")))
        .await;
    assert_eq!(ev_pairs(&desc), vec![all.last().unwrap().clone()]);
    let (st, _) = c
        .get(&c.heat(&format!("/stacks/pv/{id}/events?marker=nope")))
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // filters
    let (_, f) = c
        .get(&c.heat(&format!(
            "/stacks/pv/{id}/events?resource_name=pv&resource_status=COMPLETE"
        )))
        .await;
    assert_eq!(
        ev_pairs(&f),
        vec![("pv".to_string(), "CREATE_COMPLETE".to_string())]
    );
    // nested_depth adds the nested stacks' events (the ASG members' servers)
    let (_, n) = c
        .get(&c.heat(&format!("/stacks/pv/{id}/events?nested_depth=2")))
        .await;
    assert!(ev_pairs(&n).len() > all.len());
    assert!(
        n["events"][0]["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["rel"] == "root_stack"),
        "{n}"
    );
    assert!(
        v["events"][0]["links"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["rel"] != "root_stack")
    );
    assert!(
        ev_pairs(&n)
            .iter()
            .any(|(name, st)| name == "workerNode" && st == "CREATE_COMPLETE")
    );

    // mark unhealthy is an event; delete ends with DELETE_COMPLETE, still listed by id
    let (st, _) = c
        .req(
            Method::PATCH,
            &c.heat(&format!("/stacks/pv/{id}/resources/storage_server")),
            Some(json!({"mark_unhealthy": true, "resource_status_reason": "test"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = c
        .req(Method::DELETE, &c.heat(&format!("/stacks/pv/{id}")), None)
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "DELETE_COMPLETE", "{s}");
    let (_, v) = c.get(&c.heat(&format!("/stacks/pv/{id}/events"))).await;
    let all = ev_pairs(&v);
    assert!(all.contains(&("storage_server".into(), "CHECK_FAILED".into())));
    assert!(all.contains(&("storage_server".into(), "DELETE_COMPLETE".into())));
    assert_eq!(
        all.last().unwrap(),
        &("pv".to_string(), "DELETE_COMPLETE".to_string())
    );
    tb.shutdown().await;
}
