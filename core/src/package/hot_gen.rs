//! A BaseHOT generated from the VNFD, for a package that ships none for its flavour (the cir
//! seed's registry package: one VDU and its CPs, TOSCA only). Pure.
//!
//! Shape (the one Tacker's TOSCA-based packages get and the fixtures' hand-written BaseHOTs use):
//! the top-level template takes the `nfv` JSON parameter and holds, per VDU `V`, one resource `V`
//! of type `V.yaml` (so every VDU is managed individually, `heat::template::Mode::Individual`)
//! with properties
//! - `flavor`: `{get_param: [nfv, VDU, V, computeFlavourId]}`,
//! - `image`: `{get_param: [nfv, VDU, V, vcImageId]}` (when the VDU names a software image),
//! - `<CP>_network`: `{get_param: [nfv, CP, <CP>, network]}` per CP bound to `V`;
//!
//! and the nested `V.yaml` holds
//! - `V`: `OS::Nova::Server` (HOT spec, OS::Nova::Server: `name`, `flavor`, `image`, `networks`
//!   of `port`s, `block_device_mapping_v2`),
//! - per CP: `OS::Neutron::Port` on its network (`network`),
//! - per virtual storage of the VDU (`virtual_storage` requirements): `OS::Cinder::Volume` of the
//!   VNFD's `size_of_storage` in GB, attached through `block_device_mapping_v2` as `vdb`, `vdc`,
//!   … (`boot_index: -1`); a storage with its own software image is created from it
//!   (`image: {get_param: [nfv, VDU, <storage>, vcImageId]}`) and boots the server
//!   (`boot_index: 0`) when the VDU has no image of its own.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{BaseHot, Vnfd};

/// `top_path` of a generated BaseHOT (named in errors of its analysis).
pub const GENERATED_TOP: &str = "(BaseHOT generated from the VNFD)";

/// The BaseHOT for `vnfd` (see the module documentation for its shape). Errors: a VDU that
/// references a virtual storage the VNFD lacks, more than 25 volumes on one VDU (device names
/// `vdb`…`vdz`), a VNFD without VDUs.
pub fn from_vnfd(vnfd: &Vnfd) -> Result<BaseHot, String> {
    if vnfd.vdus.is_empty() {
        return Err("the VNFD has no VDU to build a Heat template from".into());
    }
    let mut top = serde_json::Map::new();
    let mut files = BTreeMap::new();
    for (name, vdu) in &vnfd.vdus {
        let cps: Vec<&String> = vnfd
            .cps
            .iter()
            .filter(|(_, c)| c.vdu == *name)
            .map(|(n, _)| n)
            .collect();
        let mut props = serde_json::Map::new();
        let mut params = serde_json::Map::new();
        props.insert(
            "flavor".into(),
            json!({"get_param": ["nfv", "VDU", name, "computeFlavourId"]}),
        );
        params.insert("flavor".into(), json!({"type": "string"}));
        if vdu.image.is_some() {
            props.insert(
                "image".into(),
                json!({"get_param": ["nfv", "VDU", name, "vcImageId"]}),
            );
            params.insert("image".into(), json!({"type": "string"}));
        }
        let mut resources = serde_json::Map::new();
        let mut server = serde_json::Map::new();
        server.insert("name".into(), json!(name));
        server.insert("flavor".into(), json!({"get_param": "flavor"}));
        if vdu.image.is_some() {
            server.insert("image".into(), json!({"get_param": "image"}));
        }
        let mut networks = Vec::new();
        for cp in &cps {
            let p = format!("{cp}_network");
            props.insert(
                p.clone(),
                json!({"get_param": ["nfv", "CP", cp, "network"]}),
            );
            params.insert(p.clone(), json!({"type": "string"}));
            networks.push(json!({"port": {"get_resource": cp}}));
            resources.insert(
                (*cp).clone(),
                json!({"type": "OS::Neutron::Port", "properties": {"network": {"get_param": p}}}),
            );
        }
        server.insert("networks".into(), Value::Array(networks));
        let mut bdm = Vec::new();
        for (i, st) in vdu.storages.iter().enumerate() {
            let size = vnfd.storages.get(st).ok_or_else(|| {
                format!("VDU {name} requires virtual storage {st}, which the VNFD does not define")
            })?;
            let letter = b'b'
                .checked_add(u8::try_from(i).unwrap_or(u8::MAX))
                .filter(|c| *c <= b'z')
                .ok_or_else(|| format!("VDU {name} has more than 25 virtual storages"))?;
            let mut volume = json!({"name": st, "size": size});
            let boots = vdu.image.is_none() && vnfd.storage_images.contains_key(st);
            if vnfd.storage_images.contains_key(st) {
                volume["image"] = json!({"get_param": "image_".to_owned() + st});
                props.insert(
                    format!("image_{st}"),
                    json!({"get_param": ["nfv", "VDU", st, "vcImageId"]}),
                );
                params.insert(format!("image_{st}"), json!({"type": "string"}));
            }
            resources.insert(
                st.clone(),
                json!({"type": "OS::Cinder::Volume", "properties": volume}),
            );
            bdm.push(json!({
                "device_name": format!("vd{}", char::from(letter)),
                "volume_id": {"get_resource": st},
                "boot_index": if boots { 0 } else { -1 },
            }));
        }
        if !bdm.is_empty() {
            server.insert("block_device_mapping_v2".into(), Value::Array(bdm));
        }
        resources.insert(
            name.clone(),
            json!({"type": "OS::Nova::Server", "properties": server}),
        );
        let nested = json!({
            "heat_template_version": "2013-05-23",
            "description": format!("{name} (generated by vnfkeeper from the VNFD)"),
            "parameters": params,
            "resources": resources,
        });
        let file = format!("{name}.yaml");
        files.insert(
            file.clone(),
            serde_yaml_ng::to_string(&nested).map_err(|e| e.to_string())?,
        );
        top.insert(name.clone(), json!({"type": file, "properties": props}));
    }
    Ok(BaseHot {
        top_path: GENERATED_TOP.into(),
        template: json!({
            "heat_template_version": "2013-05-23",
            "description": format!("flavour {} (generated by vnfkeeper from the VNFD)", vnfd.flavour_id),
            "parameters": {"nfv": {"type": "json"}},
            "resources": top,
            "outputs": {},
        }),
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::vnfd::{Cp, Vdu};

    fn vnfd() -> Vnfd {
        let mut v = Vnfd {
            flavour_id: "simple".into(),
            ..Vnfd::default()
        };
        v.vdus.insert(
            "R".into(),
            Vdu {
                min_instances: 1,
                max_instances: 1,
                image: Some("img".into()),
                flavour: Some("m1.medium".into()),
                storages: vec!["Data".into()],
                initial_delta: Some(1),
            },
        );
        v.cps.insert(
            "CP1".into(),
            Cp {
                vdu: "R".into(),
                ..Cp::default()
            },
        );
        v.cps.insert(
            "CP2".into(),
            Cp {
                vdu: "R".into(),
                ..Cp::default()
            },
        );
        v.storages.insert("Data".into(), 10);
        v
    }

    fn nested(hot: &BaseHot, file: &str) -> Value {
        serde_yaml_ng::from_str(&hot.files[file]).unwrap()
    }

    #[test]
    fn a_vdu_becomes_a_nested_server_with_its_ports_and_volume() {
        let hot = from_vnfd(&vnfd()).unwrap();
        let r = &hot.template["resources"]["R"];
        assert_eq!(r["type"], "R.yaml");
        assert_eq!(
            r["properties"]["flavor"]["get_param"],
            json!(["nfv", "VDU", "R", "computeFlavourId"])
        );
        assert_eq!(
            r["properties"]["CP2_network"]["get_param"],
            json!(["nfv", "CP", "CP2", "network"])
        );
        let n = nested(&hot, "R.yaml");
        let s = &n["resources"]["R"]["properties"];
        assert_eq!(n["resources"]["R"]["type"], "OS::Nova::Server");
        assert_eq!(
            s["networks"],
            json!([{"port": {"get_resource": "CP1"}}, {"port": {"get_resource": "CP2"}}])
        );
        assert_eq!(
            s["block_device_mapping_v2"],
            json!([{"device_name": "vdb", "volume_id": {"get_resource": "Data"}, "boot_index": -1}])
        );
        assert_eq!(n["resources"]["Data"]["properties"]["size"], 10);
        assert_eq!(
            n["resources"]["CP1"]["properties"]["network"]["get_param"],
            "CP1_network"
        );
        // Every parameter the nested template uses is declared and passed from the top.
        for p in ["flavor", "image", "CP1_network", "CP2_network"] {
            assert!(n["parameters"][p].is_object(), "{p}");
            assert!(r["properties"][p].is_object(), "{p}");
        }
    }

    #[test]
    fn a_storage_with_an_image_boots_a_vdu_without_one() {
        let mut v = vnfd();
        v.vdus.get_mut("R").unwrap().image = None;
        v.storage_images.insert("Data".into(), "img".into());
        let hot = from_vnfd(&v).unwrap();
        let n = nested(&hot, "R.yaml");
        let s = &n["resources"]["R"]["properties"];
        assert!(s.get("image").is_none());
        assert_eq!(s["block_device_mapping_v2"][0]["boot_index"], 0);
        assert_eq!(
            n["resources"]["Data"]["properties"]["image"]["get_param"],
            "image_Data"
        );
    }

    #[test]
    fn refuses_what_it_cannot_build() {
        assert!(from_vnfd(&Vnfd::default()).is_err());
        let mut v = vnfd();
        v.storages.clear();
        let err = from_vnfd(&v).unwrap_err();
        assert!(err.contains("virtual storage Data"), "{err}");
    }
}
