//! The node trust decisions, and the kubeadm flavour's trust stages over the seed's CIR cluster
//! request (`cir-k8s-cluster.20-instantiate.json`: one HTTP and one HTTPS registry).

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::flavour::{self, HookContext, Inputs, MgmtDriver, Probe};
use crate::model::{Timestamp, VnfcId, VnfcRow};
use crate::package::VnfPackage;
use crate::plan::stages::{Action, Hook, Stage};
use crate::recipes::Late;

fn entry(v: serde_json::Value) -> PrivateRegistryConnectionInfo {
    serde_json::from_value(v).unwrap()
}

fn seed_entries() -> Vec<PrivateRegistryConnectionInfo> {
    vec![
        entry(serde_json::json!({"connection_type": "0", "server": "192.168.0.10:5000"})),
        entry(serde_json::json!({
            "connection_type": "1", "server": "registry.example.com",
            "username": "user01", "password": "pw-secret-01",
            "certificate_path": "Files/registries/ca.crt",
            "hosts_string": "192.168.0.20 registry.example.com"
        })),
    ]
}

#[test]
fn merge_keeps_other_keys_and_listed_servers_and_appends_missing_once() {
    let existing = r#"{"exec-opts": ["native.cgroupdriver=systemd"],
        "insecure-registries": ["10.0.0.1:5000"], "log-driver": "json-file"}"#;
    let want = vec!["192.168.0.10:5000".to_owned(), "10.0.0.1:5000".to_owned()];
    let merged = merge_daemon_json(Some(existing), &want).unwrap();
    let v: Value = serde_json::from_str(&merged).unwrap();
    assert_eq!(
        v["exec-opts"],
        serde_json::json!(["native.cgroupdriver=systemd"])
    );
    assert_eq!(v["log-driver"], "json-file");
    assert_eq!(
        v["insecure-registries"],
        serde_json::json!(["10.0.0.1:5000", "192.168.0.10:5000"])
    );
    // Key order kept: the file's keys first, as they were.
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["exec-opts", "insecure-registries", "log-driver"]);
    assert!(merged.ends_with("}\n"));
    // Merging the result again changes nothing.
    assert_eq!(merge_daemon_json(Some(&merged), &want).unwrap(), merged);
}

#[test]
fn merge_of_no_or_blank_file_is_just_the_list() {
    let want = vec!["a:5000".to_owned()];
    for existing in [None, Some(""), Some("  \n")] {
        let v: Value = serde_json::from_str(&merge_daemon_json(existing, &want).unwrap()).unwrap();
        assert_eq!(v, serde_json::json!({"insecure-registries": ["a:5000"]}));
    }
}

#[test]
fn merge_refuses_what_it_cannot_keep_without_echoing_content() {
    let want = vec!["a:5000".to_owned()];
    let err = merge_daemon_json(Some("{\"x\": secretvalue"), &want).unwrap_err();
    assert!(err.contains("not JSON"), "{err}");
    assert!(!err.contains("secretvalue"), "{err}");
    assert!(
        merge_daemon_json(Some("[1]"), &want)
            .unwrap_err()
            .contains("not an object")
    );
    assert!(
        merge_daemon_json(Some(r#"{"insecure-registries": "a"}"#), &want)
            .unwrap_err()
            .contains("array of strings")
    );
}

#[test]
fn observed_verdicts_parse_and_an_unmergeable_file_is_refused() {
    let text = "{\"insecure-registries\": [\"a:5000\"]}";
    let b64 = STANDARD.encode(text);
    let sum = sha256_hex(b"the node's whole file");
    let line = format!("already done: /etc/docker/daemon.json sha256={sum} b64={b64}");
    assert_eq!(
        parse_observed(&line).unwrap(),
        Observed {
            content: Some(text.into()),
            sha256: sum.clone()
        }
    );
    let absent = parse_observed("already done: /etc/docker/daemon.json absent").unwrap();
    assert_eq!(absent.content, None);
    assert_eq!(absent.sha256, "absent");
    let invalid =
        format!("already done: /etc/docker/daemon.json sha256={sum} invalid=not-a-JSON-object");
    assert!(
        parse_observed(&invalid)
            .unwrap_err()
            .contains("not a JSON object")
    );
    let short = format!("already done: /etc/docker/daemon.json sha256=abc b64={b64}");
    assert!(parse_observed(&short).unwrap_err().contains("64 hex"));
    assert!(parse_observed("applied: something").is_err());
}

#[test]
fn hosts_block_is_each_line_once_in_request_order() {
    let mut e = seed_entries();
    e.push(entry(serde_json::json!({
        "connection_type": "0", "server": "r2:5000", "hosts_string": "10.0.0.9 r2"
    })));
    e.push(entry(serde_json::json!({
        "connection_type": "0", "server": "r3:5000",
        "hosts_string": "192.168.0.20 registry.example.com"
    })));
    assert_eq!(
        hosts_block(&e),
        "192.168.0.20 registry.example.com\n10.0.0.9 r2"
    );
    assert_eq!(hosts_block(&e[..1]), "");
}

#[test]
fn containerd_hosts_toml_per_connection_type() {
    let http = containerd_hosts_toml("10.0.0.5:5000", ConnectionType::Http, false);
    assert!(http.contains("server = \"http://10.0.0.5:5000\""), "{http}");
    assert!(http.contains("[host.\"http://10.0.0.5:5000\"]"), "{http}");
    assert!(!http.contains("ca ="), "{http}");
    let https = containerd_hosts_toml("r.example:443", ConnectionType::Https, true);
    assert!(
        https.contains("server = \"https://r.example:443\""),
        "{https}"
    );
    assert!(
        https.contains("ca = \"/etc/containerd/certs.d/r.example:443/ca.crt\""),
        "{https}"
    );
    assert!(!https.ends_with('\n'));
    let no_ca = containerd_hosts_toml("r.example", ConnectionType::Https, false);
    assert!(!no_ca.contains("ca ="), "{no_ca}");
}

#[test]
fn docker_config_has_auths_of_entries_with_credentials_only() {
    let e = seed_entries();
    let text = docker_config_json(&e).unwrap();
    let v: Value = serde_json::from_str(text.expose()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"auths": {"registry.example.com": {
            "auth": STANDARD.encode("user01:pw-secret-01")
        }}})
    );
    assert!(docker_config_json(&e[..1]).is_none());
    assert_eq!(auth_servers(&e), ["registry.example.com"]);
    let masked: Vec<String> = secrets(&e).iter().map(|s| s.expose().clone()).collect();
    assert_eq!(
        masked,
        [
            "pw-secret-01".to_owned(),
            STANDARD.encode("user01:pw-secret-01")
        ]
    );
    assert_eq!(insecure_servers(&e), ["192.168.0.10:5000"]);
}

#[test]
fn auth_digest_is_what_the_node_computes_and_changes_with_the_password_only() {
    let e = seed_entries();
    let token = STANDARD.encode("user01:pw-secret-01");
    // hashlib.pbkdf2_hmac("sha256", token, b"vnfkeeper trust.auth <owner> <server>", 10000).
    let want = "e9774eafb1a6e46299208e5b28108e754cf3024e9633619f19c84eddf433c1c9";
    let owner = "vnf-cir-k8s-cluster";
    assert_eq!(
        auth_digest(&token, owner, "registry.example.com").expose(),
        want
    );
    let checks = auth_checks(&e, owner);
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].0, "registry.example.com");
    assert_eq!(checks[0].1.expose(), want);
    // The same request decides the same digest (a re-run finds the node's file current) …
    assert_eq!(auth_checks(&seed_entries(), owner)[0].1.expose(), want);
    // … a changed password, a changed user or another VNF does not (the file is written again).
    let mut changed = seed_entries();
    changed[1].password = Some(Secret::new("pw-secret-02".into()));
    let other = auth_checks(&changed, owner);
    assert_ne!(other[0].1.expose(), want);
    let mut user = seed_entries();
    user[1].username = Some(Secret::new("user02".into()));
    assert_ne!(auth_checks(&user, owner)[0].1.expose(), want);
    assert_ne!(auth_checks(&e, "vnf-other")[0].1.expose(), want);
    // A later entry of the same server wins, as in the written config.json.
    let mut twice = seed_entries();
    twice.push(changed[1].clone());
    assert_eq!(auth_checks(&twice, owner), other);
    let v: Value = serde_json::from_str(docker_config_json(&twice).unwrap().expose()).unwrap();
    assert_eq!(
        v["auths"]["registry.example.com"]["auth"],
        STANDARD.encode("user01:pw-secret-02")
    );
    // The step carries the digest, never the password or the token.
    let step = crate::recipes::trust::auth("m1", DOCKER_CONFIG, owner, &checks);
    assert_eq!(
        step.args,
        [DOCKER_CONFIG, owner, "registry.example.com", want]
    );
    let args = step.args.join(" ");
    assert!(!args.contains("pw-secret-01") && !args.contains(&token));
    assert!(
        !format!("{:?}", checks[0].1).contains(want),
        "Secret hides it"
    );
}

// ---- the kubeadm flavour's trust stages over the seed request ----

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn driver() -> Box<dyn MgmtDriver> {
    let bytes =
        std::fs::read(repo().join("fixtures/requests/good/cir-k8s-cluster.20-instantiate.json"))
            .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let req: crate::wire::sol003::InstantiateVnfRequest =
        serde_json::from_value(envelope["request"].clone()).unwrap();
    let pkg = repo().join("fixtures/packages/cir-k8s-cluster");
    let vnfd = VnfPackage::load(&pkg).unwrap().vnfd;
    let files: BTreeMap<String, Vec<u8>> = flavour::package_files(&req)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(pkg.join(&p)).unwrap();
            (p, b)
        })
        .collect();
    assert!(
        files.contains_key("Files/registries/ca.crt"),
        "{:?}",
        files.keys()
    );
    flavour::select(Inputs {
        vnf_instance_id: "vnf-cir-k8s-cluster".into(),
        req,
        vnfd,
        files,
        base_hot: None,
        floating_ip_ports: Default::default(),
    })
}

fn row(id: &str, vdu: &str, cp: &str, ip: &str) -> VnfcRow {
    VnfcRow {
        id: id.into(),
        vnf_instance_id: "vnf-cir-k8s-cluster".into(),
        vdu_id: vdu.into(),
        vnfc_index: None,
        stack_name: "s".into(),
        stack_id: "s-id".into(),
        resource_name: vdu.into(),
        server_id: Some(format!("srv-{id}")),
        server_status: Some("ACTIVE".into()),
        ip_address: Some(ip.into()),
        cp_addresses: [(cp.to_owned(), ip.to_owned())].into(),
        volumes: Vec::new(),
        host_key: None,
        created_at: Timestamp(chrono::DateTime::UNIX_EPOCH),
        parameters: None,
    }
}

fn rows() -> Vec<VnfcRow> {
    vec![
        row("m1", "masterNode", "masterNode_CP1", "10.0.0.11"),
        row("w1", "workerNode", "workerNode_CP2", "10.0.0.21"),
    ]
}

fn ctx(v: &[VnfcRow]) -> HookContext<'_> {
    HookContext {
        vnfcs: v,
        pv_wait: std::time::Duration::from_secs(30),
        op_occ_id: "op-1",
    }
}

fn remote_step(s: &Stage) -> &crate::recipes::Step {
    match &s.action {
        Action::Remote(r) => &r.step,
        other => panic!("{}: not remote: {other:?}", s.key),
    }
}

#[test]
fn instantiate_installs_then_trusts_every_node_then_merges_observed_daemon_json() {
    let d = driver();
    let v = rows();
    let stages = d.instantiate_end(ctx(&v)).unwrap();
    let keyed: Vec<(u32, &str)> = stages.iter().map(|s| (s.wave, s.key.as_str())).collect();
    assert_eq!(
        keyed,
        [
            (0, "k8s.hosts@m1"),
            (0, "k8s.hosts@w1"),
            (1, "k8s.install@m1"),
            (2, "k8s.join_material@m1"),
            (3, "k8s.install@w1"),
            (4, "k8s.kubeconfig@m1"),
            (5, "k8s.vim_token@m1"),
            (6, "trust.files@m1"),
            (6, "trust.hosts@m1"),
            (6, "trust.auth@m1"),
            (6, "trust.files@w1"),
            (6, "trust.hosts@w1"),
            (6, "trust.auth@w1"),
            (7, "trust.observe@m1"),
            (7, "trust.observe@w1"),
            (8, "configure"),
        ]
    );
    assert_eq!(stages[15].action, Action::Expand(Hook::Configure));
    // trust.files: the HTTPS CA uploaded and checked by digest; HTTP has none.
    let files = remote_step(&stages[7]);
    let ca =
        std::fs::read(repo().join("fixtures/packages/cir-k8s-cluster/Files/registries/ca.crt"))
            .unwrap();
    assert_eq!(files.args[0], CA_STAGE_DIR);
    assert_eq!(&files.args[1..3], ["192.168.0.10:5000", "-"]);
    assert_eq!(files.args[4], "registry.example.com");
    assert_eq!(files.args[5], sha256_hex(&ca));
    assert_eq!(files.uploads.len(), 1);
    assert_eq!(
        files.uploads[0].path,
        "/var/lib/vnfkeeper/trust/registry.example.com.crt"
    );
    assert_eq!(files.uploads[0].bytes, ca);
    // trust.hosts: the block owned by the VNF.
    let hosts = remote_step(&stages[8]);
    assert_eq!(
        hosts.args,
        [
            "/etc/hosts",
            "vnf-cir-k8s-cluster",
            "192.168.0.20 registry.example.com"
        ]
    );
    // trust.auth: the credentials only as a late 0600 file, never an argument.
    let auth = remote_step(&stages[9]);
    let token = STANDARD.encode("user01:user01");
    let digest = auth_digest(&token, "vnf-cir-k8s-cluster", "registry.example.com");
    assert_eq!(
        auth.args,
        [
            "/root/.docker/config.json",
            "vnf-cir-k8s-cluster",
            "registry.example.com",
            digest.expose().as_str()
        ]
    );
    assert_eq!(
        auth.late,
        [Late::RegistryAuth {
            path: DOCKER_CONFIG.into()
        }]
    );
    let plan = serde_json::to_string(&stages).unwrap();
    assert!(
        !plan.contains("user01"),
        "no registry credential in the plan"
    );
    let late = d
        .late_upload(&auth.late[0], &v, &Default::default())
        .unwrap();
    assert!(String::from_utf8_lossy(late.expose()).contains(&STANDARD.encode("user01:user01")));
    assert_eq!(auth.late[0].mode(), 0o600);
    let masked: Vec<String> = d.secrets().iter().map(|s| s.expose().clone()).collect();
    assert!(masked.contains(&"user01".to_owned()));

    // configure: each observed node gets its own merge, uploaded, guarded by the observed digest.
    let existing = "{\"exec-opts\": [\"native.cgroupdriver=systemd\"]}\n";
    let observed: BTreeMap<StageKey, String> = [
        (
            StageKey::from("trust.observe@m1"),
            format!(
                "already done: /etc/docker/daemon.json sha256={} b64={}",
                sha256_hex(existing.as_bytes()),
                STANDARD.encode(existing)
            ),
        ),
        (
            StageKey::from("trust.observe@w1"),
            "already done: /etc/docker/daemon.json absent".to_owned(),
        ),
    ]
    .into();
    let conf = d.configure(ctx(&v), &observed).unwrap();
    let keys: Vec<&str> = conf.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["trust.docker@m1", "trust.docker@w1"]);
    let m1 = remote_step(&conf[0]);
    assert_eq!(
        m1.args,
        [
            DAEMON_JSON,
            DAEMON_JSON_STAGED,
            &sha256_hex(existing.as_bytes()),
            "192.168.0.10:5000"
        ]
    );
    let merged: Value = serde_json::from_slice(&m1.uploads[0].bytes).unwrap();
    assert_eq!(
        merged,
        serde_json::json!({"exec-opts": ["native.cgroupdriver=systemd"],
                           "insecure-registries": ["192.168.0.10:5000"]})
    );
    assert_eq!(m1.uploads[0].mode, 0o600);
    assert_eq!(remote_step(&conf[1]).args[2], "absent");
    // A verdict that does not parse is the flavour's refusal, naming the node.
    let mut broken = observed.clone();
    broken.insert(
        "trust.observe@w1".into(),
        "already done: x sha256=1 b64=!!".into(),
    );
    let err = d.configure(ctx(&v), &broken).unwrap_err();
    assert_eq!(err.step, "trust.observe");
    assert!(err.reason.contains("w1"), "{err}");
}

#[test]
fn scale_out_and_heal_trust_only_the_new_or_healed_nodes() {
    let d = driver();
    let mut v = rows();
    v.push(row("w2", "workerNode", "workerNode_CP2", "10.0.0.22"));
    let keys = |stages: Vec<Stage>| -> Vec<String> {
        stages
            .into_iter()
            .filter(|s| s.key.as_str().starts_with("trust.") || s.key == "configure")
            .map(|s| s.key.into_string())
            .collect()
    };
    let want = [
        "trust.files@w2",
        "trust.hosts@w2",
        "trust.auth@w2",
        "trust.observe@w2",
        "configure",
    ];
    assert_eq!(keys(d.scale_end(ctx(&v), &["w2".into()]).unwrap()), want);
    assert_eq!(keys(d.heal_end(ctx(&v), &["w2".into()]).unwrap()), want);
    // A whole-VNF heal: every node.
    let all: Vec<VnfcId> = v.iter().map(|r| r.id.clone()).collect();
    let healed = keys(d.heal_end(ctx(&v), &all).unwrap());
    assert_eq!(
        healed
            .iter()
            .filter(|k| k.starts_with("trust.observe@"))
            .count(),
        3
    );
}

#[test]
fn probes_check_node_trust_without_uploads() {
    let d = driver();
    let v = rows();
    let names: Vec<(String, usize, usize)> = d
        .probes(ctx(&v), &v[1], flavour::Role::Worker, false)
        .into_iter()
        .filter_map(|p| match p {
            Probe::Script(s) if s.kind.records_trust() => {
                Some((s.name().to_owned(), s.uploads.len(), s.args.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            ("trust.files".to_owned(), 0, 7),
            ("trust.hosts".to_owned(), 0, 3),
            ("trust.auth".to_owned(), 0, 4),
            ("trust.docker".to_owned(), 0, 4),
        ]
    );
}

#[test]
fn registry_uses_one_per_server_with_the_ca_fingerprint_of_https_entries() {
    let mut e = seed_entries();
    e.push(entry(
        serde_json::json!({"connection_type": "1", "server": "192.168.0.10:5000"}),
    ));
    let files: BTreeMap<String, Vec<u8>> =
        [("Files/registries/ca.crt".to_owned(), b"CA".to_vec())].into();
    let t = TrustInputs {
        registries: &e,
        files: &files,
        owner: "vnf-1",
    };
    assert_eq!(
        registry_uses(&t),
        [
            RegistryUse {
                server: "192.168.0.10:5000".into(),
                connection_type: ConnectionType::Http,
                ca_sha256: None
            },
            RegistryUse {
                server: "registry.example.com".into(),
                connection_type: ConnectionType::Https,
                ca_sha256: Some(sha256_hex(b"CA"))
            },
        ]
    );
}
