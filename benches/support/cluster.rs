//! Shared by the benchmarks that run a whole INSTANTIATE on testbed hosts (`kubespray`,
//! `reference_order`): a teardown guard, fixture packages resized to N workers, the daemon's
//! step times from `vnfkeeper events --json`, and small waiting and file helpers.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use serde_yaml_ng::Value as Yaml;

/// Kills the daemon and removes every testbed leftover of `prefix` when dropped (also on panic).
pub struct Teardown {
    /// The daemon under test, once started.
    pub daemon: Option<Child>,
    /// Name prefix of the benchmark's testbed namespaces and links.
    pub prefix: &'static str,
}

impl Teardown {
    /// SIGTERM, up to 10 s, then SIGKILL.
    pub fn stop_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Teardown {
    fn drop(&mut self) {
        self.stop_daemon();
        let prefix = self.prefix;
        let _ = std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(testbed::hosts::down_all(prefix))
        })
        .join();
    }
}

/// One `step` of `vnfkeeper events --json`: its name and times.
pub struct Step {
    /// Step name (`ansible.playbook`, `heat.wait_create`, …).
    pub name: String,
    /// When it started.
    pub started: chrono::DateTime<chrono::FixedOffset>,
    /// When it finished.
    pub finished: chrono::DateTime<chrono::FixedOffset>,
}

impl Step {
    /// `None` for an entry that is no step or a step still running.
    pub fn from_json(v: &Value) -> Option<Step> {
        let time = |k: &str| chrono::DateTime::parse_from_rfc3339(v[k].as_str()?).ok();
        Some(Step {
            name: v["name"].as_str()?.to_owned(),
            started: time("startedAt")?,
            finished: time("finishedAt")?,
        })
    }

    /// finished − started, in seconds.
    pub fn seconds(&self) -> f64 {
        (self.finished - self.started).as_seconds_f64()
    }
}

/// Seconds from the first start to the last finish of `steps` (0 for none).
pub fn span<'a>(steps: impl Iterator<Item = &'a Step>) -> f64 {
    let mut first = None;
    let mut last = None;
    for s in steps {
        first = Some(first.map_or(s.started, |f: chrono::DateTime<_>| f.min(s.started)));
        last = Some(last.map_or(s.finished, |l: chrono::DateTime<_>| l.max(s.finished)));
    }
    match (first, last) {
        (Some(f), Some(l)) => (l - f).as_seconds_f64(),
        _ => 0.0,
    }
}

/// Copies the fixture package `from` to `to` and gives its worker VDU `n` instances at
/// INSTANTIATE: in the VNFD (`vnfd`, relative to the package) `workerNode_initial_delta` and
/// `workerNode_instantiation_levels` (every level) = n, `vdu_profile` min ≤ n ≤ max (max = n + 2,
/// room to scale out); in the BaseHOT (`hot`) the worker group (the resource whose
/// `properties.resource.type` is `workerNode.yaml`) gets `max_size` = the same max. The fixture
/// itself is not changed. Panics when the package does not have these parts.
pub fn resized_package(from: &Path, to: &Path, vnfd: &str, hot: &str, n: u32) {
    copy_dir(from, to);
    let max = n + 2;

    let vnfd_path = to.join(vnfd);
    let mut doc: Yaml = serde_yaml_ng::from_str(&std::fs::read_to_string(&vnfd_path).unwrap())
        .expect("VNFD is YAML");
    let topo = &mut doc["topology_template"];
    let profile = &mut topo["node_templates"]["workerNode"]["properties"]["vdu_profile"];
    let min = profile["min_number_of_instances"].as_u64().unwrap_or(0);
    profile["min_number_of_instances"] = Yaml::from(min.min(u64::from(n)));
    profile["max_number_of_instances"] = Yaml::from(max);
    let mut set = 0;
    for policy in topo["policies"]
        .as_sequence_mut()
        .expect("policies")
        .iter_mut()
    {
        let Some(map) = policy.as_mapping_mut() else {
            continue;
        };
        for (name, body) in map.iter_mut() {
            match name.as_str() {
                Some("workerNode_initial_delta") => {
                    body["properties"]["initial_delta"]["number_of_instances"] = Yaml::from(n);
                    set += 1;
                }
                Some("workerNode_instantiation_levels") => {
                    for (_, level) in body["properties"]["levels"]
                        .as_mapping_mut()
                        .expect("levels")
                        .iter_mut()
                    {
                        level["number_of_instances"] = Yaml::from(n);
                    }
                    set += 1;
                }
                _ => {}
            }
        }
    }
    assert_eq!(set, 2, "the VNFD's worker initial delta and levels");
    std::fs::write(&vnfd_path, serde_yaml_ng::to_string(&doc).unwrap()).unwrap();

    let hot_path = to.join(hot);
    let mut template: Yaml =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&hot_path).unwrap()).expect("HOT");
    let group = template["resources"]
        .as_mapping_mut()
        .expect("resources")
        .iter_mut()
        .map(|(_, r)| r)
        .find(|r| r["properties"]["resource"]["type"] == "workerNode.yaml")
        .expect("the worker group in the BaseHOT");
    group["properties"]["max_size"] = Yaml::from(max);
    std::fs::write(&hot_path, serde_yaml_ng::to_string(&template).unwrap()).unwrap();
}

/// Copies the directory tree `from` to `to` (regular files and directories).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest: PathBuf = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Writes a file readable by its owner only (a request may hold the testbed's passwords).
pub fn write_private(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

/// Calls `f` every 100 ms until it gives a value or `limit` passes.
pub async fn wait<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The last 40 lines of the daemon's log (for a failure message; the daemon logs no secrets).
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Writes the configuration of a whole-INSTANTIATE benchmark's daemon under `dir` (spool,
/// database, `packages` as the packages directory, the testbed's `clouds_yaml`, reconcile off,
/// then `extra` TOML), starts the daemon binary `vk` with it into `teardown`, logging to
/// `dir/daemon.log`, and waits until it says it is ready. Returns the configuration's path and
/// the log's. Panics when the daemon is not ready within 30 s.
pub async fn start_daemon(
    teardown: &mut Teardown,
    vk: &str,
    dir: &Path,
    packages: &Path,
    clouds_yaml: &Path,
    extra: &str,
) -> (PathBuf, PathBuf) {
    let config = dir.join("vnfkeeper.toml");
    std::fs::write(
        &config,
        format!(
            "spool_dir = \"{0}/spool\"\ndatabase = \"{0}/state.db\"\npackages_dir = \"{1}\"\n\n\
             [cloud]\nclouds_yaml = \"{2}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n{extra}",
            dir.display(),
            packages.display(),
            clouds_yaml.display()
        ),
    )
    .unwrap();
    let log = dir.join("daemon.log");
    teardown.daemon = Some(
        Command::new(vk)
            .arg("daemon")
            .env("VNFKEEPER_CONFIG", &config)
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start daemon"),
    );
    let ready = wait(Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(" ready")
            .then_some(())
    })
    .await;
    assert!(ready.is_some(), "daemon not ready: {}", tail(&log));
    (config, log)
}

/// What [`submit_and_wait`] saw.
pub struct Finished {
    /// Seconds from just before `vnfkeeper submit` to the end state seen.
    pub wall: f64,
    /// When the request was submitted.
    pub submitted: chrono::DateTime<chrono::FixedOffset>,
    /// The newest operation (`ops --json`) in its end state; `None` when `limit` passed first.
    pub done: Option<Value>,
}

/// Submits the request file `req` with `vnfkeeper submit` and polls `ops --json` every 100 ms
/// until the newest operation is COMPLETED, FAILED_TEMP or FAILED, or `limit` passes. Panics when
/// `submit` fails.
pub async fn submit_and_wait(config: &Path, req: &Path, limit: Duration) -> Finished {
    let t0 = Instant::now();
    let submitted = chrono::Utc::now().fixed_offset();
    let out = super::vk(config, &["submit", req.to_str().unwrap()]);
    assert!(out.status.success(), "submit: {out:?}");
    let done = wait(limit, || {
        super::ops(config).into_iter().next().filter(|o| {
            matches!(
                o["operationState"].as_str(),
                Some("COMPLETED" | "FAILED_TEMP" | "FAILED")
            )
        })
    })
    .await;
    Finished {
        wall: t0.elapsed().as_secs_f64(),
        submitted,
        done,
    }
}
