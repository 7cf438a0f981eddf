//! The parts of a TOSCA VNFD (ETSI GS NFV-SOL 001) that planning needs: VDUs, CPs, virtual
//! storages, scaling aspects, instantiation levels. Pure: parses text, reads no files.

use std::collections::BTreeMap;

use serde_yaml_ng::Value;

/// A VNFD reduced to what vnfkeeper plans with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vnfd {
    /// The deployment flavour (`substitution_mappings.properties.flavour_id`).
    pub flavour_id: String,
    /// `tosca.nodes.nfv.Vdu.Compute` node templates by name.
    pub vdus: BTreeMap<String, Vdu>,
    /// `tosca.nodes.nfv.VduCp` node templates by name.
    pub cps: BTreeMap<String, Cp>,
    /// `tosca.nodes.nfv.Vdu.VirtualBlockStorage` node templates by name: size in GB.
    pub storages: BTreeMap<String, u32>,
    /// `sw_image_data.name` of the virtual storages that have one (a volume created from an
    /// image), by storage name.
    pub storage_images: BTreeMap<String, String>,
    /// `tosca.policies.nfv.ScalingAspects` with their VDU deltas, by aspect id.
    pub aspects: BTreeMap<String, Aspect>,
    /// `tosca.policies.nfv.InstantiationLevels` with VDU instance counts, by level id.
    pub instantiation_levels: BTreeMap<String, InstantiationLevel>,
    /// `default_level` of the instantiation levels.
    pub default_level: Option<String>,
    /// When the files describe several deployment flavours, one per file (Tacker's Kubernetes
    /// cluster sample: `simple`, `complex`, `podaffinity`), the VNFD of each, by flavour id:
    /// the files without a flavour merged with that flavour's (see [`Vnfd::for_flavour`]).
    /// Empty for a VNFD of one flavour, which is `self`.
    pub flavours: BTreeMap<String, Vnfd>,
}

/// One VDU (`tosca.nodes.nfv.Vdu.Compute`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vdu {
    /// `vdu_profile.min_number_of_instances`.
    pub min_instances: u32,
    /// `vdu_profile.max_number_of_instances`.
    pub max_instances: u32,
    /// `sw_image_data.name`: the Glance image to boot.
    pub image: Option<String>,
    /// `requested_additional_capability_name`: the Nova flavour.
    pub flavour: Option<String>,
    /// `virtual_storage` requirements: names of virtual storages attached to it.
    pub storages: Vec<String>,
    /// `VduInitialDelta.number_of_instances`, if given.
    pub initial_delta: Option<u32>,
}

/// One CP (`tosca.nodes.nfv.VduCp`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cp {
    /// The VDU it binds to (`virtual_binding`).
    pub vdu: String,
    /// The VNFD's internal virtual link it attaches to (`virtual_link` requirement, SOL001
    /// §6.8.4 `tosca.nodes.nfv.VduCp`), if any; a CP without one is connected by the
    /// request's `extVirtualLinks`.
    pub virtual_link: Option<String>,
}

/// A scaling aspect: `max_scale_level` and, per VDU, instances added per step.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Aspect {
    /// Highest scale level (levels run 0..=max).
    pub max_scale_level: u32,
    /// VDU → instances per scaling step (`VduScalingAspectDeltas`, first delta).
    pub vdu_deltas: BTreeMap<String, u32>,
}

/// An instantiation level: instance count per VDU and scale level per aspect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstantiationLevel {
    /// VDU → `number_of_instances` (`VduInstantiationLevels`).
    pub vdu_instances: BTreeMap<String, u32>,
    /// Aspect → `scale_level` (`InstantiationLevels.scale_info`).
    pub scale_levels: BTreeMap<String, u32>,
}

/// A VNFD problem, naming the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("VNFD {file}: {at}: {reason}")]
pub struct VnfdError {
    /// The definitions file.
    pub file: String,
    /// Where in it, e.g. `topology_template.node_templates.masterNode`.
    pub at: String,
    /// What is wrong.
    pub reason: String,
}

/// A request's `flavourId` that is none of the flavours a VNFD describes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the VNFD describes the flavours {}, not `{asked}`", flavours.join(", "))]
pub struct UnknownFlavour {
    /// The flavour asked for.
    pub asked: String,
    /// The flavours of the VNFD, sorted.
    pub flavours: Vec<String>,
}

impl Vnfd {
    /// The VNFD of deployment flavour `flavour_id` (SOL001 §6.9: one
    /// `substitution_mappings` per flavour): `self` for a VNFD of one flavour; else that
    /// flavour's entry of [`Vnfd::flavours`]. Errors: [`UnknownFlavour`], the files describe
    /// several flavours and none is `flavour_id`.
    pub fn for_flavour(&self, flavour_id: &str) -> Result<&Vnfd, UnknownFlavour> {
        if self.flavours.is_empty() {
            return Ok(self);
        }
        self.flavours.get(flavour_id).ok_or_else(|| UnknownFlavour {
            asked: flavour_id.to_owned(),
            flavours: self.flavours.keys().cloned().collect(),
        })
    }

    /// The `flavour_id` of a definitions file's `substitution_mappings`, if it has one.
    pub fn flavour_of_file(text: &str) -> Option<String> {
        let doc: Value = serde_yaml_ng::from_str(text).ok()?;
        doc["topology_template"]["substitution_mappings"]["properties"]["flavour_id"]
            .as_str()
            .map(str::to_owned)
    }

    /// Merges the parsed content of one definitions file (several files may make up a VNFD:
    /// the top file and its local imports). Errors: YAML syntax or unexpected shapes.
    pub fn merge_file(&mut self, file: &str, text: &str) -> Result<(), VnfdError> {
        let err = |at: &str, reason: String| VnfdError {
            file: file.into(),
            at: at.into(),
            reason,
        };
        super::check_yaml_nesting(text).map_err(|e| err("", e))?;
        let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| err("", e.to_string()))?;
        let topo = &doc["topology_template"];
        if let Some(f) = topo["substitution_mappings"]["properties"]["flavour_id"].as_str() {
            self.flavour_id = f.to_owned();
        }
        if let Some(nodes) = topo["node_templates"].as_mapping() {
            for (name, node) in nodes {
                let Some(name) = name.as_str() else { continue };
                let at = format!("topology_template.node_templates.{name}");
                match node["type"].as_str().unwrap_or("") {
                    "tosca.nodes.nfv.Vdu.Compute" => {
                        let props = &node["properties"];
                        let profile = &props["vdu_profile"];
                        let count = |k: &str| -> Result<u32, VnfdError> {
                            match profile[k].as_u64() {
                                Some(n) => {
                                    u32::try_from(n).map_err(|_| err(&at, format!("{k} too large")))
                                }
                                None => Err(err(
                                    &at,
                                    format!("vdu_profile.{k} missing or not a number"),
                                )),
                            }
                        };
                        let vdu = Vdu {
                            min_instances: count("min_number_of_instances")?,
                            max_instances: count("max_number_of_instances")?,
                            image: props["sw_image_data"]["name"].as_str().map(str::to_owned),
                            flavour: node["capabilities"]["virtual_compute"]["properties"]
                                ["requested_additional_capabilities"]["properties"]
                                ["requested_additional_capability_name"]
                                .as_str()
                                .map(str::to_owned),
                            storages: requirements(node, "virtual_storage"),
                            initial_delta: None,
                        };
                        self.vdus.insert(name.to_owned(), vdu);
                    }
                    "tosca.nodes.nfv.VduCp" => {
                        let vdu = requirements(node, "virtual_binding")
                            .into_iter()
                            .next()
                            .ok_or_else(|| {
                                err(&at, "VduCp without a virtual_binding requirement".into())
                            })?;
                        let virtual_link = requirements(node, "virtual_link").into_iter().next();
                        self.cps.insert(name.to_owned(), Cp { vdu, virtual_link });
                    }
                    "tosca.nodes.nfv.Vdu.VirtualBlockStorage" => {
                        let size =
                            node["properties"]["virtual_block_storage_data"]["size_of_storage"]
                                .as_str()
                                .and_then(parse_gb)
                                .unwrap_or(1);
                        self.storages.insert(name.to_owned(), size);
                        if let Some(image) = node["properties"]["sw_image_data"]["name"].as_str() {
                            self.storage_images
                                .insert(name.to_owned(), image.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(policies) = topo["policies"].as_sequence() {
            for entry in policies {
                let Some(map) = entry.as_mapping() else {
                    continue;
                };
                for (pname, policy) in map {
                    let at = format!(
                        "topology_template.policies.{}",
                        pname.as_str().unwrap_or("?")
                    );
                    self.merge_policy(policy, &at)
                        .map_err(|reason| err(&at, reason))?;
                }
            }
        }
        Ok(())
    }

    fn merge_policy(&mut self, policy: &Value, _at: &str) -> Result<(), String> {
        let props = &policy["properties"];
        let targets: Vec<String> = policy["targets"]
            .as_sequence()
            .map(|t| {
                t.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let num = |v: &Value, what: &str| -> Result<u32, String> {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{what} is not a number"))
        };
        match policy["type"].as_str().unwrap_or("") {
            "tosca.policies.nfv.ScalingAspects" => {
                for (id, a) in props["aspects"].as_mapping().into_iter().flatten() {
                    let id = id.as_str().ok_or("aspect id is not a string")?;
                    let entry = self.aspects.entry(id.to_owned()).or_default();
                    entry.max_scale_level = num(&a["max_scale_level"], "max_scale_level")?;
                }
            }
            "tosca.policies.nfv.VduScalingAspectDeltas" => {
                let aspect = props["aspect"].as_str().ok_or("aspect missing")?;
                let (_, first) = props["deltas"]
                    .as_mapping()
                    .and_then(|m| m.iter().next())
                    .ok_or("deltas missing")?;
                let n = num(&first["number_of_instances"], "number_of_instances")?;
                let entry = self.aspects.entry(aspect.to_owned()).or_default();
                for t in &targets {
                    entry.vdu_deltas.insert(t.clone(), n);
                }
            }
            "tosca.policies.nfv.VduInitialDelta" => {
                let n = num(
                    &props["initial_delta"]["number_of_instances"],
                    "number_of_instances",
                )?;
                for t in &targets {
                    self.vdus.entry(t.clone()).or_default().initial_delta = Some(n);
                }
            }
            "tosca.policies.nfv.InstantiationLevels" => {
                for (id, l) in props["levels"].as_mapping().into_iter().flatten() {
                    let id = id.as_str().ok_or("level id is not a string")?;
                    let entry = self.instantiation_levels.entry(id.to_owned()).or_default();
                    for (aspect, info) in l["scale_info"].as_mapping().into_iter().flatten() {
                        let aspect = aspect.as_str().ok_or("aspect id is not a string")?;
                        entry
                            .scale_levels
                            .insert(aspect.to_owned(), num(&info["scale_level"], "scale_level")?);
                    }
                }
                self.default_level = props["default_level"].as_str().map(str::to_owned);
            }
            "tosca.policies.nfv.VduInstantiationLevels" => {
                for (id, l) in props["levels"].as_mapping().into_iter().flatten() {
                    let id = id.as_str().ok_or("level id is not a string")?;
                    let n = num(&l["number_of_instances"], "number_of_instances")?;
                    let entry = self.instantiation_levels.entry(id.to_owned()).or_default();
                    for t in &targets {
                        entry.vdu_instances.insert(t.clone(), n);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Instances of `vdu` at instantiation level `level` (the default level when `None`):
    /// the level's `number_of_instances`, else the VDU's initial delta, else its minimum.
    pub fn instances_at_level(&self, vdu: &str, level: Option<&str>) -> u32 {
        let level = level.or(self.default_level.as_deref());
        let from_level = level
            .and_then(|l| self.instantiation_levels.get(l))
            .and_then(|l| l.vdu_instances.get(vdu))
            .copied();
        let v = self.vdus.get(vdu);
        from_level
            .or_else(|| v.and_then(|v| v.initial_delta))
            .or_else(|| v.map(|v| v.min_instances))
            .unwrap_or(0)
    }

    /// The aspect that scales `vdu`, if any.
    pub fn aspect_of(&self, vdu: &str) -> Option<(&str, &Aspect)> {
        self.aspects
            .iter()
            .find(|(_, a)| a.vdu_deltas.contains_key(vdu))
            .map(|(id, a)| (id.as_str(), a))
    }
}

/// Names given by `requirements: [{<kind>: <name>}]` entries.
fn requirements(node: &Value, kind: &str) -> Vec<String> {
    node["requirements"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|r| r[kind].as_str().map(str::to_owned))
        .collect()
}

/// `"5 GB"` → 5.
fn parse_gb(s: &str) -> Option<u32> {
    let (n, unit) = s.trim().split_once(' ').unwrap_or((s.trim(), "GB"));
    let n: u32 = n.parse().ok()?;
    match unit.trim() {
        "GB" | "GiB" => Some(n),
        "TB" | "TiB" => Some(n * 1024),
        "MB" | "MiB" => Some(n.div_ceil(1024).max(1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv_vnfd() -> Vnfd {
        let mut v = Vnfd::default();
        let text = include_str!(
            "../../../fixtures/packages/pv-k8s-cluster/Definitions/pv_k8s_cluster_vnfd.yaml"
        );
        v.merge_file("pv_k8s_cluster_vnfd.yaml", text).unwrap();
        v
    }

    #[test]
    fn reads_vdus_cps_storage_aspects_and_levels_of_the_pv_fixture() {
        let v = pv_vnfd();
        assert_eq!(v.flavour_id, "simple");
        assert_eq!(
            v.vdus.keys().collect::<Vec<_>>(),
            ["masterNode", "storage_server", "workerNode"]
        );
        assert_eq!(v.vdus["workerNode"].max_instances, 4);
        assert_eq!(v.vdus["storage_server"].storages, ["storage_server_volume"]);
        assert_eq!(v.vdus["masterNode"].flavour.as_deref(), Some("m1.medium"));
        assert_eq!(v.cps["storage_server_CP"].vdu, "storage_server");
        assert_eq!(v.storages["storage_server_volume"], 5);
        assert_eq!(v.aspects["worker_instance"].max_scale_level, 2);
        assert_eq!(v.aspects["worker_instance"].vdu_deltas["workerNode"], 1);
        assert_eq!(v.aspect_of("workerNode").unwrap().0, "worker_instance");
        assert_eq!(v.instances_at_level("workerNode", None), 2);
        assert_eq!(
            v.instances_at_level("workerNode", Some("instantiation_level_2")),
            3
        );
        assert_eq!(v.instances_at_level("storage_server", None), 1);
    }

    #[test]
    fn errors_name_the_place() {
        let mut v = Vnfd::default();
        let text = "topology_template:\n  node_templates:\n    VDU1:\n      type: tosca.nodes.nfv.Vdu.Compute\n      properties: {}\n";
        let e = v.merge_file("x.yaml", text).unwrap_err();
        assert_eq!(e.at, "topology_template.node_templates.VDU1");
        assert!(e.reason.contains("min_number_of_instances"), "{e}");
        assert!(v.merge_file("y.yaml", "a: [").is_err());
    }
}
