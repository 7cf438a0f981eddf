//! The `nfv` stack parameter of an AutoScalingGroup BaseHOT (Tacker's DefaultUserData shape):
//! `{"VDU": {<vdu>: {computeFlavourId, vcImageId, desired_capacity}}, "CP": {<cp>: {network,
//! fixed_ips?}}}`, each VDU entry also with `flavor` and `image` (the same values), the keys of
//! the user-data classes of Tacker's Kubernetes samples (`KubernetesClusterUserData`, through
//! `UserDataUtil.create_final_param_dict`), whose BaseHOTs read `nfv.VDU.<vdu>.flavor`. Pure.

use serde_json::{Map, Value, json};

use super::PlanError;
use crate::package::Vnfd;
use crate::wire::sol003::{CpConfigs, InstantiateVnfRequest};

/// Builds the `nfv` parameter for INSTANTIATE: each VDU's flavour and image from the VNFD, its
/// `desired_capacity` from the instantiation level (`instantiationLevelId`, else the VNFD's
/// default level), and each CP's network from the `extVirtualLinks` entry whose `extCps` names
/// it (`resourceId`), with fixed addresses when `cpProtocolData.ipOverEthernet` gives them. A CP
/// on an internal virtual link of the VNFD (its `virtual_link` requirement) that no extCp names
/// gets no entry: the BaseHOT connects it to the VNF's own network.
/// Errors: a VDU without flavour or image, a CP without an external virtual link (and without
/// an internal one).
pub fn instantiate_parameters(
    vnfd: &Vnfd,
    req: &InstantiateVnfRequest,
) -> Result<Value, PlanError> {
    let level = req.instantiation_level_id.as_deref();
    if let Some(l) = level
        && !vnfd.instantiation_levels.contains_key(l)
    {
        return Err(PlanError::at(
            "/request/instantiationLevelId",
            format!("VNFD has no instantiation level `{l}`"),
        ));
    }
    let mut vdus = Map::new();
    for (name, vdu) in &vnfd.vdus {
        let flavour = vdu.flavour.as_deref().ok_or_else(|| {
            PlanError::vnfd(
                name,
                "no requested_additional_capability_name (Nova flavour)",
            )
        })?;
        let image = vdu
            .image
            .as_deref()
            .ok_or_else(|| PlanError::vnfd(name, "no sw_image_data.name (image)"))?;
        vdus.insert(
            name.clone(),
            json!({
                "computeFlavourId": flavour,
                "vcImageId": image,
                "flavor": flavour,
                "image": image,
                "desired_capacity": vnfd.instances_at_level(name, level),
            }),
        );
    }
    let mut cps = Map::new();
    for (cp, c) in &vnfd.cps {
        let link = req
            .ext_virtual_links
            .iter()
            .find(|l| l.ext_cps.iter().any(|c| &c.cpd_id == cp));
        if link.is_none() && c.virtual_link.is_some() {
            // On the VNF's own internal virtual link: the BaseHOT gives its network
            // (`get_resource` of the internal net), as Tacker's DefaultUserData builds `nfv.CP`
            // from the request's external CPs only.
            continue;
        }
        let link = link.ok_or_else(|| {
            PlanError::at(
                "/request/extVirtualLinks",
                format!("no external virtual link has an extCp for CP `{cp}`"),
            )
        })?;
        let mut entry = Map::new();
        entry.insert("network".into(), link.resource_id.clone().into());
        let fixed: Vec<Value> = link
            .ext_cps
            .iter()
            .filter(|c| &c.cpd_id == cp)
            .flat_map(|c| {
                c.cp_config
                    .as_ref()
                    .map(CpConfigs::ip_over_ethernet)
                    .unwrap_or_default()
            })
            .flat_map(|pd| {
                pd["ipAddresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|a| a["fixedAddresses"].as_array().cloned().unwrap_or_default())
                    .collect::<Vec<_>>()
            })
            .map(|ip| json!({"ip_address": ip}))
            .collect();
        if !fixed.is_empty() {
            entry.insert("fixed_ips".into(), Value::Array(fixed));
        }
        cps.insert(cp.clone(), Value::Object(entry));
    }
    Ok(json!({"VDU": vdus, "CP": cps}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::VnfPackage;
    use crate::wire::{Envelope, LcmRequest, parse_envelope};

    fn pv_request() -> InstantiateVnfRequest {
        let bytes =
            include_bytes!("../../../fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
        let Envelope::Lcm(env) = parse_envelope(bytes).unwrap().envelope else {
            panic!("not LCM")
        };
        match env.typed_request().unwrap() {
            LcmRequest::Instantiate(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pv_seed_request_gives_one_master_two_workers_and_networks_from_ext_virtual_links() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/packages/pv-k8s-cluster");
        let pkg = VnfPackage::load(&root).unwrap();
        let nfv = instantiate_parameters(&pkg.vnfd, &pv_request()).unwrap();
        assert_eq!(nfv["VDU"]["masterNode"]["desired_capacity"], 1);
        assert_eq!(nfv["VDU"]["workerNode"]["desired_capacity"], 2);
        // The keys of Tacker's KubernetesClusterUserData too, with the same values.
        assert_eq!(
            nfv["VDU"]["workerNode"]["flavor"],
            nfv["VDU"]["workerNode"]["computeFlavourId"]
        );
        assert_eq!(
            nfv["VDU"]["workerNode"]["image"],
            nfv["VDU"]["workerNode"]["vcImageId"]
        );
        assert_eq!(
            nfv["VDU"]["storage_server"]["computeFlavourId"],
            "m1.medium"
        );
        assert_eq!(
            nfv["CP"]["storage_server_CP"]["network"],
            "f0c82461-36b5-4d86-8322-b0bc19cda65f"
        );
        assert!(nfv["CP"]["workerNode_CP2"].get("fixed_ips").is_none());
    }

    #[test]
    fn unknown_level_and_missing_link_are_errors_naming_the_field() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/packages/pv-k8s-cluster");
        let pkg = VnfPackage::load(&root).unwrap();
        let mut req = pv_request();
        req.instantiation_level_id = Some("gold".into());
        let e = instantiate_parameters(&pkg.vnfd, &req).unwrap_err();
        assert_eq!(e.pointer.as_deref(), Some("/request/instantiationLevelId"));
        let mut req = pv_request();
        req.ext_virtual_links.retain(|l| l.id != "net0_storage");
        let e = instantiate_parameters(&pkg.vnfd, &req).unwrap_err();
        assert!(e.reason.contains("storage_server_CP"), "{e}");
    }

    #[test]
    fn a_cp_on_an_internal_virtual_link_needs_no_ext_cp_but_an_external_one_does() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/packages/k8s-mgmtdriver-kubespray");
        let pkg = VnfPackage::load(&root).unwrap();
        assert_eq!(
            pkg.vnfd.cps["externalLB_CP2"].virtual_link.as_deref(),
            Some("internalVL1")
        );
        assert_eq!(pkg.vnfd.cps["externalLB_CP1"].virtual_link, None);
        let bytes = include_bytes!(
            "../../../fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json"
        );
        let Envelope::Lcm(env) = parse_envelope(bytes).unwrap().envelope else {
            panic!("not LCM")
        };
        let LcmRequest::Instantiate(req) = env.typed_request().unwrap() else {
            panic!("not INSTANTIATE")
        };
        let nfv = instantiate_parameters(&pkg.vnfd, &req).unwrap();
        assert!(nfv["CP"].get("externalLB_CP2").is_none(), "{nfv}");
        assert_eq!(
            nfv["CP"]["externalLB_CP1"]["network"],
            "b0b84da3-3259-4855-b4cd-5711ba5e5de1"
        );
        let mut req = *req;
        req.ext_virtual_links.retain(|l| l.id != "net0_externalLB");
        let e = instantiate_parameters(&pkg.vnfd, &req).unwrap_err();
        assert!(e.reason.contains("externalLB_CP1"), "{e}");
    }
}
