//! What the daemon checks at start before it runs anything: one daemon per state directory (a
//! second start exits 78 naming the holder), the spool's filed copies against the database (a
//! lost WAL is refused with 78 unless `--recover-spool` re-records them), and digests of request
//! files keyed with the installation's secret (none holds the plain SHA-256 of a file whose
//! passwords a reader could guess), converted from the plain form an earlier version stored. As
//! root: a state directory or database the daemon cannot write and a `new/` replaced by a
//! symbolic link are refused with 78; hard links, FIFOs and devices in `new/` end in `rejected/`
//! as inert records.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::{Daemon, Install, repo_root, wait_until};

/// `count` distinct valid INSTANTIATE envelopes (one VNF instance each, with node passwords).
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

/// Waits until `accepted/` holds `count` copies (sidecars not counted).
fn wait_accepted(install: &Install, daemon: &Daemon, count: usize) {
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
}

/// Waits up to `secs` for `daemon` to exit; its exit code, or a panic naming `what` and the log.
fn exit_code(daemon: &mut Daemon, secs: u64, what: &str) -> i32 {
    match daemon.wait_exit(Duration::from_secs(secs)) {
        Some(code) => code,
        None => panic!(
            "{what} is still running after {secs} s:\n{}",
            daemon.log_text()
        ),
    }
}

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

#[test]
fn a_second_daemon_on_the_same_state_exits_78_naming_the_first() {
    let install = Install::new();
    let mut first = install.start();
    let mut second = install.spawn_daemon(&[]);
    let code = exit_code(&mut second, 10, "the second daemon");
    let log = second.log_text();
    assert_eq!(code, 78, "{log}");
    assert!(log.contains(&format!("pid {}", first.pid())), "{log}");
    assert!(log.contains("daemon.lock"), "{log}");
    // The CLI is not affected.
    let out = install.cli(&["config", "check"]);
    assert!(out.status.success(), "config check: {out:?}");
    assert!(install.ops_json().is_empty());
    assert!(first.is_running());
    assert_eq!(first.stop(), Some(0));
    // Released with its holder: the next start runs.
    let mut again = install.start();
    assert_eq!(again.stop(), Some(0));
}

#[test]
fn a_lost_wal_refuses_start_until_recover_spool_rerecords_the_copies() {
    let install = Install::new();
    let files = envelopes(3, "wal");
    let mut daemon = install.start();
    for (name, bytes) in &files {
        install.drop_file(name, bytes);
    }
    wait_accepted(&install, &daemon, 3);
    assert_eq!(install.ops_json().len(), 3);
    daemon.kill9();
    // The crash took the WAL with it: the accepted requests are gone from the database.
    for s in ["-wal", "-shm"] {
        let _ = fs::remove_file(side(&install.database, s));
    }

    let mut refused = install.spawn_daemon(&[]);
    let code = exit_code(&mut refused, 20, "the daemon after a lost WAL");
    let log = refused.log_text();
    assert_eq!(code, 78, "{log}");
    let copies = Install::files(&install.accepted_dir());
    assert!(copies.iter().all(|c| log.contains(c.as_str())), "{log}");
    assert!(log.contains("Restore from backup"), "{log}");
    assert!(log.contains("--recover-spool"), "{log}");
    assert!(install.ops_json().is_empty(), "nothing was recorded");

    // The explicit way out: the copies are recorded again, not run.
    let mut daemon = install.spawn_daemon(&["--recover-spool"]);
    daemon.wait_for_log("ready", Duration::from_secs(30));
    let ops = install.ops_json();
    assert_eq!(ops.len(), 3, "{ops:?}");
    for op in &ops {
        assert_eq!(op["operationState"], "FAILED", "{op}");
    }
    // The same file again is a duplicate of its recorded operation, not a second operation.
    let (_, bytes) = &files[0];
    install.drop_file("wal-again.json", bytes);
    wait_accepted(&install, &daemon, 4);
    assert!(
        Install::files(&install.accepted_dir())
            .iter()
            .any(|n| n.contains(".dup-")),
        "{:?}",
        Install::files(&install.accepted_dir())
    );
    assert_eq!(install.ops_json().len(), 3);
    assert_eq!(daemon.stop(), Some(0));

    // Recorded: a plain start runs again.
    let mut daemon = install.start();
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn digests_of_request_files_are_keyed_and_earlier_plain_ones_are_converted() {
    let install = Install::new();
    let files = envelopes(2, "dig");
    let mut daemon = install.start();
    let (name, bytes) = &files[0];
    install.drop_file(name, bytes);
    wait_accepted(&install, &daemon, 1);
    assert_eq!(daemon.stop(), Some(0));
    let copy = install
        .accepted_dir()
        .join(&Install::files(&install.accepted_dir())[0]);
    let plain = Install::sha256_hex(bytes);
    let sidecar = side(&copy, ".sha256");
    let kept = fs::read_to_string(&sidecar).unwrap();
    // Compared without printing: a plain digest in test output is what a reader would guess at.
    assert!(
        kept.trim_end() != plain,
        "the sidecar holds the plain SHA-256"
    );
    assert!(
        kept.trim_end() == install.digest_hex(bytes),
        "the sidecar holds no keyed digest"
    );
    let db = rusqlite::Connection::open(&install.database).unwrap();
    let plain_rows = |db: &rusqlite::Connection| -> i64 {
        db.query_row(
            "SELECT (SELECT COUNT(*) FROM intake WHERE content_sha256 = ?1)
                  + (SELECT COUNT(*) FROM event WHERE instr(evidence, ?1) > 0)",
            [&plain],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(plain_rows(&db), 0, "the database holds the plain SHA-256");

    // As an earlier version left them: plain digests in the sidecar and the intake row.
    db.execute("UPDATE intake SET content_sha256 = ?1", [&plain])
        .unwrap();
    drop(db);
    fs::write(&sidecar, format!("{plain}\n")).unwrap();
    let mut daemon = install.start();
    assert!(
        fs::read_to_string(&sidecar).unwrap().trim_end() == install.digest_hex(bytes),
        "the plain sidecar was not converted"
    );
    // Duplicates are still found across the change.
    install.drop_file("dig-again.json", bytes);
    wait_accepted(&install, &daemon, 2);
    assert!(
        Install::files(&install.accepted_dir())
            .iter()
            .any(|n| n.contains(".dup-")),
        "{:?}",
        Install::files(&install.accepted_dir())
    );
    let (other, other_bytes) = &files[1];
    install.drop_file(other, other_bytes);
    wait_accepted(&install, &daemon, 3);
    assert_eq!(install.ops_json().len(), 2);
    assert_eq!(daemon.stop(), Some(0));
    let db = rusqlite::Connection::open(&install.database).unwrap();
    assert_eq!(
        plain_rows(&db),
        0,
        "a plain SHA-256 was left in the database"
    );
}

/// `chattr +i` on a path for as long as it lives (taken off again when dropped, also when the
/// test fails, so that the temporary directory can be removed).
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: &Path) -> Self {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .unwrap();
        assert!(ok.success(), "chattr +i {}", path.display());
        Self(path.to_path_buf())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// Starts the daemon, expects it to exit 78 within 10 s with `needle` in its log.
fn refused_with(install: &Install, needle: &str) {
    let mut daemon = install.spawn_daemon(&[]);
    let code = exit_code(&mut daemon, 10, "the daemon");
    let log = daemon.log_text();
    assert_eq!(code, 78, "{log}");
    assert!(log.contains(needle), "no `{needle}` in:\n{log}");
}

#[test]
#[ignore = "needs root (chattr)"]
fn an_unwritable_state_or_a_linked_new_dir_is_refused_with_78() {
    // The state in a directory of its own (the daemon's log stays writable beside it).
    let mut install = Install::new();
    let state = install.dir.path().join("state");
    fs::create_dir(&state).unwrap();
    let database = state.join("state.db");
    let text = fs::read_to_string(&install.config).unwrap().replace(
        &install.database.display().to_string(),
        &database.display().to_string(),
    );
    fs::write(&install.config, text).unwrap();
    install.database = database;
    let mut daemon = install.start();
    assert_eq!(daemon.stop(), Some(0));

    // A state directory nothing can be created in (as a read-only mount would be).
    {
        let _ro = Immutable::set(&state);
        refused_with(&install, "is not writable");
    }
    // An immutable database: SQLite could not write it.
    {
        let _ro = Immutable::set(&install.database);
        refused_with(&install, "cannot be opened for writing");
    }
    // new/ replaced by a link to another directory: never followed.
    let elsewhere = state.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let (name, bytes) = &envelopes(1, "linked")[0];
    fs::write(elsewhere.join(name), bytes).unwrap();
    fs::remove_dir(install.new_dir()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, install.new_dir()).unwrap();
    refused_with(&install, "a symbolic link");
    assert!(
        elsewhere.join(name).exists(),
        "a file behind the link was taken"
    );
    assert!(install.ops_json().is_empty());

    // Put right, it starts.
    fs::remove_file(install.new_dir()).unwrap();
    fs::create_dir(install.new_dir()).unwrap();
    let mut daemon = install.start();
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
#[ignore = "needs root (mknod)"]
fn a_hard_link_fifo_or_device_in_new_is_kept_as_an_inert_record() {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let install = Install::new();
    let mut daemon = install.start();
    let tmp = install.spool.join("tmp");
    // A second name of a file outside the spool (as a link to /etc/shadow would be).
    let outside = install.dir.path().join("outside.json");
    fs::write(&outside, &envelopes(1, "hard")[0].1).unwrap();
    fs::hard_link(&outside, tmp.join("linked.json")).unwrap();
    for (what, args) in [
        ("mkfifo", vec!["fifo.json"]),
        ("mknod", vec!["zero.json", "c", "1", "5"]),
    ] {
        let mut cmd = std::process::Command::new(what);
        cmd.arg(tmp.join(args[0])).args(&args[1..]);
        assert!(cmd.status().unwrap().success(), "{what}");
    }
    for n in ["linked.json", "fifo.json", "zero.json"] {
        fs::rename(tmp.join(n), install.new_dir().join(n)).unwrap();
    }
    let rejected = install.rejected_dir();
    let filed = |n: &&str| {
        let error = rejected.join(format!("{n}.error.json"));
        error.exists() && fs::symlink_metadata(rejected.join(n)).is_ok()
    };
    let done = wait_until(Duration::from_secs(10), || {
        ["linked.json", "fifo.json", "zero.json"].iter().all(filed)
    });
    let names: Vec<_> = fs::read_dir(&rejected)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(done, "rejected/ holds {names:?}\n{}", daemon.log_text());
    assert!(
        install.ops_json().is_empty(),
        "the hard-linked file was taken"
    );
    assert_eq!(
        fs::metadata(&outside).unwrap().nlink(),
        1,
        "the second name was kept"
    );
    for (n, entry) in [
        ("linked.json", "a regular file with 2 hard links"),
        ("fifo.json", "a FIFO"),
        ("zero.json", "a character device"),
    ] {
        let m = fs::symlink_metadata(rejected.join(n)).unwrap();
        assert!(m.is_file() && m.nlink() == 1, "{n}: {:?}", m.file_type());
        assert!(!m.file_type().is_fifo() && !m.file_type().is_char_device());
        let record: Value = serde_json::from_slice(&fs::read(rejected.join(n)).unwrap()).unwrap();
        assert_eq!(record["entry"], entry, "{n}");
        let error: Value =
            serde_json::from_slice(&fs::read(rejected.join(format!("{n}.error.json"))).unwrap())
                .unwrap();
        assert!(
            error["keptCopy"]
                .as_str()
                .is_some_and(|k| k.contains("record")),
            "{n}"
        );
    }
    assert!(install.new_dir().read_dir().unwrap().next().is_none());
    // An operator's grep over rejected/ ends.
    let grep = std::process::Command::new("timeout")
        .args(["5", "grep", "-r", "-c", "entry"])
        .arg(&rejected)
        .output()
        .unwrap();
    assert_ne!(grep.status.code(), Some(124), "grep -r hung");
    assert!(daemon.is_running());
    assert_eq!(daemon.stop(), Some(0));
}
