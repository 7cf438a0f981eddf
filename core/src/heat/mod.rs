//! Individual VNFC management: from the BaseHOT of a flavour, the VNFD, the instance's current
//! VNFCs, an LCM request and a Grant, compute the *adjusted HOT* — one top-level resource
//! `<VDU>-<index>` per VNFC with its own `nfv` parameter entries — as full documents and as
//! RFC 7386 merge patches against the current stack. Pure: no I/O, not async, never reads the
//! clock.
//!
//! Rules (Tacker's `StandardUserData`, `tacker/sol_refactored/infra_drivers/openstack/
//! userdata_standard.py`, is the reference algorithm, with its bugs fixed):
//! - one resource per VNFC named `<VDU>-<index>`, a copy of the BaseHOT resource `<VDU>` whose
//!   `get_param: [nfv, VDU|CP, <name>, …]` paths (at any depth) point at `<name>-<index>`;
//!   nested templates are passed through unchanged ([`template`]);
//! - instantiate creates the instantiation level's `number_of_instances` per VDU (or what the
//!   Grant grants); scale-out appends indices after the highest existing one, never reusing
//!   one ({0, 2} + 1 → 3; Tacker counts the VNFCs and would make a second 2); scale-in removes
//!   the highest indices first; heal keeps the order and changes only the healed VNFC's
//!   `vcImageId`, and only when the Grant gives an image; each VNFC gets the zone its Grant
//!   `addResources` entry names (`membership`, `grant_check`);
//! - a VDU that the BaseHOT scales with an `OS::Heat::AutoScalingGroup` stays in ASG mode: the
//!   template is kept and `nfv.VDU.<VDU>.desired_capacity` carries the count;
//! - a VDU whose resource is not a nested template (a top-level `OS::Nova::Server` with its
//!   ports beside it, like the pv-k8s-cluster storage server) is kept as one VNFC
//!   ([`Mode::Single`]): it can be healed (its image changed) but not scaled.
//!
//! `nfv` values (`nfv_fill`): `computeName` = `<VDU>-<index>`; `computeFlavourId` and
//! `vcImageId` from the Grant's `vimAssets`, else the VNFD; `locationConstraints` = the granted
//! zone; CP `network` and `fixed_ips` from the external virtual links (Grant, request,
//! instance), at scale-out else copied from an existing VNFC of the VDU; then
//! `additionalParams.nfv` of the request and the Grant, for the VNFCs the operation creates or
//! heals. Only keys the BaseHOT references are set. A key without a value is `null` in the
//! entries of a VNFC created by INSTANTIATE and left out in those created by SCALE_OUT (Heat's
//! `get_param` yields null for the one and `''` for the other), and a HEAL removes the `null`s of
//! every `nfv.VDU` entry — as Tacker's StandardUserData does (its heal is a merge patch).
//! `extManagedVirtualLinks` (of the Grant and the InstantiateVnfRequest, kept by the instance)
//! take their internal VL and its subnets out of the template; the ports use the given network.
//! A change of external connectivity keeps the template and every VNFC; it rewrites the
//! `network` and `fixed_ips` of the `nfv.CP` entries (per VNFC, and of single-resource VDUs)
//! whose CP the Grant's or the request's external VLs name, then merges
//! `additionalParams.nfv` into any existing entry.

pub mod grant;
pub mod merge;
pub mod template;

mod grant_check;
mod membership;
mod nfv_fill;
mod patches;

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

use crate::package::{BaseHot, Vnfd};
use crate::wire::sol003::{
    ChangeExtVnfConnectivityRequest, ExtManagedVirtualLinkData, ExtVirtualLinkData, HealVnfRequest,
    InstantiateVnfRequest, ScaleVnfRequest,
};
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
    pub id: Option<crate::model::VnfcId>,
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

/// The instance before the operation: `{"vnfcs": [Vnfc], "nfv"?: {…}, "extVirtualLinks"?: […],
/// "extManagedVirtualLinks"?: […]}`.
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
    /// The instance's externally managed internal VLs (from its InstantiateVnfRequest and
    /// Grant): their resources stay out of the template, their ports use the given network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_managed_virtual_links: Vec<ExtManagedVirtualLinkData>,
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
    /// ChangeExtVnfConnectivityRequest (SOL003 §5.5.2.11): every VNFC stays; the `nfv.CP`
    /// entries of the CPs the request's (or the Grant's) external VLs name get the VL's
    /// network and fixed addresses, as Tacker's `StandardUserData.change_ext_conn`.
    ChangeExtConn(&'a ChangeExtVnfConnectivityRequest),
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

/// The GrantRequest (SOL003 §9.5.2.2) that `op` implies, with resource definitions named as
/// the [`grant`] module describes. Errors: as [`adjust`] for the request and current VNFCs.
pub fn grant_request(input: Input<'_>, op: Operation<'_>) -> Result<GrantRequest, HeatError> {
    let analysis = Analysis::new(input.base, input.vnfd)?;
    check_current(input, &analysis)?;
    Ok(membership::plan(input, &analysis, op)?.grant_request)
}

/// The whole current top-level template and `nfv` parameter of the instance: the BaseHOT
/// expanded for `current.vnfcs`, and `current.nfv` with every VNFC's `parameters` merged in.
/// An instance without VNFCs has the empty stack `({}, {})`.
pub fn current_stack(input: Input<'_>) -> Result<(Value, Value), HeatError> {
    let analysis = Analysis::new(input.base, input.vnfd)?;
    check_current(input, &analysis)?;
    let stack = patches::current(input, &analysis);
    Ok((stack.template, stack.nfv))
}

/// Validates the current VNFCs: known VDUs, unique indices, and (for individually managed VDUs
/// whose resource uses `nfv.VDU.<VDU>`) an `nfv.VDU.<VDU>-<index>` entry for each VNFC.
fn check_current(input: Input<'_>, analysis: &Analysis) -> Result<(), HeatError> {
    let mut seen = BTreeSet::new();
    let nfv = patches::current(input, analysis).nfv;
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
        let uses_vdu_entry = analysis
            .refs_of(&c.vdu_id)
            .iter()
            .any(|r| r.section == Section::Vdu && r.name == c.vdu_id);
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
/// Steps: the VNFCs the operation asks for (`membership`), what the Grant allows of them
/// (`grant_check`), the VNFCs after it, the `nfv` parameter after it (`nfv_fill`), the
/// documents and patches (`patches`).
pub fn adjust(input: Input<'_>, op: Operation<'_>, grant: &Grant) -> Result<Adjusted, HeatError> {
    let analysis = Analysis::new(input.base, input.vnfd)?;
    check_current(input, &analysis)?;
    let plan = membership::plan(input, &analysis, op)?;
    let granted = grant_check::check(&plan, grant)?;
    let after = grant_check::after(&input.current.vnfcs, &granted);
    let before = if plan.instantiate {
        patches::Stack::empty()
    } else {
        patches::current(input, &analysis)
    };
    let filled = nfv_fill::fill(
        input,
        &analysis,
        &plan,
        grant,
        &granted,
        &before.nfv,
        &after,
    )?;
    // Externally managed VLs: the Grant's, then the request's (instantiate); the instance's.
    let managed_vls: Vec<ExtManagedVirtualLinkData> = if plan.instantiate {
        let mut v = grant.ext_managed_virtual_links.clone();
        v.extend(plan.request_managed_vls.iter().cloned());
        v
    } else {
        input.current.ext_managed_virtual_links.clone()
    };
    let docs = patches::documents(
        input,
        &analysis,
        &before,
        filled.nfv,
        after,
        &patches::managed(&managed_vls),
    );
    let names = |vnfcs: &[(String, u32)]| vnfcs.iter().map(|(v, i)| indexed(v, *i)).collect();
    Ok(Adjusted {
        template: docs.after.template,
        files: input.base.files.clone(),
        nfv: docs.after.nfv,
        template_patch: docs.template_patch,
        nfv_patch: docs.nfv_patch,
        vnfcs: docs.vnfcs,
        created: names(&granted.create),
        removed: names(&granted.remove),
        healed: if plan.is_heal {
            names(&granted.heal)
        } else {
            Vec::new()
        },
        image_changed: filled.image_changed,
        grant_request: plan.grant_request,
        warnings: filled.warnings,
    })
}

/// The `nfv` parameter the BaseHOT takes as written (no VNFC indices): every VDU and CP entry
/// it references, filled as [`adjust`] fills the entries of a VDU that is not managed per VNFC
/// at instantiate (`computeName` = the VDU name, the zone of the VDU's first granted VNFC,
/// `desired_capacity` = its granted VNFCs), without `additionalParams.nfv`. The parameters of
/// the seed fixture's BaseHOT, and what an AutoScalingGroup-mode VDU gets. Errors: as
/// [`adjust`] for the request and the Grant.
pub fn base_parameters(
    input: Input<'_>,
    req: &InstantiateVnfRequest,
    grant: &Grant,
) -> Result<Value, HeatError> {
    // Every VDU non-indexed, over the BaseHOT as written.
    let mut analysis = Analysis::new(input.base, input.vnfd)?;
    for m in analysis.modes.values_mut() {
        *m = Mode::Asg(String::new());
    }
    let plan = membership::plan(input, &analysis, Operation::Instantiate(req))?;
    let granted = grant_check::check(&plan, grant)?;
    let after = grant_check::after(&input.current.vnfcs, &granted);
    let no_nfv = json!({});
    let sources =
        nfv_fill::Sources::new(grant, input.vnfd, &plan.request_vls, input.current, &no_nfv);
    let mut nfv = json!({});
    for vdu in analysis.modes.keys() {
        let count = after.iter().filter(|c| c.vdu_id == *vdu).count();
        nfv_fill::fill_unindexed(&mut nfv, &analysis, &sources, &granted, vdu, count)?;
    }
    Ok(nfv)
}

/// ROLLBACK of a failed SCALE_OUT (SOL003 §5.4.15; Tacker's `scale_rollback`): the stack before
/// the scale-out that made `out_vnfcs` and `out_nfv` (its VNFCs and `nfv` after it) and created
/// `created` (`<VDU>-<index>`). The created VNFCs are left out; the others keep the parameters
/// they have in `out_vnfcs`; `nfv` entries no VNFC carries are kept. The template and `nfv` are
/// then those of the remaining VNFCs ([`current_stack`] with `input.current`'s external VLs).
///
/// Output: `(template, nfv, remaining VNFCs)`. Errors: as [`current_stack`] (the BaseHOT no
/// longer fits the remaining VNFCs).
pub fn rollback_scale_out(
    input: Input<'_>,
    out_vnfcs: &[Vnfc],
    out_nfv: &Value,
    created: &[String],
) -> Result<(Value, Value, Vec<Vnfc>), HeatError> {
    let kept: Vec<Vnfc> = out_vnfcs
        .iter()
        .filter(|c| !created.contains(&c.name()))
        .cloned()
        .collect();
    let mut nfv = out_nfv.as_object().cloned().unwrap_or_default();
    for c in out_vnfcs {
        for (sec, entries) in c.parameters.iter().flat_map(Value::as_object).flatten() {
            let Some(m) = nfv.get_mut(sec).and_then(Value::as_object_mut) else {
                continue;
            };
            for name in entries.as_object().into_iter().flatten().map(|(n, _)| n) {
                m.remove(name);
            }
        }
    }
    nfv.retain(|_, v| !v.as_object().is_some_and(Map::is_empty));
    let current = Current {
        vnfcs: kept.clone(),
        nfv,
        ext_virtual_links: input.current.ext_virtual_links.clone(),
        ext_managed_virtual_links: input.current.ext_managed_virtual_links.clone(),
    };
    let (template, nfv) = current_stack(Input {
        base: input.base,
        vnfd: input.vnfd,
        current: &current,
    })?;
    Ok((template, nfv, kept))
}
