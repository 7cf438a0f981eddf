//! Individual VNFC management in the engine (one Heat resource per VNFC, as in the tacker-specs
//! file `specs/zed/individual-vnfc-management.rst`): the decisions an INSTANTIATE, SCALE or HEAL
//! makes when the flavour's BaseHOT has a VDU without AutoScalingGroup ([`Mode::Individual`]).
//! Pure: the engine passes what it read (VNFC rows, the stack's `nfv`) and stores what this
//! returns ([`AdjustedPlan`]) in the operation's `plan` before it sends anything to Heat.
//!
//! The instance's current VNFCs ([`Known`], from the `vnfc` rows: VDU, `vnfc_index`, stored
//! `parameters`, server id) become a [`heat::Current`]; the GrantRequest of the operation is
//! derived ([`heat::grant_request`]), its `removeResources` get the servers' ids, and, as there is
//! no NFVO, the Grant is [`Grant::derived`] from it (every resource granted; zones, images and
//! other per-VNFC values come from the request's `additionalParams.nfv`); [`heat::adjust`] then
//! gives the full adjusted HOT, the full `nfv`, the merge patches (kept for audit) and the VNFCs
//! after the operation with their `parameters`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::PlanError;
use super::vnfcs::ObservedVnfc;
use crate::heat::template::indexed;
use crate::heat::{
    self, Analysis, Current, Grant, GrantRequest, HeatError, Input, Mode, Operation,
    ResourceHandle, Vnfc,
};
use crate::package::{BaseHot, Vnfd};
use crate::wire::sol003::{ExtManagedVirtualLinkData, ExtVirtualLinkData};

/// Whether the engine drives this BaseHOT through the adjusted HOT: some VDU is managed
/// individually (a nested-template resource without AutoScalingGroup). Other BaseHOTs keep the
/// AutoScalingGroup path (`plan::nfv`, `plan::scale`).
pub fn uses_adjusted_hot(analysis: &Analysis) -> bool {
    analysis.modes.values().any(|m| *m == Mode::Individual)
}

/// A VNFC as the database knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    /// vnfcInstanceId (the row id).
    pub id: crate::model::VnfcId,
    /// The VDU.
    pub vdu_id: String,
    /// `vnfc_index`: set for individually managed VNFCs.
    pub index: Option<u32>,
    /// Stored `parameters` (the VNFC's `nfv` slice).
    pub parameters: Option<Value>,
    /// Nova server id.
    pub server_id: Option<String>,
}

/// What an operation decided, stored as `{"adjusted": AdjustedPlan}` (or inside the SCALE/HEAL
/// plan) so that resume and RETRY send Heat the same documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdjustedPlan {
    /// The whole adjusted top-level template sent to Heat.
    pub template: Value,
    /// The whole `nfv` parameter sent to Heat.
    pub nfv: Value,
    /// RFC 7386 merge patch from the stack before the operation to `template` (audit).
    pub template_patch: Value,
    /// RFC 7386 merge patch from the `nfv` before the operation to `nfv` (audit).
    pub nfv_patch: Value,
    /// The VNFCs after the operation (`<VDU>-<index>`, `parameters`).
    pub vnfcs: Vec<Vnfc>,
    /// `<VDU>-<index>` created.
    pub created: Vec<String>,
    /// `<VDU>-<index>` removed.
    pub removed: Vec<String>,
    /// `<VDU>-<index>` healed (their servers are marked unhealthy before the update).
    pub healed: Vec<String>,
    /// `<VDU>-<index>` whose image the Grant changed.
    pub image_changed: Vec<String>,
    /// The GrantRequest, with `removeResources[].resource` = the servers.
    pub grant_request: GrantRequest,
    /// The Grant used (derived: no NFVO).
    pub grant: Grant,
    /// Non-fatal findings of [`heat::adjust`].
    pub warnings: Vec<String>,
}

impl AdjustedPlan {
    /// The stored parameters of VNFC `<vdu>-<index>` after the operation.
    pub fn parameters_of(&self, vdu: &str, index: u32) -> Option<&Value> {
        self.vnfcs
            .iter()
            .find(|c| c.vdu_id == vdu && c.index == index)
            .and_then(|c| c.parameters.as_ref())
    }

    /// Sets each observed VNFC's `parameters` from this plan (by VDU and index); VNFCs without
    /// an index keep `None`.
    pub fn annotate(&self, observed: &mut [ObservedVnfc]) {
        for o in observed {
            o.parameters = o
                .index
                .and_then(|i| self.parameters_of(&o.vdu_id, i))
                .cloned();
        }
    }
}

fn heat_err(e: HeatError) -> PlanError {
    match e {
        HeatError::Request { pointer, reason } => PlanError::at(&pointer, reason),
        HeatError::Vnfd { node, reason } => PlanError::vnfd(&node, &reason),
        other => PlanError {
            pointer: None,
            vnfd_node: None,
            reason: other.to_string(),
        },
    }
}

/// The instance before the operation as [`heat::adjust`] wants it. Individually managed VNFCs
/// carry their index and stored parameters; VNFCs of other VDUs get positions 0, 1, … (ASG and
/// single-resource VDUs are not indexed). `stack_nfv` is the stack's `nfv` parameter as Heat shows
/// it (an object or its JSON text): the entries the VNFCs' parameters do not carry are kept in
/// `nfv` (AutoScalingGroup and single-resource VDUs). Errors: an individually managed VNFC
/// without index or parameters (a row written before this version: re-instantiate).
/// `ext_virtual_links` and `ext_managed_virtual_links` are the instance's (its
/// InstantiateVnfRequest's).
pub fn current(
    analysis: &Analysis,
    known: &[Known],
    stack_nfv: Option<&Value>,
    ext_virtual_links: &[ExtVirtualLinkData],
    ext_managed_virtual_links: &[ExtManagedVirtualLinkData],
) -> Result<Current, PlanError> {
    let mut vnfcs = Vec::new();
    let mut position: BTreeMap<&str, u32> = BTreeMap::new();
    let mut owned: Vec<(String, String)> = Vec::new();
    for k in known {
        if analysis.individual(&k.vdu_id) {
            let (Some(index), Some(parameters)) = (k.index, k.parameters.as_ref()) else {
                return Err(PlanError {
                    pointer: None,
                    vnfd_node: Some(k.vdu_id.clone()),
                    reason: format!(
                        "VNFC {} of the individually managed VDU {} has no stored index or \
                         parameters",
                        k.id, k.vdu_id
                    ),
                });
            };
            for (sec, entries) in parameters.as_object().into_iter().flatten() {
                for name in entries.as_object().into_iter().flatten().map(|(n, _)| n) {
                    owned.push((sec.clone(), name.clone()));
                }
            }
            vnfcs.push(Vnfc {
                vdu_id: k.vdu_id.clone(),
                index,
                id: Some(k.id.clone()),
                parameters: Some(parameters.clone()),
            });
        } else {
            let p = position.entry(k.vdu_id.as_str()).or_default();
            vnfcs.push(Vnfc {
                vdu_id: k.vdu_id.clone(),
                index: *p,
                id: Some(k.id.clone()),
                parameters: None,
            });
            *p += 1;
        }
    }
    let mut nfv = match stack_nfv {
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(text)) => {
            serde_json::from_str::<Map<String, Value>>(text).map_err(|e| PlanError {
                pointer: None,
                vnfd_node: None,
                reason: format!("the stack's nfv parameter is not a JSON object: {e}"),
            })?
        }
        _ => Map::new(),
    };
    for (sec, name) in &owned {
        if let Some(m) = nfv.get_mut(sec).and_then(Value::as_object_mut) {
            m.remove(name);
        }
    }
    nfv.retain(|_, v| !v.as_object().is_some_and(Map::is_empty));
    Ok(Current {
        vnfcs,
        nfv,
        ext_virtual_links: ext_virtual_links.to_vec(),
        ext_managed_virtual_links: ext_managed_virtual_links.to_vec(),
    })
}

/// Decides the operation: GrantRequest (with `removeResources[].resource` = the server of each
/// VNFC removed or healed, from `known`), the derived Grant, and the adjusted HOT.
/// Errors ([`PlanError`]): whatever [`heat::grant_request`] and [`heat::adjust`] refuse (request
/// pointers kept; VNFD nodes named; template paths in the reason).
pub fn decide(
    base: &BaseHot,
    vnfd: &Vnfd,
    current: &Current,
    known: &[Known],
    op: Operation<'_>,
) -> Result<AdjustedPlan, PlanError> {
    let input = Input {
        base,
        vnfd,
        current,
    };
    let mut grant_request = heat::grant_request(input, op).map_err(heat_err)?;
    for d in &mut grant_request.remove_resources {
        if d.resource_type != "COMPUTE" {
            continue;
        }
        let server = current
            .vnfcs
            .iter()
            .find(|c| format!("remove-{}", c.name()) == d.id)
            .and_then(|c| known.iter().find(|k| Some(&k.id) == c.id.as_ref()))
            .and_then(|k| k.server_id.clone());
        d.resource = server.map(|s| ResourceHandle {
            resource_id: s,
            vim_level_resource_type: Some("OS::Nova::Server".into()),
        });
    }
    let grant = Grant::derived(&grant_request);
    let a = heat::adjust(input, op, &grant).map_err(heat_err)?;
    Ok(AdjustedPlan {
        template: a.template,
        nfv: a.nfv,
        template_patch: a.template_patch,
        nfv_patch: a.nfv_patch,
        vnfcs: a.vnfcs,
        created: a.created,
        removed: a.removed,
        healed: a.healed,
        image_changed: a.image_changed,
        grant_request,
        grant,
        warnings: a.warnings,
    })
}

/// ROLLBACK of a failed SCALE_OUT (SOL003 §5.4.15; Tacker's `scale_rollback`): the stack as it
/// was before `out`, the stored plan of that scale-out. The VNFCs `out` created are left out;
/// every other VNFC keeps the parameters `out` gave it (a scale-out changes none of them), and
/// the template and `nfv` are those of the remaining VNFCs ([`heat::current_stack`]), with the
/// instance's external VLs (`ext_virtual_links`, `ext_managed_virtual_links`).
///
/// Output: an [`AdjustedPlan`] whose `removed` is `out.created`, whose patches go from `out`'s
/// documents to the restored ones (audit), and whose GrantRequest and Grant are empty (a
/// rollback asks for no resources). Errors ([`PlanError`]): what [`heat::current_stack`]
/// refuses (the BaseHOT changed so that the kept VNFCs no longer fit it).
pub fn rollback_scale_out(
    base: &BaseHot,
    vnfd: &Vnfd,
    out: &AdjustedPlan,
    ext_virtual_links: &[ExtVirtualLinkData],
    ext_managed_virtual_links: &[ExtManagedVirtualLinkData],
) -> Result<AdjustedPlan, PlanError> {
    let current = Current {
        ext_virtual_links: ext_virtual_links.to_vec(),
        ext_managed_virtual_links: ext_managed_virtual_links.to_vec(),
        ..Current::default()
    };
    let (template, nfv, kept) = heat::rollback_scale_out(
        Input {
            base,
            vnfd,
            current: &current,
        },
        &out.vnfcs,
        &out.nfv,
        &out.created,
    )
    .map_err(heat_err)?;
    let grant_request = GrantRequest::default();
    Ok(AdjustedPlan {
        template_patch: heat::merge::diff(&out.template, &template),
        nfv_patch: heat::merge::diff(&out.nfv, &nfv),
        template,
        nfv,
        vnfcs: kept,
        created: Vec::new(),
        removed: out.created.clone(),
        healed: Vec::new(),
        image_changed: Vec::new(),
        grant: Grant::derived(&grant_request),
        grant_request,
        warnings: Vec::new(),
    })
}

/// The instance's external VLs after a CHANGE_EXT_CONN (SOL003 §5.4.11: the VNF's
/// `extVirtualLinkInfo` afterwards): `links` (the INSTANTIATE's, with earlier changes applied)
/// with each VL of `change` applied in order — its CPs leave the VLs that listed them (a VL left
/// without CPs goes), then it replaces the VL of the same `id` or is added at the end.
pub fn changed_ext_links(
    links: &[ExtVirtualLinkData],
    change: &[ExtVirtualLinkData],
) -> Vec<ExtVirtualLinkData> {
    let mut out = links.to_vec();
    for vl in change {
        let moved: Vec<&str> = vl.ext_cps.iter().map(|c| c.cpd_id.as_str()).collect();
        for l in &mut out {
            l.ext_cps.retain(|c| !moved.contains(&c.cpd_id.as_str()));
        }
        out.retain(|l| !l.ext_cps.is_empty() || l.id == vl.id);
        match out.iter_mut().find(|l| l.id == vl.id) {
            Some(l) => *l = vl.clone(),
            None => out.push(vl.clone()),
        }
    }
    out
}

/// The row id of the VNFC a request names: its id, or `<VDU>-<index>` of an indexed VNFC.
pub fn resolve_vnfc<'k>(known: &'k [Known], name: &str) -> Option<&'k Known> {
    known.iter().find(|k| k.id == name).or_else(|| {
        known
            .iter()
            .find(|k| k.index.is_some_and(|i| indexed(&k.vdu_id, i) == name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::VnfPackage;
    use crate::wire::sol003::{HealVnfRequest, InstantiateVnfRequest, ScaleVnfRequest};
    use serde_json::json;

    fn pkg(name: &str) -> VnfPackage {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/packages")
            .join(name);
        VnfPackage::load(&root).unwrap()
    }

    fn request<T: serde::de::DeserializeOwned>(file: &str) -> T {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/requests/good")
            .join(file);
        let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        serde_json::from_value(v["request"].clone()).unwrap()
    }

    /// Rows as the engine would store them after `plan`, with made-up server ids.
    fn rows(plan: &AdjustedPlan, servers: &BTreeMap<String, String>) -> Vec<Known> {
        plan.vnfcs
            .iter()
            .map(|c| Known {
                id: format!("row-{}", c.name()).into(),
                vdu_id: c.vdu_id.clone(),
                index: Some(c.index),
                parameters: c.parameters.clone(),
                server_id: servers.get(&c.name()).cloned(),
            })
            .collect()
    }

    #[test]
    fn asg_packages_keep_the_autoscaling_path_and_the_individual_fixture_does_not() {
        // A nested-template VDU without AutoScalingGroup is individual (the registry VNF's one
        // VNFC becomes `PrivateRegistryVDU-0`), as Tacker's StandardUserData would make it.
        for (name, individual) in [
            ("pv-k8s-cluster", false),
            ("cir-k8s-cluster", false),
            ("k8s-mgmtdriver-kubespray", false),
            ("cir-private-registry", true),
            ("individual-vnfc-management", true),
        ] {
            let p = pkg(name);
            let a = Analysis::new(&p.base_hot("simple").unwrap(), &p.vnfd)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(uses_adjusted_hot(&a), individual, "{name}: {:?}", a.modes);
        }
    }

    #[test]
    fn instantiate_scale_heal_scale_in_through_stored_rows() {
        let p = pkg("individual-vnfc-management");
        let base = p.base_hot("simple").unwrap();
        let a = Analysis::new(&base, &p.vnfd).unwrap();
        let inst: InstantiateVnfRequest = request("individual-vnfc-management.10-instantiate.json");
        let empty = current(&a, &[], None, &[], &[]).unwrap();
        let i = decide(&base, &p.vnfd, &empty, &[], Operation::Instantiate(&inst)).unwrap();
        assert_eq!(i.created, ["VDU1-0", "VDU1-1"]);
        assert_eq!(i.nfv["VDU"]["VDU1-0"]["locationConstraints"], "zone-x");
        assert_eq!(i.nfv["VDU"]["VDU1-1"]["locationConstraints"], "zone-y");
        let mut servers: BTreeMap<String, String> = [("VDU1-0", "s0"), ("VDU1-1", "s1")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        let known = rows(&i, &servers);
        // The stack's nfv as Heat shows it (JSON text), the instance's external VLs.
        let shown = Value::String(i.nfv.to_string());
        let cur = current(
            &a,
            &known,
            Some(&shown),
            &inst.ext_virtual_links,
            &inst.ext_managed_virtual_links,
        )
        .unwrap();
        assert!(cur.nfv.is_empty(), "individual entries come from the rows");

        let out: ScaleVnfRequest = request("individual-vnfc-management.20-scale-out.json");
        let s = decide(&base, &p.vnfd, &cur, &known, Operation::Scale(&out)).unwrap();
        assert_eq!(s.created, ["VDU1-2"]);
        assert!(s.template["resources"]["VDU1-2"].is_object());
        assert_eq!(
            s.template["resources"]["VDU1-0"],
            i.template["resources"]["VDU1-0"]
        );
        assert_eq!(s.nfv["VDU"]["VDU1-0"], i.nfv["VDU"]["VDU1-0"]);
        assert_eq!(
            s.nfv["CP"]["VDU1_CP1-2"]["network"],
            "67c837dc-c247-4a3e-ac0f-5603bfef1ba3"
        );
        servers.insert("VDU1-2".into(), "s2".into());
        let known = rows(&s, &servers);
        let cur = current(
            &a,
            &known,
            Some(&s.nfv),
            &inst.ext_virtual_links,
            &inst.ext_managed_virtual_links,
        )
        .unwrap();

        // Heal of VDU1-1 named by `<VDU>-<index>`, with a new image from additionalParams.nfv.
        let heal: HealVnfRequest = serde_json::from_value(json!({
            "vnfcInstanceId": ["VDU1-1"],
            "additionalParams": {"nfv": {"VDU": {"VDU1-1": {"vcImageId": "img-new"}}}}
        }))
        .unwrap();
        let h = decide(&base, &p.vnfd, &cur, &known, Operation::Heal(&heal)).unwrap();
        assert_eq!(h.healed, ["VDU1-1"]);
        assert_eq!(h.nfv["VDU"]["VDU1-1"]["vcImageId"], "img-new");
        assert_eq!(h.nfv["VDU"]["VDU1-0"], s.nfv["VDU"]["VDU1-0"]);
        assert_eq!(h.nfv["VDU"]["VDU1-2"], s.nfv["VDU"]["VDU1-2"]);
        let removed = &h.grant_request.remove_resources[0];
        assert_eq!(removed.id, "remove-VDU1-1");
        assert_eq!(removed.resource.as_ref().unwrap().resource_id, "s1");
        assert_eq!(resolve_vnfc(&known, "VDU1-1").unwrap().id, "row-VDU1-1");
        assert_eq!(resolve_vnfc(&known, "row-VDU1-0").unwrap().id, "row-VDU1-0");
        assert!(resolve_vnfc(&known, "VDU1-7").is_none());

        let known = rows(&h, &servers);
        let cur = current(
            &a,
            &known,
            Some(&h.nfv),
            &inst.ext_virtual_links,
            &inst.ext_managed_virtual_links,
        )
        .unwrap();
        let sin: ScaleVnfRequest = request("individual-vnfc-management.40-scale-in.json");
        let r = decide(&base, &p.vnfd, &cur, &known, Operation::Scale(&sin)).unwrap();
        assert_eq!(r.removed, ["VDU1-2"]);
        assert!(r.template["resources"].get("VDU1-2").is_none());
        assert!(r.nfv["VDU"].get("VDU1-2").is_none());
        assert_eq!(
            r.nfv["VDU"]["VDU1-1"]["vcImageId"], "img-new",
            "healed image kept"
        );
        assert_eq!(
            r.grant_request.remove_resources[0]
                .resource
                .as_ref()
                .unwrap()
                .resource_id,
            "s2"
        );
    }

    #[test]
    fn rollback_of_a_scale_out_restores_the_stack_before_it() {
        let p = pkg("individual-vnfc-management");
        let base = p.base_hot("simple").unwrap();
        let a = Analysis::new(&base, &p.vnfd).unwrap();
        let inst: InstantiateVnfRequest = request("individual-vnfc-management.10-instantiate.json");
        let empty = current(&a, &[], None, &[], &[]).unwrap();
        let i = decide(&base, &p.vnfd, &empty, &[], Operation::Instantiate(&inst)).unwrap();
        let servers: BTreeMap<String, String> = [("VDU1-0", "s0"), ("VDU1-1", "s1")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        let known = rows(&i, &servers);
        let cur = current(&a, &known, Some(&i.nfv), &inst.ext_virtual_links, &[]).unwrap();
        let (before_t, before_nfv) = heat::current_stack(Input {
            base: &base,
            vnfd: &p.vnfd,
            current: &cur,
        })
        .unwrap();
        let out: ScaleVnfRequest = request("individual-vnfc-management.20-scale-out.json");
        let s = decide(&base, &p.vnfd, &cur, &known, Operation::Scale(&out)).unwrap();
        assert_eq!(s.created, ["VDU1-2"]);
        let r = rollback_scale_out(&base, &p.vnfd, &s, &inst.ext_virtual_links, &[]).unwrap();
        assert_eq!(r.removed, ["VDU1-2"]);
        assert!(r.created.is_empty());
        assert_eq!(r.template, before_t, "the template before the scale-out");
        assert_eq!(r.nfv, before_nfv, "the nfv before the scale-out");
        assert!(r.template["resources"].get("VDU1-2").is_none());
        assert!(r.nfv["VDU"].get("VDU1-2").is_none());
        assert!(r.nfv["CP"].get("VDU1_CP1-2").is_none());
        assert_eq!(r.template_patch, json!({"resources": {"VDU1-2": null}}));
        let names: Vec<String> = r.vnfcs.iter().map(Vnfc::name).collect();
        assert_eq!(names, ["VDU1-0", "VDU1-1"]);
        for c in &r.vnfcs {
            assert_eq!(
                c.parameters.as_ref(),
                s.parameters_of(&c.vdu_id, c.index),
                "{} untouched",
                c.name()
            );
        }
        assert!(r.grant_request.add_resources.is_empty());
    }

    #[test]
    fn a_change_of_connectivity_moves_cps_between_links() {
        let links: Vec<ExtVirtualLinkData> = serde_json::from_value(json!([
            {"id": "ext1", "resourceId": "net-1", "extCps": [
                {"cpdId": "A", "cpConfig": [{}]}, {"cpdId": "B", "cpConfig": [{}]}]},
            {"id": "ext2", "resourceId": "net-2", "extCps": [{"cpdId": "C", "cpConfig": [{}]}]}
        ]))
        .unwrap();
        let change: Vec<ExtVirtualLinkData> = serde_json::from_value(json!([
            {"id": "ext3", "resourceId": "net-3", "extCps": [
                {"cpdId": "A", "cpConfig": [{}]}, {"cpdId": "C", "cpConfig": [{}]}]}
        ]))
        .unwrap();
        let after = changed_ext_links(&links, &change);
        let shape: Vec<(&str, &str, Vec<&str>)> = after
            .iter()
            .map(|l| {
                let cps = l.ext_cps.iter().map(|c| c.cpd_id.as_str()).collect();
                (l.id.as_str(), l.resource_id.as_str(), cps)
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("ext1", "net-1", vec!["B"]),
                ("ext3", "net-3", vec!["A", "C"])
            ]
        );
        // The same VL id again replaces it.
        let again: Vec<ExtVirtualLinkData> = serde_json::from_value(json!([
            {"id": "ext1", "resourceId": "net-9", "extCps": [{"cpdId": "B", "cpConfig": [{}]}]}
        ]))
        .unwrap();
        let after = changed_ext_links(&after, &again);
        assert_eq!(after[0].resource_id, "net-9");
        assert_eq!(after.len(), 2);
    }

    #[test]
    fn change_ext_conn_rewrites_only_the_named_cps_of_every_vnfc() {
        let p = pkg("individual-vnfc-management");
        let base = p.base_hot("simple").unwrap();
        let a = Analysis::new(&base, &p.vnfd).unwrap();
        let inst: InstantiateVnfRequest = request("individual-vnfc-management.10-instantiate.json");
        let empty = current(&a, &[], None, &[], &[]).unwrap();
        let i = decide(&base, &p.vnfd, &empty, &[], Operation::Instantiate(&inst)).unwrap();
        let known = rows(&i, &BTreeMap::new());
        let cur = current(&a, &known, Some(&i.nfv), &inst.ext_virtual_links, &[]).unwrap();
        let req: crate::wire::sol003::ChangeExtVnfConnectivityRequest =
            serde_json::from_value(json!({
                "extVirtualLinks": [{"id": "net1", "resourceId": "net-new", "extCps": [
                    {"cpdId": "VDU1_CP1", "cpConfig": [{"cpProtocolData": [
                        {"layerProtocol": "IP_OVER_ETHERNET"}]}]}]}],
                "additionalParams": {"nfv": {"VDU": {"VDU1-0": {"locationConstraints": "zone-q"}}}}
            }))
            .unwrap();
        let c = decide(&base, &p.vnfd, &cur, &known, Operation::ChangeExtConn(&req)).unwrap();
        assert!(c.created.is_empty() && c.removed.is_empty());
        assert_eq!(c.template, i.template, "the template is kept");
        assert_eq!(c.nfv["CP"]["VDU1_CP1-0"]["network"], "net-new");
        assert_eq!(c.nfv["CP"]["VDU1_CP1-1"]["network"], "net-new");
        assert_eq!(c.nfv["VDU"]["VDU1-0"]["locationConstraints"], "zone-q");
        assert_eq!(c.nfv["VDU"]["VDU1-1"], i.nfv["VDU"]["VDU1-1"]);
        assert_eq!(c.grant_request.operation, "CHANGE_EXT_CONN");
        assert_eq!(
            c.nfv_patch,
            json!({"CP": {"VDU1_CP1-0": {"network": "net-new"},
                          "VDU1_CP1-1": {"network": "net-new"}},
                   "VDU": {"VDU1-0": {"locationConstraints": "zone-q"}}})
        );
    }

    #[test]
    fn an_individual_row_without_index_is_refused() {
        let p = pkg("individual-vnfc-management");
        let a = Analysis::new(&p.base_hot("simple").unwrap(), &p.vnfd).unwrap();
        let k = Known {
            id: "x".into(),
            vdu_id: "VDU1".into(),
            index: None,
            parameters: None,
            server_id: None,
        };
        let e = current(&a, &[k], None, &[], &[]).unwrap_err();
        assert!(e.reason.contains("no stored index"), "{e:?}");
    }
}
