//! [`SshRemote`]: the [`Remote`] implementation on pooled SSH sessions: commands in `exec`
//! channels (RFC 4254 §6.5) with remote and client deadlines and sudo, and uploads over SFTP
//! (russh-sftp, SFTP v3 as draft-ietf-secsh-filexfer-02 defines it).

use std::time::{Duration, Instant};

use russh::{ChannelMsg, ChannelReadHalf, ChannelWriteHalf, Sig, client};
use russh_sftp::client::SftpSession;
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::protocol::{FileAttributes, OpenFlags, StatusCode};
use tokio::io::AsyncWriteExt;

use super::pool::{Lease, SessionPool};
use super::session::{SshConfig, ssh_error};
use super::{
    Connected, KILL_AFTER, LineSink, OUTPUT_LIMIT, Output, Remote, RemoteCommand, RemoteError,
    RemoteFuture, Target, TimeoutSide, UploadFile, key_fingerprint, key_line, tail_masked,
};

/// [`Remote`] over SSH with a [`SessionPool`]. One `SshRemote` per operation (or reconcile pass)
/// gives one session per host for that operation; [`close`](Self::close) ends them.
pub struct SshRemote {
    pool: SessionPool,
}

impl SshRemote {
    /// A remote with an empty pool.
    pub fn new(config: SshConfig) -> Self {
        Self {
            pool: SessionPool::new(config),
        }
    }

    /// The session pool (e.g. for [`SessionPool::handshakes`]).
    pub fn pool(&self) -> &SessionPool {
        &self.pool
    }

    /// Disconnects all sessions.
    pub async fn close(&self) {
        self.pool.close_all().await
    }

    async fn do_connect(&self, target: &Target) -> Result<Connected, RemoteError> {
        let (s, _) = self.pool.session(target).await?;
        Ok(Connected {
            host_key: key_line(&s.host_key),
            fingerprint: key_fingerprint(&s.host_key),
            learned: s.learned,
        })
    }

    async fn do_run(&self, target: &Target, cmd: &RemoteCommand) -> Result<Output, RemoteError> {
        let rendered = cmd
            .render(target.sudo_mode(cmd.wants_sudo()), target.auth.password())
            .map_err(|e| RemoteError::invalid(target, e))?;
        let step = cmd.step_name().unwrap_or("");
        let remote_deadline = Duration::from_secs(cmd.timeout_secs());
        let client_deadline = remote_deadline + KILL_AFTER + self.pool.config().client_grace;
        // The command string contains no secret by construction (see quote.rs).
        tracing::debug!(
            host = %target.address,
            vnfc_id = %target.label,
            step,
            command = %rendered.command,
            "remote command"
        );
        let started = Instant::now();
        let (lease, channel) = self.open_channel(target).await?;
        let (mut read, write) = channel.split();
        let stdin = rendered.stdin.expose().clone();
        let exchange = exchange(
            target,
            &write,
            &mut read,
            &rendered.command,
            stdin,
            cmd.stdout_sink(),
        );
        let out = match tokio::time::timeout(client_deadline, exchange).await {
            Ok(r) => r?,
            Err(_) => {
                // RFC 4254 §6.9 signal; OpenSSH ≥ 7.9 delivers it to the session's process.
                // The remote `timeout` wrapper bounds the command regardless.
                let _ = write.signal(Sig::KILL).await;
                let _ = write.close().await;
                let e = RemoteError::CommandTimeout {
                    label: target.label.clone(),
                    after: client_deadline,
                    side: TimeoutSide::Client,
                };
                log_error(target, step, started, &e);
                return Err(e);
            }
        };
        let duration = started.elapsed();
        if let Some(e) = self
            .failure(target, &lease, &out, duration, remote_deadline)
            .await
        {
            log_error(target, step, started, &e);
            return Err(e);
        }
        let output = Output {
            exit_status: out.exit_status,
            signal: out.signal,
            truncated: out.stdout.truncated || out.stderr.truncated,
            stdout: out.stdout.bytes,
            stderr: out.stderr.bytes,
            duration,
            host_key: key_line(&lease.session.host_key),
        };
        log_finished(target, step, &output);
        Ok(output)
    }

    /// What makes a command that ran for `duration` on `lease`'s session a failure of the
    /// remote side, not a result: the `exec` request refused, the channel closed without an
    /// exit status (the session is dropped from the pool), or the remote `timeout` wrapper's
    /// exit (124 or 137) once `remote_deadline` has passed. `None`: `out` is the result.
    async fn failure(
        &self,
        target: &Target,
        lease: &Lease,
        out: &Collected,
        duration: Duration,
        remote_deadline: Duration,
    ) -> Option<RemoteError> {
        if out.exec_refused {
            return Some(RemoteError::Protocol {
                label: target.label.clone(),
                reason: "server refused the exec request".into(),
            });
        }
        if out.exit_status.is_none() && out.signal.is_none() {
            self.pool.forget(target, &lease.session).await;
            return Some(RemoteError::SessionLost {
                label: target.label.clone(),
                reason: "channel closed without exit status".into(),
            });
        }
        // GNU timeout exits 124 when it sent SIGTERM, 137 (128+9) when it had to SIGKILL.
        if matches!(out.exit_status, Some(124) | Some(137)) && duration >= remote_deadline {
            return Some(RemoteError::CommandTimeout {
                label: target.label.clone(),
                after: remote_deadline,
                side: TimeoutSide::Remote,
            });
        }
        None
    }

    /// Opens a session channel on the pooled session. A reused session that turns out to be dead
    /// (the server or the network dropped it since) is replaced once by a fresh one; nothing has
    /// run on the host yet at that point, so this retry is always safe.
    async fn open_channel(
        &self,
        target: &Target,
    ) -> Result<(Lease, russh::Channel<client::Msg>), RemoteError> {
        let lease = self.pool.lease(target).await?;
        match lease.session.handle.channel_open_session().await {
            Ok(ch) => return Ok((lease, ch)),
            Err(e) => {
                self.pool.forget(target, &lease.session).await;
                if lease.fresh {
                    return Err(ssh_error(target, e));
                }
                tracing::debug!(vnfc_id = %target.label, error = %e,
                    "pooled SSH session is dead; reconnecting");
            }
        }
        drop(lease);
        let lease = self.pool.lease(target).await?;
        match lease.session.handle.channel_open_session().await {
            Ok(ch) => Ok((lease, ch)),
            Err(e) => {
                self.pool.forget(target, &lease.session).await;
                Err(ssh_error(target, e))
            }
        }
    }

    async fn open_sftp(&self, target: &Target) -> Result<(Lease, SftpSession), RemoteError> {
        let (lease, ch) = self.open_channel(target).await?;
        ch.request_subsystem(true, "sftp")
            .await
            .map_err(|e| ssh_error(target, e))?;
        let sftp = SftpSession::new(ch.into_stream())
            .await
            .map_err(|e| sftp_error(target, "init", "", e))?;
        sftp.set_timeout(self.pool.config().sftp_timeout.as_secs().max(1));
        Ok((lease, sftp))
    }

    /// Writes `bytes` to `tmp` (created exclusively with mode 0600), then sets `mode`.
    async fn sftp_write(
        sftp: &SftpSession,
        target: &Target,
        tmp: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), RemoteError> {
        let attrs = FileAttributes {
            permissions: Some(0o600),
            ..FileAttributes::empty()
        };
        let mut f = sftp
            .open_with_flags_and_attributes(
                tmp,
                OpenFlags::CREATE | OpenFlags::EXCLUDE | OpenFlags::WRITE,
                attrs,
            )
            .await
            .map_err(|e| sftp_error(target, "open", tmp, e))?;
        f.write_all(bytes)
            .await
            .map_err(|e| sftp_io_error(target, "write", tmp, e))?;
        let attrs = FileAttributes {
            permissions: Some(mode & 0o7777),
            ..FileAttributes::empty()
        };
        f.set_metadata(attrs)
            .await
            .map_err(|e| sftp_error(target, "chmod", tmp, e))?;
        f.shutdown()
            .await
            .map_err(|e| sftp_io_error(target, "close", tmp, e))?;
        Ok(())
    }

    /// Writes `bytes` to `staged` (a sibling of `path`) and renames it over `path`; on failure
    /// the staged file is removed and `path` is unchanged.
    async fn sftp_put(
        sftp: &SftpSession,
        target: &Target,
        staged: &str,
        path: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), RemoteError> {
        let mut result = Self::sftp_write(sftp, target, staged, bytes, mode).await;
        if result.is_ok() {
            // SFTPv3 rename fails when the target exists: try, then remove and retry.
            if sftp.rename(staged, path).await.is_err() {
                let _ = sftp.remove_file(path).await;
                result = sftp
                    .rename(staged, path)
                    .await
                    .map_err(|e| sftp_error(target, "rename", path, e));
            }
        }
        if result.is_err() {
            let _ = sftp.remove_file(staged).await;
        }
        result
    }

    /// [`Remote::upload_files`]: without sudo (or as root) every file through one SFTP session,
    /// each written to a sibling and renamed into place as [`Remote::upload`] does; with sudo
    /// each file as `upload` puts it.
    async fn do_upload_files(
        &self,
        target: &Target,
        files: &[UploadFile<'_>],
        sudo: bool,
    ) -> Result<(), RemoteError> {
        if (sudo && !target.is_root()) || files.len() < 2 {
            for f in files {
                self.do_upload(target, f.path, f.bytes, f.mode, sudo)
                    .await?;
            }
            return Ok(());
        }
        let mut staged = Vec::with_capacity(files.len());
        for f in files {
            let (dir, name) = split_path(f.path).ok_or_else(|| {
                RemoteError::invalid(
                    target,
                    format!("upload path {:?} is not an absolute file path", f.path),
                )
            })?;
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let dir_prefix = if dir == "/" { "" } else { dir };
            staged.push(format!("{dir_prefix}/.{name}.vnfkeeper-{nonce}"));
        }
        let (_lease, sftp) = self.open_sftp(target).await?;
        let mut result = Ok(());
        for (f, staged) in files.iter().zip(&staged) {
            let started = Instant::now();
            result = Self::sftp_put(&sftp, target, staged, f.path, f.bytes, f.mode).await;
            if result.is_err() {
                break;
            }
            tracing::info!(
                host = %target.address,
                vnfc_id = %target.label,
                path = f.path,
                bytes = f.bytes.len(),
                sudo = false,
                duration_ms = started.elapsed().as_millis() as u64,
                "file uploaded"
            );
        }
        let _ = sftp.close().await;
        result
    }

    async fn do_upload(
        &self,
        target: &Target,
        path: &str,
        bytes: &[u8],
        mode: u32,
        sudo: bool,
    ) -> Result<(), RemoteError> {
        let (dir, name) = split_path(path).ok_or_else(|| {
            RemoteError::invalid(
                target,
                format!("upload path {path:?} is not an absolute file path"),
            )
        })?;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let dir_prefix = if dir == "/" { "" } else { dir };
        let sibling = format!("{dir_prefix}/.{name}.vnfkeeper-{nonce}");
        let started = Instant::now();
        let via_sudo = sudo && !target.is_root();
        let staged = if via_sudo {
            format!("/tmp/.vnfkeeper-upload-{nonce}")
        } else {
            sibling.clone()
        };
        {
            let (_lease, sftp) = self.open_sftp(target).await?;
            let result = if via_sudo {
                let r = Self::sftp_write(&sftp, target, &staged, bytes, 0o600).await;
                if r.is_err() {
                    let _ = sftp.remove_file(&staged).await;
                }
                r
            } else {
                Self::sftp_put(&sftp, target, &staged, path, bytes, mode).await
            };
            let _ = sftp.close().await;
            result?;
        }
        if via_sudo {
            let install = RemoteCommand::script(
                "install -m \"$1\" -- \"$2\" \"$3\" && mv -f -- \"$3\" \"$4\"; rc=$?; \
                 rm -f -- \"$2\" \"$3\"; exit $rc",
            )
            .args([
                format!("{:o}", mode & 0o7777),
                staged,
                sibling,
                path.to_string(),
            ])
            .sudo(true)
            .timeout(Duration::from_secs(60))
            .step("upload.install");
            let out = self.do_run(target, &install).await?;
            if !out.success() {
                let secrets: Vec<_> = target.auth.password().into_iter().collect();
                return Err(RemoteError::Helper {
                    label: target.label.clone(),
                    what: format!("install into {path}"),
                    exit_status: out.exit_status,
                    stderr_tail: tail_masked(&out.stderr, 400, &secrets),
                });
            }
        }
        tracing::info!(
            host = %target.address,
            vnfc_id = %target.label,
            path,
            bytes = bytes.len(),
            sudo = via_sudo,
            duration_ms = started.elapsed().as_millis() as u64,
            "file uploaded"
        );
        Ok(())
    }
}

/// Runs `command` on an open session channel: the `exec` request, then `stdin` and EOF written
/// while [`collect`] reads what comes back. The command may exit without reading all of its
/// stdin: the reader's end (channel closed) ends the exchange even if the writer still waits
/// for window space. Errors: the `exec` request cannot be sent.
async fn exchange(
    target: &Target,
    write: &ChannelWriteHalf<client::Msg>,
    read: &mut ChannelReadHalf,
    command: &str,
    stdin: Vec<u8>,
    sink: Option<&LineSink>,
) -> Result<Collected, RemoteError> {
    write
        .exec(true, command.as_bytes())
        .await
        .map_err(|e| ssh_error(target, e))?;
    let writer = async {
        if !stdin.is_empty() {
            write.data_bytes(stdin).await?;
        }
        write.eof().await
    };
    let reader = collect(read, sink);
    tokio::pin!(writer, reader);
    let mut writing = true;
    let out = loop {
        tokio::select! {
            written = &mut writer, if writing => {
                writing = false;
                if let Err(e) = written {
                    tracing::debug!(vnfc_id = %target.label, error = %e,
                        "stdin not fully written");
                }
            }
            out = &mut reader => break out,
        }
    };
    Ok(out)
}

/// Reads a channel until it closes: stdout and stderr (capped), stdout lines passed to `sink`
/// as they arrive, the exit status or signal, and whether the `exec` request was refused.
async fn collect(read: &mut ChannelReadHalf, sink: Option<&LineSink>) -> Collected {
    let mut out = Collected::default();
    let mut lines = crate::remote::LineSplitter::default();
    while let Some(msg) = read.wait().await {
        match msg {
            ChannelMsg::Data { data } => {
                out.stdout.push(&data);
                if let Some(sink) = sink {
                    lines.push(&data, sink);
                }
            }
            ChannelMsg::ExtendedData { data, ext: 1 } => out.stderr.push(&data),
            ChannelMsg::ExitStatus { exit_status } => out.exit_status = Some(exit_status),
            ChannelMsg::ExitSignal { signal_name, .. } => out.signal = Some(sig_name(&signal_name)),
            ChannelMsg::Failure => out.exec_refused = true,
            ChannelMsg::Close => break,
            _ => {}
        }
    }
    if let Some(sink) = sink {
        lines.finish(sink);
    }
    out
}

/// Logs a command's end: at DEBUG when it succeeded, at INFO with its exit status or signal
/// when it did not.
fn log_finished(target: &Target, step: &str, output: &Output) {
    let duration_ms = output.duration.as_millis() as u64;
    if output.success() {
        tracing::debug!(host = %target.address, vnfc_id = %target.label, step,
            exit_status = 0, duration_ms, "remote command finished");
    } else {
        tracing::info!(host = %target.address, vnfc_id = %target.label, step,
            exit_status = ?output.exit_status, signal = ?output.signal, duration_ms,
            "remote command failed");
    }
}

fn log_error(target: &Target, step: &str, started: Instant, e: &RemoteError) {
    tracing::warn!(
        host = %target.address,
        vnfc_id = %target.label,
        step,
        error_kind = e.kind(),
        transient = e.is_transient(),
        duration_ms = started.elapsed().as_millis() as u64,
        error = %e,
        "remote command error"
    );
}

/// `/a/b/c` → (`/a/b`, `c`); `/c` → (`/`, `c`). `None` for relative paths, directories and NULs.
fn split_path(path: &str) -> Option<(&str, &str)> {
    if !path.starts_with('/') || path.ends_with('/') || path.contains('\0') {
        return None;
    }
    let i = path.rfind('/')?;
    let (dir, name) = (&path[..i], &path[i + 1..]);
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    Some((if dir.is_empty() { "/" } else { dir }, name))
}

fn sig_name(sig: &Sig) -> String {
    match sig {
        Sig::Custom(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// Output stream capped at [`OUTPUT_LIMIT`].
#[derive(Default)]
struct Capped {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Capped {
    fn push(&mut self, data: &[u8]) {
        let room = OUTPUT_LIMIT.saturating_sub(self.bytes.len());
        if data.len() > room {
            self.truncated = true;
        }
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
    }
}

#[derive(Default)]
struct Collected {
    stdout: Capped,
    stderr: Capped,
    exit_status: Option<u32>,
    signal: Option<String>,
    exec_refused: bool,
}

fn sftp_error(target: &Target, op: &'static str, path: &str, e: SftpError) -> RemoteError {
    let label = target.label.clone();
    let path = path.to_string();
    match e {
        SftpError::Status(s) if s.status_code == StatusCode::PermissionDenied => {
            RemoteError::SftpPermissionDenied { label, path }
        }
        SftpError::Status(s) => {
            let transient = matches!(
                s.status_code,
                StatusCode::NoConnection | StatusCode::ConnectionLost
            );
            RemoteError::Sftp {
                label,
                op,
                path,
                reason: format!("{}: {}", s.status_code, s.error_message),
                transient,
            }
        }
        SftpError::Timeout | SftpError::IO(_) => RemoteError::Sftp {
            label,
            op,
            path,
            reason: e.to_string(),
            transient: true,
        },
        other => RemoteError::Sftp {
            label,
            op,
            path,
            reason: other.to_string(),
            transient: false,
        },
    }
}

fn sftp_io_error(target: &Target, op: &'static str, path: &str, e: std::io::Error) -> RemoteError {
    use std::io::ErrorKind as K;
    let label = target.label.clone();
    let path = path.to_string();
    match e.kind() {
        K::PermissionDenied => RemoteError::SftpPermissionDenied { label, path },
        kind => RemoteError::Sftp {
            label,
            op,
            path,
            reason: e.to_string(),
            transient: matches!(
                kind,
                K::TimedOut
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::BrokenPipe
                    | K::UnexpectedEof
            ),
        },
    }
}

impl Remote for SshRemote {
    fn connect<'a>(&'a self, target: &'a Target) -> RemoteFuture<'a, Connected> {
        Box::pin(self.do_connect(target))
    }

    fn forget_address(&self, address: std::net::IpAddr) -> RemoteFuture<'_, ()> {
        Box::pin(async move {
            self.pool.forget_address(address).await;
            Ok(())
        })
    }

    fn run<'a>(&'a self, target: &'a Target, cmd: &'a RemoteCommand) -> RemoteFuture<'a, Output> {
        Box::pin(self.do_run(target, cmd))
    }

    fn upload<'a>(
        &'a self,
        target: &'a Target,
        path: &'a str,
        bytes: &'a [u8],
        mode: u32,
        sudo: bool,
    ) -> RemoteFuture<'a, ()> {
        Box::pin(self.do_upload(target, path, bytes, mode, sudo))
    }

    fn upload_files<'a>(
        &'a self,
        target: &'a Target,
        files: &'a [UploadFile<'a>],
        sudo: bool,
    ) -> RemoteFuture<'a, ()> {
        Box::pin(self.do_upload_files(target, files, sudo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_path_cases() {
        assert_eq!(split_path("/etc/exports"), Some(("/etc", "exports")));
        assert_eq!(split_path("/x"), Some(("/", "x")));
        assert_eq!(split_path("etc/x"), None);
        assert_eq!(split_path("/etc/"), None);
        assert_eq!(split_path("/etc/.."), None);
        assert_eq!(split_path("/a\0b"), None);
    }

    #[test]
    fn capped_output() {
        let mut c = Capped::default();
        c.push(b"abc");
        assert_eq!(c.bytes, b"abc");
        assert!(!c.truncated);
    }
}
