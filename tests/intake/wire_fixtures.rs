//! Request fixtures against `intake::wire`: every good fixture parses and its package files
//! exist; every bad fixture is rejected naming the pointer in `fixtures/requests/bad/index.json`;
//! no reason ever contains a secret of the fixture.

use std::path::{Path, PathBuf};

use serde_json::Value;
use vnfkeeper_core::wire::{
    Envelope, FieldError, LcmOperation, LcmRequest, MAX_REQUEST_BYTES, parse_envelope,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn requests() -> PathBuf {
    root().join("fixtures/requests")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v
}

/// String values of secret fields anywhere in `v` (passwords, proxy URLs and their
/// credentials, registry logins, VIM `accessInfo`).
fn secrets(v: &Value, key: &str, inside_registry: bool, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let reg = inside_registry || k == "private_registry_connection_info";
                if k == "accessInfo" {
                    collect_all_strings(x, out);
                }
                secrets(x, k, reg, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| secrets(x, key, inside_registry, out)),
        Value::String(s) if !s.is_empty() => {
            let secret_key = key.contains("password")
                || key == "http_proxy"
                || key == "https_proxy"
                || (inside_registry && key == "username");
            if secret_key {
                out.push(s.clone());
                // The credentials inside a proxy URL on their own.
                if let Some((_, rest)) = s.split_once("://")
                    && let Some((userinfo, _)) = rest.rsplit_once('@')
                {
                    out.push(userinfo.to_string());
                    if let Some((_, pw)) = userinfo.split_once(':') {
                        out.push(pw.to_string());
                    }
                }
            }
        }
        _ => {}
    }
}

fn collect_all_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if !s.is_empty() => out.push(s.clone()),
        Value::Object(m) => m.values().for_each(|x| collect_all_strings(x, out)),
        Value::Array(a) => a.iter().for_each(|x| collect_all_strings(x, out)),
        _ => {}
    }
}

fn assert_no_secret(file: &str, bytes: &[u8], reasons: &[FieldError]) {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let mut s = Vec::new();
    secrets(&v, "", false, &mut s);
    for r in reasons {
        for secret in &s {
            assert!(
                !r.reason.contains(secret.as_str()),
                "{file}: reason at {:?} contains a secret value: {}",
                r.pointer,
                r.reason
            );
        }
    }
}

#[test]
fn good_fixtures_parse_and_reference_existing_package_files() {
    let files = json_files(&requests().join("good"));
    assert!(
        files.len() >= 20,
        "expected the seed fixtures, found {}",
        files.len()
    );
    let mut instantiates = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(path).unwrap();
        let parsed = parse_envelope(&bytes).unwrap_or_else(|e| panic!("{name} rejected: {e:#?}"));
        assert_no_secret(&name, &bytes, &parsed.warnings);
        let Envelope::Lcm(env) = parsed.envelope else {
            assert!(parsed.secret_pointers.is_empty() && parsed.package_paths.is_empty());
            continue;
        };
        // What the validating walk found is what the envelope's own walks find.
        assert_eq!(parsed.secret_pointers, env.secret_pointers(), "{name}");
        assert_eq!(parsed.package_paths, env.package_paths(), "{name}");
        if bytes.windows(10).any(|w| w == b"\"password\"") {
            assert!(
                !parsed.secret_pointers.is_empty(),
                "{name}: no secret found"
            );
        }
        env.typed_request()
            .unwrap_or_else(|e| panic!("{name}: typed body: {e:?}"));
        // The body is kept exactly as received.
        let raw: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            raw["request"], env.request,
            "{name}: request not kept verbatim"
        );
        if env.operation != LcmOperation::Instantiate {
            assert!(env.vnf_package.is_none());
            assert!(env.package_paths().is_empty());
            continue;
        }
        instantiates += 1;
        let pkg = root().join(
            env.vnf_package
                .as_deref()
                .expect("INSTANTIATE has vnfPackage"),
        );
        assert!(pkg.is_dir(), "{name}: package {} missing", pkg.display());
        // A VNF package: TOSCA.meta naming an existing VNFD, and a BaseHOT for the flavour
        // (shipped, or generated from the VNFD when the package has none).
        let meta = std::fs::read_to_string(pkg.join("TOSCA-Metadata/TOSCA.meta"))
            .unwrap_or_else(|e| panic!("{name}: TOSCA.meta: {e}"));
        let entry = meta
            .lines()
            .find_map(|l| l.strip_prefix("Entry-Definitions:"))
            .unwrap_or_else(|| panic!("{name}: no Entry-Definitions"))
            .trim();
        assert!(pkg.join(entry).is_file(), "{name}: VNFD {entry} missing");
        let flavour = env.request["flavourId"].as_str().unwrap();
        let loaded = vnfkeeper_core::package::VnfPackage::load(&pkg)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Err(e) = loaded.base_hot(flavour) {
            panic!("{name}: no BaseHOT for flavour {flavour}: {e}");
        }
        let paths = env.package_paths();
        assert!(!paths.is_empty(), "{name}: no package paths found");
        for (pointer, rel) in paths {
            assert!(
                pointer.starts_with("/request/additionalParams/"),
                "{name}: {pointer}"
            );
            assert!(
                !rel.starts_with("./") && !rel.starts_with('/'),
                "{name}: {rel} not normalised"
            );
            let f = pkg.join(&rel);
            assert!(
                f.is_file(),
                "{name}: {pointer} names {rel}, missing in {}",
                pkg.display()
            );
        }
    }
    assert!(
        instantiates >= 5,
        "expected at least 5 INSTANTIATE fixtures, found {instantiates}"
    );
}

#[test]
fn pv_seed_body_is_accepted_with_warnings() {
    let bytes = std::fs::read(requests().join("good/pv-k8s-cluster.10-instantiate.json")).unwrap();
    let parsed = parse_envelope(&bytes).unwrap();
    let k8s = "/request/additionalParams/k8s_cluster_installation_param";
    let pod = format!("{k8s}/master_node/pod_cidr");
    let w = parsed
        .warnings
        .iter()
        .find(|w| w.pointer == pod)
        .expect("pod_cidr warning");
    assert!(w.reason.contains("192.168.0.0/16"), "{}", w.reason);
    for proxy in ["http_proxy", "https_proxy"] {
        let p = format!("{k8s}/proxy/{proxy}");
        assert!(
            parsed.warnings.iter().any(|w| w.pointer == p),
            "no warning for {proxy}"
        );
    }
    let Envelope::Lcm(env) = parsed.envelope else {
        panic!("not LCM")
    };
    let expected: Vec<(String, String)> = [
        ("/script_path", "Scripts/install_k8s_cluster.sh"),
        (
            "/pv_registration_params/0/pv_manifest_file_path",
            "Files/kubernetes/nfs-pv1.yaml",
        ),
        (
            "/pv_registration_params/1/pv_manifest_file_path",
            "Files/kubernetes/nfs-pv2.yaml",
        ),
        (
            "/pv_registration_params/2/pv_manifest_file_path",
            "Files/kubernetes/nfs-pv3.yaml",
        ),
    ]
    .iter()
    .map(|(p, f)| (format!("{k8s}{p}"), f.to_string()))
    .chain([(
        "/request/additionalParams/lcm-operation-user-data".to_string(),
        "UserData/k8s_cluster_user_data.py".to_string(),
    )])
    .collect();
    assert_eq!(env.package_paths(), expected);
    let Ok(LcmRequest::Instantiate(req)) = env.typed_request() else {
        panic!("typed")
    };
    let k = req
        .additional_params
        .unwrap()
        .k8s_cluster_installation_param
        .unwrap();
    let ss = k.storage_server.unwrap();
    assert_eq!(ss.nfs_server_setup_params.len(), 3);
    assert_eq!(ss.cinder_volume_setup_params[0].mount_to, "/volume");
    let debug = format!("{:?}", k.master_node);
    assert!(
        debug.contains("password: Secret(***)"),
        "password shown by Debug: {debug}"
    );
}

fn index() -> Vec<Value> {
    let text = std::fs::read_to_string(requests().join("bad/index.json")).unwrap();
    match serde_json::from_str::<Value>(&text).unwrap() {
        Value::Array(a) => a,
        other => panic!("index.json is not an array: {other}"),
    }
}

/// Bytes of a bad fixture: read, or generated from the `generate` recipe.
fn bad_bytes(entry: &Value) -> Vec<u8> {
    if let Some(g) = entry.get("generate") {
        let size = g["bytes"].as_u64().unwrap() as usize;
        let from = requests().join(g["from"].as_str().unwrap());
        let text = std::fs::read_to_string(&from).unwrap();
        let text = text.trim_end();
        let close = text.rfind('}').unwrap();
        let mut out = String::with_capacity(size);
        out.push_str(&text[..close]);
        out.push_str(&" ".repeat(size - text.len()));
        out.push('}');
        assert_eq!(out.len(), size);
        // Only the size is wrong: the padded document is valid JSON.
        serde_json::from_str::<Value>(&out).expect("generated oversize file is valid JSON");
        return out.into_bytes();
    }
    let file = entry["file"].as_str().unwrap();
    std::fs::read(requests().join("bad").join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn bad_fixtures_fail_at_the_indexed_pointer() {
    let index = index();
    assert!(
        index.len() >= 40,
        "need at least 40 bad fixtures, found {}",
        index.len()
    );
    for entry in &index {
        let file = entry["file"].as_str().unwrap();
        let pointer = entry["pointer"].as_str().unwrap();
        let bytes = bad_bytes(entry);
        let errors = match parse_envelope(&bytes) {
            Ok(p) => panic!("{file}: accepted (warnings: {:?})", p.warnings),
            Err(e) => e,
        };
        assert!(!errors.is_empty(), "{file}: empty error list");
        assert!(
            errors.iter().any(|e| e.pointer == pointer),
            "{file}: no error at {pointer:?}; got {errors:#?}"
        );
        let also: Vec<&str> = entry
            .get("also")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for p in &also {
            assert!(
                errors.iter().any(|e| e.pointer == *p),
                "{file}: no error at {p:?}"
            );
        }
        // One defect per file: no error elsewhere than the indexed pointers.
        for e in &errors {
            assert!(
                e.pointer == pointer || also.contains(&e.pointer.as_str()),
                "{file}: unexpected extra error {e:?}"
            );
            assert!(!e.reason.is_empty());
        }
        assert_no_secret(file, &bytes, &errors);
    }
}

#[test]
fn bad_index_and_directory_agree() {
    let index = index();
    let listed: Vec<&str> = index.iter().map(|e| e["file"].as_str().unwrap()).collect();
    let mut seen = std::collections::HashSet::new();
    for f in &listed {
        assert!(seen.insert(*f), "{f} listed twice");
    }
    for entry in &index {
        let f = entry["file"].as_str().unwrap();
        assert!(
            entry["defect"].as_str().is_some_and(|d| !d.is_empty()),
            "{f}: no defect"
        );
        let on_disk = requests().join("bad").join(f).is_file();
        assert_eq!(
            on_disk,
            entry.get("generate").is_none(),
            "{f}: generated xor on disk"
        );
    }
    for path in std::fs::read_dir(requests().join("bad")).unwrap() {
        let name = path.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            name == "index.json" || listed.contains(&name.as_str()),
            "{name} is not in index.json"
        );
    }
}

#[test]
fn oversize_is_rejected_before_parsing() {
    let mut bytes = vec![b' '; MAX_REQUEST_BYTES + 1];
    bytes[0] = b'{';
    let e = parse_envelope(&bytes).unwrap_err();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].pointer, "");
}

#[test]
fn secret_values_of_bad_fixtures_are_detected_by_the_checker() {
    // Guards the secret scan itself: it must find the proxy password of the seed body.
    let bytes =
        std::fs::read(requests().join("bad/k8s-http-proxy-port-out-of-range.json")).unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    let mut s = Vec::new();
    secrets(&v, "", false, &mut s);
    assert!(s.iter().any(|x| x == "password1"), "{s:?}");
    assert!(s.iter().any(|x| x == "ubuntu"), "{s:?}");
}
