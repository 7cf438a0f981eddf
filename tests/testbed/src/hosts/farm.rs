//! The host farm: starts, stops and observes namespace hosts (see the module docs in `hosts`).

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use ipnet::Ipv4Net;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use super::kube::KubeStore;
use super::lease::Lease;
use super::net;
use super::profile::HostProfile;
use super::seed;
use super::spawner;
use super::util::{SANE_PATH, check_prefix, run, run_sync_quiet, safe_name};

/// How long `start` waits for a host's sshd (20 hosts start at once on 2 cores).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long sshd stop/start faults wait for the port to change state.
const SSHD_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between readiness probes.
const POLL: Duration = Duration::from_millis(10);
/// Directory where every farm registers its state dir, for [`super::down_all`].
pub(crate) const REGISTRY_DIR: &str = "/run/testbed";

/// Configuration of a [`HostFarm`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FarmConfig {
    /// Directory for keys, seeds, logs, volume files and cluster stores (created if missing,
    /// resolved to an absolute path, hidden inside hosts; the farm never deletes it).
    pub state_dir: PathBuf,
    /// Prefix of every namespace, link and volume file name: 1–8 characters `[a-z0-9]`, starting
    /// with a letter. Default `"tb"`. Farms with different prefixes never touch each other.
    pub prefix: String,
    /// Bridge address with prefix length; hosts must get addresses in this network (not `.0`,
    /// not the bridge address, not broadcast). Default 10.231.0.1/24.
    pub bridge_cidr: Ipv4Net,
}

impl FarmConfig {
    /// Config with the default prefix (`tb`) and bridge (10.231.0.1/24) under `state_dir`.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        FarmConfig {
            state_dir: state_dir.into(),
            prefix: "tb".into(),
            bridge_cidr: Ipv4Net::new(Ipv4Addr::new(10, 231, 0, 1), 24).expect("valid"),
        }
    }
}

impl Default for FarmConfig {
    /// State under `/var/tmp/testbed`, prefix `tb`, bridge 10.231.0.1/24.
    fn default() -> Self {
        FarmConfig::new("/var/tmp/testbed")
    }
}

/// A host to start for a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Nova server id; the key of every other farm call.
    pub server_id: String,
    /// Host name inside the host (UTS namespace, /etc/hostname).
    pub hostname: String,
    /// Address on the farm's bridge network.
    pub ip: Ipv4Addr,
    /// Heat stack id: hosts of one cluster share one kubectl stand-in store ([`HostFarm::kube`]).
    pub cluster: String,
    /// Cinder volumes attached to the server.
    pub volumes: Vec<VolumeSpec>,
    /// Which distribution the host claims to be (`/etc/os-release`, programs present at boot).
    pub profile: HostProfile,
}

/// A Cinder volume attached to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    /// Cinder volume id; its data lives in a sparse file under the state dir until
    /// [`HostFarm::delete_volume`].
    pub volume_id: String,
    /// Device path inside the host, e.g. `/dev/vdb`.
    pub device: String,
    /// Size in GiB (the file is sparse; growing an existing volume extends it, shrinking is ignored).
    pub size_gib: u32,
}

/// A started host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// Nova server id.
    pub server_id: String,
    /// Address where its sshd listens (port 22).
    pub ip: Ipv4Addr,
    /// The host's ed25519 public host key as "ssh-ed25519 BASE64" (no comment), the way
    /// `ssh-keyscan` prints it after the host name.
    pub host_key: String,
}

/// Condition of a host as seen by [`HostFarm::hosts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    /// `start` has not returned yet.
    Starting,
    /// sshd accepts connections and commands run.
    Running,
    /// sshd was stopped by [`HostFarm::stop_sshd`] (the host itself runs on).
    SshdStopped,
    /// New SSH sessions block ([`HostFarm::set_hang`]).
    Hanging,
}

impl fmt::Display for HostState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostState::Starting => "starting",
            HostState::Running => "running",
            HostState::SshdStopped => "sshd-stopped",
            HostState::Hanging => "hanging",
        })
    }
}

/// One row of [`HostFarm::hosts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostStatus {
    /// Nova server id.
    pub server_id: String,
    /// Host name.
    pub hostname: String,
    /// Address on the bridge.
    pub ip: Ipv4Addr,
    /// Cluster (Heat stack id).
    pub cluster: String,
    /// Network namespace name (`ip netns exec NAME …` works for debugging).
    pub netns: String,
    /// Condition.
    pub state: HostState,
    /// PID (in the machine's PID namespace) of the host's init, PID 1 inside the host.
    pub pid: Option<u32>,
    /// Attached volume ids.
    pub volumes: Vec<String>,
}

/// [`HostFarm::volume_file`] of a farm configured by `cfg`.
fn volume_file_of(cfg: &FarmConfig, volume_id: &str) -> PathBuf {
    cfg.state_dir
        .join("volumes")
        .join(format!("{}-vol-{}.img", cfg.prefix, safe_name(volume_id)))
}

/// Path of the testbed's private key for root (and `ubuntu`) key login into every host
/// (`ssh -i PATH root@IP`); the public half is `PATH.pub`. Created by [`HostFarm::new`].
pub fn root_key_path(cfg: &FarmConfig) -> PathBuf {
    cfg.state_dir.join("keys").join("testbed_root_ed25519")
}

struct Host {
    spec: HostSpec,
    netns: String,
    veth: String,
    dir: PathBuf,
    child: Option<Child>,
    init_pid: Option<i32>,
    ready: bool,
    sshd_running: bool,
    hang: bool,
    host_key: String,
}

struct Volume {
    file: PathBuf,
    loop_dev: Option<String>,
    attached_to: Option<String>,
}

#[derive(Default)]
struct Inner {
    hosts: HashMap<String, Host>,
    volumes: HashMap<String, Volume>,
    /// Cluster and address of hosts stopped while their server lives on, by server id: the
    /// server's deletion later still tells its cluster store that it is gone.
    stopped: HashMap<String, (String, Ipv4Addr)>,
    closed: bool,
}

/// A set of namespace hosts on one bridge. `Send + Sync`; share it as `Arc<HostFarm>`.
///
/// Dropping a farm without [`HostFarm::shutdown`] tears everything down synchronously
/// (best effort); after a crash use [`super::down_all`] with the same prefix.
pub struct HostFarm {
    cfg: FarmConfig,
    bridge: String,
    seed_dir: PathBuf,
    next_index: AtomicU32,
    inner: Mutex<Inner>,
    /// Serializes changes of the floating IP router ([`HostFarm::set_floating_ip`]).
    fip_lock: tokio::sync::Mutex<()>,
    /// Held for the farm's life (released after `Drop` has torn the hosts down).
    _lease: Lease,
}

impl HostFarm {
    /// Leases the prefix and the bridge network machine-wide (waiting while another farm holds
    /// either, see [`Lease`]), removes what a crashed farm of the same prefix left behind
    /// ([`super::down_all`]), then creates the state dir layout, the testbed root key (kept if
    /// present), the common host seed and the bridge. Needs root and the packages of
    /// [`super::setup_packages`].
    ///
    /// Errors: invalid prefix or bridge address, not root, the bridge cannot be created (a
    /// leftover bridge of another prefix on the same network), missing tools.
    pub async fn new(cfg: FarmConfig) -> Result<Self> {
        check_prefix(&cfg.prefix)?;
        if !nix::unistd::geteuid().is_root() {
            bail!("the host farm needs root");
        }
        let net = cfg.bridge_cidr.trunc();
        let gw = cfg.bridge_cidr.addr();
        if cfg.bridge_cidr.prefix_len() > 30 || gw == net.network() || gw == net.broadcast() {
            bail!(
                "bridge_cidr {} must be a host address in a network of at least 4 addresses",
                cfg.bridge_cidr
            );
        }
        let lease = {
            let (prefix, bridge) = (cfg.prefix.clone(), cfg.bridge_cidr);
            tokio::task::spawn_blocking(move || Lease::farm(&prefix, bridge)).await??
        };
        let _ = super::down_all(&cfg.prefix).await;
        for d in ["keys", "volumes", "hosts", "logs", "kube"] {
            std::fs::create_dir_all(cfg.state_dir.join(d))
                .with_context(|| format!("create {}", cfg.state_dir.join(d).display()))?;
        }
        let mut cfg = cfg;
        cfg.state_dir = std::fs::canonicalize(&cfg.state_dir)
            .with_context(|| format!("resolve {}", cfg.state_dir.display()))?;
        let key = root_key_path(&cfg);
        let root_pub = match seed::public_key(&key) {
            Ok(k) if key.exists() => k,
            _ => seed::keygen(&key, "testbed-root").await?,
        };
        let seed_dir = cfg.state_dir.join(format!("{}-seed", cfg.prefix));
        seed::build_common_seed(&seed_dir, &root_pub).await?;
        let bridge = net::bridge_name(&cfg.prefix);
        net::create_bridge(&bridge, cfg.bridge_cidr).await?;
        let _ = std::fs::create_dir_all(REGISTRY_DIR);
        let _ = std::fs::write(
            Path::new(REGISTRY_DIR).join(format!("{}.state_dir", cfg.prefix)),
            cfg.state_dir.as_os_str().as_encoded_bytes(),
        );
        tracing::info!(prefix = %cfg.prefix, bridge = %bridge, cidr = %cfg.bridge_cidr, "host farm up");
        Ok(HostFarm {
            cfg,
            bridge,
            seed_dir,
            next_index: AtomicU32::new(1),
            inner: Mutex::new(Inner::default()),
            fip_lock: tokio::sync::Mutex::new(()),
            _lease: lease,
        })
    }

    /// The farm's configuration.
    pub fn config(&self) -> &FarmConfig {
        &self.cfg
    }

    /// Makes the `apt-get`/`apt` stand-in of every host started from now on wait `seconds` for
    /// each package it installs that is not installed yet, as a real download and install would
    /// (0, the default, waits nothing). Hosts already running keep their setting. Written into
    /// the common seed as `/etc/testbed/apt-install-seconds`.
    ///
    /// Errors: `seconds` negative or not finite; the seed directory cannot be written.
    pub fn set_apt_install_seconds(&self, seconds: f64) -> Result<()> {
        if !seconds.is_finite() || seconds < 0.0 {
            bail!("apt install seconds must be a finite number >= 0, not {seconds}");
        }
        seed::write_file(
            &self.seed_dir,
            "etc/testbed/apt-install-seconds",
            format!("{seconds}\n").as_bytes(),
            0o644,
        )?;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Path of a volume's backing file (sparse; exists once the volume was first attached).
    pub fn volume_file(&self, volume_id: &str) -> PathBuf {
        volume_file_of(&self.cfg, volume_id)
    }

    fn log_dir(&self, server_id: &str) -> PathBuf {
        self.cfg.state_dir.join("logs").join(safe_name(server_id))
    }

    /// Starts a host for `spec` and returns once its sshd accepts connections (banner read).
    ///
    /// Errors: the server id already has a host, the address is outside the bridge network or
    /// taken, a volume is attached to another running host, or the host failed to come up (the
    /// host's setup log is quoted). On error everything started for this host is removed.
    pub async fn start(&self, spec: HostSpec) -> Result<HostInfo> {
        let index = self.reserve(&spec)?;
        match self.start_inner(&spec, index).await {
            Ok(info) => Ok(info),
            Err(e) => {
                if let Err(e2) = self.stop(&spec.server_id).await {
                    tracing::warn!(server_id = %spec.server_id, error = %e2, "cleanup after failed start");
                }
                Err(e.context(format!("cannot start host for server {}", spec.server_id)))
            }
        }
    }

    fn reserve(&self, spec: &HostSpec) -> Result<u32> {
        let net = self.cfg.bridge_cidr.trunc();
        if !net.contains(&spec.ip)
            || spec.ip == net.network()
            || spec.ip == net.broadcast()
            || spec.ip == self.cfg.bridge_cidr.addr()
        {
            bail!(
                "address {} is not a free host address in {}",
                spec.ip,
                self.cfg.bridge_cidr
            );
        }
        let hn = &spec.hostname;
        if hn.is_empty()
            || hn.len() > 63
            || !hn
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            bail!("invalid host name {hn:?}");
        }
        let mut devices: Vec<&str> = Vec::new();
        for v in &spec.volumes {
            if !v.device.starts_with("/dev/")
                || v.device.contains("..")
                || devices.contains(&v.device.as_str())
            {
                bail!("invalid or duplicate device path {:?}", v.device);
            }
            if v.size_gib == 0 {
                bail!("volume {} has size 0", v.volume_id);
            }
            devices.push(&v.device);
        }
        let mut inner = self.lock();
        if inner.closed {
            bail!("the host farm is shut down");
        }
        if inner.hosts.contains_key(&spec.server_id) {
            bail!("server {} already has a host", spec.server_id);
        }
        if let Some(h) = inner.hosts.values().find(|h| h.spec.ip == spec.ip) {
            bail!(
                "address {} is already used by server {}",
                spec.ip,
                h.spec.server_id
            );
        }
        for v in &spec.volumes {
            if let Some(other) = inner
                .volumes
                .get(&v.volume_id)
                .and_then(|x| x.attached_to.as_ref())
            {
                bail!("volume {} is attached to server {other}", v.volume_id);
            }
        }
        for v in &spec.volumes {
            let file = self.volume_file(&v.volume_id);
            let rec = inner.volumes.entry(v.volume_id.clone()).or_insert(Volume {
                file,
                loop_dev: None,
                attached_to: None,
            });
            rec.attached_to = Some(spec.server_id.clone());
        }
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        let netns = net::netns_name(&self.cfg.prefix, index);
        let host = Host {
            spec: spec.clone(),
            veth: net::veth_name(&self.cfg.prefix, index),
            dir: self.cfg.state_dir.join("hosts").join(&netns),
            netns,
            child: None,
            init_pid: None,
            ready: false,
            sshd_running: false,
            hang: false,
            host_key: String::new(),
        };
        inner.hosts.insert(spec.server_id.clone(), host);
        Ok(index)
    }

    async fn start_inner(&self, spec: &HostSpec, index: u32) -> Result<HostInfo> {
        let netns = net::netns_name(&self.cfg.prefix, index);
        let veth = net::veth_name(&self.cfg.prefix, index);
        let dir = self.cfg.state_dir.join("hosts").join(&netns);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        let hseed = dir.join("seed");
        std::fs::create_dir_all(dir.join("ovl"))?;
        std::fs::create_dir_all(&hseed)?;
        std::fs::set_permissions(&hseed, std::fs::Permissions::from_mode(0o755))?;

        // per-host files: host key, names, facts
        seed::mkdirs_like(&hseed, "etc/ssh")?;
        let host_key = seed::keygen(
            &hseed.join("etc/ssh/testbed_host_ed25519_key"),
            &format!("root@{}", spec.hostname),
        )
        .await?;
        let hn = &spec.hostname;
        let short = hn.split('.').next().unwrap_or(hn);
        seed::write_file(&hseed, "etc/hostname", format!("{hn}\n").as_bytes(), 0o644)?;
        seed::write_file(
            &hseed,
            "etc/hosts",
            format!(
                "127.0.0.1\tlocalhost\n{}\t{hn} {short}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                spec.ip
            )
            .as_bytes(),
            0o644,
        )?;
        seed::write_file(
            &hseed,
            "etc/testbed/host.env",
            format!(
                "TB_SERVER_ID={}\nTB_HOSTNAME={hn}\nTB_IP={}\nTB_CLUSTER={}\n",
                spec.server_id, spec.ip, spec.cluster
            )
            .as_bytes(),
            0o644,
        )?;
        // the profile: distribution files, the name the stand-ins read
        seed::write_file(
            &hseed,
            "etc/testbed/profile",
            format!("{}\n", spec.profile.name()).as_bytes(),
            0o644,
        )?;
        for (rel, content, mode) in spec.profile.files() {
            seed::write_file(&hseed, rel, content.as_bytes(), mode)?;
        }
        for (rel, target) in spec.profile.links() {
            let link = hseed.join(rel);
            if let Some(parent) = link.parent() {
                seed::mkdirs_like(&hseed, &parent.strip_prefix(&hseed)?.to_string_lossy())?;
            }
            std::os::unix::fs::symlink(target, &link)?;
        }

        // logs kept across rebuilds, cluster store
        let logs = self.log_dir(&spec.server_id);
        std::fs::create_dir_all(&logs)?;
        std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o1777))?;
        for f in ["commands.log", "mkfs.log"] {
            let p = logs.join(f);
            if !p.exists() {
                std::fs::write(&p, b"")?;
            }
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666))?;
        }
        let kube = self.kube(&spec.cluster);
        kube.ensure()?;

        // volumes → loop devices → device nodes in the host's /dev
        let mut devices = Vec::new();
        for v in &spec.volumes {
            let file = self.volume_file(&v.volume_id);
            let size = u64::from(v.size_gib) << 30;
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)?;
            if f.metadata()?.len() < size {
                f.set_len(size)?;
            }
            drop(f);
            let dev = run("losetup", ["-f", "--show", &file.to_string_lossy()])
                .await?
                .trim()
                .to_string();
            let attached = {
                let mut inner = self.lock();
                match inner.volumes.get_mut(&v.volume_id) {
                    Some(rec) if rec.attached_to.as_deref() == Some(spec.server_id.as_str()) => {
                        rec.loop_dev = Some(dev.clone());
                        true
                    }
                    _ => false,
                }
            };
            if !attached {
                let _ = run("losetup", ["-d", &dev]).await;
                bail!(
                    "volume {} was detached while its host was starting",
                    v.volume_id
                );
            }
            let rdev = std::fs::metadata(&dev)?.rdev();
            devices.push(format!(
                "{}:{}:{}",
                v.device,
                nix::sys::stat::major(rdev),
                nix::sys::stat::minor(rdev)
            ));
        }

        net::create_host_net(
            &self.bridge,
            &netns,
            &veth,
            spec.ip,
            self.cfg.bridge_cidr.prefix_len(),
        )
        .await?;
        // A rebuilt server keeps its address (the port survives a heal) but its veth has a new
        // MAC, where a cloud keeps the port's MAC. The other hosts (the Ansible server, the LB,
        // masters) may still hold the old MAC in their neighbour tables and would time out
        // reaching it: drop their entries for this address, as the machine's are above.
        let others: Vec<String> = self
            .lock()
            .hosts
            .values()
            .filter(|h| h.netns != netns && h.init_pid.is_some())
            .map(|h| h.netns.clone())
            .collect();
        for ns in others {
            let _ = run(
                "ip",
                ["-n", &ns, "neigh", "flush", "to", &spec.ip.to_string()],
            )
            .await;
        }

        let log = std::fs::File::create(dir.join("setup.log"))?;
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "--", "nsenter"])
            .arg(format!("--net=/run/netns/{netns}"))
            .args([
                "--",
                "unshare",
                "--mount",
                "--uts",
                "--pid",
                "--fork",
                "--kill-child",
            ])
            .args([
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                seed::SETUP_SH,
                "testbed-setup",
            ])
            .env_clear()
            .env("PATH", SANE_PATH)
            .env("LANG", "C.UTF-8")
            .env("TB_HOST_DIR", &dir)
            .env("TB_SEED_DIR", &self.seed_dir)
            .env("TB_HOSTNAME", hn)
            .env("TB_LOG_DIR", &logs)
            .env("TB_KUBE_DIR", kube.dir())
            .env("TB_DEVICES", devices.join(" "))
            .env("TB_ABSENT", spec.profile.absent().join(" "))
            .env("TB_HIDE_DIR", &self.cfg.state_dir)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawner::spawn(cmd).await?;
        let child_pid = child.id();
        {
            let mut inner = self.lock();
            match inner.hosts.get_mut(&spec.server_id) {
                Some(h) => h.child = Some(child),
                None => {
                    drop(inner);
                    let mut child = child;
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("host was stopped while starting");
                }
            }
        }

        // readiness: the sshd banner on IP:22; bail out early if the host process died
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if probe_ssh(spec.ip).await {
                break;
            }
            let exited = {
                let mut inner = self.lock();
                match inner
                    .hosts
                    .get_mut(&spec.server_id)
                    .and_then(|h| h.child.as_mut())
                {
                    Some(c) => c.try_wait().ok().flatten().map(|s| s.to_string()),
                    None => Some("stopped".into()),
                }
            };
            if let Some(status) = exited {
                bail!(
                    "host process exited ({status}); setup log:\n{}",
                    tail(&dir.join("setup.log"))
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "sshd did not answer within {START_TIMEOUT:?}; setup log:\n{}",
                    tail(&dir.join("setup.log"))
                );
            }
            tokio::time::sleep(POLL).await;
        }
        let init_pid = child_pid_of(child_pid);
        let mut inner = self.lock();
        let h = inner
            .hosts
            .get_mut(&spec.server_id)
            .ok_or_else(|| anyhow!("host was stopped while starting"))?;
        h.init_pid = init_pid;
        h.ready = true;
        h.sshd_running = true;
        h.host_key = host_key.clone();
        tracing::debug!(server_id = %spec.server_id, ip = %spec.ip, netns = %netns, "host up");
        Ok(HostInfo {
            server_id: spec.server_id.clone(),
            ip: spec.ip,
            host_key,
        })
    }

    /// Tears a host down (processes, mounts, namespace, veth, loop devices). Volume data is kept
    /// and may be attached again by a later `start`. Unknown server ids are not an error.
    pub async fn stop(&self, server_id: &str) -> Result<()> {
        self.stop_inner(server_id, false).await
    }

    /// [`HostFarm::stop`] for a server that is deleted (or rebuilt from its image): its
    /// cluster store also learns that the server is gone ([`KubeStore::server_gone`]).
    pub async fn delete(&self, server_id: &str) -> Result<()> {
        self.stop_inner(server_id, true).await
    }

    async fn stop_inner(&self, server_id: &str, deleted: bool) -> Result<()> {
        let (host, was_stopped) = {
            let mut inner = self.lock();
            let host = inner.hosts.remove(server_id);
            match &host {
                Some(h) if !deleted => {
                    inner
                        .stopped
                        .insert(server_id.to_string(), (h.spec.cluster.clone(), h.spec.ip));
                }
                _ => {}
            }
            let was = if deleted {
                inner.stopped.remove(server_id)
            } else {
                None
            };
            (host, was)
        };
        if host.is_none()
            && let Some((cluster, ip)) = was_stopped
            && let Err(e) = self.kube(&cluster).server_gone(ip)
        {
            return Err(anyhow!("stop {server_id}: cluster store: {e:#}"));
        }
        let mut errors = match host {
            Some(h) => {
                let gone = deleted.then(|| (self.kube(&h.spec.cluster), h.spec.ip));
                let mut errors = teardown(h).await;
                if let Some((kube, ip)) = gone
                    && let Err(e) = kube.server_gone(ip)
                {
                    errors.push(format!("cluster store: {e:#}"));
                }
                errors
            }
            None => Vec::new(),
        };
        errors.extend(self.detach_volumes_of(Some(server_id)).await);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("stop {server_id}: {}", errors.join("; ")))
        }
    }

    async fn detach_volumes_of(&self, server_id: Option<&str>) -> Vec<String> {
        let devs: Vec<(String, String)> = {
            let mut inner = self.lock();
            inner
                .volumes
                .iter_mut()
                .filter(|(_, v)| server_id.is_none() || v.attached_to.as_deref() == server_id)
                .filter_map(|(id, v)| {
                    v.attached_to = None;
                    v.loop_dev.take().map(|d| (d, id.clone()))
                })
                .collect()
        };
        let mut errors = Vec::new();
        for (d, id) in devs {
            if let Err(e) = super::cleanup::detach_loop(&d, &self.volume_file(&id)).await {
                errors.push(e.to_string());
            }
        }
        errors
    }

    /// Deletes a volume's data for good. Errors if it is attached to a running host.
    pub async fn delete_volume(&self, volume_id: &str) -> Result<()> {
        let file = {
            let mut inner = self.lock();
            if let Some(v) = inner.volumes.get(volume_id)
                && let Some(s) = &v.attached_to
            {
                bail!("volume {volume_id} is attached to server {s}; stop the host first");
            }
            inner
                .volumes
                .remove(volume_id)
                .map(|v| v.file)
                .unwrap_or_else(|| self.volume_file(volume_id))
        };
        match std::fs::remove_file(&file) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(anyhow!(e).context(format!("remove {}", file.display()))),
        }
    }

    /// Tears down every host (in parallel), detaches every loop device and removes the bridge.
    /// Volume files and logs stay in the state dir. Later calls except `hosts`/`kube` fail.
    pub async fn shutdown(&self) -> Result<()> {
        let hosts: Vec<Host> = {
            let mut inner = self.lock();
            inner.closed = true;
            inner.hosts.drain().map(|(_, h)| h).collect()
        };
        let mut set = tokio::task::JoinSet::new();
        for h in hosts {
            set.spawn(teardown(h));
        }
        let mut errors = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(e) => errors.extend(e),
                Err(e) => errors.push(e.to_string()),
            }
        }
        errors.extend(self.detach_volumes_of(None).await);
        errors.extend(
            super::net::delete_host_net(
                &format!("{}-hfip", self.cfg.prefix),
                &format!("{}-vfip", self.cfg.prefix),
            )
            .await,
        );
        if Path::new("/sys/class/net").join(&self.bridge).exists()
            && let Err(e) = run("ip", ["link", "del", &self.bridge]).await
        {
            errors.push(e.to_string());
        }
        let _ = std::fs::remove_file(
            Path::new(REGISTRY_DIR).join(format!("{}.state_dir", self.cfg.prefix)),
        );
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("shutdown: {}", errors.join("; ")))
        }
    }

    /// Every host with its condition, sorted by server id.
    pub fn hosts(&self) -> Vec<HostStatus> {
        let inner = self.lock();
        let mut v: Vec<HostStatus> = inner
            .hosts
            .values()
            .map(|h| HostStatus {
                server_id: h.spec.server_id.clone(),
                hostname: h.spec.hostname.clone(),
                ip: h.spec.ip,
                cluster: h.spec.cluster.clone(),
                netns: h.netns.clone(),
                state: if !h.ready {
                    HostState::Starting
                } else if !h.sshd_running {
                    HostState::SshdStopped
                } else if h.hang {
                    HostState::Hanging
                } else {
                    HostState::Running
                },
                pid: h.init_pid.and_then(|p| u32::try_from(p).ok()),
                volumes: h.spec.volumes.iter().map(|v| v.volume_id.clone()).collect(),
            })
            .collect();
        v.sort_by(|a, b| a.server_id.cmp(&b.server_id));
        v
    }

    /// The host's current public host key ("ssh-ed25519 BASE64").
    pub fn host_key(&self, server_id: &str) -> Result<String> {
        let inner = self.lock();
        let h = inner
            .hosts
            .get(server_id)
            .filter(|h| h.ready)
            .ok_or_else(|| anyhow!("no running host {server_id}"))?;
        Ok(h.host_key.clone())
    }

    fn running(&self, server_id: &str) -> Result<(i32, Ipv4Addr)> {
        let inner = self.lock();
        let h = inner
            .hosts
            .get(server_id)
            .filter(|h| h.ready)
            .ok_or_else(|| anyhow!("no running host {server_id}"))?;
        let pid = h
            .init_pid
            .ok_or_else(|| anyhow!("host {server_id} has no init process"))?;
        Ok((pid, h.spec.ip))
    }

    fn set_flags(&self, server_id: &str, f: impl FnOnce(&mut Host)) {
        if let Some(h) = self.lock().hosts.get_mut(server_id) {
            f(h);
        }
    }

    /// Fault: stops the host's sshd (new connections are refused; open sessions continue).
    /// Returns once port 22 refuses connections.
    pub async fn stop_sshd(&self, server_id: &str) -> Result<()> {
        let (pid, ip) = self.running(server_id)?;
        kill(Pid::from_raw(pid), Signal::SIGUSR2).context("signal host init")?;
        let deadline = Instant::now() + SSHD_TIMEOUT;
        while !port_refused(ip).await {
            if Instant::now() > deadline {
                bail!("sshd of {server_id} did not stop");
            }
            tokio::time::sleep(POLL).await;
        }
        self.set_flags(server_id, |h| h.sshd_running = false);
        Ok(())
    }

    /// Fault: ends every open SSH session of the host (all its `sshd` processes except the
    /// listener, whose PID the init keeps in `/run/testbed/sshd.pid`), as a host going down
    /// would. Together with [`HostFarm::stop_sshd`] this makes the host unreachable also for
    /// clients that keep connections open (OpenSSH `ControlPersist`, on by default in Ansible).
    /// Returns the number of processes signalled.
    pub async fn drop_ssh_sessions(&self, server_id: &str) -> Result<usize> {
        let out = self
            .exec(
                server_id,
                "l=$(cat /run/testbed/sshd.pid 2>/dev/null); n=0; \
                 for d in /proc/[0-9]*; do p=${d#/proc/}; \
                   [ \"$(cat \"$d/comm\" 2>/dev/null)\" = sshd ] && [ \"$p\" != \"$l\" ] && kill -KILL \"$p\" 2>/dev/null && n=$((n+1)); \
                 done; echo $n",
            )
            .await?;
        if !out.status.success() {
            bail!(
                "drop SSH sessions of {server_id}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0))
    }

    /// Undoes [`HostFarm::stop_sshd`] (no-op if sshd runs). Returns once sshd answers.
    pub async fn start_sshd(&self, server_id: &str) -> Result<()> {
        let (pid, ip) = self.running(server_id)?;
        kill(Pid::from_raw(pid), Signal::SIGUSR1).context("signal host init")?;
        let deadline = Instant::now() + SSHD_TIMEOUT;
        while !probe_ssh(ip).await {
            if Instant::now() > deadline {
                bail!("sshd of {server_id} did not start");
            }
            tokio::time::sleep(POLL).await;
        }
        self.set_flags(server_id, |h| h.sshd_running = true);
        Ok(())
    }

    /// Fault: while set, every new SSH session (command, shell, sftp) is recorded in the command
    /// log and then blocks without running until the client disconnects. Clearing it affects only
    /// later sessions.
    pub async fn set_hang(&self, server_id: &str, hang: bool) -> Result<()> {
        let (pid, _) = self.running(server_id)?;
        let flag = PathBuf::from(format!("/proc/{pid}/root/run/testbed/hang"));
        if hang {
            std::fs::write(&flag, b"1").context("write hang flag")?;
        } else if let Err(e) = std::fs::remove_file(&flag)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(anyhow!(e).context("remove hang flag"));
        }
        self.set_flags(server_id, |h| h.hang = hang);
        Ok(())
    }

    /// Moves the running host of `server_id` to address `ip` on the bridge (its interface was
    /// re-attached to a new port): the old address is removed from its `eth0`, the new one added,
    /// stale neighbour entries for both dropped. Processes, files and host key stay. Errors: no
    /// running host, `ip` failing.
    pub async fn readdress(&self, server_id: &str, ip: Ipv4Addr) -> Result<()> {
        let (_, old) = self.running(server_id)?;
        if old == ip {
            return Ok(());
        }
        let ns = self
            .lock()
            .hosts
            .get(server_id)
            .map(|h| h.netns.clone())
            .ok_or_else(|| anyhow!("no running host {server_id}"))?;
        let len = self.cfg.bridge_cidr.prefix_len();
        super::util::run_stdin(
            "ip",
            &["-n", &ns, "-batch", "-"],
            &format!("addr del {old}/{len} dev eth0\naddr add {ip}/{len} dev eth0\n"),
        )
        .await
        .context("move the host's address")?;
        for a in [old, ip] {
            let _ = run("ip", ["neigh", "flush", "to", &a.to_string()]).await;
        }
        self.set_flags(server_id, |h| h.spec.ip = ip);
        Ok(())
    }

    /// Fault: gives the host a new ed25519 host key and restarts its sshd; returns the new public
    /// key ("ssh-ed25519 BASE64").
    pub async fn rotate_host_key(&self, server_id: &str) -> Result<String> {
        let (pid, _) = self.running(server_id)?;
        let (dir, hostname) = {
            let inner = self.lock();
            let h = inner
                .hosts
                .get(server_id)
                .ok_or_else(|| anyhow!("no running host {server_id}"))?;
            (h.dir.clone(), h.spec.hostname.clone())
        };
        let key = dir.join("seed/etc/ssh/testbed_host_ed25519_key");
        let new_key = seed::keygen(&key, &format!("root@{hostname}")).await?;
        let inside = PathBuf::from(format!("/proc/{pid}/root/etc/ssh"));
        std::fs::copy(&key, inside.join("testbed_host_ed25519_key"))
            .context("install new host key")?;
        std::fs::copy(
            key.with_extension("pub"),
            inside.join("testbed_host_ed25519_key.pub"),
        )?;
        let running = self
            .lock()
            .hosts
            .get(server_id)
            .map(|h| h.sshd_running)
            .unwrap_or(false);
        if running {
            self.stop_sshd(server_id).await?;
        }
        self.start_sshd(server_id).await?;
        self.set_flags(server_id, |h| h.host_key = new_key.clone());
        Ok(new_key)
    }

    /// Every command run over SSH on this server, oldest first, across rebuilds of its host
    /// (sessions without a command are "[interactive shell]" / "[sftp subsystem]"). Works after
    /// `stop` too (the log lives in the state dir).
    pub async fn command_log(&self, server_id: &str) -> Result<Vec<String>> {
        let p = self.log_dir(server_id).join("commands.log");
        let data = match tokio::fs::read(&p).await {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(anyhow!(e).context(format!("read {}", p.display()))),
        };
        Ok(data
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect())
    }

    /// The client address of every SSH session on this server, oldest first, across rebuilds
    /// (the first field of sshd's `SSH_CONNECTION`): the bridge's own address for a client in
    /// the machine's namespace that connected to the server's fixed address, the floating IP
    /// router's ([`HostFarm::floating_router_ip`]) for one that came through a floating IP.
    pub async fn client_log(&self, server_id: &str) -> Result<Vec<String>> {
        let p = self.log_dir(server_id).join("clients.log");
        match tokio::fs::read_to_string(&p).await {
            Ok(s) => Ok(s.lines().map(str::to_string).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(anyhow!(e).context(format!("read {}", p.display()))),
        }
    }

    /// The network namespace of the floating IP router ([`HostFarm::set_floating_ip`]):
    /// `PREFIX-hfip` (it may not exist yet).
    pub fn floating_router_ns(&self) -> String {
        format!("{}-hfip", self.cfg.prefix)
    }

    /// The address of the floating IP router on the bridge: the subnet's second host address
    /// (`.2` of a /24; the bridge holds `.1`).
    pub fn floating_router_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.cfg.bridge_cidr.trunc().network()) + 2)
    }

    /// Makes `floating` reach the host at `fixed` (`Some`) or nothing (`None`), as a Neutron
    /// router does for a floating IP: a router namespace (`PREFIX-hfip`, its `eth0` on the
    /// bridge at [`HostFarm::floating_router_ip`]) holds every floating address, DNATs it to the
    /// fixed one and masquerades the forwarded flow (everything shares one bridge, so the reply
    /// must come back through the router). Any client on the bridge (the machine, other hosts)
    /// reaches a host through its floating address; the host sees the router as the client.
    /// Made on first use; removed with the farm. Idempotent.
    pub async fn set_floating_ip(&self, floating: Ipv4Addr, fixed: Option<Ipv4Addr>) -> Result<()> {
        let _g = self.fip_lock.lock().await;
        let ns = self.floating_router_ns();
        let veth = format!("{}-vfip", self.cfg.prefix);
        if !Path::new("/run/netns").join(&ns).exists() {
            let router = self.floating_router_ip();
            let len = self.cfg.bridge_cidr.prefix_len();
            super::util::run_stdin(
                "ip",
                &["-batch", "-"],
                &format!(
                    "netns add {ns}\nlink add {veth} type veth peer name eth0 netns {ns}\n\
                     link set {veth} master {} up\n",
                    self.bridge
                ),
            )
            .await
            .context("floating IP router namespace")?;
            super::util::run_stdin(
                "ip",
                &["-n", &ns, "-batch", "-"],
                &format!("addr add {router}/{len} dev eth0\nlink set eth0 up\nlink set lo up\n"),
            )
            .await?;
            let nsarg = format!("--net=/run/netns/{ns}");
            for kv in [
                "net.ipv4.ip_forward=1",
                "net.ipv4.conf.all.send_redirects=0",
                "net.ipv4.conf.eth0.send_redirects=0",
            ] {
                run("nsenter", [nsarg.as_str(), "sysctl", "-q", "-w", kv]).await?;
            }
            run(
                "nsenter",
                [
                    nsarg.as_str(),
                    "iptables",
                    "-t",
                    "nat",
                    "-A",
                    "POSTROUTING",
                    "-o",
                    "eth0",
                    "-m",
                    "conntrack",
                    "--ctstate",
                    "DNAT",
                    "-j",
                    "MASQUERADE",
                ],
            )
            .await?;
        }
        let nsarg = format!("--net=/run/netns/{ns}");
        // Drop whatever the floating address did before.
        let rules = run(
            "nsenter",
            [nsarg.as_str(), "iptables", "-t", "nat", "-S", "PREROUTING"],
        )
        .await?;
        let target = format!("-d {floating}/32 ");
        for rule in rules
            .lines()
            .filter(|l| l.starts_with("-A PREROUTING ") && l.contains(&target))
        {
            let mut args = vec![nsarg.clone(), "iptables".into(), "-t".into(), "nat".into()];
            args.extend(
                rule.replacen("-A ", "-D ", 1)
                    .split_whitespace()
                    .map(str::to_owned),
            );
            run("nsenter", args.iter().map(String::as_str)).await?;
        }
        let _ = run(
            "ip",
            [
                "-n",
                &ns,
                "addr",
                "del",
                &format!("{floating}/32"),
                "dev",
                "eth0",
            ],
        )
        .await;
        if let Some(fixed) = fixed {
            run(
                "ip",
                [
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{floating}/32"),
                    "dev",
                    "eth0",
                ],
            )
            .await?;
            run(
                "nsenter",
                [
                    nsarg.as_str(),
                    "iptables",
                    "-t",
                    "nat",
                    "-A",
                    "PREROUTING",
                    "-d",
                    &format!("{floating}/32"),
                    "-j",
                    "DNAT",
                    "--to-destination",
                    &fixed.to_string(),
                ],
            )
            .await?;
            let _ = run("ip", ["neigh", "flush", "to", &floating.to_string()]).await;
        }
        Ok(())
    }

    /// Every mkfs run on this server ("mkfs.ext4 -F /dev/vdb"), oldest first, across rebuilds.
    pub async fn mkfs_log(&self, server_id: &str) -> Result<Vec<String>> {
        let p = self.log_dir(server_id).join("mkfs.log");
        match tokio::fs::read_to_string(&p).await {
            Ok(s) => Ok(s.lines().map(str::to_string).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(anyhow!(e).context(format!("read {}", p.display()))),
        }
    }

    /// Runs `sh -c shell_cmd` as root inside the host (all its namespaces and its root; not over
    /// SSH, not recorded in the command log). Returns the output whatever the exit status;
    /// errors only if the command cannot be started or the host is not running.
    pub async fn exec(&self, server_id: &str, shell_cmd: &str) -> Result<std::process::Output> {
        let (pid, _) = self.running(server_id)?;
        let out = tokio::process::Command::new("nsenter")
            .args([
                "-t",
                &pid.to_string(),
                "-m",
                "-u",
                "-n",
                "-p",
                "-r",
                "-w",
                "--",
                "/bin/sh",
                "-c",
                shell_cmd,
            ])
            .env_clear()
            .env("PATH", SANE_PATH)
            .env("HOME", "/root")
            .env("USER", "root")
            .env("LOGNAME", "root")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .output()
            .await
            .context("run nsenter")?;
        Ok(out)
    }

    /// Reads a file inside the host (absolute path as the host sees it).
    pub async fn read_file(&self, server_id: &str, path: &str) -> Result<Vec<u8>> {
        let (pid, _) = self.running(server_id)?;
        let p = format!("/proc/{pid}/root/{}", path.trim_start_matches('/'));
        tokio::fs::read(&p)
            .await
            .with_context(|| format!("read {path} in {server_id}"))
    }

    /// Writes a file inside the host (absolute path as the host sees it; parent must exist).
    pub async fn write_file(&self, server_id: &str, path: &str, data: &[u8]) -> Result<()> {
        let (pid, _) = self.running(server_id)?;
        let p = format!("/proc/{pid}/root/{}", path.trim_start_matches('/'));
        tokio::fs::write(&p, data)
            .await
            .with_context(|| format!("write {path} in {server_id}"))
    }

    /// The kubectl stand-in's store of `cluster` (shared by every host with that cluster id).
    pub fn kube(&self, cluster: &str) -> KubeStore {
        KubeStore::new(self.cfg.state_dir.join("kube").join(safe_name(cluster)))
    }
}

impl Drop for HostFarm {
    fn drop(&mut self) {
        let fip_ns = format!("{}-hfip", self.cfg.prefix);
        if Path::new("/run/netns").join(&fip_ns).exists() {
            run_sync_quiet("ip", &["link", "del", &format!("{}-vfip", self.cfg.prefix)]);
            run_sync_quiet("ip", &["netns", "del", &fip_ns]);
        }
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        if inner.closed && inner.hosts.is_empty() {
            return;
        }
        for (_, mut h) in inner.hosts.drain() {
            if let Some(mut c) = h.child.take() {
                // kill PID 1 and let `unshare` reap it (killing `unshare` first would leave the
                // init to the machine's slow-reaping PID 1)
                match h.init_pid.or_else(|| child_pid_of(c.id())) {
                    Some(p) => {
                        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                    }
                    None => {
                        let _ = c.kill();
                    }
                }
                let deadline = Instant::now() + Duration::from_secs(5);
                while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(2));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
            run_sync_quiet("ip", &["link", "del", &h.veth]);
            run_sync_quiet("ip", &["netns", "del", &h.netns]);
            let _ = std::fs::remove_dir_all(&h.dir);
        }
        for (id, v) in inner.volumes.iter_mut() {
            if let Some(d) = v.loop_dev.take() {
                super::cleanup::detach_loop_sync(&d, &volume_file_of(&self.cfg, id));
            }
        }
        run_sync_quiet("ip", &["link", "del", &self.bridge]);
        let _ = std::fs::remove_file(
            Path::new(REGISTRY_DIR).join(format!("{}.state_dir", self.cfg.prefix)),
        );
    }
}

/// Kills a host's processes and removes its network; returns error texts (best effort).
async fn teardown(mut h: Host) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(mut child) = h.child.take() {
        let init = h.init_pid.or_else(|| child_pid_of(child.id()));
        match init {
            // PID 1 dies → the kernel kills and reaps the whole PID namespace, then the
            // `unshare` parent (our child) exits.
            Some(p) => {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            None => {
                let _ = child.kill();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    errors.push(format!("host {} did not exit in time", h.netns));
                    break;
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
    }
    // anything else still in the namespace (e.g. `exec` helpers)
    if let Ok(pids) = run("ip", ["netns", "pids", &h.netns]).await {
        for p in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
    }
    errors.extend(net::delete_host_net(&h.netns, &h.veth).await);
    let _ = std::fs::remove_dir_all(&h.dir);
    errors
}

/// First child of `pid` (the host's init under the `unshare` parent).
fn child_pid_of(pid: u32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// True once `ip:22` accepts a connection and sends an SSH banner.
async fn probe_ssh(ip: Ipv4Addr) -> bool {
    let addr = SocketAddr::from((ip, 22));
    let Ok(Ok(mut s)) = tokio::time::timeout(
        Duration::from_millis(300),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    else {
        return false;
    };
    let mut buf = [0u8; 4];
    matches!(
        tokio::time::timeout(Duration::from_secs(3), s.read_exact(&mut buf)).await,
        Ok(Ok(_)) if &buf == b"SSH-"
    )
}

/// True if `ip:22` actively refuses connections.
async fn port_refused(ip: Ipv4Addr) -> bool {
    let addr = SocketAddr::from((ip, 22));
    matches!(
        tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(addr)).await,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
