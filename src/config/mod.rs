//! Configuration: the TOML file (`/etc/vnfkeeper/vnfkeeper.toml`) parsed strictly into validated [`Settings`].
//!
//! Every key is documented in `packaging/vnfkeeper.toml`. Unknown keys are errors. An invalid
//! file makes the daemon exit with [`EXIT_CONFIG`] (78, `EX_CONFIG`), which the unit's
//! `RestartPreventExitStatus=78` turns into "no restart loop".

mod file;
pub mod schedule;
pub mod tacker;

use std::path::{Path, PathBuf};
use std::time::Duration;

use file::{
    CloudFile, File, HaFile, LimitsFile, MaxUnhealthyFile, MetricsFile, ReconcileFile, TackerFile,
};
use schedule::parse_schedule;
use tacker::TackerSettings;

/// Exit status for configuration errors (sysexits.h `EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;

/// Default path of the configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/vnfkeeper/vnfkeeper.toml";

/// Directory of the configuration files: `vnfkeeper.toml`, and `<shard>.toml` per shard.
pub const CONFIG_DIR: &str = "/etc/vnfkeeper";

/// The `--config` option shared by every command (clap arguments; `VNFKEEPER_CONFIG` in the
/// environment, else the global `--shard NAME`'s `/etc/vnfkeeper/NAME.toml`, else
/// [`DEFAULT_CONFIG_PATH`]; the CLI sets the shard's default before it parses, see
/// `cli::parse`).
#[derive(Debug, clap::Args)]
pub struct ConfigArg {
    /// Configuration file.
    #[arg(long, env = "VNFKEEPER_CONFIG", default_value = DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
}

/// The name of a shard: one daemon with its own configuration `/etc/vnfkeeper/<name>.toml`,
/// state directory, spool and clouds (the systemd instance of `vnfkeeper@<name>.service`).
/// Syntax `[a-z0-9][a-z0-9-]{0,31}`: a file name, a systemd instance name and a Pacemaker
/// resource id suffix without escaping.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shard(String);

impl Shard {
    /// Longest name, in bytes.
    pub const MAX_LEN: usize = 32;

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shard's configuration file, `/etc/vnfkeeper/<name>.toml`.
    pub fn config_path(&self) -> PathBuf {
        Path::new(CONFIG_DIR).join(format!("{}.toml", self.0))
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// Errors: the name does not match `[a-z0-9][a-z0-9-]{0,31}` (the message says why, and
    /// repeats the name only when it is of that alphabet).
    fn from_str(s: &str) -> Result<Self, String> {
        let first_ok = s
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = s
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if s.len() > Self::MAX_LEN {
            return Err(format!(
                "a shard name has at most {} characters",
                Self::MAX_LEN
            ));
        }
        if !first_ok || !rest_ok {
            return Err(
                "a shard name is 1 to 32 of a-z, 0-9 and '-', starting with a letter or digit"
                    .into(),
            );
        }
        Ok(Self(s.to_owned()))
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A configuration problem: which file, which key, why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax error, wrong type, or unknown key (the message names the key and line).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key.
        message: String,
    },
    /// A value parsed but is not acceptable.
    #[error("{path}: `{key}`: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Dotted key, e.g. `reconcile.schedule`.
        key: String,
        /// Why.
        reason: String,
    },
}

/// Validated settings with every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Spool root holding `tmp/`, `new/`, `accepted/`, `rejected/`. Default `/var/spool/vnfkeeper`.
    pub spool_dir: PathBuf,
    /// SQLite database file. Default `/var/lib/vnfkeeper/state.db`.
    pub database: PathBuf,
    /// Directory against which a relative `vnfPackage` in an envelope is resolved.
    /// Default `/var/lib/vnfkeeper/packages`.
    pub packages_dir: PathBuf,
    /// The OpenStack cloud; `None` means operations are accepted but wait in `STARTING`.
    pub cloud: Option<CloudSettings>,
    /// Periodic observe-and-heal pass.
    pub reconcile: ReconcileSettings,
    /// Concurrency limits and timeouts.
    pub limits: Limits,
    /// Spool intake tuning.
    pub intake: IntakeSettings,
    /// The Prometheus endpoint (`[metrics]`).
    pub metrics: MetricsSettings,
    /// Companion mode with OpenStack Tacker (`[tacker]`); `None`: off.
    pub tacker: Option<TackerSettings>,
    /// High-availability mode (`[ha]`): the shard runs under a cluster manager (Pacemaker) on a
    /// file system that moves between nodes. `None`: a single machine.
    pub ha: Option<HaSettings>,
}

/// `[ha]`: what the daemon requires of itself when a cluster manager moves its shard between
/// nodes (README "Beyond one machine").
///
/// In this mode the daemon refuses to start (exit 78) unless `require_mount` is a mount point
/// and the database already exists there (a missing database means the shard's file system is
/// not mounted, not that the data is gone: it is never created, only `vnfkeeper db init` makes
/// one), and it runs SQLite with `synchronous=FULL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaSettings {
    /// The mount point of the shard's file system (e.g. `/srv/vnfkeeper/edge-1`); `database`
    /// and `spool_dir` must lie below it. Absolute.
    pub require_mount: PathBuf,
}

/// The opt-in Prometheus endpoint (`[metrics]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetricsSettings {
    /// `listen = "ADDR:PORT"`: where `GET /metrics` is served (OpenMetrics text). `None` (the
    /// key absent, the default): no endpoint, no listening socket. A literal IP address and a
    /// port, e.g. `127.0.0.1:9464` or `[::1]:9464`; host names are refused so that the daemon
    /// never resolves names to decide where it listens.
    pub listen: Option<std::net::SocketAddr>,
    /// `status_page = true`: the same listener also serves the read-only status page
    /// (`GET /status`, `GET /status/vnf/ID`: the fleet and one VNF's timeline, HTML and SVG).
    /// Default false (off); it needs `listen`.
    pub status_page: bool,
}

/// Which cloud to use, the OpenStack way: an entry of a `clouds.yaml` file.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudSettings {
    /// The clouds.yaml file. Default `/etc/openstack/clouds.yaml`.
    pub clouds_yaml: PathBuf,
    /// Entry name under `clouds:`.
    pub cloud: String,
    /// Timeout of every API request. Default 30 s.
    pub api_timeout: Duration,
}

/// When the reconcile pass runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconcileSettings {
    /// Whether passes run on the schedule (`vnfkeeper reconcile --now` works either way). Default true.
    pub enabled: bool,
    /// The schedule as written (5-field crontab or 6/7-field with seconds). Default `*/5 * * * *`.
    pub schedule_text: String,
    /// The parsed schedule (UTC).
    pub schedule: schedule::Schedule,
    /// Cloud-only passes (list calls, no SSH) run this often. Default 15 s.
    pub cloud_interval: Duration,
    /// The fast observation (one Nova `GET /servers/detail?changes-since=…` per poll, whatever
    /// the number of servers) runs this often; `None` (`changes_since_interval_secs = 0`): off.
    /// Default 2 s, at most 3600 s.
    pub changes_since_interval: Option<Duration>,
    /// Remediation policy (grace, startup grace, max_unhealthy, retry budget and backoff,
    /// min healthy period).
    pub policy: vnfkeeper_core::policy::Policy,
    /// Longest one SSH probe may take. Default 30 s.
    pub probe_timeout: Duration,
}

/// Concurrency limits and timeouts.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Hosts one step may configure at once. Default 16, 1–1024.
    pub max_parallel_hosts: u32,
    /// Operations (of different VNF instances) running at once. Default 4, 1–256.
    pub max_parallel_operations: u32,
    /// SSH connect timeout. Default 10 s.
    pub ssh_connect_timeout: Duration,
    /// Longest a single remote command may run, enforced on the remote side too. Default 900 s.
    pub command_timeout: Duration,
}

/// Spool intake tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct IntakeSettings {
    /// Full rescan of `new/` besides inotify events. Default 30 s.
    pub rescan_interval: Duration,
    /// Most files committed in one SQLite transaction. Default 256, 1–10000.
    pub batch_size: u32,
}

impl Settings {
    /// The package store, `package-store/` next to the database: snapshots of accepted
    /// requests' VNF packages (`intake::snapshot`).
    pub fn package_store(&self) -> PathBuf {
        self.database
            .parent()
            .unwrap_or(Path::new("/"))
            .join("package-store")
    }

    /// Reads and validates a configuration file. Errors: [`ConfigError`] naming the key.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Validates configuration text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            message: e.to_string(),
        })?;
        let r = Reader { path };
        let cloud = match file.cloud {
            None => None,
            Some(c) => Some(r.cloud(c)?),
        };
        let schedule_text = file
            .reconcile
            .schedule
            .clone()
            .unwrap_or_else(|| "*/5 * * * *".into());
        let schedule = parse_schedule(&schedule_text)
            .map_err(|e| r.invalid("reconcile.schedule", e.to_string()))?;
        Ok(Settings {
            spool_dir: r.absolute("spool_dir", file.spool_dir, "/var/spool/vnfkeeper")?,
            database: r.absolute("database", file.database, "/var/lib/vnfkeeper/state.db")?,
            packages_dir: r.absolute(
                "packages_dir",
                file.packages_dir,
                "/var/lib/vnfkeeper/packages",
            )?,
            cloud: cloud.clone(),
            reconcile: r.reconcile(&file.reconcile, schedule_text, schedule)?,
            limits: r.limits(&file.limits)?,
            intake: IntakeSettings {
                rescan_interval: r.secs(
                    "intake.rescan_interval_secs",
                    file.intake.rescan_interval_secs,
                    30,
                    86_400,
                )?,
                batch_size: r.count("intake.batch_size", file.intake.batch_size, 256, 10_000)?,
            },
            metrics: MetricsSettings {
                listen: match file.metrics.listen.clone() {
                    None => None,
                    Some(text) => Some(
                        parse_listen(&text)
                            .map_err(|reason| r.invalid("metrics.listen", reason))?,
                    ),
                },
                status_page: match (file.metrics.status_page, &file.metrics.listen) {
                    (Some(true), None) => {
                        return Err(r.invalid(
                            "metrics.status_page",
                            "the status page is served on metrics.listen, which is not set".into(),
                        ));
                    }
                    (on, _) => on.unwrap_or(false),
                },
            },
            tacker: match file.tacker {
                None => None,
                Some(t) => Some(r.tacker(t, &file.metrics, cloud.as_ref())?),
            },
            ha: None,
        })
        .and_then(|s| {
            let ha = match file.ha {
                None => None,
                Some(h) => Some(r.ha(h, &s)?),
            };
            Ok(Settings { ha, ..s })
        })
    }

    /// The effective settings as TOML, every key present, for `vnfkeeper config check`.
    /// The configuration holds no secrets itself (they live in clouds.yaml).
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        let path = |p: &Path| toml_string(&p.display().to_string());
        out.push_str(&format!("spool_dir = {}\n", path(&self.spool_dir)));
        out.push_str(&format!("database = {}\n", path(&self.database)));
        out.push_str(&format!("packages_dir = {}\n", path(&self.packages_dir)));
        out.push('\n');
        match &self.cloud {
            None => out.push_str("# [cloud] not configured: operations wait in STARTING\n"),
            Some(c) => {
                out.push_str("[cloud]\n");
                out.push_str(&format!("clouds_yaml = {}\n", path(&c.clouds_yaml)));
                out.push_str(&format!("cloud = {}\n", toml_string(&c.cloud)));
                out.push_str(&format!("api_timeout_secs = {}\n", c.api_timeout.as_secs()));
            }
        }
        self.reconcile.write_toml(&mut out);
        self.limits.write_toml(&mut out);
        out.push_str("\n[intake]\n");
        out.push_str(&format!(
            "rescan_interval_secs = {}\n",
            self.intake.rescan_interval.as_secs()
        ));
        out.push_str(&format!("batch_size = {}\n", self.intake.batch_size));
        out.push('\n');
        match &self.metrics.listen {
            None => out.push_str("# [metrics] not configured: no Prometheus endpoint\n"),
            Some(addr) => {
                out.push_str("[metrics]\n");
                out.push_str(&format!("listen = {}\n", toml_string(&addr.to_string())));
                out.push_str(&format!("status_page = {}\n", self.metrics.status_page));
            }
        }
        out.push('\n');
        match &self.tacker {
            None => out.push_str("# [tacker] not configured: no notification endpoint\n"),
            Some(t) => t.write_toml(&mut out),
        }
        out.push('\n');
        match &self.ha {
            None => out.push_str("# [ha] not configured: a single machine\n"),
            Some(h) => {
                out.push_str("[ha]\n");
                out.push_str(&format!("require_mount = {}\n", path(&h.require_mount)));
            }
        }
        out
    }
}

impl ReconcileSettings {
    /// Appends the effective `[reconcile]` section, after a blank line, to `out`.
    fn write_toml(&self, out: &mut String) {
        let r = self;
        let p = &r.policy;
        out.push_str("\n[reconcile]\n");
        out.push_str(&format!("enabled = {}\n", r.enabled));
        out.push_str(&format!("schedule = {}\n", toml_string(&r.schedule_text)));
        out.push_str(&format!(
            "cloud_interval_secs = {}\n",
            r.cloud_interval.as_secs()
        ));
        out.push_str(&format!(
            "changes_since_interval_secs = {}\n",
            r.changes_since_interval.map_or(0, |d| d.as_secs())
        ));
        out.push_str(&format!("grace_secs = {}\n", p.grace.as_secs()));
        out.push_str(&format!(
            "startup_grace_secs = {}\n",
            p.startup_grace.as_secs()
        ));
        out.push_str(&format!(
            "max_unhealthy = {}\n",
            match p.max_unhealthy {
                vnfkeeper_core::policy::MaxUnhealthy::Count(n) => n.to_string(),
                m => toml_string(&m.to_string()),
            }
        ));
        out.push_str(&format!("retry_budget = {}\n", p.retry_budget));
        out.push_str(&format!(
            "retry_backoff_secs = {}\n",
            p.retry_backoff.as_secs()
        ));
        out.push_str(&format!("min_healthy_secs = {}\n", p.min_healthy.as_secs()));
        out.push_str(&format!(
            "probe_timeout_secs = {}\n",
            r.probe_timeout.as_secs()
        ));
    }
}

impl Limits {
    /// Appends the effective `[limits]` section, after a blank line, to `out`.
    fn write_toml(&self, out: &mut String) {
        out.push_str("\n[limits]\n");
        out.push_str(&format!(
            "max_parallel_hosts = {}\n",
            self.max_parallel_hosts
        ));
        out.push_str(&format!(
            "max_parallel_operations = {}\n",
            self.max_parallel_operations
        ));
        out.push_str(&format!(
            "ssh_connect_timeout_secs = {}\n",
            self.ssh_connect_timeout.as_secs()
        ));
        out.push_str(&format!(
            "command_timeout_secs = {}\n",
            self.command_timeout.as_secs()
        ));
    }
}

/// Reads the sections of configuration file `path` into settings: range and path checks with
/// defaults, each error a [`ConfigError::Invalid`] naming the file and the dotted key.
struct Reader<'a> {
    /// The file, named in errors.
    path: &'a Path,
}

impl Reader<'_> {
    /// A [`ConfigError::Invalid`] of `key`.
    fn invalid(&self, key: &str, reason: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.into(),
            key: key.into(),
            reason,
        }
    }

    /// The path `p` of `key` (absent: `default`). Errors: a relative path.
    fn absolute(
        &self,
        key: &str,
        p: Option<PathBuf>,
        default: &str,
    ) -> Result<PathBuf, ConfigError> {
        let p = p.unwrap_or_else(|| PathBuf::from(default));
        if p.is_absolute() {
            Ok(p)
        } else {
            Err(self.invalid(
                key,
                format!("must be an absolute path, got {}", p.display()),
            ))
        }
    }

    /// `v` seconds of `key` (absent: `default`) as a duration. Errors: outside 1..=`max`.
    fn secs(
        &self,
        key: &str,
        v: Option<u64>,
        default: u64,
        max: u64,
    ) -> Result<Duration, ConfigError> {
        let v = v.unwrap_or(default);
        if (1..=max).contains(&v) {
            Ok(Duration::from_secs(v))
        } else {
            Err(self.invalid(key, format!("must be between 1 and {max} seconds, got {v}")))
        }
    }

    /// The count `v` of `key` (absent: `default`). Errors: outside 1..=`max`.
    fn count(&self, key: &str, v: Option<u32>, default: u32, max: u32) -> Result<u32, ConfigError> {
        let v = v.unwrap_or(default);
        if (1..=max).contains(&v) {
            Ok(v)
        } else {
            Err(self.invalid(key, format!("must be between 1 and {max}, got {v}")))
        }
    }

    /// `[cloud]`. Errors: an empty entry name, a relative `clouds_yaml`, a timeout outside
    /// 1–3600 s.
    fn cloud(&self, c: CloudFile) -> Result<CloudSettings, ConfigError> {
        if c.cloud.trim().is_empty() {
            return Err(self.invalid("cloud.cloud", "must name an entry of clouds.yaml".into()));
        }
        Ok(CloudSettings {
            clouds_yaml: self.absolute(
                "cloud.clouds_yaml",
                c.clouds_yaml,
                "/etc/openstack/clouds.yaml",
            )?,
            cloud: c.cloud,
            api_timeout: self.secs("cloud.api_timeout_secs", c.api_timeout_secs, 30, 3600)?,
        })
    }

    /// `[reconcile]`, with its schedule already parsed (`schedule_text`, `schedule`). Errors:
    /// the first key out of range, in the order of [`ReconcileSettings`]'s fields.
    fn reconcile(
        &self,
        f: &ReconcileFile,
        schedule_text: String,
        schedule: schedule::Schedule,
    ) -> Result<ReconcileSettings, ConfigError> {
        Ok(ReconcileSettings {
            enabled: f.enabled.unwrap_or(true),
            schedule_text,
            schedule,
            cloud_interval: self.secs(
                "reconcile.cloud_interval_secs",
                f.cloud_interval_secs,
                15,
                86_400,
            )?,
            changes_since_interval: match f.changes_since_interval_secs {
                Some(0) => None,
                None => Some(Duration::from_secs(2)),
                Some(v) if v <= 3600 => Some(Duration::from_secs(v)),
                Some(v) => {
                    return Err(self.invalid(
                        "reconcile.changes_since_interval_secs",
                        format!("must be between 0 (off) and 3600 seconds, got {v}"),
                    ));
                }
            },
            policy: self.policy(f)?,
            probe_timeout: self.secs(
                "reconcile.probe_timeout_secs",
                f.probe_timeout_secs,
                30,
                3600,
            )?,
        })
    }

    /// The remediation policy of `[reconcile]` (grace, startup grace, `max_unhealthy` — a
    /// count or a percentage, default 40% —, retry budget and backoff, min healthy period).
    fn policy(&self, f: &ReconcileFile) -> Result<vnfkeeper_core::policy::Policy, ConfigError> {
        Ok(vnfkeeper_core::policy::Policy {
            grace: self.secs("reconcile.grace_secs", f.grace_secs, 300, 86_400)?,
            startup_grace: self.secs(
                "reconcile.startup_grace_secs",
                f.startup_grace_secs,
                600,
                86_400,
            )?,
            max_unhealthy: match &f.max_unhealthy {
                None => vnfkeeper_core::policy::MaxUnhealthy::Percent(40),
                Some(MaxUnhealthyFile::Count(n)) => vnfkeeper_core::policy::MaxUnhealthy::Count(*n),
                Some(MaxUnhealthyFile::Text(t)) => {
                    vnfkeeper_core::policy::MaxUnhealthy::parse(t)
                        .map_err(|e| self.invalid("reconcile.max_unhealthy", e.to_string()))?
                }
            },
            retry_budget: self.count("reconcile.retry_budget", f.retry_budget, 3, 100)?,
            retry_backoff: self.secs(
                "reconcile.retry_backoff_secs",
                f.retry_backoff_secs,
                600,
                86_400,
            )?,
            min_healthy: self.secs(
                "reconcile.min_healthy_secs",
                f.min_healthy_secs,
                3600,
                30 * 86_400,
            )?,
        })
    }

    /// `[limits]`. Errors: the first key out of range.
    /// `[ha]`: an absolute `require_mount` holding `database` and `spool_dir`.
    fn ha(&self, f: HaFile, s: &Settings) -> Result<HaSettings, ConfigError> {
        let mount = self.absolute("ha.require_mount", Some(f.require_mount), "/")?;
        if mount == Path::new("/") {
            return Err(self.invalid(
                "ha.require_mount",
                "must be the shard's own mount point, not /".into(),
            ));
        }
        for (key, p) in [
            ("ha.require_mount", &mount),
            ("database", &s.database),
            ("spool_dir", &s.spool_dir),
        ] {
            if p.components().any(|c| c == std::path::Component::ParentDir) {
                return Err(self.invalid(key, "with [ha], must not contain `..`".into()));
            }
            if !p.starts_with(&mount) {
                return Err(self.invalid(
                    key,
                    format!(
                        "with [ha], must lie below ha.require_mount {} (the shard's file system \
                         moves between nodes with its database and spool)",
                        mount.display()
                    ),
                ));
            }
        }
        Ok(HaSettings {
            require_mount: mount,
        })
    }

    fn limits(&self, f: &LimitsFile) -> Result<Limits, ConfigError> {
        Ok(Limits {
            max_parallel_hosts: self.count(
                "limits.max_parallel_hosts",
                f.max_parallel_hosts,
                16,
                1024,
            )?,
            max_parallel_operations: self.count(
                "limits.max_parallel_operations",
                f.max_parallel_operations,
                4,
                256,
            )?,
            ssh_connect_timeout: self.secs(
                "limits.ssh_connect_timeout_secs",
                f.ssh_connect_timeout_secs,
                10,
                300,
            )?,
            command_timeout: self.secs(
                "limits.command_timeout_secs",
                f.command_timeout_secs,
                900,
                86_400,
            )?,
        })
    }

    /// `[tacker]` ([`TackerSettings::from_file`]), then what it must agree on with the other
    /// sections: TLS not on the socket of `metrics.listen` (plain HTTP), and `callback_uri`
    /// only with a `[cloud]` (`cloud`) to reach Tacker through.
    fn tacker(
        &self,
        t: TackerFile,
        metrics: &MetricsFile,
        cloud: Option<&CloudSettings>,
    ) -> Result<TackerSettings, ConfigError> {
        let t = TackerSettings::from_file(t).map_err(|(key, reason)| self.invalid(key, reason))?;
        if t.tls.is_some()
            && metrics.listen.as_deref().and_then(|m| parse_listen(m).ok()) == Some(t.listen)
        {
            return Err(self.invalid(
                "tacker.tls_cert_file",
                "tacker.listen is metrics.listen: one socket cannot serve the metrics over plain HTTP and Tacker's callback over HTTPS; give the metrics their own address".into(),
            ));
        }
        if t.callback_uri.is_some() && cloud.is_none() {
            return Err(self.invalid(
                "tacker.callback_uri",
                "needs a [cloud] section: its clouds_yaml holds the entry used to reach Tacker"
                    .into(),
            ));
        }
        Ok(t)
    }
}

/// `metrics.listen`: a literal socket address (`IP:PORT`, IPv6 in brackets) with a port other
/// than 0. Errors: why, without echoing more than the value written.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    let addr: std::net::SocketAddr = text.trim().parse().map_err(|_| {
        format!(
            "must be an IP address and a port, e.g. \"127.0.0.1:9464\" or \"[::1]:9464\", got {text:?}"
        )
    })?;
    if addr.port() == 0 {
        return Err(format!("needs a fixed port (not 0), got {text:?}"));
    }
    Ok(addr)
}

/// `s` as a TOML basic string, quoted and escaped.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse(text, Path::new("test.toml"))
    }

    #[test]
    fn shard_names_are_checked_and_select_their_file() {
        for good in ["a", "0", "edge-1", "a-", &"x".repeat(32)] {
            let shard: Shard = good.parse().unwrap();
            assert_eq!(
                shard.config_path(),
                PathBuf::from(format!("/etc/vnfkeeper/{good}.toml"))
            );
        }
        for bad in [
            "",
            "-a",
            "A",
            "a_b",
            "a.b",
            "../x",
            "a/b",
            "é",
            " a",
            &"x".repeat(33),
        ] {
            assert!(bad.parse::<Shard>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let s = parse("spool_dir = \"/tmp/s\"\ndatabase = \"/tmp/d.db\"\n").unwrap();
        assert_eq!(s.spool_dir, PathBuf::from("/tmp/s"));
        assert!(s.cloud.is_none());
        assert_eq!(s.limits.max_parallel_hosts, 16);
        assert_eq!(s.intake.batch_size, 256);
        assert_eq!(s.reconcile.schedule_text, "*/5 * * * *");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse("spool_dir = \"/s\"\nspooldir = \"/x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("spooldir"), "{e}");
        let e = parse("[limits]\nmax_hosts = 3\n").unwrap_err().to_string();
        assert!(e.contains("max_hosts"), "{e}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = parse("database = \"state.db\"\n").unwrap_err().to_string();
        assert!(e.contains("`database`") && e.contains("absolute"), "{e}");
        let e = parse("[limits]\nmax_parallel_hosts = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.max_parallel_hosts"), "{e}");
        let e = parse("[reconcile]\nschedule = \"every minute\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reconcile.schedule"), "{e}");
        let e = parse("[cloud]\ncloud = \"\"\n").unwrap_err().to_string();
        assert!(e.contains("cloud.cloud"), "{e}");
    }

    #[test]
    fn packaged_default_documents_every_key_and_means_the_defaults() {
        let text = include_str!("../../packaging/vnfkeeper.toml");
        let packaged = parse(text).unwrap();
        assert_eq!(packaged, parse("").unwrap());
        // Every key that `config check` prints is documented in the packaged file.
        let full = parse(include_str!("../../fixtures/config/full.toml")).unwrap();
        for line in full.to_toml().lines() {
            if let Some((key, _)) = line.split_once(" = ") {
                let documented = text.lines().any(|l| {
                    l.trim_start_matches('#')
                        .trim_start()
                        .starts_with(&format!("{key} ="))
                });
                assert!(
                    documented,
                    "key `{key}` is not documented in packaging/vnfkeeper.toml"
                );
            }
        }
    }

    /// The keys the parser accepts, as `section.key` (`key` at the top level), read from the
    /// configuration types themselves: serde's refusal of an unknown key lists the fields of
    /// the struct it is in, and a top-level key is a section when a table there is refused for
    /// an unknown key rather than for its type.
    fn accepted_keys() -> std::collections::BTreeSet<String> {
        const PROBE: &str = "vnfkeeper_probe";
        let fields = |text: &str| -> Option<Vec<String>> {
            let e = toml::from_str::<file::File>(text).err()?.to_string();
            let (_, expected) = e.split_once(&format!("unknown field `{PROBE}`, expected"))?;
            Some(
                expected
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect(),
            )
        };
        let mut keys = std::collections::BTreeSet::new();
        let top = fields(&format!("{PROBE} = 0\n")).expect("the file type refuses unknown keys");
        for key in top {
            match fields(&format!("[{key}]\n{PROBE} = 0\n")) {
                Some(inner) => keys.extend(inner.into_iter().map(|k| format!("{key}.{k}"))),
                None => {
                    keys.insert(key);
                }
            }
        }
        keys
    }

    /// The keys `packaging/vnfkeeper.toml` documents, as `section.key`: lines `#key = …` or
    /// `key = …` (prose comments have a space after `#`), under the latest `[section]` or
    /// `#[section]` line.
    fn documented_keys(text: &str) -> std::collections::BTreeSet<String> {
        let mut section: Option<String> = None;
        let mut keys = std::collections::BTreeSet::new();
        for line in text.lines() {
            let bare = line.strip_prefix('#').unwrap_or(line);
            if let Some(name) = bare.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                section = Some(name.to_owned());
                continue;
            }
            let Some((key, _)) = bare.split_once(" = ") else {
                continue;
            };
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                continue;
            }
            keys.insert(match &section {
                Some(s) => format!("{s}.{key}"),
                None => key.to_owned(),
            });
        }
        keys
    }

    #[test]
    fn packaged_config_documents_exactly_the_keys_the_parser_accepts() {
        let accepted = accepted_keys();
        // The derivation sees every section, [tacker] included.
        assert!(accepted.contains("tacker.packages") && accepted.contains("spool_dir"));
        assert!(accepted.len() >= 40, "{accepted:?}");
        let documented = documented_keys(include_str!("../../packaging/vnfkeeper.toml"));
        let undocumented: Vec<_> = accepted.difference(&documented).collect();
        let unknown: Vec<_> = documented.difference(&accepted).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "packaging/vnfkeeper.toml lacks {undocumented:?} and documents keys the parser refuses: {unknown:?}"
        );
    }

    #[test]
    fn config_fixtures_are_judged_as_named() {
        assert!(parse(include_str!("../../fixtures/config/minimal.toml")).is_ok());
        let full = parse(include_str!("../../fixtures/config/full.toml")).unwrap();
        assert_eq!(full.limits.max_parallel_hosts, 50);
        assert_eq!(full.cloud.unwrap().cloud, "telco-east");
        let e = parse(include_str!(
            "../../fixtures/config/invalid-unknown-key.toml"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("databse"), "{e}");
        let e = parse(include_str!(
            "../../fixtures/config/invalid-crontab-dow.toml"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("reconcile.schedule"), "{e}");
    }

    #[test]
    fn reconcile_keys_parse_and_name_themselves() {
        let s = parse("[reconcile]\nmax_unhealthy = 2\ngrace_secs = 60\n").unwrap();
        assert_eq!(
            s.reconcile.policy.max_unhealthy,
            vnfkeeper_core::policy::MaxUnhealthy::Count(2)
        );
        assert_eq!(s.reconcile.policy.grace, Duration::from_secs(60));
        let d = parse("").unwrap();
        assert_eq!(d.reconcile.cloud_interval, Duration::from_secs(15));
        assert_eq!(
            d.reconcile.changes_since_interval,
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            d.reconcile.policy.max_unhealthy,
            vnfkeeper_core::policy::MaxUnhealthy::Percent(40)
        );
        let e = parse("[reconcile]\nmax_unhealthy = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reconcile.max_unhealthy"), "{e}");
        let e = parse("[reconcile]\nretry_budget = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reconcile.retry_budget"), "{e}");
        let p = parse("[reconcile]\nmax_unhealthy = \"25%\"\n").unwrap();
        assert_eq!(parse(&p.to_toml()).unwrap(), p);
    }

    #[test]
    fn changes_since_interval_is_checked_and_zero_turns_it_off() {
        let off = parse("[reconcile]\nchanges_since_interval_secs = 0\n").unwrap();
        assert_eq!(off.reconcile.changes_since_interval, None);
        assert_eq!(parse(&off.to_toml()).unwrap(), off);
        let three = parse("[reconcile]\nchanges_since_interval_secs = 3\n").unwrap();
        assert_eq!(
            three.reconcile.changes_since_interval,
            Some(Duration::from_secs(3))
        );
        assert_eq!(parse(&three.to_toml()).unwrap(), three);
        let e = parse("[reconcile]\nchanges_since_interval_secs = 3601\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reconcile.changes_since_interval_secs"), "{e}");
    }

    #[test]
    fn the_status_page_is_off_by_default_and_needs_the_metrics_listener() {
        assert!(!parse("").unwrap().metrics.status_page);
        let s = parse("[metrics]\nlisten = \"127.0.0.1:9464\"\nstatus_page = true\n").unwrap();
        assert!(s.metrics.status_page);
        assert_eq!(parse(&s.to_toml()).unwrap(), s);
        let e = parse("[metrics]\nstatus_page = true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("metrics.status_page"), "{e}");
        assert!(
            !parse("[metrics]\nstatus_page = false\n")
                .unwrap()
                .metrics
                .status_page
        );
    }

    #[test]
    fn metrics_listen_is_a_socket_address() {
        assert_eq!(parse("").unwrap().metrics.listen, None);
        let s = parse("[metrics]\nlisten = \"127.0.0.1:9464\"\n").unwrap();
        assert_eq!(
            s.metrics.listen,
            Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9464)))
        );
        assert_eq!(parse(&s.to_toml()).unwrap(), s);
        let v6 = parse("[metrics]\nlisten = \"[::1]:9464\"\n").unwrap();
        assert_eq!(v6.metrics.listen.map(|a| a.is_ipv6()), Some(true));
        for bad in [
            "localhost:9464",
            "127.0.0.1",
            "127.0.0.1:0",
            ":9464",
            "127.0.0.1:70000",
            "",
        ] {
            let e = parse(&format!("[metrics]\nlisten = \"{bad}\"\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("`metrics.listen`"), "{bad}: {e}");
        }
        let e = parse("[metrics]\nlisten = 9464\n").unwrap_err().to_string();
        assert!(e.contains("listen"), "{e}");
        let e = parse("[metrics]\nport = 9464\n").unwrap_err().to_string();
        assert!(e.contains("port"), "{e}");
    }

    #[test]
    fn ha_requires_database_and_spool_below_its_mount() {
        let ok = parse(
            "database = \"/srv/vnfkeeper/a/state/state.db\"\nspool_dir = \"/srv/vnfkeeper/a/spool\"\n\
             [ha]\nrequire_mount = \"/srv/vnfkeeper/a\"\n",
        )
        .unwrap();
        assert_eq!(
            ok.ha.as_ref().unwrap().require_mount,
            PathBuf::from("/srv/vnfkeeper/a")
        );
        assert_eq!(parse(&ok.to_toml()).unwrap(), ok);
        assert!(parse("").unwrap().ha.is_none());
        for (text, key) in [
            ("[ha]\nrequire_mount = \"/srv/a\"\n", "`database`"),
            (
                "database = \"/srv/a/s.db\"\n[ha]\nrequire_mount = \"/srv/a\"\n",
                "`spool_dir`",
            ),
            (
                "database = \"/srv/a/../b/s.db\"\nspool_dir = \"/srv/a/s\"\n[ha]\nrequire_mount = \"/srv/a\"\n",
                "`database`",
            ),
            ("[ha]\nrequire_mount = \"srv\"\n", "`ha.require_mount`"),
            ("[ha]\nrequire_mount = \"/\"\n", "`ha.require_mount`"),
            ("[ha]\n", "require_mount"),
            ("[ha]\nrequire_mount = \"/a\"\nmode = \"x\"\n", "mode"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn effective_settings_round_trip() {
        let s =
            parse("[cloud]\ncloud = \"prod\"\n[reconcile]\nschedule = \"0 */2 * * *\"\n").unwrap();
        let again = parse(&s.to_toml()).unwrap();
        assert_eq!(s, again);
    }
}
