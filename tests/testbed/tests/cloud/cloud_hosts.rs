//! The cloud with real hosts (needs root and the host packages; ignored unless
//! `--include-ignored`): the pv-k8s-cluster BaseHOT comes up as SSH hosts at their port IPs, the
//! storage server sees /dev/vdb, and delete leaves nothing behind.

use crate::cloud_common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use cloud_common::{Client, pv_nfv, servers};
use serde_json::{Value, json};
use testbed::cloud::{CloudOptions, Testbed};

const PREFIX: &str = "tbc";
const SUBNET: &str = "10.231.50.0/24";

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

fn ssh(ip: &str, cmd: &str) -> std::process::Output {
    std::process::Command::new("sshpass")
        .args([
            "-p",
            "ubuntu",
            "ssh",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args([
            "-o",
            "ConnectTimeout=5",
            "-o",
            "LogLevel=ERROR",
            &format!("ubuntu@{ip}"),
            cmd,
        ])
        .output()
        .unwrap()
}

fn pv_fixture_body(name: &str) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/packages/pv-k8s-cluster/BaseHOT/simple");
    if !root.join("pv_k8s_cluster_top.hot.yaml").exists() {
        return cloud_common::pv_body(name, 2);
    }
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    json!({"stack_name": name, "template": read("pv_k8s_cluster_top.hot.yaml"),
           "files": {"masterNode.yaml": read("nested/masterNode.yaml"), "workerNode.yaml": read("nested/workerNode.yaml")},
           "parameters": {"nfv": pv_nfv(2)}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root"]
async fn pv_stack_servers_are_ssh_hosts_with_volumes() {
    let _ = testbed::hosts::down_all(PREFIX).await;
    let _cleanup = Cleanup;
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("testbed-cloud-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = testbed::cloud::farm::start_farm(dir.path(), PREFIX, SUBNET)
        .await
        .expect("farm");
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = SUBNET.into();
    opts.farm = Some(farm);
    let tb = Testbed::start(opts).await.unwrap();
    let c = Client::login(&tb).await;

    let t = Instant::now();
    let id = c.create_stack(pv_fixture_body("pv")).await;
    let s = c.wait("pv", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    eprintln!("4 hosts up in {:?}", t.elapsed());

    let res = c.resources("pv", &id, 2).await;
    let srv = servers(&res);
    assert_eq!(srv.len(), 4);
    let hosts = tb.cloud().hosts();
    for (name, sid, _) in &srv {
        let (_, v) = c.get(&format!("/compute/v2.1/servers/{sid}")).await;
        assert_eq!(v["server"]["status"], "ACTIVE");
        let (_, p) = c.get(&format!("/network/v2.0/ports?device_id={sid}")).await;
        let ip = p["ports"][0]["fixed_ips"][0]["ip_address"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(ip.parse::<Ipv4Addr>().unwrap().octets()[..3] == [10, 231, 50]);
        assert_eq!(
            hosts
                .iter()
                .find(|h| h.server_id == *sid)
                .unwrap()
                .ip
                .as_deref(),
            Some(ip.as_str())
        );
        let o = ssh(&ip, "sudo -n true");
        assert!(
            o.status.success(),
            "{name} {ip}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        if name == "storage_server" {
            let o = ssh(&ip, "test -b /dev/vdb && echo yes");
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                "yes",
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }

    // Heal the storage server: new host at the same IP, same volume. Heat creates the
    // replacement before it deletes the server, so the server is stopped and the volume
    // detached first (as vnfkeeper's HEAL does).
    let storage = srv
        .iter()
        .find(|s| s.0 == "storage_server")
        .unwrap()
        .1
        .clone();
    let (_, p) = c
        .get(&format!("/network/v2.0/ports?device_id={storage}"))
        .await;
    let ip = p["ports"][0]["fixed_ips"][0]["ip_address"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ssh(&ip, "sudo -n sh -c 'mkfs.ext4 -q /dev/vdb && mkdir -p /mnt/d && mount /dev/vdb /mnt/d && echo kept > /mnt/d/f && umount /mnt/d'").status.success());
    let (st, _) = c
        .req(
            reqwest::Method::POST,
            &format!("/compute/v2.1/servers/{storage}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert_eq!(st, 202);
    let t = Instant::now();
    loop {
        let (_, v) = c.get(&format!("/compute/v2.1/servers/{storage}")).await;
        if v["server"]["status"] == "SHUTOFF" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "not stopped: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, v) = c
        .get(&format!(
            "/compute/v2.1/servers/{storage}/os-volume_attachments"
        ))
        .await;
    let volume = v["volumeAttachments"][0]["volumeId"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, v) = c
        .req(
            reqwest::Method::DELETE,
            &format!("/compute/v2.1/servers/{storage}/os-volume_attachments/{volume}"),
            None,
        )
        .await;
    assert_eq!(st, 202, "{v}");
    let top = c.heat(&format!("/stacks/pv/{id}"));
    let (st, _) = c
        .req(
            reqwest::Method::PATCH,
            &format!("{top}/resources/storage_server"),
            Some(json!({"mark_unhealthy": true})),
        )
        .await;
    assert_eq!(st, 200);
    let t = Instant::now();
    let (st, _) = c.req(reqwest::Method::PATCH, &top, Some(json!({}))).await;
    assert_eq!(st, 202);
    loop {
        let (_, v) = c.get(&top).await;
        if !v["stack"]["stack_status"]
            .as_str()
            .unwrap()
            .ends_with("IN_PROGRESS")
        {
            assert_eq!(v["stack"]["stack_status"], "UPDATE_COMPLETE", "{v}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "heal did not finish in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("storage server healed in {:?}", t.elapsed());
    let res2 = c.resources("pv", &id, 2).await;
    let storage2 = servers(&res2)
        .into_iter()
        .find(|s| s.0 == "storage_server")
        .unwrap()
        .1;
    assert_ne!(storage, storage2);
    let o = ssh(
        &ip,
        "sudo -n sh -c 'mkdir -p /mnt/d && mount /dev/vdb /mnt/d && cat /mnt/d/f; umount /mnt/d'",
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "kept",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Fault injection through the farm: sshd stopped → connection refused; started again → ok.
    tb.cloud().inject_stop_sshd(&storage2).await.unwrap();
    assert!(!ssh(&ip, "true").status.success());
    tb.cloud().inject_start_sshd(&storage2).await.unwrap();
    assert!(ssh(&ip, "true").status.success());

    // Host key rotation and hanging commands through the HTTP fault API.
    let http = reqwest::Client::new();
    let old_key = tb
        .cloud()
        .hosts()
        .into_iter()
        .find(|h| h.server_id == storage2)
        .unwrap()
        .host_key
        .unwrap();
    let v: Value = http
        .post(format!(
            "{}/testbed/servers/{storage2}/rotate-host-key",
            c.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let new_key = v["host_key"].as_str().unwrap().to_string();
    assert_ne!(new_key, old_key);
    assert_eq!(
        tb.cloud()
            .hosts()
            .into_iter()
            .find(|h| h.server_id == storage2)
            .unwrap()
            .host_key,
        Some(new_key)
    );
    let r = http
        .post(format!("{}/testbed/servers/{storage2}/hang", c.base))
        .json(&json!({"hang": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let hung = std::process::Command::new("timeout")
        .args([
            "3",
            "sshpass",
            "-p",
            "ubuntu",
            "ssh",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args(["-o", "LogLevel=ERROR", &format!("ubuntu@{ip}"), "true"])
        .status()
        .unwrap();
    assert_eq!(
        hung.code(),
        Some(124),
        "command hung until timeout(1) killed it"
    );
    tb.cloud().inject_hang(&storage2, false).await.unwrap();
    assert!(ssh(&ip, "true").status.success());

    // A worker deleted behind Heat's back: Nova 404, host gone, Heat still lists the old id;
    // mark unhealthy + update brings a new server (and host) at the same port address.
    let (_, worker, worker_stack) = srv.iter().find(|s| s.0 == "workerNode").unwrap().clone();
    let r = http
        .post(format!("{}/testbed/servers/{worker}/vanish", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        c.get(&format!("/compute/v2.1/servers/{worker}")).await.0,
        404
    );
    let farm_ids: Vec<String> = tb
        .cloud()
        .farm_hosts()
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["server_id"].as_str().unwrap().to_string())
        .collect();
    assert!(!farm_ids.contains(&worker));
    assert!(
        servers(&c.resources("pv", &id, 2).await)
            .iter()
            .any(|s| s.1 == worker)
    );
    mark_and_update(&c, &worker_stack, "workerNode", &top, &id).await;
    let fresh = servers(&c.resources("pv", &id, 2).await);
    assert!(!fresh.iter().any(|s| s.1 == worker));
    let replacement = fresh
        .iter()
        .find(|s| s.2 == worker_stack)
        .unwrap()
        .1
        .clone();
    let (_, p) = c
        .get(&format!("/network/v2.0/ports?device_id={replacement}"))
        .await;
    let wip = p["ports"][0]["fixed_ips"][0]["ip_address"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ssh(&wip, "sudo -n true").status.success());

    // ERROR injection stops the host.
    tb.cloud()
        .inject_server_error(&replacement, "hypervisor lost")
        .await
        .unwrap();
    let (_, v) = c.get(&format!("/compute/v2.1/servers/{replacement}")).await;
    assert_eq!(v["server"]["status"], "ERROR");
    assert!(!ssh(&wip, "true").status.success());

    let t = Instant::now();
    let (st, _) = c.req(reqwest::Method::DELETE, &top, None).await;
    assert_eq!(st, 204);
    assert_eq!(c.wait("pv", &id).await["stack_status"], "DELETE_COMPLETE");
    eprintln!("deleted in {:?}", t.elapsed());
    assert_eq!(tb.cloud().record_counts(), (0, 0, 0));
    assert_eq!(tb.cloud().farm_hosts(), json!([]));
    tokio::time::sleep(Duration::from_millis(10)).await;
    tb.shutdown().await;
}

async fn mark_and_update(c: &Client, stack_href: &str, res: &str, top: &str, id: &str) {
    let (st, _) = c
        .req(
            reqwest::Method::PATCH,
            &format!("{stack_href}/resources/{res}"),
            Some(json!({"mark_unhealthy": true})),
        )
        .await;
    assert_eq!(st, 200);
    let (st, _) = c.req(reqwest::Method::PATCH, top, Some(json!({}))).await;
    assert_eq!(st, 202);
    assert_eq!(c.wait("pv", id).await["stack_status"], "UPDATE_COMPLETE");
}
