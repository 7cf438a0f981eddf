//! BaseHOT analysis and expansion: which VDU is managed per VNFC (a top-level resource named
//! after the VDU) and which through an `OS::Heat::AutoScalingGroup`, every `get_param` path into
//! the `nfv` parameter with its owner, and the copy of a VDU resource for one VNFC with those
//! paths re-pointed at the indexed entries (as Tacker's `userdata_standard.py` names them).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::HeatError;
use crate::package::{BaseHot, Vnfd};

/// How the adjusted HOT treats one VDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Individual VNFC management: `resources.<VDU>` becomes `<VDU>-0`, `<VDU>-1`, ….
    Individual,
    /// The BaseHOT scales the VDU with this `OS::Heat::AutoScalingGroup` resource; the template
    /// is kept and `nfv.VDU.<VDU>.desired_capacity` carries the count.
    Asg(String),
    /// `resources.<VDU>` is itself a resource type (e.g. `OS::Nova::Server` whose ports and
    /// volumes are separate top-level resources), not a nested template: it cannot be copied
    /// per VNFC, so it is kept as it is, as exactly one VNFC with non-indexed `nfv` entries.
    Single,
}

/// The `nfv` section a path points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// `nfv.VDU.<VDU or virtual storage>`.
    Vdu,
    /// `nfv.CP.<CP>`.
    Cp,
}

impl Section {
    /// `"VDU"` or `"CP"`.
    pub fn key(self) -> &'static str {
        match self {
            Section::Vdu => "VDU",
            Section::Cp => "CP",
        }
    }
}

/// The largest array index a BaseHOT's `get_param` path into `nfv` may use (e.g.
/// `[nfv, CP, VDU1_CP1, fixed_ips, 0, ip_address]`): filling the `nfv` parameter creates the
/// array up to that index, so an unbounded index would allocate without bound (found by the
/// `heat` fuzz target: an index of 72340703952889240 asked for gigabytes).
pub const MAX_NFV_INDEX: u64 = 1023;

/// One `get_param: [nfv, <section>, <name>, <rest>…]` found in the BaseHOT.
#[derive(Debug, Clone, PartialEq)]
pub struct NfvRef {
    /// `VDU` or `CP`.
    pub section: Section,
    /// The VDU, virtual storage or CP name (not indexed).
    pub name: String,
    /// The path below the entry (`[computeFlavourId]`, `[fixed_ips, 0, subnet]`).
    pub rest: Vec<Value>,
    /// Template path of the `get_param`, for errors.
    pub at: String,
}

/// What the adjusted HOT needs to know about a BaseHOT.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Package-relative path of the top-level template (named in errors).
    pub file: String,
    /// Mode of every VDU of the VNFD.
    pub modes: BTreeMap<String, Mode>,
    /// `nfv` references by owning VDU.
    pub refs: BTreeMap<String, Vec<NfvRef>>,
}

const PSEUDO_PARAMS: &[&str] = &["OS::stack_name", "OS::stack_id", "OS::project_id"];

impl Analysis {
    /// Analyses `base` against `vnfd`. Errors ([`HeatError::Template`], naming the file and
    /// the template path): no `resources` mapping; a VDU without a resource of its name or an
    /// AutoScalingGroup holding it; a `get_param` of an undeclared parameter, into an `nfv`
    /// section other than `VDU`/`CP`, or naming a VDU/CP/storage the VNFD lacks; a per-VNFC
    /// parameter used outside its VDU's resource; a `get_resource`/`get_attr`/`depends_on` on a
    /// VDU resource that the adjusted HOT replaces; a nested template missing from `files`.
    pub fn new(base: &BaseHot, vnfd: &Vnfd) -> Result<Self, HeatError> {
        let file = base.top_path.clone();
        let resources = base.template["resources"]
            .as_object()
            .ok_or_else(|| template_err(&file, "resources", "missing or not a mapping".into()))?;
        let modes = vdu_modes(&file, resources, vnfd, &base.files)?;
        check_nested_templates(&file, resources, &modes, &base.files)?;
        let check = RefCheck {
            file: &file,
            declared: base.template["parameters"]
                .as_object()
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default(),
            vnfd,
            modes: &modes,
        };
        let mut refs: BTreeMap<String, Vec<NfvRef>> = BTreeMap::new();
        let individual: Vec<&str> = modes
            .iter()
            .filter(|(_, m)| **m == Mode::Individual)
            .map(|(v, _)| v.as_str())
            .collect();
        for (at, v, owner) in sections(base, resources, &modes) {
            let mut found = Vec::new();
            walk(v, &at, &mut found);
            for f in found {
                match f {
                    Found::Param { at, args } => {
                        if let Some((vdu, r)) = check.nfv_ref(owner.as_deref(), at, &args)? {
                            refs.entry(vdu).or_default().push(r);
                        }
                    }
                    Found::Resource { at, name } => {
                        if individual.contains(&name.as_str()) {
                            return Err(template_err(
                                &file,
                                &at,
                                format!(
                                    "refers to resource `{name}`, which the adjusted HOT replaces \
                                     with one resource per VNFC ({name}-0, {name}-1, …)"
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(Self { file, modes, refs })
    }

    /// The `nfv` references owned by `vdu` (none for a VDU without any).
    pub fn refs_of(&self, vdu: &str) -> &[NfvRef] {
        self.refs.get(vdu).map_or(&[], Vec::as_slice)
    }

    /// Whether `vdu` is managed per VNFC.
    pub fn individual(&self, vdu: &str) -> bool {
        self.modes.get(vdu) == Some(&Mode::Individual)
    }
}

/// A [`HeatError::Template`] about template `file` at template path `at`.
fn template_err(file: &str, at: &str, reason: String) -> HeatError {
    HeatError::Template {
        file: file.into(),
        at: at.into(),
        reason,
    }
}

/// The mode of every VDU of `vnfd`: by the type of `resources.<VDU>` of the top-level
/// template `file`, else the AutoScalingGroup holding the VDU (its member template in `files`).
/// Errors: a VDU with neither.
fn vdu_modes(
    file: &str,
    resources: &Map<String, Value>,
    vnfd: &Vnfd,
    files: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Mode>, HeatError> {
    let mut modes = BTreeMap::new();
    for vdu in vnfd.vdus.keys() {
        let mode = if let Some(r) = resources.get(vdu) {
            let ty = r["type"].as_str().unwrap_or("");
            if ty == "OS::Heat::AutoScalingGroup" {
                Mode::Asg(vdu.clone())
            } else if ty.ends_with(".yaml") || ty.ends_with(".yml") {
                Mode::Individual
            } else {
                Mode::Single
            }
        } else if let Some((name, _)) = resources.iter().find(|(_, r)| asg_holds(r, vdu, files)) {
            Mode::Asg(name.clone())
        } else {
            return Err(template_err(
                file,
                "resources",
                format!(
                    "VNFD VDU `{vdu}` has no resource `resources.{vdu}` (individual VNFC \
                     management) and no OS::Heat::AutoScalingGroup holding it"
                ),
            ));
        };
        modes.insert(vdu.clone(), mode);
    }
    Ok(modes)
}

/// Checks that every nested template a VDU resource (or its AutoScalingGroup's member) names
/// as its type is in `files`, since the adjusted HOT passes them along. Errors: one missing,
/// at `resources.<name>.type` of template `file`.
fn check_nested_templates(
    file: &str,
    resources: &Map<String, Value>,
    modes: &BTreeMap<String, Mode>,
    files: &BTreeMap<String, String>,
) -> Result<(), HeatError> {
    for (vdu, mode) in modes {
        let (rname, ty) = match mode {
            Mode::Individual | Mode::Single => (vdu.as_str(), &resources[vdu]["type"]),
            Mode::Asg(r) => (r.as_str(), &resources[r]["properties"]["resource"]["type"]),
        };
        if let Some(t) = ty.as_str()
            && (t.ends_with(".yaml") || t.ends_with(".yml"))
            && !files.contains_key(t)
        {
            return Err(template_err(
                file,
                &format!("resources.{rname}.type"),
                format!("nested template `{t}` is not in the BaseHOT's nested/ directory"),
            ));
        }
    }
    Ok(())
}

/// The parts of the BaseHOT searched for references, in order: each resource as
/// `(resources.<name>, its value, the VDU it stands for)` — a VDU's own resource or its
/// AutoScalingGroup —, then `outputs` (owned by no VDU).
fn sections<'a>(
    base: &'a BaseHot,
    resources: &'a Map<String, Value>,
    modes: &BTreeMap<String, Mode>,
) -> Vec<(String, &'a Value, Option<String>)> {
    let mut sections: Vec<(String, &Value, Option<String>)> = Vec::new();
    for (rname, r) in resources {
        // The resource that stands for a VDU (individual) or an ASG: its owner.
        let owner = modes.iter().find_map(|(v, m)| match m {
            Mode::Individual | Mode::Single if v == rname => Some(v.clone()),
            Mode::Asg(a) if a == rname => Some(v.clone()),
            _ => None,
        });
        sections.push((format!("resources.{rname}"), r, owner));
    }
    if let Some(o) = base.template.get("outputs") {
        sections.push(("outputs".into(), o, None));
    }
    sections
}

/// What a `get_param` found in the BaseHOT is checked against: the template's file, its
/// declared parameters, the VNFD and the VDUs' modes.
struct RefCheck<'a> {
    /// Package-relative path of the top-level template (named in errors).
    file: &'a str,
    /// Names under the template's `parameters`.
    declared: Vec<&'a str>,
    /// The VNFD whose VDUs, storages and CPs `nfv` entries name.
    vnfd: &'a Vnfd,
    /// Mode of every VDU.
    modes: &'a BTreeMap<String, Mode>,
}

impl RefCheck<'_> {
    /// The VDU owning `nfv.<section>.<name>`: the VDU itself, the VDU with that virtual
    /// storage, or the VDU of that CP; `None` when the VNFD has no such node.
    fn owner_of(&self, section: Section, name: &str) -> Option<String> {
        match section {
            Section::Vdu if self.vnfd.vdus.contains_key(name) => Some(name.to_owned()),
            Section::Vdu => self
                .vnfd
                .vdus
                .iter()
                .find(|(_, v)| v.storages.iter().any(|s| s == name))
                .map(|(n, _)| n.clone()),
            Section::Cp => self.vnfd.cps.get(name).map(|c| c.vdu.clone()),
        }
    }

    /// Checks the `get_param` at `at` with arguments `args`, found in a section owned by VDU
    /// `owner` (if any): `Some((owning VDU, reference))` for a path into `nfv.VDU`/`nfv.CP`,
    /// `None` for any other declared parameter. Errors: arguments neither a name nor a list,
    /// an undeclared parameter, another `nfv` section, an unknown VDU/storage/CP, an entry
    /// used outside its VDU's resource, an index over [`MAX_NFV_INDEX`].
    fn nfv_ref(
        &self,
        owner: Option<&str>,
        at: String,
        args: &Value,
    ) -> Result<Option<(String, NfvRef)>, HeatError> {
        let err = |reason: String| template_err(self.file, &at, reason);
        let (pname, path) = match args {
            Value::String(s) => (s.as_str(), &[][..]),
            Value::Array(a) if !a.is_empty() => (a[0].as_str().unwrap_or(""), &a[1..]),
            _ => return Err(err("get_param needs a name or a list".into())),
        };
        if !self.declared.contains(&pname) && !PSEUDO_PARAMS.contains(&pname) {
            return Err(err(format!(
                "get_param of parameter `{pname}`, which `parameters` does not declare"
            )));
        }
        if pname != "nfv" || path.len() < 2 {
            return Ok(None);
        }
        let section = match path[0].as_str() {
            Some("VDU") => Section::Vdu,
            Some("CP") => Section::Cp,
            _ => {
                return Err(err(format!(
                    "get_param into nfv.{}: vnfkeeper knows only nfv.VDU and nfv.CP",
                    path[0]
                        .as_str()
                        .map_or_else(|| path[0].to_string(), str::to_owned)
                )));
            }
        };
        let name = path[1].as_str().unwrap_or("");
        let Some(vdu) = self.owner_of(section, name) else {
            let what = match section {
                Section::Vdu => "a VDU or a virtual storage of a VDU",
                Section::Cp => "a CP",
            };
            return Err(err(format!(
                "get_param into unknown key nfv.{}.{name}: the VNFD has no such {what}",
                section.key()
            )));
        };
        match (owner, self.modes[&vdu] == Mode::Individual) {
            (Some(o), _) if o != vdu => {
                return Err(err(format!(
                    "nfv.{}.{name} belongs to VDU `{vdu}`, but is used in the resource of VDU `{o}`",
                    section.key()
                )));
            }
            (None, true) => {
                return Err(err(format!(
                    "nfv.{}.{name} belongs to VDU `{vdu}`, which is managed per VNFC: \
                     only resources.{vdu} may use it (the adjusted HOT has nfv.{}.{name}-<index>)",
                    section.key(),
                    section.key()
                )));
            }
            _ => {}
        }
        if let Some(i) = path[2..]
            .iter()
            .filter_map(Value::as_u64)
            .find(|i| *i > MAX_NFV_INDEX)
        {
            return Err(err(format!(
                "get_param index {i} into nfv.{}.{name}: at most {MAX_NFV_INDEX}",
                section.key()
            )));
        }
        let reference = NfvRef {
            section,
            name: name.to_owned(),
            rest: path[2..].to_vec(),
            at: at.clone(),
        };
        Ok(Some((vdu, reference)))
    }
}

/// Whether resource `r` is an AutoScalingGroup whose member template holds `vdu` (a resource
/// of that name in its nested template) or whose properties use `nfv.VDU.<vdu>`.
fn asg_holds(r: &Value, vdu: &str, files: &BTreeMap<String, String>) -> bool {
    if r["type"] != "OS::Heat::AutoScalingGroup" {
        return false;
    }
    let member = &r["properties"]["resource"];
    if let Some(t) = member["type"].as_str()
        && let Some(text) = files.get(t)
        && let Ok(nested) = serde_yaml_ng::from_str::<Value>(text)
        && nested["resources"].get(vdu).is_some()
    {
        return true;
    }
    let mut found = Vec::new();
    walk(&r["properties"], "", &mut found);
    found.iter().any(|f| match f {
        Found::Param { args, .. } => {
            args.get(0).and_then(Value::as_str) == Some("nfv")
                && args.get(1).and_then(Value::as_str) == Some("VDU")
                && args.get(2).and_then(Value::as_str) == Some(vdu)
        }
        Found::Resource { .. } => false,
    })
}

enum Found {
    Param { at: String, args: Value },
    Resource { at: String, name: String },
}

/// Collects `get_param`s and resource references (`get_resource`, `get_attr`, `depends_on`)
/// anywhere below `v`.
fn walk(v: &Value, at: &str, out: &mut Vec<Found>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match k.as_str() {
                    "get_param" if m.len() == 1 => out.push(Found::Param {
                        at: here.clone(),
                        args: x.clone(),
                    }),
                    "get_resource" if m.len() == 1 => {
                        if let Some(n) = x.as_str() {
                            out.push(Found::Resource {
                                at: here.clone(),
                                name: n.into(),
                            });
                        }
                    }
                    "get_attr" if m.len() == 1 => {
                        if let Some(n) = x.get(0).and_then(Value::as_str) {
                            out.push(Found::Resource {
                                at: here.clone(),
                                name: n.into(),
                            });
                        }
                    }
                    "depends_on" => {
                        let names: Vec<&str> = match x {
                            Value::String(s) => vec![s.as_str()],
                            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                            _ => Vec::new(),
                        };
                        for n in names {
                            out.push(Found::Resource {
                                at: here.clone(),
                                name: n.into(),
                            });
                        }
                    }
                    _ => {}
                }
                walk(x, &here, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// `name-index`, the adjusted HOT's name of a VNFC's resource or parameter entry.
pub fn indexed(name: &str, index: u32) -> String {
    format!("{name}-{index}")
}

/// A copy of `resource` (the BaseHOT resource of one VDU) for the VNFC with `index`: every
/// `get_param: [nfv, VDU|CP, <name>, …]` at any depth re-pointed at `<name>-<index>`
/// (Tacker's `userdata_standard.py` re-points only direct property values). References to
/// shared resources (`get_resource` of an internal VL, a server group) stay shared.
pub fn copy_for_vnfc(resource: &Value, index: u32) -> Value {
    match resource {
        Value::Object(m) => {
            if m.len() == 1
                && let Some(Value::Array(args)) = m.get("get_param")
                && args.len() >= 3
                && args[0] == "nfv"
                && (args[1] == "VDU" || args[1] == "CP")
                && let Some(name) = args[2].as_str()
            {
                let mut a = args.clone();
                a[2] = Value::String(indexed(name, index));
                let mut out = Map::new();
                out.insert("get_param".into(), Value::Array(a));
                return Value::Object(out);
            }
            Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), copy_for_vnfc(v, index)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| copy_for_vnfc(v, index)).collect()),
        other => other.clone(),
    }
}

/// Externally managed internal VLs (SOL003 InstantiateVnfRequest `extManagedVirtualLinks`,
/// §4.4.1.12 ExtManagedVirtualLinkData) applied to a top-level template: for each
/// `(vnfVirtualLinkDescId, resourceId)` in order, the resource named `vnfVirtualLinkDescId` and
/// every `OS::Neutron::Subnet` whose `properties.network` is `{get_resource: <it>}` leave the
/// template, and every `{get_resource: <it>}` left (at any depth, in maps and lists) becomes the
/// network id `resourceId`. Tacker's `common_script_utils.apply_ext_managed_vls` does the same,
/// except that it does not look into lists.
pub fn apply_ext_managed(template: &mut Value, managed: &[(&str, &str)]) {
    fn change(v: &mut Value, get_res: &Value, network: &str) {
        if v == get_res {
            *v = network.into();
            return;
        }
        match v {
            Value::Object(m) => m.values_mut().for_each(|x| change(x, get_res, network)),
            Value::Array(a) => a.iter_mut().for_each(|x| change(x, get_res, network)),
            _ => {}
        }
    }
    let Some(resources) = template.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    for (vl, network) in managed {
        let get_res = serde_json::json!({ "get_resource": vl });
        resources.retain(|name, r| {
            name != vl
                && !(r["type"] == "OS::Neutron::Subnet" && r["properties"]["network"] == get_res)
        });
        for r in resources.values_mut() {
            change(r, &get_res, network);
        }
    }
}

/// The top-level template for a set of VNFC indices per individually managed VDU: each such
/// VDU's resource replaced in place by its copies in ascending index order; everything else
/// (parameters, shared resources, ASG resources, outputs) as in the BaseHOT.
pub fn expand(base: &Value, analysis: &Analysis, indices: &BTreeMap<String, Vec<u32>>) -> Value {
    let mut out = base.clone();
    let Some(resources) = base["resources"].as_object() else {
        return out;
    };
    let mut new = Map::new();
    for (name, r) in resources {
        if analysis.individual(name) {
            for &i in indices.get(name).map(Vec::as_slice).unwrap_or(&[]) {
                new.insert(indexed(name, i), copy_for_vnfc(r, i));
            }
        } else {
            new.insert(name.clone(), r.clone());
        }
    }
    out["resources"] = Value::Object(new);
    out
}
