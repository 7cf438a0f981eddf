//! Small helpers: running commands with useful errors, name checks.

use std::ffi::OsStr;
use std::process::Output;

use anyhow::{Context, Result, bail};

/// PATH used for every command the farm runs (the harness' own PATH may hold pyenv shims etc.).
pub(crate) const SANE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs `prog args…`, returns stdout; fails with the command line and stderr when it exits non-zero.
pub(crate) async fn run<I, S>(prog: &str, args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = output(prog, args).await?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Like [`run`] but returns the whole [`Output`]; fails on a non-zero exit.
pub(crate) async fn output<I, S>(prog: &str, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let out = tokio::process::Command::new(prog)
        .args(&args)
        .env("PATH", SANE_PATH)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {prog}"))?;
    if !out.status.success() {
        bail!(
            "`{prog} {}` failed ({}): {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Runs `prog args…` with `input` on stdin (used for `ip -batch -`).
pub(crate) async fn run_stdin(prog: &str, args: &[&str], input: &str) -> Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(prog)
        .args(args)
        .env("PATH", SANE_PATH)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {prog}"))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    stdin.write_all(input.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!(
            "`{prog} {}` failed ({}) on input {input:?}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Synchronous best-effort command (for `Drop`); errors are ignored.
pub(crate) fn run_sync_quiet(prog: &str, args: &[&str]) {
    let _ = std::process::Command::new(prog)
        .args(args)
        .env("PATH", SANE_PATH)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Checks a farm name prefix: 1–8 characters `[a-z0-9]`, starting with a letter (link names are
/// at most 15 bytes, and a prefix must never be the start of another prefix followed by `-`).
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 8
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !ok {
        bail!("farm prefix {prefix:?} must be 1-8 characters [a-z0-9], starting with a letter");
    }
    Ok(())
}

/// Maps an arbitrary id (server id, volume id, cluster id) to a safe file name component.
pub(crate) fn safe_name(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}
