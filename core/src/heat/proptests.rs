//! Property tests: random sequences of scale-out, scale-in, heal (with or without a new image)
//! and out-of-band VNFC losses (gaps in the indices) on the two-VDU fixture.
//!
//! After every step: VNFC names are unique and are exactly the template's per-VNFC resources and
//! the `nfv.VDU` entries; scale-out appends `max+1, max+2, …` with the granted zones; scale-in
//! removes the highest indices; heal keeps the VNFC set and changes only the healed VNFCs'
//! `vcImageId`, and only to the granted image; every other VNFC's parameters are unchanged; and
//! applying the merge patches to the previous stack gives the full documents.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::package::VnfPackage;

#[derive(Debug, Clone)]
enum Step {
    Out {
        steps: u32,
        zone_seed: usize,
    },
    In {
        steps: u32,
    },
    Heal {
        picks: Vec<usize>,
        image: Option<u8>,
    },
    /// A VNFC lost outside vnfkeeper's control (leaves a gap in the indices).
    Lose(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u32..=2, 0usize..3).prop_map(|(steps, zone_seed)| Step::Out { steps, zone_seed }),
        2 => (1u32..=2).prop_map(|steps| Step::In { steps }),
        2 => (proptest::collection::vec(0usize..8, 0..3), proptest::option::of(0u8..3))
            .prop_map(|(picks, image)| Step::Heal { picks, image }),
        1 => (0usize..8).prop_map(Step::Lose),
    ]
}

fn fixture() -> (VnfPackage, BaseHot) {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("fixtures/heat/two-vdus/package");
    let pkg = VnfPackage::load(&root).unwrap();
    let base = pkg.base_hot("simple").unwrap();
    (pkg, base)
}

fn indices(c: &Current, vdu: &str) -> Vec<u32> {
    let mut v: Vec<u32> = c
        .vnfcs
        .iter()
        .filter(|x| x.vdu_id == vdu)
        .map(|x| x.index)
        .collect();
    v.sort_unstable();
    v
}

fn params(vnfcs: &[Vnfc]) -> BTreeMap<String, Value> {
    vnfcs
        .iter()
        .map(|c| (c.name(), c.parameters.clone().unwrap_or(Value::Null)))
        .collect()
}

/// `nfv` (or a VNFC's slice of it) with the `null` keys of its `VDU` entries removed.
fn without_vdu_nulls(nfv: &Value) -> Value {
    let mut v = nfv.clone();
    for e in v["VDU"]
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        if let Some(m) = e.as_object_mut() {
            m.retain(|_, x| !x.is_null());
        }
    }
    v
}

fn check_invariants(a: &Adjusted) {
    let names: Vec<String> = a.vnfcs.iter().map(Vnfc::name).collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "VNFC names unique: {names:?}");
    let vnfc_resources: BTreeSet<String> = a.template["resources"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("VDU"))
        .cloned()
        .collect();
    assert_eq!(
        vnfc_resources,
        unique.iter().map(|s| (*s).clone()).collect()
    );
    let vdu_entries: BTreeSet<String> = a.nfv["VDU"]
        .as_object()
        .map(|m| {
            m.keys()
                .filter(|k| !k.contains("VirtualStorage"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(vdu_entries, unique.iter().map(|s| (*s).clone()).collect());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_lcm_sequences_keep_the_index_rules_and_exact_patches(steps in proptest::collection::vec(step(), 1..14)) {
        let (pkg, base) = fixture();
        let vnfd = &pkg.vnfd;
        let req: InstantiateVnfRequest = serde_json::from_value(json!({
            "flavourId": "simple",
            "extVirtualLinks": [
                {"id": "e1", "resourceId": "net-1", "extCps": [{"cpdId": "VDU1_CP1"}, {"cpdId": "VDU2_CP1"}]},
                {"id": "e2", "resourceId": "net-2", "extCps": [{"cpdId": "VDU2_CP2"}]}
            ]
        })).unwrap();
        let empty = Current::default();
        let input = Input { base: &base, vnfd, current: &empty };
        let gr = grant_request(input, Operation::Instantiate(&req)).unwrap();
        let a = adjust(input, Operation::Instantiate(&req), &Grant::derived(&gr)).unwrap();
        check_invariants(&a);
        let mut cur = Current { vnfcs: a.vnfcs.clone(), nfv: Default::default(), ext_virtual_links: req.ext_virtual_links.clone(), ..Current::default() };
        let mut docs = (a.template.clone(), a.nfv.clone());

        for s in steps {
            let input = Input { base: &base, vnfd, current: &cur };
            // The derived current stack is the previous operation's full output.
            prop_assert_eq!(current_stack(input).unwrap(), docs.clone());
            let before = indices(&cur, "VDU1");
            let before_params = params(&cur.vnfcs);
            let (op_result, granted_image, zones): (Result<Adjusted, HeatError>, Option<String>, BTreeMap<String, String>) = match &s {
                Step::Lose(k) => {
                    if cur.vnfcs.len() > 1 {
                        let k = k % cur.vnfcs.len();
                        cur.vnfcs.remove(k);
                        let input = Input { base: &base, vnfd, current: &cur };
                        docs = current_stack(input).unwrap();
                    }
                    continue;
                }
                Step::Out { steps, zone_seed } => {
                    let r: ScaleVnfRequest = serde_json::from_value(json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale", "numberOfSteps": steps})).unwrap();
                    match grant_request(input, Operation::Scale(&r)) {
                        Err(e) => {
                            prop_assert!(before.len() as u32 + steps > 5, "unexpected {e}");
                            let ok = matches!(&e, HeatError::Request { pointer, .. } if pointer == "/request/numberOfSteps");
                            prop_assert!(ok, "{}", e);
                            continue;
                        }
                        Ok(gr) => {
                            let mut g = Grant::derived(&gr);
                            g.zones = (0..3).map(|z| ZoneInfo { id: format!("z{z}"), zone_id: format!("az-{z}"), vim_connection_id: None }).collect();
                            let mut zones = BTreeMap::new();
                            for (k, gi) in g.add_resources.iter_mut().enumerate() {
                                let z = (zone_seed + k) % 3;
                                gi.zone_id = Some(format!("z{z}"));
                                zones.insert(gi.resource_definition_id.trim_start_matches("add-").to_owned(), format!("az-{z}"));
                            }
                            (adjust(input, Operation::Scale(&r), &g), None, zones)
                        }
                    }
                }
                Step::In { steps } => {
                    let r: ScaleVnfRequest = serde_json::from_value(json!({"type": "SCALE_IN", "aspectId": "VDU1_scale", "numberOfSteps": steps})).unwrap();
                    match grant_request(input, Operation::Scale(&r)) {
                        Err(e) => {
                            prop_assert!((before.len() as u32) < steps + 1, "unexpected {e}");
                            continue;
                        }
                        Ok(gr) => (adjust(input, Operation::Scale(&r), &Grant::derived(&gr)), None, BTreeMap::new()),
                    }
                }
                Step::Heal { picks, image } => {
                    let ids: Vec<String> = picks.iter().map(|p| cur.vnfcs[p % cur.vnfcs.len()].name()).collect();
                    let r: HealVnfRequest = serde_json::from_value(json!({"vnfcInstanceId": ids})).unwrap();
                    let gr = grant_request(input, Operation::Heal(&r)).unwrap();
                    let mut g = Grant::derived(&gr);
                    let img = image.map(|i| format!("img-{i}"));
                    if let Some(img) = &img {
                        g.vim_assets = Some(VimAssets {
                            software_images: vec![VimSoftwareImage { vnfd_software_image_id: "VDU1".into(), vim_software_image_id: img.clone(), other: Default::default() }],
                            ..Default::default()
                        });
                    }
                    (adjust(input, Operation::Heal(&r), &g), img, BTreeMap::new())
                }
            };
            let a = op_result.unwrap();
            check_invariants(&a);
            // Merge patches on the previous stack give the full documents.
            prop_assert_eq!(&merge::apply(&docs.0, &a.template_patch), &a.template);
            prop_assert_eq!(&merge::apply(&docs.1, &a.nfv_patch), &a.nfv);
            let after = indices(&Current { vnfcs: a.vnfcs.clone(), ..Current::default() }, "VDU1");
            let after_params = params(&a.vnfcs);
            match &s {
                Step::Out { steps, .. } => {
                    let next = before.last().map_or(0, |m| m + 1);
                    let expect: Vec<u32> = before.iter().copied().chain(next..next + steps).collect();
                    prop_assert_eq!(&after, &expect, "scale-out appends after the highest index");
                    for name in &a.created {
                        prop_assert_eq!(a.nfv["VDU"][name]["locationConstraints"].as_str(), zones.get(name).map(String::as_str));
                    }
                    for (n, p) in &before_params {
                        prop_assert_eq!(&after_params[n], p, "existing VNFC {} unchanged", n);
                    }
                }
                Step::In { steps } => {
                    let keep = before.len() - *steps as usize;
                    prop_assert_eq!(&after[..], &before[..keep], "scale-in removes the highest indices");
                    for (n, p) in &after_params {
                        prop_assert_eq!(&before_params[n], p);
                    }
                }
                Step::Heal { .. } => {
                    prop_assert_eq!(&after, &before, "heal keeps the VNFCs and their order");
                    for (n, p) in &before_params {
                        let q = &after_params[n];
                        // A heal drops the nulls of the VDU entries (Tacker's merge patch).
                        let p = &without_vdu_nulls(p);
                        if a.image_changed.contains(n) {
                            let img = granted_image.as_deref().unwrap();
                            prop_assert_eq!(q["VDU"][n]["vcImageId"].as_str(), Some(img));
                            let mut q2 = q.clone();
                            q2["VDU"][n]["vcImageId"] = p["VDU"][n]["vcImageId"].clone();
                            prop_assert_eq!(&q2, p, "only vcImageId changes");
                            prop_assert!(a.healed.contains(n));
                        } else {
                            prop_assert_eq!(q, p, "VNFC {} unchanged by heal", n);
                        }
                    }
                    if granted_image.is_none() {
                        prop_assert!(a.image_changed.is_empty());
                        prop_assert_eq!(&a.nfv, &without_vdu_nulls(&docs.1));
                    }
                    prop_assert_eq!(&a.template_patch, &json!({}));
                }
                Step::Lose(_) => unreachable!(),
            }
            cur.vnfcs = a.vnfcs.clone();
            docs = (a.template.clone(), a.nfv.clone());
        }
    }
}
