//! Hosts die with the harness process (SIGKILL, no Drop), and `down_all` removes the rest.

use crate::hosts_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hosts_common::*;
use testbed::hosts::{FarmConfig, HostFarm, HostInfo, VolumeSpec, down_all};

const CHILD_ENV: &str = "TESTBED_HOSTS_CRASH_CHILD";

/// Compile-time check: the farm is shareable and its futures can be spawned on any runtime thread.
#[allow(dead_code)]
fn farm_is_send_sync(f: &HostFarm, s: testbed::hosts::HostSpec) {
    fn send<T: Send>(_: T) {}
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(f);
    send(f.start(s));
    send(f.stop(""));
    send(f.shutdown());
    send(f.rotate_host_key(""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_die_with_the_harness() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        // child: start a farm with one host (with a volume) and wait to be killed
        let cfg = FarmConfig {
            state_dir: dir.into(),
            prefix: "tbt7".into(),
            bridge_cidr: "10.231.7.1/24".parse().unwrap(),
        };
        let farm = HostFarm::new(cfg).await.unwrap();
        let vols = vec![VolumeSpec {
            volume_id: "v".into(),
            device: "/dev/vdb".into(),
            size_gib: 1,
        }];
        let HostInfo { ip, .. } = farm
            .start(spec("s", "crash", "10.231.7.71".parse().unwrap(), vols))
            .await
            .unwrap();
        println!("READY {ip}");
        tokio::time::sleep(Duration::from_secs(120)).await;
        return;
    }
    testbed::hosts::setup_packages().await.unwrap();
    let _ = down_all("tbt7").await;
    let dir = tempfile::Builder::new()
        .prefix("testbed-tbt7-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hosts_crash::hosts_die_with_the_harness",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("READY ") => break l,
            Some(_) => continue,
            None => panic!("child exited before its host was ready"),
        }
    };
    assert!(ready.contains("10.231.7.71"));
    assert!(!stdout(&sh("ip netns pids tbt7-h1")).trim().is_empty());
    child.kill().unwrap(); // SIGKILL: no Drop, no shutdown
    child.wait().unwrap();
    let t = Instant::now();
    while !stdout(&sh("ip netns pids tbt7-h1")).trim().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "host processes outlived the harness"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // network, loop device and namespace are left for down_all
    let rep = down_all("tbt7").await.unwrap();
    assert!(rep.errors.is_empty(), "{rep:?}");
    assert_eq!(rep.netns, vec!["tbt7-h1".to_string()]);
    assert_eq!(rep.loop_devices.len(), 1, "{rep:?}");
    assert_nothing_left("tbt7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_farm_drop_cleans_up() {
    testbed::hosts::setup_packages().await.unwrap();
    let _ = down_all("tbt10").await;
    let dir = tempfile::Builder::new()
        .prefix("testbed-tbt10-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let cfg = FarmConfig {
        state_dir: dir.path().into(),
        prefix: "tbt10".into(),
        bridge_cidr: "10.231.10.1/24".parse().unwrap(),
    };
    let farm = HostFarm::new(cfg).await.unwrap();
    let vols = vec![VolumeSpec {
        volume_id: "v".into(),
        device: "/dev/vdc".into(),
        size_gib: 2,
    }];
    farm.start(spec("s", "dropme", "10.231.10.5".parse().unwrap(), vols))
        .await
        .unwrap();
    let pid = farm.hosts()[0].pid.unwrap();
    drop(farm); // no shutdown: Drop tears down synchronously
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "host init survived Drop"
    );
    assert_nothing_left("tbt10");
    let rep = down_all("tbt10").await.unwrap();
    assert!(rep.is_empty(), "{rep:?}");
}
