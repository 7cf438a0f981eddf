//! Individual VNFC management (DESIGN C4, `seeds/individual-vnfc-management.zh.txt`): from the
//! BaseHOT of a flavour, the VNFD, the instance's current VNFCs, an LCM request and a Grant,
//! compute the *adjusted HOT* — one top-level resource `<VDU>-<index>` per VNFC with its own
//! `nfv` parameter entries — as full documents and as RFC 7386 merge patches against the
//! current stack. Pure: no I/O, not async, never reads the clock.
//!
//! Rules (issue 6; tacker-anchor §3 is the reference algorithm, with its bugs fixed):
//! - one resource per VNFC named `<VDU>-<index>`, a copy of the BaseHOT resource `<VDU>` whose
//!   `get_param: [nfv, VDU|CP, <name>, …]` paths (at any depth) point at `<name>-<index>`;
//!   nested templates are passed through unchanged ([`template`]);
//! - instantiate creates the instantiation level's `number_of_instances` per VDU (or what the
//!   Grant grants); scale-out appends indices after the highest existing one, never reusing
//!   one ({0, 2} + 1 → 3; Tacker would make a second 2, tacker-anchor §3.4); scale-in removes the
//!   highest indices first (§3.5); heal keeps the order and changes only the healed VNFC's
//!   `vcImageId`, and only when the Grant gives an image (§3.6); each VNFC gets the zone its
//!   Grant `addResources` entry names;
//! - a VDU that the BaseHOT scales with an `OS::Heat::AutoScalingGroup` stays in ASG mode: the
//!   template is kept and `nfv.VDU.<VDU>.desired_capacity` carries the count;
//! - a VDU whose resource is not a nested template (a top-level `OS::Nova::Server` with its
//!   ports beside it, like the pv-k8s-cluster storage server) is kept as one VNFC
//!   ([`Mode::Single`]): it can be healed (its image changed) but not scaled.
//!
//! `nfv` values: `computeName` = `<VDU>-<index>`; `computeFlavourId` and `vcImageId` from the
//! Grant's `vimAssets`, else the VNFD; `locationConstraints` = the granted zone; CP `network`
//! and `fixed_ips` from the external virtual links (Grant, request, instance), at scale-out else
//! copied from an existing VNFC of the VDU; then `additionalParams.nfv` of the request and the
//! Grant, for the VNFCs the operation creates or heals. Only keys the BaseHOT references are
//! set; a key without a value is left out (Heat's `get_param` then yields `''`), never `null`.

pub mod cli;
pub mod grant;
pub mod merge;
pub mod template;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use grant::{
    Grant, GrantInfo, GrantRequest, ResourceDefinition, ResourceHandle, VimAssets,
    VimComputeResourceFlavour, VimSoftwareImage, ZoneInfo,
};
pub use template::{Analysis, Mode};

use crate::intake::wire::sol003::{
    CpConfigs, ExtVirtualLinkData, HealVnfRequest, InstantiateVnfRequest, ScaleType,
    ScaleVnfRequest,
};
use crate::package::{BaseHot, Vnfd};
use template::{Section, indexed};

/// Why an adjusted HOT cannot be made. Each variant names where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeatError {
    /// The BaseHOT: package-relative file and template path (`resources.VDU1.properties.image.get_param`).
    #[error("{file}: {at}: {reason}")]
    Template {
        /// Package-relative path of the template.
        file: String,
        /// Dotted path inside it.
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// The LCM request, by JSON pointer into the SOL003 body's envelope (`/request/...`).
    #[error("request {pointer}: {reason}")]
    Request {
        /// RFC 6901 pointer.
        pointer: String,
        /// What is wrong.
        reason: String,
    },
    /// The Grant, by JSON pointer into it.
    #[error("grant {pointer}: {reason}")]
    Grant {
        /// RFC 6901 pointer.
        pointer: String,
        /// What is wrong.
        reason: String,
    },
    /// The current VNFCs ([`Current`]), by JSON pointer into it.
    #[error("current VNFCs {pointer}: {reason}")]
    Current {
        /// RFC 6901 pointer.
        pointer: String,
        /// What is wrong.
        reason: String,
    },
    /// The VNFD, by node template.
    #[error("VNFD node {node}: {reason}")]
    Vnfd {
        /// Node template name.
        node: String,
        /// What is wrong.
        reason: String,
    },
}

fn req_err(pointer: impl Into<String>, reason: impl Into<String>) -> HeatError {
    HeatError::Request {
        pointer: pointer.into(),
        reason: reason.into(),
    }
}

fn grant_err(pointer: impl Into<String>, reason: impl Into<String>) -> HeatError {
    HeatError::Grant {
        pointer: pointer.into(),
        reason: reason.into(),
    }
}

fn cur_err(pointer: impl Into<String>, reason: impl Into<String>) -> HeatError {
    HeatError::Current {
        pointer: pointer.into(),
        reason: reason.into(),
    }
}

/// One VNFC of the instance: `{"vduId", "index", "id"?, "parameters"?}`.
///
/// `parameters` is the VNFC's slice of the stack's `nfv` parameter:
/// `{"VDU": {"<VDU>-<i>": {…}, "<storage>-<i>": {…}}, "CP": {"<CP>-<i>": {…}}}` (an ASG-mode
/// VNFC has none). The engine stores it with the VNFC row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vnfc {
    /// The VDU.
    pub vdu_id: String,
    /// Its index: the resource is `<vduId>-<index>`.
    pub index: u32,
    /// `vnfcInstanceId` when it differs from `<vduId>-<index>` (heal requests may name either).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its `nfv` entries (see above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

impl Vnfc {
    /// `<vduId>-<index>`: the resource name in the adjusted HOT.
    pub fn name(&self) -> String {
        indexed(&self.vdu_id, self.index)
    }
}

/// The instance before the operation: `{"vnfcs": [Vnfc], "nfv"?: {…}, "extVirtualLinks"?: […]}`.
///
/// The stack's current `nfv` parameter is `nfv` with every VNFC's `parameters` merged in; the
/// current top-level template is the BaseHOT expanded for `vnfcs`. `extVirtualLinks` are the
/// instance's external VLs (from its InstantiateVnfRequest), used for CPs created by scale-out.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Current {
    /// The VNFCs, any order.
    #[serde(default)]
    pub vnfcs: Vec<Vnfc>,
    /// `nfv` entries not carried by a VNFC (ASG-mode VDUs' entries, or the whole parameter).
    #[serde(default)]
    pub nfv: Map<String, Value>,
    /// The instance's external virtual links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
}

/// The LCM operation to adjust the HOT for.
#[derive(Debug, Clone, Copy)]
pub enum Operation<'a> {
    /// InstantiateVnfRequest: the instance has no VNFCs yet.
    Instantiate(&'a InstantiateVnfRequest),
    /// ScaleVnfRequest (`SCALE_OUT` or `SCALE_IN`).
    Scale(&'a ScaleVnfRequest),
    /// HealVnfRequest (SOL002 `vnfcInstanceId`; empty = every VNFC).
    Heal(&'a HealVnfRequest),
    /// Change the image of these VNFCs (ids or `<VDU>-<index>`) to the one the Grant gives,
    /// without healing: the Grant must give an image for each VDU concerned.
    ChangeImage(&'a [String]),
}

/// What [`adjust`] works on.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The flavour's BaseHOT.
    pub base: &'a BaseHot,
    /// The VNFD.
    pub vnfd: &'a Vnfd,
    /// The instance before the operation (empty for instantiate).
    pub current: &'a Current,
}

/// The adjusted HOT for one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjusted {
    /// The whole top-level template after the operation.
    pub template: Value,
    /// Nested templates, unchanged from the BaseHOT (`files` of the Heat request).
    pub files: BTreeMap<String, String>,
    /// The whole `nfv` parameter after the operation.
    pub nfv: Value,
    /// RFC 7386 merge patch from the current template to [`Self::template`] (instantiate: from
    /// `{}`).
    pub template_patch: Value,
    /// RFC 7386 merge patch from the current `nfv` to [`Self::nfv`].
    pub nfv_patch: Value,
    /// The VNFCs after the operation, by VDU and index, each with its `parameters` slice.
    pub vnfcs: Vec<Vnfc>,
    /// `<VDU>-<index>` of the VNFCs created.
    pub created: Vec<String>,
    /// `<VDU>-<index>` of the VNFCs removed.
    pub removed: Vec<String>,
    /// `<VDU>-<index>` of the VNFCs healed (the engine marks their servers unhealthy).
    pub healed: Vec<String>,
    /// `<VDU>-<index>` of the VNFCs whose image changes.
    pub image_changed: Vec<String>,
    /// The GrantRequest the operation implies.
    pub grant_request: GrantRequest,
    /// Non-fatal findings (e.g. `additionalParams.nfv` entries for VNFCs this operation does
    /// not touch, which are ignored).
    pub warnings: Vec<String>,
}

/// What an operation asks for, before the Grant.
#[derive(Debug, Clone, Default)]
struct Plan {
    grant_request: GrantRequest,
    create: Vec<(String, u32)>,
    remove: Vec<(String, u32)>,
    heal: Vec<(String, u32)>,
    heal_storage: bool,
    require_image: bool,
    is_heal: bool,
    instantiate: bool,
    /// `additionalParams.nfv` of the request, with its pointer.
    request_nfv: Option<(Value, String)>,
    /// The request's external VLs (instantiate).
    request_vls: Vec<ExtVirtualLinkData>,
}

/// The GrantRequest (SOL003 §9.5.2.2) that `op` implies, with resource definitions named as
/// the [`grant`] module describes. Errors: as [`adjust`] for the request and current VNFCs.
pub fn grant_request(input: Input<'_>, op: Operation<'_>) -> Result<GrantRequest, HeatError> {
    let analysis = Analysis::new(input.base, input.vnfd)?;
    check_current(input, &analysis)?;
    Ok(plan(input, &analysis, op)?.grant_request)
}

/// The whole current top-level template and `nfv` parameter of the instance: the BaseHOT
/// expanded for `current.vnfcs`, and `current.nfv` with every VNFC's `parameters` merged in.
/// An instance without VNFCs has the empty stack `({}, {})`.
pub fn current_stack(input: Input<'_>) -> Result<(Value, Value), HeatError> {
    let analysis = Analysis::new(input.base, input.vnfd)?;
    check_current(input, &analysis)?;
    Ok(current_docs(input, &analysis))
}

fn current_docs(input: Input<'_>, analysis: &Analysis) -> (Value, Value) {
    if input.current.vnfcs.is_empty() && input.current.nfv.is_empty() {
        return (json!({}), json!({}));
    }
    let mut nfv = Value::Object(input.current.nfv.clone());
    for c in &input.current.vnfcs {
        if let Some(p) = &c.parameters {
            nfv = merge::apply(&nfv, p);
        }
    }
    let t = template::expand(
        &input.base.template,
        analysis,
        &indices_by_vdu(&input.current.vnfcs),
    );
    (t, nfv)
}

fn indices_by_vdu(vnfcs: &[Vnfc]) -> BTreeMap<String, Vec<u32>> {
    let mut m: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for c in vnfcs {
        m.entry(c.vdu_id.clone()).or_default().push(c.index);
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// Validates the current VNFCs: known VDUs, unique indices, and (for individually managed VDUs
/// whose resource uses `nfv.VDU.<VDU>`) an `nfv.VDU.<VDU>-<index>` entry for each VNFC.
fn check_current(input: Input<'_>, analysis: &Analysis) -> Result<(), HeatError> {
    let mut seen = BTreeSet::new();
    let (_, nfv) = current_docs(input, analysis);
    for (k, c) in input.current.vnfcs.iter().enumerate() {
        if !input.vnfd.vdus.contains_key(&c.vdu_id) {
            return Err(cur_err(
                format!("/vnfcs/{k}/vduId"),
                format!("the VNFD has no VDU `{}`", c.vdu_id),
            ));
        }
        if !seen.insert((c.vdu_id.clone(), c.index)) {
            return Err(cur_err(
                format!("/vnfcs/{k}"),
                format!("VNFC {} is listed twice", c.name()),
            ));
        }
        let uses_vdu_entry = analysis.refs.get(&c.vdu_id).is_some_and(|r| {
            r.iter()
                .any(|r| r.section == Section::Vdu && r.name == c.vdu_id)
        });
        if analysis.individual(&c.vdu_id) && uses_vdu_entry && nfv["VDU"].get(c.name()).is_none() {
            return Err(cur_err(
                format!("/vnfcs/{k}"),
                format!(
                    "no nfv.VDU.{} entry: give the VNFC's `parameters` or the stack's `nfv`",
                    c.name()
                ),
            ));
        }
    }
    Ok(())
}

fn definition(action: &str, kind: &str, vdu: &str, template: &str, i: u32) -> ResourceDefinition {
    ResourceDefinition {
        id: format!("{action}-{}", indexed(template, i)),
        resource_type: kind.into(),
        vdu_id: vdu.into(),
        resource_template_id: template.into(),
        resource: None,
    }
}

/// Resolves VNFC references (`vnfcInstanceId` values) to `(vdu, index)`.
fn resolve(
    current: &Current,
    ids: &[String],
    pointer: &str,
) -> Result<Vec<(String, u32)>, HeatError> {
    let mut out = Vec::new();
    for (k, id) in ids.iter().enumerate() {
        let c = current
            .vnfcs
            .iter()
            .find(|c| c.id.as_deref() == Some(id.as_str()))
            .or_else(|| current.vnfcs.iter().find(|c| c.name() == *id))
            .ok_or_else(|| {
                req_err(
                    format!("{pointer}/{k}"),
                    format!("the instance has no VNFC `{id}`"),
                )
            })?;
        let key = (c.vdu_id.clone(), c.index);
        if !out.contains(&key) {
            out.push(key);
        }
    }
    Ok(out)
}

fn plan(input: Input<'_>, analysis: &Analysis, op: Operation<'_>) -> Result<Plan, HeatError> {
    let single = |vdu: &str| analysis.modes.get(vdu) == Some(&Mode::Single);
    let vnfd = input.vnfd;
    let current = input.current;
    let mut p = Plan::default();
    let by_vdu = indices_by_vdu(&current.vnfcs);
    let add = |p: &mut Plan, vdu: &str, i: u32| {
        p.grant_request
            .add_resources
            .push(definition("add", "COMPUTE", vdu, vdu, i));
        for s in &vnfd.vdus[vdu].storages {
            p.grant_request
                .add_resources
                .push(definition("add", "STORAGE", vdu, s, i));
        }
    };
    let remove = |p: &mut Plan, vdu: &str, i: u32, storage: bool| {
        p.grant_request
            .remove_resources
            .push(definition("remove", "COMPUTE", vdu, vdu, i));
        if storage {
            for s in &vnfd.vdus[vdu].storages {
                p.grant_request
                    .remove_resources
                    .push(definition("remove", "STORAGE", vdu, s, i));
            }
        }
    };
    match op {
        Operation::Instantiate(req) => {
            p.instantiate = true;
            p.grant_request.operation = "INSTANTIATE".into();
            if !current.vnfcs.is_empty() {
                return Err(cur_err(
                    "/vnfcs",
                    "instantiate: the instance already has VNFCs",
                ));
            }
            let level = req.instantiation_level_id.as_deref();
            if let Some(l) = level
                && !vnfd.instantiation_levels.contains_key(l)
            {
                return Err(req_err(
                    "/request/instantiationLevelId",
                    format!("the VNFD has no instantiation level `{l}`"),
                ));
            }
            p.grant_request.instantiation_level_id = level.map(str::to_owned);
            for (name, vdu) in &vnfd.vdus {
                let n = vnfd.instances_at_level(name, level);
                if n > 1 && single(name) {
                    return Err(HeatError::Vnfd {
                        node: name.clone(),
                        reason: format!(
                            "instantiation level gives {n} instances, but resources.{name} of the \
                             BaseHOT is a single resource, not a nested template"
                        ),
                    });
                }
                if n > vdu.max_instances {
                    return Err(HeatError::Vnfd {
                        node: name.clone(),
                        reason: format!(
                            "instantiation level gives {n} instances, max_number_of_instances is {}",
                            vdu.max_instances
                        ),
                    });
                }
                for i in 0..n {
                    p.create.push((name.clone(), i));
                    add(&mut p, name, i);
                }
            }
            p.request_vls = req.ext_virtual_links.clone();
            p.request_nfv = req
                .additional_params
                .as_ref()
                .and_then(|a| a.extra.get("nfv"))
                .map(|v| (v.clone(), "/request/additionalParams/nfv".to_owned()));
        }
        Operation::Scale(req) => {
            p.grant_request.operation = "SCALE".into();
            let aspect = vnfd.aspects.get(&req.aspect_id).ok_or_else(|| {
                req_err(
                    "/request/aspectId",
                    format!("the VNFD has no scaling aspect `{}`", req.aspect_id),
                )
            })?;
            if aspect.vdu_deltas.is_empty() {
                return Err(req_err(
                    "/request/aspectId",
                    format!(
                        "scaling aspect `{}` scales no VDU (no VduScalingAspectDeltas)",
                        req.aspect_id
                    ),
                ));
            }
            if req.number_of_steps == 0 {
                return Err(req_err("/request/numberOfSteps", "must be at least 1"));
            }
            for (vdu, delta) in &aspect.vdu_deltas {
                let Some(v) = vnfd.vdus.get(vdu) else {
                    return Err(HeatError::Vnfd {
                        node: vdu.clone(),
                        reason: format!("aspect `{}` targets an unknown VDU", req.aspect_id),
                    });
                };
                if single(vdu) {
                    return Err(req_err(
                        "/request/aspectId",
                        format!(
                            "aspect `{}` scales VDU {vdu}, whose BaseHOT resource is a single \
                             resource (not a nested template or an AutoScalingGroup)",
                            req.aspect_id
                        ),
                    ));
                }
                let n = delta * req.number_of_steps;
                let have = by_vdu.get(vdu).cloned().unwrap_or_default();
                let count = have.len() as u32;
                match req.scale_type {
                    ScaleType::ScaleOut => {
                        if count + n > v.max_instances {
                            return Err(req_err(
                                "/request/numberOfSteps",
                                format!(
                                    "scale-out by {n} would give VDU {vdu} {} VNFCs; its max_number_of_instances is {}",
                                    count + n,
                                    v.max_instances
                                ),
                            ));
                        }
                        // Never reuse an index: continue after the highest one.
                        let next = have.last().map_or(0, |m| m + 1);
                        for i in next..next + n {
                            p.create.push((vdu.clone(), i));
                            add(&mut p, vdu, i);
                        }
                    }
                    ScaleType::ScaleIn => {
                        if n > count || count - n < v.min_instances {
                            return Err(req_err(
                                "/request/numberOfSteps",
                                format!(
                                    "scale-in by {n} would leave VDU {vdu} {} VNFCs; its min_number_of_instances is {}",
                                    count as i64 - n as i64,
                                    v.min_instances
                                ),
                            ));
                        }
                        // Highest index first.
                        for &i in have.iter().rev().take(n as usize) {
                            p.remove.push((vdu.clone(), i));
                            remove(&mut p, vdu, i, true);
                        }
                    }
                }
            }
            p.request_nfv = req
                .additional_params
                .as_ref()
                .and_then(|a| a.get("nfv"))
                .map(|v| (v.clone(), "/request/additionalParams/nfv".to_owned()));
        }
        Operation::Heal(req) => {
            p.grant_request.operation = "HEAL".into();
            p.is_heal = true;
            let targets = if req.vnfc_instance_id.is_empty() {
                let mut all: Vec<(String, u32)> = current
                    .vnfcs
                    .iter()
                    .map(|c| (c.vdu_id.clone(), c.index))
                    .collect();
                all.sort();
                all
            } else {
                resolve(current, &req.vnfc_instance_id, "/request/vnfcInstanceId")?
            };
            p.heal_storage = req
                .additional_params
                .as_ref()
                .and_then(|a| a.all)
                .unwrap_or(false);
            let storage = p.heal_storage;
            for (vdu, i) in &targets {
                remove(&mut p, vdu, *i, storage);
                p.grant_request
                    .add_resources
                    .push(definition("add", "COMPUTE", vdu, vdu, *i));
            }
            p.heal = targets;
            p.request_nfv = req
                .additional_params
                .as_ref()
                .and_then(|a| a.extra.get("nfv"))
                .map(|v| (v.clone(), "/request/additionalParams/nfv".to_owned()));
        }
        Operation::ChangeImage(ids) => {
            p.grant_request.operation = "HEAL".into();
            p.require_image = true;
            p.heal = resolve(current, ids, "/vnfcInstanceId")?;
            for (vdu, i) in &p.heal.clone() {
                remove(&mut p, vdu, *i, false);
                p.grant_request
                    .add_resources
                    .push(definition("add", "COMPUTE", vdu, vdu, *i));
            }
        }
    }
    Ok(p)
}

/// A source of CP network data: external VLs and where they came from.
struct VlSource<'a> {
    links: &'a [ExtVirtualLinkData],
    /// Pointer prefix of `links`, e.g. `/request/extVirtualLinks`.
    pointer: &'static str,
    kind: fn(String, String) -> HeatError,
}

/// The network and fixed IPs (`[{subnet?, ip_address?}]`) of CP `cp` from the first source
/// whose VLs list it, with the pointer of the extCp.
fn cp_link(sources: &[VlSource<'_>], cp: &str) -> Option<(String, Vec<Value>, String, usize)> {
    for (si, s) in sources.iter().enumerate() {
        for (l, link) in s.links.iter().enumerate() {
            for (c, ext) in link.ext_cps.iter().enumerate() {
                if ext.cpd_id != cp {
                    continue;
                }
                let mut fixed = Vec::new();
                for pd in ext
                    .cp_config
                    .as_ref()
                    .map(CpConfigs::ip_over_ethernet)
                    .unwrap_or_default()
                {
                    for a in pd["ipAddresses"].as_array().into_iter().flatten() {
                        let mut e = Map::new();
                        if let Some(s) = a["subnetId"].as_str() {
                            e.insert("subnet".into(), s.into());
                        }
                        if let Some(ip) = a["fixedAddresses"].get(0).and_then(Value::as_str) {
                            e.insert("ip_address".into(), ip.into());
                        }
                        fixed.push(Value::Object(e));
                    }
                }
                return Some((
                    link.resource_id.clone(),
                    fixed,
                    format!("{}/{l}/extCps/{c}", s.pointer),
                    si,
                ));
            }
        }
    }
    None
}

/// Sets `v` at `path` below `target` (strings are keys, integers array positions; missing
/// containers are created, array gaps filled with `{}`).
fn set_path(target: &mut Value, path: &[Value], v: Value) {
    let Some((first, rest)) = path.split_first() else {
        *target = v;
        return;
    };
    if let Some(i) = first.as_u64() {
        let i = i as usize;
        if !target.is_array() {
            *target = Value::Array(Vec::new());
        }
        let a = target.as_array_mut().expect("just made an array");
        while a.len() <= i {
            a.push(json!({}));
        }
        set_path(&mut a[i], rest, v);
    } else {
        let key = match first {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if !target.is_object() {
            *target = json!({});
        }
        let m = target.as_object_mut().expect("just made an object");
        set_path(m.entry(key).or_insert(Value::Null), rest, v);
    }
}

/// The value at `path` below `v`, if present and not null.
fn get_path<'v>(v: &'v Value, path: &[Value]) -> Option<&'v Value> {
    let mut cur = v;
    for p in path {
        cur = match p {
            Value::String(s) => cur.get(s)?,
            Value::Number(n) => cur.get(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    (!cur.is_null()).then_some(cur)
}

/// Keys whose absence is harmless (Heat's `get_param` yields `''`, which Nova and Heat treat as
/// "not given"); any other referenced key must get a value.
const OPTIONAL_KEYS: &[&str] = &["locationConstraints", "name", "computeName", "fixed_ips"];

/// Computes the adjusted HOT for `op` under `grant` (a Grant answering [`grant_request`]'s
/// GrantRequest; [`Grant::derived`] when there is no NFVO).
///
/// Output: [`Adjusted`] — full documents, merge patches against [`current_stack`], the VNFCs
/// after the operation and what happened to which. Errors ([`HeatError`]): the BaseHOT (see
/// [`Analysis::new`]; also a referenced `nfv` key that gets no value, named by the template
/// path of its `get_param`), the request (unknown instantiation level, aspect or VNFC; a count
/// outside the VDU's min/max; a fixed address that several VNFCs would share), the Grant (a
/// `resourceDefinitionId` or `zoneId` it does not define; no image for a change of image), the
/// current VNFCs (unknown VDU, duplicate index, missing parameters).
///
/// Sources: seed "调整后的 HOT" and its UserData requirements; tacker-anchor §3.3–§3.6.
pub fn adjust(input: Input<'_>, op: Operation<'_>, grant: &Grant) -> Result<Adjusted, HeatError> {
    let vnfd = input.vnfd;
    let current = input.current;
    let analysis = Analysis::new(input.base, vnfd)?;
    check_current(input, &analysis)?;
    let plan = plan(input, &analysis, op)?;
    let mut warnings = Vec::new();

    // The Grant: known definitions, known zones.
    let mut add_zone: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for (k, g) in grant.add_resources.iter().enumerate() {
        if !plan
            .grant_request
            .add_resources
            .iter()
            .any(|d| d.id == g.resource_definition_id)
        {
            return Err(grant_err(
                format!("/addResources/{k}/resourceDefinitionId"),
                format!(
                    "`{}` is not an addResources definition of the GrantRequest (it has: {})",
                    g.resource_definition_id,
                    names(
                        plan.grant_request
                            .add_resources
                            .iter()
                            .map(|d| d.id.as_str())
                    )
                ),
            ));
        }
        let zone = match &g.zone_id {
            None => None,
            Some(z) => Some(
                grant
                    .zones
                    .iter()
                    .find(|zi| zi.id == *z)
                    .map(|zi| zi.zone_id.as_str())
                    .ok_or_else(|| {
                        grant_err(
                            format!("/addResources/{k}/zoneId"),
                            format!("`{z}` is not the id of an entry of zones"),
                        )
                    })?,
            ),
        };
        add_zone.insert(g.resource_definition_id.as_str(), zone);
    }
    let mut removed_granted = BTreeSet::new();
    for (k, g) in grant.remove_resources.iter().enumerate() {
        if !plan
            .grant_request
            .remove_resources
            .iter()
            .any(|d| d.id == g.resource_definition_id)
        {
            return Err(grant_err(
                format!("/removeResources/{k}/resourceDefinitionId"),
                format!(
                    "`{}` is not a removeResources definition of the GrantRequest (it has: {})",
                    g.resource_definition_id,
                    names(
                        plan.grant_request
                            .remove_resources
                            .iter()
                            .map(|d| d.id.as_str())
                    )
                ),
            ));
        }
        removed_granted.insert(g.resource_definition_id.as_str());
    }
    let add_id = |vdu: &str, i: u32| format!("add-{}", indexed(vdu, i));
    let remove_id = |vdu: &str, i: u32| format!("remove-{}", indexed(vdu, i));

    // Count = current + granted adds − granted removes (seed: UserData requirements).
    let create: Vec<(String, u32)> = plan
        .create
        .iter()
        .filter(|(v, i)| add_zone.contains_key(add_id(v, *i).as_str()))
        .cloned()
        .collect();
    let remove: Vec<(String, u32)> = plan
        .remove
        .iter()
        .filter(|(v, i)| removed_granted.contains(remove_id(v, *i).as_str()))
        .cloned()
        .collect();
    let heal: Vec<(String, u32)> = plan
        .heal
        .iter()
        .filter(|(v, i)| removed_granted.contains(remove_id(v, *i).as_str()))
        .cloned()
        .collect();

    let mut after: Vec<Vnfc> = current
        .vnfcs
        .iter()
        .filter(|c| !remove.contains(&(c.vdu_id.clone(), c.index)))
        .cloned()
        .collect();
    for (v, i) in &create {
        after.push(Vnfc {
            vdu_id: v.clone(),
            index: *i,
            id: None,
            parameters: None,
        });
    }
    after.sort_by(|a, b| (&a.vdu_id, a.index).cmp(&(&b.vdu_id, b.index)));
    let count_after = |vdu: &str| after.iter().filter(|c| c.vdu_id == vdu).count();

    let (cur_template, cur_nfv) = if plan.instantiate {
        (json!({}), json!({}))
    } else {
        current_docs(input, &analysis)
    };
    let mut nfv = cur_nfv.clone();
    if !nfv.is_object() {
        nfv = json!({});
    }

    // Entry names of one VNFC (section, name), indexed or not.
    let entries = |vdu: &str, i: Option<u32>| -> Vec<(Section, String)> {
        let n = |s: &str| match i {
            Some(i) => indexed(s, i),
            None => s.to_owned(),
        };
        let mut out = vec![(Section::Vdu, n(vdu))];
        for s in &vnfd.vdus[vdu].storages {
            out.push((Section::Vdu, n(s)));
        }
        for (cp, c) in &vnfd.cps {
            if c.vdu == vdu {
                out.push((Section::Cp, n(cp)));
            }
        }
        out
    };

    // Removed VNFCs lose their entries.
    for (v, i) in &remove {
        if analysis.individual(v) {
            for (sec, name) in entries(v, Some(*i)) {
                if let Some(m) = nfv.get_mut(sec.key()).and_then(Value::as_object_mut) {
                    m.remove(&name);
                }
            }
        }
    }

    let vl_sources = [
        VlSource {
            links: &grant.ext_virtual_links,
            pointer: "/extVirtualLinks",
            kind: |p, r| HeatError::Grant {
                pointer: p,
                reason: r,
            },
        },
        VlSource {
            links: &plan.request_vls,
            pointer: "/request/extVirtualLinks",
            kind: |p, r| HeatError::Request {
                pointer: p,
                reason: r,
            },
        },
        VlSource {
            links: &current.ext_virtual_links,
            pointer: "/extVirtualLinks",
            kind: |p, r| HeatError::Current {
                pointer: p,
                reason: r,
            },
        },
    ];
    let empty_refs = Vec::new();
    let refs_of = |vdu: &str| analysis.refs.get(vdu).unwrap_or(&empty_refs);
    let image_of = |name: &str, fallback: bool| -> Option<String> {
        grant.image(name).map(str::to_owned).or_else(|| {
            fallback
                .then(|| {
                    vnfd.vdus
                        .get(name)
                        .and_then(|v| v.image.clone())
                        .or_else(|| vnfd.storage_images.get(name).cloned())
                })
                .flatten()
        })
    };

    // Fills the entries of one VNFC (`index` Some) or of an ASG VDU (`index` None).
    let fill = |nfv: &mut Value,
                vdu: &str,
                index: Option<u32>,
                zone: Option<&str>|
     -> Result<(), HeatError> {
        for r in refs_of(vdu) {
            let entry = match index {
                Some(i) => indexed(&r.name, i),
                None => r.name.clone(),
            };
            let key = r.rest.first().and_then(Value::as_str);
            let value: Option<Value> = match (r.section, r.name == vdu, key) {
                (Section::Vdu, true, Some("computeName")) => Some(entry.clone().into()),
                (Section::Vdu, true, Some("computeFlavourId")) => grant
                    .flavour(vdu)
                    .map(str::to_owned)
                    .or_else(|| vnfd.vdus[vdu].flavour.clone())
                    .map(Value::from),
                (Section::Vdu, _, Some("vcImageId")) => image_of(&r.name, true).map(Value::from),
                (Section::Vdu, true, Some("locationConstraints")) => zone.map(Value::from),
                (Section::Vdu, true, Some("desired_capacity")) if index.is_none() => {
                    Some(count_after(vdu).into())
                }
                (Section::Cp, _, Some("network")) => match cp_link(&vl_sources, &r.name) {
                    Some((net, ..)) => Some(net.into()),
                    // Scale-out without VL data: the network of an existing VNFC's same CP.
                    None => index.and_then(|_| {
                        current
                            .vnfcs
                            .iter()
                            .filter(|c| c.vdu_id == vdu)
                            .filter(|c| !remove.contains(&(c.vdu_id.clone(), c.index)))
                            .min_by_key(|c| c.index)
                            .and_then(|c| {
                                get_path(
                                    &cur_nfv,
                                    &[
                                        "CP".into(),
                                        indexed(&r.name, c.index).into(),
                                        "network".into(),
                                    ],
                                )
                                .cloned()
                            })
                    }),
                },
                (Section::Cp, _, Some("fixed_ips")) => match cp_link(&vl_sources, &r.name) {
                    Some((_, fixed, pointer, si)) => {
                        let v = get_path(&Value::Array(fixed), &r.rest[1..]).cloned();
                        let has_ip = v.as_ref().is_some_and(|v| {
                            r.rest.last().and_then(Value::as_str) == Some("ip_address")
                                || v.to_string().contains("\"ip_address\"")
                        });
                        if has_ip && count_after(vdu) > 1 {
                            return Err((vl_sources[si].kind)(
                                pointer,
                                format!(
                                    "a fixed address for CP `{}` would be shared by the {} VNFCs of VDU `{vdu}`",
                                    r.name,
                                    count_after(vdu)
                                ),
                            ));
                        }
                        v
                    }
                    None => None,
                },
                _ => None,
            };
            let sec = nfv
                .as_object_mut()
                .expect("nfv is an object")
                .entry(r.section.key())
                .or_insert_with(|| json!({}));
            let e = sec
                .as_object_mut()
                .ok_or_else(|| {
                    cur_err(
                        format!("/nfv/{}", r.section.key()),
                        "not an object".to_owned(),
                    )
                })?
                .entry(entry.clone())
                .or_insert_with(|| json!({}));
            if let Some(v) = value {
                set_path(e, &r.rest, v);
            }
        }
        Ok(())
    };

    // Created VNFCs and ASG VDUs.
    let mut affected: BTreeSet<(Section, String)> = BTreeSet::new();
    for (v, i) in &create {
        if analysis.individual(v) {
            let zone = add_zone.get(add_id(v, *i).as_str()).copied().flatten();
            fill(&mut nfv, v, Some(*i), zone)?;
            affected.extend(entries(v, Some(*i)));
        }
    }
    for (vdu, mode) in &analysis.modes {
        if *mode != Mode::Individual {
            if plan.instantiate {
                let zone = create
                    .iter()
                    .filter(|(v, _)| v == vdu)
                    .find_map(|(v, i)| add_zone.get(add_id(v, *i).as_str()).copied().flatten());
                fill(&mut nfv, vdu, None, zone)?;
                affected.extend(entries(vdu, None));
            } else if refs_of(vdu)
                .iter()
                .any(|r| r.rest.first().and_then(Value::as_str) == Some("desired_capacity"))
            {
                set_path(
                    &mut nfv,
                    &["VDU".into(), vdu.clone().into(), "desired_capacity".into()],
                    count_after(vdu).into(),
                );
            }
        }
    }

    // Heal / change of image: only the image, only when the Grant gives one.
    let mut image_changed = Vec::new();
    for (v, i) in &heal {
        if let Mode::Asg(_) = analysis.modes[v] {
            continue; // ASG mode: Heat rebuilds the marked member; parameters stay.
        }
        // Single mode: the one VNFC's entries are not indexed.
        let ix = |name: &str| {
            if analysis.individual(v) {
                indexed(name, *i)
            } else {
                name.to_owned()
            }
        };
        let mut names = vec![v.clone()];
        if plan.heal_storage {
            names.extend(vnfd.vdus[v].storages.iter().cloned());
        }
        let mut changed = false;
        for name in &names {
            let uses_image = refs_of(v).iter().any(|r| {
                r.section == Section::Vdu
                    && r.name == *name
                    && r.rest.first().and_then(Value::as_str) == Some("vcImageId")
            });
            let img = grant.image(name);
            if plan.require_image && name == v && img.is_none() {
                return Err(grant_err(
                    "/vimAssets/softwareImages",
                    format!(
                        "change of image of {}: no entry with vnfdSoftwareImageId `{name}`",
                        indexed(v, *i)
                    ),
                ));
            }
            if let (true, Some(img)) = (uses_image, img) {
                let path = ["VDU".into(), ix(name).into(), "vcImageId".into()];
                if get_path(&nfv, &path).and_then(Value::as_str) != Some(img) {
                    set_path(&mut nfv, &path, img.into());
                    changed = true;
                }
            }
        }
        if changed {
            image_changed.push(indexed(v, *i));
        }
        affected.extend(entries(v, analysis.individual(v).then_some(*i)));
    }

    // additionalParams.nfv of the request, then of the Grant, for the entries touched.
    let grant_nfv = grant
        .additional_params
        .as_ref()
        .and_then(|a| a.get("nfv"))
        .map(|v| (v.clone(), "/additionalParams/nfv".to_owned()));
    for (extra, pointer) in plan.request_nfv.iter().chain(grant_nfv.iter()) {
        let Some(obj) = extra.as_object() else {
            let e = format!("{pointer}: not an object");
            return Err(if pointer.starts_with("/request") {
                req_err(pointer.clone(), "not an object")
            } else {
                grant_err(pointer.clone(), e)
            });
        };
        for (sec_key, entries_v) in obj {
            let sec = match sec_key.as_str() {
                "VDU" => Section::Vdu,
                "CP" => Section::Cp,
                _ => {
                    warnings.push(format!(
                        "{pointer}/{sec_key} ignored: the BaseHOT uses only nfv.VDU and nfv.CP"
                    ));
                    continue;
                }
            };
            for (name, v) in entries_v.as_object().into_iter().flatten() {
                if affected.contains(&(sec, name.clone())) {
                    let target = nfv
                        .as_object_mut()
                        .expect("nfv is an object")
                        .entry(sec.key())
                        .or_insert_with(|| json!({}));
                    let slot = target
                        .as_object_mut()
                        .expect("section is an object")
                        .entry(name.clone())
                        .or_insert_with(|| json!({}));
                    json_patch::merge(slot, v);
                } else {
                    warnings.push(format!(
                        "{pointer}/{sec_key}/{name} ignored: this operation creates or heals no VNFC with that entry"
                    ));
                }
            }
        }
    }

    // Every referenced key of a touched entry must have a value unless it is optional.
    for (vdu, refs) in &analysis.refs {
        for r in refs {
            let key = r.rest.first().and_then(Value::as_str);
            if key.is_none_or(|k| OPTIONAL_KEYS.contains(&k)) {
                continue;
            }
            let names: Vec<String> = if analysis.individual(vdu) {
                after
                    .iter()
                    .filter(|c| c.vdu_id == *vdu)
                    .map(|c| indexed(&r.name, c.index))
                    .collect()
            } else {
                vec![r.name.clone()]
            };
            for name in names {
                if !affected.contains(&(r.section, name.clone())) {
                    continue;
                }
                let mut path = vec![Value::from(r.section.key()), Value::from(name.clone())];
                path.extend(r.rest.iter().cloned());
                if get_path(&nfv, &path).is_none() {
                    return Err(HeatError::Template {
                        file: analysis.file.clone(),
                        at: r.at.clone(),
                        reason: format!(
                            "get_param into nfv.{}.{name}.{} which gets no value: vnfkeeper fills \
                             computeName, computeFlavourId, vcImageId, locationConstraints, \
                             desired_capacity (ASG) and a CP's network and fixed_ips from the \
                             VNFD, the Grant and the external virtual links; give other keys in \
                             additionalParams.nfv",
                            r.section.key(),
                            r.rest
                                .iter()
                                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                                .collect::<Vec<_>>()
                                .join(".")
                        ),
                    });
                }
            }
        }
    }

    let template = template::expand(&input.base.template, &analysis, &indices_by_vdu(&after));
    for c in &mut after {
        c.parameters = analysis
            .individual(&c.vdu_id)
            .then(|| slice(&nfv, &entries(&c.vdu_id, Some(c.index))));
    }
    Ok(Adjusted {
        template_patch: merge::diff(&cur_template, &template),
        nfv_patch: merge::diff(&cur_nfv, &nfv),
        template,
        files: input.base.files.clone(),
        nfv,
        vnfcs: after,
        created: create.iter().map(|(v, i)| indexed(v, *i)).collect(),
        removed: remove.iter().map(|(v, i)| indexed(v, *i)).collect(),
        healed: if plan.is_heal {
            heal.iter().map(|(v, i)| indexed(v, *i)).collect()
        } else {
            Vec::new()
        },
        image_changed,
        grant_request: plan.grant_request,
        warnings,
    })
}

/// `{"VDU": {…}, "CP": {…}}` holding the given entries of `nfv` that exist.
fn slice(nfv: &Value, entries: &[(Section, String)]) -> Value {
    let mut out = Map::new();
    for (sec, name) in entries {
        if let Some(v) = nfv[sec.key()].get(name) {
            out.entry(sec.key())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("section is an object")
                .insert(name.clone(), v.clone());
        }
    }
    Value::Object(out)
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The `nfv` parameter the BaseHOT takes as written (no VNFC indices): every VDU and CP
/// entry it references, filled as for one VNFC (`computeName` = the VDU name, the first granted
/// zone of the VDU). This is the seed's "输入参数" of the BaseHOT, and what an
/// AutoScalingGroup-mode VDU gets.
pub fn base_parameters(
    input: Input<'_>,
    req: &InstantiateVnfRequest,
    grant: &Grant,
) -> Result<Value, HeatError> {
    // Treat every VDU as ASG mode (non-indexed) over the BaseHOT as written.
    let mut analysis = Analysis::new(input.base, input.vnfd)?;
    for m in analysis.modes.values_mut() {
        *m = Mode::Asg(String::new());
    }
    let plan = plan(input, &analysis, Operation::Instantiate(req))?;
    let mut nfv = json!({});
    let vl = [VlSource {
        links: &req.ext_virtual_links,
        pointer: "/request/extVirtualLinks",
        kind: |p, r| HeatError::Request {
            pointer: p,
            reason: r,
        },
    }];
    let zone_of = |vdu: &str| -> Option<String> {
        plan.create
            .iter()
            .filter(|(v, _)| v == vdu)
            .find_map(|(v, i)| {
                let id = format!("add-{}", indexed(v, *i));
                let z = grant
                    .add_resources
                    .iter()
                    .find(|g| g.resource_definition_id == id)?
                    .zone_id
                    .as_ref()?;
                grant
                    .zones
                    .iter()
                    .find(|zi| zi.id == *z)
                    .map(|zi| zi.zone_id.clone())
            })
    };
    for (vdu, refs) in &analysis.refs {
        for r in refs {
            let key = r.rest.first().and_then(Value::as_str);
            let value: Option<Value> = match (r.section, r.name == *vdu, key) {
                (Section::Vdu, true, Some("computeName")) => Some(vdu.clone().into()),
                (Section::Vdu, true, Some("computeFlavourId")) => grant
                    .flavour(vdu)
                    .map(str::to_owned)
                    .or_else(|| input.vnfd.vdus[vdu].flavour.clone())
                    .map(Value::from),
                (Section::Vdu, _, Some("vcImageId")) => grant
                    .image(&r.name)
                    .map(str::to_owned)
                    .or_else(|| input.vnfd.vdus.get(&r.name).and_then(|v| v.image.clone()))
                    .or_else(|| input.vnfd.storage_images.get(&r.name).cloned())
                    .map(Value::from),
                (Section::Vdu, true, Some("locationConstraints")) => zone_of(vdu).map(Value::from),
                (Section::Vdu, true, Some("desired_capacity")) => {
                    Some(plan.create.iter().filter(|(v, _)| v == vdu).count().into())
                }
                (Section::Cp, _, Some("network")) => cp_link(&vl, &r.name).map(|l| l.0.into()),
                _ => None,
            };
            let mut path = vec![Value::from(r.section.key()), Value::from(r.name.clone())];
            path.extend(r.rest.iter().cloned());
            if let Some(v) = value {
                set_path(&mut nfv, &path, v);
            }
        }
    }
    Ok(nfv)
}
