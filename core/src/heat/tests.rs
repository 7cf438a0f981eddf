//! Golden tests over `fixtures/heat/` and error tests. `UPDATE_GOLDEN=1 cargo test --lib heat`
//! rewrites the expected files of the two-VDU fixture (review the diff before committing).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::package::VnfPackage;
use crate::wire::{Envelope, parse_envelope};

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("fixtures/heat")
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn read_yaml(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn instantiate_request(p: &Path) -> InstantiateVnfRequest {
    let bytes = std::fs::read(p).unwrap();
    let Envelope::Lcm(env) = parse_envelope(&bytes).unwrap().envelope else {
        panic!("not LCM")
    };
    match env.typed_request().unwrap() {
        crate::wire::LcmRequest::Instantiate(r) => *r,
        other => panic!("{other:?}"),
    }
}

fn grant(p: &Path) -> Grant {
    serde_json::from_value(read_json(p)).unwrap()
}

fn load(dir: &str) -> (VnfPackage, BaseHot) {
    let pkg = VnfPackage::load(&root().join(dir).join("package")).unwrap();
    let base = pkg.base_hot("simple").unwrap();
    (pkg, base)
}

fn strip_nulls(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, x| !x.is_null());
        m.values_mut().for_each(strip_nulls);
    }
}

/// Checks the patches against the current stack, then returns a comparable summary.
fn checked(input: Input<'_>, a: &Adjusted, instantiate: bool) -> Value {
    let (t0, n0) = if instantiate {
        (json!({}), json!({}))
    } else {
        current_stack(input).unwrap()
    };
    assert_eq!(
        merge::apply(&t0, &a.template_patch),
        a.template,
        "template patch"
    );
    // A merge patch cannot set a null: from the empty stack it leaves those keys out.
    let mut want = a.nfv.clone();
    if instantiate {
        strip_nulls(&mut want);
    }
    assert_eq!(merge::apply(&n0, &a.nfv_patch), want, "nfv patch");
    json!({
        "created": a.created, "removed": a.removed, "healed": a.healed,
        "image_changed": a.image_changed,
        "vnfcs": a.vnfcs.iter().map(Vnfc::name).collect::<Vec<_>>(),
        "grant_request": a.grant_request,
        "template_patch": a.template_patch,
        "nfv_patch": a.nfv_patch,
        "resources": a.template["resources"].as_object().unwrap().keys().collect::<Vec<_>>(),
        "nfv": a.nfv,
    })
}

fn golden(name: &str, actual: &Value) {
    let p = root()
        .join("two-vdus/expected")
        .join(format!("{name}.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_yaml_ng::to_string(actual).unwrap()).unwrap();
        return;
    }
    let expected = read_yaml(&p);
    assert!(
        expected == *actual,
        "{name}: differs from {}\n--- expected\n{}\n--- actual\n{}",
        p.display(),
        serde_yaml_ng::to_string(&expected).unwrap(),
        serde_yaml_ng::to_string(actual).unwrap()
    );
}

#[test]
fn seed_base_hot_parameters_and_adjusted_hot_reproduce_exactly() {
    let dir = root().join("seed");
    let (pkg, base) = load("seed");
    let req = instantiate_request(&dir.join("request.json"));
    let g = grant(&dir.join("grant.json"));
    let current = Current::default();
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    // The BaseHOT's own parameters (Tacker spec individual-vnfc-management, "BaseHOT",
    // "Input-parameter").
    let base_params = base_parameters(input, &req, &g).unwrap();
    assert_eq!(
        json!({ "nfv": base_params }),
        read_json(&dir.join("base-parameters.json"))
    );
    // The adjusted HOT and its parameters (same spec, "Adjusted HOT").
    let a = adjust(input, Operation::Instantiate(&req), &g).unwrap();
    assert_eq!(a.template, read_yaml(&dir.join("adjusted-top.yaml")));
    assert_eq!(
        json!({ "nfv": a.nfv }),
        read_json(&dir.join("adjusted-parameters.json"))
    );
    // "只有顶层 HOT 会更改为调整后的 HOT。嵌套 HOT 不会从 BaseHOT 更改。"
    assert_eq!(
        a.files["VDU1.yaml"],
        std::fs::read_to_string(dir.join("package/BaseHOT/simple/nested/VDU1.yaml")).unwrap()
    );
    assert_eq!(a.created, ["VDU1-0", "VDU1-1"]);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    // Instantiate's patches are the whole documents.
    assert_eq!(a.template_patch, a.template);
    assert_eq!(a.nfv_patch, a.nfv);
}

/// Instantiate → scale-out by 2 → scale-in by 1 → heal VDU1-1 with a new image, on two VDUs
/// with a virtual storage and two CPs each; then a scale-out after a gap in the indices.
#[test]
fn two_vdu_fixture_golden_sequence() {
    let dir = root().join("two-vdus");
    let (pkg, base) = load("two-vdus");
    let vnfd = &pkg.vnfd;
    let req = instantiate_request(&dir.join("instantiate.json"));
    let mut current = Current::default();

    let input = Input {
        base: &base,
        vnfd,
        current: &current,
    };
    let a = adjust(
        input,
        Operation::Instantiate(&req),
        &grant(&dir.join("instantiate.grant.json")),
    )
    .unwrap();
    golden("10-instantiate", &checked(input, &a, true));
    assert_eq!(a.created, ["VDU1-0", "VDU1-1", "VDU2-0"]);
    // Zones per VNFC, as granted; images from the Grant, flavour overridden by the request.
    assert_eq!(a.nfv["VDU"]["VDU1-0"]["locationConstraints"], "az-1");
    assert_eq!(a.nfv["VDU"]["VDU1-1"]["locationConstraints"], "az-2");
    assert_eq!(
        a.nfv["VDU"]["VDU2-VirtualStorage-0"]["vcImageId"],
        "img-vs-A"
    );
    assert_eq!(a.nfv["VDU"]["VDU2-0"]["computeFlavourId"], "m1.large");
    // Deep get_param (inside list_join) re-pointed; shared get_resource kept.
    assert_eq!(
        a.template["resources"]["VDU2-0"]["properties"]["name"]["list_join"][1][1]["get_param"],
        json!(["nfv", "VDU", "VDU2-0", "computeName"])
    );
    assert_eq!(
        a.template["resources"]["VDU1-1"]["properties"]["net2"],
        json!({"get_resource": "internalVL1"})
    );
    current.vnfcs = a.vnfcs.clone();
    current.ext_virtual_links = req.ext_virtual_links.clone();

    // Scale-out by 2 steps of 1: VDU1-2 and VDU1-3, other VNFCs untouched.
    let so: ScaleVnfRequest =
        serde_json::from_value(read_json(&dir.join("scale-out-2.json"))).unwrap();
    let input = Input {
        base: &base,
        vnfd,
        current: &current,
    };
    let a = adjust(
        input,
        Operation::Scale(&so),
        &grant(&dir.join("scale-out-2.grant.json")),
    )
    .unwrap();
    golden("20-scale-out-2", &checked(input, &a, false));
    assert_eq!(a.created, ["VDU1-2", "VDU1-3"]);
    let patched: Vec<&String> = a.nfv_patch["VDU"].as_object().unwrap().keys().collect();
    assert_eq!(
        patched,
        ["VDU1-2", "VDU1-3"],
        "existing VNFCs' parameters unchanged"
    );
    assert_eq!(a.nfv["VDU"]["VDU1-2"]["locationConstraints"], "az-3");
    current.vnfcs = a.vnfcs.clone();

    // Scale-in by 1: the highest index goes.
    let si: ScaleVnfRequest =
        serde_json::from_value(read_json(&dir.join("scale-in-1.json"))).unwrap();
    let input = Input {
        base: &base,
        vnfd,
        current: &current,
    };
    let gr = grant_request(input, Operation::Scale(&si)).unwrap();
    let a = adjust(input, Operation::Scale(&si), &Grant::derived(&gr)).unwrap();
    golden("30-scale-in-1", &checked(input, &a, false));
    assert_eq!(a.removed, ["VDU1-3"]);
    assert_eq!(a.template_patch, json!({"resources": {"VDU1-3": null}}));
    current.vnfcs = a.vnfcs.clone();

    // Heal VDU1-1 with a new image: only its vcImageId changes; order unchanged.
    let heal: HealVnfRequest =
        serde_json::from_value(read_json(&dir.join("heal-vdu1-1.json"))).unwrap();
    let input = Input {
        base: &base,
        vnfd,
        current: &current,
    };
    let a = adjust(
        input,
        Operation::Heal(&heal),
        &grant(&dir.join("heal-vdu1-1.grant.json")),
    )
    .unwrap();
    golden("40-heal-vdu1-1-new-image", &checked(input, &a, false));
    assert_eq!(a.healed, ["VDU1-1"]);
    assert_eq!(a.image_changed, ["VDU1-1"]);
    assert_eq!(a.template_patch, json!({}));
    assert_eq!(
        a.nfv_patch,
        json!({"VDU": {"VDU1-1": {"vcImageId": "img-vdu1-B"}}})
    );
    assert_eq!(
        a.vnfcs.iter().map(Vnfc::name).collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU1-2", "VDU2-0"]
    );

    // A gap {0, 2}: scale-out makes VDU1-3, never a second VDU1-2 (which Tacker's count-based
    // allocation would make).
    let gap: Current = serde_json::from_value(read_json(&dir.join("gap.vnfcs.json"))).unwrap();
    let s1: ScaleVnfRequest =
        serde_json::from_value(read_json(&dir.join("scale-out-1.json"))).unwrap();
    let input = Input {
        base: &base,
        vnfd,
        current: &gap,
    };
    let gr = grant_request(input, Operation::Scale(&s1)).unwrap();
    let a = adjust(input, Operation::Scale(&s1), &Grant::derived(&gr)).unwrap();
    golden("50-gap-scale-out-1", &checked(input, &a, false));
    assert_eq!(a.created, ["VDU1-3"]);
    // Without VL data at scale-out, the network comes from an existing VNFC's same CP; the
    // derived grant has no image, so the VNFD's image is used.
    assert_eq!(a.nfv["CP"]["VDU1_CP1-3"]["network"], "net-ext1");
    assert_eq!(a.nfv["VDU"]["VDU1-3"]["vcImageId"], "img-vdu1-vnfd");
}

fn fixture_input() -> (VnfPackage, BaseHot) {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("fixtures/packages/individual-vnfc-management");
    let pkg = VnfPackage::load(&root).unwrap();
    let base = pkg.base_hot("simple").unwrap();
    (pkg, base)
}

fn fixture_request() -> InstantiateVnfRequest {
    instantiate_request(
        &Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/requests/good/individual-vnfc-management.10-instantiate.json"),
    )
}

fn with_top(base: &BaseHot, f: impl FnOnce(&mut Value)) -> BaseHot {
    let mut b = base.clone();
    f(&mut b.template);
    b
}

fn instantiate_err(base: &BaseHot, vnfd: &Vnfd) -> HeatError {
    let current = Current::default();
    let input = Input {
        base,
        vnfd,
        current: &current,
    };
    let req = fixture_request();
    let gr = grant_request(input, Operation::Instantiate(&req));
    let g = gr.map(|g| Grant::derived(&g)).unwrap_or_default();
    adjust(input, Operation::Instantiate(&req), &g).unwrap_err()
}

#[test]
fn errors_name_the_template_path() {
    let (pkg, base) = fixture_input();
    let file = "BaseHOT/simple/individual_vnfc_top.hot.yaml";

    let b = with_top(&base, |t| {
        t["resources"].as_object_mut().unwrap().remove("VDU1");
    });
    let e = instantiate_err(&b, &pkg.vnfd);
    assert!(
        matches!(&e, HeatError::Template { file: f, at, reason } if f == file && at == "resources" && reason.contains("VDU `VDU1`")),
        "{e}"
    );

    let b = with_top(&base, |t| {
        t["resources"]["VDU1"]["properties"]["image"] =
            json!({"get_param": ["nfv", "VDU", "VDU9", "vcImageId"]});
    });
    let e = instantiate_err(&b, &pkg.vnfd);
    assert_eq!(
        e.to_string(),
        format!(
            "{file}: resources.VDU1.properties.image.get_param: get_param into unknown key nfv.VDU.VDU9: the VNFD has no such a VDU or a virtual storage of a VDU"
        )
    );

    let b = with_top(&base, |t| {
        t["resources"]["VDU1"]["properties"]["flavor"] =
            json!({"get_param": ["nfv", "VDU", "VDU1", "flavourRef"]});
    });
    let e = instantiate_err(&b, &pkg.vnfd);
    assert!(
        matches!(&e, HeatError::Template { at, reason, .. } if at == "resources.VDU1.properties.flavor.get_param" && reason.contains("nfv.VDU.VDU1-0.flavourRef")),
        "{e}"
    );

    let b = with_top(&base, |t| {
        t["resources"]["VDU1"]["properties"]["net"] = json!({"get_param": ["nfv", "VL", "x"]});
    });
    let e = instantiate_err(&b, &pkg.vnfd);
    assert!(e.to_string().contains("nfv.VL"), "{e}");

    let b = with_top(&base, |t| {
        t["resources"]["VDU1"]["properties"]["net"] = json!({"get_param": "undeclared"});
    });
    assert!(
        instantiate_err(&b, &pkg.vnfd)
            .to_string()
            .contains("`undeclared`")
    );

    let b = with_top(&base, |t| {
        t["outputs"] = json!({"ip": {"value": {"get_attr": ["VDU1", "first_address"]}}});
    });
    let e = instantiate_err(&b, &pkg.vnfd);
    assert!(
        matches!(&e, HeatError::Template { at, .. } if at == "outputs.ip.value.get_attr"),
        "{e}"
    );

    let b = with_top(&base, |t| {
        t["resources"]["VDU1"]["type"] = json!("missing.yaml");
    });
    let e = instantiate_err(&b, &pkg.vnfd);
    assert!(
        matches!(&e, HeatError::Template { at, .. } if at == "resources.VDU1.type"),
        "{e}"
    );
}

#[test]
fn request_grant_and_current_errors_name_the_field() {
    let (pkg, base) = fixture_input();
    let vnfd = &pkg.vnfd;
    let mut req = fixture_request();
    req.instantiation_level_id = Some("gold".into());
    let current = Current::default();
    let input = Input {
        base: &base,
        vnfd,
        current: &current,
    };
    let e = grant_request(input, Operation::Instantiate(&req)).unwrap_err();
    assert_eq!(
        e,
        HeatError::Request {
            pointer: "/request/instantiationLevelId".into(),
            reason: "the VNFD has no instantiation level `gold`".into()
        }
    );

    let req = fixture_request();
    let mut g = Grant::derived(&grant_request(input, Operation::Instantiate(&req)).unwrap());
    g.add_resources[1].zone_id = Some("nowhere".into());
    let e = adjust(input, Operation::Instantiate(&req), &g).unwrap_err();
    assert_eq!(
        e.to_string(),
        "grant /addResources/1/zoneId: `nowhere` is not the id of an entry of zones"
    );
    g.add_resources[1].resource_definition_id = "add-VDU7-0".into();
    let e = adjust(input, Operation::Instantiate(&req), &g).unwrap_err();
    assert!(
        matches!(&e, HeatError::Grant { pointer, .. } if pointer == "/addResources/1/resourceDefinitionId"),
        "{e}"
    );

    // Scale beyond max_number_of_instances (3), scale-in below min (1), unknown VNFC to heal.
    let cur: Current = serde_json::from_value(json!({"vnfcs": [
        {"vduId": "VDU1", "index": 0, "parameters": {"VDU": {"VDU1-0": {"computeName": "VDU1-0"}}}},
    ]}))
    .unwrap();
    let input = Input {
        base: &base,
        vnfd,
        current: &cur,
    };
    let scale = |t: &str, n: u32| -> ScaleVnfRequest {
        serde_json::from_value(json!({"type": t, "aspectId": "VDU1_scale", "numberOfSteps": n}))
            .unwrap()
    };
    let e = grant_request(input, Operation::Scale(&scale("SCALE_OUT", 3))).unwrap_err();
    assert!(
        matches!(&e, HeatError::Request { pointer, .. } if pointer == "/request/numberOfSteps"),
        "{e}"
    );
    let e = grant_request(input, Operation::Scale(&scale("SCALE_IN", 1))).unwrap_err();
    assert!(
        e.to_string().contains("min_number_of_instances is 1"),
        "{e}"
    );
    let heal: HealVnfRequest =
        serde_json::from_value(json!({"vnfcInstanceId": ["VDU1-0", "VDU1-5"]})).unwrap();
    let e = grant_request(input, Operation::Heal(&heal)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "request /request/vnfcInstanceId/1: the instance has no VNFC `VDU1-5`"
    );

    // Current VNFCs without parameters, or listed twice.
    let cur: Current =
        serde_json::from_value(json!({"vnfcs": [{"vduId": "VDU1", "index": 0}]})).unwrap();
    let input = Input {
        base: &base,
        vnfd,
        current: &cur,
    };
    let e = current_stack(input).unwrap_err();
    assert!(
        matches!(&e, HeatError::Current { pointer, .. } if pointer == "/vnfcs/0"),
        "{e}"
    );
}

#[test]
fn heal_without_a_granted_image_changes_nothing_and_change_image_requires_one() {
    let (pkg, base) = fixture_input();
    let cur: Current = serde_json::from_value(json!({"vnfcs": [
        {"vduId": "VDU1", "index": 0, "parameters": {"VDU": {"VDU1-0": {"computeName": "VDU1-0", "computeFlavourId": "f", "vcImageId": "img-1"}}, "CP": {"VDU1_CP1-0": {"network": "n"}}}},
        {"vduId": "VDU1", "index": 1, "id": "uuid-of-vnfc-1", "parameters": {"VDU": {"VDU1-1": {"computeName": "VDU1-1", "computeFlavourId": "f", "vcImageId": "img-1"}}, "CP": {"VDU1_CP1-1": {"network": "n"}}}},
    ]}))
    .unwrap();
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &cur,
    };
    let heal: HealVnfRequest =
        serde_json::from_value(json!({"vnfcInstanceId": ["uuid-of-vnfc-1"]})).unwrap();
    let gr = grant_request(input, Operation::Heal(&heal)).unwrap();
    let a = adjust(input, Operation::Heal(&heal), &Grant::derived(&gr)).unwrap();
    assert_eq!(a.healed, ["VDU1-1"]);
    assert!(a.image_changed.is_empty());
    assert_eq!(a.nfv_patch, json!({}));
    assert_eq!(a.template_patch, json!({}));

    let ids = ["VDU1-0".to_owned()];
    let gr = grant_request(input, Operation::ChangeImage(&ids)).unwrap();
    let e = adjust(input, Operation::ChangeImage(&ids), &Grant::derived(&gr)).unwrap_err();
    assert!(
        matches!(&e, HeatError::Grant { pointer, .. } if pointer == "/vimAssets/softwareImages"),
        "{e}"
    );
    let mut g = Grant::derived(&gr);
    g.vim_assets = Some(serde_json::from_value(json!({"softwareImages": [{"vnfdSoftwareImageId": "VDU1", "vimSoftwareImageId": "img-2"}]})).unwrap());
    let a = adjust(input, Operation::ChangeImage(&ids), &g).unwrap();
    assert_eq!(a.image_changed, ["VDU1-0"]);
    assert!(a.healed.is_empty());
    assert_eq!(
        a.nfv_patch,
        json!({"VDU": {"VDU1-0": {"vcImageId": "img-2"}}})
    );
}

#[test]
fn autoscaling_group_base_hot_keeps_working_with_desired_capacity() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("fixtures/packages/pv-k8s-cluster");
    let pkg = VnfPackage::load(&root).unwrap();
    let base = pkg.base_hot("simple").unwrap();
    let bytes = std::fs::read(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"),
    )
    .unwrap();
    let Envelope::Lcm(env) = parse_envelope(&bytes).unwrap().envelope else {
        panic!()
    };
    let crate::wire::LcmRequest::Instantiate(req) = env.typed_request().unwrap() else {
        panic!()
    };
    let current = Current::default();
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let analysis = Analysis::new(&base, &pkg.vnfd).unwrap();
    assert!(matches!(analysis.modes["masterNode"], Mode::Asg(_)));
    assert!(matches!(analysis.modes["workerNode"], Mode::Asg(_)));
    assert_eq!(analysis.modes["storage_server"], Mode::Single);
    let gr = grant_request(input, Operation::Instantiate(&req)).unwrap();
    let a = adjust(input, Operation::Instantiate(&req), &Grant::derived(&gr)).unwrap();
    // ASG resources stay as in the BaseHOT; the counts go to desired_capacity.
    for (name, r) in base.template["resources"].as_object().unwrap() {
        if r["type"] == "OS::Heat::AutoScalingGroup" {
            assert_eq!(a.template["resources"][name], *r, "{name}");
        }
    }
    assert_eq!(a.nfv["VDU"]["masterNode"]["desired_capacity"], 1);
    assert_eq!(a.nfv["VDU"]["workerNode"]["desired_capacity"], 2);
    // Single mode: the storage server stays one resource, with non-indexed parameters.
    assert_eq!(
        a.template["resources"]["storage_server"],
        base.template["resources"]["storage_server"]
    );
    assert_eq!(
        a.nfv["VDU"]["storage_server"]["computeFlavourId"],
        "m1.medium"
    );
    assert_eq!(
        a.nfv["CP"]["storage_server_CP"]["network"],
        "f0c82461-36b5-4d86-8322-b0bc19cda65f"
    );

    // Scale-out of the worker ASG: only desired_capacity changes, the template not at all.
    let cur = Current {
        vnfcs: a.vnfcs.clone(),
        nfv: a.nfv.as_object().unwrap().clone(),
        ext_virtual_links: req.ext_virtual_links.clone(),
        ..Current::default()
    };
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &cur,
    };
    let so: ScaleVnfRequest =
        serde_json::from_value(json!({"type": "SCALE_OUT", "aspectId": "worker_instance"}))
            .unwrap();
    let gr = grant_request(input, Operation::Scale(&so)).unwrap();
    let b = adjust(input, Operation::Scale(&so), &Grant::derived(&gr)).unwrap();
    assert_eq!(b.template_patch, json!({}));
    assert_eq!(
        b.nfv_patch,
        json!({"VDU": {"workerNode": {"desired_capacity": 3}}})
    );
}

#[test]
fn additional_params_for_untouched_vnfcs_are_ignored_with_a_warning() {
    let (pkg, base) = fixture_input();
    let mut req = fixture_request();
    req.additional_params.as_mut().unwrap().extra["nfv"]["VDU"]["VDU1-2"] =
        json!({"computeFlavourId": "m1.huge"});
    req.additional_params.as_mut().unwrap().extra["nfv"]["VDU"]["VDU9-0"] =
        json!({"computeFlavourId": "m1.huge"});
    let current = Current::default();
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let gr = grant_request(input, Operation::Instantiate(&req)).unwrap();
    let a = adjust(input, Operation::Instantiate(&req), &Grant::derived(&gr)).unwrap();
    // VDU1-2 does not exist yet: kept for the scale-out that creates it (see
    // nfv_for_a_vnfc_to_come_is_kept_until_its_scale_out); VDU9 is no VDU: ignored.
    assert_eq!(
        a.nfv["VDU"]["VDU1-2"],
        json!({"computeFlavourId": "m1.huge"})
    );
    assert!(a.nfv["VDU"].get("VDU9-0").is_none());
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("/request/additionalParams/nfv/VDU/VDU9-0"));
    // The fixture request's own overrides apply (zone-x / m1.large + zone-y).
    assert_eq!(a.nfv["VDU"]["VDU1-0"]["locationConstraints"], "zone-x");
    assert_eq!(a.nfv["VDU"]["VDU1-1"]["computeFlavourId"], "m1.large");
}

/// `base_parameters` derives its values where `adjust` does: for a BaseHOT without per-VNFC
/// VDUs they are the `nfv` that `adjust` gives at instantiate, the Grant's external VLs first.
#[test]
fn base_parameters_are_what_adjust_fills_for_non_indexed_vdus() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("fixtures/packages/pv-k8s-cluster");
    let pkg = VnfPackage::load(&root).unwrap();
    let base = pkg.base_hot("simple").unwrap();
    let req = instantiate_request(
        &Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"),
    );
    let current = Current::default();
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let mut g = Grant::derived(&grant_request(input, Operation::Instantiate(&req)).unwrap());
    g.ext_virtual_links = serde_json::from_value(json!([
        {"id": "g1", "resourceId": "net-from-grant", "extCps": [{"cpdId": "storage_server_CP"}]}
    ]))
    .unwrap();
    let a = adjust(input, Operation::Instantiate(&req), &g).unwrap();
    assert_eq!(
        a.nfv["CP"]["storage_server_CP"]["network"],
        "net-from-grant"
    );
    assert_eq!(base_parameters(input, &req, &g).unwrap(), a.nfv);
}

/// A fixed address is refused for a CP whose VDU has several VNFCs, wherever the `get_param`
/// points into `fixed_ips`; a subnet alone is not an address, whatever its id.
#[test]
fn a_fixed_address_shared_by_several_vnfcs_is_refused_a_subnet_is_not() {
    let (pkg, base) = load("two-vdus");
    let req = instantiate_request(&root().join("two-vdus/instantiate.json"));
    let current = Current::default();
    let with_ref = |path: Value| {
        with_top(&base, |t| {
            t["resources"]["VDU1"]["properties"]["fixed"] = json!({ "get_param": path });
        })
    };
    let grant_with = |input: Input<'_>, address: Value| {
        let mut g = Grant::derived(&grant_request(input, Operation::Instantiate(&req)).unwrap());
        g.ext_virtual_links = serde_json::from_value(json!([{
            "id": "g1", "resourceId": "net-g", "extCps": [{"cpdId": "VDU1_CP1", "cpConfig": {"c": {
                "cpProtocolData": [{"layerProtocol": "IP_OVER_ETHERNET",
                    "ipOverEthernet": {"ipAddresses": [address]}}]}}}]
        }]))
        .unwrap();
        g
    };
    let shared = HeatError::Grant {
        pointer: "/extVirtualLinks/0/extCps/0".into(),
        reason: "a fixed address for CP `VDU1_CP1` would be shared by the 2 VNFCs of VDU `VDU1`"
            .into(),
    };
    let address = json!({"type": "IPV4", "fixedAddresses": ["10.0.0.9"], "subnetId": "s"});
    for path in [
        json!(["nfv", "CP", "VDU1_CP1", "fixed_ips"]),
        json!(["nfv", "CP", "VDU1_CP1", "fixed_ips", 0]),
        json!(["nfv", "CP", "VDU1_CP1", "fixed_ips", 0, "ip_address"]),
    ] {
        let b = with_ref(path.clone());
        let input = Input {
            base: &b,
            vnfd: &pkg.vnfd,
            current: &current,
        };
        let g = grant_with(input, address.clone());
        let e = adjust(input, Operation::Instantiate(&req), &g).unwrap_err();
        assert_eq!(e, shared, "{path}");
    }
    // Only a subnet (even one whose id reads `ip_address`): every VNFC gets it.
    let b = with_ref(json!(["nfv", "CP", "VDU1_CP1", "fixed_ips", 0, "subnet"]));
    let input = Input {
        base: &b,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let g = grant_with(input, json!({"type": "IPV4", "subnetId": "ip_address"}));
    let a = adjust(input, Operation::Instantiate(&req), &g).unwrap();
    assert_eq!(
        a.nfv["CP"]["VDU1_CP1-1"]["fixed_ips"],
        json!([{"subnet": "ip_address"}])
    );
    // With an address beside it, the `subnet` path still selects only the subnet.
    let g = grant_with(input, address);
    assert!(adjust(input, Operation::Instantiate(&req), &g).is_ok());
}

/// The two-VDU fixture instantiated with the derived Grant and `req` changed by `f`.
fn two_vdus_instantiated(
    f: impl FnOnce(&mut Value),
) -> (VnfPackage, BaseHot, InstantiateVnfRequest, Adjusted) {
    let (pkg, base) = load("two-vdus");
    let mut env = read_json(&root().join("two-vdus/instantiate.json"));
    f(&mut env["request"]);
    let req: InstantiateVnfRequest = serde_json::from_value(env["request"].clone()).unwrap();
    let empty = Current::default();
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &empty,
    };
    let gr = grant_request(input, Operation::Instantiate(&req)).unwrap();
    let a = adjust(input, Operation::Instantiate(&req), &Grant::derived(&gr)).unwrap();
    checked(input, &a, true);
    (pkg, base, req, a)
}

fn current_after(req: &InstantiateVnfRequest, a: &Adjusted) -> Current {
    Current {
        vnfcs: a.vnfcs.clone(),
        nfv: a.nfv.as_object().unwrap().clone(),
        ext_virtual_links: req.ext_virtual_links.clone(),
        ext_managed_virtual_links: req.ext_managed_virtual_links.clone(),
    }
}

#[test]
fn ext_managed_virtual_links_replace_the_internal_vl_also_at_scale_out() {
    let (pkg, base, req, a) = two_vdus_instantiated(|r| {
        r["extManagedVirtualLinks"] = json!([
            {"id": "m1", "vnfVirtualLinkDescId": "internalVL1", "resourceId": "net-managed"}
        ]);
    });
    let res = a.template["resources"].as_object().unwrap();
    assert!(!res.contains_key("internalVL1") && !res.contains_key("internalVL1_subnet"));
    assert_eq!(res["VDU1-0"]["properties"]["net2"], "net-managed");
    assert_eq!(res["VDU1-1"]["properties"]["net2"], "net-managed");

    // The instance keeps them: a scale-out's VNFC uses the network too, the VL stays out.
    let current = current_after(&req, &a);
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let so: ScaleVnfRequest = serde_json::from_value(
        json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale", "numberOfSteps": 1}),
    )
    .unwrap();
    let gr = grant_request(input, Operation::Scale(&so)).unwrap();
    let b = adjust(input, Operation::Scale(&so), &Grant::derived(&gr)).unwrap();
    checked(input, &b, false);
    assert_eq!(
        b.template["resources"]["VDU1-2"]["properties"]["net2"],
        "net-managed"
    );
    assert!(b.template["resources"].get("internalVL1").is_none());
    assert_eq!(
        b.template_patch,
        json!({"resources": {"VDU1-2": b.template["resources"]["VDU1-2"]}})
    );
}

#[test]
fn null_at_instantiate_absent_at_scale_out_and_dropped_by_heal() {
    let (pkg, base, req, a) = two_vdus_instantiated(|_| {});
    // No zone granted: null at instantiate.
    assert_eq!(a.nfv["VDU"]["VDU1-0"]["locationConstraints"], Value::Null);
    assert!(a.nfv["VDU"]["VDU1-0"].get("locationConstraints").is_some());
    let current = current_after(&req, &a);
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    // The stored slices keep the nulls.
    assert_eq!(current_stack(input).unwrap().1, a.nfv);
    let so: ScaleVnfRequest = serde_json::from_value(
        json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale", "numberOfSteps": 1}),
    )
    .unwrap();
    let gr = grant_request(input, Operation::Scale(&so)).unwrap();
    let b = adjust(input, Operation::Scale(&so), &Grant::derived(&gr)).unwrap();
    assert!(b.nfv["VDU"]["VDU1-2"].get("locationConstraints").is_none());
    assert_eq!(b.nfv["VDU"]["VDU1-0"]["locationConstraints"], Value::Null);

    // A heal (of one VNFC) removes the nulls of every VDU entry, as Tacker's merge patch does.
    let heal: HealVnfRequest =
        serde_json::from_value(json!({"vnfcInstanceId": ["VDU1-0"]})).unwrap();
    let gr = grant_request(input, Operation::Heal(&heal)).unwrap();
    let h = adjust(input, Operation::Heal(&heal), &Grant::derived(&gr)).unwrap();
    checked(input, &h, false);
    for (name, e) in h.nfv["VDU"].as_object().unwrap() {
        assert!(
            e.as_object().unwrap().values().all(|v| !v.is_null()),
            "{name}: {e}"
        );
    }
    assert_eq!(
        h.nfv_patch["VDU"]["VDU1-1"]["locationConstraints"],
        Value::Null
    );
}

#[test]
fn nfv_for_a_vnfc_to_come_is_kept_until_its_scale_out() {
    let (pkg, base, req, a) = two_vdus_instantiated(|r| {
        r["additionalParams"]["nfv"]["VDU"]["VDU1-2"] = json!({"computeName": "later-name"});
    });
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert_eq!(a.nfv["VDU"]["VDU1-2"], json!({"computeName": "later-name"}));
    let current = current_after(&req, &a);
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let so: ScaleVnfRequest = serde_json::from_value(
        json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale", "numberOfSteps": 1}),
    )
    .unwrap();
    let gr = grant_request(input, Operation::Scale(&so)).unwrap();
    let b = adjust(input, Operation::Scale(&so), &Grant::derived(&gr)).unwrap();
    assert_eq!(b.created, ["VDU1-2"]);
    assert_eq!(b.nfv["VDU"]["VDU1-2"]["computeName"], "later-name");
    assert_eq!(b.nfv["VDU"]["VDU1-2"]["computeFlavourId"], "m1.small");
    // An entry for an existing VNFC the operation does not touch is still ignored.
    let (_, _, _, c) = two_vdus_instantiated(|r| {
        r["additionalParams"]["nfv"]["VDU"]["VDU9-0"] = json!({"computeName": "typo"});
    });
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.nfv["VDU"].get("VDU9-0").is_none());
}

#[test]
fn heal_all_changes_the_vdu_image_and_keeps_the_storage_image() {
    let (pkg, base, req, a) = two_vdus_instantiated(|_| {});
    let current = current_after(&req, &a);
    let input = Input {
        base: &base,
        vnfd: &pkg.vnfd,
        current: &current,
    };
    let heal: HealVnfRequest =
        serde_json::from_value(json!({"additionalParams": {"all": true}})).unwrap();
    let gr = grant_request(input, Operation::Heal(&heal)).unwrap();
    let mut g = Grant::derived(&gr);
    g.vim_assets = Some(
        serde_json::from_value(json!({"softwareImages": [
            {"vnfdSoftwareImageId": "VDU1", "vimSoftwareImageId": "img-vdu1-new"},
            {"vnfdSoftwareImageId": "VDU2-VirtualStorage", "vimSoftwareImageId": "img-vs-new"}
        ]}))
        .unwrap(),
    );
    let h = adjust(input, Operation::Heal(&heal), &g).unwrap();
    assert_eq!(h.nfv["VDU"]["VDU1-0"]["vcImageId"], "img-vdu1-new");
    assert_eq!(
        h.nfv["VDU"]["VDU2-VirtualStorage-0"]["vcImageId"],
        a.nfv["VDU"]["VDU2-VirtualStorage-0"]["vcImageId"]
    );
    assert_eq!(h.image_changed, ["VDU1-0", "VDU1-1"]);
}
