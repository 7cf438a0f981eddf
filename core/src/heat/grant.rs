//! SOL003 Grant and GrantRequest (ETSI GS NFV-SOL 003 v3.3.1 §9.5.2.2–§9.5.2.3), the parts the
//! adjusted HOT uses, and the grant a VNFM derives when no NFVO grants (Tacker without an NFVO:
//! every requested resource granted, no zones, no VIM assets).
//!
//! The VNFM writes the GrantRequest; vnfkeeper names its resource definitions after the VNFC
//! they concern, so that a Grant written by hand is readable:
//! `add-<VDU>-<index>` / `remove-<VDU>-<index>` (type `COMPUTE`) and
//! `add-<storage>-<index>` / `remove-<storage>-<index>` (type `STORAGE`), e.g. `add-VDU1-2`,
//! `add-VDU2-VirtualStorage-0`. A Grant refers to them by `resourceDefinitionId`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::wire::sol003::{ExtManagedVirtualLinkData, ExtVirtualLinkData};

/// Grant (SOL003 §9.5.2.3): the NFVO's answer to a [`GrantRequest`].
///
/// Shape (camelCase as on the wire): `{"id"?, "vnfInstanceId"?, "vnfLcmOpOccId"?,
/// "zones": [ZoneInfo], "addResources": [GrantInfo], "removeResources": [GrantInfo],
/// "vimAssets"?: {"computeResourceFlavours": [...], "softwareImages": [...]},
/// "extVirtualLinks": [ExtVirtualLinkData], "extManagedVirtualLinks": [ExtManagedVirtualLinkData],
/// "additionalParams"?: {"nfv"?: {...}}}`; other SOL003
/// attributes (`_links`, `vimConnectionInfo`, `zoneGroups`, …) are kept in `other`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// `id` (1 on the wire; optional here so that a hand-written grant can omit it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `vnfInstanceId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_id: Option<String>,
    /// `vnfLcmOpOccId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_lcm_op_occ_id: Option<String>,
    /// `zones` (0..N): zones the `zoneId` of a [`GrantInfo`] refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<ZoneInfo>,
    /// `addResources` (0..N): granted resource definitions to add, each with its zone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_resources: Vec<GrantInfo>,
    /// `removeResources` (0..N): granted resource definitions to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_resources: Vec<GrantInfo>,
    /// `vimAssets` (0..1): VIM flavours and images to use instead of the VNFD's names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_assets: Option<VimAssets>,
    /// `extVirtualLinks` (0..N): external VLs; take precedence over the request's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
    /// `extManagedVirtualLinks` (0..N): externally managed internal VLs; applied before the
    /// request's (instantiate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_managed_virtual_links: Vec<ExtManagedVirtualLinkData>,
    /// `additionalParams` (0..1): `nfv` in it is merged after the request's, as Tacker's
    /// `userdata_standard.py` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<Map<String, Value>>,
    /// Other attributes, kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// ZoneInfo (SOL003 §9.5.3.3): `{"id", "zoneId", "vimConnectionId"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneInfo {
    /// `id`: what [`GrantInfo::zone_id`] refers to.
    pub id: String,
    /// `zoneId`: the zone in the VIM (Nova availability zone name).
    pub zone_id: String,
    /// `vimConnectionId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
}

/// GrantInfo (SOL003 §9.5.3.2): `{"resourceDefinitionId", "zoneId"?, …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantInfo {
    /// `resourceDefinitionId`: a [`ResourceDefinition::id`] of the GrantRequest.
    pub resource_definition_id: String,
    /// `zoneId`: a [`ZoneInfo::id`] of this Grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
    /// `reservationId`, `vimConnectionId`, `resourceProviderId`, `resourceGroupId`: kept.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// GrantedLcmOperationType `vimAssets` (SOL003 §9.5.2.3): `{"computeResourceFlavours",
/// "softwareImages"}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimAssets {
    /// `computeResourceFlavours` (0..N).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_resource_flavours: Vec<VimComputeResourceFlavour>,
    /// `softwareImages` (0..N).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub software_images: Vec<VimSoftwareImage>,
    /// Other attributes (`snapshotResources`), kept.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// VimComputeResourceFlavour (SOL003 §9.5.3.4): VNFD virtual compute → Nova flavour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimComputeResourceFlavour {
    /// `vnfdVirtualComputeDescId`: the VDU name (Tacker's convention).
    pub vnfd_virtual_compute_desc_id: String,
    /// `vimFlavourId`: the Nova flavour.
    pub vim_flavour_id: String,
    /// `vimConnectionId`, `resourceProviderId`: kept.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// VimSoftwareImage (SOL003 §9.5.3.5): VNFD software image → Glance image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimSoftwareImage {
    /// `vnfdSoftwareImageId`: the VDU or virtual storage name (Tacker's convention).
    pub vnfd_software_image_id: String,
    /// `vimSoftwareImageId`: the Glance image id.
    pub vim_software_image_id: String,
    /// `vimConnectionId`, `resourceProviderId`: kept.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// GrantRequest (SOL003 §9.5.2.2), as vnfkeeper writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRequest {
    /// `operation`: `INSTANTIATE`, `SCALE`, `HEAL` (also used for a change of image).
    pub operation: String,
    /// `instantiationLevelId` (INSTANTIATE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_level_id: Option<String>,
    /// `addResources`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_resources: Vec<ResourceDefinition>,
    /// `removeResources`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_resources: Vec<ResourceDefinition>,
}

/// ResourceDefinition (SOL003 §9.5.3.2). [`crate::heat::grant_request`] leaves `resource`
/// (the VIM handle of a resource to remove) unset: the engine knows the server ids and fills it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDefinition {
    /// `id`: `add-<name>-<index>` or `remove-<name>-<index>` (see the module doc).
    pub id: String,
    /// `type`: `COMPUTE` or `STORAGE`.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// `vduId`: the VDU the resource belongs to.
    pub vdu_id: String,
    /// `resourceTemplateId`: the VDU or virtual storage node of the VNFD.
    pub resource_template_id: String,
    /// `resource` (removeResources only): the resource in the VIM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceHandle>,
}

/// ResourceHandle (SOL003 §4.4.1.7): `{"resourceId", "vimLevelResourceType"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHandle {
    /// `resourceId`: e.g. the Nova server id.
    pub resource_id: String,
    /// `vimLevelResourceType`: e.g. `OS::Nova::Server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_level_resource_type: Option<String>,
}

impl Grant {
    /// The grant a VNFM uses without an NFVO: every resource definition of `request` granted,
    /// no zones and no VIM assets (so flavours and images come from the VNFD, zones from the
    /// request's `additionalParams.nfv`).
    pub fn derived(request: &GrantRequest) -> Self {
        let info = |d: &ResourceDefinition| GrantInfo {
            resource_definition_id: d.id.clone(),
            zone_id: None,
            other: Map::new(),
        };
        Self {
            add_resources: request.add_resources.iter().map(info).collect(),
            remove_resources: request.remove_resources.iter().map(info).collect(),
            ..Self::default()
        }
    }

    /// `vimAssets.softwareImages[vnfdSoftwareImageId == name].vimSoftwareImageId`.
    pub fn image(&self, name: &str) -> Option<&str> {
        self.vim_assets
            .as_ref()?
            .software_images
            .iter()
            .find(|i| i.vnfd_software_image_id == name)
            .map(|i| i.vim_software_image_id.as_str())
    }

    /// `vimAssets.computeResourceFlavours[vnfdVirtualComputeDescId == vdu].vimFlavourId`.
    pub fn flavour(&self, vdu: &str) -> Option<&str> {
        self.vim_assets
            .as_ref()?
            .compute_resource_flavours
            .iter()
            .find(|f| f.vnfd_virtual_compute_desc_id == vdu)
            .map(|f| f.vim_flavour_id.as_str())
    }
}
