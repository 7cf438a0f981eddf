//! The configuration file as written: every key optional (but those a present section
//! requires), unknown keys rejected. [`super::Settings::parse`] reads it into validated
//! settings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) spool_dir: Option<PathBuf>,
    pub(super) database: Option<PathBuf>,
    pub(super) packages_dir: Option<PathBuf>,
    pub(super) cloud: Option<CloudFile>,
    #[serde(default)]
    pub(super) reconcile: ReconcileFile,
    #[serde(default)]
    pub(super) limits: LimitsFile,
    #[serde(default)]
    pub(super) intake: IntakeFile,
    #[serde(default)]
    pub(super) metrics: MetricsFile,
    pub(super) tacker: Option<TackerFile>,
    pub(super) ha: Option<HaFile>,
}

/// `[ha]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HaFile {
    pub(super) require_mount: PathBuf,
}

/// `[tacker]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TackerFile {
    pub(super) listen: String,
    pub(super) callback_path: Option<String>,
    pub(super) auth_type: Option<String>,
    pub(super) username: String,
    pub(super) password_file: PathBuf,
    pub(super) max_body_kib: Option<u32>,
    pub(super) cloud: Option<String>,
    pub(super) callback_uri: Option<String>,
    pub(super) vnfd_ids: Option<Vec<String>>,
    pub(super) auto_heal: Option<bool>,
    pub(super) register_vim: Option<bool>,
    pub(super) poll_interval_secs: Option<u64>,
    pub(super) packages: Option<BTreeMap<String, PathBuf>>,
    pub(super) token_path: Option<String>,
    pub(super) hook_path: Option<String>,
    pub(super) token_lifetime_secs: Option<u64>,
    pub(super) tls_cert_file: Option<PathBuf>,
    pub(super) tls_key_file: Option<PathBuf>,
}

/// `[cloud]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CloudFile {
    pub(super) clouds_yaml: Option<PathBuf>,
    pub(super) cloud: String,
    pub(super) api_timeout_secs: Option<u64>,
}

/// `[reconcile]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReconcileFile {
    pub(super) enabled: Option<bool>,
    pub(super) schedule: Option<String>,
    pub(super) cloud_interval_secs: Option<u64>,
    pub(super) changes_since_interval_secs: Option<u64>,
    pub(super) grace_secs: Option<u64>,
    pub(super) startup_grace_secs: Option<u64>,
    pub(super) max_unhealthy: Option<MaxUnhealthyFile>,
    pub(super) retry_budget: Option<u32>,
    pub(super) retry_backoff_secs: Option<u64>,
    pub(super) min_healthy_secs: Option<u64>,
    pub(super) probe_timeout_secs: Option<u64>,
}

/// `max_unhealthy = 2` or `max_unhealthy = "40%"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum MaxUnhealthyFile {
    Count(u32),
    Text(String),
}

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub(super) max_parallel_hosts: Option<u32>,
    pub(super) max_parallel_operations: Option<u32>,
    pub(super) ssh_connect_timeout_secs: Option<u64>,
    pub(super) command_timeout_secs: Option<u64>,
}

/// `[intake]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IntakeFile {
    pub(super) rescan_interval_secs: Option<u64>,
    pub(super) batch_size: Option<u32>,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MetricsFile {
    pub(super) listen: Option<String>,
    pub(super) status_page: Option<bool>,
}
