//! Crash hooks for tests: `VNFKEEPER_FAILPOINT=<name>[:<n>][,<name>[:<n>]…]` aborts the process
//! (as SIGKILL would end it) the `n`-th time (default first) execution reaches `hit(<name>)`, for
//! whichever listed point gets there first (each point counts its own hits).
//!
//! Compiled into debug builds only; release builds (the packages) ignore the variable.
//! Points: `intake-after-commit` (batch committed, files not yet moved); `intake-after-take`
//! (a committed file hidden as `new/.<name>.taken`, its copy not yet written); `engine-step-done`
//! (a step's DONE was journaled: one step boundary); `engine-applied-<step>` (the step's apply
//! succeeded on the host, nothing journaled yet), e.g. `engine-applied-storage.filesystem`;
//! `tacker-notification-committed` (a notification from Tacker committed, the 204 not sent).

use std::collections::HashMap;
use std::sync::Mutex;

/// Hits so far, per armed point.
static HITS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

/// Aborts the process if the failpoint `name` is armed and this is its n-th hit.
pub fn hit(name: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    let Ok(spec) = std::env::var("VNFKEEPER_FAILPOINT") else {
        return;
    };
    for armed in spec.split(',') {
        let (point, nth) = match armed.split_once(':') {
            Some((p, n)) => (p, n.parse::<u32>().unwrap_or(1)),
            None => (armed, 1),
        };
        if point != name {
            continue;
        }
        let mut hits = HITS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = hits
            .get_or_insert_with(HashMap::new)
            .entry(name.to_owned())
            .or_insert(0);
        *count += 1;
        if *count == nth {
            eprintln!("failpoint {name} reached: aborting");
            std::process::abort();
        }
    }
}
