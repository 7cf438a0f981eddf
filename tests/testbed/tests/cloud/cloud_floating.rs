//! Floating IPs with real hosts (needs root): a server whose port has an
//! `OS::Neutron::FloatingIP` (the shape of Tacker's `masterNode_FloatingIP`) is reachable with
//! the real OpenSSH client at the floating address, through the farm's router (the host sees
//! the router as the client); Neutron lists the floating IP in its own shape, Heat's attribute
//! and Nova's `addresses` show it; deleting the stack releases it and the address answers no
//! more.

use crate::cloud_common::Client;

use std::sync::Arc;

use serde_json::json;
use testbed::cloud::farm::FarmBackend;
use testbed::cloud::{CloudOptions, Testbed};
use testbed::hosts::{FarmConfig, HostFarm};

const PREFIX: &str = "tbfip";
const SUBNET: &str = "10.231.62.0/24";

/// Removes everything with our prefix when dropped (also on panic).
struct Cleanup;
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::thread::spawn(|| {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let _ = testbed::hosts::down_all(PREFIX).await;
            })
        })
        .join();
    }
}

/// `hostname` over the real ssh client as `ubuntu` at `ip`; `None` when it fails.
fn ssh_hostname(ip: &str) -> Option<String> {
    let o = std::process::Command::new("sshpass")
        .args(["-p", "ubuntu", "ssh", "-o", "StrictHostKeyChecking=no"])
        .args([
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=5",
        ])
        .args(["-o", "LogLevel=ERROR", &format!("ubuntu@{ip}"), "hostname"])
        .output()
        .unwrap();
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

const TEMPLATE: &str = r#"
heat_template_version: 2013-05-23
resources:
  masterNode:
    type: OS::Nova::Server
    properties:
      name: masterNode
      flavor: m1.small
      image: cirros-0.5.2-x86_64-disk
      networks:
      - port: { get_resource: masterNode_CP1 }
  masterNode_CP1:
    type: OS::Neutron::Port
    properties:
      network: net0
  masterNode_FloatingIP:
    type: OS::Neutron::FloatingIP
    properties:
      floating_network: public
      port_id: { get_resource: masterNode_CP1 }
outputs:
  fip:
    value: { get_attr: [masterNode_FloatingIP, floating_ip_address] }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root"]
async fn a_floating_ip_reaches_its_server_through_the_router() {
    let _ = testbed::hosts::down_all(PREFIX).await;
    let _cleanup = Cleanup;
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("testbed-fip-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = Arc::new(
        HostFarm::new(FarmConfig {
            state_dir: dir.path().join("hosts"),
            prefix: PREFIX.into(),
            bridge_cidr: "10.231.62.1/24".parse().unwrap(),
        })
        .await
        .expect("farm"),
    );
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = SUBNET.into();
    opts.farm = Some(Arc::new(FarmBackend(farm.clone())));
    let tb = Testbed::start(opts).await.unwrap();
    let c = Client::login(&tb).await;

    let id = c
        .create_stack(json!({"stack_name": "fip", "template": TEMPLATE}))
        .await;
    let s = c.wait("fip", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");

    // Neutron's shape, associated with the server's port.
    let (st, l) = c.get("/network/v2.0/floatingips").await;
    assert_eq!(st, 200, "{l}");
    let fips = l["floatingips"].as_array().unwrap();
    assert_eq!(fips.len(), 1, "{l}");
    let f = &fips[0];
    let fip = f["floating_ip_address"].as_str().unwrap().to_string();
    let fixed = f["fixed_ip_address"].as_str().unwrap().to_string();
    assert_ne!(fip, fixed);
    assert_eq!(f["status"], "ACTIVE");
    for k in [
        "id",
        "port_id",
        "floating_network_id",
        "router_id",
        "project_id",
    ] {
        assert!(f[k].is_string(), "{k}: {f}");
    }
    let (_, p) = c
        .get(&format!(
            "/network/v2.0/ports/{}",
            f["port_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(p["port"]["fixed_ips"][0]["ip_address"], fixed.as_str());
    let (_, one) = c
        .get(&format!(
            "/network/v2.0/floatingips/{}",
            f["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(&one["floatingip"], f);
    let (_, filtered) = c
        .get(&format!(
            "/network/v2.0/floatingips?port_id={}",
            f["port_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(filtered["floatingips"].as_array().unwrap().len(), 1);
    // Heat's attribute (the stack output) and Nova's addresses show it.
    let outputs = s["outputs"].as_array().cloned().unwrap_or_default();
    assert!(
        outputs
            .iter()
            .any(|o| o["output_key"] == "fip" && o["output_value"] == fip.as_str()),
        "{s}"
    );
    let server = f["port_id"].as_str().unwrap();
    let (_, port) = c.get(&format!("/network/v2.0/ports/{server}")).await;
    let sid = port["port"]["device_id"].as_str().unwrap().to_string();
    let (_, v) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
    let addrs: Vec<(String, String)> = v["server"]["addresses"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|a| a.as_array().unwrap().clone())
        .map(|a| {
            (
                a["addr"].as_str().unwrap().to_string(),
                a["OS-EXT-IPS:type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        addrs.contains(&(fip.clone(), "floating".into())),
        "{addrs:?}"
    );
    assert!(
        addrs.contains(&(fixed.clone(), "fixed".into())),
        "{addrs:?}"
    );

    // The real ssh client reaches the server at both addresses; the host tells them apart.
    let router = farm.floating_router_ip().to_string();
    let name = ssh_hostname(&fip).expect("ssh through the floating IP");
    assert_eq!(ssh_hostname(&fixed).as_deref(), Some(name.as_str()));
    let clients = farm.client_log(&sid).await.unwrap();
    assert_eq!(clients.len(), 2, "{clients:?}");
    assert_eq!(clients[0], router, "through the floating IP: the router");
    assert_eq!(
        clients[1], "10.231.62.1",
        "at the fixed address: the bridge"
    );

    // Deleting the stack releases the floating IP: listed no more, answering no more.
    let top = c.heat(&format!("/stacks/fip/{id}"));
    let (st, _) = c.req(reqwest::Method::DELETE, &top, None).await;
    assert_eq!(st, 204);
    assert_eq!(c.wait("fip", &id).await["stack_status"], "DELETE_COMPLETE");
    let (_, l) = c.get("/network/v2.0/floatingips").await;
    assert_eq!(l["floatingips"], json!([]));
    assert!(ssh_hostname(&fip).is_none());
    tb.shutdown().await;
    farm.shutdown().await.unwrap();
    assert!(!std::path::Path::new(&format!("/run/netns/{PREFIX}-hfip")).exists());
}
