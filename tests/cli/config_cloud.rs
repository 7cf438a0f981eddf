//! `config check` loads `[cloud]`'s clouds.yaml entry: a missing file, an unknown cloud and an
//! unsupported `auth_type` are refused with exit status 78 and a message naming the key and the
//! problem; an entry with `auth_type: v3applicationcredential` passes, and the daemon
//! authenticates with it against the testbed's Keystone and runs an INSTANTIATE through Heat
//! with the token, the credential's secret in no output.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};
use testbed::cloud::{CloudOptions, Testbed};

/// Rewrites the installation's configuration with a `[cloud]` of `clouds_yaml` and `cloud`.
fn with_cloud(install: &Install, base: &str, clouds_yaml: &std::path::Path, cloud: &str) {
    std::fs::write(
        &install.config,
        format!(
            "{base}\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"{cloud}\"\n\n[reconcile]\nenabled = false\n",
            clouds_yaml.display()
        ),
    )
    .unwrap();
}

/// `config check`: (exit status, stderr).
fn check(install: &Install) -> (Option<i32>, String) {
    let out = install.cli(&["config", "check"]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_loads_the_clouds_yaml_entry_and_application_credentials_work() {
    let install = Install::new();
    let base = std::fs::read_to_string(&install.config).unwrap();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();

    let missing = install.dir.path().join("no-such-clouds.yaml");
    with_cloud(&install, &base, &missing, "testbed");
    let (code, err) = check(&install);
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("`cloud.clouds_yaml`")
            && err.contains("cannot read")
            && err.contains("no-such-clouds.yaml"),
        "{err}"
    );

    with_cloud(&install, &base, tb.clouds_yaml(), "east");
    let (code, err) = check(&install);
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("`cloud.cloud`") && err.contains("no cloud named 'east' (clouds: testbed)"),
        "{err}"
    );

    let (cred, _) = tb.application_credential();
    let auth_url = format!("{}/identity/v3", tb.cloud().base_url());
    let yaml = install.dir.path().join("clouds.yaml");
    std::fs::write(
        &yaml,
        format!(
            "clouds:\n  oidc:\n    auth_type: v3oidcpassword\n    auth:\n      auth_url: {auth_url}\n  svc:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {auth_url}\n      application_credential_id: {}\n      application_credential_secret: {}\n    region_name: RegionOne\n",
            cred.id, cred.secret
        ),
    )
    .unwrap();
    with_cloud(&install, &base, &yaml, "oidc");
    let (code, err) = check(&install);
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("`cloud.cloud`")
            && err.contains("clouds.oidc: auth_type `v3oidcpassword` is not supported"),
        "{err}"
    );

    with_cloud(&install, &base, &yaml, "svc");
    let out = install.cli(&["config", "check"]);
    assert!(out.status.success(), "{out:?}");
    let printed = format!("{out:?}");
    assert!(
        !printed.contains(&cred.secret),
        "config check printed the secret"
    );

    // The daemon authenticates with the application credential and works the cloud with it.
    let daemon = install.start();
    daemon.wait_for_log("cloud connected", Duration::from_secs(30));
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    assert!(
        wait_until(Duration::from_secs(60), || install
            .ops_json()
            .first()
            .is_some_and(|o| o["operationState"] == "COMPLETED")),
        "{:?}",
        install.ops_json()
    );
    let log = daemon.log_text();
    assert!(!log.contains(&cred.secret), "the daemon logged the secret");
    drop(daemon);
    tb.shutdown().await;
}
