//! Shared helpers for the integration tests: a daemon under test in a temporary directory.

#![allow(dead_code, missing_docs)]

pub mod bed;
pub mod kubespray;
pub mod tacker;

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The repository root (where `fixtures/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fixture PV package copied to `packages/fixtures/packages/pv-k8s-cluster` (the path a
/// request's `vnfPackage` names, below another packages directory), with an
/// `OS::Neutron::FloatingIP` on the public network beside each node's CP port in its nested
/// templates (`masterNode_CP1_floating_ip`, `workerNode_CP2_floating_ip`: the shape of Tacker's
/// packages with floating IPs). Returns the copy's directory.
pub fn floating_pv_package(packages: &Path) -> PathBuf {
    const PACKAGE: &str = "fixtures/packages/pv-k8s-cluster";
    let to = packages.join(PACKAGE);
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(repo_root().join(PACKAGE))
        .arg(&to)
        .status()
        .unwrap();
    assert!(st.success());
    for (file, cp) in [
        ("masterNode.yaml", "masterNode_CP1"),
        ("workerNode.yaml", "workerNode_CP2"),
    ] {
        let path = to.join("BaseHOT/simple/nested").join(file);
        let mut hot: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert!(!hot["resources"][cp].is_null(), "{file} has {cp}");
        let fip: serde_yaml_ng::Value = serde_yaml_ng::from_str(&format!(
            "type: OS::Neutron::FloatingIP\nproperties:\n  floating_network: public\n  \
             port_id: {{get_resource: {cp}}}\n"
        ))
        .unwrap();
        hot["resources"][format!("{cp}_floating_ip").as_str()] = fip;
        fs::write(&path, serde_yaml_ng::to_string(&hot).unwrap()).unwrap();
    }
    to
}

/// A temporary installation: config, spool, database. Relative `vnfPackage` paths resolve
/// against the repository root, so fixture envelopes work as they are.
pub struct Install {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub spool: PathBuf,
    pub database: PathBuf,
}

impl Install {
    pub fn new() -> Self {
        Self::with_packages_dir(true)
    }

    /// With `packages_dir = false` the file sets only `spool_dir` and `database`.
    pub fn with_packages_dir(packages_dir: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = dir.path().join("spool");
        let database = dir.path().join("state.db");
        let config = dir.path().join("vnfkeeper.toml");
        let mut text = format!(
            "spool_dir = \"{}\"\ndatabase = \"{}\"\n",
            spool.display(),
            database.display()
        );
        if packages_dir {
            text.push_str(&format!("packages_dir = \"{}\"\n", repo_root().display()));
        }
        fs::write(&config, text).unwrap();
        Self {
            dir,
            config,
            spool,
            database,
        }
    }

    pub fn new_dir(&self) -> PathBuf {
        self.spool.join("new")
    }
    pub fn accepted_dir(&self) -> PathBuf {
        self.spool.join("accepted")
    }
    pub fn rejected_dir(&self) -> PathBuf {
        self.spool.join("rejected")
    }

    /// Drops `bytes` into the spool as `name`, the maildir way (tmp/ then rename into new/).
    pub fn drop_file(&self, name: &str, bytes: &[u8]) {
        let tmp = self.spool.join("tmp");
        fs::create_dir_all(&tmp).unwrap();
        fs::create_dir_all(self.new_dir()).unwrap();
        let t = tmp.join(name);
        fs::write(&t, bytes).unwrap();
        fs::rename(&t, self.new_dir().join(name)).unwrap();
    }

    /// Runs `vnfkeeper ARGS --config <this config>`.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env_remove("JOURNAL_STREAM")
            .output()
            .expect("run vnfkeeper")
    }

    /// `vnfkeeper ops --json` parsed.
    pub fn ops_json(&self) -> Vec<serde_json::Value> {
        let out = self.cli(&["ops", "--json"]);
        assert!(
            out.status.success(),
            "ops failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("ops --json is JSON")
    }

    /// The digest of the original bytes of the request kept at `copy` (its sidecar
    /// `<copy>.sha256`), or, for an entry refused unread (moved as it is, without a sidecar),
    /// [`Install::digest_hex`] of the entry's bytes; "" when there is neither.
    pub fn original_digest(&self, copy: &Path) -> String {
        let mut s = copy.as_os_str().to_owned();
        s.push(".sha256");
        match fs::read_to_string(s) {
            Ok(digest) => digest.trim_end().to_owned(),
            Err(_) => fs::read(copy).map_or_else(|_| String::new(), |b| self.digest_hex(&b)),
        }
    }

    /// The keyed digest the daemon records for a file of `bytes` (README "Security"):
    /// `hmac-sha256:` and the hex HMAC-SHA256, under a key derived from this installation's
    /// `secrets.key`, of the file's SHA-256.
    pub fn digest_hex(&self, bytes: &[u8]) -> String {
        use hmac::{Hmac, Mac as _};
        use sha2::Digest as _;
        let key = fs::read(self.dir.path().join("secrets.key")).expect("secrets.key");
        let mut derive = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        derive.update(b"vnfkeeper intake digest");
        let sub = derive.finalize().into_bytes();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&sub).unwrap();
        mac.update(&sha2::Sha256::digest(bytes));
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("hmac-sha256:{hex}")
    }

    /// Hex SHA-256 of `bytes`, as the sidecars hold it.
    pub fn sha256_hex(bytes: &[u8]) -> String {
        use sha2::Digest as _;
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Names of regular files in `dir` (sorted), without hidden files and `.sha256` sidecars.
    pub fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.') && !n.ends_with(".sha256"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Starts the daemon on this installation.
    pub fn start(&self) -> Daemon {
        self.start_with_env(&[])
    }

    /// Starts the daemon with extra environment variables (e.g. `VNFKEEPER_FAILPOINT`).
    pub fn start_with_env(&self, env: &[(&str, &str)]) -> Daemon {
        self.start_via(&[], env)
    }

    /// Starts the daemon through `prefix` (e.g. `setpriv --reuid=… --regid=… --clear-groups`).
    pub fn start_via(&self, prefix: &[&str], env: &[(&str, &str)]) -> Daemon {
        let d = self.spawn(prefix, &[], env);
        d.wait_for_log("ready", Duration::from_secs(30));
        d
    }

    /// Starts `vnfkeeper daemon ARGS --config <this config>` without waiting for anything.
    pub fn spawn_daemon(&self, args: &[&str]) -> Daemon {
        self.spawn(&[], args, &[])
    }

    fn spawn(&self, prefix: &[&str], args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = self.dir.path().join(format!("daemon-{}.log", uuid()));
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(env!("CARGO_BIN_EXE_vnfkeeper"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_vnfkeeper")),
        };
        let child = cmd
            .arg("daemon")
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .expect("start daemon");
        Daemon {
            child: Some(child),
            log,
        }
    }
}

fn uuid() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// A running daemon; killed (SIGKILL) when dropped, so a failing test leaves no process behind.
pub struct Daemon {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether the process is still alive.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Waits until the daemon's log contains `needle`; panics with the log on timeout.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.log_text().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "daemon log has no `{needle}` after {timeout:?}:\n{}",
            self.log_text()
        );
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits up to `timeout` for the daemon to exit on its own; returns its exit status code
    /// (`None` if it still runs: then it is left running).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        c.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound and released), for a
/// process that binds it later.
///
/// Picked at random below Linux's ephemeral range (`net.ipv4.ip_local_port_range`,
/// 32768–60999 by default): a port the kernel handed out with `bind(:0)` is exactly the
/// one it hands the next outgoing connection or `:0` listener of a parallel test, which
/// then takes it before our daemon binds it ("Address already in use").
pub fn free_port() -> u16 {
    loop {
        let port = fastrand::u16(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Polls `f` until it returns true or `timeout` passes; returns whether it became true.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    f()
}

/// Removes every testbed leftover with a name prefix when dropped (also on panic).
pub struct Cleanup(pub &'static str);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let prefix = self.0;
        let _ = std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let _ = testbed::hosts::down_all(prefix).await;
            })
        })
        .join();
    }
}

/// A testbed cloud whose servers are real hosts on `10.231.<net>.0/24`, with the farm at hand
/// for inspection (exec, command and mkfs logs). Leftovers of an earlier crashed run with the
/// same prefix are removed first; dropping the returned `Cleanup` removes everything.
pub async fn testbed_with_hosts(
    prefix: &'static str,
    net: u8,
    dir: &Path,
) -> (
    std::sync::Arc<testbed::hosts::HostFarm>,
    testbed::cloud::Testbed,
    Cleanup,
) {
    testbed_with_hosts_opts(prefix, net, dir, false).await
}

/// [`testbed_with_hosts`], and with `ansible_server` the kubespray flavour's Ansible server
/// (`tb.ansible_server()`: its [`testbed::hosts::AnsibleServer`] and `dir/ansible-server.json`;
/// fill a request with [`kubespray::fill_ansible`]).
pub async fn testbed_with_hosts_opts(
    prefix: &'static str,
    net: u8,
    dir: &Path,
    ansible_server: bool,
) -> (
    std::sync::Arc<testbed::hosts::HostFarm>,
    testbed::cloud::Testbed,
    Cleanup,
) {
    testbed_with_hosts_on(
        prefix,
        net,
        dir,
        ansible_server,
        testbed::cloud::ControlPlane::Simulated,
    )
    .await
}

/// [`testbed_with_hosts_opts`] with the given control plane: with
/// [`testbed::cloud::ControlPlane::Real`] (tagged `prefix`) real Keystone and Heat run beside
/// the simulated Nova, Neutron, Cinder and Glance; the `Cleanup` also kills what is left of
/// them.
pub async fn testbed_with_hosts_on(
    prefix: &'static str,
    net: u8,
    dir: &Path,
    ansible_server: bool,
    control_plane: testbed::cloud::ControlPlane,
) -> (
    std::sync::Arc<testbed::hosts::HostFarm>,
    testbed::cloud::Testbed,
    Cleanup,
) {
    let _ = testbed::hosts::down_all(prefix).await;
    let cleanup = Cleanup(prefix);
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let farm = std::sync::Arc::new(
        testbed::hosts::HostFarm::new(testbed::hosts::FarmConfig {
            state_dir: dir.join("hosts"),
            prefix: prefix.into(),
            bridge_cidr: format!("10.231.{net}.1/24").parse().unwrap(),
        })
        .await
        .expect("farm"),
    );
    let mut opts = testbed::cloud::CloudOptions::no_hosts(dir);
    opts.subnet = format!("10.231.{net}.0/24");
    opts.farm = Some(std::sync::Arc::new(testbed::cloud::farm::FarmBackend(
        farm.clone(),
    )));
    opts.ansible_server = ansible_server;
    opts.control_plane = control_plane;
    let tb = testbed::cloud::Testbed::start(opts).await.unwrap();
    (farm, tb, cleanup)
}

/// An operation's stored plan and step journal, as the database holds them.
pub struct StoredPlan {
    /// The plan's stages in order: (stage key, wave).
    pub stages: Vec<(String, u64)>,
    /// `steps_total` of the operation.
    pub total: i64,
    /// Stage key → attempts, for every stage journaled DONE.
    pub done: std::collections::BTreeMap<String, i64>,
}

impl StoredPlan {
    /// The stored plan and DONE stages of operation `op` in the database at `db`.
    pub fn read(db: &Path, op: &str) -> Self {
        let conn = rusqlite::Connection::open(db).unwrap();
        let (plan, total): (String, i64) = conn
            .query_row(
                "SELECT plan, steps_total FROM vnf_lcm_op_occ WHERE id = ?1",
                [op],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
        let stages = plan["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["key"].as_str().unwrap().to_owned(),
                    s["wave"].as_u64().unwrap_or_default(),
                )
            })
            .collect();
        let mut st = conn
            .prepare(
                "SELECT stage_key, attempts FROM step_journal
                 WHERE vnf_lcm_op_occ_id = ?1 AND state = 'DONE'",
            )
            .unwrap();
        let done = st
            .query_map([op], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        Self {
            stages,
            total,
            done,
        }
    }

    /// The stage keys in plan order.
    pub fn keys(&self) -> Vec<String> {
        self.stages.iter().map(|(k, _)| k.clone()).collect()
    }
}
