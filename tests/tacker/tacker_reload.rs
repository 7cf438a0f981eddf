//! SIGHUP with a `[tacker]` endpoint (no cloud): a changed password file is in force after the
//! reload (the new password 204, the old one 401); a file `config check` refuses (a missing
//! `password_file`) or one changing a key read at start only is refused whole, the journal says
//! why, and the running configuration stays.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use support::{Install, free_port};

const USER: &str = "tacker-reload";
const OLD: &str = "Old-Rel0ad!pw";
const NEW: &str = "New-Rel0ad!pw";

fn write_password(path: &Path, password: &str) {
    std::fs::write(path, format!("{password}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The `[tacker]` section on `port` with `password_file`.
fn tacker(port: u16, password_file: &Path) -> String {
    format!(
        "\n[reconcile]\nenabled = false\n\n[tacker]\nlisten = \"127.0.0.1:{port}\"\n\
         callback_path = \"/vnfkeeper/notifications\"\nusername = \"{USER}\"\n\
         password_file = \"{}\"\n",
        password_file.display()
    )
}

/// The status of Tacker's callback test (`GET`) with `password`.
async fn callback_test(url: &str, password: &str) -> u16 {
    reqwest::Client::new()
        .get(url)
        .basic_auth(USER, Some(password))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn sighup(d: &support::Daemon) {
    let st = std::process::Command::new("kill")
        .args(["-HUP", &d.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// How many lines of the daemon's log contain `needle`.
fn count(d: &support::Daemon, needle: &str) -> usize {
    d.log_text().lines().filter(|l| l.contains(needle)).count()
}

/// Sends SIGHUP and waits for the `n`-th line containing `needle`; returns that line.
fn reload_until(d: &support::Daemon, needle: &str) -> String {
    let before = count(d, needle);
    sighup(d);
    assert!(
        support::wait_until(Duration::from_secs(10), || count(d, needle) > before),
        "no `{needle}` after SIGHUP:\n{}",
        d.log_text()
    );
    d.log_text()
        .lines()
        .rfind(|l| l.contains(needle))
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_the_new_tacker_password_or_refuses_the_whole_file() {
    let install = Install::new();
    let base = std::fs::read_to_string(&install.config).unwrap();
    let port = free_port();
    let pw = install.dir.path().join("tacker.password");
    write_password(&pw, OLD);
    std::fs::write(&install.config, format!("{base}{}", tacker(port, &pw))).unwrap();
    let mut d = install.start();
    d.wait_for_log("Tacker notification endpoint", Duration::from_secs(10));
    let url = format!("http://127.0.0.1:{port}/vnfkeeper/notifications");
    assert_eq!(callback_test(&url, OLD).await, 204);

    // A new password in the same file: in force after the reload, the old one refused.
    write_password(&pw, NEW);
    let line = reload_until(&d, "configuration reloaded");
    assert_eq!(callback_test(&url, NEW).await, 204, "the new password");
    assert_eq!(callback_test(&url, OLD).await, 401, "the old password");
    assert!(line.contains("tacker.username and password"), "{line}");

    // A missing password file: `config check` refuses it, and so does the reload; the running
    // credentials stay.
    let missing = install.dir.path().join("missing.password");
    std::fs::write(&install.config, format!("{base}{}", tacker(port, &missing))).unwrap();
    let check = install.cli(&["config", "check"]);
    assert_eq!(check.status.code(), Some(78));
    let line = reload_until(&d, "configuration reload refused");
    assert!(
        line.contains("tacker.password_file") && line.contains("missing.password"),
        "{line}"
    );
    assert_eq!(callback_test(&url, NEW).await, 204, "the running password");
    assert_eq!(callback_test(&url, OLD).await, 401);

    // A key read at start only: refused whole, naming the key — the password changed in the
    // same file is not applied either.
    write_password(&pw, OLD);
    let other = free_port();
    std::fs::write(&install.config, format!("{base}{}", tacker(other, &pw))).unwrap();
    let line = reload_until(&d, "configuration reload refused");
    assert!(line.contains("tacker.listen"), "{line}");
    assert_eq!(callback_test(&url, NEW).await, 204, "the running password");
    assert_eq!(callback_test(&url, OLD).await, 401);

    // Back to a valid file: applied.
    std::fs::write(&install.config, format!("{base}{}", tacker(port, &pw))).unwrap();
    reload_until(&d, "configuration reloaded");
    assert_eq!(callback_test(&url, OLD).await, 204);
    assert_eq!(callback_test(&url, NEW).await, 401);

    d.stop();
    let log = d.log_text();
    assert!(
        !log.contains(OLD) && !log.contains(NEW),
        "a password reached the log"
    );
}
