//! Configuration: the TOML file (`/etc/vnfkeeper/vnfkeeper.toml`) parsed strictly into validated [`Settings`].
//!
//! Every key is documented in `packaging/vnfkeeper.toml`. Unknown keys are errors. An invalid
//! file makes the daemon exit with [`EXIT_CONFIG`] (78, `EX_CONFIG`), which the unit's
//! `RestartPreventExitStatus=78` turns into "no restart loop".

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

/// Exit status for configuration errors (sysexits.h `EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;

/// Default path of the configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/vnfkeeper/vnfkeeper.toml";

/// The `--config` option shared by every command (clap arguments; `VNFKEEPER_CONFIG` in the
/// environment, else [`DEFAULT_CONFIG_PATH`]).
#[derive(Debug, clap::Args)]
pub struct ConfigArg {
    /// Configuration file.
    #[arg(long, env = "VNFKEEPER_CONFIG", default_value = DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
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

/// The file as written: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    spool_dir: Option<PathBuf>,
    database: Option<PathBuf>,
    packages_dir: Option<PathBuf>,
    cloud: Option<CloudFile>,
    #[serde(default)]
    reconcile: ReconcileFile,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    intake: IntakeFile,
    #[serde(default)]
    metrics: MetricsFile,
    tacker: Option<TackerFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TackerFile {
    listen: String,
    callback_path: Option<String>,
    auth_type: Option<String>,
    username: String,
    password_file: PathBuf,
    max_body_kib: Option<u32>,
    cloud: Option<String>,
    callback_uri: Option<String>,
    vnfd_ids: Option<Vec<String>>,
    auto_heal: Option<bool>,
    poll_interval_secs: Option<u64>,
    packages: Option<std::collections::BTreeMap<String, PathBuf>>,
    token_path: Option<String>,
    token_lifetime_secs: Option<u64>,
    tls_cert_file: Option<PathBuf>,
    tls_key_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CloudFile {
    clouds_yaml: Option<PathBuf>,
    cloud: String,
    api_timeout_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReconcileFile {
    enabled: Option<bool>,
    schedule: Option<String>,
    cloud_interval_secs: Option<u64>,
    changes_since_interval_secs: Option<u64>,
    grace_secs: Option<u64>,
    startup_grace_secs: Option<u64>,
    max_unhealthy: Option<MaxUnhealthyFile>,
    retry_budget: Option<u32>,
    retry_backoff_secs: Option<u64>,
    min_healthy_secs: Option<u64>,
    probe_timeout_secs: Option<u64>,
}

/// `max_unhealthy = 2` or `max_unhealthy = "40%"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum MaxUnhealthyFile {
    Count(u32),
    Text(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_parallel_hosts: Option<u32>,
    max_parallel_operations: Option<u32>,
    ssh_connect_timeout_secs: Option<u64>,
    command_timeout_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntakeFile {
    rescan_interval_secs: Option<u64>,
    batch_size: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsFile {
    listen: Option<String>,
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
}

/// Companion mode with OpenStack Tacker (`[tacker]`, off when absent): the endpoint Tacker's
/// `/vnflcm/v2` sends LCM notifications to (SOL003 v3.3.1 §5.4.20 as a subscriber's
/// `callbackUri`, authenticated per SOL013 §8.3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TackerSettings {
    /// `listen = "IP:PORT"`: where the notification endpoint listens. The same address as
    /// `metrics.listen` serves both on one socket.
    pub listen: std::net::SocketAddr,
    /// `callback_path`: the path of the callback URI (`GET` for Tacker's test, `POST` for
    /// notifications). Default `/vnfkeeper/notifications`.
    pub callback_path: String,
    /// `auth_type`: what Tacker must present on the callback (SOL013 §8.3.4): `BASIC` (the
    /// default) or `OAUTH2_CLIENT_CREDENTIALS` (a Bearer token from vnfkeeper's own token
    /// endpoint, RFC 6749 §4.4).
    pub auth_type: TackerAuth,
    /// `username`: with `BASIC` the HTTP Basic user Tacker presents (`paramsBasic.userName`);
    /// with `OAUTH2_CLIENT_CREDENTIALS` the client id Tacker authenticates with at the token
    /// endpoint (`paramsOauth2ClientCredentials.clientId`).
    pub username: String,
    /// `password_file`: an absolute path to a file with the password (with OAuth 2.0: the
    /// client password) on its first line; it must not be readable by others (mode `o-rwx`).
    /// Read when the daemon starts and by `config check` ([`TackerSettings::read_password`]).
    pub password_file: PathBuf,
    /// `token_path`: the path of the token endpoint on `listen` (only with
    /// `OAUTH2_CLIENT_CREDENTIALS`). Default `/vnfkeeper/token`.
    pub token_path: String,
    /// `token_lifetime_secs`: how long an access token the token endpoint issues is accepted
    /// (`expires_in`). Default 3600, 60–86400.
    pub token_lifetime: Duration,
    /// `tls_cert_file` and `tls_key_file`: PEM files (the certificate chain, leaf first, and its
    /// private key) with which `listen` serves HTTPS only; `None`: plain HTTP. Both or neither.
    pub tls: Option<TlsFiles>,
    /// `max_body_kib`: the largest notification body accepted, in KiB (larger: 413). Default
    /// 1024, 1–65536.
    pub max_body_bytes: usize,
    /// `cloud`: the clouds.yaml entry (in `cloud.clouds_yaml`) used to reach Tacker through
    /// Keystone's catalog (type `nfv-orchestration`). Default: `cloud.cloud`.
    pub cloud: Option<String>,
    /// `callback_uri`: the URI Tacker must call, as Tacker reaches vnfkeeper (`http(s)://`, at
    /// most 255 characters — Tacker's limit —, its path `callback_path`). When set, vnfkeeper
    /// keeps exactly one subscription with it in Tacker and polls Tacker; absent: only the
    /// endpoint runs (subscriptions are made by hand).
    pub callback_uri: Option<String>,
    /// `vnfd_ids`: the `vnfdId`s whose instances vnfkeeper manages (the subscription's
    /// `filter.vnfInstanceSubscriptionFilter.vnfdIds`); required, non-empty, with `callback_uri`.
    pub vnfd_ids: Vec<String>,
    /// `auto_heal`: whether reconcile may heal Tacker-owned VNFs (through Tacker). Default false.
    pub auto_heal: bool,
    /// `poll_interval_secs`: how often Tacker's op occs and instances are read besides at start
    /// and on each notification; each poll also checks the subscription. Default 60, 5–3600.
    pub poll_interval: Duration,
    /// `[tacker.packages]`: `"<vnfdId>" = "<package>"`, the VNF package (directory or CSAR
    /// `.zip`; relative paths against `packages_dir`, as a spool request's `vnfPackage`) whose
    /// flavour runs the management steps of the instances of that `vnfdId`. Keys must be in
    /// `vnfd_ids`; a managed `vnfdId` without an entry is recorded, never managed.
    pub packages: std::collections::BTreeMap<String, PathBuf>,
}

/// How Tacker authenticates its notifications (SOL013 §8.3.4, `SubscriptionAuthentication`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TackerAuth {
    /// `BASIC`: HTTP Basic with `username` and the password (RFC 7617).
    Basic,
    /// `OAUTH2_CLIENT_CREDENTIALS`: Tacker first obtains an access token from vnfkeeper's token
    /// endpoint with the client credentials (RFC 6749 §4.4), then sends `Authorization: Bearer`
    /// (RFC 6750 §2.1).
    Oauth2ClientCredentials,
}

impl TackerAuth {
    /// The SOL013 `authType` value.
    pub fn as_str(self) -> &'static str {
        match self {
            TackerAuth::Basic => "BASIC",
            TackerAuth::Oauth2ClientCredentials => "OAUTH2_CLIENT_CREDENTIALS",
        }
    }
}

/// The PEM files of the notification endpoint's TLS (`tacker.tls_cert_file`,
/// `tacker.tls_key_file`), absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1 PEM); must be readable by its owner only.
    pub key_file: PathBuf,
}

impl TackerSettings {
    /// The public URL of the token endpoint Tacker is told to use (`tokenEndpoint`): the scheme
    /// and authority of `callback_uri` with `token_path`. `None` without `callback_uri`.
    pub fn token_endpoint(&self) -> Option<String> {
        let uri = reqwest::Url::parse(self.callback_uri.as_deref()?).ok()?;
        let mut t = uri.clone();
        t.set_path(&self.token_path);
        t.set_query(None);
        t.set_fragment(None);
        Some(t.to_string())
    }

    /// The clouds.yaml entry that reaches Tacker: `cloud`'s file and timeout, with the entry
    /// `tacker.cloud` (default `cloud.cloud`). `None` without a `[cloud]` section.
    pub fn cloud_settings(&self, cloud: Option<&CloudSettings>) -> Option<CloudSettings> {
        cloud.map(|c| CloudSettings {
            clouds_yaml: c.clouds_yaml.clone(),
            cloud: self.cloud.clone().unwrap_or_else(|| c.cloud.clone()),
            api_timeout: c.api_timeout,
        })
    }

    /// The Basic password from `password_file`. Errors: the file cannot be read, is readable by
    /// others, or its first line is empty — a message naming the file, never its content.
    pub fn read_password(&self) -> Result<vnfkeeper_core::wire::Secret<String>, String> {
        use std::os::unix::fs::PermissionsExt as _;
        let p = &self.password_file;
        let meta = std::fs::metadata(p)
            .map_err(|e| format!("tacker.password_file {}: {e}", p.display()))?;
        if meta.permissions().mode() & 0o007 != 0 {
            return Err(format!(
                "tacker.password_file {} is readable by others (mode {:o}); chmod o-rwx it",
                p.display(),
                meta.permissions().mode() & 0o7777
            ));
        }
        let text = std::fs::read_to_string(p)
            .map_err(|e| format!("tacker.password_file {}: {e}", p.display()))?;
        let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
        if line.is_empty() {
            return Err(format!(
                "tacker.password_file {}: the first line (the password) is empty",
                p.display()
            ));
        }
        Ok(vnfkeeper_core::wire::Secret::new(line.to_owned()))
    }
}

/// The opt-in Prometheus endpoint (`[metrics]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetricsSettings {
    /// `listen = "ADDR:PORT"`: where `GET /metrics` is served (OpenMetrics text). `None` (the
    /// key absent, the default): no endpoint, no listening socket. A literal IP address and a
    /// port, e.g. `127.0.0.1:9464` or `[::1]:9464`; host names are refused so that the daemon
    /// never resolves names to decide where it listens.
    pub listen: Option<std::net::SocketAddr>,
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
    pub schedule: cron::Schedule,
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
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            path: path.into(),
            key: key.into(),
            reason,
        };
        let absolute = |key: &str, p: Option<PathBuf>, default: &str| {
            let p = p.unwrap_or_else(|| PathBuf::from(default));
            if p.is_absolute() {
                Ok(p)
            } else {
                Err(invalid(
                    key,
                    format!("must be an absolute path, got {}", p.display()),
                ))
            }
        };
        let secs = |key: &str, v: Option<u64>, default: u64, max: u64| {
            let v = v.unwrap_or(default);
            if (1..=max).contains(&v) {
                Ok(Duration::from_secs(v))
            } else {
                Err(invalid(
                    key,
                    format!("must be between 1 and {max} seconds, got {v}"),
                ))
            }
        };
        let count = |key: &str, v: Option<u32>, default: u32, max: u32| {
            let v = v.unwrap_or(default);
            if (1..=max).contains(&v) {
                Ok(v)
            } else {
                Err(invalid(
                    key,
                    format!("must be between 1 and {max}, got {v}"),
                ))
            }
        };

        let cloud = match file.cloud {
            None => None,
            Some(c) => {
                if c.cloud.trim().is_empty() {
                    return Err(invalid(
                        "cloud.cloud",
                        "must name an entry of clouds.yaml".into(),
                    ));
                }
                Some(CloudSettings {
                    clouds_yaml: absolute(
                        "cloud.clouds_yaml",
                        c.clouds_yaml,
                        "/etc/openstack/clouds.yaml",
                    )?,
                    cloud: c.cloud,
                    api_timeout: secs("cloud.api_timeout_secs", c.api_timeout_secs, 30, 3600)?,
                })
            }
        };
        let schedule_text = file
            .reconcile
            .schedule
            .unwrap_or_else(|| "*/5 * * * *".into());
        let schedule = parse_schedule(&schedule_text)
            .map_err(|reason| invalid("reconcile.schedule", reason))?;
        Ok(Settings {
            spool_dir: absolute("spool_dir", file.spool_dir, "/var/spool/vnfkeeper")?,
            database: absolute("database", file.database, "/var/lib/vnfkeeper/state.db")?,
            packages_dir: absolute(
                "packages_dir",
                file.packages_dir,
                "/var/lib/vnfkeeper/packages",
            )?,
            cloud: cloud.clone(),
            reconcile: ReconcileSettings {
                enabled: file.reconcile.enabled.unwrap_or(true),
                schedule_text,
                schedule,
                cloud_interval: secs(
                    "reconcile.cloud_interval_secs",
                    file.reconcile.cloud_interval_secs,
                    15,
                    86_400,
                )?,
                changes_since_interval: match file.reconcile.changes_since_interval_secs {
                    Some(0) => None,
                    None => Some(Duration::from_secs(2)),
                    Some(v) if v <= 3600 => Some(Duration::from_secs(v)),
                    Some(v) => {
                        return Err(invalid(
                            "reconcile.changes_since_interval_secs",
                            format!("must be between 0 (off) and 3600 seconds, got {v}"),
                        ));
                    }
                },
                policy: vnfkeeper_core::policy::Policy {
                    grace: secs(
                        "reconcile.grace_secs",
                        file.reconcile.grace_secs,
                        300,
                        86_400,
                    )?,
                    startup_grace: secs(
                        "reconcile.startup_grace_secs",
                        file.reconcile.startup_grace_secs,
                        600,
                        86_400,
                    )?,
                    max_unhealthy: match file.reconcile.max_unhealthy {
                        None => vnfkeeper_core::policy::MaxUnhealthy::Percent(40),
                        Some(MaxUnhealthyFile::Count(n)) => {
                            vnfkeeper_core::policy::MaxUnhealthy::Count(n)
                        }
                        Some(MaxUnhealthyFile::Text(t)) => {
                            vnfkeeper_core::policy::MaxUnhealthy::parse(&t)
                                .map_err(|r| invalid("reconcile.max_unhealthy", r))?
                        }
                    },
                    retry_budget: count(
                        "reconcile.retry_budget",
                        file.reconcile.retry_budget,
                        3,
                        100,
                    )?,
                    retry_backoff: secs(
                        "reconcile.retry_backoff_secs",
                        file.reconcile.retry_backoff_secs,
                        600,
                        86_400,
                    )?,
                    min_healthy: secs(
                        "reconcile.min_healthy_secs",
                        file.reconcile.min_healthy_secs,
                        3600,
                        30 * 86_400,
                    )?,
                },
                probe_timeout: secs(
                    "reconcile.probe_timeout_secs",
                    file.reconcile.probe_timeout_secs,
                    30,
                    3600,
                )?,
            },
            limits: Limits {
                max_parallel_hosts: count(
                    "limits.max_parallel_hosts",
                    file.limits.max_parallel_hosts,
                    16,
                    1024,
                )?,
                max_parallel_operations: count(
                    "limits.max_parallel_operations",
                    file.limits.max_parallel_operations,
                    4,
                    256,
                )?,
                ssh_connect_timeout: secs(
                    "limits.ssh_connect_timeout_secs",
                    file.limits.ssh_connect_timeout_secs,
                    10,
                    300,
                )?,
                command_timeout: secs(
                    "limits.command_timeout_secs",
                    file.limits.command_timeout_secs,
                    900,
                    86_400,
                )?,
            },
            intake: IntakeSettings {
                rescan_interval: secs(
                    "intake.rescan_interval_secs",
                    file.intake.rescan_interval_secs,
                    30,
                    86_400,
                )?,
                batch_size: count("intake.batch_size", file.intake.batch_size, 256, 10_000)?,
            },
            metrics: MetricsSettings {
                listen: match file.metrics.listen.clone() {
                    None => None,
                    Some(text) => Some(
                        parse_listen(&text).map_err(|reason| invalid("metrics.listen", reason))?,
                    ),
                },
            },
            tacker: match file.tacker {
                None => None,
                Some(t) => {
                    let t = tacker(t).map_err(|(key, reason)| invalid(key, reason))?;
                    if t.tls.is_some()
                        && file
                            .metrics
                            .listen
                            .as_deref()
                            .and_then(|m| parse_listen(m).ok())
                            == Some(t.listen)
                    {
                        return Err(invalid(
                            "tacker.tls_cert_file",
                            "tacker.listen is metrics.listen: one socket cannot serve the metrics over plain HTTP and Tacker's callback over HTTPS; give the metrics their own address".into(),
                        ));
                    }
                    if t.callback_uri.is_some() && cloud.is_none() {
                        return Err(invalid(
                            "tacker.callback_uri",
                            "needs a [cloud] section: its clouds_yaml holds the entry used to reach Tacker".into(),
                        ));
                    }
                    Some(t)
                }
            },
        })
    }

    /// The effective settings as TOML, every key present, for `vnfkeeper config check`.
    /// The configuration holds no secrets itself (they live in clouds.yaml).
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        let mut kv = |k: &str, v: String| out.push_str(&format!("{k} = {v}\n"));
        let path = |p: &Path| toml_string(&p.display().to_string());
        kv("spool_dir", path(&self.spool_dir));
        kv("database", path(&self.database));
        kv("packages_dir", path(&self.packages_dir));
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
        out.push_str("\n[reconcile]\n");
        out.push_str(&format!("enabled = {}\n", self.reconcile.enabled));
        out.push_str(&format!(
            "schedule = {}\n",
            toml_string(&self.reconcile.schedule_text)
        ));
        let r = &self.reconcile;
        let p = &r.policy;
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
        out.push_str("\n[limits]\n");
        out.push_str(&format!(
            "max_parallel_hosts = {}\n",
            self.limits.max_parallel_hosts
        ));
        out.push_str(&format!(
            "max_parallel_operations = {}\n",
            self.limits.max_parallel_operations
        ));
        out.push_str(&format!(
            "ssh_connect_timeout_secs = {}\n",
            self.limits.ssh_connect_timeout.as_secs()
        ));
        out.push_str(&format!(
            "command_timeout_secs = {}\n",
            self.limits.command_timeout.as_secs()
        ));
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
            }
        }
        out.push('\n');
        match &self.tacker {
            None => out.push_str("# [tacker] not configured: no notification endpoint\n"),
            Some(t) => {
                out.push_str("[tacker]\n");
                out.push_str(&format!(
                    "listen = {}\n",
                    toml_string(&t.listen.to_string())
                ));
                out.push_str(&format!(
                    "callback_path = {}\n",
                    toml_string(&t.callback_path)
                ));
                out.push_str(&format!("auth_type = \"{}\"\n", t.auth_type.as_str()));
                out.push_str(&format!("username = {}\n", toml_string(&t.username)));
                out.push_str(&format!(
                    "password_file = {}\n",
                    toml_string(&t.password_file.display().to_string())
                ));
                out.push_str(&format!("max_body_kib = {}\n", t.max_body_bytes / 1024));
                out.push_str(&format!("token_path = {}\n", toml_string(&t.token_path)));
                out.push_str(&format!(
                    "token_lifetime_secs = {}\n",
                    t.token_lifetime.as_secs()
                ));
                match &t.tls {
                    Some(tls) => {
                        out.push_str(&format!(
                            "tls_cert_file = {}\n",
                            toml_string(&tls.cert_file.display().to_string())
                        ));
                        out.push_str(&format!(
                            "tls_key_file = {}\n",
                            toml_string(&tls.key_file.display().to_string())
                        ));
                    }
                    None => out.push_str("# tls_cert_file, tls_key_file not set: plain HTTP\n"),
                }
                match &t.cloud {
                    Some(c) => out.push_str(&format!("cloud = {}\n", toml_string(c))),
                    None => out.push_str("# cloud: the [cloud] entry\n"),
                }
                match &t.callback_uri {
                    Some(u) => out.push_str(&format!("callback_uri = {}\n", toml_string(u))),
                    None => out.push_str("# callback_uri not set: no subscription, no polling\n"),
                }
                out.push_str(&format!(
                    "vnfd_ids = [{}]\n",
                    t.vnfd_ids
                        .iter()
                        .map(|v| toml_string(v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                out.push_str(&format!("auto_heal = {}\n", t.auto_heal));
                out.push_str(&format!(
                    "poll_interval_secs = {}\n",
                    t.poll_interval.as_secs()
                ));
                if !t.packages.is_empty() {
                    out.push_str("\n[tacker.packages]\n");
                    for (vnfd, pkg) in &t.packages {
                        out.push_str(&format!(
                            "{} = {}\n",
                            toml_string(vnfd),
                            toml_string(&pkg.display().to_string())
                        ));
                    }
                }
            }
        }
        out
    }
}

/// Whether `p` is an absolute URL path of `[A-Za-z0-9/._-]`, at most 256 characters, without
/// `//`, other than `/metrics`.
fn url_path_ok(p: &str) -> bool {
    p.starts_with('/')
        && p.len() <= 256
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'))
        && !p.contains("//")
        && p != "/metrics"
}

/// `[tacker]` checked. Errors: (dotted key, reason).
fn tacker(t: TackerFile) -> Result<TackerSettings, (&'static str, String)> {
    let listen = parse_listen(&t.listen).map_err(|r| ("tacker.listen", r))?;
    let callback_path = t
        .callback_path
        .unwrap_or_else(|| "/vnfkeeper/notifications".into());
    if !url_path_ok(&callback_path) {
        return Err((
            "tacker.callback_path",
            format!(
                "must be an absolute URL path of [A-Za-z0-9/._-] (not /metrics), got {callback_path:?}"
            ),
        ));
    }
    let auth_type = match t.auth_type.as_deref() {
        None | Some("BASIC") => TackerAuth::Basic,
        Some("OAUTH2_CLIENT_CREDENTIALS") => TackerAuth::Oauth2ClientCredentials,
        Some(other) => {
            return Err((
                "tacker.auth_type",
                format!("must be \"BASIC\" or \"OAUTH2_CLIENT_CREDENTIALS\", got {other:?}"),
            ));
        }
    };
    let token_path = t.token_path.unwrap_or_else(|| "/vnfkeeper/token".into());
    if !url_path_ok(&token_path) || token_path == callback_path {
        return Err((
            "tacker.token_path",
            format!(
                "must be an absolute URL path of [A-Za-z0-9/._-], not /metrics nor callback_path, got {token_path:?}"
            ),
        ));
    }
    let lifetime = t.token_lifetime_secs.unwrap_or(3600);
    if !(60..=86_400).contains(&lifetime) {
        return Err((
            "tacker.token_lifetime_secs",
            format!("must be 60-86400, got {lifetime}"),
        ));
    }
    let tls = match (t.tls_cert_file, t.tls_key_file) {
        (None, None) => None,
        (Some(cert_file), Some(key_file)) => {
            for (key, p) in [
                ("tacker.tls_cert_file", &cert_file),
                ("tacker.tls_key_file", &key_file),
            ] {
                if !p.is_absolute() {
                    return Err((
                        key,
                        format!("must be an absolute path, got {}", p.display()),
                    ));
                }
            }
            Some(TlsFiles {
                cert_file,
                key_file,
            })
        }
        (Some(_), None) => {
            return Err((
                "tacker.tls_key_file",
                "is required with tls_cert_file".into(),
            ));
        }
        (None, Some(_)) => {
            return Err((
                "tacker.tls_cert_file",
                "is required with tls_key_file".into(),
            ));
        }
    };
    if t.username.is_empty() || t.username.contains(':') || t.username.chars().any(char::is_control)
    {
        return Err((
            "tacker.username",
            "must be non-empty, without ':' or control characters (RFC 7617)".into(),
        ));
    }
    if !t.password_file.is_absolute() {
        return Err((
            "tacker.password_file",
            format!(
                "must be an absolute path, got {}",
                t.password_file.display()
            ),
        ));
    }
    let kib = t.max_body_kib.unwrap_or(1024);
    if !(1..=65_536).contains(&kib) {
        return Err(("tacker.max_body_kib", format!("must be 1-65536, got {kib}")));
    }
    if let Some(c) = &t.cloud
        && (c.is_empty() || c.chars().any(char::is_control))
    {
        return Err((
            "tacker.cloud",
            "must be a non-empty clouds.yaml entry name".into(),
        ));
    }
    if let Some(uri) = &t.callback_uri {
        let parsed = reqwest::Url::parse(uri)
            .map_err(|e| ("tacker.callback_uri", format!("not a URL ({e})")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err((
                "tacker.callback_uri",
                "must be an http:// or https:// URL with a host".into(),
            ));
        }
        if uri.len() > 255 {
            return Err((
                "tacker.callback_uri",
                format!("is {} characters; Tacker accepts at most 255", uri.len()),
            ));
        }
        if parsed.path() != callback_path || parsed.query().is_some() {
            return Err((
                "tacker.callback_uri",
                format!(
                    "its path must be tacker.callback_path ({callback_path}) without a query, got {:?}",
                    parsed.path()
                ),
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err((
                "tacker.callback_uri",
                "must not carry credentials (Tacker gets them in the subscription's authentication)"
                    .into(),
            ));
        }
        if tls.is_some() && parsed.scheme() != "https" {
            return Err((
                "tacker.callback_uri",
                "must be https:// when tls_cert_file is set (the endpoint serves HTTPS only)"
                    .into(),
            ));
        }
        if tls.is_none() && parsed.scheme() == "https" {
            return Err((
                "tacker.callback_uri",
                "is https:// but the endpoint serves plain HTTP: set tls_cert_file and tls_key_file"
                    .into(),
            ));
        }
    }
    let vnfd_ids = t.vnfd_ids.unwrap_or_default();
    if vnfd_ids
        .iter()
        .any(|v| v.is_empty() || v.len() > 255 || v.chars().any(|c| c.is_control() || c == ','))
    {
        return Err((
            "tacker.vnfd_ids",
            "each must be a non-empty identifier of at most 255 characters without ',' or control characters".into(),
        ));
    }
    match (&t.callback_uri, vnfd_ids.is_empty()) {
        (Some(_), true) => {
            return Err((
                "tacker.vnfd_ids",
                "must name at least one vnfdId when callback_uri is set".into(),
            ));
        }
        (None, false) => {
            return Err((
                "tacker.callback_uri",
                "is required with vnfd_ids (it is the subscription's callbackUri)".into(),
            ));
        }
        _ => {}
    }
    let poll = t.poll_interval_secs.unwrap_or(60);
    if !(5..=3600).contains(&poll) {
        return Err((
            "tacker.poll_interval_secs",
            format!("must be 5-3600, got {poll}"),
        ));
    }
    let packages = t.packages.unwrap_or_default();
    for (vnfd, pkg) in &packages {
        if !vnfd_ids.contains(vnfd) {
            return Err((
                "tacker.packages",
                format!("{vnfd:?} is not one of tacker.vnfd_ids"),
            ));
        }
        if pkg.as_os_str().is_empty()
            || pkg
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err((
                "tacker.packages",
                format!("the package of {vnfd:?} must be a non-empty path without `..`"),
            ));
        }
    }
    Ok(TackerSettings {
        listen,
        callback_path,
        auth_type,
        username: t.username,
        password_file: t.password_file,
        token_path,
        token_lifetime: Duration::from_secs(lifetime),
        tls,
        max_body_bytes: kib as usize * 1024,
        cloud: t.cloud,
        callback_uri: t.callback_uri,
        vnfd_ids,
        auto_heal: t.auto_heal.unwrap_or(false),
        poll_interval: Duration::from_secs(poll),
        packages,
    })
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

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Parses a cron schedule. A 5-field crontab line (`min hour dom mon dow`, day of week 0–7 with
/// 0 and 7 = Sunday, as in crontab(5)) gets a seconds field of `0` and its day-of-week numbers
/// are rewritten as names; the 6/7-field form with seconds is the `cron` crate's own, where
/// day-of-week numbers mean something else (1 = Sunday), so there only names are accepted.
/// `@hourly`-style aliases work. Errors: a message for the operator.
pub fn parse_schedule(text: &str) -> Result<cron::Schedule, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let normalised = match fields.len() {
        1 if text.trim_start().starts_with('@') => text.trim().to_owned(),
        5 => {
            let dow = crontab_dow_to_names(fields[4])?;
            format!(
                "0 {} {} {} {} {}",
                fields[0], fields[1], fields[2], fields[3], dow
            )
        }
        6 | 7 => {
            if fields[5].chars().any(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "day of week `{}` in a 6-field schedule must use names (MON-FRI), \
                     because its numbers differ from crontab; or write 5 crontab fields",
                    fields[5]
                ));
            }
            fields.join(" ")
        }
        n => {
            return Err(format!(
                "expected 5 crontab fields (min hour dom mon dow) or 6/7 fields starting with seconds, got {n}"
            ));
        }
    };
    cron::Schedule::from_str(&normalised)
        .map_err(|e| format!("invalid cron expression `{text}`: {e}"))
}

/// Rewrites crontab(5) day-of-week numbers (0–7, 0 and 7 = Sunday) as names, keeping `*`, lists,
/// ranges and steps: `1-5` → `MON-FRI`, `0,6` → `SUN,SAT`, `*/2` unchanged.
fn crontab_dow_to_names(field: &str) -> Result<String, String> {
    const NAMES: [&str; 8] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let name = |tok: &str| -> Result<String, String> {
        match tok.parse::<usize>() {
            Ok(n) if n < NAMES.len() => Ok(NAMES[n].to_owned()),
            Ok(n) => Err(format!("day of week {n} is out of range 0-7")),
            Err(_) => Ok(tok.to_owned()),
        }
    };
    let mut parts = Vec::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        let range = match range.split_once('-') {
            Some((a, b)) => {
                // crontab allows 5-7 (Fri..Sun); cron wants FRI-SAT,SUN for that, so expand 7 at the end.
                let (a, b) = (name(a)?, b);
                if b == "7" {
                    format!("{a}-SAT,SUN")
                } else {
                    format!("{a}-{}", name(b)?)
                }
            }
            None => name(range)?,
        };
        parts.push(match step {
            Some(s) => format!("{range}/{s}"),
            None => range,
        });
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Utc};

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse(text, Path::new("test.toml"))
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
    fn crontab_day_numbers_mean_what_crontab_says() {
        // 2026-11-21 is a Saturday; "1-5" must next fire on Monday 2026-11-23.
        let s = parse_schedule("0 9 * * 1-5").unwrap();
        let after = Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap();
        let next = s.after(&after).next().unwrap();
        assert_eq!(next.weekday(), chrono::Weekday::Mon);
        assert_eq!(crontab_dow_to_names("0,6").unwrap(), "SUN,SAT");
        assert_eq!(crontab_dow_to_names("5-7").unwrap(), "FRI-SAT,SUN");
        assert_eq!(crontab_dow_to_names("*/2").unwrap(), "*/2");
        assert!(crontab_dow_to_names("8").is_err());
        assert!(parse_schedule("0 0 9 * * 1").is_err());
        assert!(parse_schedule("0 0 9 * * Mon-Fri").is_ok());
        assert!(parse_schedule("@hourly").is_ok());
    }

    #[test]
    fn packaged_default_documents_every_key_and_means_the_defaults() {
        let text = include_str!("../packaging/vnfkeeper.toml");
        let packaged = parse(text).unwrap();
        assert_eq!(packaged, parse("").unwrap());
        // Every key that `config check` prints is documented in the packaged file.
        let full = parse(include_str!("../fixtures/config/full.toml")).unwrap();
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

    #[test]
    fn config_fixtures_are_judged_as_named() {
        assert!(parse(include_str!("../fixtures/config/minimal.toml")).is_ok());
        let full = parse(include_str!("../fixtures/config/full.toml")).unwrap();
        assert_eq!(full.limits.max_parallel_hosts, 50);
        assert_eq!(full.cloud.unwrap().cloud, "telco-east");
        let e = parse(include_str!("../fixtures/config/invalid-unknown-key.toml")).unwrap_err();
        assert!(e.to_string().contains("databse"), "{e}");
        let e = parse(include_str!("../fixtures/config/invalid-crontab-dow.toml")).unwrap_err();
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
    fn tacker_subscription_keys_are_checked() {
        let base = "[cloud]\ncloud = \"testbed\"\n\n[tacker]\nlisten = \"127.0.0.1:9890\"\n\
                    username = \"tacker\"\npassword_file = \"/etc/vnfkeeper/tacker.pw\"\n";
        let ok = format!(
            "{base}callback_uri = \"http://10.0.0.5:9890/vnfkeeper/notifications\"\n\
             vnfd_ids = [\"b1bb0ce7\"]\nauto_heal = true\ncloud = \"tacker-admin\"\n"
        );
        let s = parse(&ok).unwrap();
        let t = s.tacker.clone().unwrap();
        assert_eq!(t.vnfd_ids, ["b1bb0ce7"]);
        assert!(t.auto_heal);
        assert_eq!(t.poll_interval, Duration::from_secs(60));
        assert_eq!(
            t.cloud_settings(s.cloud.as_ref()).unwrap().cloud,
            "tacker-admin"
        );
        // The effective TOML parses back to the same settings.
        assert_eq!(parse(&s.to_toml()).unwrap().tacker, Some(t));
        // Without the keys: the endpoint only, as before.
        let t = parse(base).unwrap().tacker.unwrap();
        assert_eq!(
            (t.callback_uri, t.vnfd_ids.len(), t.auto_heal),
            (None, 0, false)
        );
        for (text, key) in [
            (
                ok.replace("/vnfkeeper/notifications", "/other"),
                "tacker.callback_uri",
            ),
            (ok.replace("http://", "ftp://"), "tacker.callback_uri"),
            (ok.replace("http://", "http://u:p@"), "tacker.callback_uri"),
            (
                ok.replace("vnfd_ids = [\"b1bb0ce7\"]", "vnfd_ids = []"),
                "tacker.vnfd_ids",
            ),
            (
                ok.replace("vnfd_ids = [\"b1bb0ce7\"]", "vnfd_ids = [\"\"]"),
                "tacker.vnfd_ids",
            ),
            (format!("{base}vnfd_ids = [\"x\"]\n"), "tacker.callback_uri"),
            (
                ok.replace("[cloud]\ncloud = \"testbed\"\n", ""),
                "tacker.callback_uri",
            ),
            (
                format!("{ok}poll_interval_secs = 1\n"),
                "tacker.poll_interval_secs",
            ),
            (
                format!("{ok}\n[tacker.packages]\n\"other\" = \"pv\"\n"),
                "tacker.packages",
            ),
            (
                format!("{ok}\n[tacker.packages]\n\"b1bb0ce7\" = \"../pv\"\n"),
                "tacker.packages",
            ),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{text}: {e}");
        }
        // The vnfdId → package mapping, and its effective TOML.
        let s = parse(&format!(
            "{ok}\n[tacker.packages]\n\"b1bb0ce7\" = \"pv-k8s-cluster\"\n"
        ))
        .unwrap();
        let t = s.tacker.clone().unwrap();
        assert_eq!(
            t.packages.get("b1bb0ce7").map(|p| p.display().to_string()),
            Some("pv-k8s-cluster".to_string())
        );
        assert_eq!(parse(&s.to_toml()).unwrap().tacker, Some(t));
    }

    #[test]
    fn tacker_section_is_checked_and_its_password_file_must_be_private() {
        assert_eq!(parse("").unwrap().tacker, None);
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        let ok = format!(
            "[tacker]\nlisten = \"127.0.0.1:9890\"\nusername = \"tacker\"\npassword_file = \"{}\"\n",
            pw.display()
        );
        let t = parse(&ok).unwrap().tacker.unwrap();
        assert_eq!(t.callback_path, "/vnfkeeper/notifications");
        assert_eq!(t.max_body_bytes, 1024 * 1024);
        assert!(parse(&ok).unwrap().to_toml().contains("[tacker]"));
        for (extra, key) in [
            ("auth_type = \"OAUTH2_CLIENT_CERT\"\n", "tacker.auth_type"),
            (
                "token_path = \"/vnfkeeper/notifications\"\n",
                "tacker.token_path",
            ),
            ("token_lifetime_secs = 59\n", "tacker.token_lifetime_secs"),
            ("tls_cert_file = \"/etc/c.pem\"\n", "tacker.tls_key_file"),
            ("tls_key_file = \"/etc/k.pem\"\n", "tacker.tls_cert_file"),
            (
                "tls_cert_file = \"c.pem\"\ntls_key_file = \"/etc/k.pem\"\n",
                "tacker.tls_cert_file",
            ),
            ("callback_path = \"/metrics\"\n", "tacker.callback_path"),
            ("callback_path = \"no-slash\"\n", "tacker.callback_path"),
            ("max_body_kib = 0\n", "tacker.max_body_kib"),
        ] {
            let e = parse(&format!("{ok}{extra}")).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{extra}: {e}");
        }
        let e = parse(&ok.replace("\"tacker\"\n", "\"a:b\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tacker.username`"), "{e}");
        let e = parse(&ok.replace(&pw.display().to_string(), "pw"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tacker.password_file`"), "{e}");

        use std::os::unix::fs::PermissionsExt as _;
        assert!(t.read_password().unwrap_err().contains("No such file"));
        std::fs::write(&pw, "s3cret\nignored\n").unwrap();
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = t.read_password().unwrap_err();
        assert!(
            e.contains("readable by others") && !e.contains("s3cret"),
            "{e}"
        );
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(t.read_password().unwrap().expose(), "s3cret");
        std::fs::write(&pw, "\n").unwrap();
        assert!(t.read_password().unwrap_err().contains("empty"));
    }

    #[test]
    fn tacker_oauth2_and_tls_keys() {
        let base = "[cloud]\ncloud = \"testbed\"\n\n[tacker]\nlisten = \"127.0.0.1:9890\"\n\
                    username = \"client\"\npassword_file = \"/etc/vnfkeeper/secret\"\n\
                    auth_type = \"OAUTH2_CLIENT_CREDENTIALS\"\nvnfd_ids = [\"v\"]\n";
        let tls =
            "tls_cert_file = \"/etc/vnfkeeper/c.pem\"\ntls_key_file = \"/etc/vnfkeeper/k.pem\"\n";
        let https = "callback_uri = \"https://vk.example:9890/vnfkeeper/notifications\"\n";
        let s = parse(&format!("{base}{https}{tls}")).unwrap();
        let t = s.tacker.clone().unwrap();
        assert_eq!(t.auth_type, TackerAuth::Oauth2ClientCredentials);
        assert_eq!(t.token_lifetime, Duration::from_secs(3600));
        assert_eq!(
            t.token_endpoint().as_deref(),
            Some("https://vk.example:9890/vnfkeeper/token")
        );
        assert_eq!(
            t.tls.as_ref().unwrap().key_file,
            PathBuf::from("/etc/vnfkeeper/k.pem")
        );
        assert_eq!(parse(&s.to_toml()).unwrap().tacker, Some(t));
        // TLS needs https://, https:// needs TLS, and TLS is refused on the metrics' address.
        for (text, key) in [
            (
                format!("{base}{}{tls}", https.replace("https", "http")),
                "tacker.callback_uri",
            ),
            (format!("{base}{https}"), "tacker.callback_uri"),
            (
                format!("{base}{https}{tls}\n[metrics]\nlisten = \"127.0.0.1:9890\"\n"),
                "tacker.tls_cert_file",
            ),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{text}: {e}");
        }
        // Without TLS the metrics may share the socket.
        let http = https.replace("https", "http");
        assert!(
            parse(&format!(
                "{base}{http}\n[metrics]\nlisten = \"127.0.0.1:9890\"\n"
            ))
            .is_ok()
        );
    }

    #[test]
    fn effective_settings_round_trip() {
        let s =
            parse("[cloud]\ncloud = \"prod\"\n[reconcile]\nschedule = \"0 */2 * * *\"\n").unwrap();
        let again = parse(&s.to_toml()).unwrap();
        assert_eq!(s, again);
    }
}
