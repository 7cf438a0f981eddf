//! Tacker's own `install_k8s_cluster.sh` (tacker 16.0.0's sdist, fetched by
//! `scripts/tacker-samples`, unmodified) on hosts of the Ubuntu 20.04 profile, under crashes
//! (needs root): the seed's INSTANTIATE with a proxy whose URL carries a password; the daemon is
//! aborted right after the first master's install ran on the host but before its DONE was
//! journaled, and again right after a worker's join ran, the join material DONE. The restarted
//! daemon completes the operation with one `kubeadm init` and one join per worker in all, the
//! join material obtained once, every node Ready; the proxy reached the script (it wrote the
//! URL into the node's apt configuration); the cluster's Kubernetes VIM is kept (the admin
//! ServiceAccount's bearer token, 0600) and shown by `status VNF`; neither the proxy password, a
//! join token nor the bearer token reached the daemon's log, `status VNF`, the database, the
//! accepted copy or any host's command log.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{Install, StoredPlan, repo_root, wait_until};

const PREFIX: &str = "vkts";
const VNF: &str = "tacker-script-1";

fn op_of(install: &Install) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == VNF)
}

/// Stages of the stored plan in order as (key, wave), and the keys journaled DONE.
fn plan_and_done(install: &Install) -> (Vec<(String, u64)>, Vec<String>) {
    let op = op_of(install).unwrap()["id"].as_str().unwrap().to_owned();
    let p = StoredPlan::read(&install.database, &op);
    (p.stages, p.done.into_keys().collect())
}

/// Runs the daemon until it aborts at its failpoint.
fn run_until_abort(install: &Install, failpoint: &str, logs: &mut String) {
    let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", failpoint)]);
    let aborted = wait_until(Duration::from_secs(600), || !daemon.is_running());
    let log = daemon.log_text();
    logs.push_str(&log);
    assert!(aborted, "the daemon did not abort at {failpoint}:\n{log}");
    assert!(log.contains("failpoint"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn tackers_install_script_survives_crashes_with_one_init_and_keeps_secrets() {
    let dir = tempfile::Builder::new()
        .prefix("vk-tacker-script-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 43, dir.path()).await;
    // The package's image carries a real Ubuntu cloud image's Glance properties, so its servers
    // are hosts of the Ubuntu 20.04 profile the script is written for.
    tb.cloud().set_image_properties(
        "ubuntu-20.04-server-cloudimg-amd64",
        [("os_distro", "ubuntu"), ("os_version", "20.04")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
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
    let http_proxy = format!("http://vkuser:{proxy_password}@10.231.43.1:3128");
    let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["vnfInstanceId"] = VNF.into();
    env["requestId"] = VNF.into();
    env["request"]["additionalParams"]["k8s_cluster_installation_param"]["proxy"] = serde_json::json!({
        "http_proxy": http_proxy,
        "https_proxy": http_proxy,
        "no_proxy": "10.231.43.0/24,127.0.0.1",
    });

    // 1. Abort after the first master's install ran on the host (kubeadm init done), before its
    //    DONE is journaled: the resumed step must find the node installed.
    let mut logs = String::new();
    install.drop_file("instantiate.json", &serde_json::to_vec(&env).unwrap());
    run_until_abort(&install, "engine-applied-k8s.install:1", &mut logs);
    let (stages, done) = plan_and_done(&install);
    assert!(
        !done.iter().any(|k| k.starts_with("k8s.install")),
        "{done:?}"
    );
    // 2. Abort after a worker's install ran on the host (kubeadm join done), before its DONE is
    //    journaled. The master's install is found done by its check (no apply, so no failpoint
    //    hit), so this is a worker's; the join material is DONE by then (an earlier wave).
    let master_install = stages
        .iter()
        .map(|(k, _)| k)
        .find(|k| k.starts_with("k8s.install"))
        .unwrap()
        .clone();
    run_until_abort(&install, "engine-applied-k8s.install:1", &mut logs);
    let (_, done2) = plan_and_done(&install);
    assert!(done2.contains(&master_install), "{done2:?}");
    assert!(
        done2.iter().any(|k| k.starts_with("k8s.join_material")),
        "{done2:?}"
    );
    assert_eq!(
        done2
            .iter()
            .filter(|k| k.starts_with("k8s.install"))
            .count(),
        1,
        "no worker's install journaled yet: {done2:?}"
    );

    // 3. The last run completes.
    let daemon = install.start();
    let finished = wait_until(Duration::from_secs(900), || {
        op_of(&install).is_some_and(|o| {
            o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
        })
    });
    logs.push_str(&daemon.log_text());
    let o = op_of(&install).unwrap();
    assert!(
        finished && o["operationState"] == "COMPLETED",
        "{o}\n{}",
        daemon.log_text()
    );
    drop(daemon);

    let conn = rusqlite::Connection::open(&install.database).unwrap();
    let stack_id: String = conn
        .query_row(
            "SELECT stack_id FROM vnf_instance WHERE id = ?1",
            [VNF],
            |r| r.get(0),
        )
        .unwrap();
    let kube = farm.kube(&stack_id);
    let kubeadm_log = std::fs::read_to_string(kube.dir().join("kubeadm.log")).unwrap();
    eprintln!("kubeadm calls:\n{kubeadm_log}");
    let count = |verb: &str| {
        kubeadm_log
            .lines()
            .filter(|l| l.split_once(" kubeadm ").is_some_and(|(_, v)| v == verb))
            .count()
    };
    assert_eq!(count("init"), 1, "one kubeadm init in all");
    assert_eq!(count("join"), 2, "each worker joined once");
    // The script's own `kubeadm token create` on the first master, and the join material's once.
    assert_eq!(
        count("token create"),
        2,
        "the join material was obtained once"
    );
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
    let master: String = conn
        .query_row(
            "SELECT server_id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'masterNode'",
            [VNF],
            |r| r.get(0),
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
    let store = kube.read().unwrap();
    let secret_b64 = store["secrets"]["kube-system/admin-vim-token"]["data"]["token"]
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
    let master_ip: String = conn
        .query_row(
            "SELECT ip_address FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'masterNode'",
            [VNF],
            |r| r.get(0),
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

    // No secret where it must not be.
    let tokens: Vec<String> = kube
        .kubeadm_state()
        .unwrap()
        .and_then(|s| s["tokens"].as_object().map(|t| t.keys().cloned().collect()))
        .unwrap_or_default();
    assert!(!tokens.is_empty());
    let mut secrets = tokens.clone();
    secrets.push(bearer.clone());
    secrets.push(proxy_password.clone());
    let mut places: Vec<(String, String)> = vec![
        ("the daemon's log".into(), logs),
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
    for h in farm.hosts() {
        let lines = farm.command_log(&h.server_id).await.unwrap_or_default();
        places.push((format!("commands.log of {}", h.server_id), lines.join("\n")));
    }
    for (what, text) in &places {
        for (i, s) in secrets.iter().enumerate() {
            assert!(
                !text.contains(s.as_str()),
                "secret #{i} (join tokens first, then the VIM's bearer token, last the proxy password) found in {what}"
            );
        }
    }
}
