//! The daemon's one connection to the cloud and one SSH session pool, shared by the operation
//! runner and the reconcile loop, so both talk to the cloud through one Keystone session and to
//! the hosts through one pool of SSH sessions.
//!
//! Connecting is a background task: a slow or unreachable cloud (each request may take
//! `api_timeout`) never holds up the main loop and its watchdog pings. A failed attempt is
//! retried with the configuration current at that time, first [`CLOUD_RETRY_FIRST`] after the
//! last attempt began, the wait doubling with each failure up to [`CLOUD_RETRY`]: a daemon that
//! starts while its network is still settling (a fail-over moves the floating address as it
//! starts) connects within seconds, and a cloud that stays down is asked twice a minute. Once
//! connected, the connection is kept for the life of the daemon.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::cloud::{CloudError, OpenStackCloud};
use crate::config::{CloudSettings, Settings};
use crate::remote::{Remote, SshConfig, SshRemote};

/// The wait before the first retry of a failed connection attempt (from the attempt's start).
const CLOUD_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between attempts: how often a cloud that stays unreachable is tried again.
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
    /// Attempts failed in a row (the back-off's exponent, [`retry_after`]).
    failures: u32,
}

impl Connector {
    /// Not connected; the first [`Connector::poll`] starts connecting, so readiness never waits
    /// for the cloud.
    pub(super) fn new() -> Self {
        Self {
            conn: None,
            attempt: None,
            last_attempt: None,
            failures: 0,
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
    /// began long enough ago (the back-off of the module comment). The SSH remote is made with the connection, with
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
        if self.attempt.is_none()
            && self
                .last_attempt
                .is_none_or(|t| t.elapsed() >= retry_after(self.failures))
        {
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
                self.failures = self.failures.saturating_add(1);
                let retry = retry_after(self.failures);
                tracing::error!(cloud = %c.cloud, error = %e, retry_in_secs = retry.as_secs(), "cannot reach the cloud; operations and reconcile passes wait, retrying");
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

/// How long after the last attempt began the next may start, once `failures` attempts in a row
/// failed: [`CLOUD_RETRY_FIRST`], doubled with each further failure, at most [`CLOUD_RETRY`].
fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(5);
    (CLOUD_RETRY_FIRST * (1 << doublings)).min(CLOUD_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_one_second_to_thirty() {
        let secs: Vec<u64> = (1..=9).map(|f| retry_after(f).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30, 30]);
        assert_eq!(retry_after(u32::MAX), CLOUD_RETRY);
    }
}
