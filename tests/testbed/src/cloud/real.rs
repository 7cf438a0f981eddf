//! The real OpenStack control plane: Keystone 30.0.0 and Heat 27.0.1 (heat-api + heat-engine)
//! from PyPI, with a MariaDB and a RabbitMQ of their own, all on loopback.
//!
//! [`RealControlPlane::start`] runs `scripts/openstack-venv` (cached venvs; installs the
//! `mariadb-server` and `rabbitmq-server` Debian packages when missing), then starts, under
//! `run_dir`:
//!
//! | process | listens on | data |
//! |---|---|---|
//! | `mariadbd` | `127.0.0.1:<free port>` | `run_dir/mysql` (database `heat`) |
//! | RabbitMQ (`beam.smp`, its own `epmd`) | `127.0.0.1:<free ports>` (AMQP, distribution, epmd) | `run_dir/rabbit` |
//! | Keystone under gunicorn | `127.0.0.1:<free port>` | SQLite `run_dir/keystone/keystone.db`, fernet keys |
//! | `heat-engine` | — (RPC over RabbitMQ) | MariaDB |
//! | heat-api (`heat.wsgi.api`) under gunicorn | `127.0.0.1:<free port>` | — |
//! | with Tacker: `tacker-server` | `127.0.0.1:<free port>` | MariaDB (database `tacker`), packages under `run_dir/tacker` |
//! | with Tacker: `tacker-conductor` | — (RPC over RabbitMQ) | MariaDB, `run_dir/tacker` |
//!
//! Keystone is bootstrapped (user `admin`, project `admin`, region `RegionOne`,
//! `password_hash_rounds = 4`), then gets user `heat` (role `admin` in project `service`), roles
//! `heat_stack_owner` (given to `admin` in `admin`) and `heat_stack_user`, and a catalog of the
//! real Heat plus the simulated Nova, Neutron, Cinder and Glance of the testbed; with Tacker
//! also user `tacker` (role `admin` in project `service`) and Tacker's API as catalog type
//! `nfv-orchestration` (unversioned URL), its database migrated with `tacker-db-manage upgrade
//! head` (Tacker 16.0.0 from the venv of `scripts/tacker-venv`). Passwords are
//! random per start and only written to files of mode 0600 (configuration files, clouds.yaml).
//!
//! Every process runs in a process group of its own, listed in [`REGISTRY_DIR`]`/<tag>.pgids`,
//! and carries the environment variable [`TAG_ENV`] = the tag (the farm prefix), so that
//! [`kill_tagged`] (run by `testbed down` and every test's cleanup) finds leftovers of a crashed
//! run: the process groups (gunicorn and heat-engine rewrite their environment with their process
//! titles) and what left its group (RabbitMQ's `epmd` daemonizes). [`RealControlPlane::stop`] (and `Drop`)
//! stops them in the order the services need: tacker-server, tacker-conductor, heat-api and
//! heat-engine before RabbitMQ
//! (oslo.messaging clients hang in shutdown without it), Keystone, RabbitMQ, then MariaDB.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// Environment variable every process of a real control plane carries; its value is the tag
/// (the host farm's prefix) [`kill_tagged`] matches.
pub const TAG_ENV: &str = "VNFKEEPER_TESTBED_CONTROL_PLANE";
/// Directory of the process-group lists of running real control planes (`<tag>.pgids`, one
/// process group id a line; tmpfs, so a reboot forgets them with the processes).
pub const REGISTRY_DIR: &str = "/run/vnfkeeper-testbed";
/// Keystone release the venv pins.
pub const KEYSTONE_VERSION: &str = "30.0.0";
/// Heat release the venv pins.
pub const HEAT_VERSION: &str = "27.0.1";
/// Tacker release the venv pins (`scripts/tacker-venv`).
pub const TACKER_VERSION: &str = "16.0.0";
/// Region of every catalog endpoint.
const REGION: &str = super::REGION;

/// Which control plane (Keystone and Heat) a testbed runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ControlPlane {
    /// The testbed's own simulated Keystone and Heat (in-process, fast, fault injection).
    #[default]
    Simulated,
    /// Real Keystone and Heat from PyPI ([`RealControlPlane`]); the value is the tag its
    /// processes carry ([`TAG_ENV`]), normally the host farm's prefix.
    Real(String),
    /// [`ControlPlane::Real`] and also Tacker 16.0.0 (`tacker-server` and `tacker-conductor`,
    /// catalog type `nfv-orchestration`); the value is the tag.
    RealWithTacker(String),
}

impl ControlPlane {
    /// The tag of a real control plane's processes; `None` for the simulated one.
    pub fn real_tag(&self) -> Option<&str> {
        match self {
            ControlPlane::Simulated => None,
            ControlPlane::Real(t) | ControlPlane::RealWithTacker(t) => Some(t),
        }
    }

    /// Whether the real control plane also runs Tacker.
    pub fn with_tacker(&self) -> bool {
        matches!(self, ControlPlane::RealWithTacker(_))
    }
}

/// Tacker's port and passwords (secrets: written to its configuration file only).
struct TackerSecrets {
    port: u16,
    /// Password of the MariaDB user `tacker`.
    db_password: String,
    /// Password of the Keystone user `tacker`.
    password: String,
}

/// How to reach the control plane's RabbitMQ (its password is a secret).
struct Bus<'a> {
    amqp_port: u16,
    password: &'a str,
    /// RabbitMQ's directory (`HOME`: its Erlang cookie, for `rabbitmqctl`).
    dir: &'a Path,
    epmd_port: u16,
}

/// One started process: its process group is its pid.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// A running real control plane (see the module documentation).
pub struct RealControlPlane {
    run_dir: PathBuf,
    tag: String,
    procs: Vec<Proc>,
    /// Keystone's v3 URL, `http://127.0.0.1:PORT/v3`.
    pub keystone_url: String,
    /// Heat's orchestration URL without the project, `http://127.0.0.1:PORT/v1`.
    pub heat_url: String,
    /// Tacker's API, unversioned (`http://127.0.0.1:PORT`, as its catalog entry of type
    /// `nfv-orchestration`), when started with Tacker.
    pub tacker_url: Option<String>,
    /// Password of user `admin` (a secret: written to clouds.yaml only).
    admin_password: String,
    /// Project id of `admin`.
    pub admin_project_id: String,
    /// Wall time of [`RealControlPlane::start`].
    pub start_time: Duration,
    /// The tag's lease: no other process runs or cleans up a control plane of this tag
    /// meanwhile.
    _lease: crate::hosts::Lease,
}

impl std::fmt::Debug for RealControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealControlPlane")
            .field("run_dir", &self.run_dir)
            .field("keystone_url", &self.keystone_url)
            .field("heat_url", &self.heat_url)
            .field("tacker_url", &self.tacker_url)
            .finish()
    }
}

/// The simulated services the real Keystone's catalog points at: (type, name, URL; Keystone
/// substitutes `%(tenant_id)s`).
pub(crate) fn simulated_catalog(sim_base: &str) -> Vec<(&'static str, &'static str, String)> {
    vec![
        ("compute", "nova", format!("{sim_base}/compute/v2.1")),
        ("network", "neutron", format!("{sim_base}/network")),
        (
            "block-storage",
            "cinder",
            format!("{sim_base}/volume/v3/%(tenant_id)s"),
        ),
        (
            "volumev3",
            "cinderv3",
            format!("{sim_base}/volume/v3/%(tenant_id)s"),
        ),
        ("image", "glance", format!("{sim_base}/image")),
    ]
}

/// A random password: 32 hex digits (two v4 UUIDs' worth of randomness, URL- and INI-safe).
fn password() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// A free TCP port on 127.0.0.1 for a service to listen on: bound, read and released; the
/// service binds it right after.
///
/// Taken below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, from 32768 by
/// default), at random: a port the kernel hands out with `bind(…:0)` is also the local port of
/// the next outgoing connections, and one of those (any process's) could take it between the
/// release and the service's bind — RabbitMQ then stops with `dist_port_already_used`. Below the
/// range only another listener that chose the same port the same way can collide.
fn free_port() -> anyhow::Result<u16> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let floor = 10_000u16;
    if low > floor + 1_000 {
        for _ in 0..64 {
            // A version 4 UUID is the random source at hand (122 random bits).
            let span = u32::from(low - floor);
            let port = floor + (uuid::Uuid::new_v4().as_u128() % u128::from(span)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
    Ok(l.local_addr()?.port())
}

/// Writes a file only the owner can read (it may hold a password).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The last `n` lines of a log file (for an error message).
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs `cmd` to completion with its output in `log`; errors with the log's tail.
async fn run_logged(mut cmd: Command, what: &str, log: &Path) -> anyhow::Result<()> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdout(out.try_clone()?)
        .stderr(out)
        .stdin(Stdio::null());
    let what = what.to_string();
    let status = tokio::task::spawn_blocking(move || cmd.status())
        .await?
        .with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status}):\n{}", tail(log, 20));
    }
    Ok(())
}

/// Waits until `127.0.0.1:port` accepts connections, the process still running.
async fn wait_port(p: &mut Proc, port: u16, limit: Duration) -> anyhow::Result<()> {
    let t0 = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if let Some(st) = p.child.try_wait()? {
            bail!("{} exited ({st}):\n{}", p.name, tail(&p.log, 20));
        }
        if t0.elapsed() > limit {
            bail!(
                "{} did not listen on {port} within {limit:?}:\n{}",
                p.name,
                tail(&p.log, 20)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `GET url` answers `ok_status` (each try bounded: a gunicorn master whose worker
/// crashes accepts and never answers).
async fn wait_http(p: &mut Proc, url: &str, limit: Duration) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let t0 = Instant::now();
    loop {
        if let Ok(r) = client.get(url).send().await
            && (r.status().is_success() || r.status().as_u16() == 300)
        {
            return Ok(());
        }
        if let Some(st) = p.child.try_wait()? {
            bail!("{} exited ({st}):\n{}", p.name, tail(&p.log, 20));
        }
        if t0.elapsed() > limit {
            bail!(
                "{} did not answer {url} within {limit:?}:\n{}",
                p.name,
                tail(&p.log, 20)
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The version of the Python distribution `dist` (its normalized name, e.g. `openstack_heat`)
/// installed in `venv`, from its `*.dist-info` directory's name (the wheel's metadata, PEP 427
/// and the binary distribution format of the Python packaging specifications).
///
/// Heat reports `[revision] heat_revision` as both revisions of `GET /v1/{project}/build_info`
/// (default `unknown`); a deployment sets it to the release it installed, and so does the
/// testbed, from what pip installed.
fn installed_version(venv: &Path, dist: &str) -> anyhow::Result<String> {
    let prefix = format!("{dist}-");
    for lib in std::fs::read_dir(venv.join("lib"))
        .with_context(|| format!("reading {}/lib", venv.display()))?
        .flatten()
    {
        let Ok(rd) = std::fs::read_dir(lib.path().join("site-packages")) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(v) = name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|n| n.strip_suffix(".dist-info"))
            else {
                continue;
            };
            // a version is digits, letters, dots, '+' and '-' (PEP 440), nothing for an INI
            // file to misread
            if !v.is_empty()
                && v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
            {
                return Ok(v.to_string());
            }
        }
    }
    bail!("no {dist} installed in {}", venv.display())
}

/// Where `scripts/openstack-venv` is (the repository this testbed was built from).
fn venv_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/openstack-venv")
}

/// Where `scripts/tacker-venv` is.
fn tacker_venv_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tacker-venv")
}

impl RealControlPlane {
    /// Starts the control plane under `run_dir` (created) with the processes tagged `tag`, and
    /// registers the simulated services at `sim_base` in Keystone's catalog; with
    /// `with_tacker` also Tacker (see the module documentation).
    ///
    /// Errors: the venv scripts failing (no PyPI, not root for the Debian packages), a service
    /// not coming up (the error carries the tail of its log); everything started is stopped.
    pub async fn start(
        run_dir: &Path,
        tag: &str,
        sim_base: &str,
        with_tacker: bool,
    ) -> anyhow::Result<Self> {
        let t0 = Instant::now();
        anyhow::ensure!(
            !tag.is_empty()
                && tag.len() <= 32
                && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "control plane tag {tag:?}: 1-32 letters, digits or '-'"
        );
        let lease = {
            let tag = tag.to_string();
            tokio::task::spawn_blocking(move || crate::hosts::Lease::control_plane(&tag))
                .await
                .context("leasing the control plane's tag")??
        };
        std::fs::create_dir_all(run_dir.join("logs"))
            .with_context(|| format!("creating {}", run_dir.display()))?;
        let out = tokio::process::Command::new(venv_script())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .await
            .context("running scripts/openstack-venv")?;
        anyhow::ensure!(
            out.status.success(),
            "scripts/openstack-venv failed ({})",
            out.status
        );
        let text = String::from_utf8(out.stdout)?;
        let mut lines = text.lines();
        let ks_venv = PathBuf::from(lines.next().context("no keystone venv printed")?);
        let heat_venv = PathBuf::from(lines.next().context("no heat venv printed")?);
        let tacker_venv = if with_tacker {
            let out = tokio::process::Command::new(tacker_venv_script())
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()
                .await
                .context("running scripts/tacker-venv")?;
            anyhow::ensure!(
                out.status.success(),
                "scripts/tacker-venv failed ({})",
                out.status
            );
            // it prints the venv's python: DIR/bin/python
            let python = PathBuf::from(String::from_utf8(out.stdout)?.trim());
            Some(
                python
                    .parent()
                    .and_then(Path::parent)
                    .context("scripts/tacker-venv printed no venv python")?
                    .to_path_buf(),
            )
        } else {
            None
        };
        let mut me = RealControlPlane {
            run_dir: run_dir.to_path_buf(),
            tag: tag.to_string(),
            procs: Vec::new(),
            keystone_url: String::new(),
            heat_url: String::new(),
            tacker_url: None,
            admin_password: password(),
            admin_project_id: String::new(),
            start_time: Duration::ZERO,
            _lease: lease,
        };
        match me
            .bring_up(&ks_venv, &heat_venv, tacker_venv.as_deref(), sim_base)
            .await
        {
            Ok(()) => {
                me.start_time = t0.elapsed();
                tracing::info!(
                    "real control plane up in {:.1} s: Keystone {KEYSTONE_VERSION} at {}, Heat {HEAT_VERSION} at {}{}",
                    me.start_time.as_secs_f64(),
                    me.keystone_url,
                    me.heat_url,
                    me.tacker_url
                        .as_ref()
                        .map(|u| format!(", Tacker {TACKER_VERSION} at {u}"))
                        .unwrap_or_default()
                );
                Ok(me)
            }
            Err(e) => {
                me.stop_blocking();
                Err(e)
            }
        }
    }

    /// The settings file of vnfkeeper's MgmtDriver script as Tacker's conductor runs it
    /// (`VNFKEEPER_MGMT_DRIVER_CONFIG` in the conductor's environment; see
    /// `packaging/tacker/tacker-mgmt-driver.conf`): `run_dir/tacker/vnfkeeper-mgmt-driver.conf`,
    /// not written by the testbed. Meaningful with Tacker only.
    pub fn mgmt_driver_config(&self) -> PathBuf {
        self.run_dir.join("tacker/vnfkeeper-mgmt-driver.conf")
    }

    /// Password of user `admin` (a secret: for clouds.yaml only).
    pub(crate) fn admin_password(&self) -> &str {
        &self.admin_password
    }

    fn spawn(&mut self, name: &'static str, mut cmd: Command) -> anyhow::Result<&mut Proc> {
        let log = self.run_dir.join("logs").join(format!("{name}.log"));
        let out = std::fs::File::create(&log)?;
        cmd.stdout(out.try_clone()?)
            .stderr(out)
            .stdin(Stdio::null())
            .env(TAG_ENV, &self.tag)
            .process_group(0);
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        let pgid = child.id();
        self.procs.push(Proc { name, child, log });
        std::fs::create_dir_all(REGISTRY_DIR)?;
        let mut reg = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(registry(&self.tag))
            .context("recording the process group")?;
        writeln!(reg, "{pgid}")?;
        Ok(self.procs.last_mut().expect("just pushed"))
    }

    fn tagged(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env(TAG_ENV, &self.tag);
        c
    }

    async fn bring_up(
        &mut self,
        ks_venv: &Path,
        heat_venv: &Path,
        tacker_venv: Option<&Path>,
        sim_base: &str,
    ) -> anyhow::Result<()> {
        let dir = self.run_dir.clone();
        let db_port = free_port()?;
        let amqp_port = free_port()?;
        let dist_port = free_port()?;
        let epmd_port = free_port()?;
        let ks_port = free_port()?;
        let heat_port = free_port()?;
        let heat_db_pw = password();
        let heat_pw = password();
        let rabbit_pw = password();
        let tacker = match tacker_venv {
            Some(_) => Some(TackerSecrets {
                port: free_port()?,
                db_password: password(),
                password: password(),
            }),
            None => None,
        };
        self.keystone_url = format!("http://127.0.0.1:{ks_port}/v3");
        self.heat_url = format!("http://127.0.0.1:{heat_port}/v1");

        // MariaDB, RabbitMQ and Keystone's database set-up are independent: run them at once.
        let mysql = dir.join("mysql");
        std::fs::create_dir_all(mysql.join("data"))?;
        let sock = mysql.join("mysqld.sock");
        write_private(
            &mysql.join("my.cnf"),
            &format!(
                "[mysqld]\nuser = root\ndatadir = {d}\nsocket = {s}\npid-file = {m}/mysqld.pid\nbind-address = 127.0.0.1\nport = {db_port}\nskip-name-resolve\nskip-log-bin\ninnodb_buffer_pool_size = 64M\ninnodb_log_file_size = 16M\ninnodb_flush_log_at_trx_commit = 2\nlog-error = {m}/error.log\n",
                d = mysql.join("data").display(),
                s = sock.display(),
                m = mysql.display(),
            ),
        )?;
        let mut install = self.tagged("mariadb-install-db");
        install
            .arg(format!(
                "--defaults-file={}",
                mysql.join("my.cnf").display()
            ))
            .args([
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ]);
        let install_log = dir.join("logs/mariadb-install-db.log");
        let install_db = run_logged(install, "mariadb-install-db", &install_log);

        let rabbit = dir.join("rabbit");
        std::fs::create_dir_all(rabbit.join("mnesia"))?;
        std::fs::create_dir_all(rabbit.join("log"))?;
        std::fs::write(rabbit.join("enabled_plugins"), "[].\n")?;
        write_private(
            &rabbit.join("rabbitmq.conf"),
            &format!(
                "listeners.tcp.default = 127.0.0.1:{amqp_port}\nloopback_users.guest = true\ndefault_user = heat\ndefault_pass = {rabbit_pw}\n"
            ),
        )?;

        let ks = dir.join("keystone");
        std::fs::create_dir_all(&ks)?;
        let ks_conf = ks.join("keystone.conf");
        write_private(
            &ks_conf,
            &format!(
                "[DEFAULT]\nlog_file = {logs}/keystone.log\n[database]\nconnection = sqlite:///{k}/keystone.db\n[token]\nprovider = fernet\n[fernet_tokens]\nkey_repository = {k}/fernet-keys\n[credential]\nkey_repository = {k}/credential-keys\n[cache]\nenabled = false\n[identity]\npassword_hash_rounds = 4\n",
                logs = dir.join("logs").display(),
                k = ks.display()
            ),
        )?;
        let manage = ks_venv.join("bin/keystone-manage");
        let ks_setup = {
            let steps: Vec<(Vec<String>, &'static str)> = vec![
                (
                    vec![
                        "fernet_setup".into(),
                        "--keystone-user".into(),
                        "root".into(),
                        "--keystone-group".into(),
                        "root".into(),
                    ],
                    "keystone-manage fernet_setup",
                ),
                (
                    vec![
                        "credential_setup".into(),
                        "--keystone-user".into(),
                        "root".into(),
                        "--keystone-group".into(),
                        "root".into(),
                    ],
                    "keystone-manage credential_setup",
                ),
                (vec!["db_sync".into()], "keystone-manage db_sync"),
                (
                    vec![
                        "bootstrap".into(),
                        "--bootstrap-admin-url".into(),
                        self.keystone_url.clone(),
                        "--bootstrap-internal-url".into(),
                        self.keystone_url.clone(),
                        "--bootstrap-public-url".into(),
                        self.keystone_url.clone(),
                        "--bootstrap-region-id".into(),
                        REGION.into(),
                    ],
                    "keystone-manage bootstrap",
                ),
            ];
            let cmds: Vec<(Command, &'static str, PathBuf)> = steps
                .into_iter()
                .enumerate()
                .map(|(i, (args, what))| {
                    let mut c = self.tagged(&manage);
                    c.arg("--config-file").arg(&ks_conf).args(args);
                    // bootstrap reads the admin password from the environment (never argv)
                    c.env("OS_BOOTSTRAP_PASSWORD", &self.admin_password);
                    (c, what, dir.join(format!("logs/keystone-manage-{i}.log")))
                })
                .collect();
            async move {
                for (c, what, log) in cmds {
                    run_logged(c, what, &log).await?;
                }
                anyhow::Ok(())
            }
        };

        let mut rabbit_cmd = self.tagged("/usr/lib/rabbitmq/bin/rabbitmq-server");
        rabbit_cmd
            .env("HOME", &rabbit)
            .env("RABBITMQ_NODENAME", "rabbit@localhost")
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env("ERL_EPMD_PORT", epmd_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_MNESIA_BASE", rabbit.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", rabbit.join("log"))
            .env("RABBITMQ_PID_FILE", rabbit.join("rabbit.pid"))
            .env(
                "RABBITMQ_ENABLED_PLUGINS_FILE",
                rabbit.join("enabled_plugins"),
            )
            .env("RABBITMQ_CONFIG_FILE", rabbit.join("rabbitmq"))
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            );
        self.spawn("rabbitmq", rabbit_cmd)?;

        let (a, b) = tokio::join!(install_db, ks_setup);
        a?;
        b?;
        let p = self
            .procs
            .iter_mut()
            .find(|p| p.name == "rabbitmq")
            .context("rabbitmq process")?;
        wait_port(p, amqp_port, Duration::from_secs(60)).await?;

        let mut db_cmd = self.tagged("mariadbd");
        db_cmd.arg(format!(
            "--defaults-file={}",
            mysql.join("my.cnf").display()
        ));
        let p = self.spawn("mariadbd", db_cmd)?;
        wait_port(p, db_port, Duration::from_secs(60)).await?;

        let mut ks_cmd = self.tagged(ks_venv.join("bin/gunicorn"));
        std::fs::write(
            ks.join("ks_wsgi.py"),
            "# keystone's oslo.config parses sys.argv: hide gunicorn's arguments from it\nimport sys\nsys.argv = sys.argv[:1]\nfrom keystone.wsgi.api import application  # noqa: E402,F401\n",
        )?;
        // One thread: Keystone's database is SQLite, whose writers lock each other out (an
        // Internal Server Error under load when a lock outlasts the busy timeout).
        ks_cmd
            .env("OS_KEYSTONE_CONFIG_FILES", &ks_conf)
            .env("PYTHONPATH", &ks)
            .args(["-w", "1", "--threads", "1", "-b"])
            .arg(format!("127.0.0.1:{ks_port}"))
            .arg("--control-socket")
            .arg(ks.join("gunicorn.ctl"))
            .arg("ks_wsgi:application");
        let url = self.keystone_url.clone();
        let p = self.spawn("keystone", ks_cmd)?;
        wait_http(p, &url, Duration::from_secs(60)).await?;

        // Heat's database (SQL on stdin: the password never shows in a process list).
        let mut sql = self.tagged("mariadb");
        sql.arg(format!("--socket={}", sock.display()))
            .arg("--user=root")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = sql.spawn().context("starting the mariadb client")?;
        let mut statements = format!(
            "CREATE DATABASE heat CHARACTER SET utf8;\nCREATE USER 'heat'@'127.0.0.1' IDENTIFIED BY '{heat_db_pw}';\nGRANT ALL PRIVILEGES ON heat.* TO 'heat'@'127.0.0.1';\n"
        );
        if let Some(t) = &tacker {
            statements.push_str(&format!(
                "CREATE DATABASE tacker CHARACTER SET utf8;\nCREATE USER 'tacker'@'127.0.0.1' IDENTIFIED BY '{}';\nGRANT ALL PRIVILEGES ON tacker.* TO 'tacker'@'127.0.0.1';\n",
                t.db_password
            ));
        }
        child
            .stdin
            .take()
            .context("mariadb stdin")?
            .write_all(statements.as_bytes())?;
        let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await??;
        anyhow::ensure!(
            out.status.success(),
            "creating Heat's (and Tacker's) database: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        let admin = self
            .register(sim_base, &heat_pw, heat_port, tacker.as_ref())
            .await?;
        self.admin_project_id = admin;

        let heat = dir.join("heat");
        std::fs::create_dir_all(&heat)?;
        let etc = heat_venv.join("etc/heat");
        std::fs::copy(etc.join("api-paste.ini"), heat.join("api-paste.ini"))?;
        std::fs::create_dir_all(heat.join("environment.d"))?;
        std::fs::copy(
            etc.join("environment.d/default.yaml"),
            heat.join("environment.d/default.yaml"),
        )?;
        let ks_base = self.keystone_url.trim_end_matches("/v3");
        let heat_conf = heat.join("heat.conf");
        write_private(
            &heat_conf,
            &format!(
                "[DEFAULT]
environment_dir = {h}/environment.d
transport_url = rabbit://heat:{rabbit_pw}@127.0.0.1:{amqp_port}/
num_engine_workers = 1
host = testbed
heat_metadata_server_url = http://127.0.0.1:{heat_port}
heat_waitcondition_server_url = http://127.0.0.1:{heat_port}/v1/waitcondition
region_name_for_services = {REGION}
convergence_engine = true
[database]
connection = mysql+pymysql://heat:{heat_db_pw}@127.0.0.1:{db_port}/heat?charset=utf8
[keystone_authtoken]
www_authenticate_uri = {ku}
auth_url = {ku}
auth_type = password
username = heat
password = {heat_pw}
project_name = service
user_domain_name = Default
project_domain_name = Default
[trustee]
auth_type = password
auth_url = {ku}
username = heat
password = {heat_pw}
user_domain_name = Default
[clients_keystone]
auth_uri = {ks_base}
[oslo_messaging_notifications]
driver = noop
[oslo_policy]
enforce_new_defaults = false
enforce_scope = false
[paste_deploy]
api_paste_config = {h}/api-paste.ini
[revision]
heat_revision = {revision}
",
                h = heat.display(),
                revision = installed_version(heat_venv, "openstack_heat")?,
                ku = self.keystone_url,
            ),
        )?;
        let mut sync = self.tagged(heat_venv.join("bin/heat-manage"));
        sync.arg("--config-file").arg(&heat_conf).arg("db_sync");
        run_logged(
            sync,
            "heat-manage db_sync",
            &dir.join("logs/heat-db-sync.log"),
        )
        .await?;

        let mut engine = self.tagged(heat_venv.join("bin/heat-engine"));
        engine.arg("--config-file").arg(&heat_conf);
        self.spawn("heat-engine", engine)?;

        std::fs::write(
            heat.join("heat_wsgi.py"),
            format!(
                "# heat's oslo.config parses sys.argv: give it its configuration file instead of gunicorn's arguments\nimport sys\nsys.argv = [sys.argv[0], '--config-file', '{}']\nfrom heat.wsgi.api import application  # noqa: E402,F401\n",
                heat_conf.display()
            ),
        )?;
        let mut api = self.tagged(heat_venv.join("bin/gunicorn"));
        api.env("PYTHONPATH", &heat)
            .args(["-w", "1", "--threads", "4", "-b"])
            .arg(format!("127.0.0.1:{heat_port}"))
            .arg("--control-socket")
            .arg(heat.join("gunicorn.ctl"))
            .arg("heat_wsgi:application");
        let p = self.spawn("heat-api", api)?;
        wait_http(
            p,
            &format!("http://127.0.0.1:{heat_port}/"),
            Duration::from_secs(60),
        )
        .await?;
        self.wait_engine().await?;
        if let (Some(venv), Some(t)) = (tacker_venv, &tacker) {
            let bus = Bus {
                amqp_port,
                password: &rabbit_pw,
                dir: &rabbit,
                epmd_port,
            };
            self.bring_up_tacker(venv, t, db_port, &bus).await?;
        }
        Ok(())
    }

    /// Tacker's configuration, database migration, `tacker-server` and `tacker-conductor`
    /// (after Keystone, MariaDB and RabbitMQ are up and Tacker's user and database exist).
    async fn bring_up_tacker(
        &mut self,
        venv: &Path,
        t: &TackerSecrets,
        db_port: u16,
        bus: &Bus<'_>,
    ) -> anyhow::Result<()> {
        let dir = self.run_dir.join("tacker");
        for d in ["state", "vnfpackages", "csar_files", "lock"] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        std::fs::copy(
            venv.join("etc/tacker/api-paste.ini"),
            dir.join("api-paste.ini"),
        )
        .context("copying Tacker's api-paste.ini")?;
        let port = t.port;
        let url = format!("http://127.0.0.1:{port}");
        let conf = dir.join("tacker.conf");
        write_private(
            &conf,
            &format!(
                "[DEFAULT]
auth_strategy = keystone
bind_host = 127.0.0.1
bind_port = {port}
api_paste_config = {d}/api-paste.ini
transport_url = rabbit://heat:{rabbit_pw}@127.0.0.1:{amqp_port}/
state_path = {d}/state
host = testbed
# oslo.service's wait for running requests at SIGTERM (default 60 s)
graceful_shutdown_timeout = 5
[database]
connection = mysql+pymysql://tacker:{db_pw}@127.0.0.1:{db_port}/tacker?charset=utf8
[keystone_authtoken]
www_authenticate_uri = {ku}
auth_url = {ku}
auth_type = password
username = tacker
password = {pw}
project_name = service
user_domain_name = Default
project_domain_name = Default
[oslo_policy]
enforce_new_defaults = false
enforce_scope = false
[oslo_concurrency]
lock_path = {d}/lock
[vnf_package]
vnf_package_csar_path = {d}/vnfpackages
[glance_store]
stores = file
default_store = file
filesystem_store_datadir = {d}/csar_files
[vnf_lcm]
endpoint_url = {url}/
[v2_vnfm]
endpoint = {url}
",
                d = dir.display(),
                rabbit_pw = bus.password,
                amqp_port = bus.amqp_port,
                db_pw = t.db_password,
                pw = t.password,
                ku = self.keystone_url,
            ),
        )?;
        let mut migrate = self.tagged(venv.join("bin/tacker-db-manage"));
        migrate
            .arg("--config-file")
            .arg(&conf)
            .args(["upgrade", "head"]);
        run_logged(
            migrate,
            "tacker-db-manage upgrade head",
            &self.run_dir.join("logs/tacker-db-manage.log"),
        )
        .await?;
        let mut cond = self.tagged(venv.join("bin/tacker-conductor"));
        // The conductor runs the package's MgmtDriver scripts; vnfkeeper's reads its settings
        // from this file (written by whoever runs the vnfkeeper daemon, e.g. scripts/demo tacker).
        cond.arg("--config-file")
            .arg(&conf)
            .env("VNFKEEPER_MGMT_DRIVER_CONFIG", self.mgmt_driver_config());
        self.spawn("tacker-conductor", cond)?;
        let mut server = self.tagged(venv.join("bin/tacker-server"));
        server.arg("--config-file").arg(&conf);
        let p = self.spawn("tacker-server", server)?;
        wait_http(p, &format!("{url}/"), Duration::from_secs(90)).await?;
        self.wait_conductor(bus).await?;
        self.tacker_url = Some(url);
        Ok(())
    }

    /// Waits until `tacker-conductor` consumes its RPC queues (`TACKER_CONDUCTOR` and
    /// `TACKER_CONDUCTOR_V2`, as `rabbitmqctl list_queues` reports them): tacker-server casts
    /// to them, and a cast before a consumer's queue exists is dropped by RabbitMQ.
    async fn wait_conductor(&mut self, bus: &Bus<'_>) -> anyhow::Result<()> {
        let t0 = Instant::now();
        loop {
            let mut ctl = self.tagged("/usr/lib/rabbitmq/bin/rabbitmqctl");
            ctl.env("HOME", bus.dir)
                .env("RABBITMQ_NODENAME", "rabbit@localhost")
                .env("ERL_EPMD_PORT", bus.epmd_port.to_string())
                .args(["-q", "list_queues", "name", "consumers"])
                .stdin(Stdio::null())
                .stderr(Stdio::null());
            let out = tokio::task::spawn_blocking(move || ctl.output()).await??;
            let text = String::from_utf8_lossy(&out.stdout);
            let consumed = |q: &str| {
                text.lines().any(|l| {
                    let mut f = l.split_whitespace();
                    f.next() == Some(q) && f.next().and_then(|n| n.parse::<u32>().ok()) > Some(0)
                })
            };
            if consumed("TACKER_CONDUCTOR") && consumed("TACKER_CONDUCTOR_V2") {
                return Ok(());
            }
            for p in &mut self.procs {
                if let Some(st) = p.child.try_wait()? {
                    bail!("{} exited ({st}):\n{}", p.name, tail(&p.log, 20));
                }
            }
            if t0.elapsed() > Duration::from_secs(90) {
                bail!(
                    "tacker-conductor consumed no RPC queue within 90 s:\n{}",
                    self.procs
                        .iter()
                        .find(|p| p.name == "tacker-conductor")
                        .map(|p| tail(&p.log, 20))
                        .unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// An admin token (project `admin`) and its catalog from the real Keystone.
    pub async fn admin_token(&self) -> anyhow::Result<(String, Value)> {
        issue_token(
            &reqwest::Client::new(),
            &self.keystone_url,
            "admin",
            &self.admin_password,
            "admin",
        )
        .await
    }

    /// Waits until heat-engine answers over RPC (`GET /v1/{project}/build_info` names its
    /// revision only once the engine replied).
    async fn wait_engine(&mut self) -> anyhow::Result<()> {
        let (token, _) = self.admin_token().await?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let url = format!("{}/{}/build_info", self.heat_url, self.admin_project_id);
        let t0 = Instant::now();
        loop {
            if let Ok(r) = client.get(&url).header("x-auth-token", &token).send().await
                && r.status().is_success()
                && let Ok(v) = r.json::<Value>().await
                && v["engine"]["revision"].is_string()
            {
                return Ok(());
            }
            for p in &mut self.procs {
                if let Some(st) = p.child.try_wait()? {
                    bail!("{} exited ({st}):\n{}", p.name, tail(&p.log, 20));
                }
            }
            if t0.elapsed() > Duration::from_secs(90) {
                bail!("heat-engine did not answer build_info within 90 s");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Keystone registrations for Heat and the simulated services; returns the `admin`
    /// project's id.
    async fn register(
        &self,
        sim_base: &str,
        heat_pw: &str,
        heat_port: u16,
        tacker: Option<&TackerSecrets>,
    ) -> anyhow::Result<String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let (token, body) = self.admin_token().await?;
        let admin_project = body["token"]["project"]["id"]
            .as_str()
            .context("admin token without project")?
            .to_string();
        let admin_user = body["token"]["user"]["id"]
            .as_str()
            .context("admin token without user")?
            .to_string();
        let ks = KsAdmin {
            client: &client,
            url: &self.keystone_url,
            token: &token,
        };
        let service = ks
            .post(
                "projects",
                "project",
                json!({"name": "service", "domain_id": "default"}),
            )
            .await?;
        let heat_user = ks
            .post(
                "users",
                "user",
                json!({"name": "heat", "domain_id": "default", "password": heat_pw, "default_project_id": service}),
            )
            .await?;
        let admin_role = ks.find("roles", "admin").await?;
        ks.put(&format!(
            "projects/{service}/users/{heat_user}/roles/{admin_role}"
        ))
        .await?;
        let owner = ks
            .post("roles", "role", json!({"name": "heat_stack_owner"}))
            .await?;
        ks.post("roles", "role", json!({"name": "heat_stack_user"}))
            .await?;
        ks.put(&format!(
            "projects/{admin_project}/users/{admin_user}/roles/{owner}"
        ))
        .await?;
        let mut catalog = simulated_catalog(sim_base);
        catalog.push((
            "orchestration",
            "heat",
            format!("http://127.0.0.1:{heat_port}/v1/%(tenant_id)s"),
        ));
        if let Some(t) = tacker {
            let tacker_user = ks
                .post(
                    "users",
                    "user",
                    json!({"name": "tacker", "domain_id": "default", "password": t.password, "default_project_id": service}),
                )
                .await?;
            ks.put(&format!(
                "projects/{service}/users/{tacker_user}/roles/{admin_role}"
            ))
            .await?;
            catalog.push((
                "nfv-orchestration",
                "tacker",
                format!("http://127.0.0.1:{}", t.port),
            ));
        }
        for (ty, name, url) in catalog {
            let sid = ks
                .post(
                    "services",
                    "service",
                    json!({"type": ty, "name": name, "enabled": true}),
                )
                .await?;
            for iface in ["public", "internal", "admin"] {
                ks.post(
                    "endpoints",
                    "endpoint",
                    json!({"service_id": sid, "interface": iface, "url": url, "region_id": REGION, "enabled": true}),
                )
                .await?;
            }
        }
        Ok(admin_project)
    }

    /// Stops every process (see the module documentation for the order) and waits for them.
    pub async fn stop(mut self) {
        tokio::task::spawn_blocking(move || self.stop_blocking())
            .await
            .ok();
    }

    fn stop_blocking(&mut self) {
        let order = [
            "tacker-server",
            "tacker-conductor",
            "heat-api",
            "heat-engine",
            "keystone",
            "rabbitmq",
            "mariadbd",
        ];
        let mut procs = std::mem::take(&mut self.procs);
        procs.sort_by_key(|p| order.iter().position(|n| *n == p.name).unwrap_or(0));
        for mut p in procs {
            let pg = Pid::from_raw(p.child.id() as i32);
            let _ = killpg(pg, Signal::SIGTERM);
            let t0 = Instant::now();
            loop {
                if matches!(p.child.try_wait(), Ok(Some(_))) && killpg(pg, None).is_err() {
                    tracing::debug!("{} stopped in {:.1} s", p.name, t0.elapsed().as_secs_f64());
                    break;
                }
                if t0.elapsed() > Duration::from_secs(15) {
                    tracing::warn!("{} did not stop within 15 s: SIGKILL", p.name);
                    let _ = killpg(pg, Signal::SIGKILL);
                    let _ = p.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        // epmd daemonizes out of RabbitMQ's process group; anything else tagged goes too.
        kill_tagged_blocking(&self.tag);
    }

    /// Resident memory of the control plane's processes now, in KiB (every member of each
    /// process group, and tagged processes outside them).
    pub fn rss_kib(&self) -> u64 {
        let groups: Vec<i32> = self.procs.iter().map(|p| p.child.id() as i32).collect();
        let mut pids = tagged_pids(&self.tag);
        pids.extend(pids_in_groups(&groups));
        pids.sort_unstable();
        pids.dedup();
        pids.iter()
            .filter_map(|p| {
                let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
                let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .sum()
    }
}

impl Drop for RealControlPlane {
    fn drop(&mut self) {
        if !self.procs.is_empty() {
            self.stop_blocking();
        }
    }
}

/// Issues a password token scoped to `project` (domain Default); returns it and the token body.
pub(crate) async fn issue_token(
    client: &reqwest::Client,
    keystone_url: &str,
    user: &str,
    password: &str,
    project: &str,
) -> anyhow::Result<(String, Value)> {
    let r = client
        .post(format!("{keystone_url}/auth/tokens"))
        .json(&json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {"name": user, "domain": {"id": "default"}, "password": password}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}
        }}))
        .send()
        .await
        .context("POST /v3/auth/tokens")?;
    anyhow::ensure!(
        r.status().as_u16() == 201,
        "Keystone refused the {user} token: {}",
        r.status()
    );
    let token = r
        .headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .context("no X-Subject-Token")?
        .to_string();
    Ok((token, r.json().await?))
}

/// Keystone admin calls with one token.
struct KsAdmin<'a> {
    client: &'a reqwest::Client,
    url: &'a str,
    token: &'a str,
}

impl KsAdmin<'_> {
    /// `POST /v3/{coll}` with `{key: body}`; returns the new id.
    async fn post(&self, coll: &str, key: &str, body: Value) -> anyhow::Result<String> {
        let r = self
            .client
            .post(format!("{}/{coll}", self.url))
            .header("x-auth-token", self.token)
            .json(&json!({ key: body }))
            .send()
            .await
            .with_context(|| format!("POST /v3/{coll}"))?;
        let st = r.status();
        let v: Value = r.json().await.unwrap_or_default();
        anyhow::ensure!(
            st.is_success(),
            "POST /v3/{coll}: {st} {}",
            v["error"]["message"]
        );
        v[key]["id"]
            .as_str()
            .map(String::from)
            .with_context(|| format!("POST /v3/{coll}: no id"))
    }

    async fn put(&self, path: &str) -> anyhow::Result<()> {
        let r = self
            .client
            .put(format!("{}/{path}", self.url))
            .header("x-auth-token", self.token)
            .send()
            .await
            .with_context(|| format!("PUT /v3/{path}"))?;
        anyhow::ensure!(r.status().is_success(), "PUT /v3/{path}: {}", r.status());
        Ok(())
    }

    /// The id of the one `coll` entry named `name`.
    async fn find(&self, coll: &str, name: &str) -> anyhow::Result<String> {
        let v: Value = self
            .client
            .get(format!("{}/{coll}", self.url))
            .query(&[("name", name)])
            .header("x-auth-token", self.token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        v[coll][0]["id"]
            .as_str()
            .map(String::from)
            .with_context(|| format!("no {coll} named {name}"))
    }
}

/// Validates tokens of the real Keystone for the simulated services (`GET /v3/auth/tokens`
/// with the admin token as `X-Auth-Token` and the token to check as `X-Subject-Token`, the
/// call keystonemiddleware makes), caching each valid token until it expires.
pub struct TokenCheck {
    client: reqwest::Client,
    keystone_url: String,
    admin_password: String,
    admin_token: tokio::sync::Mutex<Option<String>>,
    valid: Mutex<HashMap<String, DateTime<Utc>>>,
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCheck")
            .field("keystone_url", &self.keystone_url)
            .finish()
    }
}

impl TokenCheck {
    /// A checker against `plane`'s Keystone.
    pub fn new(plane: &RealControlPlane) -> anyhow::Result<TokenCheck> {
        Ok(TokenCheck {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            keystone_url: plane.keystone_url.clone(),
            admin_password: plane.admin_password.clone(),
            admin_token: tokio::sync::Mutex::new(None),
            valid: Mutex::new(HashMap::new()),
        })
    }

    /// Whether Keystone says `token` is valid now (a Keystone that cannot be asked: not valid).
    pub async fn is_valid(&self, token: &str) -> bool {
        if token.is_empty() || token.len() > 1024 {
            return false;
        }
        let now = Utc::now();
        if self
            .valid
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .is_some_and(|exp| *exp > now)
        {
            return true;
        }
        for _ in 0..2 {
            let mut admin = self.admin_token.lock().await;
            if admin.is_none() {
                match issue_token(
                    &self.client,
                    &self.keystone_url,
                    "admin",
                    &self.admin_password,
                    "admin",
                )
                .await
                {
                    Ok((t, _)) => *admin = Some(t),
                    Err(e) => {
                        tracing::warn!("token check: {e:#}");
                        return false;
                    }
                }
            }
            let Some(a) = admin.clone() else { return false };
            drop(admin);
            let r = self
                .client
                .get(format!("{}/auth/tokens", self.keystone_url))
                .header("x-auth-token", a)
                .header("x-subject-token", token)
                .send()
                .await;
            let Ok(r) = r else { return false };
            match r.status().as_u16() {
                200 => {
                    let v: Value = r.json().await.unwrap_or_default();
                    let exp = v["token"]["expires_at"]
                        .as_str()
                        .and_then(|e| DateTime::parse_from_rfc3339(e).ok())
                        .map(|e| e.with_timezone(&Utc))
                        .unwrap_or(now);
                    self.valid
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(token.to_string(), exp);
                    return exp > now;
                }
                // our own admin token expired: issue a new one and ask again
                401 => *self.admin_token.lock().await = None,
                _ => return false,
            }
        }
        false
    }
}

/// Pids of the processes whose environment has [`TAG_ENV`] = `tag`.
fn tagged_pids(tag: &str) -> Vec<i32> {
    let want = format!("{TAG_ENV}={tag}");
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| *pid != me)
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/environ"))
                        .map(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
                        .unwrap_or(false)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The process-group list of the control plane tagged `tag`.
fn registry(tag: &str) -> PathBuf {
    Path::new(REGISTRY_DIR).join(format!("{tag}.pgids"))
}

/// Pids whose process group is one of `groups` (field 5 of `/proc/<pid>/stat`).
fn pids_in_groups(groups: &[i32]) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .ok()
                        .and_then(|st| {
                            // after "pid (comm) state ppid": comm may hold spaces
                            let rest = &st[st.rfind(')')? + 2..];
                            rest.split_whitespace().nth(2)?.parse::<i32>().ok()
                        })
                        .is_some_and(|pg| groups.contains(&pg))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn kill_tagged_blocking(tag: &str) -> Vec<i32> {
    let mut killed = Vec::new();
    let path = registry(tag);
    let groups: Vec<i32> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .filter(|g| *g > 1)
        .collect();
    for _ in 0..50 {
        let mut pids = tagged_pids(tag);
        pids.extend(pids_in_groups(&groups));
        if pids.is_empty() {
            break;
        }
        for p in pids {
            if nix::sys::signal::kill(Pid::from_raw(p), Signal::SIGKILL).is_ok()
                && !killed.contains(&p)
            {
                killed.push(p);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(&path);
    killed
}

/// Kills (SIGKILL) every process of a real control plane tagged `tag` that is still running
/// (a crashed run's leftovers); returns their pids.
pub async fn kill_tagged(tag: &str) -> Vec<i32> {
    let tag = tag.to_string();
    tokio::task::spawn_blocking(move || kill_tagged_blocking(&tag))
        .await
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::installed_version;

    #[test]
    fn installed_version_reads_the_dist_info_name() {
        let d = tempfile::tempdir().unwrap();
        let sp = d.path().join("lib/python3.11/site-packages");
        std::fs::create_dir_all(sp.join("openstack_heat-27.0.1.dist-info")).unwrap();
        std::fs::create_dir_all(sp.join("openstack_heatclient-5.3.0.dist-info")).unwrap();
        std::fs::create_dir_all(sp.join("heat")).unwrap();
        assert_eq!(
            installed_version(d.path(), "openstack_heat").unwrap(),
            "27.0.1"
        );
        assert!(installed_version(d.path(), "keystone").is_err());
        // a name an INI file would misread is no version
        std::fs::create_dir_all(sp.join("keystone-30\nx=1.dist-info")).unwrap();
        assert!(installed_version(d.path(), "keystone").is_err());
    }
}
