//! Crash hooks for tests: `VNFKEEPER_FAILPOINT=<name>[:<n>]` aborts the process (as SIGKILL
//! would end it) the `n`-th time (default first) execution reaches `hit(<name>)`.
//!
//! Compiled into debug builds only; release builds (the packages) ignore the variable.
//! Points: `intake-after-commit` (batch committed, files not yet moved); `intake-after-take`
//! (a committed file hidden as `new/.<name>.taken`, its copy not yet written); `engine-step-done`
//! (a step's DONE was journaled: one step boundary); `engine-applied-<step>` (the step's apply
//! succeeded on the host, nothing journaled yet), e.g. `engine-applied-storage.filesystem`;
//! `tacker-notification-committed` (a notification from Tacker committed, the 204 not sent).

use std::sync::atomic::{AtomicU32, Ordering};

static HITS: AtomicU32 = AtomicU32::new(0);

/// Aborts the process if the failpoint `name` is armed and this is its n-th hit.
pub fn hit(name: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    let Ok(spec) = std::env::var("VNFKEEPER_FAILPOINT") else {
        return;
    };
    let (point, nth) = match spec.split_once(':') {
        Some((p, n)) => (p.to_owned(), n.parse::<u32>().unwrap_or(1)),
        None => (spec, 1),
    };
    if point == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == nth {
        eprintln!("failpoint {name} reached: aborting");
        std::process::abort();
    }
}
