//! The Grant against the operation: every resource definition it grants must be one the
//! GrantRequest asked for and every zone it names one of its `zones`; what it grants decides which
//! planned VNFCs are created, removed or healed (count = current + granted adds − granted removes).

use std::collections::{BTreeMap, BTreeSet};

use super::membership::{Plan, add_id, remove_id};
use super::{Grant, HeatError, Vnfc, grant_err};

/// The part of a [`Plan`] the Grant allows, with the granted zones.
#[derive(Debug, Clone)]
pub(super) struct Granted<'g> {
    /// Granted `addResources` by `resourceDefinitionId`: the VIM zone (`zones[].zoneId`) its
    /// `zoneId` names, if any.
    add_zone: BTreeMap<&'g str, Option<&'g str>>,
    /// Planned VNFCs to create whose `add-<VDU>-<index>` is granted.
    pub create: Vec<(String, u32)>,
    /// Planned VNFCs to remove whose `remove-<VDU>-<index>` is granted.
    pub remove: Vec<(String, u32)>,
    /// Planned VNFCs to heal whose `remove-<VDU>-<index>` is granted.
    pub heal: Vec<(String, u32)>,
}

impl Granted<'_> {
    /// The zone granted to VNFC `<vdu>-<i>`.
    pub fn zone(&self, vdu: &str, i: u32) -> Option<&str> {
        self.add_zone
            .get(add_id(vdu, i).as_str())
            .copied()
            .flatten()
    }

    /// The zone of the first created VNFC of `vdu` that was granted one: the zone of a VDU whose
    /// entries are not indexed (AutoScalingGroup or single resource).
    pub fn vdu_zone(&self, vdu: &str) -> Option<&str> {
        self.create
            .iter()
            .filter(|(v, _)| v == vdu)
            .find_map(|(v, i)| self.zone(v, *i))
    }
}

/// Checks `grant` against `plan` and keeps what it grants. Errors ([`HeatError::Grant`]): an
/// `addResources` or `removeResources` entry whose `resourceDefinitionId` the GrantRequest does
/// not define (the reason lists those it does), a `zoneId` that is no `zones[].id`.
pub(super) fn check<'g>(plan: &Plan, grant: &'g Grant) -> Result<Granted<'g>, HeatError> {
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

    let added = |(v, i): &&(String, u32)| add_zone.contains_key(add_id(v, *i).as_str());
    let removed = |(v, i): &&(String, u32)| removed_granted.contains(remove_id(v, *i).as_str());
    let create = plan.create.iter().filter(added).cloned().collect();
    let remove = plan.remove.iter().filter(removed).cloned().collect();
    let heal = plan.heal.iter().filter(removed).cloned().collect();
    Ok(Granted {
        add_zone,
        create,
        remove,
        heal,
    })
}

/// `a, b, c`, or `none`.
fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The VNFCs after the operation, sorted by VDU and index: the current ones without those the
/// Grant lets go, plus those it lets be created (without `id` and `parameters`).
pub(super) fn after(current: &[Vnfc], granted: &Granted<'_>) -> Vec<Vnfc> {
    let mut after: Vec<Vnfc> = current
        .iter()
        .filter(|c| !granted.remove.contains(&(c.vdu_id.clone(), c.index)))
        .cloned()
        .collect();
    for (v, i) in &granted.create {
        after.push(Vnfc {
            vdu_id: v.clone(),
            index: *i,
            id: None,
            parameters: None,
        });
    }
    after.sort_by(|a, b| (&a.vdu_id, a.index).cmp(&(&b.vdu_id, b.index)));
    after
}
