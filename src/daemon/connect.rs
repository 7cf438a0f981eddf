//! The daemon's one connection to the cloud and one SSH session pool, shared by the operation
//! runner and the reconcile loop, so both talk to the cloud through one Keystone session and to
//! the hosts through one pool of SSH sessions.
//!
//! Connecting is a background task: a slow or unreachable cloud (each request may take
//! `api_timeout`) never holds up the main loop and its watchdog pings. A failed attempt is
//! retried every [`CLOUD_RETRY`] with the configuration current at that time; once connected,
//! the connection is kept for the life of the daemon.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::cloud::{CloudError, OpenStackCloud};
use crate::config::{CloudSettings, Settings};
use crate::remote::{Remote, SshConfig, SshRemote};

/// How often an unreachable cloud is tried again.
const CLOUD_RETRY: Duration = Duration::from_secs(30);

/// What the engine and reconcile use: the connected cloud and the SSH remote (one session pool).
#[derive(Clone)]
pub(super) struct Connection {
    /// The cloud, connected (Keystone session established).
    pub cloud: Arc<OpenStackCloud>,
    /// The SSH remote; its session pool is shared by every operation and reconcile pass.
    pub remote: Arc<dyn Remote>,
}

/// A connection attempt in flight: the task, and the settings it uses (for its log line).
struct Attempt {
    task: JoinHandle<Result<OpenStackCloud, CloudError>>,
    cloud: CloudSettings,
}

/// Makes and keeps the daemon's [`Connection`]; owned by the main loop.
pub(super) struct Connector {
    conn: Option<Connection>,
    attempt: Option<Attempt>,
    last_attempt: Option<Instant>,
}

impl Connector {
    /// Not connected; the first [`Connector::poll`] starts connecting, so readiness never waits
    /// for the cloud.
    pub(super) fn new() -> Self {
        Self {
            conn: None,
            attempt: None,
            last_attempt: None,
        }
    }

    /// The connection, once made. `None` without a `[cloud]` section or while the cloud cannot
    /// be reached.
    pub(super) fn get(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// Called every second by the main loop; never waits for the cloud. Takes the result of a
    /// finished attempt (the connection, or an error logged), then starts a new attempt in the
    /// background when not connected, none is running, `[cloud]` is configured and the last one
    /// began at least [`CLOUD_RETRY`] ago. The SSH remote is made with the connection, with
    /// `limits.ssh_connect_timeout`.
    pub(super) async fn poll(&mut self, settings: &Settings) {
        if self.conn.is_some() {
            return;
        }
        if self.attempt.as_ref().is_some_and(|a| a.task.is_finished()) {
            self.attempt_ended(settings).await;
            if self.conn.is_some() {
                return;
            }
        }
        let Some(c) = &settings.cloud else { return };
        if self.attempt.is_none() && self.last_attempt.is_none_or(|t| t.elapsed() >= CLOUD_RETRY) {
            self.last_attempt = Some(Instant::now());
            let (clouds_yaml, cloud, timeout) =
                (c.clouds_yaml.clone(), c.cloud.clone(), c.api_timeout);
            self.attempt = Some(Attempt {
                task: tokio::spawn(async move {
                    OpenStackCloud::connect(&clouds_yaml, &cloud, timeout).await
                }),
                cloud: c.clone(),
            });
        }
    }

    /// Whether a connection attempt is in flight.
    pub(super) fn attempting(&self) -> bool {
        self.attempt.is_some()
    }

    /// Waits for the attempt in flight to end (at once without one) and takes its result: the
    /// connection, or the error logged. The main loop selects on it while
    /// [`Connector::attempting`], so a connection is handed on as soon as it is made rather
    /// than at the next one-second tick. Cancel-safe: the attempt stays until its task ended.
    pub(super) async fn attempt_ended(&mut self, settings: &Settings) {
        let Some(attempt) = self.attempt.as_mut() else {
            return;
        };
        let joined = (&mut attempt.task).await;
        let Some(Attempt { cloud: c, .. }) = self.attempt.take() else {
            return;
        };
        let result = joined.unwrap_or_else(|e| {
            Err(CloudError::Config {
                path: c.clouds_yaml.clone(),
                message: format!("connection task ended abnormally: {e}"),
            })
        });
        match result {
            Ok(cloud) => {
                let remote = SshRemote::new(SshConfig {
                    connect_timeout: settings.limits.ssh_connect_timeout,
                    ..SshConfig::default()
                });
                self.conn = Some(Connection {
                    cloud: Arc::new(cloud),
                    remote: Arc::new(remote),
                });
                tracing::info!(cloud = %c.cloud, clouds_yaml = %c.clouds_yaml.display(), "cloud connected");
            }
            Err(e) => {
                tracing::error!(cloud = %c.cloud, error = %e, "cannot reach the cloud; operations and reconcile passes wait, retrying in 30 s");
            }
        }
    }

    /// Abandons an attempt in flight (shutdown).
    pub(super) fn stop(&mut self) {
        if let Some(a) = self.attempt.take() {
            a.task.abort();
        }
    }
}
