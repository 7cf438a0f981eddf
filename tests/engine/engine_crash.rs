//! Crash-resume of the seed's INSTANTIATE at every stage boundary, with Tacker's own
//! `install_k8s_cluster.sh` (tacker 16.0.0's sdist, fetched by `scripts/tacker-samples`,
//! unmodified) as the package's install script, on hosts of the Ubuntu 20.04 profile it is
//! written for (needs root).
//!
//! One operation, walked boundary by boundary: every life of the daemon is armed with
//! `engine-step-done:1` (abort, as SIGKILL would end it, right after the first DONE it journals:
//! one stage boundary), `engine-applied-k8s.install:1` (right after an install script ran on its
//! host, before its DONE: the resumed check must find the node installed) and
//! `engine-applied-storage.filesystem:1` (right after `mkfs`, before its DONE). Each life resumes
//! where the last one ended, so every boundary of the plan is crossed by a restarted daemon;
//! stages of one wave that were still running when a life ended are killed with it and run again.
//! After each life: at most one `kubeadm init` in all, one join per node, `mkfs` at most once on
//! the volume, the join material obtained at most once per start of its stage (a start cut short
//! by a boundary beside it, before its DONE, may have made a token; the material is re-obtained
//! otherwise only when older than 50 minutes, which cannot happen here) and never after its DONE.
//! At the end: COMPLETED with those counts, every
//! node Ready; the proxy (its URL carries a password) reached the script; the cluster's Kubernetes
//! VIM is kept (0600) and shown by `status VNF`; no join token, bearer token, proxy password, cloud
//! password or SSH password reached any life's log, `status VNF`, the database, the accepted copy
//! or any host's command log (remote argv).

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Install, repo_root, wait_until};

const PREFIX: &str = "vkc";
const VNF: &str = "crash-walk-1";
/// Every life is armed with these failpoints; whichever is reached first ends it.
const FAILPOINTS: &str =
    "engine-step-done:1,engine-applied-k8s.install:1,engine-applied-storage.filesystem:1";

fn op_of(install: &Install) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == VNF)
}

/// The stage keys journaled DONE for the VNF's operation (empty before it has a plan).
fn done_keys(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT j.stage_key FROM step_journal j JOIN vnf_lcm_op_occ o
             ON o.id = j.vnf_lcm_op_occ_id
             WHERE o.vnf_instance_id = ?1 AND j.state = 'DONE' ORDER BY j.stage_key",
        )
        .unwrap();
    st.query_map([VNF], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The stored plan's stage keys (empty before the plan is stored).
fn plan_keys(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let plan: Option<String> = conn
        .query_row(
            "SELECT plan FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1",
            [VNF],
            |r| r.get(0),
        )
        .ok()
        .flatten();
    plan.and_then(|p| serde_json::from_str::<Value>(&p).ok())
        .and_then(|p| {
            p["stages"].as_array().map(|s| {
                s.iter()
                    .filter_map(|s| s["key"].as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// A value of the VNF's row or VNFC rows (`None` while there is none).
/// The server ids of every VNFC in the database.
fn all_servers(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT server_id FROM vnfc WHERE server_id IS NOT NULL")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn query(db: &Path, sql: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [VNF], |r| r.get(0)).ok()
}

/// `kubeadm VERB` calls in the cluster's `kubeadm.log` ("HOSTNAME kubeadm VERB" lines), as
/// (hostname, verb).
fn kubeadm_calls(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|l| l.split_once(" kubeadm "))
        .map(|(h, v)| (h.to_owned(), v.to_owned()))
        .collect()
}

/// The journal of the VNF's `k8s.join_material` stage: how often it was started and whether it
/// is journaled DONE (`(0, false)` before it started).
fn join_material_journal(db: &Path) -> (u32, bool) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT j.attempts, j.state = 'DONE' FROM step_journal j JOIN vnf_lcm_op_occ o
         ON o.id = j.vnf_lcm_op_occ_id
         WHERE o.vnf_instance_id = ?1 AND j.stage_key LIKE 'k8s.join_material@%'",
        [VNF],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap_or((0, false))
}

/// The join material's share of the `kubeadm token create` calls, across lives. Each start of
/// the `k8s.join_material` stage may run its apply once: a start cut short before its DONE (the
/// life ended at another stage's boundary in the same wave while the apply ran; the next life's
/// check finds no material and applies again) may leave one more token behind, so the calls are
/// bounded by the starts, not by one. Once the stage is journaled DONE it is never started again
/// and no token is made any more.
#[derive(Debug, Default)]
struct JoinMaterialCount {
    /// `token create` calls and starts when the stage was first seen DONE after a life.
    at_done: Option<(usize, u32)>,
}

impl JoinMaterialCount {
    /// Checks one life: `calls` are all kubeadm calls so far, `inits` of them `kubeadm init`
    /// (the install script makes one token right after its init), `journal` is
    /// [`join_material_journal`]. Panics naming the life.
    fn check(&mut self, life: usize, calls: &[(String, String)], journal: (u32, bool)) {
        let (attempts, done) = journal;
        let count = |verb: &str| calls.iter().filter(|(_, v)| v == verb).count();
        let tokens = count("token create");
        assert!(
            tokens <= count("init") + attempts as usize,
            "life {life}: join material obtained more often than its stage started \
             ({attempts} starts): {calls:?}"
        );
        if let Some((tokens_then, attempts_then)) = self.at_done {
            assert!(
                done && attempts == attempts_then,
                "life {life}: k8s.join_material started again after its DONE \
                 ({attempts_then} starts then, {attempts} now, DONE {done})"
            );
            assert_eq!(
                tokens, tokens_then,
                "life {life}: join material obtained again after its stage was DONE: {calls:?}"
            );
        } else if done {
            self.at_done = Some((tokens, attempts));
        }
    }
}

/// The counts that must never exceed one (kubeadm init in all, a join per host) and `mkfs` on
/// the volume at most once; panics naming the life.
fn check_at_most_once(life: usize, calls: &[(String, String)], mkfs: usize) {
    let count = |verb: &str| calls.iter().filter(|(_, v)| v == verb).count();
    assert!(
        count("init") <= 1,
        "life {life}: kubeadm init twice: {calls:?}"
    );
    let mut joins: Vec<&str> = calls
        .iter()
        .filter(|(_, v)| v == "join")
        .map(|(h, _)| h.as_str())
        .collect();
    let all = joins.len();
    joins.sort_unstable();
    joins.dedup();
    assert_eq!(
        joins.len(),
        all,
        "life {life}: a node joined twice: {calls:?}"
    );
    assert!(mkfs <= 1, "life {life}: mkfs ran {mkfs} times");
}

/// The join material check lets a token through for each start cut short before its DONE and
/// none after the DONE: it fails on the material obtained twice under one start, and on a
/// re-apply after the DONE (a stage run again after DONE is what crash-resume must never do).
#[test]
fn join_material_count_fails_on_a_reapply_after_done() {
    let call = |v: &str| ("master10".to_owned(), v.to_owned());
    let script = vec![
        call("init"),
        call("token create"),
        call("init phase upload-certs"),
    ];
    let once = [
        script.clone(),
        vec![call("token create"), call("init phase upload-certs")],
    ]
    .concat();
    let twice = [
        once.clone(),
        vec![call("token create"), call("init phase upload-certs")],
    ]
    .concat();
    let fails = |f: &dyn Fn()| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    };
    // Started once and DONE, material obtained once: holds over later lives.
    let mut c = JoinMaterialCount::default();
    c.check(1, &once, (1, true));
    c.check(2, &once, (1, true));
    // A first start cut short after it made a token, the second DONE: two tokens pass.
    let mut c = JoinMaterialCount::default();
    c.check(1, &once, (1, false));
    c.check(2, &twice, (2, true));
    c.check(3, &twice, (2, true));
    // Two tokens under one start fail.
    let msg = fails(&|| JoinMaterialCount::default().check(1, &twice, (1, true)));
    assert!(msg.contains("more often than its stage started"), "{msg:?}");
    // A re-apply after the DONE fails, even when earlier cut-short starts left room for a token.
    let msg = fails(&|| {
        let mut c = JoinMaterialCount::default();
        c.check(1, &script, (2, true));
        c.check(2, &once, (2, true));
    });
    assert!(
        msg.contains("obtained again after its stage was DONE"),
        "{msg:?}"
    );
    let msg = fails(&|| {
        let mut c = JoinMaterialCount::default();
        c.check(1, &once, (1, true));
        c.check(2, &twice, (2, true));
    });
    assert!(msg.contains("started again after its DONE"), "{msg:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn abort_at_every_stage_boundary_with_tackers_script_converges_with_one_init() {
    let dir = tempfile::Builder::new()
        .prefix("vk-crash-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 64, dir.path()).await;
    // The package's image carries a real Ubuntu cloud image's Glance properties, so its servers
    // are hosts of the Ubuntu 20.04 profile Tacker's script is written for.
    tb.cloud().set_image_properties(
        "ubuntu-20.04-server-cloudimg-amd64",
        testbed::hosts::HostProfile::Ubuntu2004.image_properties(),
    );

    // The seed package with Tacker's script in place of the fixture's stand-in.
    let samples = Command::new(repo_root().join("scripts/tacker-samples"))
        .output()
        .unwrap();
    assert!(
        samples.status.success(),
        "scripts/tacker-samples (needs PyPI the first time): {}",
        String::from_utf8_lossy(&samples.stderr)
    );
    let samples = String::from_utf8(samples.stdout).unwrap();
    let script =
        Path::new(samples.trim()).join("samples/mgmt_driver/kubernetes/install_k8s_cluster.sh");
    let packages = dir.path().join("packages");
    let package = packages.join("fixtures/packages/pv-k8s-cluster");
    std::fs::create_dir_all(package.parent().unwrap()).unwrap();
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(repo_root().join("fixtures/packages/pv-k8s-cluster"))
            .arg(&package)
            .status()
            .unwrap()
            .success()
    );
    std::fs::copy(&script, package.join("Scripts/install_k8s_cluster.sh")).unwrap();

    let install = Install::with_packages_dir(false);
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "packages_dir = \"{}\"\n\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n",
        packages.display(),
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();

    // The seed's request with a proxy whose URL carries a password of this run.
    let proxy_password = format!("vkproxy{}", uuid::Uuid::new_v4().simple());
    let http_proxy = format!("http://vkuser:{proxy_password}@10.231.64.1:3128");
    let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["vnfInstanceId"] = VNF.into();
    env["requestId"] = VNF.into();
    env["request"]["additionalParams"]["k8s_cluster_installation_param"]["proxy"] = serde_json::json!({
        "http_proxy": http_proxy,
        "https_proxy": http_proxy,
        "no_proxy": "10.231.64.0/24,127.0.0.1",
    });
    install.drop_file("instantiate.json", &serde_json::to_vec(&env).unwrap());

    // The walk: one life per boundary until a life completes the operation.
    let t = Instant::now();
    let mut logs = String::new();
    let mut lives: Vec<(String, Vec<String>)> = Vec::new();
    let mut done_before: Vec<String> = Vec::new();
    // After each life: how many installs (`kubeadm init` or `join`) and `mkfs` ran on the hosts
    // so far, and how many `k8s.install` and `storage.filesystem` stages were journaled DONE.
    let mut ran: Vec<(usize, usize)> = Vec::new();
    let mut journaled: Vec<(usize, usize)> = Vec::new();
    let mut join_material = JoinMaterialCount::default();
    // After each life: starts of `k8s.join_material` and `kubeadm token create` calls so far.
    let mut obtained: Vec<(u32, usize)> = Vec::new();
    let completed = loop {
        let life = lives.len() + 1;
        assert!(life <= 100, "no end after 99 lives: {lives:?}");
        let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", FAILPOINTS)]);
        let ended = wait_until(Duration::from_secs(600), || {
            !daemon.is_running()
                || op_of(&install).is_some_and(|o| {
                    o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
                })
        });
        let log = daemon.log_text();
        drop(daemon);
        logs.push_str(&log);
        let state = op_of(&install).map(|o| o["operationState"].clone());
        assert!(
            ended && state != Some("FAILED_TEMP".into()),
            "life {life}: {state:?}\n{log}"
        );
        let done = done_keys(&install.database);
        let new: Vec<String> = done
            .iter()
            .filter(|k| !done_before.contains(k))
            .cloned()
            .collect();
        done_before = done;
        // An apply whose daemon died runs on, on its host, holding the host's step lock (sudo:
        // root's): the hosts are counted once every such apply of this life has ended.
        for server in all_servers(&install.database) {
            if let Ok(out) = farm
                .exec(&server, "flock /run/vnfkeeper-step.lock true")
                .await
            {
                assert!(out.status.success(), "life {life}: {server}: {out:?}");
            }
        }
        // Counted on the hosts after every life.
        let stack_id = query(
            &install.database,
            "SELECT stack_id FROM vnf_instance WHERE id = ?1",
        );
        let calls = stack_id
            .as_deref()
            .and_then(|s| std::fs::read_to_string(farm.kube(s).dir().join("kubeadm.log")).ok())
            .map(|l| kubeadm_calls(&l))
            .unwrap_or_default();
        let storage = query(
            &install.database,
            "SELECT server_id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'storage_server'",
        );
        let mkfs = match &storage {
            Some(s) => farm.mkfs_log(s).await.unwrap().len(),
            None => 0,
        };
        check_at_most_once(life, &calls, mkfs);
        let jm = join_material_journal(&install.database);
        join_material.check(life, &calls, jm);
        obtained.push((
            jm.0,
            calls.iter().filter(|(_, v)| v == "token create").count(),
        ));
        let installs = calls
            .iter()
            .filter(|(_, v)| v == "init" || v == "join")
            .count();
        ran.push((installs, mkfs));
        let is_done = |prefix: &str| done_before.iter().filter(|k| k.starts_with(prefix)).count();
        journaled.push((is_done("k8s.install@"), is_done("storage.filesystem@")));
        let point = log
            .lines()
            .find_map(|l| {
                l.strip_prefix("failpoint ")
                    .and_then(|r| r.strip_suffix(" reached: aborting"))
            })
            .map(str::to_owned);
        if state == Some("COMPLETED".into()) {
            lives.push(("completed".into(), new));
            break true;
        }
        let point =
            point.unwrap_or_else(|| panic!("life {life} ended without a failpoint:\n{log}"));
        lives.push((point, new));
    };
    assert!(completed);
    for (i, (point, new)) in lives.iter().enumerate() {
        eprintln!(
            "life {:2}: {point:<36} installs/mkfs run {:?}, DONE {:?}, join material \
             starts/tokens {:?}; new DONE: {new:?}",
            i + 1,
            ran[i],
            journaled[i],
            obtained[i]
        );
    }
    let boundaries = lives
        .iter()
        .filter(|(p, _)| p == "engine-step-done")
        .count();
    let installs_applied = lives
        .iter()
        .filter(|(p, _)| p == "engine-applied-k8s.install")
        .count();
    let mkfs_applied = lives
        .iter()
        .filter(|(p, _)| p == "engine-applied-storage.filesystem")
        .count();
    // Each install and the mkfs crossed the window between running on its host and its DONE:
    // a life never journals the DONE of an install or mkfs that ran in it (its applied
    // failpoint, or the DONE of a stage beside it, ended the life first), so the DONE count
    // after a life is at most what had run on the hosts by the end of the life before.
    for l in 1..ran.len() {
        assert!(
            journaled[l].0 <= ran[l - 1].0 && journaled[l].1 <= ran[l - 1].1,
            "life {}: an install or mkfs journaled DONE in the life it ran in \
             (ran {:?}, DONE {:?})",
            l + 1,
            ran,
            journaled
        );
    }
    assert_eq!(journaled[0], (0, 0));
    let plan = plan_keys(&install.database);
    eprintln!(
        "{} lives in {:?}: {boundaries} stage boundaries of {} stages; {installs_applied} \
         installs and {mkfs_applied} mkfs ended a life at their applied failpoint, the others \
         were cut by a DONE beside them",
        lives.len(),
        t.elapsed(),
        plan.len()
    );
    // Every stage was journaled DONE, and each of all but a few (two DONE of one wave may land
    // before the first abort) ended a life.
    let done = done_keys(&install.database);
    for k in &plan {
        assert!(done.contains(k), "{k} not DONE: {done:?}");
    }
    assert!(
        boundaries + 3 >= plan.len() && plan.len() > 15,
        "{boundaries} boundaries crossed for {} stages",
        plan.len()
    );
    assert_eq!(ran.last(), Some(&(3, 1)), "{ran:?}");
    assert_eq!(journaled.last(), Some(&(3, 1)), "{journaled:?}");

    // The end state: one init, one join per worker, the join material once, mkfs once.
    let stack_id = query(
        &install.database,
        "SELECT stack_id FROM vnf_instance WHERE id = ?1",
    )
    .unwrap();
    let kube = farm.kube(&stack_id);
    let kubeadm_log = std::fs::read_to_string(kube.dir().join("kubeadm.log")).unwrap();
    eprintln!("kubeadm calls:\n{kubeadm_log}");
    let calls = kubeadm_calls(&kubeadm_log);
    let count = |verb: &str| calls.iter().filter(|(_, v)| v == verb).count();
    assert_eq!(count("init"), 1, "one kubeadm init in all");
    assert_eq!(count("join"), 2, "each worker joined once");
    // The script's own token, and the join material's: once, plus one for each start of its
    // stage cut short before its DONE (checked after every life above).
    let (starts, done) = join_material_journal(&install.database);
    eprintln!(
        "k8s.join_material: {starts} starts, {} token create calls (the script's one included)",
        count("token create")
    );
    assert!(done);
    assert!(
        (2..=1 + starts as usize).contains(&count("token create")),
        "the script's own token and the join material's ({starts} starts of its stage)"
    );
    let storage = query(
        &install.database,
        "SELECT server_id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'storage_server'",
    )
    .unwrap();
    assert_eq!(farm.mkfs_log(&storage).await.unwrap().len(), 1, "mkfs once");
    let nodes = kube.read().unwrap();
    let ready = nodes["nodes"]
        .as_object()
        .map(|m| {
            m.values()
                .filter(|n| {
                    n["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .count()
        })
        .unwrap_or_default();
    assert_eq!(ready, 3, "1 master and 2 workers Ready: {nodes}");

    // The proxy reached the script: it wrote it into the master's apt configuration.
    let master = query(
        &install.database,
        "SELECT server_id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'masterNode'",
    )
    .unwrap();
    let apt = farm
        .read_file(&master, "/etc/apt/apt.conf.d/proxy.conf")
        .await
        .unwrap();
    let apt = String::from_utf8_lossy(&apt);
    assert!(apt.contains(&http_proxy), "the script's apt proxy: {apt}");

    // The cluster as a Kubernetes VIM: the admin ServiceAccount's token kept 0600 (the one the
    // cluster's token Secret holds), the endpoint and CA from the kept admin kubeconfig, shown by
    // `status VNF` without the token.
    let vim_path = install
        .database
        .parent()
        .unwrap()
        .join(format!("vim/{VNF}.env"));
    let vim_text = std::fs::read_to_string(&vim_path).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&vim_path).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let bearer = vim_text
        .lines()
        .find_map(|l| l.strip_prefix("BEARER_TOKEN="))
        .unwrap()
        .to_owned();
    let secret_b64 = nodes["secrets"]["kube-system/admin-vim-token"]["data"]["token"]
        .as_str()
        .unwrap();
    use base64::Engine as _;
    let secret_token = base64::engine::general_purpose::STANDARD
        .decode(secret_b64)
        .unwrap();
    assert_eq!(
        bearer.as_bytes(),
        secret_token.as_slice(),
        "the kept token is the cluster's"
    );
    let status = install.cli(&["status", VNF, "-o", "json"]);
    assert!(status.status.success(), "{status:?}");
    let status_text = String::from_utf8(status.stdout).unwrap();
    let doc: Value = serde_json::from_str(&status_text).unwrap();
    let master_ip = query(
        &install.database,
        "SELECT ip_address FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'masterNode'",
    )
    .unwrap();
    assert_eq!(doc["kubernetesVim"]["name"], "kubernetes_vim", "{doc}");
    assert_eq!(
        doc["kubernetesVim"]["server"],
        format!("https://{master_ip}:6443"),
        "{doc}"
    );
    assert_eq!(
        doc["kubernetesVim"]["caCertSha256"].as_str().map(str::len),
        Some(64),
        "{doc}"
    );

    // No secret where it must not be: every join token the cluster made, the VIM's bearer
    // token, the proxy password, the cloud password; the SSH password as a word of remote argv.
    let tokens: Vec<String> = kube
        .kubeadm_state()
        .unwrap()
        .and_then(|s| s["tokens"].as_object().map(|t| t.keys().cloned().collect()))
        .unwrap_or_default();
    assert!(!tokens.is_empty());
    let mut secrets = tokens.clone();
    secrets.push(bearer.clone());
    secrets.push(proxy_password.clone());
    secrets.push("testbed-secret".into());
    let mut places: Vec<(String, String)> = vec![
        ("the daemon's logs".into(), logs),
        ("status VNF".into(), status_text.clone()),
    ];
    for suffix in ["", "-wal"] {
        let p = format!("{}{suffix}", install.database.display());
        if let Ok(bytes) = std::fs::read(&p) {
            places.push((p, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for f in Install::files(&install.accepted_dir()) {
        let p = install.accepted_dir().join(&f);
        places.push((
            f,
            String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned(),
        ));
    }
    let mut commands = 0;
    for h in farm.hosts() {
        let lines = farm.command_log(&h.server_id).await.unwrap_or_default();
        commands += lines.len();
        for line in &lines {
            let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).collect();
            assert!(
                !words.contains(&"ubuntu"),
                "SSH password in remote argv: {line}"
            );
        }
        places.push((format!("commands.log of {}", h.server_id), lines.join("\n")));
    }
    assert!(commands > 0, "no remote command was logged");
    for (what, text) in &places {
        for (i, s) in secrets.iter().enumerate() {
            assert!(
                !text.contains(s.as_str()),
                "secret #{i} (join tokens first, then the VIM's bearer token, the proxy \
                 password, the cloud password) found in {what}"
            );
        }
    }
    tb.shutdown().await;
}
