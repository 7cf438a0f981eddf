//! Remote execution on VNFC hosts: [`Remote`] (trait), [`SshRemote`] (russh + russh-sftp) and
//! [`fake::FakeRemote`] (scripted, for engine tests).
//!
//! Compared with Tacker's MgmtDrivers, which run commands through `tacker/common/cmd_executer.py`
//! (paramiko `WarningPolicy`: any host key accepted; the timeout bounds only the connect; commands
//! and results logged whole), this module:
//! - **verifies host keys**: a pinned key (one per VNFC, kept in SQLite) must match exactly
//!   ([`HostKeyPolicy::Pinned`]); trust on first use returns the learned key for the caller to pin;
//! - keeps **secrets out of argv, logs, errors and `Debug`**: passwords travel in the SSH auth
//!   packet or on stdin (sudo), secret variables on stdin ([`RemoteCommand::env_secret`]);
//! - enforces **deadlines on the remote side** (`timeout -k`) and on the client side, and a
//!   connect timeout;
//! - reuses **one authenticated session per host** ([`SessionPool`]) and bounds concurrent channels,
//!   so hosts can be worked on in parallel by the caller;
//! - classifies failures as transient or permanent ([`RemoteError::is_transient`]).
//!
//! Every command string is produced by [`quote`] through [`RemoteCommand`].

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use vnfkeeper_core::wire::Secret;

pub mod fake;
mod pool;
mod quote;
mod session;
mod ssh;

pub use pool::SessionPool;
pub use quote::{
    DEFAULT_TIMEOUT, KILL_AFTER, LineSink, QuoteError, RemoteCommand, Rendered, SudoMode, join,
    quote,
};
pub use session::SshConfig;
pub use ssh::SshRemote;

/// How to log in (RFC 4252 `password` or `publickey`).
#[derive(Clone)]
pub enum Auth {
    /// Password authentication; the same password is given to `sudo -S` on stdin.
    Password(Secret<String>),
    /// Public-key authentication with an OpenSSH private key file (ed25519, ECDSA or RSA; RSA
    /// signs with rsa-sha2-256/512 when the server offers them).
    Key {
        /// Path of the private key file on this machine.
        path: PathBuf,
        /// Passphrase of an encrypted key file.
        passphrase: Option<Secret<String>>,
    },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Password(_) => f.write_str("Password(***)"),
            Auth::Key { path, passphrase } => f
                .debug_struct("Key")
                .field("path", path)
                .field("passphrase", &passphrase.as_ref().map(|_| "***"))
                .finish(),
        }
    }
}

impl Auth {
    /// The login password, if this is password authentication.
    pub fn password(&self) -> Option<&Secret<String>> {
        match self {
            Auth::Password(p) => Some(p),
            Auth::Key { .. } => None,
        }
    }
}

/// Which server host keys are accepted (RFC 4253 §8: the client must verify the host key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// Only this key, as an OpenSSH public key line (`ssh-ed25519 AAAA… [comment]`); algorithm and
    /// key blob must match exactly (the comment is ignored). Anything else is
    /// [`RemoteError::HostKeyChanged`].
    Pinned(String),
    /// Accept whatever key the server presents and return it (in [`Output::host_key`] and
    /// [`Connected::host_key`]) so that the caller pins it. Use only where the network path to a
    /// freshly created VM is trusted.
    TrustOnFirstUse,
    /// First contact verified out of band: accept only a key the server's console output lists
    /// (cloud-init's blocks, read through Nova `os-getConsoleOutput`; see
    /// [`vnfkeeper_core::console::parse`]), and return it for the caller to pin. Any other key is
    /// refused during the key exchange, before authentication — no password is sent — with
    /// [`RemoteError::HostKeyNotListed`].
    Listed {
        /// Nova server id of the host (named in the error).
        server_id: String,
        /// What the console lists.
        keys: vnfkeeper_core::console::ConsoleHostKeys,
    },
}

/// One remote host and how to reach it.
#[derive(Debug, Clone)]
pub struct Target {
    /// Address of the host's SSH server.
    pub address: IpAddr,
    /// TCP port (22 on a standard host).
    pub port: u16,
    /// Login user; `root` never goes through sudo.
    pub username: String,
    /// Credentials.
    pub auth: Auth,
    /// Host key verification.
    pub host_key: HostKeyPolicy,
    /// Name in logs and errors: the VNFC id (log field `vnfc_id`).
    pub label: String,
}

impl Target {
    /// The socket address `address:port`.
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }

    /// Whether the login user is `root` (then `sudo` is not used).
    pub fn is_root(&self) -> bool {
        self.username == "root"
    }

    /// How [`RemoteCommand::render`] must wrap a command that asks for sudo on this target.
    pub fn sudo_mode(&self, wants_sudo: bool) -> SudoMode {
        match (&self.auth, wants_sudo && !self.is_root()) {
            (_, false) => SudoMode::None,
            (Auth::Password(_), true) => SudoMode::Password,
            (Auth::Key { .. }, true) => SudoMode::NonInteractive,
        }
    }
}

/// Result of a remote command that ran to completion (whatever its exit status).
#[derive(Clone, PartialEq, Eq)]
pub struct Output {
    /// Exit status (RFC 4254 §6.10 `exit-status`); `None` if the command died from a signal or the
    /// server sent none.
    pub exit_status: Option<u32>,
    /// Signal name without `SIG` (`KILL`, `TERM`, …) from `exit-signal`, if any.
    pub signal: Option<String>,
    /// Standard output (capped at [`OUTPUT_LIMIT`] bytes; see `truncated`).
    pub stdout: Vec<u8>,
    /// Standard error (capped at [`OUTPUT_LIMIT`] bytes).
    pub stderr: Vec<u8>,
    /// Whether stdout or stderr was cut at [`OUTPUT_LIMIT`].
    pub truncated: bool,
    /// Wall-clock time from opening the channel to its close.
    pub duration: Duration,
    /// The server's host key as an OpenSSH line (`ssh-ed25519 AAAA…`), as verified for this
    /// session; with [`HostKeyPolicy::TrustOnFirstUse`] this is the key to pin.
    pub host_key: String,
}

/// Maximum bytes kept per output stream of one command (the rest is dropped, `truncated` set).
pub const OUTPUT_LIMIT: usize = 16 * 1024 * 1024;

impl fmt::Debug for Output {
    /// Shows sizes, not contents: output may hold anything the remote side printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Output")
            .field("exit_status", &self.exit_status)
            .field("signal", &self.signal)
            .field("stdout_len", &self.stdout.len())
            .field("stderr_len", &self.stderr.len())
            .field("truncated", &self.truncated)
            .field("duration", &self.duration)
            .finish()
    }
}

impl Output {
    /// Exit status 0 (no signal).
    pub fn success(&self) -> bool {
        self.exit_status == Some(0)
    }

    /// Standard output as text (invalid UTF-8 replaced by U+FFFD).
    pub fn stdout_str(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stdout)
    }

    /// Standard error as text (invalid UTF-8 replaced by U+FFFD).
    pub fn stderr_str(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.stderr)
    }

    /// The last `n_bytes` (at most, cut at a character boundary) of standard error as text, with
    /// every occurrence of each non-empty secret replaced by `***` first: safe for error files and
    /// logs.
    pub fn stderr_tail(&self, n_bytes: usize, secrets: &[&Secret<String>]) -> String {
        tail_masked(&self.stderr, n_bytes, secrets)
    }
}

/// Splits a byte stream into lines for a [`LineSink`]: bytes are buffered until a `\n`; at most
/// [`LINE_LIMIT`] bytes are held, a longer line is given cut to that size and its rest is dropped
/// (a piece of a JSON event is no event, and its tail would be shown unread).
#[derive(Default)]
pub(crate) struct LineSplitter {
    pending: Vec<u8>,
    /// The line being read was given already (cut); drop bytes up to its end.
    cut: bool,
}

/// The longest line a [`LineSplitter`] gives; the rest of a longer line is dropped.
pub(crate) const LINE_LIMIT: usize = 64 * 1024;

impl LineSplitter {
    /// Feeds `data`; gives every completed line to `sink`.
    pub(crate) fn push(&mut self, data: &[u8], sink: &LineSink) {
        for &b in data {
            if b == b'\n' {
                if self.cut {
                    self.cut = false;
                } else {
                    self.emit(sink);
                }
                continue;
            }
            if self.cut {
                continue;
            }
            if self.pending.len() >= LINE_LIMIT {
                self.emit(sink);
                self.cut = true;
                continue;
            }
            self.pending.push(b);
        }
    }

    /// Gives the last line, if the output did not end with a newline.
    pub(crate) fn finish(&mut self, sink: &LineSink) {
        if !self.pending.is_empty() {
            self.emit(sink);
        }
        self.cut = false;
    }

    fn emit(&mut self, sink: &LineSink) {
        if self.pending.last() == Some(&b'\r') {
            self.pending.pop();
        }
        sink(&String::from_utf8_lossy(&self.pending));
        self.pending.clear();
    }
}

/// Masks `secrets` in `bytes` (lossy UTF-8) and keeps the last `n_bytes` (at a char boundary).
pub fn tail_masked(bytes: &[u8], n_bytes: usize, secrets: &[&Secret<String>]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    for s in secrets {
        let s = s.expose();
        if !s.is_empty() {
            text = text.replace(s.as_str(), "***");
        }
    }
    if text.len() <= n_bytes {
        return text;
    }
    let mut start = text.len() - n_bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Result of [`Remote::connect`]: the authenticated session's verified host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// The host key as an OpenSSH line (`ssh-ed25519 AAAA…`, no comment).
    pub host_key: String,
    /// Its SHA256 fingerprint (`SHA256:…`, as `ssh-keygen -l` prints it).
    pub fingerprint: String,
    /// True when the key was not compared with a pin (accepted by trust on first use, or as
    /// listed by the console): the caller pins it.
    pub learned: bool,
}

/// Which side's deadline ended a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutSide {
    /// The remote `timeout` wrapper killed the command (exit status 124, or 137 after `-k`).
    Remote,
    /// The client stopped waiting (deadline + [`KILL_AFTER`] + grace); the remote process was
    /// signalled through the channel where the server allows it and is bounded by the remote
    /// wrapper anyway.
    Client,
}

/// What went wrong talking to a host. Every variant names the target (`label` = VNFC id); none
/// contains a password, passphrase, stdin or secret variable. See [`is_transient`](Self::is_transient).
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// TCP connect failed (refused, reset, unreachable, …). Transient.
    #[error("{label}: cannot connect to {address}: {source}")]
    Connect {
        /// VNFC id.
        label: String,
        /// Address tried.
        address: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// No SSH session within the connect timeout (TCP + key exchange + authentication). Transient.
    #[error("{label}: no SSH session with {address} within {after:?}")]
    ConnectTimeout {
        /// VNFC id.
        label: String,
        /// Address tried.
        address: SocketAddr,
        /// The connect timeout.
        after: Duration,
    },
    /// The server's host key is not the pinned one (possible man in the middle, or a rebuilt VM
    /// that must be re-pinned explicitly). Permanent.
    #[error(
        "{label}: HOST KEY CHANGED: expected {expected_fingerprint}, server presented {got_fingerprint}"
    )]
    HostKeyChanged {
        /// VNFC id.
        label: String,
        /// Fingerprint of the pinned key (`SHA256:…`).
        expected_fingerprint: String,
        /// Fingerprint of the key the server presented.
        got_fingerprint: String,
    },
    /// First contact: the server presented a key its console output does not list (possible man
    /// in the middle, or a console of another server). Refused before authentication. Permanent.
    #[error(
        "{label}: HOST KEY NOT LISTED: server {server_id} presented {presented_fingerprint}, its console lists {listed_fingerprints}; no password was sent"
    )]
    HostKeyNotListed {
        /// VNFC id.
        label: String,
        /// Nova server id.
        server_id: String,
        /// Fingerprint of the key the server presented (`SHA256:…`).
        presented_fingerprint: String,
        /// The fingerprints the console lists, comma-separated.
        listed_fingerprints: String,
    },
    /// The pinned host key string is not an OpenSSH public key line. Permanent.
    #[error("{label}: pinned host key is not a valid OpenSSH public key: {reason}")]
    BadPinnedKey {
        /// VNFC id.
        label: String,
        /// Parser message (the key is public; the message contains no secret).
        reason: String,
    },
    /// The server rejected our credentials (RFC 4252 `SSH_MSG_USERAUTH_FAILURE`). Permanent.
    #[error("{label}: authentication as {username} by {method} failed")]
    AuthFailed {
        /// VNFC id.
        label: String,
        /// Login user.
        username: String,
        /// `password` or `publickey`.
        method: &'static str,
    },
    /// The private key file could not be read or decrypted. Permanent.
    #[error("{label}: cannot load private key {path}: {reason}")]
    KeyFile {
        /// VNFC id.
        label: String,
        /// Key file path.
        path: PathBuf,
        /// Why (never the passphrase).
        reason: String,
    },
    /// The command did not finish before its deadline. Transient (the engine's check step decides
    /// whether re-running is safe).
    #[error("{label}: command timed out after {after:?} ({side:?} deadline)")]
    CommandTimeout {
        /// VNFC id.
        label: String,
        /// Deadline that expired.
        after: Duration,
        /// Which side enforced it.
        side: TimeoutSide,
    },
    /// The session or channel went away (disconnect, keepalive timeout, channel closed without
    /// status, I/O error after connect). Transient; the pool reconnects next time.
    #[error("{label}: SSH session lost: {reason}")]
    SessionLost {
        /// VNFC id.
        label: String,
        /// What happened.
        reason: String,
    },
    /// SSH protocol failure that retrying will not fix (no common algorithm, bad signature, channel
    /// open refused by policy). Permanent.
    #[error("{label}: SSH protocol error: {reason}")]
    Protocol {
        /// VNFC id.
        label: String,
        /// What happened.
        reason: String,
    },
    /// The SFTP server denied access to a path (SSH_FX_PERMISSION_DENIED). Permanent.
    #[error("{label}: SFTP permission denied on {path}")]
    SftpPermissionDenied {
        /// VNFC id.
        label: String,
        /// Remote path.
        path: String,
    },
    /// Another SFTP failure (no such directory, server failure, timeout).
    #[error("{label}: SFTP {op} {path} failed: {reason}")]
    Sftp {
        /// VNFC id.
        label: String,
        /// Operation (`open`, `write`, `rename`, …).
        op: &'static str,
        /// Remote path.
        path: String,
        /// Server or client message.
        reason: String,
        /// Timeouts and I/O errors are transient; status errors are not.
        transient: bool,
    },
    /// A remote helper command of an operation (e.g. `install` into place after an upload) exited
    /// non-zero. Permanent.
    #[error("{label}: {what} failed with exit status {exit_status:?}: {stderr_tail}")]
    Helper {
        /// VNFC id.
        label: String,
        /// What was attempted.
        what: String,
        /// Exit status.
        exit_status: Option<u32>,
        /// Last bytes of stderr, secrets masked.
        stderr_tail: String,
    },
    /// The command or path could not be built (NUL byte, relative upload path, bad variable name,
    /// password with a newline for sudo). Permanent.
    #[error("{label}: invalid command: {reason}")]
    InvalidCommand {
        /// VNFC id.
        label: String,
        /// Why (never a secret value).
        reason: String,
    },
}

impl RemoteError {
    /// Whether retrying later may succeed: connection refused/reset/unreachable, connect timeout,
    /// command timeout, lost session, transient SFTP failures. Authentication, host key, permission
    /// and invalid input are permanent.
    pub fn is_transient(&self) -> bool {
        match self {
            RemoteError::Connect { .. }
            | RemoteError::ConnectTimeout { .. }
            | RemoteError::CommandTimeout { .. }
            | RemoteError::SessionLost { .. } => true,
            RemoteError::Sftp { transient, .. } => *transient,
            RemoteError::HostKeyChanged { .. }
            | RemoteError::HostKeyNotListed { .. }
            | RemoteError::BadPinnedKey { .. }
            | RemoteError::AuthFailed { .. }
            | RemoteError::KeyFile { .. }
            | RemoteError::Protocol { .. }
            | RemoteError::SftpPermissionDenied { .. }
            | RemoteError::Helper { .. }
            | RemoteError::InvalidCommand { .. } => false,
        }
    }

    /// Short stable name for the `error_kind` log field and the step journal.
    pub fn kind(&self) -> &'static str {
        match self {
            RemoteError::Connect { .. } => "connect",
            RemoteError::ConnectTimeout { .. } => "connect_timeout",
            RemoteError::HostKeyChanged { .. } => "host_key_changed",
            RemoteError::HostKeyNotListed { .. } => "host_key_not_listed",
            RemoteError::BadPinnedKey { .. } => "bad_pinned_key",
            RemoteError::AuthFailed { .. } => "auth_failed",
            RemoteError::KeyFile { .. } => "key_file",
            RemoteError::CommandTimeout { .. } => "command_timeout",
            RemoteError::SessionLost { .. } => "session_lost",
            RemoteError::Protocol { .. } => "protocol",
            RemoteError::SftpPermissionDenied { .. } => "sftp_permission_denied",
            RemoteError::Sftp { .. } => "sftp",
            RemoteError::Helper { .. } => "helper_failed",
            RemoteError::InvalidCommand { .. } => "invalid_command",
        }
    }

    /// The target label (VNFC id) the error is about.
    pub fn label(&self) -> &str {
        match self {
            RemoteError::Connect { label, .. }
            | RemoteError::ConnectTimeout { label, .. }
            | RemoteError::HostKeyChanged { label, .. }
            | RemoteError::HostKeyNotListed { label, .. }
            | RemoteError::BadPinnedKey { label, .. }
            | RemoteError::AuthFailed { label, .. }
            | RemoteError::KeyFile { label, .. }
            | RemoteError::CommandTimeout { label, .. }
            | RemoteError::SessionLost { label, .. }
            | RemoteError::Protocol { label, .. }
            | RemoteError::SftpPermissionDenied { label, .. }
            | RemoteError::Sftp { label, .. }
            | RemoteError::Helper { label, .. }
            | RemoteError::InvalidCommand { label, .. } => label,
        }
    }

    pub(crate) fn invalid(target: &Target, e: impl fmt::Display) -> Self {
        RemoteError::InvalidCommand {
            label: target.label.clone(),
            reason: e.to_string(),
        }
    }
}

/// Boxed future returned by [`Remote`] methods (keeps the trait usable as `dyn Remote`).
pub type RemoteFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, RemoteError>> + Send + 'a>>;

/// One file for [`Remote::upload_files`]: its absolute path, content and permission bits.
#[derive(Clone, Copy)]
pub struct UploadFile<'a> {
    /// Absolute path on the host.
    pub path: &'a str,
    /// Content (may hold secrets: never logged).
    pub bytes: &'a [u8],
    /// Permission bits, e.g. `0o600`.
    pub mode: u32,
}

impl std::fmt::Debug for UploadFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadFile")
            .field("path", &self.path)
            .field("bytes", &self.bytes.len())
            .field("mode", &format_args!("{:o}", self.mode))
            .finish()
    }
}

/// Runs commands on and copies files to remote hosts. Implemented by [`SshRemote`] and
/// [`fake::FakeRemote`]; use it as `Arc<dyn Remote>`.
pub trait Remote: Send + Sync {
    /// Opens (or reuses) an authenticated session and returns the verified host key; with
    /// [`HostKeyPolicy::TrustOnFirstUse`] this is how the caller learns the key to pin.
    ///
    /// # Errors
    /// Connection, host key and authentication errors of [`RemoteError`].
    fn connect<'a>(&'a self, target: &'a Target) -> RemoteFuture<'a, Connected>;

    /// Runs `cmd` (rendered with its remote deadline and sudo wrapper) and collects its output.
    /// A non-zero exit status is **not** an error: check [`Output::success`].
    ///
    /// # Errors
    /// [`RemoteError::CommandTimeout`] when a deadline expired; connection, host key,
    /// authentication, session and invalid-command errors.
    fn run<'a>(&'a self, target: &'a Target, cmd: &'a RemoteCommand) -> RemoteFuture<'a, Output>;

    /// Writes `bytes` to the absolute `path` with permission bits `mode` (e.g. `0o644`),
    /// atomically from a reader's point of view where possible: written to a temporary name in the
    /// same directory and renamed into place. With `sudo` (and a non-root login) the file goes to
    /// `/tmp` with mode 0600 first and `sudo install -m MODE` puts it in place (owned by root).
    ///
    /// # Errors
    /// SFTP errors ([`RemoteError::SftpPermissionDenied`], [`RemoteError::Sftp`]),
    /// [`RemoteError::Helper`] when the sudo install fails, plus those of [`connect`](Self::connect).
    fn upload<'a>(
        &'a self,
        target: &'a Target,
        path: &'a str,
        bytes: &'a [u8],
        mode: u32,
        sudo: bool,
    ) -> RemoteFuture<'a, ()>;

    /// Writes each of `files` as [`upload`](Self::upload) does, in order, stopping at the first
    /// error; an implementation may write them all through one SFTP session (the default uploads
    /// them one by one).
    ///
    /// # Errors
    /// Those of [`upload`](Self::upload), for the first file that failed.
    fn upload_files<'a>(
        &'a self,
        target: &'a Target,
        files: &'a [UploadFile<'a>],
        sudo: bool,
    ) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            for f in files {
                self.upload(target, f.path, f.bytes, f.mode, sudo).await?;
            }
            Ok(())
        })
    }

    /// Drops any pooled session to `address` without using it again: the server behind the
    /// address was replaced (a heal), so an old session must not be reused, nor its host key
    /// learned for the new server. Default: nothing is pooled.
    fn forget_address(&self, address: std::net::IpAddr) -> RemoteFuture<'_, ()> {
        let _ = address;
        Box::pin(async { Ok(()) })
    }
}

/// An OpenSSH public key line that does not parse ([`parse_public_key`], [`fingerprint`]):
/// the parser's message (the key is public; the message holds no secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPublicKey(pub String);

/// Parses an OpenSSH public key line (`ALGORITHM BASE64 [comment]`).
///
/// # Errors
/// [`BadPublicKey`] when the line is not a valid key.
pub fn parse_public_key(line: &str) -> Result<russh::keys::PublicKey, BadPublicKey> {
    russh::keys::PublicKey::from_openssh(line.trim()).map_err(|e| BadPublicKey(e.to_string()))
}

/// SHA256 fingerprint of an OpenSSH public key line, formatted like `ssh-keygen -l`:
/// `SHA256:` followed by unpadded standard base64 of the SHA-256 of the key blob (RFC 4253 §6.6
/// encoding).
///
/// # Errors
/// [`BadPublicKey`] when the line is not a valid key.
pub fn fingerprint(line: &str) -> Result<String, BadPublicKey> {
    parse_public_key(line).map(|k| key_fingerprint(&k))
}

/// The fingerprints a console lists, for messages: those of its fingerprint block, then those
/// of its key block's keys (comma-separated, without repeats).
pub fn listed_fingerprints(keys: &vnfkeeper_core::console::ConsoleHostKeys) -> String {
    let mut out: Vec<String> = keys.fingerprints.clone();
    for k in &keys.keys {
        if let Ok(f) = fingerprint(k)
            && !out.contains(&f)
        {
            out.push(f);
        }
    }
    out.join(", ")
}

pub(crate) fn key_fingerprint(key: &russh::keys::PublicKey) -> String {
    key.fingerprint(russh::keys::HashAlg::Sha256).to_string()
}

/// The OpenSSH line of a key without comment: `ALGORITHM BASE64`.
pub(crate) fn key_line(key: &russh::keys::PublicKey) -> String {
    let mut k = key.clone();
    k.set_comment("");
    k.to_openssh().unwrap_or_default().trim().to_string()
}

/// Whether two OpenSSH public key lines name the same key (algorithm and blob; comments ignored).
pub fn same_key(a: &str, b: &str) -> bool {
    match (parse_public_key(a), parse_public_key(b)) {
        (Ok(a), Ok(b)) => a.key_data() == b.key_data(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_longer_than_the_limit_are_cut_and_their_rest_dropped() {
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let g = std::sync::Arc::clone(&got);
        let sink: LineSink = std::sync::Arc::new(move |l: &str| g.lock().unwrap().push(l.into()));
        let mut s = LineSplitter::default();
        let long = "x".repeat(LINE_LIMIT + 10);
        for chunk in format!("a\r\n{long}\nb\nc").as_bytes().chunks(1000) {
            s.push(chunk, &sink);
        }
        s.finish(&sink);
        let got = got.lock().unwrap();
        assert_eq!(
            got.len(),
            4,
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(got[0], "a");
        assert_eq!(got[1].len(), LINE_LIMIT);
        assert_eq!(got[2..], ["b", "c"]);
    }

    // A real ed25519 key (public part only) and its fingerprint as printed by `ssh-keygen -lf`.
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYiNiOOo3XHRcWQS07T3ilpTDJspX52tih3/dP/OhwY a@b";

    #[test]
    fn fingerprint_is_openssh_style() {
        let fp = fingerprint(KEY).unwrap();
        assert_eq!(fp, "SHA256:U2n2I1UYgj1BSdckUyZctgaWW8CSlL+QfXh3bjuiIFY");
        assert!(fingerprint("ssh-ed25519 notbase64!").is_err());
        assert!(same_key(KEY, KEY.trim_end_matches(" a@b")));
        assert!(!same_key(KEY, "garbage"));
    }

    #[test]
    fn secrets_do_not_show() {
        let t = Target {
            address: "127.0.0.1".parse().unwrap(),
            port: 22,
            username: "ubuntu".into(),
            auth: Auth::Password(Secret::new("hunter2".into())),
            host_key: HostKeyPolicy::TrustOnFirstUse,
            label: "VDU1-0".into(),
        };
        assert!(!format!("{t:?}").contains("hunter2"));
        let k = Auth::Key {
            path: "/k".into(),
            passphrase: Some(Secret::new("pass-phrase".into())),
        };
        assert!(!format!("{k:?}").contains("pass-phrase"));
        let out = Output {
            exit_status: Some(1),
            signal: None,
            stdout: b"hunter2".to_vec(),
            stderr: "sudo: hunter2 wrong ✓".as_bytes().to_vec(),
            truncated: false,
            duration: Duration::from_millis(5),
            host_key: String::new(),
        };
        assert!(!format!("{out:?}").contains("hunter2"));
        let pw = Secret::new("hunter2".to_string());
        assert_eq!(out.stderr_tail(1000, &[&pw]), "sudo: *** wrong ✓");
        assert_eq!(out.stderr_tail(9, &[&pw]), "wrong ✓");
        assert_eq!(out.stderr_tail(8, &[&pw]), "rong ✓");
        assert_eq!(out.stderr_tail(2, &[&pw]), "");
    }

    #[test]
    fn classification() {
        let e = RemoteError::AuthFailed {
            label: "x".into(),
            username: "u".into(),
            method: "password",
        };
        assert!(!e.is_transient());
        assert_eq!(e.kind(), "auth_failed");
        let e = RemoteError::CommandTimeout {
            label: "x".into(),
            after: Duration::from_secs(2),
            side: TimeoutSide::Remote,
        };
        assert!(e.is_transient());
        assert_eq!(e.label(), "x");
    }
}
