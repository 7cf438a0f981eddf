//! `remote` against a real OpenSSH sshd on 127.0.0.1 (needs root, `sshd`, `sudo`, `unshare`).
//!
//! Each test starts its own sshd (random port, temporary ed25519 host key, temporary config)
//! inside a private mount namespace (`unshare --mount`) where copies of `/etc/passwd`,
//! `/etc/shadow`, `/etc/group` and `/etc/sudoers.d` are bind-mounted with two throwaway users:
//! - `vkpw` / `vkpw-S3cret!` — sudo **with** password;
//! - `vknopw` / `vknopw-S3cret!` — sudo with `NOPASSWD`.
//!
//! The machine's real users and sudoers are never changed; the namespace dies with sshd, which
//! a Drop guard kills by PID even when a test fails. root logs in with a temporary client key.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use vnfkeeper::remote::{
    Auth, HostKeyPolicy, Output, Remote, RemoteCommand, RemoteError, SshConfig, SshRemote, Target,
    TimeoutSide, UploadFile, fingerprint, same_key,
};
use vnfkeeper_core::wire::Secret;

use crate::support::free_port;

const PW_USER: &str = "vkpw";
const PW_PASS: &str = "vkpw-S3cret!";
const NOPW_USER: &str = "vknopw";
const NOPW_PASS: &str = "vknopw-S3cret!";

/// An sshd of our own; killed (by PID) and reaped on drop.
struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
    child: Child,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_ok(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("spawn");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    out.stdout
}

fn keygen(path: &Path) {
    run_ok(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
            .arg(path),
    );
}

fn hash_password(pw: &str) -> String {
    let out = run_ok(Command::new("openssl").args(["passwd", "-6", pw]));
    String::from_utf8(out).unwrap().trim().to_string()
}

impl Sshd {
    fn start() -> Sshd {
        assert_eq!(
            String::from_utf8(run_ok(Command::new("id").arg("-u")))
                .unwrap()
                .trim(),
            "0",
            "these tests need root (they start sshd)"
        );
        let dir = tempfile::Builder::new()
            .prefix("vnfkeeper-remote-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        // Users must reach their home and authorized_keys below it.
        run_ok(Command::new("chmod").arg("0755").arg(d));
        keygen(&d.join("host_ed25519"));
        keygen(&d.join("client_ed25519"));
        keygen(&d.join("other_ed25519"));
        std::fs::copy(d.join("client_ed25519.pub"), d.join("authorized_keys")).unwrap();
        std::fs::create_dir(d.join("home")).unwrap();

        // Throwaway users, visible only inside the namespace.
        let mut passwd = std::fs::read_to_string("/etc/passwd").unwrap();
        let mut shadow = std::fs::read_to_string("/etc/shadow").unwrap();
        let mut group = std::fs::read_to_string("/etc/group").unwrap();
        for (i, (user, pass)) in [(PW_USER, PW_PASS), (NOPW_USER, NOPW_PASS)]
            .into_iter()
            .enumerate()
        {
            let id = 64201 + i;
            let home = d.join("home").join(user);
            std::fs::create_dir(&home).unwrap();
            run_ok(Command::new("chown").arg(format!("{id}:{id}")).arg(&home));
            passwd.push_str(&format!(
                "{user}:x:{id}:{id}:vnfkeeper test:{}:/bin/bash\n",
                home.display()
            ));
            shadow.push_str(&format!(
                "{user}:{}:19000:0:99999:7:::\n",
                hash_password(pass)
            ));
            group.push_str(&format!("{user}:x:{id}:\n"));
        }
        std::fs::write(d.join("passwd"), passwd).unwrap();
        std::fs::write(d.join("shadow"), shadow).unwrap();
        std::fs::write(d.join("group"), group).unwrap();
        let sudoers = d.join("sudoers.d");
        std::fs::create_dir(&sudoers).unwrap();
        std::fs::write(
            sudoers.join("vnfkeeper-test"),
            format!(
                "Defaults lecture=never\n{PW_USER} ALL=(ALL:ALL) ALL\n\
                 {NOPW_USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"
            ),
        )
        .unwrap();
        run_ok(
            Command::new("chmod")
                .arg("0440")
                .arg(sudoers.join("vnfkeeper-test")),
        );

        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile none\n\
             AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPermitRootLogin yes\n\
             PasswordAuthentication yes\nKbdInteractiveAuthentication no\nUsePAM no\n\
             Subsystem sftp /usr/lib/openssh/sftp-server\nLogLevel DEBUG1\nMaxStartups 50\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let script = format!(
            "set -e; mount -t tmpfs tmpfs /run; mkdir -p /run/sshd; \
             mount --bind {d}/passwd /etc/passwd; mount --bind {d}/shadow /etc/shadow; \
             mount --bind {d}/group /etc/group; mount --bind {d}/sudoers.d /etc/sudoers.d; \
             exec /usr/sbin/sshd -D -f {d}/sshd_config -E {d}/sshd.log",
            d = d.display()
        );
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .expect("start sshd");
        let sshd = Sshd { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not start: {}",
                sshd.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sshd
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }

    fn host_key(&self) -> String {
        std::fs::read_to_string(self.path("host_ed25519.pub")).unwrap()
    }

    fn target(&self, username: &str, auth: Auth, host_key: HostKeyPolicy) -> Target {
        Target {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: self.port,
            username: username.into(),
            auth,
            host_key,
            label: format!("VDU-test-{username}"),
        }
    }

    fn root(&self) -> Target {
        self.target(
            "root",
            Auth::Key {
                path: self.path("client_ed25519"),
                passphrase: None,
            },
            HostKeyPolicy::Pinned(self.host_key()),
        )
    }

    fn password_user(&self, user: &str, pass: &str) -> Target {
        self.target(
            user,
            Auth::Password(Secret::new(pass.to_string())),
            HostKeyPolicy::Pinned(self.host_key()),
        )
    }
}

fn remote() -> SshRemote {
    SshRemote::new(SshConfig {
        connect_timeout: Duration::from_secs(5),
        ..SshConfig::default()
    })
}

/// Every string form of an error, for secret checks.
fn all_text(e: &RemoteError) -> String {
    format!("{e} {e:?}")
}

/// A streamed command's lines reach the sink while it still runs: the command prints one line,
/// then waits for a file the test creates only after it got that line.
#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn stdout_lines_reach_the_sink_while_the_command_runs() {
    let sshd = Sshd::start();
    let r = Arc::new(remote());
    let t = sshd.root();
    let flag = sshd.path("go");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let tx = std::sync::Mutex::new(tx);
    let sink: vnfkeeper::remote::LineSink = Arc::new(move |line: &str| {
        let _ = tx.lock().unwrap().send(line.to_owned());
    });
    let cmd = RemoteCommand::script(
        "printf 'first\\r\\n'; while [ ! -e \"$1\" ]; do sleep 0.05; done; printf 'second\\nlast'",
    )
    .arg(flag.display().to_string())
    .timeout(Duration::from_secs(60))
    .stream_stdout(sink);
    let run = {
        let r = r.clone();
        let t = t.clone();
        tokio::spawn(async move { r.run(&t, &cmd).await })
    };
    let first = tokio::task::spawn_blocking(move || {
        let line = rx.recv_timeout(Duration::from_secs(30));
        (line, rx)
    })
    .await
    .unwrap();
    let (line, rx) = first;
    assert_eq!(
        line.as_deref(),
        Ok("first"),
        "the first line, without CR LF"
    );
    assert!(!run.is_finished(), "the line came while the command waited");
    std::fs::write(&flag, b"").unwrap();
    let out = run.await.unwrap().unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout, b"first\r\nsecond\nlast",
        "collected whole as well"
    );
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(rest, ["second", "last"]);
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn exec_collects_status_stdout_stderr_and_reuses_the_session() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.root();
    let out = r
        .run(
            &t,
            &RemoteCommand::script("echo hi; echo oops >&2; exit 3").step("test.exec"),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_status, Some(3));
    assert_eq!(out.stdout, b"hi\n");
    assert_eq!(out.stderr, b"oops\n");
    assert!(!out.success());
    assert!(same_key(&out.host_key, &sshd.host_key()));

    let out = r
        .run(&t, &RemoteCommand::new("id").arg("-un"))
        .await
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout_str(), "root\n");

    // stdin reaches the command, large output comes back whole.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let out = r
        .run(&t, &RemoteCommand::new("cat").stdin(big.clone()))
        .await
        .unwrap();
    assert_eq!(out.stdout.len(), big.len());
    assert!(out.stdout == big);

    // Commands in parallel on the same host share one session.
    let cmds: Vec<_> = (0..12)
        .map(|i| RemoteCommand::script("sleep 0.2; echo \"$1\"").arg(i.to_string()))
        .collect();
    let outs = futures_join_all(&r, &t, &cmds).await;
    for (i, o) in outs.into_iter().enumerate() {
        assert_eq!(o.unwrap().stdout_str().trim(), i.to_string());
    }
    assert_eq!(r.pool().handshakes(), 1);

    // After close, the pool reconnects.
    r.close().await;
    assert!(
        r.run(&t, &RemoteCommand::new("true"))
            .await
            .unwrap()
            .success()
    );
    assert_eq!(r.pool().handshakes(), 2);
}

/// Runs all commands concurrently on one task (polls every future until all are done).
async fn futures_join_all(
    r: &SshRemote,
    t: &Target,
    cmds: &[RemoteCommand],
) -> Vec<Result<Output, RemoteError>> {
    use std::task::Poll;
    let mut futs: Vec<_> = cmds.iter().map(|c| Some(r.run(t, c))).collect();
    let mut results: Vec<Option<Result<Output, RemoteError>>> = cmds.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, result) in futs.iter_mut().zip(results.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    results.into_iter().map(Option::unwrap).collect()
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn remote_deadline_kills_the_remote_process() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.root();
    let marker = format!("vnfkeeper-marker-{}", std::process::id());
    let started = Instant::now();
    let err = r
        .run(
            &t,
            &RemoteCommand::script("sleep \"$2\"; echo \"$1\"")
                .arg(&marker)
                .arg("31.4159")
                .timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(
            err,
            RemoteError::CommandTimeout {
                side: TimeoutSide::Remote,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert_eq!(err.kind(), "command_timeout");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}"
    );

    // Neither the shell (carrying the marker) nor its sleep survive. The patterns are written so
    // that they do not match the checking command's own argv.
    let sh_pattern = format!("[v]{}", &marker[1..]);
    for pattern in [sh_pattern.as_str(), "[s]leep 31.4159"] {
        let out = r
            .run(&t, &RemoteCommand::new("pgrep").arg("-f").arg(pattern))
            .await
            .unwrap();
        assert_eq!(
            out.exit_status,
            Some(1),
            "still running: {}",
            out.stdout_str()
        );
    }
}

/// A step's apply whose client went away (the daemon killed during the step: its SSH session
/// closes, and without a pty sshd stops nothing) runs on until it ends; the apply that resumes
/// the step must wait for it, never run beside it. Both hold the host's step lock; a check does
/// not wait for it. Also as a sudo user (the lock is root's, in `/run`).
#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn an_apply_whose_client_went_away_is_waited_for_by_the_next_one() {
    let sshd = Sshd::start();
    for (who, target) in [
        ("root", sshd.root()),
        ("sudo", sshd.password_user(PW_USER, PW_PASS)),
    ] {
        let log = sshd.path(&format!("applies-{who}.log"));
        std::fs::write(&log, "").unwrap();
        run_ok(Command::new("chmod").arg("0666").arg(&log));
        // Appends "start NAME", waits $3 s, appends "end NAME".
        let apply = |name: &str, secs: &str| {
            RemoteCommand::script(
                "echo \"start $1\" >> \"$2\"; sleep \"$3\"; echo \"end $1\" >> \"$2\"",
            )
            .arg(name)
            .arg(log.display().to_string())
            .arg(secs)
            .sudo(true)
            .timeout(Duration::from_secs(30))
            .host_lock()
        };
        let lines = || std::fs::read_to_string(&log).unwrap();

        // The first apply starts; then its client goes away (its task aborted, its sessions closed).
        let first = {
            let cmd = apply("first", "2");
            let t = target.clone();
            tokio::spawn(async move {
                let r = remote();
                let _ = r.run(&t, &cmd).await;
            })
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !lines().contains("start first") {
            assert!(Instant::now() < deadline, "the first apply did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        first.abort();
        let _ = first.await;

        // A check meanwhile does not wait; the next apply does, and says why.
        let r = remote();
        let check = r
            .run(
                &target,
                &RemoteCommand::script("echo \"check $1\" >> \"$2\"")
                    .arg("x")
                    .arg(log.display().to_string()),
            )
            .await
            .unwrap();
        assert!(check.success(), "{check:?}");
        let second = r.run(&target, &apply("second", "0")).await.unwrap();
        assert!(second.success(), "{who}: {second:?}");
        assert_eq!(
            lines().lines().collect::<Vec<_>>(),
            [
                "start first",
                "check x",
                "end first",
                "start second",
                "end second"
            ],
            "{who}: the second apply ran beside the first"
        );
        assert!(
            String::from_utf8_lossy(&second.stderr)
                .contains("waiting for an earlier vnfkeeper step apply on this host to end"),
            "{who}: {second:?}"
        );
    }
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn trust_on_first_use_then_pinned_then_changed() {
    let sshd = Sshd::start();
    let key = Auth::Key {
        path: sshd.path("client_ed25519"),
        passphrase: None,
    };
    // First contact: the key is learned and returned.
    let r = remote();
    let tofu = sshd.target("root", key.clone(), HostKeyPolicy::TrustOnFirstUse);
    let c = r.connect(&tofu).await.unwrap();
    assert!(c.learned);
    assert!(same_key(&c.host_key, &sshd.host_key()));
    let keygen_fp = String::from_utf8(run_ok(
        Command::new("ssh-keygen")
            .arg("-lf")
            .arg(sshd.path("host_ed25519.pub")),
    ))
    .unwrap();
    assert!(
        keygen_fp.contains(&c.fingerprint),
        "{keygen_fp} vs {}",
        c.fingerprint
    );
    let out = r.run(&tofu, &RemoteCommand::new("true")).await.unwrap();
    assert!(same_key(&out.host_key, &c.host_key));

    // The same pooled session may be used with the pin it produced, not with another one.
    let other = std::fs::read_to_string(sshd.path("other_ed25519.pub")).unwrap();
    let pinned = sshd.target(
        "root",
        key.clone(),
        HostKeyPolicy::Pinned(c.host_key.clone()),
    );
    assert!(
        r.run(&pinned, &RemoteCommand::new("true"))
            .await
            .unwrap()
            .success()
    );
    let wrong = sshd.target("root", key.clone(), HostKeyPolicy::Pinned(other.clone()));
    let err = r
        .run(&wrong, &RemoteCommand::new("true"))
        .await
        .unwrap_err();
    assert!(matches!(err, RemoteError::HostKeyChanged { .. }), "{err:?}");

    // Fresh connections: the learned pin works, another key is HostKeyChanged (permanent).
    let r2 = remote();
    let c2 = r2.connect(&pinned).await.unwrap();
    assert!(!c2.learned);
    let err = r2
        .run(&wrong, &RemoteCommand::new("true"))
        .await
        .unwrap_err();
    match &err {
        RemoteError::HostKeyChanged {
            expected_fingerprint,
            got_fingerprint,
            ..
        } => {
            assert_eq!(expected_fingerprint, &fingerprint(&other).unwrap());
            assert_eq!(got_fingerprint, &c.fingerprint);
        }
        e => panic!("{e:?}"),
    }
    assert!(!err.is_transient());
    assert_eq!(err.kind(), "host_key_changed");
    assert_eq!(err.label(), "VDU-test-root");

    let bad = sshd.target(
        "root",
        key,
        HostKeyPolicy::Pinned("ssh-ed25519 nope".into()),
    );
    let err = remote().connect(&bad).await.unwrap_err();
    assert!(matches!(err, RemoteError::BadPinnedKey { .. }), "{err:?}");
}

/// What cloud-init prints for `key_lines` (fingerprints from `ssh-keygen -lf`, key block).
fn console_of(sshd: &Sshd, pub_files: &[&str]) -> String {
    let mut fps = String::new();
    let mut keys = String::new();
    for f in pub_files {
        let fp = String::from_utf8(run_ok(
            Command::new("ssh-keygen").arg("-lf").arg(sshd.path(f)),
        ))
        .unwrap();
        fps.push_str(&format!("<14>Nov 24 03:20:01 cloud-init: {fp}"));
        keys.push_str(&std::fs::read_to_string(sshd.path(f)).unwrap());
    }
    format!(
        "<14>Nov 24 03:20:01 cloud-init: -----BEGIN SSH HOST KEY FINGERPRINTS-----\r\n{fps}\
         <14>Nov 24 03:20:01 cloud-init: -----END SSH HOST KEY FINGERPRINTS-----\r\n\
         -----BEGIN SSH HOST KEY KEYS-----\n{keys}-----END SSH HOST KEY KEYS-----\n"
    )
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn console_listing_refuses_an_unlisted_key_before_any_password() {
    let sshd = Sshd::start();
    let auth = Auth::Password(Secret::new(PW_PASS.to_string()));

    // The console lists another key: refused during the key exchange, no password sent.
    let other = vnfkeeper_core::console::parse(&console_of(&sshd, &["other_ed25519.pub"])).unwrap();
    let listed = HostKeyPolicy::Listed {
        server_id: "srv-1".into(),
        keys: other,
    };
    let err = remote()
        .connect(&sshd.target(PW_USER, auth.clone(), listed))
        .await
        .unwrap_err();
    let got = fingerprint(&sshd.host_key()).unwrap();
    let want =
        fingerprint(&std::fs::read_to_string(sshd.path("other_ed25519.pub")).unwrap()).unwrap();
    match &err {
        RemoteError::HostKeyNotListed {
            label,
            server_id,
            presented_fingerprint,
            listed_fingerprints,
        } => {
            assert_eq!(label, "VDU-test-vkpw");
            assert_eq!(server_id, "srv-1");
            assert_eq!(presented_fingerprint, &got);
            assert_eq!(listed_fingerprints, &want);
        }
        e => panic!("{e:?}"),
    }
    assert!(!err.is_transient());
    assert!(err.to_string().contains("no password was sent"), "{err}");
    assert!(!all_text(&err).contains(PW_PASS));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = sshd.log();
    assert!(
        !log.contains("method password") && !log.contains("password for"),
        "sshd saw a password attempt: {log}"
    );

    // The console lists the server's key (among others): accepted, returned for pinning, and
    // only then does the password go out.
    let keys = vnfkeeper_core::console::parse(&console_of(
        &sshd,
        &["other_ed25519.pub", "host_ed25519.pub"],
    ))
    .unwrap();
    let listed = HostKeyPolicy::Listed {
        server_id: "srv-1".into(),
        keys,
    };
    let r = remote();
    let t = sshd.target(PW_USER, auth, listed);
    let c = r.connect(&t).await.unwrap();
    assert!(c.learned, "a listed key is returned for the caller to pin");
    assert_eq!(c.fingerprint, got);
    assert!(
        r.run(&t, &RemoteCommand::new("true"))
            .await
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        sshd.log().contains("Accepted password for vkpw"),
        "{}",
        sshd.log()
    );
}

async fn sha256_remote(r: &SshRemote, t: &Target, path: &str) -> String {
    let out = r
        .run(t, &RemoteCommand::new("sha256sum").arg(path))
        .await
        .unwrap();
    assert!(out.success(), "{}", out.stderr_str());
    out.stdout_str()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

async fn stat_remote(r: &SshRemote, t: &Target, path: &str) -> String {
    let out = r
        .run(t, &RemoteCommand::new("stat").args(["-c", "%a %U", path]))
        .await
        .unwrap();
    assert!(out.success(), "{}", out.stderr_str());
    out.stdout_str().trim().to_string()
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn upload_round_trip_overwrite_and_errors() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.root();
    let dir = sshd.path("up");
    std::fs::create_dir(&dir).unwrap();
    let path = format!("{}/file with 'quote'.bin", dir.display());
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
    for (round, mode) in [(0u8, 0o640), (1, 0o600)] {
        let mut data = data.clone();
        data[0] = round;
        r.upload(&t, &path, &data, mode, false).await.unwrap();
        let want = hex(&Sha256::digest(&data));
        assert_eq!(sha256_remote(&r, &t, &path).await, want);
        assert_eq!(stat_remote(&r, &t, &path).await, format!("{mode:o} root"));
    }
    // root + sudo: same path (no sudo needed).
    r.upload(&t, &path, b"small", 0o644, true).await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"small");
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["file with 'quote'.bin".to_string()]);

    let err = r
        .upload(&t, "relative/x", b"", 0o644, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "invalid_command");
    let err = r
        .upload(&t, "/nonexistent-dir-vnfkeeper/x", b"", 0o644, false)
        .await
        .unwrap_err();
    assert!(matches!(err, RemoteError::Sftp { .. }), "{err:?}");
    assert!(!err.is_transient());
}

/// Several files of one step go through one SFTP session: each written in full with its mode,
/// renamed into place (an existing file replaced), nothing left behind; an invalid path among
/// them is refused before any is written.
#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn upload_files_share_one_sftp_session() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.root();
    let dir = sshd.path("many");
    std::fs::create_dir(&dir).unwrap();
    let paths: Vec<String> = (1..=3)
        .map(|n| format!("{}/nfs-pv{n}.yaml", dir.display()))
        .collect();
    std::fs::write(&paths[1], b"old content").unwrap();
    let data: Vec<Vec<u8>> = (1..=3u8).map(|n| vec![n; 70_000]).collect();
    let files: Vec<UploadFile<'_>> = paths
        .iter()
        .zip(&data)
        .zip([0o600, 0o640, 0o644])
        .map(|((path, bytes), mode)| UploadFile { path, bytes, mode })
        .collect();
    let subsystems = || {
        sshd.log()
            .matches("Starting session: subsystem 'sftp'")
            .count()
    };
    let before = subsystems();
    r.upload_files(&t, &files, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(subsystems() - before, 1, "{}", sshd.log());
    for f in &files {
        assert_eq!(std::fs::read(f.path).unwrap(), f.bytes);
        assert_eq!(
            stat_remote(&r, &t, f.path).await,
            format!("{:o} root", f.mode)
        );
    }
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["nfs-pv1.yaml", "nfs-pv2.yaml", "nfs-pv3.yaml"]);

    let bad = [
        UploadFile {
            path: &paths[0],
            bytes: b"new",
            mode: 0o600,
        },
        UploadFile {
            path: "relative/x",
            bytes: b"",
            mode: 0o600,
        },
    ];
    let err = r.upload_files(&t, &bad, false).await.unwrap_err();
    assert_eq!(err.kind(), "invalid_command");
    assert_eq!(std::fs::read(&paths[0]).unwrap(), data[0]);
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn upload_as_user_permission_denied_and_sudo_install() {
    let sshd = Sshd::start();
    let r = remote();
    let dir = sshd.path("etc-like");
    std::fs::create_dir(&dir).unwrap(); // owned by root, 0755: users cannot write
    let path = format!("{}/exports", dir.display());
    let data = b"/srv/nfs 10.0.0.0/24(rw,sync,no_root_squash)\n";
    for (user, pass) in [(PW_USER, PW_PASS), (NOPW_USER, NOPW_PASS)] {
        let t = sshd.password_user(user, pass);
        let err = r.upload(&t, &path, data, 0o644, false).await.unwrap_err();
        assert!(
            matches!(err, RemoteError::SftpPermissionDenied { .. }),
            "{err:?}"
        );
        assert!(!err.is_transient());
        r.upload(&t, &path, data, 0o644, true).await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(stat_remote(&r, &sshd.root(), &path).await, "644 root");
        std::fs::remove_file(&path).unwrap();
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(leftovers.is_empty());
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn sudo_with_password_and_nopasswd_keep_stdin_clean() {
    let sshd = Sshd::start();
    let r = remote();
    for (user, pass) in [(PW_USER, PW_PASS), (NOPW_USER, NOPW_PASS)] {
        let t = sshd.password_user(user, pass);
        let out = r
            .run(&t, &RemoteCommand::new("id").arg("-un"))
            .await
            .unwrap();
        assert_eq!(out.stdout_str(), format!("{user}\n"));
        // The two users really differ: only NOPW_USER may sudo without a password.
        let probe = r
            .run(&t, &RemoteCommand::new("sudo").args(["-n", "true"]))
            .await
            .unwrap();
        assert_eq!(probe.success(), user == NOPW_USER, "{user}: {probe:?}");
        // As root, and the command's stdin is exactly what we gave: no password line in it.
        let out = r
            .run(
                &t,
                &RemoteCommand::script("id -un; cat")
                    .sudo(true)
                    .stdin(b"payload\n".to_vec()),
            )
            .await
            .unwrap();
        assert!(out.success(), "{user}: {}", out.stderr_tail(500, &[]));
        assert_eq!(out.stdout_str(), "root\npayload\n", "{user}");
        assert!(!out.stderr_str().contains(pass));
    }
    // Wrong sudo password: a plain command failure, nothing secret in it.
    let wrong = Secret::new("wrong-Passw0rd".to_string());
    let mut t = sshd.password_user(PW_USER, PW_PASS);
    // The login session of PW_USER is already in the pool (keyed by address, port, user), so
    // only sudo sees this wrong password.
    t.auth = Auth::Password(wrong.clone());
    let out = r
        .run(
            &t,
            &RemoteCommand::new("true")
                .sudo(true)
                .timeout(Duration::from_secs(20)),
        )
        .await
        .unwrap();
    assert!(!out.success());
    let tail = out.stderr_tail(1000, &[&wrong]);
    assert!(tail.contains("incorrect password"), "{tail}");
    assert!(!tail.contains("wrong-Passw0rd"));

    // Key login (no password known): `sudo -n`.
    let key_user = sshd.target(
        NOPW_USER,
        Auth::Key {
            path: sshd.path("client_ed25519"),
            passphrase: None,
        },
        HostKeyPolicy::Pinned(sshd.host_key()),
    );
    let out = r
        .run(&key_user, &RemoteCommand::new("id").arg("-u").sudo(true))
        .await
        .unwrap();
    assert_eq!(out.stdout_str(), "0\n");

    // The password never appears in sshd's log (which records commands at DEBUG1).
    let log = sshd.log();
    assert!(log.contains("Accepted password"), "{log}");
    for s in [PW_PASS, NOPW_PASS] {
        assert!(!log.contains(s));
    }
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn secret_env_is_not_in_any_argv() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.password_user(NOPW_USER, NOPW_PASS);
    let proxy = "http://user:Pr0xy-S3cret@proxy.example:3128";
    let out = r
        .run(
            &t,
            &RemoteCommand::script("printf '%s\\n' \"$https_proxy\"; ps -eo args")
                .env_secret("https_proxy", Secret::new(proxy.to_string()))
                .sudo(true),
        )
        .await
        .unwrap();
    assert!(out.success(), "{}", out.stderr_str());
    let text = out.stdout_str();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(proxy));
    let ps: Vec<&str> = lines.collect();
    assert!(ps.iter().any(|l| l.contains("ps -eo args")), "{ps:?}");
    assert!(ps.iter().all(|l| !l.contains("Pr0xy-S3cret")), "{ps:?}");
    assert!(!sshd.log().contains("Pr0xy-S3cret"));
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn hostile_strings_arrive_byte_for_byte() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.root();
    let hostile = [
        "'; rm -rf / #",
        "$(id)",
        "`id`",
        "line1\nline2\n",
        "ünïcødé ✓ 日本語",
        "\"dq\" 'sq' \\bs\\ $HOME ${PATH} *",
        "-n",
        "",
        "a\tb\rc\u{7f}",
        "!! ^x ~root {a,b}",
    ];
    for s in hostile {
        let out = r
            .run(&t, &RemoteCommand::new("printf").arg("%s").arg(s))
            .await
            .unwrap();
        assert_eq!(out.stdout, s.as_bytes(), "argv {s:?}");
        let out = r
            .run(
                &t,
                &RemoteCommand::script("printf '%s' \"$1\"")
                    .arg(s)
                    .sudo(true),
            )
            .await
            .unwrap();
        assert_eq!(out.stdout, s.as_bytes(), "script {s:?}");
    }
    // And through sudo with a password user.
    let u = sshd.password_user(PW_USER, PW_PASS);
    for s in hostile {
        let out = r
            .run(
                &u,
                &RemoteCommand::new("printf").arg("%s").arg(s).sudo(true),
            )
            .await
            .unwrap();
        assert_eq!(out.stdout, s.as_bytes(), "sudo {s:?}");
    }
    let err = r
        .run(&t, &RemoteCommand::new("echo").arg("nul\0byte"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "invalid_command");
    assert!(!err.is_transient());
}

#[tokio::test]
async fn connection_refused_is_transient() {
    let port = free_port(); // bound then released: nothing listens there
    let t = Target {
        address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
        username: "root".into(),
        auth: Auth::Password(Secret::new("Refused-S3cret".into())),
        host_key: HostKeyPolicy::TrustOnFirstUse,
        label: "VDU1-0".into(),
    };
    let err = remote()
        .run(&t, &RemoteCommand::new("true"))
        .await
        .unwrap_err();
    assert!(matches!(err, RemoteError::Connect { .. }), "{err:?}");
    assert!(err.is_transient());
    assert_eq!(err.kind(), "connect");
    assert!(!all_text(&err).contains("Refused-S3cret"));
    assert!(all_text(&err).contains("VDU1-0"));
}

#[tokio::test]
async fn connect_timeout_is_transient() {
    // A listener that never speaks SSH: TCP connects, the SSH banner never comes.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = Target {
        address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
        username: "root".into(),
        auth: Auth::Password(Secret::new("x".into())),
        host_key: HostKeyPolicy::TrustOnFirstUse,
        label: "VDU1-1".into(),
    };
    let r = SshRemote::new(SshConfig {
        connect_timeout: Duration::from_millis(500),
        ..SshConfig::default()
    });
    let err = r.connect(&t).await.unwrap_err();
    assert!(matches!(err, RemoteError::ConnectTimeout { .. }), "{err:?}");
    assert!(err.is_transient());
    drop(listener);
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn wrong_credentials_are_permanent_and_secret_free() {
    let sshd = Sshd::start();
    let r = remote();
    // A key that is not authorized.
    let t = sshd.target(
        "root",
        Auth::Key {
            path: sshd.path("other_ed25519"),
            passphrase: None,
        },
        HostKeyPolicy::Pinned(sshd.host_key()),
    );
    let err = r.run(&t, &RemoteCommand::new("true")).await.unwrap_err();
    assert!(
        matches!(
            err,
            RemoteError::AuthFailed {
                method: "publickey",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.is_transient());

    // A wrong password.
    let t = sshd.password_user(PW_USER, "Wr0ng-S3cret-pw");
    let err = r.run(&t, &RemoteCommand::new("true")).await.unwrap_err();
    assert!(matches!(err, RemoteError::AuthFailed { .. }), "{err:?}");
    assert!(!err.is_transient());
    assert!(!all_text(&err).contains("Wr0ng-S3cret-pw"));
    assert!(!format!("{t:?}").contains("Wr0ng-S3cret-pw"));

    // An encrypted key with the wrong passphrase.
    let enc = sshd.path("enc_ed25519");
    run_ok(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "right-Passphrase", "-f"])
            .arg(&enc),
    );
    let t = sshd.target(
        "root",
        Auth::Key {
            path: enc,
            passphrase: Some(Secret::new("wr0ng-Passphrase".into())),
        },
        HostKeyPolicy::Pinned(sshd.host_key()),
    );
    let err = r.run(&t, &RemoteCommand::new("true")).await.unwrap_err();
    assert!(matches!(err, RemoteError::KeyFile { .. }), "{err:?}");
    assert!(!err.is_transient());
    let text = all_text(&err);
    assert!(!text.contains("wr0ng-Passphrase") && !text.contains("right-Passphrase"));
    assert!(!sshd.log().contains("Wr0ng-S3cret-pw"));
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn password_with_newline_is_refused_for_sudo() {
    let sshd = Sshd::start();
    let r = remote();
    let mut t = sshd.password_user(PW_USER, PW_PASS);
    assert!(
        r.run(&t, &RemoteCommand::new("true"))
            .await
            .unwrap()
            .success()
    );
    t.auth = Auth::Password(Secret::new("multi\nline-S3cret".into()));
    let err = r
        .run(&t, &RemoteCommand::new("true").sudo(true))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "invalid_command");
    assert!(!all_text(&err).contains("line-S3cret"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn remote_is_object_safe() {
    fn takes(_: Arc<dyn Remote>) {}
    takes(Arc::new(remote()));
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn dropped_session_is_transient_and_the_pool_reconnects() {
    let sshd = Sshd::start();
    let r = remote();
    let t = sshd.root();
    assert!(
        r.run(&t, &RemoteCommand::new("true"))
            .await
            .unwrap()
            .success()
    );
    // Kill our own session's sshd process (the parent of `timeout`, which is our shell's parent).
    let err = r
        .run(
            &t,
            &RemoteCommand::script(
                "kill -KILL \"$(ps -o ppid= -p \"$PPID\" | tr -d ' ')\"; sleep 5",
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "session_lost", "{err:?}");
    assert!(err.is_transient());
    let out = r
        .run(&t, &RemoteCommand::new("echo").arg("back"))
        .await
        .unwrap();
    assert_eq!(out.stdout_str(), "back\n");
    assert_eq!(r.pool().handshakes(), 2);
}

#[tokio::test]
#[ignore = "needs root (starts sshd)"]
async fn unread_stdin_does_not_hang_and_client_deadline_holds() {
    let sshd = Sshd::start();
    let r = SshRemote::new(SshConfig {
        client_grace: Duration::from_secs(1),
        ..SshConfig::default()
    });
    let t = sshd.root();
    // 8 MiB of stdin that nobody reads: the command's exit ends the exchange.
    let started = Instant::now();
    let out = r
        .run(&t, &RemoteCommand::new("true").stdin(vec![b'x'; 8 << 20]))
        .await
        .unwrap();
    assert!(out.success());
    assert!(started.elapsed() < Duration::from_secs(10));

    // The remote wrapper cannot act when it is stopped: the client deadline (1 s + KILL_AFTER +
    // 1 s grace) ends the call. `timeout` leads its own process group (timeout, sh, sleep); the
    // script records that group so the test kills exactly it afterwards.
    let pgid_file = sshd.path("stopped.pgid");
    let started = Instant::now();
    let err = r
        .run(
            &t,
            &RemoteCommand::script("echo \"$PPID\" > \"$1\"; kill -STOP \"$PPID\"; sleep 60")
                .arg(pgid_file.to_str().unwrap())
                .timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    let took = started.elapsed();
    let pgid = std::fs::read_to_string(&pgid_file)
        .unwrap()
        .trim()
        .to_string();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .status();
    assert!(
        matches!(
            err,
            RemoteError::CommandTimeout {
                side: TimeoutSide::Client,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(
        took >= Duration::from_secs(12) && took < Duration::from_secs(20),
        "{took:?}"
    );
}

/// Against a testbed namespace host (`tests/testbed`, the same hosts the engine tests use):
/// password login `ubuntu`/`ubuntu` with trust on first use, sudo (NOPASSWD there) with a
/// password target, a real block device, an upload with sudo, the command log, and the faults
/// "new host key", "sshd stopped" and "sessions hang".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn testbed_host_password_sudo_volume_and_faults() {
    use testbed::hosts::{FarmConfig, HostFarm, HostSpec, VolumeSpec, down_all};
    const PREFIX: &str = "vkrm";

    /// Removes every farm leftover with our prefix, also on panic.
    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::thread::spawn(|| {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(async { down_all(PREFIX).await })
            })
            .join();
        }
    }

    let _ = down_all(PREFIX).await;
    let _cleanup = Cleanup;
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("vk-remote-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = HostFarm::new(FarmConfig {
        state_dir: dir.path().join("hosts"),
        prefix: PREFIX.into(),
        bridge_cidr: "10.231.61.1/24".parse().unwrap(),
    })
    .await
    .expect("farm");
    let info = farm
        .start(HostSpec {
            server_id: "srv-remote".into(),
            hostname: "storage0".into(),
            ip: "10.231.61.20".parse().unwrap(),
            cluster: "stack-remote".into(),
            volumes: vec![VolumeSpec {
                volume_id: "vol-remote".into(),
                device: "/dev/vdb".into(),
                size_gib: 1,
            }],
            profile: testbed::hosts::HostProfile::Debian,
        })
        .await
        .expect("host");
    let mut t = Target {
        address: IpAddr::V4(info.ip),
        port: 22,
        username: "ubuntu".into(),
        auth: Auth::Password(Secret::new("ubuntu".into())),
        host_key: HostKeyPolicy::TrustOnFirstUse,
        label: "storage_server-0".into(),
    };
    let r = remote();
    let c = r.connect(&t).await.unwrap();
    assert!(c.learned);
    assert!(same_key(&c.host_key, &info.host_key));
    t.host_key = HostKeyPolicy::Pinned(c.host_key.clone());

    // Check, apply, check: mkfs only when blkid finds no filesystem.
    let blkid = RemoteCommand::new("blkid")
        .args(["-o", "value", "-s", "TYPE", "/dev/vdb"])
        .sudo(true)
        .step("volume.check");
    let out = r.run(&t, &blkid).await.unwrap();
    assert_eq!(out.exit_status, Some(2), "no filesystem yet: {out:?}");
    let mkfs = RemoteCommand::new("mkfs.ext4")
        .args(["-q", "/dev/vdb"])
        .sudo(true)
        .timeout(Duration::from_secs(120))
        .step("volume.mkfs");
    let out = r.run(&t, &mkfs).await.unwrap();
    assert!(out.success(), "{}", out.stderr_tail(500, &[]));
    let out = r.run(&t, &blkid).await.unwrap();
    assert_eq!(out.stdout_str().trim(), "ext4");

    // Upload with sudo into a root-owned directory.
    let exports = b"/srv/nfs 10.231.61.0/24(rw,sync,no_root_squash)\n";
    r.upload(&t, "/etc/exports", exports, 0o644, true)
        .await
        .unwrap();
    assert_eq!(
        farm.read_file("srv-remote", "/etc/exports").await.unwrap(),
        exports
    );
    let out = r
        .run(
            &t,
            &RemoteCommand::new("stat").args(["-c", "%a %U", "/etc/exports"]),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout_str().trim(), "644 root");
    assert_eq!(r.pool().handshakes(), 1);

    // The host recorded the commands; the password is in none of them.
    let log = farm.command_log("srv-remote").await.unwrap();
    assert!(
        log.iter().any(|l| l.contains("mkfs.ext4 -q /dev/vdb")),
        "{log:?}"
    );
    assert!(log.iter().all(|l| !l.contains("ubuntu\n")));
    assert_eq!(
        farm.mkfs_log("srv-remote").await.unwrap().len(),
        1,
        "mkfs ran exactly once"
    );

    // Fault: new host key. A new session with the old pin is refused (permanent).
    farm.rotate_host_key("srv-remote").await.unwrap();
    let err = remote()
        .run(&t, &RemoteCommand::new("true"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "host_key_changed", "{err:?}");
    assert!(!err.is_transient());
    t.host_key = HostKeyPolicy::Pinned(farm.host_key("srv-remote").unwrap());

    // Fault: sshd stopped → refused (transient); back after start.
    farm.stop_sshd("srv-remote").await.unwrap();
    let err = remote()
        .run(&t, &RemoteCommand::new("true"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "connect", "{err:?}");
    assert!(err.is_transient());
    farm.start_sshd("srv-remote").await.unwrap();

    // Fault: sessions hang after login → the client deadline ends the call (transient).
    farm.set_hang("srv-remote", true).await.unwrap();
    let hung = SshRemote::new(SshConfig {
        client_grace: Duration::from_secs(1),
        ..SshConfig::default()
    });
    let err = hung
        .run(
            &t,
            &RemoteCommand::new("true").timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RemoteError::CommandTimeout {
                side: TimeoutSide::Client,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
    hung.close().await;
    farm.set_hang("srv-remote", false).await.unwrap();
    let out = remote()
        .run(&t, &RemoteCommand::new("hostname"))
        .await
        .unwrap();
    assert_eq!(out.stdout_str().trim(), "storage0");

    r.close().await;
    farm.shutdown().await.unwrap();
}
