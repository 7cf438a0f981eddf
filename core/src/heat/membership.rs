//! VNFC membership: which `<VDU>-<index>` VNFCs an operation creates, removes or heals, the
//! GrantRequest that names them, and which VNFCs exist once the Grant has answered. Index rules:
//! instantiate creates `0..n` per VDU; scale-out appends after the highest existing index, never
//! reusing one ({0, 2} + 1 → 3; Tacker's `userdata_standard.py` counts the VNFCs and would make a
//! second 2); scale-in removes the highest indices first (as Tacker's `vnflcm_driver_v2.py`
//! picks the victims); heal keeps every VNFC and its order.

use std::collections::BTreeMap;

use serde_json::Value;

use super::grant::GrantRequest;
use super::template::{Analysis, Mode, indexed};
use super::{Current, HeatError, Input, Operation, ResourceDefinition, Vnfc, cur_err, req_err};
use crate::package::Vnfd;
use crate::package::vnfd::Vdu;
use crate::wire::sol003::{
    ChangeExtVnfConnectivityRequest, ExtManagedVirtualLinkData, ExtVirtualLinkData, HealVnfRequest,
    InstantiateVnfRequest, ScaleType, ScaleVnfRequest,
};

/// What an operation asks for, before the Grant: the VNFCs as `(VDU, index)` and the
/// GrantRequest naming them (resource definitions `add-<name>-<index>`, `remove-<name>-<index>`).
#[derive(Debug, Clone, Default)]
pub(super) struct Plan {
    /// The GrantRequest (SOL003 §9.5.2.2) of the operation.
    pub grant_request: GrantRequest,
    /// VNFCs to create, by VDU in index order.
    pub create: Vec<(String, u32)>,
    /// VNFCs to remove (scale-in: the highest indices first).
    pub remove: Vec<(String, u32)>,
    /// VNFCs to heal or to give a new image, in request order (a heal of every VNFC: sorted).
    pub heal: Vec<(String, u32)>,
    /// A heal with `additionalParams.all: true`: virtual storages are healed too.
    pub heal_storage: bool,
    /// A change of image: the Grant must give an image for each VDU concerned.
    pub require_image: bool,
    /// A HealVnfRequest (a change of image is not one: nothing is marked unhealthy).
    pub is_heal: bool,
    /// An InstantiateVnfRequest.
    pub instantiate: bool,
    /// `additionalParams.nfv` of the request (at `/request/additionalParams/nfv`).
    pub request_nfv: Option<Value>,
    /// The request's external VLs (instantiate).
    pub request_vls: Vec<ExtVirtualLinkData>,
    /// The request's externally managed internal VLs (instantiate).
    pub request_managed_vls: Vec<ExtManagedVirtualLinkData>,
    /// A ChangeExtVnfConnectivityRequest: CP entries of existing VNFCs are rewritten.
    pub change_ext_conn: bool,
}

/// The VNFCs `op` creates, removes or heals and the GrantRequest naming them. Errors: the
/// request (unknown instantiation level, aspect or VNFC; a count outside the VDU's
/// min/max), the VNFD (an instantiation level giving a single-resource VDU several instances),
/// the current VNFCs (instantiate on an instance that has some).
pub(super) fn plan(
    input: Input<'_>,
    analysis: &Analysis,
    op: Operation<'_>,
) -> Result<Plan, HeatError> {
    match op {
        Operation::Instantiate(req) => plan_instantiate(input, analysis, req),
        Operation::Scale(req) => plan_scale(input, analysis, req),
        Operation::Heal(req) => plan_heal(input, req),
        Operation::ChangeExtConn(req) => Ok(plan_change_ext_conn(req)),
        Operation::ChangeImage(ids) => plan_change_image(input, ids),
    }
}

/// Whether VDU `vdu` is a single BaseHOT resource (neither a nested template nor an
/// AutoScalingGroup), so it cannot have more than one VNFC.
fn is_single(analysis: &Analysis, vdu: &str) -> bool {
    analysis.modes.get(vdu) == Some(&Mode::Single)
}

impl Plan {
    /// Names VNFC `<vdu>-<i>`'s compute resource and each of its virtual storages in the
    /// GrantRequest's `addResources` (a VNFC the operation creates).
    fn add(&mut self, vnfd: &Vnfd, vdu: &str, i: u32) {
        self.add_compute(vdu, i);
        for s in &vnfd.vdus[vdu].storages {
            self.grant_request
                .add_resources
                .push(definition(add_id(s, i), "STORAGE", vdu, s));
        }
    }

    /// Names VNFC `<vdu>-<i>`'s compute resource alone in `addResources` (a VNFC rebuilt in
    /// place: healed or given a new image).
    fn add_compute(&mut self, vdu: &str, i: u32) {
        self.grant_request
            .add_resources
            .push(definition(add_id(vdu, i), "COMPUTE", vdu, vdu));
    }

    /// Names VNFC `<vdu>-<i>`'s compute resource in `removeResources`, and its virtual
    /// storages too when `storage` (a scale-in, or a heal with `all: true`).
    fn remove(&mut self, vnfd: &Vnfd, vdu: &str, i: u32, storage: bool) {
        self.grant_request.remove_resources.push(definition(
            remove_id(vdu, i),
            "COMPUTE",
            vdu,
            vdu,
        ));
        if storage {
            for s in &vnfd.vdus[vdu].storages {
                self.grant_request.remove_resources.push(definition(
                    remove_id(s, i),
                    "STORAGE",
                    vdu,
                    s,
                ));
            }
        }
    }
}

/// The plan of an InstantiateVnfRequest: `0..n` VNFCs per VDU, `n` from the requested
/// instantiation level (else the default). Errors: the instance has VNFCs, an unknown level,
/// a level giving a single-resource VDU several instances or a VDU more than its maximum.
fn plan_instantiate(
    input: Input<'_>,
    analysis: &Analysis,
    req: &InstantiateVnfRequest,
) -> Result<Plan, HeatError> {
    let vnfd = input.vnfd;
    let mut p = Plan {
        instantiate: true,
        ..Plan::default()
    };
    p.grant_request.operation = "INSTANTIATE".into();
    if !input.current.vnfcs.is_empty() {
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
        if n > 1 && is_single(analysis, name) {
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
            p.add(vnfd, name, i);
        }
    }
    p.request_vls = req.ext_virtual_links.clone();
    p.request_managed_vls = req.ext_managed_virtual_links.clone();
    p.request_nfv = req
        .additional_params
        .as_ref()
        .and_then(|a| a.extra.get("nfv"))
        .cloned();
    Ok(p)
}

/// The plan of a ScaleVnfRequest: each VDU of the aspect grows or shrinks by its delta times
/// `numberOfSteps`. Errors: an unknown aspect or one scaling no VDU, zero steps, an aspect
/// naming an unknown or single-resource VDU, a count past the VDU's min/max.
fn plan_scale(
    input: Input<'_>,
    analysis: &Analysis,
    req: &ScaleVnfRequest,
) -> Result<Plan, HeatError> {
    let vnfd = input.vnfd;
    let mut p = Plan::default();
    p.grant_request.operation = "SCALE".into();
    let by_vdu = indices_by_vdu(&input.current.vnfcs);
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
        if is_single(analysis, vdu) {
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
        match req.scale_type {
            ScaleType::ScaleOut => scale_out_vdu(&mut p, vnfd, vdu, v, &have, n)?,
            ScaleType::ScaleIn => scale_in_vdu(&mut p, vnfd, vdu, v, &have, n)?,
        }
    }
    p.request_nfv = req
        .additional_params
        .as_ref()
        .and_then(|a| a.get("nfv"))
        .cloned();
    Ok(p)
}

/// Adds `n` VNFCs of VDU `vdu` (VNFD node `v`, existing indices `have` ascending) to `p`,
/// numbered after the highest existing index. Errors: more than `max_number_of_instances`.
fn scale_out_vdu(
    p: &mut Plan,
    vnfd: &Vnfd,
    vdu: &str,
    v: &Vdu,
    have: &[u32],
    n: u32,
) -> Result<(), HeatError> {
    let count = have.len() as u32;
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
        p.create.push((vdu.to_owned(), i));
        p.add(vnfd, vdu, i);
    }
    Ok(())
}

/// Removes the `n` highest-indexed VNFCs of VDU `vdu` (VNFD node `v`, existing indices `have`
/// ascending) in `p`, with their virtual storages. Errors: fewer than
/// `min_number_of_instances` would be left.
fn scale_in_vdu(
    p: &mut Plan,
    vnfd: &Vnfd,
    vdu: &str,
    v: &Vdu,
    have: &[u32],
    n: u32,
) -> Result<(), HeatError> {
    let count = have.len() as u32;
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
        p.remove.push((vdu.to_owned(), i));
        p.remove(vnfd, vdu, i, true);
    }
    Ok(())
}

/// The plan of a HealVnfRequest: the named VNFCs (none named: every VNFC, sorted) are
/// removed and added again, their virtual storages too with `additionalParams.all: true`.
/// Errors: an unknown VNFC.
fn plan_heal(input: Input<'_>, req: &HealVnfRequest) -> Result<Plan, HeatError> {
    let current = input.current;
    let mut p = Plan {
        is_heal: true,
        ..Plan::default()
    };
    p.grant_request.operation = "HEAL".into();
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
    for (vdu, i) in &targets {
        p.remove(input.vnfd, vdu, *i, p.heal_storage);
        p.add_compute(vdu, *i);
    }
    p.heal = targets;
    p.request_nfv = req
        .additional_params
        .as_ref()
        .and_then(|a| a.extra.get("nfv"))
        .cloned();
    Ok(p)
}

/// The plan of a ChangeExtVnfConnectivityRequest: no VNFC comes or goes; the request's
/// external VLs are kept for the rewrite of `nfv.CP` entries.
fn plan_change_ext_conn(req: &ChangeExtVnfConnectivityRequest) -> Plan {
    let mut p = Plan {
        change_ext_conn: true,
        request_vls: req.ext_virtual_links.clone(),
        ..Plan::default()
    };
    p.grant_request.operation = "CHANGE_EXT_CONN".into();
    p.request_nfv = req
        .additional_params
        .as_ref()
        .and_then(|a| a.get("nfv"))
        .cloned();
    p
}

/// The plan of a change of image of the VNFCs `ids` (ids or `<VDU>-<index>`): a Grant
/// operation `HEAL` whose answer must give an image per VDU; storages are kept. Errors: an
/// unknown VNFC, at `/vnfcInstanceId/<k>`.
fn plan_change_image(input: Input<'_>, ids: &[String]) -> Result<Plan, HeatError> {
    let mut p = Plan {
        require_image: true,
        ..Plan::default()
    };
    p.grant_request.operation = "HEAL".into();
    p.heal = resolve(input.current, ids, "/vnfcInstanceId")?;
    for (vdu, i) in &p.heal.clone() {
        p.remove(input.vnfd, vdu, *i, false);
        p.add_compute(vdu, *i);
    }
    Ok(p)
}

/// Indices of `vnfcs` by VDU, ascending.
pub(super) fn indices_by_vdu(vnfcs: &[Vnfc]) -> BTreeMap<String, Vec<u32>> {
    let mut m: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for c in vnfcs {
        m.entry(c.vdu_id.clone()).or_default().push(c.index);
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// `add-<name>-<i>`: the id of the resource definition adding resource `<name>-<i>` (a VNFC's
/// compute resource, or its virtual storage `<name>`), as the [`super::grant`] module names them.
pub(super) fn add_id(name: &str, i: u32) -> String {
    format!("add-{}", indexed(name, i))
}

/// `remove-<name>-<i>`: the id of the resource definition removing resource `<name>-<i>`.
pub(super) fn remove_id(name: &str, i: u32) -> String {
    format!("remove-{}", indexed(name, i))
}

/// The resource definition `id` of VDU `vdu`'s resource from VNFD node `template` (`kind`
/// `COMPUTE` or `STORAGE`).
fn definition(id: String, kind: &str, vdu: &str, template: &str) -> ResourceDefinition {
    ResourceDefinition {
        id,
        resource_type: kind.into(),
        vdu_id: vdu.into(),
        resource_template_id: template.into(),
        resource: None,
    }
}

/// Resolves VNFC references (`vnfcInstanceId` values: an id, else `<VDU>-<index>`) to
/// `(vdu, index)`, in order, without repeats. Errors: an unknown VNFC, at `<pointer>/<k>`.
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
            .find(|c| c.id.as_ref().map(crate::model::VnfcId::as_str) == Some(id.as_str()))
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
