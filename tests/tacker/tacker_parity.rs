//! Differential test: `vnfkeeper hot adjust` against Tacker's own code (PyPI `tacker==16.0.0`,
//! `StandardUserData` with the GrantRequests of `VnfLcmDriverV2` and the stack merge of
//! `Openstack._update_fields`, driven by `tests/tacker/parity/driver.py` in the venv that
//! `scripts/tacker-venv` makes once, cached outside the clone).
//!
//! Each case is a sequence of LCM operations run through both; after every step the stack's
//! top-level template, nested templates and `nfv` parameter are compared as data. They must be
//! identical except for the deliberate differences ([`Deliberate`]), which the comparison takes
//! out by name — and each case says which of them it must meet, so a difference that goes away
//! (or appears where it should not) fails the test as well.
//!
//! The venv cannot be made (no python3-venv, no PyPI): the test fails, it does not skip.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Map, Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's python, made once (`support::tacker::venv_python`).
fn python() -> &'static Path {
    crate::support::tacker::venv_python()
}

/// A difference from Tacker that vnfkeeper keeps on purpose (README, "Differences from Tacker").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Deliberate {
    /// `computeName` is `<VDU>-<index>`; Tacker leaves it `null` (instantiate) or out (scale-out).
    ComputeName,
    /// Scale-in removes the `nfv` entries of the removed VNFCs; Tacker leaves them behind (and a
    /// VNFC created again under that name inherits their values).
    ScaleInDropsNfvEntries,
    /// Scale-out after a gap continues after the highest index; Tacker takes index = count and
    /// names an existing VNFC again.
    NoIndexReuse,
    /// The ROLLBACK of a failed scale-out restores the stack before it, `nfv` included; Tacker's
    /// `scale_rollback` patches only the template, so the `nfv` entries the scale-out added stay.
    RollbackDropsNfvEntries,
}

/// One step of a sequence.
struct Step {
    name: &'static str,
    operation: &'static str,
    request: Value,
    /// Zones per VNFC `<VDU>-<k>` (Grant `zones` + `addResources[].zoneId`).
    zones: BTreeMap<String, String>,
    /// Images per VDU or virtual storage (Grant `vimAssets.softwareImages`).
    images: BTreeMap<String, String>,
    /// The deliberate differences this step must show, and no others.
    expect: Vec<Deliberate>,
}

fn step(name: &'static str, operation: &'static str, request: Value) -> Step {
    Step {
        name,
        operation,
        request,
        zones: BTreeMap::new(),
        images: BTreeMap::new(),
        expect: Vec::new(),
    }
}

impl Step {
    fn zones(mut self, z: &[(&str, &str)]) -> Self {
        self.zones = z.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        self
    }
    fn images(mut self, i: &[(&str, &str)]) -> Self {
        self.images = i.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        self
    }
    fn expect(mut self, d: &[Deliberate]) -> Self {
        self.expect = d.to_vec();
        self
    }
}

/// A package and its VDUs' virtual storages (for the Grant's resource definitions).
struct Case {
    package: &'static str,
    storages: &'static [(&'static str, &'static str)],
    steps: Vec<Step>,
}

/// Tacker's side: one result per step.
fn tacker(case: &Case) -> Vec<Value> {
    let seq = json!({
        "package": root().join(case.package),
        "steps": case.steps.iter().map(|s| json!({
            "name": s.name, "operation": s.operation, "request": s.request,
            "zones": s.zones, "images": s.images,
        })).collect::<Vec<_>>(),
    });
    let mut child = Command::new(python())
        .arg(root().join("tests/tacker/parity/driver.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the driver");
    serde_json::to_writer(child.stdin.take().unwrap(), &seq).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "driver.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// vnfkeeper's stack between steps.
#[derive(Default)]
struct Stack {
    template: Value,
    nfv: Value,
    files: Value,
    ext_virtual_links: Value,
    ext_managed_virtual_links: Value,
}

/// `(VDU, index)` of the `<VDU>-<index>` resources of `template` whose VDU is in `vdus`.
fn vnfcs_of(template: &Value, vdus: &[&str]) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for name in template["resources"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if let Some((vdu, i)) = name.rsplit_once('-')
            && vdus.contains(&vdu)
            && let Ok(i) = i.parse()
        {
            out.push((vdu.to_owned(), i));
        }
    }
    out
}

fn vdus_of(case: &Case) -> Vec<&'static str> {
    let top = std::fs::read_dir(root().join(case.package).join("BaseHOT/simple/nested")).unwrap();
    let mut v: Vec<&'static str> = top
        .map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            &*n.trim_end_matches(".yaml").to_owned().leak()
        })
        .collect();
    v.sort();
    v
}

/// The Grant vnfkeeper gets for `s`: every resource definition the operation asks for (named as
/// `core/src/heat/grant.rs` describes), the step's zones and images.
fn grant(case: &Case, s: &Step, before: &[(String, u32)], after: &[(String, u32)]) -> Value {
    let storages = |vdu: &str| -> Vec<&str> {
        case.storages
            .iter()
            .filter(|(v, _)| *v == vdu)
            .map(|(_, s)| *s)
            .collect()
    };
    let zone_ids: BTreeMap<&String, String> = s
        .zones
        .values()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(k, z)| (z, format!("zone-{k}")))
        .collect();
    let mut add = Vec::new();
    let mut remove = Vec::new();
    for (v, i) in after.iter().filter(|c| !before.contains(c)) {
        let mut a = json!({"resourceDefinitionId": format!("add-{v}-{i}")});
        if let Some(z) = s.zones.get(&format!("{v}-{i}")) {
            a["zoneId"] = zone_ids[z].clone().into();
        }
        add.push(a);
        for st in storages(v) {
            add.push(json!({"resourceDefinitionId": format!("add-{st}-{i}")}));
        }
    }
    for (v, i) in before.iter().filter(|c| !after.contains(c)) {
        remove.push(json!({"resourceDefinitionId": format!("remove-{v}-{i}")}));
    }
    if s.operation == "heal" {
        let named: Vec<String> = s.request["vnfcInstanceId"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_else(|| before.iter().map(|(v, i)| format!("{v}-{i}")).collect());
        let all = s.request["additionalParams"]["all"] == true;
        for n in named {
            let (v, i) = n.rsplit_once('-').unwrap();
            remove.push(json!({"resourceDefinitionId": format!("remove-{n}")}));
            if all {
                for st in storages(v) {
                    remove.push(json!({"resourceDefinitionId": format!("remove-{st}-{i}")}));
                }
            }
        }
    }
    let mut g = json!({"id": "grant-parity", "addResources": add, "removeResources": remove});
    if !s.zones.is_empty() {
        g["zones"] = zone_ids
            .iter()
            .map(|(z, id)| json!({"id": id, "zoneId": z}))
            .collect();
    }
    if !s.images.is_empty() {
        g["vimAssets"] = json!({"softwareImages": s.images.iter().map(|(n, i)| json!({
            "vnfdSoftwareImageId": n, "vimSoftwareImageId": i})).collect::<Vec<_>>()});
    }
    g
}

/// Runs `hot adjust` for one step on `stack`; returns `{"template", "files", "nfv"}`.
fn vnfkeeper(case: &Case, s: &Step, stack: &mut Stack, dir: &Path) -> Value {
    let vdus = vdus_of(case);
    if s.operation == "lose" {
        let name = s.request["vnfc"].as_str().unwrap();
        stack.template["resources"]
            .as_object_mut()
            .unwrap()
            .remove(name);
        return json!({"template": stack.template, "files": files_as_data(stack), "nfv": stack.nfv});
    }
    let before = vnfcs_of(&stack.template, &vdus);
    let req = dir.join(format!("{}.request.json", s.name));
    std::fs::write(&req, s.request.to_string()).unwrap();
    let current = json!({
        "vnfcs": before.iter().map(|(v, i)| json!({"vduId": v, "index": i})).collect::<Vec<_>>(),
        "nfv": stack.nfv,
        "extVirtualLinks": stack.ext_virtual_links,
        "extManagedVirtualLinks": stack.ext_managed_virtual_links,
    });
    let vnfcs = dir.join(format!("{}.vnfcs.json", s.name));
    std::fs::write(&vnfcs, current.to_string()).unwrap();
    let run = |grant: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"));
        c.args(["hot", "adjust", "--package"])
            .arg(root().join(case.package))
            .args(["--flavour", "simple", "--operation", s.operation, "--json"])
            .arg("--request")
            .arg(&req);
        if s.operation != "instantiate" {
            c.arg("--vnfcs").arg(&vnfcs);
        }
        if let Some(g) = grant {
            c.arg("--grant").arg(g);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "hot adjust, step {}: {}",
            s.name,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let mut v = run(None);
    if !s.zones.is_empty() || !s.images.is_empty() {
        let after = vnfcs_of(&v["template"], &vdus);
        let g = dir.join(format!("{}.grant.json", s.name));
        std::fs::write(&g, grant(case, s, &before, &after).to_string()).unwrap();
        v = run(Some(&g));
    }
    stack.template = v["template"].clone();
    stack.nfv = v["parameters"]["nfv"].clone();
    if s.operation == "instantiate" {
        stack.files = v["files"].clone();
        let list = |k: &str| s.request.get(k).cloned().unwrap_or_else(|| json!([]));
        stack.ext_virtual_links = list("extVirtualLinks");
        stack.ext_managed_virtual_links = list("extManagedVirtualLinks");
    }
    json!({"template": stack.template, "files": files_as_data(stack), "nfv": stack.nfv})
}

/// Nested templates as data, as the driver reports Tacker's.
fn files_as_data(stack: &Stack) -> Value {
    stack
        .files
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, t)| {
            (
                k.clone(),
                serde_yaml_ng::from_str(t.as_str().unwrap()).unwrap(),
            )
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// Takes the deliberate differences out of `(ours, theirs)`; returns those met.
fn normalise(ours: &mut Value, theirs: &mut Value, vdus: &[&str]) -> Vec<Deliberate> {
    let mut met = Vec::new();
    // computeName: ours `<entry name>`, theirs null or absent.
    let our_vdu = ours["nfv"]["VDU"].as_object_mut();
    if let Some(our_vdu) = our_vdu {
        for (name, e) in our_vdu.iter_mut() {
            if e.get("computeName").and_then(Value::as_str) == Some(name.as_str()) {
                // get_mut: indexing a Value mutably would insert the entry.
                let t = theirs["nfv"]["VDU"]
                    .get_mut(name.as_str())
                    .and_then(Value::as_object_mut);
                if t.as_ref()
                    .is_none_or(|t| t.get("computeName").is_none_or(Value::is_null))
                {
                    e.as_object_mut().unwrap().remove("computeName");
                    if let Some(t) = t {
                        t.remove("computeName");
                    }
                    if !met.contains(&Deliberate::ComputeName) {
                        met.push(Deliberate::ComputeName);
                    }
                }
            }
        }
    }
    // A scale-out after a gap: ours created `<VDU>-<k>` after the highest index, theirs named
    // an existing VNFC again (so its template gained nothing). Ours' extra VNFCs go.
    let ours_vnfcs = vnfcs_of(&ours["template"], vdus);
    let theirs_vnfcs = vnfcs_of(&theirs["template"], vdus);
    for (v, i) in ours_vnfcs.iter().filter(|c| !theirs_vnfcs.contains(c)) {
        let of_v = || theirs_vnfcs.iter().filter(|(tv, _)| tv == v);
        let highest = of_v().map(|(_, ti)| *ti).max();
        let count = of_v().count() as u32;
        if highest.is_some_and(|h| h >= count && *i > h) {
            let name = format!("{v}-{i}");
            ours["template"]["resources"]
                .as_object_mut()
                .unwrap()
                .remove(&name);
            for sec in ["VDU", "CP"] {
                if let Some(m) = ours["nfv"][sec].as_object_mut() {
                    m.retain(|k, _| {
                        !(k.ends_with(&format!("-{i}"))
                            && owns(k.rsplit_once('-').unwrap().0, &name))
                    });
                }
            }
            if !met.contains(&Deliberate::NoIndexReuse) {
                met.push(Deliberate::NoIndexReuse);
            }
        }
    }
    // nfv entries of VNFCs that are gone: theirs only.
    let live_names: Vec<String> = vnfcs_of(&theirs["template"], vdus)
        .iter()
        .map(|(v, i)| format!("{v}-{i}"))
        .collect();
    for sec in ["VDU", "CP"] {
        let Some(t) = theirs["nfv"][sec].as_object_mut() else {
            continue;
        };
        let gone: Vec<String> = t
            .keys()
            .filter(|k| ours["nfv"][sec].get(k.as_str()).is_none())
            .filter(|k| {
                k.rsplit_once('-').is_some_and(|(base, i)| {
                    i.parse::<u32>().is_ok()
                        && !live_names
                            .iter()
                            .any(|l| l.ends_with(&format!("-{i}")) && owns(base, l))
                })
            })
            .cloned()
            .collect();
        for k in gone {
            t.remove(&k);
            if !met.contains(&Deliberate::ScaleInDropsNfvEntries) {
                met.push(Deliberate::ScaleInDropsNfvEntries);
            }
        }
    }
    met.sort();
    met
}

/// Whether entry base name `base` (a VDU, its storage or its CP, e.g. `VDU1_CP1`) belongs to the
/// VNFC `vnfc` (`VDU1-2`): same VDU prefix.
fn owns(base: &str, vnfc: &str) -> bool {
    let vdu = vnfc.rsplit_once('-').unwrap().0;
    base == vdu || base.starts_with(&format!("{vdu}_")) || base.starts_with(&format!("{vdu}-"))
}

fn run_case(case: &Case) {
    let theirs_all = tacker(case);
    let dir = tempfile::tempdir().unwrap();
    let vdus = vdus_of(case);
    let mut stack = Stack::default();
    let mut failures = Vec::new();
    // Tacker's nfv entries of VNFCs gone (left behind by its scale-in), by section and name.
    let mut leftovers: Vec<(&str, String, Value)> = Vec::new();
    // Keys a VNFC created again inherited from its leftover: `(section, entry, key, value)`.
    let mut inherited_keys: Vec<(&str, String, String, Value)> = Vec::new();
    for (s, theirs) in case.steps.iter().zip(theirs_all) {
        if let Some(e) = theirs.get("error") {
            failures.push(format!("step {}: Tacker's code failed: {e}", s.name));
            break;
        }
        let mut theirs = json!({"template": theirs["template"], "files": theirs["files"],
                                "nfv": theirs["nfv"]});
        let mut ours = vnfkeeper(case, s, &mut stack, dir.path());
        let live: Vec<String> = vnfcs_of(&theirs["template"], &vdus)
            .iter()
            .map(|(v, i)| format!("{v}-{i}"))
            .collect();
        let is_live = |name: &str| {
            name.rsplit_once('-').is_some_and(|(base, i)| {
                live.iter()
                    .any(|l| l.ends_with(&format!("-{i}")) && owns(base, l))
            })
        };
        // A VNFC created again: the keys Tacker's entry inherited from its leftover (they stay
        // in Tacker's stack from then on).
        leftovers.retain(|(sec, name, old)| {
            if !is_live(name) {
                return true;
            }
            for (k, v) in old.as_object().into_iter().flatten() {
                inherited_keys.push((sec, name.clone(), k.clone(), v.clone()));
            }
            false
        });
        let mut inherited = false;
        for (sec, name, k, v) in &inherited_keys {
            if ours["nfv"][*sec][name.as_str()].get(k).is_some() {
                continue;
            }
            if let Some(t) = theirs["nfv"][*sec]
                .get_mut(name.as_str())
                .and_then(Value::as_object_mut)
                && t.get(k) == Some(v)
            {
                t.remove(k);
                inherited = true;
            }
        }
        let new_leftovers: Vec<(&str, String, Value)> = ["VDU", "CP"]
            .into_iter()
            .flat_map(|sec| {
                theirs["nfv"][sec]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(n, _)| !is_live(n) && n.rsplit_once('-').is_some())
                    .map(move |(n, e)| (sec, n.clone(), e.clone()))
            })
            .collect();
        let mut met = normalise(&mut ours, &mut theirs, &vdus);
        if s.operation == "scale-out-rollback"
            && let Some(at) = met
                .iter()
                .position(|d| *d == Deliberate::ScaleInDropsNfvEntries)
        {
            // The entries a rolled-back scale-out left in Tacker's `nfv` (not a scale-in's).
            met[at] = Deliberate::RollbackDropsNfvEntries;
            met.sort();
        }
        if inherited && !met.contains(&Deliberate::ScaleInDropsNfvEntries) {
            met.push(Deliberate::ScaleInDropsNfvEntries);
            met.sort();
        }
        for l in new_leftovers {
            if !leftovers.iter().any(|(s, n, _)| *s == l.0 && *n == l.1) {
                leftovers.push(l);
            }
        }
        let mut want = s.expect.clone();
        want.sort();
        if met != want {
            failures.push(format!(
                "step {}: deliberate differences met {met:?}, documented {want:?}",
                s.name
            ));
        }
        for part in ["template", "files", "nfv"] {
            if ours[part] != theirs[part] {
                failures.push(format!(
                    "step {}: {part} differs\n  vnfkeeper: {}\n  Tacker:    {}",
                    s.name, ours[part], theirs[part]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The SOL003 body of a spool envelope.
fn instantiate_request(file: &str) -> Value {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(file)).unwrap()).unwrap();
    v["request"].clone()
}

fn scale(t: &str) -> Value {
    json!({"type": t, "aspectId": "VDU1_scale", "numberOfSteps": 1})
}

use Deliberate::*;

/// Tacker's functional-test sequence (`st_userdata` basic) on the two-VDU package: instantiate
/// with zones, scale-out, heal of one VNFC with a new image, scale-in.
#[test]
fn standard_sequence_matches_tacker() {
    run_case(&Case {
        package: "fixtures/heat/tacker-parity/package",
        storages: &[("VDU2", "VDU2-VirtualStorage")],
        steps: vec![
            step(
                "instantiate",
                "instantiate",
                instantiate_request("fixtures/heat/two-vdus/instantiate.json"),
            )
            .zones(&[("VDU1-0", "az-1"), ("VDU1-1", "az-2")])
            .expect(&[ComputeName]),
            step("scale-out", "scale-out", scale("SCALE_OUT")).expect(&[ComputeName]),
            step("heal-VDU1-1", "heal", json!({"vnfcInstanceId": ["VDU1-1"]}))
                .images(&[("VDU1", "img-vdu1-new")])
                .expect(&[ComputeName]),
            step("scale-in", "scale-in", scale("SCALE_IN"))
                .expect(&[ComputeName, ScaleInDropsNfvEntries]),
        ],
    });
}

/// An externally managed internal VL and a name given at INSTANTIATE for a VNFC that a later
/// scale-out creates (Tacker's functional test expects VDU1-2 to carry it); a heal of every
/// VNFC with `all: true` and new images for the VDU and the virtual storage (the storage keeps
/// its image); scale-in.
#[test]
fn managed_vl_future_names_and_heal_all_match_tacker() {
    let mut inst = instantiate_request("fixtures/heat/two-vdus/instantiate.json");
    inst["extManagedVirtualLinks"] = json!([
        {"id": "mgd-1", "vnfVirtualLinkDescId": "internalVL1", "resourceId": "net-managed-1"}
    ]);
    inst["additionalParams"]["nfv"]["VDU"]["VDU1-2"] =
        json!({"computeName": "vdu1-from-instantiate"});
    run_case(&Case {
        package: "fixtures/heat/tacker-parity/package",
        storages: &[("VDU2", "VDU2-VirtualStorage")],
        steps: vec![
            step("instantiate", "instantiate", inst).expect(&[ComputeName]),
            step("scale-out", "scale-out", scale("SCALE_OUT")).expect(&[ComputeName]),
            step(
                "heal-all",
                "heal",
                json!({"cause": "all", "additionalParams": {"all": true}}),
            )
            .images(&[
                ("VDU1", "img-vdu1-new"),
                ("VDU2-VirtualStorage", "img-vs-new"),
            ])
            .expect(&[ComputeName]),
            step("scale-in", "scale-in", scale("SCALE_IN"))
                .expect(&[ComputeName, ScaleInDropsNfvEntries]),
        ],
    });
}

/// A VNFC lost outside LCM leaves a gap; the next scale-out continues after the highest index
/// (vnfkeeper) where Tacker takes the count and names the existing VDU1-2 again.
#[test]
fn scale_out_after_a_gap_differs_only_by_the_index() {
    run_case(&Case {
        package: "fixtures/heat/tacker-parity/package",
        storages: &[("VDU2", "VDU2-VirtualStorage")],
        steps: vec![
            step(
                "instantiate",
                "instantiate",
                instantiate_request("fixtures/heat/two-vdus/instantiate.json"),
            )
            .expect(&[ComputeName]),
            step("scale-out", "scale-out", scale("SCALE_OUT")).expect(&[ComputeName]),
            step("lose-VDU1-1", "lose", json!({"vnfc": "VDU1-1"})).expect(&[ComputeName]),
            step("scale-out-after-gap", "scale-out", scale("SCALE_OUT"))
                .expect(&[ComputeName, NoIndexReuse]),
        ],
    });
}

/// The seed's BaseHOT and InstantiateVnfRequest (zones and an image granted), then scale-in,
/// scale-out and a heal.
#[test]
fn seed_base_hot_matches_tacker() {
    run_case(&Case {
        package: "fixtures/heat/seed/package",
        storages: &[],
        steps: vec![
            step(
                "instantiate",
                "instantiate",
                instantiate_request("fixtures/heat/seed/request.json"),
            )
            .zones(&[("VDU1-0", "zone-x"), ("VDU1-1", "zone-y")])
            .images(&[("VDU1", "6b8a14f0-1b40-418a-b650-ae4a0378daa5")])
            .expect(&[ComputeName]),
            step("scale-in", "scale-in", scale("SCALE_IN"))
                .expect(&[ComputeName, ScaleInDropsNfvEntries]),
            // VDU1-1 again: Tacker's entry inherits the zone left behind by its scale-in.
            step("scale-out", "scale-out", scale("SCALE_OUT"))
                .expect(&[ComputeName, ScaleInDropsNfvEntries]),
            step("heal-VDU1-0", "heal", json!({"vnfcInstanceId": ["VDU1-0"]}))
                .expect(&[ComputeName, ScaleInDropsNfvEntries]),
        ],
    });
}

/// CHANGE_EXT_CONN after a scale-out (Tacker's functional test `st_userdata` change_ext_conn):
/// VDU1's CP and VDU2's second CP move to new networks, VDU2_CP1 gets a new subnet and VDU2_CP2 a
/// new fixed address; `additionalParams.nfv` adds a value to an existing VNFC's entry. Every VNFC
/// stays; only those `nfv.CP` entries change.
#[test]
fn change_ext_conn_matches_tacker() {
    let change = json!({
        "extVirtualLinks": [
            {"id": "ext1-new", "resourceId": "net-ext1-new", "extCps": [
                {"cpdId": "VDU1_CP1", "cpConfig": {"VDU1_CP1_1": {"cpProtocolData": [
                    {"layerProtocol": "IP_OVER_ETHERNET"}]}}},
                {"cpdId": "VDU2_CP1", "cpConfig": {"VDU2_CP1_1": {"cpProtocolData": [
                    {"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {"ipAddresses": [
                        {"type": "IPV4", "subnetId": "subnet-ext1-new"}]}}]}}}
            ]},
            {"id": "ext2-new", "resourceId": "net-ext2-new", "extCps": [
                {"cpdId": "VDU2_CP2", "cpConfig": {"VDU2_CP2_1": {"cpProtocolData": [
                    {"layerProtocol": "IP_OVER_ETHERNET", "ipOverEthernet": {"ipAddresses": [
                        {"type": "IPV4", "fixedAddresses": ["10.10.1.7"],
                         "subnetId": "subnet-ext2-new"}]}}]}}}
            ]}
        ],
        "additionalParams": {"nfv": {"CP": {"VDU1_CP1-0": {"network": "net-pinned-0"}}}}
    });
    run_case(&Case {
        package: "fixtures/heat/tacker-parity/package",
        storages: &[("VDU2", "VDU2-VirtualStorage")],
        steps: vec![
            step(
                "instantiate",
                "instantiate",
                instantiate_request("fixtures/heat/two-vdus/instantiate.json"),
            )
            .expect(&[ComputeName]),
            step("scale-out", "scale-out", scale("SCALE_OUT")).expect(&[ComputeName]),
            step("change-ext-conn", "change-ext-conn", change).expect(&[ComputeName]),
        ],
    });
}

/// ROLLBACK of a failed scale-out (Tacker's `scale_rollback`): the added VNFC leaves the
/// template; vnfkeeper also takes its `nfv` entries out (the stack before the scale-out), Tacker
/// leaves them. A second rollback after another instantiate-level scale-out behaves the same.
#[test]
fn scale_out_rollback_matches_tacker() {
    run_case(&Case {
        package: "fixtures/heat/tacker-parity/package",
        storages: &[("VDU2", "VDU2-VirtualStorage")],
        steps: vec![
            step(
                "instantiate",
                "instantiate",
                instantiate_request("fixtures/heat/two-vdus/instantiate.json"),
            )
            .expect(&[ComputeName]),
            step("scale-out", "scale-out", scale("SCALE_OUT")).expect(&[ComputeName]),
            step(
                "scale-out-rollback",
                "scale-out-rollback",
                scale("SCALE_OUT"),
            )
            .expect(&[ComputeName, RollbackDropsNfvEntries]),
        ],
    });
}
