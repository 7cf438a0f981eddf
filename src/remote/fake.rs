//! [`FakeRemote`]: a scripted [`Remote`] for engine and recipe tests (no network).
//!
//! It records every call ([`FakeRemote::calls`]) and answers from rules ([`FakeRemote::on`]:
//! first rule whose substring occurs in the command, re-usable) and then from a queue
//! ([`FakeRemote::push`], consumed in order); with neither, a command succeeds with empty output.
//!
//! ```
//! use vnfkeeper::remote::fake::{FakeRemote, FakeReply};
//! let fake = FakeRemote::new();
//! fake.on("blkid", FakeReply::exit(2));                 // "no filesystem"
//! fake.push(FakeReply::stdout("ok\n"));                 // next other command prints "ok"
//! ```

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use super::{
    Connected, HostKeyPolicy, Output, Remote, RemoteCommand, RemoteError, RemoteFuture, Secret,
    Target, TimeoutSide,
};

/// Host key line the fake reports under trust on first use.
pub const FAKE_HOST_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYiNiOOo3XHRcWQS07T3ilpTDJspX52tih3/dP/OhwY";

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// [`Remote::connect`].
    Connect {
        /// Target label (VNFC id).
        label: String,
    },
    /// [`Remote::run`].
    Run {
        /// Target label (VNFC id).
        label: String,
        /// [`RemoteCommand::inner`]: the quoted command without timeout/sudo wrappers.
        command: String,
        /// Whether sudo was asked for.
        sudo: bool,
        /// Remote deadline in seconds.
        timeout_secs: u64,
        /// Step name, if any.
        step: Option<String>,
        /// The command's own stdin (hidden in `Debug`).
        stdin: Secret<Vec<u8>>,
    },
    /// [`Remote::upload`].
    Upload {
        /// Target label (VNFC id).
        label: String,
        /// Absolute remote path.
        path: String,
        /// File contents (hidden in `Debug`).
        bytes: Secret<Vec<u8>>,
        /// Permission bits.
        mode: u32,
        /// Whether sudo was asked for.
        sudo: bool,
    },
}

/// Error kinds the fake can produce (mapped to the matching [`RemoteError`] for the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeError {
    /// [`RemoteError::Connect`] with `ConnectionRefused`.
    ConnectionRefused,
    /// [`RemoteError::ConnectTimeout`].
    ConnectTimeout,
    /// [`RemoteError::CommandTimeout`] (remote side).
    CommandTimeout,
    /// [`RemoteError::SessionLost`].
    SessionLost,
    /// [`RemoteError::AuthFailed`].
    AuthFailed,
    /// [`RemoteError::HostKeyChanged`].
    HostKeyChanged,
    /// [`RemoteError::SftpPermissionDenied`].
    PermissionDenied,
}

/// A scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeReply {
    /// The command ran: exit status, stdout, stderr.
    Output {
        /// Exit status.
        exit_status: u32,
        /// Standard output.
        stdout: Vec<u8>,
        /// Standard error.
        stderr: Vec<u8>,
    },
    /// The call fails.
    Error(FakeError),
}

impl FakeReply {
    /// Exit status 0 with this stdout.
    pub fn stdout(s: impl Into<Vec<u8>>) -> Self {
        FakeReply::Output {
            exit_status: 0,
            stdout: s.into(),
            stderr: Vec::new(),
        }
    }

    /// This exit status, no output.
    pub fn exit(code: u32) -> Self {
        FakeReply::Output {
            exit_status: code,
            stdout: Vec::new(),
            stderr: Vec::new(),
        }
    }

    /// This exit status and stderr.
    pub fn fail(code: u32, stderr: impl Into<Vec<u8>>) -> Self {
        FakeReply::Output {
            exit_status: code,
            stdout: Vec::new(),
            stderr: stderr.into(),
        }
    }

    fn error(kind: FakeError, target: &Target) -> RemoteError {
        let label = target.label.clone();
        match kind {
            FakeError::ConnectionRefused => RemoteError::Connect {
                label,
                address: target.socket_addr(),
                source: std::io::ErrorKind::ConnectionRefused.into(),
            },
            FakeError::ConnectTimeout => RemoteError::ConnectTimeout {
                label,
                address: target.socket_addr(),
                after: Duration::from_secs(10),
            },
            FakeError::CommandTimeout => RemoteError::CommandTimeout {
                label,
                after: Duration::from_secs(60),
                side: TimeoutSide::Remote,
            },
            FakeError::SessionLost => RemoteError::SessionLost {
                label,
                reason: "fake".into(),
            },
            FakeError::AuthFailed => RemoteError::AuthFailed {
                label,
                username: target.username.clone(),
                method: "password",
            },
            FakeError::HostKeyChanged => RemoteError::HostKeyChanged {
                label,
                expected_fingerprint: "SHA256:expected".into(),
                got_fingerprint: "SHA256:got".into(),
            },
            FakeError::PermissionDenied => RemoteError::SftpPermissionDenied {
                label,
                path: String::new(),
            },
        }
    }
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    rules: Vec<(String, FakeReply)>,
    queue: VecDeque<FakeReply>,
}

/// Scripted, recording [`Remote`]. Cheap to share as `Arc<FakeRemote>` / `Arc<dyn Remote>`.
#[derive(Default)]
pub struct FakeRemote {
    state: Mutex<State>,
}

impl FakeRemote {
    /// A fake with no rules and an empty queue (everything succeeds).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call whose command (or upload path, or `connect`) contains `needle` gets `reply`
    /// (rules are checked in the order added, before the queue).
    pub fn on(&self, needle: impl Into<String>, reply: FakeReply) {
        self.lock().rules.push((needle.into(), reply));
    }

    /// Queues a reply for the next call not matched by a rule.
    pub fn push(&self, reply: FakeReply) {
        self.lock().queue.push_back(reply);
    }

    /// All calls so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The commands of all `run` calls so far ([`RemoteCommand::inner`] strings).
    pub fn commands(&self) -> Vec<String> {
        self.lock()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Run { command, .. } => Some(command.clone()),
                _ => None,
            })
            .collect()
    }

    fn answer(&self, call: Call, key: &str) -> Option<FakeReply> {
        let mut st = self.lock();
        st.calls.push(call);
        if let Some((_, r)) = st.rules.iter().find(|(n, _)| key.contains(n.as_str())) {
            return Some(r.clone());
        }
        st.queue.pop_front()
    }
}

impl Remote for FakeRemote {
    fn connect<'a>(&'a self, target: &'a Target) -> RemoteFuture<'a, Connected> {
        Box::pin(async move {
            let reply = self.answer(
                Call::Connect {
                    label: target.label.clone(),
                },
                "connect",
            );
            if let Some(FakeReply::Error(kind)) = reply {
                return Err(FakeReply::error(kind, target));
            }
            let (host_key, learned) = match &target.host_key {
                HostKeyPolicy::Pinned(k) => (k.clone(), false),
                HostKeyPolicy::TrustOnFirstUse => (FAKE_HOST_KEY.to_string(), true),
                HostKeyPolicy::Listed { server_id, keys } => {
                    // The fake server presents FAKE_HOST_KEY; a console must list it.
                    let fp = super::fingerprint(FAKE_HOST_KEY).unwrap_or_default();
                    if !keys.lists(&fp, FAKE_HOST_KEY) {
                        return Err(RemoteError::HostKeyNotListed {
                            label: target.label.clone(),
                            server_id: server_id.clone(),
                            presented_fingerprint: fp,
                            listed_fingerprints: super::listed_fingerprints(keys),
                        });
                    }
                    (FAKE_HOST_KEY.to_string(), true)
                }
            };
            Ok(Connected {
                fingerprint: super::fingerprint(&host_key).unwrap_or_default(),
                host_key,
                learned,
            })
        })
    }

    fn run<'a>(&'a self, target: &'a Target, cmd: &'a RemoteCommand) -> RemoteFuture<'a, Output> {
        Box::pin(async move {
            let command = cmd.inner().map_err(|e| RemoteError::invalid(target, e))?;
            let call = Call::Run {
                label: target.label.clone(),
                command: command.clone(),
                sudo: cmd.wants_sudo(),
                timeout_secs: cmd.timeout_secs(),
                step: cmd.step_name().map(str::to_string),
                stdin: Secret::new(cmd.stdin_bytes().unwrap_or_default().to_vec()),
            };
            let (exit_status, stdout, stderr) = match self.answer(call, &command) {
                None => (0, Vec::new(), Vec::new()),
                Some(FakeReply::Output {
                    exit_status,
                    stdout,
                    stderr,
                }) => (exit_status, stdout, stderr),
                Some(FakeReply::Error(kind)) => return Err(FakeReply::error(kind, target)),
            };
            if let Some(sink) = cmd.stdout_sink() {
                let mut lines = crate::remote::LineSplitter::default();
                lines.push(&stdout, sink);
                lines.finish(sink);
            }
            Ok(Output {
                exit_status: Some(exit_status),
                signal: None,
                stdout,
                stderr,
                truncated: false,
                duration: Duration::ZERO,
                host_key: match &target.host_key {
                    HostKeyPolicy::Pinned(k) => k.clone(),
                    HostKeyPolicy::TrustOnFirstUse | HostKeyPolicy::Listed { .. } => {
                        FAKE_HOST_KEY.to_string()
                    }
                },
            })
        })
    }

    fn upload<'a>(
        &'a self,
        target: &'a Target,
        path: &'a str,
        bytes: &'a [u8],
        mode: u32,
        sudo: bool,
    ) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            let call = Call::Upload {
                label: target.label.clone(),
                path: path.to_string(),
                bytes: Secret::new(bytes.to_vec()),
                mode,
                sudo,
            };
            match self.answer(call, path) {
                Some(FakeReply::Error(kind)) => Err(FakeReply::error(kind, target)),
                Some(FakeReply::Output { exit_status, .. }) if exit_status != 0 => {
                    Err(RemoteError::Helper {
                        label: target.label.clone(),
                        what: format!("install into {path}"),
                        exit_status: Some(exit_status),
                        stderr_tail: String::new(),
                    })
                }
                _ => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::Auth;
    use std::sync::Arc;

    fn target() -> Target {
        Target {
            address: "10.0.0.5".parse().unwrap(),
            port: 22,
            username: "ubuntu".into(),
            auth: Auth::Password(Secret::new("hunter2".into())),
            host_key: HostKeyPolicy::TrustOnFirstUse,
            label: "VDU1-0".into(),
        }
    }

    #[tokio::test]
    async fn records_and_answers_from_rules_then_queue() {
        let fake = Arc::new(FakeRemote::new());
        let remote: Arc<dyn Remote> = fake.clone();
        fake.on("blkid", FakeReply::exit(2));
        fake.push(FakeReply::stdout("first"));
        fake.push(FakeReply::Error(FakeError::CommandTimeout));
        let t = target();

        let c = RemoteCommand::new("blkid").arg("/dev/vdb").sudo(true);
        assert_eq!(remote.run(&t, &c).await.unwrap().exit_status, Some(2));
        assert_eq!(remote.run(&t, &c).await.unwrap().exit_status, Some(2));
        let echo = RemoteCommand::new("echo")
            .arg("$(id)")
            .stdin(b"hunter2".to_vec());
        let out = remote.run(&t, &echo).await.unwrap();
        assert_eq!(out.stdout_str(), "first");
        let err = remote.run(&t, &echo).await.unwrap_err();
        assert!(err.is_transient());
        assert_eq!(err.kind(), "command_timeout");
        assert!(remote.run(&t, &echo).await.unwrap().success());

        remote
            .upload(&t, "/etc/exports", b"x", 0o644, true)
            .await
            .unwrap();
        let c = remote.connect(&t).await.unwrap();
        assert!(c.learned);
        assert!(c.fingerprint.starts_with("SHA256:"));

        assert_eq!(
            fake.commands(),
            vec![
                "blkid /dev/vdb",
                "blkid /dev/vdb",
                "echo '$(id)'",
                "echo '$(id)'",
                "echo '$(id)'"
            ]
        );
        let calls = fake.calls();
        assert_eq!(calls.len(), 7);
        assert!(matches!(&calls[0], Call::Run { sudo: true, .. }));
        assert!(matches!(&calls[5], Call::Upload { mode: 0o644, .. }));
        assert!(!format!("{calls:?}").contains("hunter2"));
    }
}
