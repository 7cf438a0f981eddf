//! Shared by the daemon benchmarks: runs `vnfkeeper daemon` as systemd would with the watchdog
//! on (`WATCHDOG_USEC`, `WATCHDOG_PID`, `NOTIFY_SOCKET` bound by the benchmark), records when each
//! `WATCHDOG=1` ping arrives, and times SIGTERM to exit.

// Each benchmark uses the part it needs.
#![allow(dead_code)]

pub mod cluster;

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
        // `VNFKEEPER_BENCH_LOG=FILE` keeps the daemon's log in FILE, with intake's per-batch
        // timing lines (read, commit, move) at debug level.
        let (filter, stderr) = match std::env::var_os("VNFKEEPER_BENCH_LOG") {
            Some(file) => (
                "warn,vnfkeeper::intake=debug",
                Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(file)
                        .expect("open VNFKEEPER_BENCH_LOG"),
                ),
            ),
            None => ("warn", Stdio::null()),
        };
        let child = Command::new("sh")
            .arg("-c")
            .arg("WATCHDOG_PID=$$ exec \"$0\" daemon --config \"$1\"")
            .arg(bin)
            .arg(config)
            .env_remove("JOURNAL_STREAM")
            .env("NOTIFY_SOCKET", &sock)
            .env("WATCHDOG_USEC", WATCHDOG_USEC.to_string())
            .env("RUST_LOG", filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
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

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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
///
/// `VNFKEEPER_BENCH_SYNC=full` adds `[ha]` with `require_mount = "<dir>"` (so `dir` must be a
/// mount point: the fresh ext4 [`BenchDir`] mounts as root), which runs SQLite with
/// `synchronous=FULL`, and creates the database with `vnfkeeper db init` (`[ha]` never creates
/// a missing one): what each commit's sync costs.
pub fn write_config(dir: &Path, packages: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let spool = dir.join("spool");
    let db = dir.join("state.db");
    let config = dir.join("vnfkeeper.toml");
    let mut text = format!(
        "spool_dir = \"{}\"\ndatabase = \"{}\"\npackages_dir = \"{}\"\n",
        spool.display(),
        db.display(),
        packages.display()
    );
    let full = std::env::var("VNFKEEPER_BENCH_SYNC").is_ok_and(|v| v == "full");
    if full {
        text.push_str(&format!("[ha]\nrequire_mount = \"{}\"\n", dir.display()));
    }
    std::fs::write(&config, text).expect("writing the bench configuration");
    if full {
        let ok = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
            .args(["db", "init", "--config"])
            .arg(&config)
            .env_remove("JOURNAL_STREAM")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "vnfkeeper db init failed (VNFKEEPER_BENCH_SYNC=full)");
    }
    (spool, db, config)
}

/// Where a spool benchmark keeps its spool and database, and what that file system is.
///
/// As root (and unless `VNFKEEPER_BENCH_FS=host`), a fresh ext4 with a journal — what
/// `mkfs.ext4` makes with Debian's defaults, its inode tables written at once rather than by a
/// background thread during the run — on a loop device over a 2 GiB image in `$TMPDIR`,
/// unmounted and removed on drop. Otherwise a directory in `$TMPDIR` as it is.
///
/// Why not `$TMPDIR` always: on an ext4 without a journal the kernel's inode allocator skips
/// every inode freed in the last 60-360 s (`recently_deleted` in `fs/ext4/ialloc.c`), and every
/// request kept in `accepted/` allocates two inodes and frees one. There the figures fall with
/// the number of files any process deleted in the minutes before the run (a benchmark run after
/// another one measured 300-800 files/s where a first run measured 2,000), which no same-run
/// baseline can separate from the daemon's own cost.
pub struct BenchDir {
    dir: tempfile::TempDir,
    image: Option<tempfile::NamedTempFile>,
    /// One line naming the file system, for the benchmark's report.
    pub what: String,
}

impl BenchDir {
    /// Makes the directory (see [`BenchDir`]). Panics when a command it runs fails.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let host = std::env::var("VNFKEEPER_BENCH_FS").is_ok_and(|v| v == "host");
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        if host || !root {
            let what = format!(
                "file system: {} ({}){}",
                dir.path().display(),
                fs_type(dir.path()),
                if host {
                    ""
                } else {
                    "; not root, so no fresh ext4 loop mount"
                }
            );
            return Self {
                dir,
                image: None,
                what,
            };
        }
        let image = tempfile::NamedTempFile::new().expect("an image file");
        image
            .as_file()
            .set_len(2 << 30)
            .expect("a sparse 2 GiB image");
        let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
        assert!(
            ok(Command::new("mkfs.ext4")
                .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
                .arg(image.path())),
            "mkfs.ext4 failed"
        );
        assert!(
            ok(Command::new("mount")
                .args(["-o", "loop"])
                .arg(image.path())
                .arg(dir.path())),
            "mount -o loop failed"
        );
        let what = "file system: a fresh ext4 with a journal on a loop device \
                    (VNFKEEPER_BENCH_FS=host: $TMPDIR as it is)"
            .to_owned();
        Self {
            dir,
            image: Some(image),
            what,
        }
    }

    /// The directory to work in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for BenchDir {
    fn drop(&mut self) {
        if self.image.is_some() {
            // The loop device goes with the mount (`mount -o loop` sets autoclear).
            let _ = Command::new("umount").arg(self.dir.path()).status();
        }
    }
}

/// `stat -f -c %T`: the file system type of `path` (e.g. `ext2/ext3`, `tmpfs`).
fn fs_type(path: &Path) -> String {
    Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Runs the `vnfkeeper` binary under benchmark with `args` and `VNFKEEPER_CONFIG=config`, and
/// returns its output (panics when it cannot be started).
pub fn vk(config: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(args)
        .env("VNFKEEPER_CONFIG", config)
        .env_remove("JOURNAL_STREAM")
        .output()
        .expect("run vnfkeeper")
}

/// `vnfkeeper ops --json` as JSON values (empty when it fails or prints nothing).
pub fn ops(config: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&vk(config, &["ops", "--json"]).stdout).unwrap_or_default()
}
