//! Intake while an auditor holds a write transaction: `Store::write` begins `IMMEDIATE`, so the
//! batch waits for the lock (busy timeout) instead of failing with "database is locked" and
//! leaving the file for the next rescan (30 s by default).

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use vnfkeeper::intake::spool::{self, IntakeContext, Outcome, Spool};
use vnfkeeper::store::Store;
use vnfkeeper_core::model::Timestamp;

#[test]
fn a_file_is_accepted_while_another_connection_holds_begin_immediate_for_one_second() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut store = Store::open(&db).unwrap();
    let spool = Spool::open(&dir.path().join("spool")).unwrap();
    let body =
        std::fs::read(root.join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
            .unwrap();
    let path = spool.submit(&body).unwrap();

    // The auditor: takes the write lock, writes, and commits one second later. Intake's
    // transaction starts while the lock is held, and its snapshot would be stale after the
    // auditor's commit if it began deferred (read first, write later).
    let auditor = rusqlite::Connection::open(&db).unwrap();
    auditor.execute_batch("BEGIN IMMEDIATE").unwrap();
    auditor
        .execute(
            "INSERT INTO event (at, kind, message) VALUES ('2026-11-24T03:00:00Z', 'AUDIT', 'a')",
            [],
        )
        .unwrap();
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        locked_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(1));
        auditor.execute_batch("COMMIT").unwrap();
    });
    locked.recv().unwrap();

    let package_store = dir.path().join("package-store");
    let ctx = IntakeContext {
        packages_dir: &root,
        package_store: &package_store,
        cloud_configured: false,
    };
    let now = Timestamp(chrono::Utc::now());
    let outcomes = spool::process(&spool, &mut store, &[path], &ctx, now)
        .expect("the batch waits for the auditor's lock instead of failing");
    holder.join().unwrap();
    assert_eq!(outcomes.len(), 1);
    assert!(
        matches!(outcomes[0], Outcome::Accepted { .. }),
        "{:?}",
        outcomes[0]
    );
    let kept: Vec<_> = std::fs::read_dir(spool.accepted_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| !n.to_string_lossy().ends_with(".sha256"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read_dir(spool.new_dir()).unwrap().count(), 0);
}

#[test]
fn the_daemon_accepts_a_file_submitted_while_an_auditor_holds_the_write_lock() {
    let install = support::Install::new();
    let daemon = install.start();
    let body = std::fs::read(
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"),
    )
    .unwrap();

    let auditor = rusqlite::Connection::open(&install.database).unwrap();
    auditor.execute_batch("BEGIN IMMEDIATE").unwrap();
    auditor
        .execute(
            "INSERT INTO event (at, kind, message) VALUES ('2026-11-24T03:00:00Z', 'AUDIT', 'a')",
            [],
        )
        .unwrap();
    install.drop_file("audited.json", &body);
    std::thread::sleep(Duration::from_secs(1));
    auditor.execute_batch("COMMIT").unwrap();

    let accepted = support::wait_until(Duration::from_secs(5), || {
        support::Install::files(&install.accepted_dir()).len() == 1
    });
    let log = daemon.log_text();
    // Within 5 s, well before the first rescan (30 s): the batch waited for the lock instead of
    // failing and leaving the file in new/ until then.
    assert!(
        accepted,
        "not accepted within 5 s of its submission; log:\n{log}"
    );
    assert!(!log.contains("database is locked"), "{log}");
    assert!(!log.contains("intake batch failed"), "{log}");
    assert!(support::Install::files(&install.new_dir()).is_empty());
}
