//! The documents Heat gets: the whole top-level template and `nfv` parameter before and after
//! the operation, each VNFC's slice of `nfv`, and the RFC 7386 merge patches from before to after.

use serde_json::{Map, Value, json};

use super::membership::indices_by_vdu;
use super::nfv_fill::entries;
use super::template::{self, Analysis, Section};
use super::{Input, Vnfc, merge};
use crate::wire::sol003::ExtManagedVirtualLinkData;

/// A stack's top-level template and `nfv` parameter.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stack {
    /// The top-level template.
    pub template: Value,
    /// The `nfv` parameter.
    pub nfv: Value,
}

impl Stack {
    /// The empty stack `({}, {})`: before instantiate.
    pub fn empty() -> Self {
        Self {
            template: json!({}),
            nfv: json!({}),
        }
    }
}

/// The instance's stack now: the BaseHOT expanded for `current.vnfcs`, and `current.nfv` with
/// every VNFC's `parameters` entries put in as they are (`null`s kept); an instance without VNFCs or `nfv` has
/// [`Stack::empty`].
pub(super) fn current(input: Input<'_>, analysis: &Analysis) -> Stack {
    if input.current.vnfcs.is_empty() && input.current.nfv.is_empty() {
        return Stack::empty();
    }
    let mut nfv = Value::Object(input.current.nfv.clone());
    for c in &input.current.vnfcs {
        // Each entry as stored, `null`s included (a merge patch would drop them). A section
        // that is not an object replaces the section, as a merge patch would.
        for (sec, entries) in c.parameters.iter().flat_map(Value::as_object).flatten() {
            let nfv_map = nfv.as_object_mut().expect("nfv is an object");
            let Some(entries) = entries.as_object() else {
                nfv_map.insert(sec.clone(), entries.clone());
                continue;
            };
            let target = nfv_map.entry(sec.clone()).or_insert_with(|| json!({}));
            if !target.is_object() {
                *target = json!({});
            }
            let target = target.as_object_mut().expect("just made an object");
            for (name, e) in entries {
                target.insert(name.clone(), e.clone());
            }
        }
    }
    let mut t = template::expand(
        &input.base.template,
        analysis,
        &indices_by_vdu(&input.current.vnfcs),
    );
    template::apply_ext_managed(&mut t, &managed(&input.current.ext_managed_virtual_links));
    Stack { template: t, nfv }
}

/// `(vnfVirtualLinkDescId, resourceId)` of externally managed VLs, for
/// [`template::apply_ext_managed`].
pub(super) fn managed(vls: &[ExtManagedVirtualLinkData]) -> Vec<(&str, &str)> {
    vls.iter()
        .map(|v| (v.vnf_virtual_link_desc_id.as_str(), v.resource_id.as_str()))
        .collect()
}

/// The stack after the operation, the patches to it, and the VNFCs with their slices.
pub(super) struct Documents {
    /// The stack after the operation.
    pub after: Stack,
    /// Merge patch from the template before to the one after.
    pub template_patch: Value,
    /// Merge patch from the `nfv` before to the one after.
    pub nfv_patch: Value,
    /// The VNFCs after the operation; an individually managed one with its `parameters`.
    pub vnfcs: Vec<Vnfc>,
}

/// The documents for the VNFCs `after` with parameter `nfv`, and the patches from `before`.
/// The template is the BaseHOT expanded for `after`, the externally managed VLs `managed`
/// applied; an individually managed VNFC's
/// `parameters` are its entries of `nfv`, `{"VDU": {…}, "CP": {…}}`.
pub(super) fn documents(
    input: Input<'_>,
    analysis: &Analysis,
    before: &Stack,
    nfv: Value,
    mut after: Vec<Vnfc>,
    managed: &[(&str, &str)],
) -> Documents {
    let mut template = template::expand(&input.base.template, analysis, &indices_by_vdu(&after));
    template::apply_ext_managed(&mut template, managed);
    for c in &mut after {
        c.parameters = analysis
            .individual(&c.vdu_id)
            .then(|| slice(&nfv, &entries(input.vnfd, &c.vdu_id, Some(c.index))));
    }
    Documents {
        template_patch: merge::diff(&before.template, &template),
        nfv_patch: merge::diff(&before.nfv, &nfv),
        after: Stack { template, nfv },
        vnfcs: after,
    }
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
