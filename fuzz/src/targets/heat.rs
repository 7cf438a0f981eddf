//! The adjusted HOT (individual VNFC management): [`heat::adjust`] — what the engine calls to
//! decide an operation's Heat documents — driven by a structure-aware input ([`arbitrary`]):
//! raw bytes would never get past the YAML/JSON layer into the planning.
//!
//! The input decodes as: a few edits of the two-VDU fixture's BaseHOT (`fixtures/heat/two-vdus`:
//! a key of the top-level template removed, or a value replaced by a scalar, a `get_param` or a
//! `get_resource`), then up to 12 operations on the instance — SCALE_OUT and SCALE_IN (any
//! number of steps, the VNFD's aspect or an unknown one), HEAL of picked VNFCs (optionally with a
//! new image in the Grant), VNFCs lost outside vnfkeeper — after an INSTANTIATE, each with the
//! Grant derived from its GrantRequest ([`Grant::derived`], as without an NFVO).
//!
//! Properties: no panic (an error is a refused operation); after each adjusted operation, the
//! current stack ([`heat::current_stack`] of the VNFCs before it) with the template and `nfv`
//! merge patches applied by the `json-patch` crate's RFC 7386 merge gives the full template and
//! `nfv` that `adjust` returned — exactly, or up to members whose value is `null`, which a merge
//! patch cannot set (the `nfv` holds `locationConstraints: null` for a VNFC the Grant gives no
//! zone, see the README) — and the VNFC names are unique.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{Value, json};
use vnfkeeper_core::heat::{self, Current, Grant, Input, Operation, VimAssets, VimSoftwareImage};
use vnfkeeper_core::package::{BaseHot, VnfPackage, Vnfd};
use vnfkeeper_core::wire::{HealVnfRequest, InstantiateVnfRequest, ScaleVnfRequest};

/// One edit of the top-level template.
#[derive(Debug, Arbitrary)]
enum Edit {
    /// Remove the member at the path picked by the indices.
    Remove(Vec<u8>),
    /// Replace the value at the path picked by the indices.
    Replace(Vec<u8>, Scalar),
}

/// A value put into the template.
#[derive(Debug, Arbitrary)]
enum Scalar {
    Null,
    Int(i64),
    Text(String),
    GetParam(Vec<String>),
    GetResource(String),
    EmptyObject,
}

impl Scalar {
    fn value(self) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Int(i) => json!(i),
            Scalar::Text(s) => json!(s),
            Scalar::GetParam(p) => json!({ "get_param": p }),
            Scalar::GetResource(r) => json!({ "get_resource": r }),
            Scalar::EmptyObject => json!({}),
        }
    }
}

/// One operation on the instance.
#[derive(Debug, Arbitrary)]
enum Step {
    Out { steps: u8, known_aspect: bool },
    In { steps: u8, known_aspect: bool },
    Heal { picks: Vec<u8>, image: Option<u8> },
    Lose(u8),
}

/// The whole input.
#[derive(Debug, Arbitrary)]
struct Case {
    edits: Vec<Edit>,
    steps: Vec<Step>,
}

fn fixture() -> &'static (Vnfd, BaseHot) {
    static F: OnceLock<(Vnfd, BaseHot)> = OnceLock::new();
    F.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/heat/two-vdus/package");
        let pkg = VnfPackage::load(&root).expect("the two-VDU fixture loads");
        let base = pkg.base_hot("simple").expect("its BaseHOT");
        (pkg.vnfd, base)
    })
}

/// The RFC 6901 pointer of the parent and the key (or index) of the member that `picks` walks
/// to (each index modulo the members there); `None` when there is no member to pick.
fn walk(doc: &Value, picks: &[u8]) -> Option<(String, Value)> {
    let (last, init) = picks.split_last()?;
    let mut at = doc;
    let mut pointer = String::new();
    for p in init {
        let (token, next) = match at {
            Value::Object(m) if !m.is_empty() => {
                let (k, v) = m.iter().nth(*p as usize % m.len())?;
                (k.replace('~', "~0").replace('/', "~1"), v)
            }
            Value::Array(a) if !a.is_empty() => {
                let n = *p as usize % a.len();
                (n.to_string(), &a[n])
            }
            _ => break,
        };
        pointer.push('/');
        pointer.push_str(&token);
        at = next;
    }
    let key = match at {
        Value::Object(m) if !m.is_empty() => json!(m.keys().nth(*last as usize % m.len())?),
        Value::Array(a) if !a.is_empty() => json!(*last as usize % a.len()),
        _ => return None,
    };
    Some((pointer, key))
}

fn edit(doc: &mut Value, e: Edit) {
    let (path, put) = match e {
        Edit::Remove(path) => (path, None),
        Edit::Replace(path, s) => (path, Some(s.value())),
    };
    let Some((pointer, key)) = walk(doc, &path) else {
        return;
    };
    match (doc.pointer_mut(&pointer), key, put) {
        (Some(Value::Object(m)), Value::String(k), None) => {
            m.shift_remove(&k);
        }
        (Some(Value::Object(m)), Value::String(k), Some(v)) => {
            m.insert(k, v);
        }
        (Some(Value::Array(a)), Value::Number(i), None) => {
            a.remove(i.as_u64().unwrap_or(0) as usize);
        }
        (Some(Value::Array(a)), Value::Number(i), Some(v)) => {
            a[i.as_u64().unwrap_or(0) as usize] = v;
        }
        _ => {}
    }
}

fn merged(doc: &Value, patch: &Value) -> Value {
    let mut d = doc.clone();
    json_patch::merge(&mut d, patch);
    d
}

/// `v` without the object members whose value is `null`, at any depth.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), without_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        x => x.clone(),
    }
}

/// The merge patch applied to `before` gives `after`: exactly, or — RFC 7386 cannot set a member
/// to `null` — up to members that are `null`.
fn patch_gives(before: &Value, patch: &Value, after: &Value, what: &str) {
    let got = merged(before, patch);
    if got != *after {
        assert_eq!(
            without_nulls(&got),
            without_nulls(after),
            "the {what} patch on the current {what} is not the adjusted {what}"
        );
    }
}

fn check(a: &heat::Adjusted, before: &(Value, Value)) {
    patch_gives(&before.0, &a.template_patch, &a.template, "template");
    patch_gives(&before.1, &a.nfv_patch, &a.nfv, "nfv");
    let names: BTreeSet<String> = a.vnfcs.iter().map(heat::Vnfc::name).collect();
    assert_eq!(names.len(), a.vnfcs.len(), "VNFC names not unique");
}

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let (vnfd, fixture_base) = fixture();
    let mut base = fixture_base.clone();
    for e in case.edits.into_iter().take(4) {
        edit(&mut base.template, e);
    }
    let req: InstantiateVnfRequest = serde_json::from_value(json!({
        "flavourId": "simple",
        "extVirtualLinks": [
            {"id": "e1", "resourceId": "net-1", "extCps": [{"cpdId": "VDU1_CP1"}, {"cpdId": "VDU2_CP1"}]},
            {"id": "e2", "resourceId": "net-2", "extCps": [{"cpdId": "VDU2_CP2"}]}
        ]
    }))
    .expect("the instantiate request");
    let empty = Current::default();
    let input = Input {
        base: &base,
        vnfd,
        current: &empty,
    };
    let op = Operation::Instantiate(&req);
    let Ok(gr) = heat::grant_request(input, op) else {
        return;
    };
    let Ok(a) = heat::adjust(input, op, &Grant::derived(&gr)) else {
        return;
    };
    check(&a, &(json!({}), json!({})));
    let mut cur = Current {
        vnfcs: a.vnfcs.clone(),
        ext_virtual_links: req.ext_virtual_links.clone(),
        ..Current::default()
    };
    for step in case.steps.into_iter().take(12) {
        let input = Input {
            base: &base,
            vnfd,
            current: &cur,
        };
        let Ok(before) = heat::current_stack(input) else {
            return;
        };
        let adjusted = match step {
            Step::Lose(k) => {
                if !cur.vnfcs.is_empty() {
                    let k = k as usize % cur.vnfcs.len();
                    cur.vnfcs.remove(k);
                }
                continue;
            }
            Step::Out {
                steps,
                known_aspect,
            }
            | Step::In {
                steps,
                known_aspect,
            } => {
                let kind = if matches!(step, Step::Out { .. }) {
                    "SCALE_OUT"
                } else {
                    "SCALE_IN"
                };
                let aspect = if known_aspect {
                    "VDU1_scale"
                } else {
                    "VDU9_scale"
                };
                let r: ScaleVnfRequest = serde_json::from_value(
                    json!({"type": kind, "aspectId": aspect, "numberOfSteps": steps}),
                )
                .expect("a scale request");
                let op = Operation::Scale(&r);
                heat::grant_request(input, op)
                    .and_then(|gr| heat::adjust(input, op, &Grant::derived(&gr)))
            }
            Step::Heal { picks, image } => {
                let ids: Vec<String> = match cur.vnfcs.len() {
                    0 => Vec::new(),
                    n => picks
                        .iter()
                        .take(8)
                        .map(|p| cur.vnfcs[*p as usize % n].name())
                        .collect(),
                };
                let r: HealVnfRequest = serde_json::from_value(json!({ "vnfcInstanceId": ids }))
                    .expect("a heal request");
                let op = Operation::Heal(&r);
                heat::grant_request(input, op).and_then(|gr| {
                    let mut g = Grant::derived(&gr);
                    if let Some(i) = image {
                        g.vim_assets = Some(VimAssets {
                            software_images: vec![VimSoftwareImage {
                                vnfd_software_image_id: "VDU1".into(),
                                vim_software_image_id: format!("img-{i}"),
                                other: Default::default(),
                            }],
                            ..Default::default()
                        });
                    }
                    heat::adjust(input, op, &g)
                })
            }
        };
        if let Ok(a) = adjusted {
            check(&a, &before);
            cur.vnfcs = a.vnfcs.clone();
        }
    }
}
