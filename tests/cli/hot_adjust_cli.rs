//! `vnfkeeper hot adjust` run as the built binary on the fixtures.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("hot")
        .arg("adjust")
        .args(args)
        .output()
        .expect("run vnfkeeper");
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn fixture(rel: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&p).unwrap();
    if rel.ends_with(".json") {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_yaml_ng::from_str(&text).unwrap()
    }
}

#[test]
fn seed_instantiate_json_matches_the_seed_exactly() {
    let (ok, out, err) = run(&[
        "--package",
        "fixtures/heat/seed/package",
        "--flavour",
        "simple",
        "--operation",
        "instantiate",
        "--request",
        "fixtures/heat/seed/request.json",
        "--grant",
        "fixtures/heat/seed/grant.json",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["template", "files", "parameters"]);
    assert_eq!(
        v["template"],
        fixture("fixtures/heat/seed/adjusted-top.yaml")
    );
    assert_eq!(
        v["parameters"],
        fixture("fixtures/heat/seed/adjusted-parameters.json")
    );
    assert_eq!(
        v["files"]["VDU1.yaml"],
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/heat/seed/package/BaseHOT/simple/nested/VDU1.yaml")
        )
        .unwrap()
    );
}

#[test]
fn yaml_output_without_grant_derives_one_and_holds_two_documents() {
    let (ok, out, err) = run(&[
        "--package",
        "fixtures/packages/individual-vnfc-management",
        "--flavour",
        "simple",
        "--operation",
        "instantiate",
        "--request",
        "fixtures/requests/good/individual-vnfc-management.10-instantiate.json",
    ]);
    assert!(ok, "{err}");
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&out)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{out}");
    let names: Vec<&String> = docs[0]["resources"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["VDU1-0", "VDU1-1"]);
    // No NFVO: flavour and image from the VNFD, zones from the request's additionalParams.nfv.
    assert_eq!(
        docs[1]["nfv"]["VDU"],
        json!({
            "VDU1-0": {"computeName": "VDU1-0", "computeFlavourId": "m1.medium",
                       "vcImageId": "cirros-0.5.2-x86_64-disk", "locationConstraints": "zone-x"},
            "VDU1-1": {"computeName": "VDU1-1", "computeFlavourId": "m1.large",
                       "vcImageId": "cirros-0.5.2-x86_64-disk", "locationConstraints": "zone-y"}
        })
    );
}

#[test]
fn scale_out_after_a_gap_and_heal_from_bare_bodies() {
    let (ok, out, err) = run(&[
        "--package",
        "fixtures/heat/two-vdus/package",
        "--flavour",
        "simple",
        "--operation",
        "scale-out",
        "--request",
        "fixtures/heat/two-vdus/scale-out-1.json",
        "--vnfcs",
        "fixtures/heat/two-vdus/gap.vnfcs.json",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&String> = v["template"]["resources"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        names,
        [
            "VDU1-0",
            "VDU1-2",
            "VDU1-3",
            "VDU2-0",
            "internalVL1",
            "internalVL1_subnet"
        ]
    );

    let (ok, out, err) = run(&[
        "--package",
        "fixtures/heat/two-vdus/package",
        "--flavour",
        "simple",
        "--operation",
        "heal",
        "--request",
        "fixtures/heat/two-vdus/heal-vdu1-1.json",
        "--vnfcs",
        "fixtures/heat/two-vdus/gap.vnfcs.json",
    ]);
    assert!(!ok, "VDU1-1 is not in the gap fixture: {out}");
    assert!(
        err.contains("--request fixtures/heat/two-vdus/heal-vdu1-1.json")
            && err.contains("/request/vnfcInstanceId/0")
            && err.contains("no VNFC `VDU1-1`"),
        "{err}"
    );
}

#[test]
fn bad_input_names_the_file_and_field() {
    let base = [
        "--package",
        "fixtures/heat/two-vdus/package",
        "--flavour",
        "simple",
    ];
    // Operation and request type disagree.
    let (ok, _, err) = run(&[
        &base[..],
        &[
            "--operation",
            "scale-in",
            "--request",
            "fixtures/heat/two-vdus/scale-out-1.json",
            "--vnfcs",
            "fixtures/heat/two-vdus/gap.vnfcs.json",
        ],
    ]
    .concat());
    assert!(!ok);
    assert!(err.contains("/type") && err.contains("ScaleOut"), "{err}");
    // Scale without current VNFCs.
    let (ok, _, err) = run(&[
        &base[..],
        &[
            "--operation",
            "scale-out",
            "--request",
            "fixtures/heat/two-vdus/scale-out-1.json",
        ],
    ]
    .concat());
    assert!(!ok);
    assert!(err.contains("--vnfcs"), "{err}");
    // A grant that names an undefined resource definition.
    let (ok, _, err) = run(&[
        &base[..],
        &[
            "--operation",
            "instantiate",
            "--request",
            "fixtures/heat/two-vdus/instantiate.json",
            "--grant",
            "fixtures/heat/two-vdus/scale-out-2.grant.json",
        ],
    ]
    .concat());
    assert!(!ok);
    assert!(
        err.contains("--grant fixtures/heat/two-vdus/scale-out-2.grant.json")
            && err.contains("/addResources/0/resourceDefinitionId")
            && err.contains("add-VDU1-2"),
        "{err}"
    );
    // An invalid request body: validated like intake.
    let (ok, _, err) = run(&[
        &base[..],
        &[
            "--operation",
            "instantiate",
            "--request",
            "fixtures/heat/two-vdus/heal-vdu1-1.json",
        ],
    ]
    .concat());
    assert!(!ok);
    assert!(
        err.contains("--request") && err.contains("flavourId"),
        "{err}"
    );
    // Unknown flavour: the BaseHOT directory is named.
    let (ok, _, err) = run(&[
        "--package",
        "fixtures/heat/two-vdus/package",
        "--flavour",
        "gold",
        "--operation",
        "instantiate",
        "--request",
        "fixtures/heat/two-vdus/instantiate.json",
    ]);
    assert!(!ok);
    assert!(err.contains("BaseHOT/gold"), "{err}");
}
