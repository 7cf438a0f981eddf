//! `packaging/pacemaker/vnfkeeper-shard.pcs` against Pacemaker's own tools: the script writes a
//! shard's group into a CIB file with the real `pcs`, `crm_verify` accepts the configuration,
//! and Pacemaker's scheduler (`crm_simulate`) starts the group's members in order on one node,
//! blocks the start without quorum, and on the loss of that node fences it before the group
//! starts on another node.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::repo_root;

fn run(cmd: &mut Command) -> (bool, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
    )
}

fn script(cib: &Path, shard: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg(repo_root().join("packaging/pacemaker/vnfkeeper-shard.pcs"))
        .env("CIB", cib)
        .env("SHARD", shard)
        .env("DEVICE", "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4")
        .env("VIP", "192.0.2.10")
        .env("FENCE", "openstack")
        .env("FENCE_CLOUD", "infra")
        .env("FENCE_HOST_MAP", "n1:vm-n1;n2:vm-n2;n3:vm-n3");
    c
}

/// `crm_simulate` of `cib` with `args`; its output (the transition summary and actions).
fn simulate(cib: &Path, args: &[&str]) -> String {
    let (ok, out) = run(Command::new("crm_simulate")
        .arg("-x")
        .arg(cib)
        .arg("-S")
        .args(args));
    assert!(ok, "{out}");
    out
}

/// The node of `* Start <resource> ( <node> )` in a transition summary.
fn start_node<'a>(summary: &'a str, resource: &str) -> Option<&'a str> {
    summary.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("* Start")?.trim_start();
        let rest = rest.strip_prefix(resource)?.trim_start();
        let node = rest.strip_prefix('(')?.split(')').next()?.trim();
        Some(node)
    })
}

#[test]
#[ignore = "needs pcs, pacemaker-cli-utils, resource-agents and fence-agents (scripts/test installs them)"]
fn the_pcs_script_builds_a_group_pacemaker_verifies_fences_and_moves() {
    let dir = tempfile::tempdir().unwrap();
    let cib = dir.path().join("cib.xml");
    let (ok, empty) = run(Command::new("cibadmin").arg("--empty"));
    assert!(ok, "{empty}");
    std::fs::write(&cib, empty).unwrap();

    let (ok, out) = run(&mut script(&cib, "edge-1"));
    assert!(ok, "{out}");
    let (ok, out) = run(Command::new("crm_verify")
        .arg("--xml-file")
        .arg(&cib)
        .arg("-V"));
    assert!(ok, "crm_verify: {out}");
    let xml = std::fs::read_to_string(&cib).unwrap();
    // One element (line) each, whatever the attributes' order.
    let has = |parts: &[&str]| xml.lines().any(|l| parts.iter().all(|p| l.contains(p)));
    for parts in [
        &[r#"name="no-quorum-policy""#, r#"value="stop""#][..],
        &[r#"name="stonith-enabled""#, r#"value="true""#],
        &[
            r#"id="fence-openstack""#,
            r#"class="stonith""#,
            r#"type="fence_openstack""#,
        ],
        &[
            r#"id="daemon-edge-1""#,
            r#"class="systemd""#,
            r#"type="vnfkeeper@edge-1""#,
        ],
        &[r#"name="directory""#, r#"value="/srv/vnfkeeper/edge-1""#],
        &[r#"name="migration-threshold""#, r#"value="1""#],
    ] {
        assert!(has(parts), "{parts:?} not in\n{xml}");
    }
    let group = xml
        .find(r#"<group id="vnfkeeper-edge-1""#)
        .expect("the group");
    let pos = |id: &str| xml[group..].find(&format!(r#"id="{id}""#)).expect(id);
    assert!(pos("fs-edge-1") < pos("vip-edge-1") && pos("vip-edge-1") < pos("daemon-edge-1"));

    // Without quorum nothing of the group starts (no-quorum-policy=stop).
    let blocked = simulate(&cib, &["-q", "false", "-u", "n1", "-u", "n2", "-u", "n3"]);
    for r in ["fs-edge-1", "vip-edge-1", "daemon-edge-1"] {
        assert!(
            blocked
                .lines()
                .any(|l| l.contains(r) && l.contains("due to no quorum (blocked)")),
            "{blocked}"
        );
    }

    // With quorum the group starts on one node, members in order.
    let up = dir.path().join("up.xml");
    let started = simulate(
        &cib,
        &[
            "-q",
            "true",
            "-u",
            "n1",
            "-u",
            "n2",
            "-u",
            "n3",
            "-O",
            up.to_str().unwrap(),
        ],
    );
    let node = start_node(&started, "fs-edge-1").unwrap_or_else(|| panic!("{started}"));
    assert_eq!(start_node(&started, "vip-edge-1"), Some(node), "{started}");
    assert_eq!(
        start_node(&started, "daemon-edge-1"),
        Some(node),
        "{started}"
    );

    // That node is lost: fenced first, then the group starts on another node, in order.
    let lost = simulate(&up, &["-q", "true", "-f", node]);
    let line = |needle: &str| {
        lost.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in\n{lost}"))
    };
    let fenced = line(&format!("Fencing {node}"));
    let starts: Vec<(usize, &str)> = ["fs-edge-1", "vip-edge-1", "daemon-edge-1"]
        .iter()
        .map(|r| {
            let i = lost
                .lines()
                .position(|l| {
                    l.contains("Resource action:") && l.contains(r) && l.contains(" start on ")
                })
                .unwrap_or_else(|| panic!("{r} not started in\n{lost}"));
            let to = lost.lines().nth(i).unwrap().rsplit(' ').next().unwrap();
            (i, to)
        })
        .collect();
    assert!(fenced < starts[0].0, "{lost}");
    assert!(
        starts[0].0 < starts[1].0 && starts[1].0 < starts[2].0,
        "{lost}"
    );
    let to = starts[0].1;
    assert_ne!(to, node);
    assert!(starts.iter().all(|(_, n)| *n == to), "{lost}");

    // A name that is not a shard name is refused before pcs runs.
    let (ok, out) = run(&mut script(&cib, "Edge_1"));
    assert!(!ok && out.contains("invalid SHARD"), "{out}");
}

/// The OCF agent `packaging/pacemaker/vnfkeeper.ocf` through resource-agents' own `ocf-tester`
/// (meta-data against the OCF API, validate-all, monitor of a stopped resource, start, monitor,
/// a second start and stop, stop): with a real daemon, whose metrics endpoint the monitor asks.
/// Then a daemon that answers no more (SIGSTOP) fails the monitor although its process exists.
#[test]
#[ignore = "needs resource-agents (ocf-tester) and python3 (scripts/test installs them)"]
fn the_ocf_agent_passes_ocf_tester_and_its_monitor_asks_the_daemon() {
    let install = crate::support::Install::new();
    let port = crate::support::free_port();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    std::fs::write(&install.config, text).unwrap();
    let rsctmp = install.dir.path().join("rsctmp");
    let agent = repo_root().join("packaging/pacemaker/vnfkeeper.ocf");
    let params = [
        format!("config={}", install.config.display()),
        format!("metrics_url=http://127.0.0.1:{port}/metrics"),
        "user=root".to_owned(),
        format!("binary={}", env!("CARGO_BIN_EXE_vnfkeeper")),
        format!(
            "logfile={}",
            install.dir.path().join("daemon.log").display()
        ),
    ];
    let mut tester = Command::new("ocf-tester");
    tester.env("HA_RSCTMP", &rsctmp).arg("-n").arg("daemon-t");
    for p in &params {
        tester.arg("-o").arg(p);
    }
    let (ok, out) = run(tester.arg(&agent));
    assert!(ok, "{out}");
    assert!(out.contains("passed all tests"), "{out}");

    // The agent by hand: start (returns after READY=1), monitor 0, SIGSTOP, monitor 1 (OCF_ERR_GENERIC
    // with the reason), SIGCONT, stop.
    let action = |what: &str| {
        let mut c = Command::new(&agent);
        c.arg(what)
            .env("OCF_ROOT", "/usr/lib/ocf")
            .env("OCF_RESOURCE_INSTANCE", "daemon-t")
            .env("HA_RSCTMP", &rsctmp);
        for p in &params {
            let (k, v) = p.split_once('=').unwrap();
            c.env(format!("OCF_RESKEY_{k}"), v);
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    };
    /// Stops the agent's daemon at the end, also when an assertion failed.
    struct StopAtEnd<F: Fn()>(F);
    impl<F: Fn()> Drop for StopAtEnd<F> {
        fn drop(&mut self) {
            (self.0)();
        }
    }
    let _stop = StopAtEnd(|| {
        let _ = action("stop");
    });
    let (rc, out) = action("start");
    assert_eq!(rc, Some(0), "{out}");
    let pid = std::fs::read_to_string(rsctmp.join("vnfkeeper-daemon-t.pid")).unwrap();
    let pid = pid.trim().to_owned();
    assert_eq!(action("monitor").0, Some(0));
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (rc, out) = action("monitor");
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    assert_eq!(rc, Some(1), "a stopped daemon must fail the monitor: {out}");
    assert!(out.contains("does not answer"), "{out}");
    let (rc, out) = action("stop");
    assert_eq!(rc, Some(0), "{out}");
    assert_eq!(action("monitor").0, Some(7), "after stop: not running");
    // Gone, or a zombie its parent (here whoever adopted it) has not reaped yet.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = state.rsplit_once(") ").map(|(_, r)| &r[..1]);
    assert!(
        matches!(state, None | Some("Z")),
        "daemon {pid} still runs: {state:?}"
    );
}
