//! Crash safety of intake: SIGKILL the daemon repeatedly while files arrive; after a restart every
//! file ends in exactly one of accepted/ or rejected/, valid requests create exactly one operation
//! each, and the database passes `PRAGMA integrity_check`.

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use support::{Install, repo_root, wait_until};

/// Request files as `(name, bytes)`.
type Files = Vec<(String, Vec<u8>)>;

/// `count` distinct valid INSTANTIATE envelopes (one VNF instance each) and the bad corpus.
fn corpus(count: usize) -> (Files, Files) {
    let seed: Value = serde_json::from_slice(
        &fs::read(repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
            .unwrap(),
    )
    .unwrap();
    let good = (0..count)
        .map(|i| {
            let mut env = seed.clone();
            env["vnfInstanceId"] = format!("crash-{i:04}").into();
            env["requestId"] = format!("crash-{i:04}").into();
            (
                format!("good-{i:04}.json"),
                serde_json::to_vec(&env).unwrap(),
            )
        })
        .collect();
    let bad_dir = repo_root().join("fixtures/requests/bad");
    let index: Vec<Value> =
        serde_json::from_slice(&fs::read(bad_dir.join("index.json")).unwrap()).unwrap();
    let bad = index
        .iter()
        .filter(|e| e.get("generate").is_none())
        .map(|e| {
            let f = e["file"].as_str().unwrap();
            (format!("bad-{f}"), fs::read(bad_dir.join(f)).unwrap())
        })
        .collect();
    (good, bad)
}

#[test]
fn kill_9_while_files_arrive_loses_nothing_and_duplicates_nothing() {
    let install = Install::new();
    let (good, bad) = corpus(240);
    // Interleave good and bad files.
    let mut all: Vec<(String, Vec<u8>)> = Vec::new();
    let mut bad_iter = bad.iter();
    for (i, g) in good.iter().enumerate() {
        all.push(g.clone());
        if i % 3 == 0
            && let Some(b) = bad_iter.next()
        {
            all.push(b.clone());
        }
    }
    all.extend(bad_iter.cloned());
    let total = all.len();

    let mut daemon = install.start();
    let done = Arc::new(AtomicBool::new(false));
    let producer = {
        let spool = install.spool.clone();
        let all = all.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            for (name, bytes) in &all {
                let tmp = spool.join("tmp").join(name);
                fs::write(&tmp, bytes).unwrap();
                fs::rename(&tmp, spool.join("new").join(name)).unwrap();
                // Paced so that the file stream outlasts all the kills below.
                std::thread::sleep(Duration::from_millis(5));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    // Kill the daemon several times while the producer runs, restarting it each time.
    let mut kills = 0;
    for pause_ms in [40u64, 90, 25, 140, 60] {
        std::thread::sleep(Duration::from_millis(pause_ms));
        daemon.kill9();
        kills += 1;
        daemon = install.start();
        if done.load(Ordering::SeqCst) {
            break;
        }
    }
    producer.join().unwrap();
    assert!(
        kills >= 2,
        "the producer finished before two kills; slow it down"
    );

    let processed = |install: &Install| {
        let accepted = Install::files(&install.accepted_dir()).len();
        let rejected = Install::files(&install.rejected_dir())
            .iter()
            .filter(|n| !n.ends_with(".error.json"))
            .count();
        (accepted, rejected)
    };
    let settled = wait_until(Duration::from_secs(60), || {
        let (a, r) = processed(&install);
        Install::files(&install.new_dir()).is_empty() && a + r == total
    });
    assert!(
        settled,
        "after {kills} kills: {:?} of {total} processed, new/ = {:?}\n{}",
        processed(&install),
        Install::files(&install.new_dir()).len(),
        daemon.log_text()
    );

    // Exactly once: each accepted file is one distinct good file, each rejected one a bad file.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for n in Install::files(&install.accepted_dir()) {
        *seen
            .entry(install.original_digest(&install.accepted_dir().join(&n)))
            .or_default() += 1;
    }
    for (name, bytes) in &good {
        assert_eq!(
            seen.get(&install.digest_hex(bytes)),
            Some(&1),
            "{name} accepted {:?} times",
            seen.get(&install.digest_hex(bytes))
        );
    }
    for (name, bytes) in &bad {
        let moved = install.original_digest(&install.rejected_dir().join(name));
        assert_eq!(
            moved,
            install.digest_hex(bytes),
            "{name} not in rejected/ exactly once"
        );
        assert!(
            install
                .rejected_dir()
                .join(format!("{name}.error.json"))
                .exists(),
            "{name} has no .error.json"
        );
    }
    let ops = install.ops_json();
    assert_eq!(ops.len(), good.len(), "one operation per valid file");
    daemon.stop();

    let store = vnfkeeper::store::Store::open(&install.database).unwrap();
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
    let intake = store.reader().intake().unwrap();
    let accepted_rows = intake
        .iter()
        .filter(|r| r.outcome == vnfkeeper_core::model::IntakeOutcome::Accepted)
        .count();
    assert_eq!(
        accepted_rows,
        good.len(),
        "one ACCEPTED intake row per valid file"
    );
    eprintln!("{kills} kills, {total} files, {} intake rows", intake.len());
}

#[test]
fn abort_between_commit_and_move_is_recovered_without_recording_twice() {
    let install = Install::new();
    let (good, bad) = corpus(30);
    // The daemon aborts right after committing its first batch, before moving any file.
    let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", "intake-after-commit")]);
    for (name, bytes) in good.iter().chain(bad.iter().take(10)) {
        install.drop_file(name, bytes);
    }
    assert!(
        wait_until(Duration::from_secs(20), || !daemon.is_running()),
        "failpoint not reached"
    );
    assert!(
        daemon
            .log_text()
            .contains("failpoint intake-after-commit reached")
    );
    let left_in_new = Install::files(&install.new_dir()).len();
    assert!(
        left_in_new > 0,
        "the abort should leave committed files in new/"
    );

    let daemon = install.start();
    let total = good.len() + 10;
    assert!(
        wait_until(Duration::from_secs(20), || {
            let a = Install::files(&install.accepted_dir()).len();
            let r = Install::files(&install.rejected_dir())
                .iter()
                .filter(|n| !n.ends_with(".error.json"))
                .count();
            Install::files(&install.new_dir()).is_empty() && a + r == total
        }),
        "{}",
        daemon.log_text()
    );
    assert!(
        daemon.log_text().contains("already recorded"),
        "no file was recovered:\n{}",
        daemon.log_text()
    );
    assert_eq!(install.ops_json().len(), good.len());
    drop(daemon);
    let store = vnfkeeper::store::Store::open(&install.database).unwrap();
    let rows = store.reader().intake().unwrap();
    assert_eq!(
        rows.len(),
        total,
        "each file recorded once, recovered ones not again"
    );
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
}

#[test]
fn abort_after_a_file_was_taken_is_finished_by_the_restart() {
    let install = Install::new();
    let (good, bad) = corpus(10);
    // The daemon aborts after hiding its first committed file, before writing its copy.
    let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", "intake-after-take")]);
    for (name, bytes) in good.iter().chain(bad.iter().take(5)) {
        install.drop_file(name, bytes);
    }
    assert!(
        wait_until(Duration::from_secs(20), || !daemon.is_running()),
        "failpoint not reached"
    );
    let hidden: Vec<String> = fs::read_dir(install.new_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".taken"))
        .collect();
    assert_eq!(hidden.len(), 1, "{hidden:?}");

    let daemon = install.start();
    let total = good.len() + 5;
    assert!(
        wait_until(Duration::from_secs(20), || {
            let a = Install::files(&install.accepted_dir()).len();
            let r = Install::files(&install.rejected_dir())
                .iter()
                .filter(|n| !n.ends_with(".error.json"))
                .count();
            fs::read_dir(install.new_dir()).unwrap().count() == 0 && a + r == total
        }),
        "{}",
        daemon.log_text()
    );
    // The hidden file was filed under its own name's outcome, once.
    let name = hidden[0]
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".taken"))
        .unwrap();
    let bytes = &good
        .iter()
        .chain(bad.iter())
        .find(|(n, _)| n == name)
        .unwrap()
        .1;
    let digest = install.digest_hex(bytes);
    let copies: Vec<String> = [install.accepted_dir(), install.rejected_dir()]
        .iter()
        .flat_map(|d| {
            Install::files(d)
                .into_iter()
                .map(move |n| d.join(n))
                .filter(|p| install.original_digest(p) == digest)
                .map(|p| p.display().to_string())
        })
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(install.ops_json().len(), good.len());
    drop(daemon);
    let store = vnfkeeper::store::Store::open(&install.database).unwrap();
    assert_eq!(store.reader().intake().unwrap().len(), total);
}

/// Intake overlaps the phases of consecutive batches: one batch's files are moved while the next
/// batch commits. An abort right after the second commit (batches of 8, so the first batch's
/// moves may still be under way) leaves every filed copy with its committed row and every other
/// file in `new/` (as it is or hidden as taken); the restart files each file once, recording
/// none twice.
#[test]
fn abort_while_one_batch_moves_and_the_next_commits_records_each_file_once() {
    let install = Install::new();
    let mut config = fs::read_to_string(&install.config).unwrap();
    config.push_str("\n[intake]\nbatch_size = 8\n");
    fs::write(&install.config, config).unwrap();
    let (good, bad) = corpus(60);
    let files: Vec<&(String, Vec<u8>)> = good.iter().chain(bad.iter().take(12)).collect();
    let total = files.len();
    let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", "intake-after-commit:2")]);
    // Written into tmp/ first, then renamed in one burst, so that batches fill.
    let tmp = install.spool.join("tmp");
    for (name, bytes) in &files {
        fs::write(tmp.join(name), bytes).unwrap();
    }
    for (name, _) in &files {
        fs::rename(tmp.join(name), install.new_dir().join(name)).unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(30), || !daemon.is_running()),
        "failpoint not reached"
    );
    assert!(
        daemon
            .log_text()
            .contains("failpoint intake-after-commit reached")
    );
    drop(daemon);

    // At the abort: two batches committed, and every copy filed so far has its row.
    let rows: Vec<String> = {
        let conn = rusqlite::Connection::open_with_flags(
            &install.database,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let mut st = conn.prepare("SELECT content_sha256 FROM intake").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(
        rows.len() >= 2 && rows.len() <= 16,
        "two batches of at most 8 committed: {} rows",
        rows.len()
    );
    let rejected_copies: Vec<String> = Install::files(&install.rejected_dir())
        .into_iter()
        .filter(|n| !n.ends_with(".error.json"))
        .collect();
    let filed: Vec<std::path::PathBuf> = Install::files(&install.accepted_dir())
        .into_iter()
        .map(|n| install.accepted_dir().join(n))
        .chain(
            rejected_copies
                .iter()
                .map(|n| install.rejected_dir().join(n)),
        )
        .collect();
    for copy in &filed {
        let digest = install.original_digest(copy);
        assert!(
            rows.contains(&digest),
            "{} was filed without its intake row",
            copy.display()
        );
    }
    let in_new = fs::read_dir(install.new_dir()).unwrap().count();
    assert_eq!(
        filed.len() + in_new,
        total,
        "every file is filed or still in new/"
    );

    let daemon = install.start();
    assert!(
        wait_until(Duration::from_secs(30), || {
            let a = Install::files(&install.accepted_dir()).len();
            let r = Install::files(&install.rejected_dir())
                .iter()
                .filter(|n| !n.ends_with(".error.json"))
                .count();
            fs::read_dir(install.new_dir()).unwrap().count() == 0 && a + r == total
        }),
        "{}",
        daemon.log_text()
    );
    assert_eq!(install.ops_json().len(), good.len());
    drop(daemon);
    let store = vnfkeeper::store::Store::open(&install.database).unwrap();
    assert_eq!(
        store.reader().intake().unwrap().len(),
        total,
        "each file recorded once, the committed ones not again"
    );
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
}
