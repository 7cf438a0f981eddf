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
use crate::wire::sol003::{ExtManagedVirtualLinkData, ExtVirtualLinkData, ScaleType};

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
    let single = |vdu: &str| analysis.modes.get(vdu) == Some(&Mode::Single);
    let vnfd = input.vnfd;
    let current = input.current;
    let mut p = Plan::default();
    let by_vdu = indices_by_vdu(&current.vnfcs);
    let add = |p: &mut Plan, vdu: &str, i: u32| {
        p.grant_request
            .add_resources
            .push(definition(add_id(vdu, i), "COMPUTE", vdu, vdu));
        for s in &vnfd.vdus[vdu].storages {
            p.grant_request
                .add_resources
                .push(definition(add_id(s, i), "STORAGE", vdu, s));
        }
    };
    let remove = |p: &mut Plan, vdu: &str, i: u32, storage: bool| {
        p.grant_request
            .remove_resources
            .push(definition(remove_id(vdu, i), "COMPUTE", vdu, vdu));
        if storage {
            for s in &vnfd.vdus[vdu].storages {
                p.grant_request.remove_resources.push(definition(
                    remove_id(s, i),
                    "STORAGE",
                    vdu,
                    s,
                ));
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
            p.request_managed_vls = req.ext_managed_virtual_links.clone();
            p.request_nfv = req
                .additional_params
                .as_ref()
                .and_then(|a| a.extra.get("nfv"))
                .cloned();
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
                .cloned();
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
                p.grant_request.add_resources.push(definition(
                    add_id(vdu, *i),
                    "COMPUTE",
                    vdu,
                    vdu,
                ));
            }
            p.heal = targets;
            p.request_nfv = req
                .additional_params
                .as_ref()
                .and_then(|a| a.extra.get("nfv"))
                .cloned();
        }
        Operation::ChangeExtConn(req) => {
            p.grant_request.operation = "CHANGE_EXT_CONN".into();
            p.change_ext_conn = true;
            p.request_vls = req.ext_virtual_links.clone();
            p.request_nfv = req
                .additional_params
                .as_ref()
                .and_then(|a| a.get("nfv"))
                .cloned();
        }
        Operation::ChangeImage(ids) => {
            p.grant_request.operation = "HEAL".into();
            p.require_image = true;
            p.heal = resolve(current, ids, "/vnfcInstanceId")?;
            for (vdu, i) in &p.heal.clone() {
                remove(&mut p, vdu, *i, false);
                p.grant_request.add_resources.push(definition(
                    add_id(vdu, *i),
                    "COMPUTE",
                    vdu,
                    vdu,
                ));
            }
        }
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
