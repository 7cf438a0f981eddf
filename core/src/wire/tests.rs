//! Table tests of `parse_envelope`: one rule per row, on variants of the seed fixtures.

use serde_json::{Value, json};

use super::*;

const PV: &str = include_str!("../../../fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
const CIR: &str =
    include_str!("../../../fixtures/requests/good/cir-k8s-cluster.20-instantiate.json");
const REG: &str =
    include_str!("../../../fixtures/requests/good/cir-k8s-cluster.10-registry-instantiate.json");
const SCALE: &str =
    include_str!("../../../fixtures/requests/good/pv-k8s-cluster.20-scale-out.json");
const HEAL: &str =
    include_str!("../../../fixtures/requests/good/pv-k8s-cluster.30-heal-worker.json");
const TERM: &str = include_str!("../../../fixtures/requests/good/pv-k8s-cluster.90-terminate.json");

const K8S: &str = "/request/additionalParams/k8s_cluster_installation_param";
const SS: &str = "/request/additionalParams/k8s_cluster_installation_param/storage_server";
const PRC: &str =
    "/request/additionalParams/k8s_cluster_installation_param/private_registry_connection_info";
const RI: &str = "/request/additionalParams/private_registry_installation_param";

/// `base` with the value at `pointer` replaced (`Some`) or removed (`None`).
fn edit(base: &str, pointer: &str, value: Option<Value>) -> Vec<u8> {
    let mut v: Value = serde_json::from_str(base).unwrap();
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let last = last.replace("~1", "/").replace("~0", "~");
    let target = v
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent}"));
    match (target, value) {
        (Value::Object(m), Some(x)) => {
            m.insert(last, x);
        }
        (Value::Object(m), None) => {
            m.shift_remove(&last)
                .unwrap_or_else(|| panic!("no {pointer}"));
        }
        (Value::Array(a), Some(x)) => a[last.parse::<usize>().unwrap()] = x,
        (Value::Array(a), None) => {
            a.remove(last.parse::<usize>().unwrap());
        }
        _ => panic!("{parent} is not a container"),
    }
    serde_json::to_vec(&v).unwrap()
}

fn errors(bytes: &[u8]) -> Vec<FieldError> {
    match parse_envelope(bytes) {
        Ok(p) => panic!("accepted; warnings {:?}", p.warnings),
        Err(e) => e,
    }
}

fn ok(bytes: &[u8]) -> Parsed {
    parse_envelope(bytes).unwrap_or_else(|e| panic!("rejected: {e:#?}"))
}

/// Every row: (base, pointer, new value or None to remove) must fail with errors at that
/// pointer or below it (for a replaced container), and nowhere else.
fn reject_table(rows: &[(&str, &str, Option<Value>)]) {
    for (base, pointer, value) in rows {
        let e = errors(&edit(base, pointer, value.clone()));
        let inside = format!("{pointer}/");
        assert!(
            e.iter()
                .all(|x| x.pointer == *pointer || x.pointer.starts_with(&inside)),
            "{pointer} = {value:?}: errors elsewhere: {e:#?}"
        );
        assert!(!e.is_empty());
    }
}

fn accept_table(rows: &[(&str, &str, Option<Value>)]) {
    for (base, pointer, value) in rows {
        let bytes = edit(base, pointer, value.clone());
        if let Err(e) = parse_envelope(&bytes) {
            panic!("{pointer} = {value:?} rejected: {e:#?}");
        }
    }
}

#[test]
fn file_level_defects_have_the_empty_pointer() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (Vec::new(), "empty"),
        (b"  \n\t ".to_vec(), "empty"),
        (b"[]".to_vec(), "JSON object"),
        (b"\"x\"".to_vec(), "JSON object"),
        (b"null".to_vec(), "JSON object"),
        (
            b"{\"operation\": \"SCALE\",\n  \"vnfInstanceId\": }".to_vec(),
            "line 2 column",
        ),
        (b"{} {}".to_vec(), "trailing"),
        (b"{\"a\": \"\xff\"}".to_vec(), "not UTF-8"),
        (vec![b' '; MAX_REQUEST_BYTES + 1], "1 MiB"),
    ];
    for (bytes, needle) in cases {
        let e = errors(&bytes);
        assert_eq!(e.len(), 1, "{needle}: {e:?}");
        assert_eq!(e[0].pointer, "");
        assert!(e[0].reason.contains(needle), "{needle}: {}", e[0].reason);
    }
}

#[test]
fn size_limit_is_exactly_max_request_bytes() {
    let mut text = SCALE.trim_end().to_string();
    let close = text.rfind('}').unwrap();
    let pad = MAX_REQUEST_BYTES - text.len();
    text.insert_str(close, &" ".repeat(pad));
    assert_eq!(text.len(), MAX_REQUEST_BYTES);
    ok(text.as_bytes());
    text.insert(close, ' ');
    assert_eq!(errors(text.as_bytes())[0].pointer, "");
}

#[test]
fn byte_order_mark_is_ignored_with_a_warning() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(SCALE.as_bytes());
    let p = ok(&bytes);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.pointer.is_empty() && w.reason.contains("byte order mark"))
    );
}

#[test]
fn envelope_rules() {
    reject_table(&[
        (PV, "/operation", Some(json!("DELETE"))),
        (PV, "/operation", None),
        (PV, "/operation", Some(json!(["INSTANTIATE"]))),
        (PV, "/vnfInstanceId", None),
        (PV, "/vnfInstanceId", Some(json!("a/b"))),
        (PV, "/vnfInstanceId", Some(json!(".x"))),
        (PV, "/vnfInstanceId", Some(json!("x".repeat(129)))),
        (PV, "/vnfInstanceId", Some(json!(42))),
        (PV, "/requestId", Some(json!("a b"))),
        (PV, "/requestId", Some(json!(""))),
        (PV, "/vnfPackage", None),
        (PV, "/vnfPackage", Some(json!(""))),
        (PV, "/vnfPackage", Some(json!("pkg\n"))),
        (PV, "/request", None),
        (PV, "/request", Some(json!([]))),
        (PV, "/extra", Some(json!(1))),
        (PV, "/vnfLcmOpOccId", Some(json!("op-1"))),
        (
            SCALE,
            "/vnfPackage",
            Some(json!("fixtures/packages/pv-k8s-cluster")),
        ),
    ]);
    accept_table(&[
        (PV, "/vnfInstanceId", Some(json!("x".repeat(128)))),
        (PV, "/vnfInstanceId", Some(json!("A.b_c-9"))),
        (PV, "/requestId", None),
        (
            PV,
            "/vnfPackage",
            Some(json!("/var/lib/vnfkeeper/packages/pv.zip")),
        ),
    ]);
}

#[test]
fn task_envelopes() {
    let p = ok(br#"{"operation": "ROLLBACK", "vnfLcmOpOccId": "op-7", "requestId": "r1"}"#);
    let Envelope::Task(t) = p.envelope else {
        panic!("not a task")
    };
    assert_eq!(t.operation, TaskOperation::Rollback);
    assert_eq!(t.vnf_lcm_op_occ_id, "op-7");
    assert_eq!(t.request_id.as_deref(), Some("r1"));
    let e = errors(br#"{"operation": "RETRY", "vnfLcmOpOccId": "../x", "request": {}}"#);
    let pointers: Vec<&str> = e.iter().map(|x| x.pointer.as_str()).collect();
    assert_eq!(pointers, ["/request", "/vnfLcmOpOccId"]);
}

#[test]
fn every_defect_is_reported_not_just_the_first() {
    let mut v: Value = serde_json::from_str(PV).unwrap();
    v["vnfInstanceId"] = json!("bad id");
    v["request"]["additionalParams"]["k8s_cluster_installation_param"]["master_node"]["pod_cidr"] =
        json!("10.0.0.0/99");
    v["request"]["additionalParams"]["k8s_cluster_installation_param"]["storage_server"]["nfs_server_setup_params"]
        [1]["export_to"] = json!("nowhere");
    v["request"]["additionalParams"]["k8s_cluster_installation_param"]["storage_server"]["cinder_volume_setup_params"]
        [0]["mount_to"] = json!("/v;reboot");
    let e = errors(&serde_json::to_vec(&v).unwrap());
    let pointers: Vec<&str> = e.iter().map(|x| x.pointer.as_str()).collect();
    for p in [
        "/vnfInstanceId".to_string(),
        format!("{K8S}/master_node/pod_cidr"),
        format!("{SS}/nfs_server_setup_params/1/export_to"),
        format!("{SS}/cinder_volume_setup_params/0/mount_to"),
    ] {
        assert!(
            pointers.contains(&p.as_str()),
            "{p} missing from {pointers:?}"
        );
    }
    assert_eq!(e.len(), 4, "{e:#?}");
}

#[test]
fn instantiate_body_rules() {
    reject_table(&[
        (PV, "/request/flavourId", None),
        (PV, "/request/flavourId", Some(json!(""))),
        (PV, "/request/flavourId", Some(json!(".."))),
        (PV, "/request/instantiationLevelId", Some(json!(3))),
        (PV, "/request/localizationLanguage", Some(json!(""))),
        (PV, "/request/flavorId", Some(json!("simple"))),
        (PV, "/request/extVirtualLinks", Some(json!({}))),
        (PV, "/request/extVirtualLinks/0/id", None),
        (PV, "/request/extVirtualLinks/0/extCps", None),
        (PV, "/request/extVirtualLinks/0/extCps", Some(json!([]))),
        (
            PV,
            "/request/extVirtualLinks/0/extCps/0/cpdId",
            Some(json!("a b")),
        ),
        (
            PV,
            "/request/extVirtualLinks/0/extCps/0/cpConfig",
            Some(json!([])),
        ),
        (
            PV,
            "/request/extVirtualLinks/0/extCps/0/cpConfig",
            Some(json!("x")),
        ),
        (
            PV,
            "/request/extVirtualLinks/0/extCps/0/cpConfig/0/cpProtocolData/0/layerProtocol",
            Some(json!("IP")),
        ),
        (
            PV,
            "/request/extManagedVirtualLinks",
            Some(json!([{"id": "m"}])),
        ),
        (PV, "/request/vimConnectionInfo", Some(json!("openstack"))),
        (PV, "/request/vimConnectionInfo/0/id", None),
        (PV, "/request/vimConnectionInfo/0/vimType", None),
        (
            PV,
            "/request/vimConnectionInfo/0/accessInfo",
            Some(json!("secret")),
        ),
        (PV, "/request/additionalParams", Some(json!([]))),
        (
            PV,
            "/request/additionalParams/lcm-operation-user-data",
            None,
        ),
        (
            PV,
            "/request/additionalParams/lcm-operation-user-data-class",
            None,
        ),
        (
            PV,
            "/request/additionalParams/lcm-operation-user-data-class",
            Some(json!("a.B")),
        ),
        (
            PV,
            "/request/additionalParams/lcm-operation-user-data",
            Some(json!("../u.py")),
        ),
        (PV, "/request/additionalParams/nfv", Some(json!("x"))),
    ]);
    accept_table(&[
        // v3.3.1 map forms.
        (
            PV,
            "/request/vimConnectionInfo",
            Some(
                json!({"vim1": {"vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3", "accessInfo": {"password": "p"}}}),
            ),
        ),
        (
            PV,
            "/request/extVirtualLinks/0/extCps/0/cpConfig",
            Some(json!({"c1": {"cpProtocolData": [{"layerProtocol": "IP_OVER_ETHERNET"}]}})),
        ),
        (
            PV,
            "/request/extVirtualLinks/0/extCps/0/cpConfig/0/cpProtocolData/0",
            Some(
                json!({"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "fixedAddresses": ["10.10.0.5"], "subnetId": "s"}]}}),
            ),
        ),
        (
            PV,
            "/request/extManagedVirtualLinks",
            Some(json!([{"id": "m", "vnfVirtualLinkDescId": "internalVL1", "resourceId": "n"}])),
        ),
        (
            PV,
            "/request/instantiationLevelId",
            Some(json!("instantiation_level_2")),
        ),
        (PV, "/request/additionalParams", None),
        (PV, "/request/vimConnectionInfo", None),
    ]);
}

#[test]
fn k8s_cluster_installation_param_rules() {
    reject_table(&[
        (PV, K8S, Some(json!("x"))),
        (PV, &format!("{K8S}/script_path"), None),
        (PV, &format!("{K8S}/script_path"), Some(json!("/bin/sh"))),
        (
            PV,
            &format!("{K8S}/script_path"),
            Some(json!("Scripts/../../x.sh")),
        ),
        (
            PV,
            &format!("{K8S}/script_path"),
            Some(json!("Scripts/a b.sh")),
        ),
        (PV, &format!("{K8S}/vim_name"), Some(json!(""))),
        (PV, &format!("{K8S}/master_node"), None),
        (PV, &format!("{K8S}/worker_node"), Some(json!(null))),
        (PV, &format!("{K8S}/master_node/ssh_cp_name"), None),
        (
            PV,
            &format!("{K8S}/master_node/nic_cp_name"),
            Some(json!("")),
        ),
        (PV, &format!("{K8S}/master_node/cluster_cp_name"), None),
        (
            PV,
            &format!("{K8S}/master_node/username"),
            Some(json!("root;id")),
        ),
        (
            PV,
            &format!("{K8S}/master_node/username"),
            Some(json!("9lives")),
        ),
        (PV, &format!("{K8S}/master_node/password"), None),
        (PV, &format!("{K8S}/master_node/password"), Some(json!(""))),
        (
            PV,
            &format!("{K8S}/master_node/password"),
            Some(json!(true)),
        ),
        (
            PV,
            &format!("{K8S}/master_node/pod_cidr"),
            Some(json!("192.168.0.0")),
        ),
        (
            PV,
            &format!("{K8S}/master_node/pod_cidr"),
            Some(json!("192.168.0.0/33")),
        ),
        (
            PV,
            &format!("{K8S}/master_node/cluster_cidr"),
            Some(json!("10.96.0.0/1x")),
        ),
        (
            PV,
            &format!("{K8S}/worker_node/username"),
            Some(json!("Ubuntu")),
        ),
        (
            PV,
            &format!("{K8S}/proxy/k8s_node_cidr"),
            Some(json!("10.10.0.0/24,10.0.0.0/8")),
        ),
        (
            PV,
            &format!("{K8S}/proxy/no_proxy"),
            Some(json!("10.0.0.1,10.0.0.0/40")),
        ),
        (PV, &format!("{K8S}/proxy/no_proxy"), Some(json!("a b"))),
        (
            PV,
            &format!("{K8S}/proxy/http_proxy"),
            Some(json!("proxy:3128")),
        ),
        (
            PV,
            &format!("{K8S}/proxy/https_proxy"),
            Some(json!("socks5://h:1080")),
        ),
        (
            PV,
            &format!("{K8S}/proxy/http_proxy"),
            Some(json!("http://h:0")),
        ),
    ]);
    accept_table(&[
        (PV, &format!("{K8S}/master_node/pod_cidr"), None),
        (
            PV,
            &format!("{K8S}/master_node/pod_cidr"),
            Some(json!("fd00:10::/56")),
        ),
        (PV, &format!("{K8S}/proxy"), None),
        (
            PV,
            &format!("{K8S}/proxy/http_proxy"),
            Some(json!("http://proxy.example.com:3128")),
        ),
        (
            PV,
            &format!("{K8S}/proxy/no_proxy"),
            Some(json!("localhost, .svc,10.0.0.1,")),
        ),
        (
            PV,
            &format!("{K8S}/script_path"),
            Some(json!("./Scripts/install_k8s_cluster.sh")),
        ),
        (
            PV,
            &format!("{K8S}/master_node/unknown_future_key"),
            Some(json!({"x": 1})),
        ),
    ]);
}

#[test]
fn storage_server_and_pv_rules() {
    reject_table(&[
        (PV, &format!("{SS}/ssh_cp_name"), None),
        (PV, &format!("{SS}/username"), Some(json!("ubuntu user"))),
        (PV, &format!("{SS}/password"), Some(json!(null))),
        (PV, &format!("{SS}/cinder_volume_setup_params"), None),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params"),
            Some(json!([])),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params"),
            Some(json!([])),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0"),
            Some(json!("x")),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0/volume_resource_id"),
            Some(json!("vol;1")),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0/mount_to"),
            Some(json!("/")),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0/mount_to"),
            Some(json!("/volume/./x")),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0/mount_to"),
            Some(json!("/vol`x`")),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0/mount_to"),
            Some(json!("/vol\tx")),
        ),
        (
            PV,
            &format!("{SS}/cinder_volume_setup_params/0/mount_to"),
            Some(json!("/vol|x")),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_dir"),
            Some(json!("/volume/nfs/pv1/")),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_dir"),
            Some(json!("/volume/nfs/$(id)")),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_dir"),
            Some(json!("/volume/nfs/../../etc")),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_to"),
            Some(json!("*")),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_to"),
            Some(json!("10.10.0.0/24 10.20.0.0/24")),
        ),
        (
            PV,
            &format!("{K8S}/pv_registration_params/0/pv_manifest_file_path"),
            Some(json!("/etc/kubernetes/pv.yaml")),
        ),
        (
            PV,
            &format!("{K8S}/pv_registration_params/0/pv_manifest_file_path"),
            Some(json!("")),
        ),
        (
            PV,
            &format!("{K8S}/pv_registration_params/2/nfs_server_cp"),
            None,
        ),
        (
            PV,
            &format!("{K8S}/pv_registration_params/1"),
            Some(json!(["x"])),
        ),
    ]);
    accept_table(&[
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_to"),
            Some(json!("10.10.0.7")),
        ),
        (
            PV,
            &format!("{SS}/nfs_server_setup_params/0/export_to"),
            Some(json!("fd00::/64")),
        ),
        (PV, &format!("{K8S}/pv_registration_params"), None),
        (
            PV,
            &format!("{K8S}/pv_registration_params"),
            Some(json!([])),
        ),
        (PV, &format!("{K8S}/storage_server"), None),
    ]);
}

#[test]
fn storage_server_cross_checks() {
    // Two volumes on one mount point, or one volume twice: errors.
    let mut v: Value = serde_json::from_str(PV).unwrap();
    let ss =
        &mut v["request"]["additionalParams"]["k8s_cluster_installation_param"]["storage_server"];
    ss["cinder_volume_setup_params"]
        .as_array_mut()
        .unwrap()
        .push(json!({"volume_resource_id": "storage_server_volume", "mount_to": "/volume2"}));
    let e = errors(&serde_json::to_vec(&v).unwrap());
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].pointer,
        format!("{SS}/cinder_volume_setup_params/1/volume_resource_id")
    );
    // An export outside every mount point (`/etc`, or a sibling sharing a prefix): rejected,
    // naming the field and the mount points; one under a mount point or the mount point: fine.
    let w = format!("{SS}/nfs_server_setup_params/0/export_dir");
    for outside in ["/etc", "/srv/nfs", "/volume-other", "/volum"] {
        let e = errors(&edit(PV, &w, Some(json!(outside))));
        assert_eq!(e.len(), 1, "{outside}: {e:?}");
        assert_eq!(e[0].pointer, w);
        assert!(
            e[0].reason.contains("outside every mount_to (/volume)")
                && e[0].reason.contains("root disk"),
            "{}",
            e[0].reason
        );
    }
    for inside in ["/volume", "/volume/nfs/pv1"] {
        ok(&edit(PV, &w, Some(json!(inside))));
    }
}

#[test]
fn seed_normalisations_are_warnings() {
    let p = ok(PV.as_bytes());
    let ptrs: Vec<&str> = p.warnings.iter().map(|w| w.pointer.as_str()).collect();
    assert_eq!(
        ptrs,
        [
            format!("{K8S}/master_node/aspect_id"),
            format!("{K8S}/master_node/pod_cidr"),
            format!("{K8S}/worker_node/aspect_id"),
            format!("{K8S}/proxy/http_proxy"),
            format!("{K8S}/proxy/https_proxy"),
            format!("{K8S}/proxy/k8s_node_cidr"),
        ]
    );
    // What vnfkeeper accepts without acting on it says so (never silently ignored).
    for i in [0, 2, 5] {
        assert!(
            p.warnings[i].reason.contains("is not acted on: "),
            "{}",
            p.warnings[i].reason
        );
    }
    assert!(p.warnings[1].reason.contains("192.168.0.0/16"));
    for w in &p.warnings[3..5] {
        assert!(
            !w.reason.contains("password")
                && !w.reason.contains("user1")
                && !w.reason.contains("host1"),
            "{}",
            w.reason
        );
    }
    // Host bits in a no_proxy CIDR and in export_to are warnings too.
    let p = ok(&edit(
        PV,
        &format!("{K8S}/proxy/no_proxy"),
        Some(json!("192.168.246.1/24")),
    ));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.pointer.ends_with("/no_proxy") && w.reason.contains("192.168.246.0/24"))
    );
    let p = ok(&edit(
        PV,
        &format!("{SS}/nfs_server_setup_params/0/export_to"),
        Some(json!("10.10.0.9/24")),
    ));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.pointer.ends_with("/0/export_to"))
    );
}

#[test]
fn ansible_and_external_lb_rules() {
    let ks = include_str!(
        "../../../fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json"
    );
    let a = format!("{K8S}/ansible");
    let lb = format!("{K8S}/external_lb_param");
    reject_table(&[
        (ks, &format!("{a}/ip_address"), Some(json!("0.0.0.0"))),
        (ks, &format!("{a}/ip_address"), Some(json!("10.0.0.1:22"))),
        (
            ks,
            &format!("{a}/ip_address"),
            Some(json!("ansible.example.com")),
        ),
        (ks, &format!("{a}/username"), Some(json!("Ansible"))),
        (ks, &format!("{a}/password"), None),
        (ks, &format!("{a}/kubespray_root_path"), Some(json!(""))),
        (
            ks,
            &format!("{a}/kubespray_root_path"),
            Some(json!("kubespray")),
        ),
        (
            ks,
            &format!("{a}/transferring_inventory_path"),
            Some(json!("/tmp/inv;rm -rf ~")),
        ),
        (ks, &format!("{lb}/ssh_cp_name"), None),
        (
            ks,
            &format!("{lb}/ssh_username"),
            Some(json!("-oProxyCommand=x")),
        ),
        (ks, &format!("{lb}/ssh_password"), Some(json!(""))),
        (ks, &format!("{lb}/script_path"), Some(json!("/tmp/lb.sh"))),
    ]);
    accept_table(&[
        (ks, &format!("{a}/ip_address"), Some(json!("fd00::50"))),
        (ks, &lb, None),
    ]);
    // Without `ansible` the request is the kubeadm-script cluster, which has no external load
    // balancer: refused at the load balancer's parameters, not ignored.
    let e = errors(&edit(ks, &a, None));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].pointer, lb);
    assert!(
        e[0].reason.contains("only with `ansible`"),
        "{}",
        e[0].reason
    );
}

#[test]
fn private_registry_rules() {
    reject_table(&[
        (REG, RI, None.or(Some(json!(7)))),
        (REG, &format!("{RI}/ssh_cp_name"), None),
        (REG, &format!("{RI}/ssh_username"), None),
        (REG, &format!("{RI}/ssh_password"), Some(json!(""))),
        (
            REG,
            &format!("{RI}/image_path"),
            Some(json!("/images/r.tar")),
        ),
        (REG, &format!("{RI}/port_no"), Some(json!(0))),
        (REG, &format!("{RI}/port_no"), Some(json!(65536))),
        (REG, &format!("{RI}/port_no"), Some(json!(5000.5))),
        (REG, &format!("{RI}/port_no"), Some(json!("5000"))),
        (
            REG,
            &format!("{RI}/proxy"),
            Some(json!({"http_proxy": "h:1"})),
        ),
        (CIR, &format!("{PRC}/0/connection_type"), Some(json!("2"))),
        (
            CIR,
            &format!("{PRC}/0/connection_type"),
            Some(json!("HTTP")),
        ),
        (CIR, &format!("{PRC}/0/connection_type"), Some(json!(-1))),
        (CIR, &format!("{PRC}/0/connection_type"), None),
        (
            CIR,
            &format!("{PRC}/0/server"),
            Some(json!("192.168.0.10:5000/v2")),
        ),
        (
            CIR,
            &format!("{PRC}/0/server"),
            Some(json!("192.168.0.10:65536")),
        ),
        (CIR, &format!("{PRC}/0/server"), Some(json!("reg istry"))),
        (CIR, &format!("{PRC}/1/password"), None),
        (CIR, &format!("{PRC}/1/password"), Some(json!(""))),
        (
            CIR,
            &format!("{PRC}/1/certificate_path"),
            Some(json!("Files/../../../ca.crt")),
        ),
        (
            CIR,
            &format!("{PRC}/1/hosts_string"),
            Some(json!("registry.example.com")),
        ),
        (
            CIR,
            &format!("{PRC}/1/hosts_string"),
            Some(json!("192.168.0.20 reg;x")),
        ),
        (CIR, PRC, Some(json!({}))),
    ]);
    accept_table(&[
        (REG, &format!("{RI}/port_no"), Some(json!(65535))),
        (REG, &format!("{RI}/image_path"), None),
        (
            REG,
            &format!("{RI}/proxy"),
            Some(json!({"http_proxy": "http://p:3128", "no_proxy": "10.0.0.0/8"})),
        ),
        (CIR, &format!("{PRC}/0/connection_type"), Some(json!(0))),
        (CIR, &format!("{PRC}/1/connection_type"), Some(json!(1))),
        (
            CIR,
            &format!("{PRC}/0/server"),
            Some(json!("[fd00::10]:5000")),
        ),
        (CIR, PRC, Some(json!([]))),
        (
            CIR,
            &format!("{PRC}/1/username"),
            None.or(Some(json!("Registry.User@example"))),
        ),
    ]);
    // certificate_path on an HTTP registry is only a warning.
    let p = ok(&edit(
        CIR,
        &format!("{PRC}/0/certificate_path"),
        Some(json!("Files/registries/ca.crt")),
    ));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.pointer == format!("{PRC}/0/certificate_path"))
    );
}

#[test]
fn scale_heal_terminate_rules() {
    reject_table(&[
        (SCALE, "/request/type", None),
        (SCALE, "/request/type", Some(json!("scale_out"))),
        (SCALE, "/request/aspectId", Some(json!(""))),
        (SCALE, "/request/numberOfSteps", Some(json!(0))),
        (SCALE, "/request/numberOfSteps", Some(json!(1.5))),
        (
            SCALE,
            "/request/numberOfSteps",
            Some(json!(4_294_967_296_u64)),
        ),
        (SCALE, "/request/additionalParams", Some(json!(1))),
        (SCALE, "/request/scaleLevel", Some(json!(1))),
        (HEAL, "/request/vnfcInstanceId", Some(json!([1]))),
        (HEAL, "/request/vnfcInstanceId/0", Some(json!("a b"))),
        (HEAL, "/request/cause", Some(json!(""))),
        (HEAL, "/request/cause", Some(json!(["x"]))),
        (HEAL, "/request/additionalParams", Some(json!({"all": 1}))),
        (TERM, "/request/terminationType", Some(json!("graceful"))),
        (
            TERM,
            "/request/gracefulTerminationTimeout",
            Some(json!("120")),
        ),
        (TERM, "/request/gracefulTerminationTimeout", Some(json!(-1))),
        (TERM, "/request/additionalParams", Some(json!([]))),
    ]);
    accept_table(&[
        (SCALE, "/request/numberOfSteps", None),
        (
            SCALE,
            "/request/additionalParams",
            Some(json!({"anything": {"kept": true}})),
        ),
        (HEAL, "/request/vnfcInstanceId", Some(json!([]))),
        (
            HEAL,
            "/request/additionalParams",
            Some(json!({"all": true, "other": 1})),
        ),
        (TERM, "/request/gracefulTerminationTimeout", Some(json!(0))),
        (TERM, "/request/gracefulTerminationTimeout", None),
    ]);
    let dup = edit(HEAL, "/request/vnfcInstanceId", Some(json!(["a", "a"])));
    assert_eq!(errors(&dup)[0].pointer, "/request/vnfcInstanceId/1");
}

#[test]
fn typed_requests() {
    let Envelope::Lcm(env) = ok(&edit(SCALE, "/request/numberOfSteps", None)).envelope else {
        panic!()
    };
    let Ok(LcmRequest::Scale(s)) = env.typed_request() else {
        panic!()
    };
    assert_eq!(
        (s.scale_type, s.number_of_steps, s.aspect_id.as_str()),
        (ScaleType::ScaleOut, 1, "worker_instance")
    );

    let Envelope::Lcm(env) = ok(TERM.as_bytes()).envelope else {
        panic!()
    };
    let Ok(LcmRequest::Terminate(t)) = env.typed_request() else {
        panic!()
    };
    assert_eq!(
        (t.termination_type, t.graceful_termination_timeout),
        (TerminationType::Graceful, Some(120))
    );

    let Envelope::Lcm(env) = ok(HEAL.as_bytes()).envelope else {
        panic!()
    };
    let Ok(LcmRequest::Heal(h)) = env.typed_request() else {
        panic!()
    };
    assert_eq!(h.vnfc_instance_id, ["vnfc-workerNode-1"]);

    let Envelope::Lcm(env) = ok(CIR.as_bytes()).envelope else {
        panic!()
    };
    let Ok(LcmRequest::Instantiate(i)) = env.typed_request() else {
        panic!()
    };
    let k = i
        .additional_params
        .as_ref()
        .unwrap()
        .k8s_cluster_installation_param
        .as_ref()
        .unwrap();
    let regs = &k.private_registry_connection_info;
    assert_eq!(regs[0].connection_type, ConnectionType::Http);
    assert_eq!(regs[1].connection_type, ConnectionType::Https);
    assert_eq!(regs[1].password.as_ref().unwrap().expose(), "user01");
    assert!(
        !format!("{regs:?}").contains("user01"),
        "registry credentials in Debug output"
    );

    let Envelope::Lcm(env) = ok(REG.as_bytes()).envelope else {
        panic!()
    };
    let Ok(LcmRequest::Instantiate(i)) = env.typed_request() else {
        panic!()
    };
    let r = i
        .additional_params
        .unwrap()
        .private_registry_installation_param
        .unwrap();
    assert_eq!(r.port(), 5000);
    assert_eq!(
        r.image_path.as_deref(),
        Some("Files/images/private_registry.tar")
    );
}

#[test]
fn unknown_additional_params_keys_are_kept() {
    let mut v: Value = serde_json::from_str(PV).unwrap();
    let ap = &mut v["request"]["additionalParams"];
    ap["vendor_x"] = json!({"a": 1});
    ap["k8s_cluster_installation_param"]["helm_node"] = json!({"aspect_id": "helm"});
    ap["k8s_cluster_installation_param"]["storage_server"]["nfs_server_setup_params"][0]["options"] =
        json!("rw,sync");
    let bytes = serde_json::to_vec(&v).unwrap();
    let Envelope::Lcm(env) = ok(&bytes).envelope else {
        panic!()
    };
    // Stored verbatim, extras included.
    assert_eq!(env.request, v["request"]);
    let Ok(LcmRequest::Instantiate(i)) = env.typed_request() else {
        panic!()
    };
    let ap = i.additional_params.unwrap();
    assert_eq!(ap.extra["vendor_x"], json!({"a": 1}));
    let k = ap.k8s_cluster_installation_param.unwrap();
    assert!(k.extra.contains_key("helm_node"));
    assert_eq!(
        k.storage_server.unwrap().nfs_server_setup_params[0].extra["options"],
        json!("rw,sync")
    );
}

#[test]
fn package_paths_are_normalised_and_only_for_instantiate() {
    let Envelope::Lcm(env) = ok(CIR.as_bytes()).envelope else {
        panic!()
    };
    let paths = env.package_paths();
    assert_eq!(
        paths,
        [
            (
                format!("{K8S}/script_path"),
                "Scripts/install_k8s_cluster.sh".to_string()
            ),
            (
                format!("{PRC}/1/certificate_path"),
                "Files/registries/ca.crt".to_string()
            ),
            (
                "/request/additionalParams/lcm-operation-user-data".to_string(),
                "UserData/k8s_cluster_user_data.py".to_string()
            ),
        ]
    );
    let Envelope::Lcm(env) = ok(SCALE.as_bytes()).envelope else {
        panic!()
    };
    assert!(env.package_paths().is_empty());
    // A hand-built envelope with a bad path: the path is left out, not returned.
    let mut v: Value = serde_json::from_str(CIR).unwrap();
    v["request"]["additionalParams"]["k8s_cluster_installation_param"]["script_path"] =
        json!("../x");
    let env = LcmEnvelope {
        operation: LcmOperation::Instantiate,
        vnf_instance_id: "x".into(),
        vnf_package: Some("p".into()),
        request_id: None,
        request: v["request"].clone(),
    };
    assert_eq!(env.package_paths().len(), 2);
}

#[test]
fn reasons_never_contain_secret_values() {
    const S: &str = "Zq9-secret-VALUE";
    let url = format!("ftp://admin:{S}@proxy:3128");
    let cases: Vec<(&str, String, Value)> = vec![
        (PV, format!("{K8S}/proxy/http_proxy"), json!(url)),
        (
            PV,
            format!("{K8S}/proxy/https_proxy"),
            json!(format!("https://u:{S}@h:99999")),
        ),
        (
            PV,
            format!("{K8S}/proxy/http_proxy"),
            json!(format!("u:{S}@h:1")),
        ),
        (
            PV,
            format!("{K8S}/proxy/http_proxy"),
            json!(format!("http://u:{S} x@h:1")),
        ),
        (PV, format!("{K8S}/master_node/password"), json!([S])),
        (CIR, format!("{PRC}/1/password"), json!({ "v": S })),
        (
            CIR,
            format!("{PRC}/1/hosts_string"),
            json!(format!("{S} registry.example.com")),
        ),
        (
            PV,
            "/request/vimConnectionInfo/0/accessInfo".into(),
            json!(S),
        ),
        (PV, "/request/vimConnectionInfo/0/vimId".into(), json!(7)),
    ];
    for (base, pointer, value) in cases {
        let mut v: Value = serde_json::from_slice(&edit(base, &pointer, Some(value))).unwrap();
        // Also plant the secret where a valid secret field sits.
        v["request"]["additionalParams"]["k8s_cluster_installation_param"]["worker_node"]["password"] =
            json!(S);
        let bytes = serde_json::to_vec(&v).unwrap();
        let reasons = match parse_envelope(&bytes) {
            Ok(p) => p.warnings,
            Err(e) => e,
        };
        let inside = format!("{pointer}/");
        assert!(
            reasons
                .iter()
                .any(|r| r.pointer == pointer || r.pointer.starts_with(&inside)),
            "{pointer}: {reasons:?}"
        );
        for r in reasons {
            assert!(
                !r.reason.contains("secret-VALUE"),
                "{pointer}: {}",
                r.reason
            );
        }
    }
}

const KUBESPRAY: &str =
    include_str!("../../../fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json");

/// Every good fixture: each secret pointer names a secret field, the redacted file holds none of
/// the values, restoring gives the request back, and redaction by name hides the same values.
#[test]
fn every_secret_of_every_good_fixture_is_redacted_and_restored() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/requests/good");
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let Envelope::Lcm(env) = ok(&bytes).envelope else {
            continue;
        };
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        let ptrs = env.secret_pointers();
        for p in &ptrs {
            let last = p.rsplit('/').next().unwrap();
            assert!(
                [
                    "password",
                    "ssh_password",
                    "http_proxy",
                    "https_proxy",
                    "accessInfo",
                    "username"
                ]
                .contains(&last),
                "{}: {p} is not a secret field",
                path.display()
            );
        }
        let (red, secrets) = redact::redact(&doc, &ptrs);
        assert_eq!(secrets.pointers().count(), ptrs.len());
        let text = red.to_string();
        // A secret value may equal a non-secret one (password "ubuntu" of user "ubuntu"): every
        // occurrence that was a secret is gone.
        let original = doc.to_string();
        for v in secrets.expose().values() {
            if let Value::String(s) = v {
                let quoted = format!("\"{s}\"");
                let as_secret = secrets.expose().values().filter(|x| *x == v).count();
                assert_eq!(
                    text.matches(&quoted).count(),
                    original.matches(&quoted).count() - as_secret,
                    "{}: a secret is left",
                    path.display()
                );
            }
        }
        let mut back = red.clone();
        redact::restore(&mut back, &secrets).unwrap();
        assert_eq!(back, doc, "{}", path.display());
        let (by_name, n) = redact::redact_by_name(&doc);
        assert_eq!(
            by_name,
            red,
            "{}: by-name redaction differs",
            path.display()
        );
        assert_eq!(n, ptrs.len());
        // The body-relative pointers are the envelope's without `/request`.
        let body_ptrs = request_secret_pointers(env.operation, &env.request);
        let prefixed: Vec<String> = body_ptrs.iter().map(|p| format!("/request{p}")).collect();
        assert_eq!(prefixed, ptrs);
        total += ptrs.len();
    }
    assert!(total >= 18, "only {total} secrets in the good fixtures");
}

/// One request carrying every secret field of every flavour (both `vimConnectionInfo` forms):
/// exactly these pointers, in document order.
#[test]
fn secret_pointers_name_every_secret_field() {
    let mut v: Value = serde_json::from_str(KUBESPRAY).unwrap();
    let k8s = v.pointer_mut(K8S).unwrap().as_object_mut().unwrap();
    k8s.insert(
        "private_registry_connection_info".into(),
        json!([{"connection_type": "0", "server": "10.0.0.5:5000", "username": "ru", "password": "rp"},
               {"connection_type": 1, "server": "10.0.0.6:5000"}]),
    );
    v["request"]["vimConnectionInfo"] = json!([
        {"id": "v1", "vimType": "openstack", "accessInfo": {"password": "vp", "username": "vu"}},
        {"id": "v2", "vimType": "openstack"}
    ]);
    let env = match ok(&serde_json::to_vec(&v).unwrap()).envelope {
        Envelope::Lcm(e) => e,
        Envelope::Task(_) => unreachable!(),
    };
    let mut got = env.secret_pointers();
    got.sort();
    let mut want: Vec<String> = [
        format!("{K8S}/ansible/password"),
        format!("{K8S}/master_node/password"),
        format!("{K8S}/worker_node/password"),
        format!("{K8S}/proxy/http_proxy"),
        format!("{K8S}/proxy/https_proxy"),
        format!("{K8S}/external_lb_param/ssh_password"),
        format!("{PRC}/0/username"),
        format!("{PRC}/0/password"),
        "/request/vimConnectionInfo/0/accessInfo".into(),
    ]
    .into_iter()
    .collect();
    want.sort();
    assert_eq!(got, want);

    // The storage server's password (the kubeadm-script cluster's own parameter).
    let pv = match ok(PV.as_bytes()).envelope {
        Envelope::Lcm(e) => e,
        Envelope::Task(_) => unreachable!(),
    };
    assert!(pv.secret_pointers().contains(&format!("{SS}/password")));

    // The map form of vimConnectionInfo (SOL003 v3.3.1) and the registry VNF's parameters.
    let mut r: Value = serde_json::from_str(REG).unwrap();
    r["request"]["vimConnectionInfo"] =
        json!({"vim1": {"vimType": "openstack", "accessInfo": {"password": "x"}}});
    r.pointer_mut(RI).unwrap()["proxy"] = json!({"http_proxy": "http://u:p@10.0.0.1:3128"});
    let env = match ok(&serde_json::to_vec(&r).unwrap()).envelope {
        Envelope::Lcm(e) => e,
        Envelope::Task(_) => unreachable!(),
    };
    assert_eq!(
        env.secret_pointers(),
        [
            "/request/vimConnectionInfo/vim1/accessInfo".to_owned(),
            format!("{RI}/ssh_password"),
            format!("{RI}/proxy/http_proxy"),
        ]
    );
    // Bodies without secrets.
    for body in [SCALE, HEAL, TERM] {
        let Envelope::Lcm(env) = ok(body.as_bytes()).envelope else {
            unreachable!()
        };
        assert!(env.secret_pointers().is_empty());
    }
}

#[test]
fn maintenance_pause_at_instantiate_is_checked_and_typed() {
    const MP: &str = "/request/additionalParams/maintenance_pause";
    let good = edit(
        PV,
        MP,
        Some(json!({"reason": "burn-in", "until": "2026-11-25T06:00:00Z"})),
    );
    let Envelope::Lcm(env) = ok(&good).envelope else {
        panic!()
    };
    let Ok(LcmRequest::Instantiate(i)) = env.typed_request() else {
        panic!()
    };
    let mp = i.additional_params.unwrap().maintenance_pause.unwrap();
    assert_eq!(mp.reason.as_deref(), Some("burn-in"));
    assert_eq!(mp.until.as_deref(), Some("2026-11-25T06:00:00Z"));
    for (bad, ptr) in [
        (json!({"until": "tomorrow"}), format!("{MP}/until")),
        (json!({"reason": "a\nb"}), format!("{MP}/reason")),
        (json!({"who": "me"}), format!("{MP}/who")),
        (json!(true), MP.to_string()),
    ] {
        let errs = errors(&edit(PV, MP, Some(bad.clone())));
        assert!(errs.iter().any(|e| e.pointer == ptr), "{bad}: {errs:?}");
    }
}

/// A ChangeExtVnfConnectivityRequest's `vimConnectionInfo[].accessInfo` is a secret (pointer
/// reported, value never in a reason), as in an InstantiateVnfRequest; the body types.
#[test]
fn change_ext_conn_access_info_is_a_secret() {
    let v = json!({
        "operation": "CHANGE_EXT_CONN",
        "vnfInstanceId": "vnf-1",
        "request": {
            "extVirtualLinks": [{"id": "e", "resourceId": "net-2", "extCps": [
                {"cpdId": "CP1", "cpConfig": [{"cpProtocolData": [
                    {"layerProtocol": "IP_OVER_ETHERNET"}]}]}]}],
            "vimConnectionInfo": {"vim1": {"vimType": "openstack",
                                           "accessInfo": {"password": "hunter2"}}}
        }
    });
    let env = match ok(&serde_json::to_vec(&v).unwrap()).envelope {
        Envelope::Lcm(e) => e,
        Envelope::Task(_) => unreachable!(),
    };
    assert_eq!(
        env.secret_pointers(),
        ["/request/vimConnectionInfo/vim1/accessInfo"]
    );
    let Ok(LcmRequest::ChangeExtConn(r)) = env.typed_request() else {
        panic!("not a ChangeExtVnfConnectivityRequest");
    };
    assert_eq!(r.ext_virtual_links[0].ext_cps[0].cpd_id, "CP1");
    // A defect elsewhere: the reasons never carry the secret.
    let mut bad = v.clone();
    bad["request"]["extVirtualLinks"][0]["extCps"][0]["cpdId"] = json!(7);
    let errs = parse_envelope(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
    assert!(!errs.is_empty());
    assert!(
        errs.iter().all(|e| !e.reason.contains("hunter2")),
        "{errs:?}"
    );
}
