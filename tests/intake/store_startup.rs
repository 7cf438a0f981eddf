//! Start-up never begins with an empty database by mistake: a deleted database with history
//! left, a 0-byte file and zeroed pages end the daemon with exit code 78 and a message naming
//! the file; a fresh state directory starts; `vnfkeeper backup` taken while the daemon runs
//! restores into a new state directory. As root: a non-root member of the database's group reads
//! it (`sqlite3 -readonly`, `vnfkeeper ops --json`, `status --json`) with the daemon running and
//! stopped; a non-member gets "permission denied". The test's group and users have names of their
//! own (`vkd-g<pid>`…), so that concurrent tests creating a `vnfkeeper` group cannot collide.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Install, repo_root, wait_until};

/// `count` distinct valid INSTANTIATE envelopes (one VNF instance each).
fn envelopes(count: usize, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let seed: Value = serde_json::from_slice(
        &fs::read(repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
            .unwrap(),
    )
    .unwrap();
    (0..count)
        .map(|i| {
            let mut env = seed.clone();
            env["vnfInstanceId"] = format!("{prefix}-{i:03}").into();
            env["requestId"] = format!("{prefix}-{i:03}").into();
            (
                format!("{prefix}-{i:03}.json"),
                serde_json::to_vec(&env).unwrap(),
            )
        })
        .collect()
}

/// Starts the daemon, has it accept `count` requests, stops it cleanly.
fn install_with_history(count: usize) -> Install {
    let install = Install::new();
    let mut daemon = install.start();
    for (name, bytes) in envelopes(count, "hist") {
        install.drop_file(&name, &bytes);
    }
    assert!(
        wait_until(Duration::from_secs(30), || Install::files(
            &install.accepted_dir()
        )
        .len()
            == count),
        "accepted: {:?}\n{}",
        Install::files(&install.accepted_dir()),
        daemon.log_text()
    );
    assert_eq!(install.ops_json().len(), count);
    assert_eq!(daemon.stop(), Some(0));
    install
}

/// Runs `vnfkeeper daemon` until it exits on its own (30 s at most); returns (exit code, log).
fn run_until_exit(install: &Install) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .arg("daemon")
        .arg("--config")
        .arg(&install.config)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start daemon");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "the daemon did not exit within 30 s:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

#[test]
fn deleted_database_with_side_files_or_spool_history_exits_78_naming_the_file() {
    let install = install_with_history(3);
    fs::remove_file(&install.database).unwrap();
    let (code, log) = run_until_exit(&install);
    assert_eq!(code, Some(78), "{log}");
    let db = install.database.display().to_string();
    assert!(log.contains(&format!("database {db} is missing")), "{log}");
    assert!(log.contains("state.db-wal exists"), "{log}");
    assert!(log.contains("vnfkeeper db init"), "{log}");
    assert!(!install.database.exists(), "no new database was created");

    // Without the side files, the spool's accepted/ is the sign left.
    for s in ["-wal", "-shm"] {
        let _ = fs::remove_file(side(&install.database, s));
    }
    let (code, log) = run_until_exit(&install);
    assert_eq!(code, Some(78), "{log}");
    // 3 redacted copies and their .sha256 sidecars; the secrets key of the lost database too.
    assert!(log.contains("accepted holds 6 entries"), "{log}");
    assert!(log.contains("secrets.key exists"), "{log}");
    assert!(!install.database.exists());

    // The explicit way out: `db init`. The spool still holds the lost database's accepted
    // copies, so the daemon starts on the new database only once told to record them again.
    let out = install.cli(&["db", "init"]);
    assert!(out.status.success(), "{out:?}");
    let (code, log) = run_until_exit(&install);
    assert_eq!(code, Some(78), "{log}");
    assert!(log.contains("3 filed request copies"), "{log}");
    assert!(log.contains("--recover-spool"), "{log}");
    let mut daemon = install.spawn_daemon(&["--recover-spool"]);
    daemon.wait_for_log("ready", Duration::from_secs(30));
    let ops = install.ops_json();
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|o| o["operationState"] == "FAILED"));
    assert_eq!(daemon.stop(), Some(0));
}

/// The database removed (or renamed) while the daemon runs: it stops within seconds with exit 1
/// and says why, instead of writing on into an unlinked file whose content the next start never
/// sees; that next start refuses (78) because the spool shows an earlier database. A database
/// replaced by another file is noticed the same way.
#[test]
fn database_removed_or_replaced_while_running_stops_the_daemon() {
    let install = install_with_history(1);
    let mut daemon = install.start();
    fs::remove_file(&install.database).unwrap();
    let code = daemon.wait_exit(Duration::from_secs(10));
    let log = daemon.log_text();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("the database file was removed or renamed while the daemon ran"),
        "{log}"
    );
    assert!(
        log.contains("stopping, since what it would record now is lost"),
        "{log}"
    );
    for s in ["-wal", "-shm"] {
        let _ = fs::remove_file(side(&install.database, s));
    }
    let (code, log) = run_until_exit(&install);
    assert_eq!(code, Some(78), "{log}");

    // Replaced by another file (a copy taken before): noticed too.
    let out = install.cli(&["db", "init"]);
    assert!(out.status.success(), "{out:?}");
    let mut daemon = install.spawn_daemon(&["--recover-spool"]);
    daemon.wait_for_log("ready", Duration::from_secs(30));
    let copy = install.dir.path().join("copy.db");
    fs::copy(&install.database, &copy).unwrap();
    fs::rename(&copy, &install.database).unwrap();
    let code = daemon.wait_exit(Duration::from_secs(10));
    let log = daemon.log_text();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("replaced by another file"), "{log}");
}

#[test]
fn zero_length_database_exits_78() {
    let install = install_with_history(1);
    fs::write(&install.database, b"").unwrap();
    let (code, log) = run_until_exit(&install);
    assert_eq!(code, Some(78), "{log}");
    assert!(
        log.contains(&format!(
            "database {} is empty (0 bytes)",
            install.database.display()
        )),
        "{log}"
    );
    assert_eq!(fs::metadata(&install.database).unwrap().len(), 0);
    // `db init` moves the empty file aside and creates a database.
    let out = install.cli(&["db", "init"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("moved"));
    assert!(fs::metadata(&install.database).unwrap().len() > 0);
}

#[test]
fn zeroed_pages_exit_78_naming_quick_check() {
    let install = install_with_history(5);
    // A clean stop checkpointed the WAL into the file and truncated it to 0 bytes.
    assert_eq!(
        fs::metadata(side(&install.database, "-wal")).unwrap().len(),
        0
    );
    let mut bytes = fs::read(&install.database).unwrap();
    let page = 4096;
    let pages = bytes.len() / page;
    assert!(pages > 8, "{pages} pages");
    for p in 2..6 {
        bytes[p * page..(p + 1) * page].fill(0);
    }
    fs::write(&install.database, &bytes).unwrap();
    let (code, log) = run_until_exit(&install);
    assert_eq!(code, Some(78), "{log}");
    assert!(
        log.contains(&format!(
            "database {} fails PRAGMA quick_check",
            install.database.display()
        )),
        "{log}"
    );
    assert!(log.contains("restore the latest backup"), "{log}");
    assert!(!log.contains(" ready "), "{log}");
}

#[test]
fn fresh_state_directory_starts_with_a_0640_database() {
    let install = Install::new();
    let mut daemon = install.start();
    assert!(
        daemon.log_text().contains("created a new empty database"),
        "{}",
        daemon.log_text()
    );
    for f in [
        install.database.clone(),
        side(&install.database, "-wal"),
        side(&install.database, "-shm"),
    ] {
        let mode = fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{}", f.display());
    }
    assert_eq!(daemon.stop(), Some(0));
    // A restart keeps the database (no "created" line).
    let mut daemon = install.start();
    assert!(!daemon.log_text().contains("created a new empty database"));
    assert_eq!(daemon.stop(), Some(0));
}

/// The fields an operation keeps across a backup and restore.
fn op_keys(ops: &[Value]) -> Vec<(String, String, String)> {
    ops.iter()
        .map(|o| {
            (
                o["id"].as_str().unwrap().to_owned(),
                o["vnfInstanceId"].as_str().unwrap().to_owned(),
                o["operation"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn backup_while_the_daemon_runs_restores_into_a_new_state_directory() {
    let install = Install::new();
    let mut daemon = install.start();
    for (name, bytes) in envelopes(20, "bk") {
        install.drop_file(&name, &bytes);
    }
    assert!(wait_until(Duration::from_secs(30), || {
        Install::files(&install.accepted_dir()).len() == 20
    }));
    let before = install.ops_json();
    assert_eq!(before.len(), 20);
    // More files keep arriving while the copy is taken.
    for (name, bytes) in envelopes(20, "late") {
        install.drop_file(&name, &bytes);
    }
    let dest = install.dir.path().join("backups/");
    let out = install.cli(&["backup", "--keep", "2", dest.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    println!("{stdout}");
    let copies: Vec<PathBuf> = fs::read_dir(&dest)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    let copy = &copies[0];
    assert_eq!(
        fs::metadata(copy).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert!(
        stdout.contains(&format!("backup {}", copy.display())),
        "{stdout}"
    );
    let ops_in_copy: usize = stdout
        .split(", ")
        .find_map(|p| p.strip_suffix(" operations"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no operations count in {stdout}"));
    assert!((20..=40).contains(&ops_in_copy), "{stdout}");
    assert!(wait_until(Duration::from_secs(30), || {
        Install::files(&install.accepted_dir()).len() == 40
    }));
    let all = install.ops_json();
    assert_eq!(daemon.stop(), Some(0));

    // Restore: copy the backup into place in a new state directory, start.
    let restored = Install::new();
    fs::copy(copy, &restored.database).unwrap();
    fs::set_permissions(&restored.database, fs::Permissions::from_mode(0o640)).unwrap();
    // Without the secrets key the backup's sealed request secrets cannot be opened: refused
    // (78, no restart loop), and no new key is made over them.
    let (code, log) = run_until_exit(&restored);
    assert_eq!(code, Some(78), "{log}");
    assert!(log.contains("secrets.key: missing"), "{log}");
    // The key is backed up separately and restored beside the database (README "Security").
    let key = |i: &Install| i.database.parent().unwrap().join("secrets.key");
    assert!(!key(&restored).exists());
    fs::copy(key(&install), key(&restored)).unwrap();
    fs::set_permissions(key(&restored), fs::Permissions::from_mode(0o600)).unwrap();
    let mut daemon = restored.start();
    let after = restored.ops_json();
    assert_eq!(after.len(), ops_in_copy);
    assert_eq!(op_keys(&after), op_keys(&all)[..ops_in_copy].to_vec());
    assert_eq!(op_keys(&after)[..20], op_keys(&before)[..]);
    assert_eq!(daemon.stop(), Some(0));

    // A second and third copy with --keep 2 leave the two newest.
    std::thread::sleep(Duration::from_millis(1100));
    let out = restored.cli(&["backup", "--keep", "2", dest.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(1100));
    let out = restored.cli(&["backup", "--keep", "2", dest.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("removed old backup {}", copy.display())),
        "{stdout}"
    );
    assert_eq!(fs::read_dir(&dest).unwrap().count(), 2);
}

/// System users and a group created for one test, removed when dropped (also on panic).
struct Accounts {
    group: String,
    member: String,
    outsider: String,
}

impl Accounts {
    fn create() -> Self {
        let pid = std::process::id();
        let a = Accounts {
            group: format!("vkd-g{pid}"),
            member: format!("vkd-m{pid}"),
            outsider: format!("vkd-o{pid}"),
        };
        run(&["groupadd", "--system", &a.group]);
        run(&[
            "useradd",
            "--system",
            "-M",
            "-N",
            "-g",
            &a.group,
            "-s",
            "/usr/sbin/nologin",
            &a.member,
        ]);
        run(&[
            "useradd",
            "--system",
            "-M",
            "-U",
            "-s",
            "/usr/sbin/nologin",
            &a.outsider,
        ]);
        a
    }

    /// `cmd` run as `user` with that user's groups only (setpriv(1)).
    fn as_user(&self, user: &str, primary: &str, cmd: &[&str]) -> Output {
        Command::new("setpriv")
            .args([
                &format!("--reuid={user}"),
                &format!("--regid={primary}"),
                "--init-groups",
                "--",
            ])
            .args(cmd)
            .env("HOME", "/nonexistent")
            .env_remove("JOURNAL_STREAM")
            .output()
            .expect("setpriv")
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        for u in [&self.member, &self.outsider] {
            let _ = Command::new("userdel").arg(u).output();
        }
        for g in [&self.outsider, &self.group] {
            let _ = Command::new("groupdel").arg(g).output();
        }
    }
}

fn run(cmd: &[&str]) {
    let out = Command::new(cmd[0]).args(&cmd[1..]).output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

#[test]
#[ignore = "needs root: creates a system group and users (groupadd, useradd, setpriv)"]
fn group_member_reads_the_database_and_an_outsider_gets_permission_denied() {
    let accounts = Accounts::create();
    let install = Install::new();
    // The state directory as systemd makes it: group of the service, 0750; setgid so that the
    // files root's daemon creates get that group (the service user's primary group in real use).
    run(&[
        "chgrp",
        &accounts.group,
        install.dir.path().to_str().unwrap(),
    ]);
    fs::set_permissions(install.dir.path(), fs::Permissions::from_mode(0o2750)).unwrap();
    fs::set_permissions(&install.config, fs::Permissions::from_mode(0o644)).unwrap();
    // The outsider needs a configuration it can read, outside the state directory.
    let outside = tempfile::tempdir().unwrap();
    fs::set_permissions(outside.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let outside_config = outside.path().join("vnfkeeper.toml");
    fs::copy(&install.config, &outside_config).unwrap();
    fs::set_permissions(&outside_config, fs::Permissions::from_mode(0o644)).unwrap();

    let mut daemon = install.start();
    for (name, bytes) in envelopes(3, "aud") {
        install.drop_file(&name, &bytes);
    }
    assert!(wait_until(Duration::from_secs(30), || {
        Install::files(&install.accepted_dir()).len() == 3
    }));
    let db = install.database.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_vnfkeeper");
    let config = install.config.to_str().unwrap();
    let query = "SELECT vnf_instance_id, kind FROM vnf_history ORDER BY vnf_instance_id, kind";
    let files_before: Vec<String> = Install::files(install.dir.path());
    for phase in ["daemon running", "daemon stopped"] {
        let out = accounts.as_user(
            &accounts.member,
            &accounts.group,
            &["sqlite3", "-readonly", db, query],
        );
        let rows = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{phase}: sqlite3: {out:?}");
        assert!(rows.contains("aud-000|REQUEST_ACCEPTED"), "{phase}: {rows}");
        println!("{phase}: member: sqlite3 -readonly {db} '{query}':\n{rows}");

        let out = accounts.as_user(
            &accounts.member,
            &accounts.group,
            &[bin, "ops", "--json", "--config", config],
        );
        assert!(out.status.success(), "{phase}: ops: {out:?}");
        let ops: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(ops.len(), 3, "{phase}");
        let out = accounts.as_user(
            &accounts.member,
            &accounts.group,
            &[bin, "status", "--json", "--config", config],
        );
        assert!(out.status.success(), "{phase}: status: {out:?}");
        let instances: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(instances.len(), 3, "{phase}");

        let out = accounts.as_user(
            &accounts.outsider,
            &accounts.outsider,
            &[
                bin,
                "ops",
                "--json",
                "--config",
                outside_config.to_str().unwrap(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{phase}: outsider: {out:?}");
        assert!(err.contains("permission denied"), "{phase}: {err}");
        println!("{phase}: outsider: vnfkeeper ops --json: {err}");
        let out = accounts.as_user(
            &accounts.outsider,
            &accounts.outsider,
            &["sqlite3", "-readonly", db, query],
        );
        assert!(!out.status.success(), "{phase}: outsider sqlite3: {out:?}");

        if phase == "daemon running" {
            assert_eq!(daemon.stop(), Some(0));
        }
    }
    // Nobody created a file in the state directory (the daemon's own log aside).
    let files_after: Vec<String> = Install::files(install.dir.path())
        .into_iter()
        .filter(|f| !f.starts_with("daemon-"))
        .collect();
    let files_before: Vec<String> = files_before
        .into_iter()
        .filter(|f| !f.starts_with("daemon-"))
        .collect();
    assert_eq!(files_after, files_before);
}
