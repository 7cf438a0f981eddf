//! Shared by the daemon benchmarks: runs `vnfkeeper daemon` as systemd would with the watchdog
//! on (`WATCHDOG_USEC`, `WATCHDOG_PID`, `NOTIFY_SOCKET` bound by the benchmark), records when each
//! `WATCHDOG=1` ping arrives, and times SIGTERM to exit.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `WATCHDOG_USEC` given to the daemon: it pings every half of it (500 ms).
pub const WATCHDOG_USEC: u64 = 1_000_000;

/// A daemon under test and the pings it sent.
pub struct Daemon {
    child: Child,
    pings: Arc<Mutex<Vec<Instant>>>,
    ready: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    listener: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Starts `vnfkeeper daemon --config <config>` with its notify socket in `dir`. The shell
    /// `exec`s the daemon so that `WATCHDOG_PID=$$` is the daemon's pid, as systemd sets it.
    pub fn start(bin: &Path, config: &Path, dir: &Path) -> Self {
        let sock = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&sock).expect("bind the notify socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let pings = Arc::new(Mutex::new(Vec::new()));
        let ready = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let listener = {
            let (pings, ready, stop) = (pings.clone(), ready.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(n) = socket.recv(&mut buf) else {
                        continue;
                    };
                    let at = Instant::now();
                    let msg = String::from_utf8_lossy(&buf[..n]);
                    if msg.lines().any(|l| l == "WATCHDOG=1") {
                        pings.lock().unwrap().push(at);
                    }
                    if msg.lines().any(|l| l == "READY=1") {
                        ready.store(true, Ordering::Relaxed);
                    }
                }
            })
        };
        let child = Command::new("sh")
            .arg("-c")
            .arg("WATCHDOG_PID=$$ exec \"$0\" daemon --config \"$1\"")
            .arg(bin)
            .arg(config)
            .env_remove("JOURNAL_STREAM")
            .env("NOTIFY_SOCKET", &sock)
            .env("WATCHDOG_USEC", WATCHDOG_USEC.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start daemon");
        let mut d = Self {
            child,
            pings,
            ready,
            stop,
            listener: Some(listener),
        };
        let start = Instant::now();
        while !d.ready.load(Ordering::Relaxed) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no READY=1 in 60 s"
            );
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!("daemon exited before READY=1: {status}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        d
    }

    /// The longest time without a watchdog ping between `from` and `to` (both ends count as
    /// gap boundaries only through the pings around them).
    pub fn longest_ping_gap(&self, from: Instant, to: Instant) -> Duration {
        let pings = self.pings.lock().unwrap();
        let mut last = pings.iter().rev().find(|p| **p <= from).copied();
        let mut longest = Duration::ZERO;
        for p in pings.iter().filter(|p| **p > from) {
            if let Some(l) = last {
                longest = longest.max(*p - l);
            }
            last = Some(*p);
            if *p > to {
                break;
            }
        }
        if let Some(l) = last
            && l < to
        {
            longest = longest.max(to - l);
        }
        longest
    }

    /// Pings received so far.
    pub fn pings(&self) -> usize {
        self.pings.lock().unwrap().len()
    }

    /// Sends SIGTERM and returns the time until the process exited, and its exit status.
    pub fn sigterm(mut self) -> (Duration, std::process::ExitStatus) {
        let start = Instant::now();
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let status = self.child.wait().unwrap();
        let took = start.elapsed();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(l) = self.listener.take() {
            let _ = l.join();
        }
        (took, status)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(l) = self.listener.take() {
            let _ = l.join();
        }
    }
}

/// The request copies kept in a spool directory (`accepted/`): `*.json` entries, not their
/// `.sha256` sidecars nor hidden temporary files. A copy appears after its sidecar, once the
/// request's outcome is committed.
pub fn count_copies(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.ends_with(".json") && !n.starts_with('.')
                })
                .count()
        })
        .unwrap_or(0)
}

/// Writes `<dir>/vnfkeeper.toml` holding only `spool_dir` (`<dir>/spool`), `database`
/// (`<dir>/state.db`) and `packages_dir` (`packages`); returns those three paths
/// (spool, database, configuration).
pub fn write_config(dir: &Path, packages: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let spool = dir.join("spool");
    let db = dir.join("state.db");
    let config = dir.join("vnfkeeper.toml");
    std::fs::write(
        &config,
        format!(
            "spool_dir = \"{}\"\ndatabase = \"{}\"\npackages_dir = \"{}\"\n",
            spool.display(),
            db.display(),
            packages.display()
        ),
    )
    .expect("writing the bench configuration");
    (spool, db, config)
}
