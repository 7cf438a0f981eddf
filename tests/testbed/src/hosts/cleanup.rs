//! Removing leftovers of a farm by name prefix, also after a crash.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::farm::REGISTRY_DIR;
use super::lease::Lease;
use super::util::{check_prefix, run};

/// What [`down_all`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    /// PIDs killed (processes inside the farm's network namespaces, and processes of a real
    /// control plane tagged with the prefix: `crate::cloud::real::kill_tagged`).
    pub processes: Vec<i32>,
    /// Network namespaces deleted.
    pub netns: Vec<String>,
    /// Links deleted (veths, then the bridge).
    pub links: Vec<String>,
    /// Loop devices detached.
    pub loop_devices: Vec<String>,
    /// Mount points unmounted in the machine's mount namespace.
    pub mounts: Vec<String>,
    /// Things that could not be removed (error texts).
    pub errors: Vec<String>,
}

impl DownReport {
    /// True if nothing was found.
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
            && self.netns.is_empty()
            && self.links.is_empty()
            && self.loop_devices.is_empty()
            && self.mounts.is_empty()
    }
}

/// Removes everything a farm with this prefix left behind, whether or not a farm object exists:
/// processes in network namespaces `PREFIX-h*` (SIGKILL by PID), loop devices whose backing
/// file is named `PREFIX-vol-*`, links `PREFIX-*`, those namespaces, and mounts under the farm's
/// registered state dir or `/run/netns/PREFIX-*`. Safe to call when nothing is left. Volume files
/// and the state dir are not deleted. Holds the prefix's [`Lease`] meanwhile, so no farm of that
/// prefix starts during the cleanup.
///
/// Errors: an invalid prefix, or a prefix leased by a running farm of another process (nothing
/// is touched then; a farm of this process may be cleaned up, also one that was forgotten).
/// Removal failures are listed in [`DownReport::errors`].
pub async fn down_all(prefix: &str) -> Result<DownReport> {
    check_prefix(prefix)?;
    let _lease = {
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || Lease::cleanup(&prefix)).await??
    };
    let mut rep = DownReport::default();
    let ns_prefix = format!("{prefix}-h");
    let mut namespaces: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&ns_prefix))
                .collect()
        })
        .unwrap_or_default();
    namespaces.sort();

    // 0. a real control plane tagged with the prefix (Heat, Keystone, RabbitMQ, MariaDB)
    rep.processes
        .extend(crate::cloud::real::kill_tagged(prefix).await);

    // 1. processes (killing a host's PID 1 takes its whole PID namespace down)
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut found = false;
        for ns in &namespaces {
            if let Ok(out) = run("ip", ["netns", "pids", ns]).await {
                for p in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                    found = true;
                    if kill(Pid::from_raw(p), Signal::SIGKILL).is_ok()
                        && !rep.processes.contains(&p)
                    {
                        rep.processes.push(p);
                    }
                }
            }
        }
        if !found {
            break;
        }
        if Instant::now() > deadline {
            rep.errors.push("processes survived SIGKILL".into());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // 2. loop devices by backing file name. A device still referenced by a dying mount namespace
    //    is only marked for auto-detach by `losetup -d` and goes away a moment later: detach
    //    again and wait (bounded) until none is left, so callers can check right away.
    let vol_prefix = format!("{prefix}-vol-");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let attached = attached_loops(&vol_prefix);
        if attached.is_empty() {
            break;
        }
        for dev in attached {
            match run("losetup", ["-d", &dev]).await {
                Ok(_) => {
                    if !rep.loop_devices.contains(&dev) {
                        rep.loop_devices.push(dev);
                    }
                }
                Err(e) if Instant::now() > deadline => rep.errors.push(e.to_string()),
                Err(_) => {}
            }
        }
        if Instant::now() > deadline {
            rep.errors.push(format!(
                "loop devices of {vol_prefix}* still attached after 3 s"
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // 3. links: veths first, the bridge last
    let link_prefix = format!("{prefix}-");
    let mut links: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&link_prefix))
                .collect()
        })
        .unwrap_or_default();
    links.sort_by_key(|l| l.ends_with("-br"));
    for l in links {
        if !Path::new("/sys/class/net").join(&l).exists() {
            continue; // went with its peer
        }
        match run("ip", ["link", "del", &l]).await {
            Ok(_) => rep.links.push(l),
            Err(e) => rep.errors.push(e.to_string()),
        }
    }

    // 4. namespaces
    for ns in namespaces {
        match run("ip", ["netns", "del", &ns]).await {
            Ok(_) => rep.netns.push(ns),
            Err(e) => rep.errors.push(e.to_string()),
        }
    }

    // 5. mounts in the machine's namespace under the registered state dir (normally none)
    let reg = Path::new(REGISTRY_DIR).join(format!("{prefix}.state_dir"));
    let state_dir = std::fs::read_to_string(&reg).ok().map(PathBuf::from);
    let netns_mp = format!("/run/netns/{ns_prefix}");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut targets: Vec<String> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|m| m.replace("\\040", " "))
        .filter(|m| {
            m.starts_with(&netns_mp)
                || state_dir
                    .as_ref()
                    .is_some_and(|s| Path::new(m).starts_with(s) && Path::new(m) != s)
        })
        .collect();
    targets.reverse();
    for t in targets {
        match run("umount", ["-l", &t]).await {
            Ok(_) => rep.mounts.push(t),
            Err(e) => rep.errors.push(e.to_string()),
        }
    }
    let _ = std::fs::remove_file(&reg);
    Ok(rep)
}

/// Loop devices (`/dev/loopN`) whose backing file's name starts with `vol_prefix`.
fn attached_loops(vol_prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("loop") {
                continue;
            }
            let Ok(back) = std::fs::read_to_string(e.path().join("loop/backing_file")) else {
                continue;
            };
            let base = Path::new(back.trim())
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            if base.starts_with(vol_prefix) {
                out.push(format!("/dev/{name}"));
            }
        }
    }
    out
}

/// Whether `/dev/loopN` is attached to the volume file `file` (compared by file name: volume
/// files are named by their unique volume id; the kernel may append ` (deleted)`).
fn loop_backs(dev: &str, file: &Path) -> bool {
    let name = dev.trim_start_matches("/dev/");
    let Ok(back) =
        std::fs::read_to_string(Path::new("/sys/block").join(name).join("loop/backing_file"))
    else {
        return false;
    };
    let back = back.trim_end();
    let back = back.strip_suffix(" (deleted)").unwrap_or(back);
    Path::new(back).file_name().is_some() && Path::new(back).file_name() == file.file_name()
}

/// Detaches the loop device `dev` of the volume file `file` and waits (at most 3 s) until the
/// kernel released it: while a dying mount namespace still holds the device, `losetup -d` only
/// marks it for auto-detach. Once released, the device is free and the next `losetup -f` of any
/// farm may take it at once, so every `losetup -d` here is preceded by a check that the device
/// still backs `file`: a device attached again to another farm's volume is never detached.
/// Errors: `losetup` failed and the device still backs `file` at the deadline.
pub(crate) async fn detach_loop(dev: &str, file: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        if !loop_backs(dev, file) {
            return Ok(());
        }
        let r = run("losetup", ["-d", dev]).await;
        if !loop_backs(dev, file) {
            return Ok(());
        }
        if Instant::now() > deadline {
            r?;
            anyhow::bail!("{dev} still attached 3 s after losetup -d");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`detach_loop`] for synchronous contexts (`Drop`); best effort.
pub(crate) fn detach_loop_sync(dev: &str, file: &Path) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && loop_backs(dev, file) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", dev])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(50));
    }
}
