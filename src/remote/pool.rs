//! [`SessionPool`]: one authenticated SSH session per (address, port, user), reused by every
//! command of an operation, reconnected when closed, with a bound on concurrent channels per host.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use russh::client;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::session::{self, Session, SshConfig};
use super::{RemoteError, Target};

type PoolKey = (IpAddr, u16, String);

struct HostSlot {
    /// The live session; the async mutex also makes concurrent callers share one connect.
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    channels: Arc<Semaphore>,
}

/// Authenticated sessions keyed by (address, port, username). Create one per operation (or per
/// reconcile pass) and call [`close_all`](Self::close_all) at its end; dropping it also closes the
/// connections.
pub struct SessionPool {
    config: SshConfig,
    russh: Arc<client::Config>,
    hosts: Mutex<HashMap<PoolKey, Arc<HostSlot>>>,
    handshakes: AtomicU64,
}

/// A session checked out of the pool together with one channel permit of its host.
pub(crate) struct Lease {
    pub(crate) session: Arc<Session>,
    /// Whether the session was established for this lease (not reused from the pool).
    pub(crate) fresh: bool,
    pub(crate) _permit: OwnedSemaphorePermit,
}

impl SessionPool {
    /// An empty pool.
    pub fn new(config: SshConfig) -> Self {
        let russh = Arc::new(session::client_config(&config));
        Self {
            config,
            russh,
            hosts: Mutex::new(HashMap::new()),
            handshakes: AtomicU64::new(0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SshConfig {
        &self.config
    }

    /// Number of SSH handshakes made so far (each new or re-established session counts once).
    pub fn handshakes(&self) -> u64 {
        self.handshakes.load(Ordering::Relaxed)
    }

    fn slot(&self, target: &Target) -> Arc<HostSlot> {
        let key = (target.address, target.port, target.username.clone());
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts
            .entry(key)
            .or_insert_with(|| {
                Arc::new(HostSlot {
                    session: tokio::sync::Mutex::new(None),
                    channels: Arc::new(Semaphore::new(self.config.max_channels_per_host.max(1))),
                })
            })
            .clone()
    }

    /// The live session for `target` (connecting first if there is none or it was closed),
    /// checked against the target's host key policy; `true` when it was just established.
    pub(crate) async fn session(
        &self,
        target: &Target,
    ) -> Result<(Arc<Session>, bool), RemoteError> {
        let slot = self.slot(target);
        let mut guard = slot.session.lock().await;
        if let Some(s) = guard.as_ref()
            && !s.handle.is_closed()
        {
            s.check_pin(target)?;
            return Ok((s.clone(), false));
        }
        *guard = None;
        self.handshakes.fetch_add(1, Ordering::Relaxed);
        let s = Arc::new(session::connect(&self.config, self.russh.clone(), target).await?);
        *guard = Some(s.clone());
        Ok((s, true))
    }

    /// A session plus one channel permit (waits while `max_channels_per_host` are in use).
    pub(crate) async fn lease(&self, target: &Target) -> Result<Lease, RemoteError> {
        let permit = self
            .slot(target)
            .channels
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| RemoteError::SessionLost {
                label: target.label.clone(),
                reason: "session pool closed".into(),
            })?;
        let (session, fresh) = self.session(target).await?;
        Ok(Lease {
            session,
            fresh,
            _permit: permit,
        })
    }

    /// Forgets `session` of `target` after it failed, so the next use reconnects (unless another
    /// caller has already replaced it).
    pub(crate) async fn forget(&self, target: &Target, session: &Arc<Session>) {
        let slot = self.slot(target);
        let mut guard = slot.session.lock().await;
        if guard.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            *guard = None;
        }
    }

    /// Disconnects and forgets every session to `address` (any port and user).
    pub async fn forget_address(&self, address: IpAddr) {
        let slots: Vec<Arc<HostSlot>> = {
            let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<PoolKey> = hosts
                .keys()
                .filter(|(a, _, _)| *a == address)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| hosts.remove(k)).collect()
        };
        disconnect(slots).await;
    }

    /// Disconnects every session (SSH_MSG_DISCONNECT "by application") and empties the pool.
    pub async fn close_all(&self) {
        let slots: Vec<Arc<HostSlot>> = {
            let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
            hosts.drain().map(|(_, v)| v).collect()
        };
        disconnect(slots).await;
    }
}

/// Sends SSH_MSG_DISCONNECT ("by application") on the live session of each slot.
async fn disconnect(slots: Vec<Arc<HostSlot>>) {
    for slot in slots {
        if let Some(s) = slot.session.lock().await.take() {
            let _ = s
                .handle
                .disconnect(russh::Disconnect::ByApplication, "", "en")
                .await;
        }
    }
}
