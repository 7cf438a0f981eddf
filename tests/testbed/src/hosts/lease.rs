//! Machine-wide leases on a farm's name prefix and bridge network, so that farms started by tests
//! running in parallel (threads of one test binary, or one process per test under nextest) never
//! share a namespace, link, volume file or subnet, and no cleanup removes a live farm's hosts.
//!
//! A lease is an exclusive `flock(2)` on a file under `/run/testbed/leases/`: the kernel releases
//! it when its holder exits, however it exits, so a crashed test leaves no stale lease behind
//! (its leftovers are still there for [`super::down_all`]). A farm that asks for a prefix or a
//! network another live farm holds waits for it (saying so on stderr once) rather than colliding.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result, anyhow};
use ipnet::Ipv4Net;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::farm::REGISTRY_DIR;

/// Prefixes whose lease this process holds, with how many holders (farms, cleanups) share it:
/// a cleanup in the process that owns the farm (for example after `mem::forget` of a farm, the
/// crash a test simulates) may proceed; one in another process may not.
static HELD: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

/// An exclusive lease on a prefix and, for a farm, its bridge network; released on drop.
#[derive(Debug)]
pub struct Lease {
    prefix: String,
    _locks: Vec<Flock<File>>,
}

/// What a lease is taken on; one lock file each.
fn lock_path(what: &str) -> PathBuf {
    PathBuf::from(REGISTRY_DIR).join("leases").join(what)
}

fn open(what: &str) -> Result<File> {
    let path = lock_path(what);
    std::fs::create_dir_all(path.parent().expect("has a parent"))
        .with_context(|| format!("create {}", path.parent().unwrap().display()))?;
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))
}

/// Takes the lock on `what`, waiting when `wait` (and saying so once), else failing at once.
fn lock(what: &str, wait: bool) -> Result<Option<Flock<File>>> {
    let f = open(what)?;
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(Some(l)),
        Err((f, Errno::EWOULDBLOCK)) => {
            if !wait {
                return Ok(None);
            }
            eprintln!(
                "testbed: waiting for the lease {} (another farm holds it)",
                lock_path(what).display()
            );
            Flock::lock(f, FlockArg::LockExclusive)
                .map(Some)
                .map_err(|(_, e)| anyhow!("flock {}: {e}", lock_path(what).display()))
        }
        Err((_, e)) => Err(anyhow!("flock {}: {e}", lock_path(what).display())),
    }
}

fn register(prefix: &str) {
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    *held
        .get_or_insert_with(HashMap::new)
        .entry(prefix.to_string())
        .or_default() += 1;
}

/// Whether this process holds the lease on `prefix`.
fn held_here(prefix: &str) -> bool {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    held.as_ref()
        .is_some_and(|h| h.get(prefix).is_some_and(|n| *n > 0))
}

impl Lease {
    /// Leases `prefix` and the network of `bridge` for a farm, waiting while another farm holds
    /// either (network first, then prefix: one order for every farm, so no two wait on each
    /// other). Blocks the calling thread; call it from `spawn_blocking` in async code.
    ///
    /// Errors: the lock directory cannot be created or locked.
    pub fn farm(prefix: &str, bridge: Ipv4Net) -> Result<Lease> {
        let net = bridge.trunc();
        let net_lock =
            lock(&format!("net-{}-{}", net.network(), net.prefix_len()), true)?.expect("waited");
        let prefix_lock = lock(&format!("prefix-{prefix}"), true)?.expect("waited");
        register(prefix);
        Ok(Lease {
            prefix: prefix.to_string(),
            _locks: vec![net_lock, prefix_lock],
        })
    }

    /// Leases `tag` for a real control plane (`crate::cloud::real`), waiting while another
    /// process holds it (a farm or a control plane of that name: its processes are live, and
    /// killing a crashed run's leftovers by tag would kill them). Held here already (a farm of
    /// the same prefix in this process): counted, no lock taken. Blocks the calling thread.
    ///
    /// Errors: the lock directory cannot be created or locked.
    pub fn control_plane(tag: &str) -> Result<Lease> {
        let locks = if held_here(tag) {
            Vec::new()
        } else {
            vec![lock(&format!("prefix-{tag}"), true)?.expect("waited")]
        };
        register(tag);
        Ok(Lease {
            prefix: tag.to_string(),
            _locks: locks,
        })
    }

    /// For a cleanup by prefix: `Ok(None)` when this process already holds the prefix (go
    /// ahead), `Ok(Some(lease))` when it was free (held until dropped), and an error naming the
    /// lease when a farm in another process holds it (its hosts are live: leave them alone).
    pub fn cleanup(prefix: &str) -> Result<Option<Lease>> {
        if held_here(prefix) {
            return Ok(None);
        }
        match lock(&format!("prefix-{prefix}"), false)? {
            Some(l) => {
                register(prefix);
                Ok(Some(Lease {
                    prefix: prefix.to_string(),
                    _locks: vec![l],
                }))
            }
            None => Err(anyhow!(
                "prefix {prefix} belongs to a running farm of another process ({} is locked); \
                 nothing removed",
                lock_path(&format!("prefix-{prefix}")).display()
            )),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.as_mut().and_then(|h| h.get_mut(&self.prefix)) {
            *n = n.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Unique names: the lock files are machine-wide. Needs write access to /run/testbed.
    #[test]
    #[ignore = "needs root (/run/testbed)"]
    fn a_held_prefix_is_refused_to_other_holders_and_free_again_after_drop() {
        let bridge: Ipv4Net = "10.231.250.1/24".parse().unwrap();
        let lease = Lease::farm("tblease", bridge).unwrap();
        // the same process may clean up its own farm's prefix
        assert!(Lease::cleanup("tblease").unwrap().is_none());
        // another open file description is refused at once (what another process sees)
        assert!(lock("prefix-tblease", false).unwrap().is_none());
        assert!(lock("net-10.231.250.0-24", false).unwrap().is_none());
        drop(lease);
        assert!(!held_here("tblease"));
        let cleanup = Lease::cleanup("tblease").unwrap();
        assert!(cleanup.is_some());
        assert!(lock("prefix-tblease", false).unwrap().is_none());
        drop(cleanup);
        assert!(lock("prefix-tblease", false).unwrap().is_some());
    }
}
