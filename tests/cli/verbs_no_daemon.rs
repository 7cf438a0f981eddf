//! A task verb while the daemon is stopped: once nobody has held the daemon's state lock for 10 s
//! it says so, takes its request back out of `new/`, and the next start of the daemon runs
//! nothing.

use crate::support;

use support::Install;

#[test]
fn a_task_verb_without_a_daemon_withdraws_its_request() {
    let install = Install::new();
    // The daemon made the spool and the database once, and is stopped.
    let mut d = install.start();
    assert_eq!(d.stop(), Some(0));

    let out = install.cli(&["retry", "7f0c1a52-5c55-4d2e-9a43-0f3f1c2b9e11"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    // Told by the free state lock (10 s), not by the 60 s wait for intake.
    assert!(stderr.contains("no daemon runs on"), "{stderr}");
    assert!(stderr.contains("withdrawn"), "{stderr}");
    assert!(
        Install::files(&install.new_dir()).is_empty(),
        "left in new/"
    );

    // The next start finds nothing to take: no intake record, nothing accepted or rejected.
    let mut d = install.start();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(install.ops_json().is_empty());
    assert!(Install::files(&install.accepted_dir()).is_empty());
    assert!(Install::files(&install.rejected_dir()).is_empty());
    assert_eq!(d.stop(), Some(0));
}
