//! Debian's Prometheus server (package `prometheus`, installed here when missing: the test fails,
//! never skips, without it) scrapes a running daemon over the testbed cloud while the daemon is
//! driven through an INSTANTIATE, a reconcile pass that holds back the heal of VNFCs in ERROR
//! (max_unhealthy) and an operator HEAL that stops in FAILED_TEMP. Prometheus loads the example
//! alert rules (`packaging/prometheus/vnfkeeper-alerts.yml`); every alert's expression and every
//! query of the Grafana dashboard (`packaging/grafana/vnfkeeper.json`) is evaluated through
//! Prometheus's HTTP API and returns series, and the two state alerts are pending.

use crate::{fleet_scenario, support};

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Install, free_port, wait_until};

const ALERT_RULES: &str = "packaging/prometheus/vnfkeeper-alerts.yml";
const DASHBOARD: &str = "packaging/grafana/vnfkeeper.json";

/// A Prometheus server on loopback with its own data directory; killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts `prometheus` scraping `target` every second (job `vnfkeeper`) with `rules`,
    /// storing under `dir`; waits until it is ready.
    fn start(dir: &std::path::Path, target: &str, rules: &std::path::Path) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: vnfkeeper\n    static_configs:\n      - targets: ['{target}']\n",
                rules.display()
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let ready = format!("{}/-/ready", p.base);
        assert!(
            wait_until(Duration::from_secs(60), || answers_200(&ready)),
            "prometheus did not become ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        p
    }

    /// `GET /api/v1/<path>` with `params`: the answer's `data`, asserting status `success`.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url = reqwest::Url::parse_with_params(&format!("{}/api/v1/{path}", self.base), params)
            .unwrap();
        let text = reqwest::get(url).await.unwrap().text().await.unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["status"], "success", "{path} {params:?}: {text}");
        v["data"].clone()
    }

    /// The instant query `expr`'s result (a vector: its series).
    async fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api("query", &[("query", expr)]).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// Queries `expr` until it returns series (60 s at most); returns them.
    async fn until_series(&self, expr: &str) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.query(expr).await;
            if !r.is_empty() || Instant::now() > until {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Whether `GET url` answers 200, over a plain TCP connection (for `wait_until`, which is not
/// async).
fn answers_200(url: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let url = reqwest::Url::parse(url).unwrap();
    let host = url.host_str().unwrap();
    let Ok(mut s) = std::net::TcpStream::connect((host, url.port_or_known_default().unwrap()))
    else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!("GET {} HTTP/1.0\r\nHost: {host}\r\n\r\n", url.path());
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

/// Every alert rule of the example file: (name, expression).
fn alert_rules(text: &str) -> Vec<(String, String)> {
    let doc: Value = serde_yaml_ng::from_str(text).unwrap();
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_owned(),
                r["expr"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every query of the dashboard: (panel title, expression with Grafana's `$__rate_interval`
/// as 1m).
fn dashboard_queries(text: &str) -> Vec<(String, String)> {
    let d: Value = serde_json::from_str(text).unwrap();
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap().to_owned();
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |t| {
                    (
                        title.clone(),
                        t["expr"]
                            .as_str()
                            .unwrap()
                            .replace("$__rate_interval", "1m"),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs Debian's prometheus server (installed when missing; needs root for that)"]
async fn prometheus_evaluates_every_alert_and_dashboard_query() {
    testbed::hosts::install_packages(&["prometheus"])
        .await
        .expect("Debian's prometheus package cannot be installed");
    let root = support::repo_root();
    let rules_path = root.join(ALERT_RULES);
    let rules = alert_rules(&std::fs::read_to_string(&rules_path).unwrap());
    let queries = dashboard_queries(&std::fs::read_to_string(root.join(DASHBOARD)).unwrap());
    assert!(
        rules.len() >= 4 && queries.len() >= 12,
        "{rules:?} {queries:?}"
    );

    let install = Install::new();
    let (tb, daemon, port) = fleet_scenario::daemon_with_metrics(&install, "").await;

    let prom_dir = install.dir.path().join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let prom = Prometheus::start(&prom_dir, &format!("127.0.0.1:{port}"), &rules_path);
    let up = prom.until_series("up{job=\"vnfkeeper\"} == 1").await;
    assert_eq!(up.len(), 1, "prometheus does not scrape the daemon");
    let loaded = prom.api("rules", &[]).await;
    let loaded: Vec<&Value> = loaded["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert_eq!(loaded.len(), rules.len(), "{loaded:?}");
    for r in &loaded {
        assert_eq!(r["health"], "ok", "{r}");
    }
    // No reconcile pass yet: the "no pass" alert's expression holds now.
    let (_, no_pass) = rules
        .iter()
        .find(|(n, _)| n == "VnfkeeperNoSuccessfulReconcilePass")
        .unwrap();
    assert!(!prom.query(no_pass).await.is_empty(), "{no_pass}");

    let vnf = fleet_scenario::instantiate_plain(&install);
    // Every server in ERROR: more than max_unhealthy (40 %), so reconcile heals none.
    let vnfcs = fleet_scenario::every_server_in_error(&install, &tb).await;
    let held = prom
        .until_series("vnfkeeper_vnfcs_unhealthy{held_by=\"max_unhealthy\"} > 0")
        .await;
    assert_eq!(held.len(), 1, "no VNFC held by max_unhealthy");

    // An operator HEAL that Heat refuses stops in FAILED_TEMP (exit 3) and stays there.
    fleet_scenario::heal_refused_by_heat(&install, &tb, &vnf, vnfcs[0]["id"].as_str().unwrap());
    let failed_temp = prom
        .until_series("vnfkeeper_operations{operation=\"HEAL\",state=\"FAILED_TEMP\"} == 1")
        .await;
    assert_eq!(failed_temp.len(), 1);

    // Every alert expression and every dashboard query returns series (the "no pass" one was
    // checked before the pass).
    for (name, expr) in rules
        .iter()
        .filter(|(n, _)| n != "VnfkeeperNoSuccessfulReconcilePass")
    {
        let r = prom.until_series(expr).await;
        assert!(!r.is_empty(), "alert {name}: `{expr}` returns no series");
    }
    for (title, expr) in &queries {
        let r = prom.until_series(expr).await;
        assert!(
            !r.is_empty(),
            "dashboard panel {title:?}: `{expr}` returns no series"
        );
    }
    // The two state alerts are pending (their `for: 15m` has begun).
    let until = Instant::now() + Duration::from_secs(60);
    let pending = loop {
        let alerts = prom.api("alerts", &[]).await;
        let names: Vec<String> = alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["state"] == "pending")
            .map(|a| a["labels"]["alertname"].as_str().unwrap().to_owned())
            .collect();
        let both = [
            "VnfkeeperOperationFailedTemp",
            "VnfkeeperUnhealthyVnfcNotHealed",
        ]
        .iter()
        .all(|n| names.iter().any(|m| m == n));
        if both || Instant::now() > until {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for n in [
        "VnfkeeperOperationFailedTemp",
        "VnfkeeperUnhealthyVnfcNotHealed",
    ] {
        assert!(
            pending.iter().any(|m| m == n),
            "{n} not pending: {pending:?}"
        );
    }
    drop(prom);
    drop(daemon);
    tb.shutdown().await;
}
