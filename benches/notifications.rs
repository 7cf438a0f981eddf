//! Tacker notification endpoint benchmark: notifications accepted per second and the time to
//! the 204 (p50, p99) with 1, 10 and 100 concurrent senders, each posting its share of N distinct,
//! valid, Basic-authenticated `VnfLcmOperationOccurrenceNotification`s (a new connection each: the
//! endpoint serves one request per connection) to the release daemon's `[tacker]` endpoint, which
//! checks, commits and answers each. The same-run baseline is the daemon's own HTTP server code
//! (`daemon::http::Server`) in this process answering 204 to the same requests without checking
//! or storing anything. Targets (issue "Tacker companion mode"): at 100 concurrent senders ≥ 2,000
//! notifications/s and p99 ≤ 20 ms.
//!
//! Run: `cargo bench --bench notifications` (N = 4,000 per level; `-- --quick`: 1,000).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Instant;

use serde_json::json;

mod support;
mod table;

const VK: &str = env!("CARGO_BIN_EXE_vnfkeeper");
const PATH: &str = "/vnfkeeper/notifications";
const USER: &str = "tacker";
const PASSWORD: &str = "bench-password";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn body(level: usize, i: usize) -> Vec<u8> {
    let occ = format!("occ-{level}-{i}");
    serde_json::to_vec(&json!({
        "id": format!("n-{level}-{i}"),
        "notificationType": "VnfLcmOperationOccurrenceNotification",
        "subscriptionId": "sub-bench",
        "timeStamp": "2026-11-26T03:00:00Z",
        "notificationStatus": "RESULT",
        "operationState": "COMPLETED",
        "vnfInstanceId": format!("vnf-{}", i % 50),
        "operation": "HEAL",
        "isAutomaticInvocation": true,
        "vnfLcmOpOccId": occ,
        "_links": {
            "vnfInstance": {"href": "http://tacker:9890/vnflcm/v2/vnf_instances/vnf"},
            "subscription": {"href": "http://tacker:9890/vnflcm/v2/subscriptions/sub-bench"},
            "vnfLcmOpOcc": {"href": format!("http://tacker:9890/vnflcm/v2/vnf_lcm_op_occs/{occ}")}
        }
    }))
    .unwrap()
}

/// (notifications/s, p50 ms, p99 ms) of `n` posts to `url` from `senders` concurrent senders.
async fn run(url: &str, level: usize, n: usize, senders: usize) -> (f64, f64, f64) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let per = n.div_ceil(senders);
    let start = Instant::now();
    let tasks: Vec<_> = (0..senders)
        .map(|s| {
            let client = client.clone();
            let url = url.to_owned();
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(per);
                for i in (s * per)..((s + 1) * per).min(n) {
                    let b = body(level, i);
                    let t = Instant::now();
                    let r = client
                        .post(&url)
                        .basic_auth(USER, Some(PASSWORD))
                        .header("content-type", "application/json")
                        .body(b)
                        .send()
                        .await
                        .expect("post");
                    assert_eq!(r.status().as_u16(), 204, "{url}");
                    times.push(t.elapsed());
                }
                times
            })
        })
        .collect();
    let mut times = Vec::with_capacity(n);
    for t in tasks {
        times.extend(t.await.unwrap());
    }
    let wall = start.elapsed();
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    (
        times.len() as f64 / wall.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
    )
}

fn main() {
    let quick = table::quick();
    let n: usize = table::arg("n").unwrap_or(if quick { 1_000 } else { 4_000 });
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    let (_, db, config) = support::write_config(dir.path(), &packages);
    let pw = dir.path().join("tacker.password");
    std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = free_port();
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[reconcile]\nenabled = false\n\n[tacker]\nlisten = \"127.0.0.1:{port}\"\n\
         callback_path = \"{PATH}\"\nusername = \"{USER}\"\npassword_file = \"{}\"\n",
        pw.display()
    ));
    std::fs::write(&config, text).unwrap();
    let daemon = support::Daemon::start(Path::new(VK), &config, dir.path());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let base_port = free_port();
    let baseline = rt.block_on(async {
        let router = axum::Router::new().route(
            PATH,
            axum::routing::post(|| async { axum::http::StatusCode::NO_CONTENT }),
        );
        vnfkeeper::daemon::http::Server::start(
            format!("127.0.0.1:{base_port}").parse().unwrap(),
            router,
            "baseline",
            None,
        )
        .await
        .unwrap()
    });
    let url = format!("http://127.0.0.1:{port}{PATH}");
    let base_url = format!("http://127.0.0.1:{base_port}{PATH}");
    println!(
        "notifications: {n} per level to the daemon's [tacker] endpoint (checked, committed), \
         the same to a 204-only endpoint on the same server code as the baseline"
    );
    for (level, senders) in [1usize, 10, 100].into_iter().enumerate() {
        let (rate, p50, p99) = rt.block_on(run(&url, level, n, senders));
        let (brate, bp50, bp99) = rt.block_on(run(&base_url, 100 + level, n, senders));
        println!(
            "  {senders:>3} senders: {rate:>7.0}/s p50 {p50:.2} ms p99 {p99:.2} ms \
             (baseline {brate:.0}/s p50 {bp50:.2} ms p99 {bp99:.2} ms; rate {:.2}x the baseline's)",
            rate / brate
        );
        let last = senders == 100;
        table::row(
            &format!("notifications: accepted per second, {senders} concurrent senders"),
            rate,
            "1/s",
            if last {
                table::Target::AtLeast(2000.0)
            } else {
                table::Target::None
            },
            Some(table::SameRun {
                baseline: brate,
                ratio: rate / brate,
                target: table::Target::None,
            }),
        );
        table::row(
            &format!("notifications: p99 time to 204, {senders} concurrent senders"),
            p99,
            "ms",
            if last {
                table::Target::AtMost(20.0)
            } else {
                table::Target::None
            },
            Some(table::SameRun {
                baseline: bp99,
                ratio: p99 / bp99,
                target: table::Target::None,
            }),
        );
    }
    baseline.stop();
    let _ = daemon.sigterm();
    // Every notification the daemon answered is in its database, once.
    let store = vnfkeeper::store::Store::open(&db).unwrap();
    let rows = store.reader().tacker_notifications(None).unwrap().len();
    assert_eq!(rows, 3 * n, "each accepted notification recorded once");
    println!("  {rows} notifications recorded (3 × {n})");
}
