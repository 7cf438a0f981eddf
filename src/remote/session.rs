//! One SSH connection: [`SshConfig`], [`connect`] (TCP, key exchange with host key checking
//! against the target's [`HostKeyPolicy`], authentication) and the resulting [`Session`]; SSH as
//! RFC 4253 (transport), RFC 4252 (authentication) and RFC 4254 (connection) define it, through
//! russh.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use russh::client;
use russh::keys::{PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use tokio::net::TcpStream;

use super::{
    Auth, HostKeyPolicy, RemoteError, Target, key_fingerprint, key_line, listed_fingerprints,
    parse_public_key,
};
use vnfkeeper_core::console::ConsoleHostKeys;

/// Tunables of the SSH transport.
#[derive(Debug, Clone)]
pub struct SshConfig {
    /// Limit for TCP connect + key exchange + authentication (russh has none of its own).
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// Interval of `keepalive@openssh.com` requests on an idle session. Default 15 s.
    pub keepalive_interval: Duration,
    /// Unanswered keepalives after which the session counts as dead. Default 3.
    pub keepalive_max: usize,
    /// Concurrent channels (commands, SFTP) per host; OpenSSH's `MaxSessions` defaults to 10.
    /// Default 8.
    pub max_channels_per_host: usize,
    /// Extra time the client waits beyond a command's remote deadline and [`super::KILL_AFTER`]
    /// before giving up itself. Default 5 s.
    pub client_grace: Duration,
    /// Per-request SFTP response timeout (whole seconds). Default 30 s.
    pub sftp_timeout: Duration,
}

impl Default for SshConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(15),
            keepalive_max: 3,
            max_channels_per_host: 8,
            client_grace: Duration::from_secs(5),
            sftp_timeout: Duration::from_secs(30),
        }
    }
}

/// The russh client configuration for `config`: keepalives, no inactivity limit, `TCP_NODELAY`.
pub(crate) fn client_config(config: &SshConfig) -> client::Config {
    client::Config {
        // No inactivity limit: a command may legitimately print nothing for minutes. Dead
        // peers are found by keepalives instead (interval × max), then `is_closed()` is true
        // and the next use reconnects.
        inactivity_timeout: None,
        keepalive_interval: Some(config.keepalive_interval),
        keepalive_max: config.keepalive_max,
        nodelay: true,
        ..Default::default()
    }
}

/// An authenticated SSH session and the host key it was verified with.
pub(crate) struct Session {
    /// The russh connection; channels (exec, SFTP) are opened on it.
    pub(crate) handle: client::Handle<Client>,
    /// The server's host key as verified during the key exchange.
    pub(crate) host_key: PublicKey,
    /// Whether that key was not compared with a pin (trust on first use, or listed by the
    /// console): the caller pins it.
    pub(crate) learned: bool,
}

impl Session {
    /// A reused session must still satisfy the caller's pin (a session opened under trust on
    /// first use may be reused once the key is pinned, but only with that key).
    ///
    /// # Errors
    /// [`RemoteError::BadPinnedKey`] when the pin does not parse, [`RemoteError::HostKeyChanged`]
    /// when it names another key than the one this session was verified with,
    /// [`RemoteError::HostKeyNotListed`] when the console listing does not hold that key.
    pub(crate) fn check_pin(&self, target: &Target) -> Result<(), RemoteError> {
        if let HostKeyPolicy::Listed { server_id, keys } = &target.host_key {
            return check_listed(target, server_id, keys, &self.host_key);
        }
        if let HostKeyPolicy::Pinned(line) = &target.host_key {
            let pinned = parse_public_key(line).map_err(|e| RemoteError::BadPinnedKey {
                label: target.label.clone(),
                reason: e.0,
            })?;
            if pinned.key_data() != self.host_key.key_data() {
                return Err(RemoteError::HostKeyChanged {
                    label: target.label.clone(),
                    expected_fingerprint: key_fingerprint(&pinned),
                    got_fingerprint: key_fingerprint(&self.host_key),
                });
            }
        }
        Ok(())
    }
}

/// `Ok` when the console listing `keys` of `server_id` holds `key`.
fn check_listed(
    target: &Target,
    server_id: &str,
    keys: &ConsoleHostKeys,
    key: &PublicKey,
) -> Result<(), RemoteError> {
    let fingerprint = key_fingerprint(key);
    if keys.lists(&fingerprint, &key_line(key)) {
        return Ok(());
    }
    Err(RemoteError::HostKeyNotListed {
        label: target.label.clone(),
        server_id: server_id.to_owned(),
        presented_fingerprint: fingerprint,
        listed_fingerprints: listed_fingerprints(keys),
    })
}

/// Which host keys the key exchange accepts.
#[derive(Clone)]
enum Expected {
    /// Trust on first use.
    Any,
    /// Exactly this key.
    Pinned(PublicKey),
    /// A key the console lists.
    Listed(ConsoleHostKeys),
}

/// russh client handler: host key verification (RFC 4253 §8) against the target's policy.
pub(crate) struct Client {
    expected: Expected,
    seen: Arc<Mutex<Option<PublicKey>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_public_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let key = server_public_key.public_key();
        let accept = match &self.expected {
            Expected::Any => true,
            Expected::Pinned(pinned) => pinned.key_data() == key.key_data(),
            // Refusing here ends the key exchange: authentication (the password) never starts.
            Expected::Listed(keys) => keys.lists(&key_fingerprint(&key), &key_line(&key)),
        };
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(key);
        Ok(accept)
    }
}

/// Maps a russh error after the TCP connection exists.
pub(crate) fn ssh_error(target: &Target, e: russh::Error) -> RemoteError {
    use russh::Error as E;
    let label = target.label.clone();
    match e {
        E::IO(source) if !matches!(source.kind(), std::io::ErrorKind::InvalidData) => {
            RemoteError::SessionLost {
                label,
                reason: source.to_string(),
            }
        }
        E::Disconnect
        | E::HUP
        | E::SendError
        | E::ConnectionTimeout
        | E::KeepaliveTimeout
        | E::InactivityTimeout
        | E::WrongChannel
        | E::RecvError
        | E::Join(_)
        | E::Elapsed(_) => RemoteError::SessionLost {
            label,
            reason: e.to_string(),
        },
        other => RemoteError::Protocol {
            label,
            reason: other.to_string(),
        },
    }
}

/// TCP connect, key exchange with host key verification, then authentication — all within
/// `config.connect_timeout`.
///
/// # Errors
/// [`RemoteError::Connect`], [`RemoteError::ConnectTimeout`], [`RemoteError::BadPinnedKey`],
/// [`RemoteError::HostKeyChanged`], [`RemoteError::HostKeyNotListed`], [`RemoteError::AuthFailed`],
/// [`RemoteError::KeyFile`], and
/// [`RemoteError::SessionLost`] or [`RemoteError::Protocol`] for failures after the TCP connect.
pub(crate) async fn connect(
    config: &SshConfig,
    russh_config: Arc<client::Config>,
    target: &Target,
) -> Result<Session, RemoteError> {
    let address = target.socket_addr();
    let expected =
        match &target.host_key {
            HostKeyPolicy::Pinned(line) => Expected::Pinned(parse_public_key(line).map_err(
                |e| RemoteError::BadPinnedKey {
                    label: target.label.clone(),
                    reason: e.0,
                },
            )?),
            HostKeyPolicy::TrustOnFirstUse => Expected::Any,
            HostKeyPolicy::Listed { keys, .. } => Expected::Listed(keys.clone()),
        };
    let seen = Arc::new(Mutex::new(None::<PublicKey>));
    let started = Instant::now();
    let attempt = async {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|source| RemoteError::Connect {
                label: target.label.clone(),
                address,
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let handler = Client {
            expected: expected.clone(),
            seen: seen.clone(),
        };
        let result = client::connect_stream(russh_config, stream, handler).await;
        let mut handle = match result {
            Ok(h) => h,
            Err(e) => {
                let got = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match (&expected, got, &target.host_key) {
                    (Expected::Pinned(pinned), Some(got), _)
                        if pinned.key_data() != got.key_data() =>
                    {
                        return Err(RemoteError::HostKeyChanged {
                            label: target.label.clone(),
                            expected_fingerprint: key_fingerprint(pinned),
                            got_fingerprint: key_fingerprint(&got),
                        });
                    }
                    (
                        Expected::Listed(keys),
                        Some(got),
                        HostKeyPolicy::Listed { server_id, .. },
                    ) => check_listed(target, server_id, keys, &got)?,
                    _ => {}
                }
                return Err(ssh_error(target, e));
            }
        };
        authenticate(&mut handle, target).await?;
        Ok(handle)
    };
    let handle = match tokio::time::timeout(config.connect_timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(RemoteError::ConnectTimeout {
            label: target.label.clone(),
            address,
            after: config.connect_timeout,
        }),
    }
    .inspect_err(|e| {
        tracing::warn!(
            host = %target.address,
            vnfc_id = %target.label,
            error_kind = e.kind(),
            error = %e,
            "SSH connect failed"
        );
    })?;
    let host_key = seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or_else(|| RemoteError::Protocol {
            label: target.label.clone(),
            reason: "server host key was never presented".into(),
        })?;
    let learned = !matches!(expected, Expected::Pinned(_));
    tracing::info!(
        host = %target.address,
        vnfc_id = %target.label,
        host_key_fingerprint = %key_fingerprint(&host_key),
        trust_on_first_use = matches!(expected, Expected::Any),
        listed_by_console = matches!(expected, Expected::Listed(_)),
        duration_ms = started.elapsed().as_millis() as u64,
        "SSH session established"
    );
    Ok(Session {
        handle,
        host_key,
        learned,
    })
}

/// RFC 4252 authentication with the target's credentials.
async fn authenticate(
    handle: &mut client::Handle<Client>,
    target: &Target,
) -> Result<(), RemoteError> {
    let (result, method) = match &target.auth {
        Auth::Password(pw) => (
            handle
                .authenticate_password(target.username.clone(), pw.expose().clone())
                .await,
            "password",
        ),
        Auth::Key { path, passphrase } => {
            let key = russh::keys::load_secret_key(
                path,
                passphrase.as_ref().map(|p| p.expose().as_str()),
            )
            .map_err(|e| RemoteError::KeyFile {
                label: target.label.clone(),
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let hash = handle
                .best_supported_rsa_hash()
                .await
                .map_err(|e| ssh_error(target, e))?
                .flatten();
            (
                handle
                    .authenticate_publickey(
                        target.username.clone(),
                        PrivateKeyWithHashAlg::new(Arc::new(key), hash),
                    )
                    .await,
                "publickey",
            )
        }
    };
    match result.map_err(|e| ssh_error(target, e))? {
        client::AuthResult::Success => Ok(()),
        _ => Err(RemoteError::AuthFailed {
            label: target.label.clone(),
            username: target.username.clone(),
            method,
        }),
    }
}
