//! The one quoting function and the command builder: every remote command string is made here.
//!
//! A remote command travels as one string in the SSH `exec` request (RFC 4254 §6.5), and sshd
//! hands it to the login shell as `$SHELL -c STRING`. So every word we send is quoted for a POSIX
//! shell by [`quote`] (the `shlex` crate), and scripts take their variable inputs as positional
//! parameters (`sh -c SCRIPT sh ARG1 ARG2`), never by text substitution.
//!
//! On top of the command itself, [`RemoteCommand::render`] adds:
//! - a **remote deadline**: `timeout -k KILL_AFTER SECONDS` (GNU coreutils `timeout`, which signals
//!   the command's whole process group), because closing the SSH channel does not stop the remote
//!   process (without a pty, sshd sends it no signal: a remote `sleep` outlives its channel);
//! - **sudo** when asked for, with the password (if any) written to stdin, never to argv
//!   (`sudo -S -p ''`, sudo(8)), or `sudo -n` when no password is needed;
//! - **secret environment variables** read from stdin by a small prelude (`IFS= read -r NAME`), so a
//!   proxy URL with credentials never appears in a process list;
//! - for a command that changes the host ([`RemoteCommand::host_lock`]: a step's apply), the
//!   **host's step lock** (`flock(1)` of util-linux, [`HOST_LOCK`]), inside the deadline: a
//!   command whose client went away (a daemon killed during a step) runs on until it ends or its
//!   deadline passes, and the apply that resumes the step waits for it instead of overlapping it.
//!
//! The remote login shell must be POSIX-like (bash, dash: every cloud image's default), since it
//! parses the `exec` string.

use std::fmt;
use std::time::Duration;

use vnfkeeper_core::wire::Secret;

/// Default remote deadline of a command when [`RemoteCommand::timeout`] is not called.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Grace period between `SIGTERM` and `SIGKILL` of the remote `timeout -k` wrapper.
pub const KILL_AFTER: Duration = Duration::from_secs(10);

/// Quotes one word for a POSIX shell so that the shell reads it back byte for byte.
///
/// Uses `shlex::try_quote` (single quotes, switching to double quotes around a `'`); a word made
/// only of `[A-Za-z0-9+-./:@]_` is returned unquoted and the empty string becomes `''`.
///
/// # Errors
/// [`QuoteError::Nul`] when the word contains a NUL byte: no shell or `execve` argument can carry
/// one, whatever the quoting.
pub fn quote(word: &str) -> Result<String, QuoteError> {
    shlex::try_quote(word)
        .map(|q| q.into_owned())
        .map_err(|_| QuoteError::Nul)
}

/// Why a command could not be built. Never contains a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuoteError {
    /// A word (program, argument, script) contains a NUL byte, which no shell can carry.
    #[error("a command word contains a NUL byte")]
    Nul,
    /// An environment variable name is not `[A-Za-z_][A-Za-z0-9_]*`.
    #[error("invalid environment variable name {0:?}")]
    EnvName(String),
    /// The value of the named secret variable contains a newline or NUL (it is sent as one line).
    #[error("the value of {0} contains a newline or NUL byte")]
    EnvValue(String),
    /// The sudo password contains a newline or NUL (sudo reads it as one line).
    #[error("the sudo password contains a newline or NUL byte")]
    Password,
    /// The command has no program name.
    #[error("empty command")]
    Empty,
}

/// What the command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    /// A program and its arguments (no shell syntax).
    Argv(Vec<String>),
    /// A fixed shell script and its positional parameters (`$1`, `$2`, …).
    Script { script: String, args: Vec<String> },
}

/// A command to run on a remote host, built from validated values.
///
/// ```
/// use std::time::Duration;
/// use vnfkeeper::remote::RemoteCommand;
///
/// let mkfs = RemoteCommand::new("mkfs.ext4").arg("-q").arg("/dev/vdb")
///     .timeout(Duration::from_secs(300)).sudo(true).step("volume.mkfs");
/// let probe = RemoteCommand::script(r#"blkid -o value -s TYPE "$1" || true"#).arg("/dev/vdb");
/// # let _ = (mkfs, probe);
/// ```
///
/// `Debug` shows the program/script and arguments (never secret by construction), never the stdin
/// or the values of secret environment variables.
#[derive(Clone)]
pub struct RemoteCommand {
    body: Body,
    timeout: Duration,
    sudo: bool,
    stdin: Option<Secret<Vec<u8>>>,
    env: Vec<(String, Secret<String>)>,
    step: Option<String>,
    stdout_lines: Option<LineSink>,
    host_lock: bool,
}

/// A consumer of a command's standard output line by line, as the lines arrive: each line without
/// its `\n` (and a `\r` before it), invalid UTF-8 replaced; a last line without a newline is
/// given when the command ends. Called on the task that runs the command (so within its tracing
/// span); it must not block. The output is still collected in [`Output`](super::Output).
pub type LineSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

impl fmt::Debug for RemoteCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteCommand")
            .field("body", &self.body)
            .field("timeout", &self.timeout)
            .field("sudo", &self.sudo)
            .field("stdin_len", &self.stdin.as_ref().map(|s| s.expose().len()))
            .field(
                "env",
                &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("step", &self.step)
            .field("streamed", &self.stdout_lines.is_some())
            .field("host_lock", &self.host_lock)
            .finish()
    }
}

/// How sudo is to be entered, decided by the transport from the target's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SudoMode {
    /// No sudo: the command was not asked to use it, or the login user is `root`.
    None,
    /// `sudo -n`: key authentication, so no password is known; fails if sudo wants one.
    NonInteractive,
    /// A password is known: if `sudo -n true` succeeds (NOPASSWD or cached), consume the password
    /// line and use `sudo -n`; else `sudo -S -k -p ''` reads the password from stdin.
    Password,
}

/// The string for the SSH `exec` request and the bytes for its stdin, produced by
/// [`RemoteCommand::render`]. `Debug` hides the stdin.
pub struct Rendered {
    /// The command line sent in the `exec` request; contains no secret by construction.
    pub command: String,
    /// Bytes written to the channel before EOF: sudo password line, secret variables, stdin.
    pub stdin: Secret<Vec<u8>>,
}

impl fmt::Debug for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rendered")
            .field("command", &self.command)
            .field("stdin_len", &self.stdin.expose().len())
            .finish()
    }
}

/// Runs its positional parameters (the command) holding the host's step lock, an exclusive
/// `flock(2)` lock taken by `flock -o` of util-linux (which keeps the lock in its own process and
/// closes it for the command, so a daemon the command leaves behind — an SSH `ControlPersist`
/// master of `ansible-playbook` — does not hold it on). The lock file is
/// `/run/vnfkeeper-step.lock` for root (only root writes in `/run`), else
/// `/run/lock/vnfkeeper-step-UID.lock` (`/run/lock` is writable by all), else
/// `$HOME/.vnfkeeper-step.lock`. When another command holds it, a line on standard error says
/// so before the wait; the wait counts against the command's deadline (the `timeout` wrapper
/// around this one). Without `flock` on the host the command is not run (exit 3, with why).
pub const HOST_LOCK: &str = r#"if [ "$(id -u)" -eq 0 ]; then l=/run/vnfkeeper-step.lock; elif [ -d /run/lock ] && [ -w /run/lock ]; then l=/run/lock/vnfkeeper-step-$(id -u).lock; else l=$HOME/.vnfkeeper-step.lock; fi
command -v flock >/dev/null 2>&1 || { echo "flock (util-linux) is not installed on this host: vnfkeeper runs one step apply at a time with it" >&2; exit 3; }
flock -n "$l" true 2>/dev/null || echo "waiting for an earlier vnfkeeper step apply on this host to end (it holds $l)" >&2
exec flock -o "$l" "$@""#;

/// Probe used in [`SudoMode::Password`]: positional parameters are the command to run as root.
/// The password is the first stdin line; with NOPASSWD it must be consumed here, otherwise the
/// command would read it. `sudo -k` makes sudo ignore (and not create) cached credentials, so it
/// always reads exactly that line when it needs a password (sudo reads byte by byte, leaving the
/// rest of stdin to the command). With a *wrong* password sudo retries on the following stdin
/// lines (at most `passwd_tries`, default 3) and then fails; those lines only ever reach the
/// host's own PAM.
const SUDO_PASSWORD_PROBE: &str = "if sudo -n true 2>/dev/null; then IFS= read -r _ || :; \
     exec sudo -n -- \"$@\"; else exec sudo -S -k -p '' -- \"$@\"; fi";

impl RemoteCommand {
    /// A program with no arguments yet; add them with [`arg`](Self::arg) / [`args`](Self::args).
    /// The program is looked up in the remote `PATH`.
    pub fn new(program: impl Into<String>) -> Self {
        Self::with_body(Body::Argv(vec![program.into()]))
    }

    /// A fixed shell script run by `sh -c`; validated inputs are appended with
    /// [`arg`](Self::arg) and read by the script as `"$1"`, `"$2"`, … (never interpolated).
    /// The script text itself must be a constant of the program, not built from inputs.
    pub fn script(script: impl Into<String>) -> Self {
        Self::with_body(Body::Script {
            script: script.into(),
            args: Vec::new(),
        })
    }

    fn with_body(body: Body) -> Self {
        Self {
            body,
            timeout: DEFAULT_TIMEOUT,
            sudo: false,
            stdin: None,
            env: Vec::new(),
            step: None,
            stdout_lines: None,
            host_lock: false,
        }
    }

    /// Appends one argument (or positional parameter of a script), passed byte for byte.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        match &mut self.body {
            Body::Argv(v) => v.push(arg.into()),
            Body::Script { args, .. } => args.push(arg.into()),
        }
        self
    }

    /// Appends several arguments, see [`arg`](Self::arg).
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    /// Remote deadline (whole seconds, rounded up, at least 1 s). The remote `timeout` sends
    /// `SIGTERM` to the command's process group at the deadline and `SIGKILL` [`KILL_AFTER`] later;
    /// the client gives up a few seconds after that.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs the command as root through sudo (ignored when the login user is `root`).
    pub fn sudo(mut self, sudo: bool) -> Self {
        self.sudo = sudo;
        self
    }

    /// Bytes for the command's standard input (after which the channel sends EOF). Never logged.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(Secret::new(bytes.into()));
        self
    }

    /// Exports a variable whose value may be a credential (e.g. `https_proxy` with
    /// `user:password@`). The value travels on stdin and is read by a `read -r` prelude, so it is
    /// never in the command line or any process's argv. One line: no newline allowed.
    pub fn env_secret(mut self, name: impl Into<String>, value: Secret<String>) -> Self {
        self.env.push((name.into(), value));
        self
    }

    /// Runs the command holding the host's step lock ([`HOST_LOCK`]): one such command at a time
    /// per host, and one whose client went away still counts until it ends. For commands that
    /// change the host (a step's apply); checks do not take it.
    pub fn host_lock(mut self) -> Self {
        self.host_lock = true;
        self
    }

    /// Name of the step this command belongs to, for the `step` log field.
    pub fn step(mut self, step: impl Into<String>) -> Self {
        self.step = Some(step.into());
        self
    }

    /// Gives each line of standard output to `sink` as it arrives (see [`LineSink`]): a long
    /// command's progress (an `ansible-playbook` run) is visible while it runs.
    pub fn stream_stdout(mut self, sink: LineSink) -> Self {
        self.stdout_lines = Some(sink);
        self
    }

    /// The sink given to [`stream_stdout`](Self::stream_stdout), if any.
    pub fn stdout_sink(&self) -> Option<&LineSink> {
        self.stdout_lines.as_ref()
    }

    /// The step name, if one was given.
    pub fn step_name(&self) -> Option<&str> {
        self.step.as_deref()
    }

    /// The remote deadline as given to [`timeout`](Self::timeout).
    pub fn timeout_duration(&self) -> Duration {
        self.timeout
    }

    /// The remote deadline in whole seconds as written into `timeout … Ns` (rounded up, ≥ 1).
    pub fn timeout_secs(&self) -> u64 {
        let d = self.timeout;
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        secs.max(1)
    }

    /// Whether the command asks for sudo.
    pub fn wants_sudo(&self) -> bool {
        self.sudo
    }

    /// The command's own stdin bytes (without password or variables), if any.
    pub fn stdin_bytes(&self) -> Option<&[u8]> {
        self.stdin.as_ref().map(|s| s.expose().as_slice())
    }

    /// The command without the timeout and sudo wrappers, as a shell word list: `'mkfs.ext4' -q
    /// /dev/vdb` or `sh -c 'SCRIPT' sh ARGS…`. With secret variables, the `read` prelude is
    /// included. Useful for matching in tests and for debug logs; contains no secret.
    ///
    /// # Errors
    /// [`QuoteError`] when a word has a NUL byte, a variable name is invalid or the command is
    /// empty.
    pub fn inner(&self) -> Result<String, QuoteError> {
        let prelude = self.env_prelude()?;
        match &self.body {
            Body::Argv(argv) => {
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(QuoteError::Empty);
                }
                if prelude.is_empty() {
                    join(argv.iter().map(String::as_str))
                } else {
                    let script = format!("{prelude}exec \"$@\"");
                    let words = ["sh", "-c", &script, "sh"]
                        .into_iter()
                        .chain(argv.iter().map(String::as_str));
                    join(words)
                }
            }
            Body::Script { script, args } => {
                if script.trim().is_empty() {
                    return Err(QuoteError::Empty);
                }
                let full = format!("{prelude}{script}");
                let words = ["sh", "-c", full.as_str(), "sh"]
                    .into_iter()
                    .chain(args.iter().map(String::as_str));
                join(words)
            }
        }
    }

    fn env_prelude(&self) -> Result<String, QuoteError> {
        let mut prelude = String::new();
        for (name, _) in &self.env {
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
            if !valid {
                return Err(QuoteError::EnvName(name.clone()));
            }
            prelude.push_str(&format!("IFS= read -r {name} || exit 125; export {name}; "));
        }
        Ok(prelude)
    }

    /// Builds the `exec` string and the stdin bytes: `[sudo wrapper] timeout -k 10s Ns INNER`, or
    /// `[sudo wrapper] timeout -k 10s Ns sh -c HOST_LOCK sh INNER` with
    /// [`host_lock`](Self::host_lock).
    ///
    /// stdin = password line (only in [`SudoMode::Password`]) + one line per secret variable +
    /// the command's own stdin.
    ///
    /// # Errors
    /// [`QuoteError`] as for [`inner`](Self::inner); [`QuoteError::Password`] /
    /// [`QuoteError::EnvValue`] when a line-oriented secret contains a newline or NUL.
    pub fn render(
        &self,
        sudo: SudoMode,
        password: Option<&Secret<String>>,
    ) -> Result<Rendered, QuoteError> {
        let mut inner = self.inner()?;
        if self.host_lock {
            inner = format!("sh -c {} sh {inner}", quote(HOST_LOCK)?);
        }
        let timed = format!(
            "timeout -k {}s {}s {inner}",
            KILL_AFTER.as_secs(),
            self.timeout_secs()
        );
        let mut stdin = Vec::new();
        let command = match sudo {
            SudoMode::None => timed,
            SudoMode::NonInteractive => format!("sudo -n -- {timed}"),
            SudoMode::Password => {
                let pw = password.ok_or(QuoteError::Password)?.expose();
                if pw.contains(['\n', '\r', '\0']) {
                    return Err(QuoteError::Password);
                }
                stdin.extend_from_slice(pw.as_bytes());
                stdin.push(b'\n');
                format!("sh -c {} sh {timed}", quote(SUDO_PASSWORD_PROBE)?)
            }
        };
        for (name, value) in &self.env {
            let v = value.expose();
            if v.contains(['\n', '\0']) {
                return Err(QuoteError::EnvValue(name.clone()));
            }
            stdin.extend_from_slice(v.as_bytes());
            stdin.push(b'\n');
        }
        if let Some(s) = &self.stdin {
            stdin.extend_from_slice(s.expose());
        }
        Ok(Rendered {
            command,
            stdin: Secret::new(stdin),
        })
    }
}

/// Quotes each word with [`quote`] and joins them with spaces.
///
/// # Errors
/// [`QuoteError::Nul`] as for [`quote`].
pub fn join<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<String, QuoteError> {
    let mut out = String::new();
    for w in words {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&quote(w)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const HOSTILE: &[&str] = &[
        "'; rm -rf / #",
        "$(id)",
        "`id`",
        "a\nb\nc",
        "tab\there",
        "ünïcødé ✓ 日本",
        "\"double\" 'single' \\back\\",
        "",
        " ",
        "*",
        "~root",
        "{a,b}",
        "!event ^caret",
        "-n",
        "$HOME ${PATH} $1 $@",
        "\r\x01\x7f",
    ];

    /// What a real `sh` reads back from a quoted word.
    fn sh_echo(cmdline: &str) -> Vec<u8> {
        let out = Command::new("sh").arg("-c").arg(cmdline).output().unwrap();
        assert!(out.status.success(), "{cmdline}: {out:?}");
        out.stdout
    }

    #[test]
    fn quote_round_trips_through_sh() {
        for w in HOSTILE {
            let q = quote(w).unwrap();
            let got = sh_echo(&format!("printf '%s' {q}"));
            assert_eq!(got, w.as_bytes(), "word {w:?} quoted as {q}");
        }
    }

    #[test]
    fn quote_rejects_nul_and_keeps_safe_words() {
        assert_eq!(quote("a\0b"), Err(QuoteError::Nul));
        assert_eq!(quote("/dev/vdb").unwrap(), "/dev/vdb");
        assert_eq!(quote("").unwrap(), "''");
        assert_ne!(quote("$(id)").unwrap(), "$(id)");
    }

    #[test]
    fn argv_and_script_are_quoted() {
        let c = RemoteCommand::new("printf").arg("%s").arg("$(id)");
        assert_eq!(c.inner().unwrap(), "printf '%s' '$(id)'");
        let s = RemoteCommand::script("printf '%s|' \"$@\"").args(HOSTILE.iter().copied());
        let got = sh_echo(&s.inner().unwrap());
        let want: Vec<u8> = HOSTILE
            .iter()
            .flat_map(|w| w.bytes().chain(std::iter::once(b'|')))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            RemoteCommand::new("").inner().unwrap_err(),
            QuoteError::Empty
        );
    }

    #[test]
    fn render_wraps_timeout_and_sudo() {
        let c = RemoteCommand::new("true").timeout(Duration::from_millis(1500));
        let r = c.render(SudoMode::None, None).unwrap();
        assert_eq!(r.command, "timeout -k 10s 2s true");
        assert!(r.stdin.expose().is_empty());
        let r = c.render(SudoMode::NonInteractive, None).unwrap();
        assert_eq!(r.command, "sudo -n -- timeout -k 10s 2s true");
        let pw = Secret::new("hunter2".to_string());
        let r = c
            .clone()
            .stdin(b"data".to_vec())
            .render(SudoMode::Password, Some(&pw))
            .unwrap();
        assert!(r.command.starts_with("sh -c "), "{}", r.command);
        assert!(r.command.ends_with(" sh timeout -k 10s 2s true"));
        assert!(!r.command.contains("hunter2"));
        assert_eq!(r.stdin.expose(), b"hunter2\ndata");
        assert!(!format!("{r:?}").contains("hunter2"));
        let bad = Secret::new("a\nb".to_string());
        assert_eq!(
            c.render(SudoMode::Password, Some(&bad)).unwrap_err(),
            QuoteError::Password
        );
    }

    #[test]
    fn host_lock_wraps_the_command_inside_the_deadline() {
        let r = RemoteCommand::new("true")
            .host_lock()
            .render(SudoMode::NonInteractive, None)
            .unwrap();
        assert_eq!(
            r.command,
            format!(
                "sudo -n -- timeout -k 10s 60s sh -c {} sh true",
                quote(HOST_LOCK).unwrap()
            )
        );
        let syntax = Command::new("sh")
            .args(["-n", "-c", HOST_LOCK])
            .output()
            .unwrap();
        assert!(syntax.status.success(), "{syntax:?}");
        let plain = RemoteCommand::new("true").render(SudoMode::None, None);
        assert_eq!(plain.unwrap().command, "timeout -k 10s 60s true");
    }

    #[test]
    fn secret_env_goes_through_stdin() {
        let proxy = Secret::new("http://u:s3cret@proxy:3128".to_string());
        let c = RemoteCommand::new("sh")
            .arg("-c")
            .arg("printf '%s' \"$https_proxy\"")
            .env_secret("https_proxy", proxy.clone())
            .stdin(b"rest".to_vec());
        let r = c.render(SudoMode::None, None).unwrap();
        assert!(!r.command.contains("s3cret"));
        assert!(!format!("{c:?}").contains("s3cret"));
        assert_eq!(r.stdin.expose(), b"http://u:s3cret@proxy:3128\nrest");
        // Run the inner command locally with that stdin: the variable arrives intact.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(c.inner().unwrap())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(r.stdin.expose())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.stdout, b"http://u:s3cret@proxy:3128");
        let bad = RemoteCommand::new("true").env_secret("1x", proxy);
        assert!(matches!(bad.inner(), Err(QuoteError::EnvName(_))));
    }
}
