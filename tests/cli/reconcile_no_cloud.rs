//! `vnfkeeper reconcile --now` without a `[cloud]` section: refused (exit 78, naming the
//! section) with nothing written into the spool; a daemon without a cloud takes a trigger file
//! it finds (an older CLI's) and says it ignored it, instead of leaving it in `new/` for ever.

use crate::support;

use std::time::Duration;

use support::Install;

fn triggers(install: &Install) -> usize {
    std::fs::read_dir(install.new_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(".reconcile-now.")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn reconcile_now_without_a_cloud_is_refused_and_a_stray_trigger_is_taken() {
    let install = Install::new();
    let d = install.start();
    let out = install.cli(&["reconcile", "--now"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("[cloud]"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("requested"));
    assert_eq!(triggers(&install), 0, "nothing written into new/");

    // A trigger file as an older CLI wrote it: taken, and the journal says it was ignored.
    install.drop_file(".reconcile-now.1.1", b"");
    assert!(
        support::wait_until(Duration::from_secs(10), || triggers(&install) == 0),
        "the trigger stays in new/:\n{}",
        d.log_text()
    );
    d.wait_for_log("reconcile --now ignored", Duration::from_secs(5));
}
