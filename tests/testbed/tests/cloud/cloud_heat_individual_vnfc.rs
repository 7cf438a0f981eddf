//! Heat with an individual-VNFC adjusted HOT (tacker-specs
//! `specs/zed/individual-vnfc-management.rst`; its adjusted HOT as reproduced in vnfkeeper's
//! `fixtures/heat/seed`): one nested stack per VNFC, per-VNFC availability zones, and PATCH
//! updates that touch only the target VNFC (no hosts).

use crate::cloud_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cloud_common::{Client, start};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn seed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/heat/seed")
}

fn seed_template() -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(seed_dir().join("adjusted-top.yaml")).unwrap())
        .unwrap()
}

fn seed_nfv() -> Value {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(seed_dir().join("adjusted-parameters.json")).unwrap(),
    )
    .unwrap();
    v["nfv"].clone()
}

/// Server name → (id, availability zone, image id) of every server of the stack.
async fn servers(c: &Client, name: &str, id: &str) -> BTreeMap<String, (String, String, String)> {
    let mut out = BTreeMap::new();
    for r in c.resources(name, id, 2).await {
        if r["resource_type"] != "OS::Nova::Server" {
            continue;
        }
        let sid = r["physical_resource_id"].as_str().unwrap().to_string();
        let (st, v) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let s = &v["server"];
        out.insert(
            s["name"].as_str().unwrap().to_string(),
            (
                sid,
                s["OS-EXT-AZ:availability_zone"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                s["image"]["id"].as_str().unwrap_or("").to_string(),
            ),
        );
    }
    out
}

async fn patch(c: &Client, name: &str, id: &str, body: Value) -> Value {
    let (st, v) = c
        .req(
            Method::PATCH,
            &c.heat(&format!("/stacks/{name}/{id}")),
            Some(body),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let s = c.wait(name, id).await;
    assert_eq!(s["stack_status"], "UPDATE_COMPLETE", "{s}");
    s
}

#[tokio::test]
async fn adjusted_hot_scales_and_heals_one_vnfc_at_a_time() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let nested =
        std::fs::read_to_string(seed_dir().join("package/BaseHOT/simple/nested/VDU1.yaml"))
            .unwrap();
    let mut template = seed_template();
    let mut nfv = seed_nfv();
    let id = c
        .create_stack(json!({
            "stack_name": "vkh-ivnfc",
            "template": template,
            "files": {"VDU1.yaml": nested},
            "parameters": {"nfv": nfv},
            "disable_rollback": true,
        }))
        .await;
    let s = c.wait("vkh-ivnfc", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    let v0 = servers(&c, "vkh-ivnfc", &id).await;
    assert_eq!(v0.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    // Zones per VNFC, as the adjusted parameters give them.
    assert_eq!(v0["VDU1-0"].1, "zone-x");
    assert_eq!(v0["VDU1-1"].1, "zone-y");
    assert_eq!(v0["VDU1-1"].2, "0ef0597c-4aab-4235-8513-bf5d8304fe64");

    // Scale-out: template and nfv with VDU1-2 added (full documents in the PATCH).
    template["resources"]["VDU1-2"] = serde_json::from_str(
        &serde_json::to_string(&template["resources"]["VDU1-1"])
            .unwrap()
            .replace("VDU1-1", "VDU1-2")
            .replace("VDU1_CP1-1", "VDU1_CP1-2"),
    )
    .unwrap();
    nfv["VDU"]["VDU1-2"] = json!({"computeName": "VDU1-2", "computeFlavourId": "m1.tiny",
        "vcImageId": "6b8a14f0-1b40-418a-b650-ae4a0378daa5", "locationConstraints": "zone-z"});
    nfv["CP"]["VDU1_CP1-2"] = json!({"network": "67c837dc-c247-4a3e-ac0f-5603bfef1ba3"});
    patch(
        &c,
        "vkh-ivnfc",
        &id,
        json!({"template": template, "parameters": {"nfv": nfv}}),
    )
    .await;
    let v1 = servers(&c, "vkh-ivnfc", &id).await;
    assert_eq!(
        v1.keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU1-2"]
    );
    assert_eq!(v1["VDU1-0"].0, v0["VDU1-0"].0, "VDU1-0 untouched");
    assert_eq!(v1["VDU1-1"].0, v0["VDU1-1"].0, "VDU1-1 untouched");
    assert_eq!(v1["VDU1-2"].1, "zone-z");

    // Heal VDU1-1 with a new image: parameters only; only its server is rebuilt.
    nfv["VDU"]["VDU1-1"]["vcImageId"] = json!("11111111-2222-4333-8444-555555555555");
    patch(&c, "vkh-ivnfc", &id, json!({"parameters": {"nfv": nfv}})).await;
    let v2 = servers(&c, "vkh-ivnfc", &id).await;
    assert_ne!(v2["VDU1-1"].0, v1["VDU1-1"].0, "VDU1-1 replaced");
    assert_eq!(v2["VDU1-1"].2, "11111111-2222-4333-8444-555555555555");
    assert_eq!(v2["VDU1-1"].1, "zone-y", "zone kept");
    assert_eq!(v2["VDU1-0"].0, v1["VDU1-0"].0);
    assert_eq!(v2["VDU1-2"].0, v1["VDU1-2"].0);

    // Scale-in: VDU1-2 removed from template and nfv.
    template["resources"]
        .as_object_mut()
        .unwrap()
        .remove("VDU1-2");
    nfv["VDU"].as_object_mut().unwrap().remove("VDU1-2");
    nfv["CP"].as_object_mut().unwrap().remove("VDU1_CP1-2");
    patch(
        &c,
        "vkh-ivnfc",
        &id,
        json!({"template": template, "parameters": {"nfv": nfv}}),
    )
    .await;
    let v3 = servers(&c, "vkh-ivnfc", &id).await;
    assert_eq!(v3.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    assert_eq!(v3["VDU1-0"].0, v2["VDU1-0"].0);
    assert_eq!(v3["VDU1-1"].0, v2["VDU1-1"].0);
    let (st, _) = c
        .get(&format!("/compute/v2.1/servers/{}", v2["VDU1-2"].0))
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "VDU1-2's server deleted");
}
