//! The `openstack` crate 0.6 (the daemon's client) against the simulated cloud, configured from the
//! generated clouds.yaml without touching `./`, `~` or `/etc`.

use crate::cloud_common;

use cloud_common::{Client, pv_body, start};
use openstack::session::{ServiceType, Session};
use serde_json::Value;

/// Heat through the osauth session (version discovery off: Heat's catalog URL already ends in
/// `/v1/{project_id}`; the `openstack` crate has no orchestration module of its own).
#[derive(Clone, Copy, Debug)]
struct Orchestration;
impl ServiceType for Orchestration {
    fn catalog_type(&self) -> &'static str {
        "orchestration"
    }
    fn version_discovery_supported(&self) -> bool {
        false
    }
}

/// Loads the `testbed` entry of an explicit clouds.yaml into an osauth session.
async fn session_from_file(path: &std::path::Path) -> Session {
    let v: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cfg: osauth::CloudConfig = serde_json::from_value(v["clouds"]["testbed"].clone()).unwrap();
    cfg.create_session().await.unwrap()
}

#[tokio::test]
async fn openstack_crate_lists_servers_ports_volumes_from_clouds_yaml() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let id = c.create_stack(pv_body("pv", 2)).await;
    assert_eq!(c.wait("pv", &id).await["stack_status"], "CREATE_COMPLETE");

    let sess = session_from_file(tb.clouds_yaml()).await;
    let os = openstack::Cloud::from(sess.clone());
    let servers = os.find_servers().detailed().all().await.unwrap();
    assert_eq!(servers.len(), 4);
    for s in &servers {
        assert_eq!(s.status(), openstack::compute::ServerStatus::Active);
        let addrs: Vec<_> = s.addresses().values().flatten().collect();
        assert_eq!(addrs.len(), 1);
        assert!(addrs[0].addr.to_string().starts_with("10.231.0."));
    }
    let summaries = os.list_servers().await.unwrap();
    assert_eq!(summaries.len(), 4);
    let ports = os.list_ports().await.unwrap();
    assert_eq!(ports.len(), 5, "4 server ports + the VIP port");
    let storage = servers
        .iter()
        .find(|s| s.name() == "storage_server")
        .unwrap();
    let sp = os
        .find_ports()
        .with_device_id(storage.id().clone())
        .all()
        .await
        .unwrap();
    assert_eq!(sp.len(), 1);
    let vols = os.list_volumes().await.unwrap();
    assert_eq!(vols.len(), 1);
    assert_eq!(vols[0].attachments()[0].server_id, *storage.id());
    let one = os.get_volume(vols[0].id()).await.unwrap();
    assert_eq!(one.size(), 5);

    // Raw Heat calls through the same session.
    let res: Value = sess
        .get(Orchestration, ["stacks", "pv", id.as_str(), "resources"])
        .query(&[("nested_depth", "2")])
        .fetch()
        .await
        .unwrap();
    assert_eq!(
        res["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["resource_type"] == "OS::Nova::Server")
            .count(),
        4
    );
    let st: Value = sess
        .get_json(Orchestration, ["stacks", "pv"])
        .await
        .unwrap();
    assert_eq!(
        st["stack"]["stack_status"], "CREATE_COMPLETE",
        "redirect followed"
    );
    // PATCH /stacks/{name} is answered with a 302 (as Heat's stack_lookup does); reqwest re-sends
    // the PATCH with its body to /stacks/{name}/{id}, so the update happens.
    tb.cloud().reset_request_counts();
    sess.request(Orchestration, reqwest::Method::PATCH, ["stacks", "pv"])
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let counts = tb.cloud().request_counts();
    let heat = &counts["orchestration"];
    assert_eq!(heat["PATCH /heat-api/v1/{project}/stacks/pv"], 1);
    assert_eq!(
        heat["PATCH /heat-api/v1/{project}/stacks/pv/{id}"], 1,
        "{heat:?}"
    );
    assert_eq!(c.wait("pv", &id).await["stack_status"], "UPDATE_COMPLETE");
    let missing = sess
        .get_json::<_, _, Value>(Orchestration, ["stacks", "nope"])
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), openstack::ErrorKind::ResourceNotFound);
    tb.shutdown().await;
}
