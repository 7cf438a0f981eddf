//! The read-only status page (`[metrics] status_page = true`) opened in Debian's headless
//! Chromium (package `chromium`, installed here when missing: the test fails, never skips,
//! without it) while a daemon runs over the testbed cloud: an INSTANTIATE, every server in
//! ERROR and a reconcile pass that holds back their heal (max_unhealthy), and an operator HEAL
//! that stops in FAILED_TEMP. The DOM Chromium renders (`--dump-dom`) shows the VNF, its state,
//! the VNFCs' health, the failed HEAL and the timeline SVG with its operation bars and marks;
//! `--screenshot` takes a picture of the VNF's page (written to `$VNFKEEPER_STATUS_SCREENSHOT`
//! too when set: README's `docs/status-page.png` is made that way). The page answers only GET,
//! escapes what it shows and 404s an unknown instance.

use crate::{fleet_scenario, support};

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};

/// Runs headless Chromium on `url` with `args` (a profile of its own under `dir`, 90 s at
/// most); returns its stdout. Panics when it fails.
fn chromium(dir: &Path, args: &[&str], url: &str) -> String {
    let out = Command::new("timeout")
        .args(["--kill-after=5", "90", "chromium"])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1100,1000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium").display()
        ))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {args:?} {url}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs Debian's chromium (installed when missing; needs root for that)"]
async fn status_page_renders_the_fleet_and_a_vnf_timeline_in_chromium() {
    testbed::hosts::install_packages(&["chromium", "fonts-dejavu-core"])
        .await
        .expect("Debian's chromium package cannot be installed");

    let install = Install::new();
    let (tb, daemon, port) =
        fleet_scenario::daemon_with_metrics(&install, "status_page = true\n").await;
    let base = format!("http://127.0.0.1:{port}");

    let vnf = fleet_scenario::instantiate_plain(&install);
    // Every server in ERROR: more than max_unhealthy, so reconcile heals none.
    let vnfcs = fleet_scenario::every_server_in_error(&install, &tb).await;
    // The pass runs in the daemon: wait until it counts every VNFC unhealthy.
    assert!(
        wait_until(Duration::from_secs(60), || {
            let out = install.cli(&["status", &vnf, "-o", "json"]);
            serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|d| {
                d["vnfcs"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().all(|c| c["unhealthySince"].is_string()))
            })
        }),
        "reconcile counted no failure"
    );
    // An operator HEAL that Heat refuses stops in FAILED_TEMP (exit 3).
    let heal_id =
        fleet_scenario::heal_refused_by_heat(&install, &tb, &vnf, vnfcs[0]["id"].as_str().unwrap());

    // HTTP: GET only, the page's headers, an unknown or hostile id is a 404 that escapes it.
    let client = reqwest::Client::new();
    let r = client.get(format!("{base}/status")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'")
    );
    for (method, path) in [
        (reqwest::Method::POST, "/status"),
        (reqwest::Method::PUT, "/status"),
        (reqwest::Method::DELETE, "/status/vnf"),
    ] {
        let r = client
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{method} {path}");
    }
    let r = client
        .get(format!(
            "{base}/status/vnf?id=%3Cscript%3Ealert(1)%3C/script%3E"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body = r.text().await.unwrap();
    assert!(
        !body.contains("<script>") && body.contains("&lt;script&gt;"),
        "{body}"
    );
    let r = client
        .get(format!("{base}/status/vnf?id={vnf}&hours=9999"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // The fleet in Chromium.
    let dir = install.dir.path();
    let fleet = chromium(dir, &["--dump-dom"], &format!("{base}/status"));
    for needle in [
        format!("data-vnf=\"{vnf}\""),
        "<td class=\"state\">INSTANTIATED</td>".to_owned(),
        format!(
            "<td id=\"unhealthy-vnfcs\" class=\"bad\">{}</td>",
            vnfcs.len()
        ),
        "<td id=\"failed-temp\" class=\"bad\">1</td>".to_owned(),
        heal_id.clone(),
        ">FAILED_TEMP</td>".to_owned(),
    ] {
        assert!(
            fleet.contains(&needle),
            "fleet page lacks {needle:?}:\n{fleet}"
        );
    }
    for v in &vnfcs {
        let id = v["id"].as_str().unwrap();
        assert!(fleet.contains(id), "fleet page lacks VNFC {id}");
    }

    // One VNF's page: its facts, VNFCs and the timeline picture.
    let url = format!("{base}/status/vnf?id={vnf}");
    let page = chromium(dir, &["--dump-dom"], &url);
    assert!(
        page.contains(&format!("VNF instance {vnf}")),
        "VNF page lacks its title:\n{page}"
    );
    assert!(
        page.contains("<dd id=\"state\">INSTANTIATED</dd>"),
        "{page}"
    );
    let svg_at = page
        .find("<svg id=\"timeline\"")
        .unwrap_or_else(|| panic!("no timeline SVG:\n{page}"));
    let svg = &page[svg_at..page[svg_at..].find("</svg>").unwrap() + svg_at];
    for lane in [
        "operations",
        "steps",
        "heals",
        "faults",
        "probe verdicts",
        "pauses",
    ] {
        assert!(svg.contains(&format!(">{lane}</text>")), "lane {lane}");
    }
    // A bar per operation (the INSTANTIATE and the HEAL), marks of their state changes, the
    // steps, and the HEAL's FAILED_TEMP.
    let ops = install.ops_json();
    for o in &ops {
        let id = o["id"].as_str().unwrap();
        assert!(
            svg.contains(&format!("data-operation=\"{id}\"")),
            "no bar for {id}:\n{svg}"
        );
    }
    for kind in ["STATE_CHANGED", "REQUEST_ACCEPTED", "STEP_DONE"] {
        assert!(
            svg.contains(&format!("data-kind=\"{kind}\"")),
            "no {kind} mark:\n{svg}"
        );
    }
    assert!(svg.contains("FAILED_TEMP"), "{svg}");
    assert!(page.contains("<table id=\"entries\">"), "{page}");

    // The screenshot.
    let png = dir.join("status-page.png");
    chromium(dir, &[&format!("--screenshot={}", png.display())], &url);
    let bytes = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
    if let Some(to) = std::env::var_os("VNFKEEPER_STATUS_SCREENSHOT") {
        std::fs::copy(&png, to).unwrap();
    }

    drop(daemon);
    tb.shutdown().await;
}
