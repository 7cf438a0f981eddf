//! Slow and hostile clients of the `[tacker]` endpoint (no cloud): 1,000 connections that send
//! half a request and stop, or (with TLS) never start the handshake, do not keep a valid
//! notification from its answer; 5,000 requests without credentials write a bounded number of
//! WARN lines whose counts add up to 5,000.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Install, free_port};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};

const USER: &str = "tacker-slow";
const PASSWORD: &str = "Sl0w-Cl1ents!pw";
/// Slow connections opened before the valid notification.
const SLOW: usize = 1_000;
/// Source addresses they come from (127.0.0.2 …), fewer than `MAX_PER_SOURCE` each.
const SOURCES: usize = 8;

/// Writes `[tacker]` (plus `extra` keys) on a free port into the installation's config and
/// starts the daemon; returns it and the port.
fn daemon(install: &Install, extra: &str) -> (support::Daemon, u16) {
    let port = free_port();
    let pw = install.dir.path().join("tacker.password");
    std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[reconcile]\nenabled = false\n\n[tacker]\nlisten = \"127.0.0.1:{port}\"\n\
         callback_path = \"/vnfkeeper/notifications\"\nusername = \"{USER}\"\n\
         password_file = \"{}\"\n{extra}",
        pw.display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let check = install.cli(&["config", "check"]);
    assert!(check.status.success(), "config check failed");
    let d = install.start();
    d.wait_for_log("Tacker notification endpoint", Duration::from_secs(10));
    (d, port)
}

fn notification(id: &str) -> Value {
    json!({
        "id": id,
        "notificationType": "VnfLcmOperationOccurrenceNotification",
        "subscriptionId": "sub-1",
        "timeStamp": "2026-11-27T02:00:00Z",
        "notificationStatus": "RESULT",
        "operationState": "COMPLETED",
        "vnfInstanceId": "vnf-1",
        "operation": "HEAL",
        "isAutomaticInvocation": false,
        "vnfLcmOpOccId": format!("occ-{id}"),
        "_links": {
            "vnfInstance": {"href": "http://tacker/vnflcm/v2/vnf_instances/vnf-1"},
            "subscription": {"href": "http://tacker/vnflcm/v2/subscriptions/sub-1"},
            "vnfLcmOpOcc": {"href": format!("http://tacker/vnflcm/v2/vnf_lcm_op_occs/occ-{id}")}
        }
    })
}

/// `SLOW` connections to `port` from 127.0.0.2 … 127.0.0.(1 + SOURCES), each having sent
/// `first` (nothing when empty) and nothing more; held until dropped.
async fn slow_connections(port: u16, first: &'static [u8]) -> Vec<TcpStream> {
    let conns = futures::future::join_all((0..SLOW).map(|i| async move {
        let socket = TcpSocket::new_v4().unwrap();
        let source = format!("127.0.0.{}:0", 2 + i % SOURCES);
        socket.bind(source.parse().unwrap()).unwrap();
        let mut s = socket
            .connect(format!("127.0.0.1:{port}").parse().unwrap())
            .await
            .expect("slow connection");
        if !first.is_empty() {
            s.write_all(first).await.unwrap();
        }
        s
    }))
    .await;
    assert_eq!(conns.len(), SLOW);
    conns
}

/// Posts a valid notification with `client` to `url`; its status and how long it took.
async fn valid(client: &reqwest::Client, url: &str, id: &str) -> (Option<u16>, Duration) {
    let t = Instant::now();
    let r = client
        .post(url)
        .basic_auth(USER, Some(PASSWORD))
        .json(&notification(id))
        .timeout(Duration::from_secs(30))
        .send()
        .await;
    (r.ok().map(|r| r.status().as_u16()), t.elapsed())
}

/// Raises this process's open-file limit to its hard limit (the daemon inherits it).
fn raise_nofile() {
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let want: u64 = hard.parse().unwrap_or(u64::MAX);
    assert!(
        want >= (SLOW as u64) + 256,
        "the hard RLIMIT_NOFILE ({hard}) is too low for {SLOW} connections"
    );
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if lim.current.is_some_and(|c| c < (SLOW as u64) + 256) {
        rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        )
        .expect("raise RLIMIT_NOFILE");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_notification_is_answered_under_1000_slow_connections_plain_and_tls() {
    raise_nofile();

    // Plain HTTP: each slow client sends a request line and one header, then nothing.
    let install = Install::new();
    let (mut d, port) = daemon(&install, "");
    let url = format!("http://127.0.0.1:{port}/vnfkeeper/notifications");
    let slow = slow_connections(
        port,
        b"POST /vnfkeeper/notifications HTTP/1.1\r\nHost: x\r\n",
    )
    .await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let (status, took) = valid(&client, &url, "plain-1").await;
    eprintln!(
        "plain: valid notification under {SLOW} slow connections answered {status:?} in {took:?}"
    );
    assert_eq!(status, Some(204), "{}", d.log_text());
    drop(slow);
    d.stop();

    // TLS: the slow clients open TCP connections and never start the handshake.
    let install = Install::new();
    let (ca, cert, key, _) = crate::tacker_oauth_tls::certificates(&install.dir.path().join("pki"));
    let (mut d, port) = daemon(
        &install,
        &format!(
            "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    );
    let url = format!("https://127.0.0.1:{port}/vnfkeeper/notifications");
    let slow = slow_connections(port, b"").await;
    let client = tls_client(&ca);
    let (status, took) = valid(&client, &url, "tls-1").await;
    eprintln!(
        "TLS: valid notification under {SLOW} silent connections answered {status:?} in {took:?}"
    );
    assert_eq!(status, Some(204), "{}", d.log_text());
    drop(slow);
    d.stop();
    assert!(
        !d.log_text().contains(PASSWORD),
        "the password reached the log"
    );
}

/// An HTTPS client trusting only the test CA at `ca`.
fn tls_client(ca: &Path) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_unauthenticated_requests_write_a_bounded_number_of_warn_lines() {
    const N: usize = 5_000;
    let install = Install::new();
    let (mut d, port) = daemon(&install, "");
    let url = format!("http://127.0.0.1:{port}/vnfkeeper/notifications");
    let client = reqwest::Client::new();
    let body = serde_json::to_vec(&notification("unauthenticated")).unwrap();
    let statuses: Vec<u16> = futures::future::join_all((0..16).map(|s| {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        async move {
            let mut out = Vec::new();
            for _ in (s..N).step_by(16) {
                let r = client
                    .post(&url)
                    .basic_auth(USER, Some("wrong"))
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                out.push(r.status().as_u16());
            }
            out
        }
    }))
    .await
    .into_iter()
    .flatten()
    .collect();
    assert_eq!(statuses.len(), N);
    assert!(statuses.iter().all(|s| *s == 401));

    // Every refusal is counted in some line: a line written for a refusal stands for it and the
    // `suppressed` ones before it; a summary line ("… more in the last 10 s") for its
    // `suppressed` only. The last summary comes within the interval (plus the flush's second).
    let counted = |log: &str| -> (usize, u64) {
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("missing or wrong credentials"))
            .collect();
        let suppressed: u64 = lines
            .iter()
            .map(|l| {
                l.split("suppressed=")
                    .nth(1)
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum();
        let summaries = lines
            .iter()
            .filter(|l| l.contains("more in the last"))
            .count();
        (lines.len(), (lines.len() - summaries) as u64 + suppressed)
    };
    let all_counted = support::wait_until(Duration::from_secs(25), || {
        counted(&d.log_text()).1 == N as u64
    });
    let log = d.log_text();
    let (lines, total) = counted(&log);
    assert!(
        all_counted,
        "{total} of {N} refusals counted in {lines} lines"
    );
    assert!(lines <= 6, "{lines} WARN lines for {N} refusals");
    let warn_lines = log.lines().filter(|l| l.contains("WARN")).count();
    assert!(warn_lines <= 6, "{warn_lines} WARN lines in all");
    d.stop();
    assert!(!d.log_text().contains(PASSWORD));
}
