//! Companion mode with `auth_type = "OAUTH2_CLIENT_CREDENTIALS"` and TLS on the notification
//! endpoint, against the testbed's Tacker stand-in (no hosts, no root). The stand-in behaves as
//! Tacker v2: before each callback test and notification it fetches a token from the
//! subscription's `tokenEndpoint` with the client credentials (HTTP Basic), then sends `Bearer`.
//!
//! - OAuth 2.0 end to end: the subscription vnfkeeper creates carries
//!   `paramsOauth2ClientCredentials`; the notifications of a lifecycle arrive with Bearer tokens
//!   and are recorded; a wrong client secret is 401 `invalid_client` and issues nothing; an
//!   unknown token, Basic credentials, and a token issued before a restart (tokens live in
//!   memory only) are 401 and record nothing; neither the client secret nor a token reaches the
//!   log.
//! - TLS: `config check` refuses a key others may read, a key that does not fit the
//!   certificate, an `http://` callback_uri and TLS on the metrics' address; the stand-in
//!   delivers over HTTPS, verified against the test's own CA (made with the `openssl` CLI); a
//!   plain-HTTP client is refused.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::tacker::{Operator, VNFD, register_pv_package};
use support::{Install, free_port, wait_until};
use testbed::cloud::{CloudOptions, Testbed};
use vnfkeeper::store::Store;
use vnfkeeper_core::model::OperationState;

const CLIENT: &str = "tacker-oauth-client";
const SECRET: &str = "Oa2-S3cret!client+/=";

/// The `[cloud]` and `[tacker]` sections of a companion daemon with OAuth 2.0 on `port`, over
/// `scheme`, plus `extra` lines in `[tacker]`.
fn tacker_config(install: &Install, tb: &Testbed, port: u16, scheme: &str, extra: &str) -> String {
    let pw = install.dir.path().join("client.secret");
    std::fs::write(&pw, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n\n\
         [tacker]\nlisten = \"127.0.0.1:{port}\"\nauth_type = \"OAUTH2_CLIENT_CREDENTIALS\"\n\
         username = \"{CLIENT}\"\npassword_file = \"{}\"\n\
         callback_uri = \"{scheme}://127.0.0.1:{port}/vnfkeeper/notifications\"\n\
         vnfd_ids = [\"{VNFD}\"]\npoll_interval_secs = 5\n{extra}",
        tb.clouds_yaml().display(),
        pw.display()
    )
}

/// Writes `base + tacker` as the configuration and runs `config check`: (success, stdout +
/// stderr).
fn check(install: &Install, base: &str, tacker: &str) -> (bool, String) {
    std::fs::write(&install.config, format!("{base}{tacker}")).unwrap();
    let out = install.cli(&["config", "check"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn store(db: &Path) -> Store {
    Store::open(db).unwrap()
}

fn stored_subscription(db: &Path) -> Option<String> {
    store(db)
        .reader()
        .tacker_subscription()
        .unwrap()
        .map(|s| s.subscription_id)
}

fn notifications(db: &Path) -> usize {
    store(db).reader().tacker_notifications(None).unwrap().len()
}

fn completed(db: &Path, inst: &str) -> bool {
    let occs: Vec<_> = store(db)
        .reader()
        .tacker_op_occs()
        .unwrap()
        .into_iter()
        .filter(|o| o.occ.vnf_instance_id == inst)
        .collect();
    occs.len() == 2
        && occs
            .iter()
            .all(|o| o.occ.state == OperationState::Completed)
}

/// `POST` a token request with HTTP Basic `id:secret`: (status, body, WWW-Authenticate).
async fn token_request(
    http: &reqwest::Client,
    url: &str,
    id: &str,
    secret: &str,
) -> (u16, Value, Option<String>) {
    let r = http
        .post(url)
        .basic_auth(id, Some(secret))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (status, r.json().await.unwrap_or(Value::Null), challenge)
}

/// A notification body the endpoint accepts.
fn notification() -> Value {
    json!({
        "id": uuid::Uuid::new_v4().to_string(),
        "notificationType": "VnfIdentifierCreationNotification",
        "subscriptionId": "s-1",
        "timeStamp": "2026-11-26T12:00:00Z",
        "vnfInstanceId": "i-manual",
        "_links": {"vnfInstance": {"href": "http://t/i"}, "subscription": {"href": "http://t/s"}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_client_credentials_end_to_end() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    register_pv_package(&tb);
    let base = std::fs::read_to_string(&install.config).unwrap();
    let port = free_port();
    let (ok, out) = check(
        &install,
        &base,
        &tacker_config(&install, &tb, port, "http", "token_lifetime_secs = 30\n"),
    );
    assert!(!ok && out.contains("tacker.token_lifetime_secs"), "{out}");
    let (ok, out) = check(
        &install,
        &base,
        &tacker_config(&install, &tb, port, "http", ""),
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("auth_type = \"OAUTH2_CLIENT_CREDENTIALS\"")
            && out.contains("token_path = \"/vnfkeeper/token\"")
            && out.contains("token_lifetime_secs = 3600")
            && !out.contains(SECRET),
        "{out}"
    );
    let mut d = install.start();
    let db = install.database.clone();
    assert!(
        wait_until(Duration::from_secs(30), || stored_subscription(&db)
            .is_some()),
        "no subscription stored: {}",
        d.log_text()
    );
    // The subscription names our token endpoint; its callback test came with a Bearer token
    // from it.
    assert_eq!(
        tb.cloud().tacker_subscription_token_endpoints(),
        vec![Some(format!("http://127.0.0.1:{port}/vnfkeeper/token"))]
    );
    let (issued, refused) = tb.cloud().tacker_token_requests();
    assert!(issued >= 1 && refused == 0, "{issued} {refused}");

    let op = Operator::login(&tb).await;
    let inst = op.lifecycle(&tb).await.0;
    assert!(
        wait_until(Duration::from_secs(30), || {
            store(&db)
                .reader()
                .tacker_notifications(Some(&inst))
                .unwrap()
                .len()
                == 7
                && completed(&db, &inst)
        }),
        "{}",
        d.log_text()
    );
    // The daemon commits a notification before it answers: the last answers may still be on
    // their way when the rows are there.
    assert!(
        wait_until(Duration::from_secs(10), || {
            let c = tb.cloud().tacker_notify_counters();
            c.sent == 7 && c.answered_204 == c.sent
        }),
        "{:?}",
        tb.cloud().tacker_notify_counters()
    );
    let (issued_after, refused) = tb.cloud().tacker_token_requests();
    assert!(issued_after >= issued + 7 && refused == 0);

    // By hand: the token endpoint and the callback.
    let http = reqwest::Client::new();
    let token_url = format!("http://127.0.0.1:{port}/vnfkeeper/token");
    let callback = format!("http://127.0.0.1:{port}/vnfkeeper/notifications");
    let (st, v, challenge) = token_request(&http, &token_url, CLIENT, "wrong").await;
    assert_eq!(st, 401, "{v}");
    assert_eq!(v["error"], "invalid_client");
    assert!(v.get("access_token").is_none());
    assert!(challenge.unwrap().starts_with("Basic"));
    let (st, v, _) = token_request(&http, &token_url, "someone", SECRET).await;
    assert_eq!((st, v["error"].as_str()), (401, Some("invalid_client")));
    let r = http
        .post(&token_url)
        .basic_auth(CLIENT, Some(SECRET))
        .body("grant_type=password")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "unsupported_grant_type");
    // Client credentials as form fields (RFC 6749 §2.3.1) work too.
    let r = http
        .post(&token_url)
        .body(format!(
            "grant_type=client_credentials&client_id={CLIENT}&client_secret={}",
            SECRET
                .replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D")
                .replace('!', "%21")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, good, _) = token_request(&http, &token_url, CLIENT, SECRET).await;
    assert_eq!(st, 200, "{good}");
    assert_eq!(good["token_type"], "Bearer");
    assert_eq!(good["expires_in"], 3600);
    let token = good["access_token"].as_str().unwrap().to_string();

    let before = notifications(&db);
    for auth in [
        None,
        Some("Bearer not-a-token-we-issued".to_string()),
        Some(format!("Bearer {token}x")),
        Some(format!(
            "Basic {}",
            base64_basic(CLIENT, SECRET) // client credentials are not accepted on the callback
        )),
    ] {
        let mut rb = http.post(&callback).json(&notification());
        if let Some(a) = &auth {
            rb = rb.header("authorization", a);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 401, "{auth:?}");
        assert!(
            r.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer"),
        );
    }
    assert_eq!(
        notifications(&db),
        before,
        "a refused notification was recorded"
    );
    let r = http
        .post(&callback)
        .bearer_auth(&token)
        .json(&notification())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(notifications(&db), before + 1);

    // Tokens live in memory only: after a restart the old one is unknown.
    d.stop();
    let first_log = d.log_text();
    let mut d = install.start();
    d.wait_for_log("listening on http://", Duration::from_secs(30));
    let r = http
        .post(&callback)
        .bearer_auth(&token)
        .json(&notification())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(notifications(&db), before + 1);
    d.stop();
    let log = format!("{first_log}{}", d.log_text());
    assert!(log.contains("OAuth 2.0 token refused"), "{log}");
    assert!(!log.contains(SECRET), "the client secret reached the log");
    assert!(!log.contains(&token), "a token reached the log");
    tb.shutdown().await;
}

fn base64_basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// Runs `openssl` with `args` in `dir`; panics on failure.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl CLI");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A test CA and a server certificate for 127.0.0.1 signed by it, plus an unrelated key:
/// (ca.pem, server.pem, server.key, other.key), keys mode 0600.
pub(crate) fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=vnfkeeper test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "other.key",
        ],
    );
    for k in ["server.key", "other.key", "ca.key"] {
        std::fs::set_permissions(dir.join(k), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
        dir.join("other.key"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_endpoint_is_checked_and_delivered_to_over_https_only() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    register_pv_package(&tb);
    let (ca, cert, key, other) = certificates(&install.dir.path().join("pki"));
    let base = std::fs::read_to_string(&install.config).unwrap();
    let port = free_port();
    let tls = |k: &Path| {
        format!(
            "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            cert.display(),
            k.display()
        )
    };

    // config check: a key that does not fit, a key others may read, an http:// callback_uri,
    // TLS on the metrics' address.
    let (ok, out) = check(
        &install,
        &base,
        &tacker_config(&install, &tb, port, "https", &tls(&other)),
    );
    assert!(!ok && out.contains("does not fit"), "{out}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, out) = check(
        &install,
        &base,
        &tacker_config(&install, &tb, port, "https", &tls(&key)),
    );
    assert!(!ok && out.contains("tacker.tls_key_file"), "{out}");
    assert!(!out.contains("PRIVATE KEY"), "{out}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (ok, out) = check(
        &install,
        &base,
        &tacker_config(&install, &tb, port, "http", &tls(&key)),
    );
    assert!(!ok && out.contains("must be https://"), "{out}");
    let (ok, out) = check(
        &install,
        &format!("{base}\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
        &tacker_config(&install, &tb, port, "https", &tls(&key)),
    );
    assert!(!ok && out.contains("tacker.tls_cert_file"), "{out}");
    let (ok, out) = check(
        &install,
        &base,
        &tacker_config(&install, &tb, port, "https", &tls(&key)),
    );
    assert!(ok, "{out}");

    // The stand-in verifies the endpoint against the test's CA only.
    tb.cloud()
        .tacker_set_notification_ca(&std::fs::read(&ca).unwrap())
        .unwrap();
    let mut d = install.start();
    let db = install.database.clone();
    assert!(
        wait_until(Duration::from_secs(30), || stored_subscription(&db)
            .is_some()),
        "no subscription stored: {}",
        d.log_text()
    );
    assert!(d.log_text().contains("listening on https://"));
    assert_eq!(
        tb.cloud().tacker_subscription_token_endpoints(),
        vec![Some(format!("https://127.0.0.1:{port}/vnfkeeper/token"))]
    );
    let op = Operator::login(&tb).await;
    let inst = op.lifecycle(&tb).await.0;
    assert!(
        wait_until(Duration::from_secs(30), || {
            store(&db)
                .reader()
                .tacker_notifications(Some(&inst))
                .unwrap()
                .len()
                == 7
        }),
        "{}",
        d.log_text()
    );
    let (issued, refused) = tb.cloud().tacker_token_requests();
    assert!(issued >= 8 && refused == 0, "{issued} {refused}");

    // A plain-HTTP client gets no answer; an HTTPS client without the CA is refused too.
    let before = notifications(&db);
    let plain = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/vnfkeeper/notifications"))
        .json(&notification())
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    let untrusted = reqwest::Client::builder()
        .use_rustls_tls()
        .build()
        .unwrap()
        .post(format!("https://127.0.0.1:{port}/vnfkeeper/token"))
        .send()
        .await;
    assert!(untrusted.is_err(), "{untrusted:?}");
    // With the CA: the token endpoint over HTTPS.
    let trusted = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap())
        .build()
        .unwrap();
    let (st, v, _) = token_request(
        &trusted,
        &format!("https://127.0.0.1:{port}/vnfkeeper/token"),
        CLIENT,
        "wrong",
    )
    .await;
    assert_eq!((st, v["error"].as_str()), (401, Some("invalid_client")));
    assert_eq!(notifications(&db), before);
    d.stop();
    let log = d.log_text();
    assert!(!log.contains(SECRET), "the client secret reached the log");
    assert!(!log.contains("PRIVATE KEY"));
    tb.shutdown().await;
}
