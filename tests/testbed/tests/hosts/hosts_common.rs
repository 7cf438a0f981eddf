//! Shared helpers for the host farm tests (needs root).
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;

use testbed::hosts::{FarmConfig, HostFarm, HostSpec, VolumeSpec, down_all, root_key_path};

/// A farm with its own prefix and subnet (10.231.N.0/24) that is torn down even on panic.
pub struct Guard {
    pub farm: Arc<HostFarm>,
    pub prefix: String,
    pub subnet: u8,
    pub cfg: FarmConfig,
    /// When false, Drop leaves everything running (crash simulation).
    pub armed: bool,
    _dir: tempfile::TempDir,
}

impl Guard {
    pub async fn new(prefix: &str, subnet: u8) -> Guard {
        testbed::hosts::setup_packages().await.expect("packages");
        let _ = down_all(prefix).await;
        let dir = tempfile::Builder::new()
            .prefix(&format!("testbed-{prefix}-"))
            .tempdir_in("/var/tmp")
            .unwrap();
        let cfg = FarmConfig {
            state_dir: dir.path().to_path_buf(),
            prefix: prefix.to_string(),
            bridge_cidr: format!("10.231.{subnet}.1/24").parse().unwrap(),
        };
        let farm = Arc::new(HostFarm::new(cfg.clone()).await.expect("farm"));
        Guard {
            farm,
            prefix: prefix.into(),
            subnet,
            cfg,
            armed: true,
            _dir: dir,
        }
    }

    pub fn ip(&self, last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, self.subnet, last)
    }

    pub fn key(&self) -> String {
        root_key_path(&self.cfg).to_string_lossy().into_owned()
    }

    /// Shuts down and asserts nothing is left.
    pub async fn finish(self) {
        self.farm.shutdown().await.expect("shutdown");
        assert_nothing_left(&self.prefix);
        let rep = down_all(&self.prefix).await.unwrap();
        assert!(rep.is_empty(), "leftovers after shutdown: {rep:?}");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // runs on panic too: tear down synchronously from a fresh runtime thread
        let prefix = self.prefix.clone();
        let farm = self.farm.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let _ = farm.shutdown().await;
                let _ = down_all(&prefix).await;
            });
        })
        .join();
    }
}

pub fn spec(id: &str, hostname: &str, ip: Ipv4Addr, volumes: Vec<VolumeSpec>) -> HostSpec {
    HostSpec {
        server_id: id.into(),
        hostname: hostname.into(),
        ip,
        cluster: "stack-1".into(),
        volumes,
        profile: testbed::hosts::HostProfile::Debian,
    }
}

pub fn sh(cmd: &str) -> std::process::Output {
    Command::new("sh").arg("-c").arg(cmd).output().unwrap()
}

const SSH_OPTS: &str = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5";

/// `sshpass -p ubuntu ssh ubuntu@IP CMD`; panics unless it succeeds; returns stdout.
pub fn ssh_pw(ip: Ipv4Addr, cmd: &str) -> String {
    let out = ssh_pw_raw(ip, cmd);
    assert!(
        out.status.success(),
        "ssh {ip} {cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn ssh_pw_raw(ip: Ipv4Addr, cmd: &str) -> std::process::Output {
    Command::new("sshpass")
        .args(["-p", "ubuntu", "ssh"])
        .args(SSH_OPTS.split(' '))
        .arg(format!("ubuntu@{ip}"))
        .arg(cmd)
        .output()
        .unwrap()
}

/// Root key login; returns the output whatever the status.
pub fn ssh_root(key: &str, ip: Ipv4Addr, cmd: &str) -> std::process::Output {
    Command::new("ssh")
        .args(["-i", key, "-o", "BatchMode=yes"])
        .args(SSH_OPTS.split(' '))
        .arg(format!("root@{ip}"))
        .arg(cmd)
        .output()
        .unwrap()
}

pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// No namespace, link, loop device or mount with this prefix remains on the machine.
pub fn assert_nothing_left(prefix: &str) {
    let ns = stdout(&sh("ip netns list"));
    assert!(
        !ns.lines().any(|l| l.starts_with(&format!("{prefix}-"))),
        "netns left: {ns}"
    );
    let links = stdout(&sh("ip -o link show"));
    assert!(
        !links.contains(&format!(" {prefix}-")),
        "links left: {links}"
    );
    let loops = stdout(&sh("losetup -l -n -O BACK-FILE"));
    assert!(
        !loops.contains(&format!("/{prefix}-vol-")),
        "loop devices left: {loops}"
    );
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(
        !mounts.contains(&format!("testbed-{prefix}-")),
        "mounts left: {mounts}"
    );
    assert!(
        !mounts.contains(&format!("/run/netns/{prefix}-")),
        "netns mounts left: {mounts}"
    );
}
