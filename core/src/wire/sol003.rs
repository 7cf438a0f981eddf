//! serde types of the SOL003 request bodies (ETSI GS NFV-SOL 003 v2.6.1 §5.5.2, with the
//! v3.3.1 map forms accepted) that a spool envelope carries in `request`.
//!
//! These types are produced by [`super::LcmEnvelope::typed_request`] after validation; SOL003
//! data types nested inside `extVirtualLinks` keep unknown keys in `other`, because v2 and v3
//! differ there. Attribute names are SOL003's (camelCase).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::params::{HealAdditionalParams, InstantiateAdditionalParams};
use super::secret::Secret;

/// InstantiateVnfRequest (SOL003 §5.5.2.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstantiateVnfRequest {
    /// `flavourId` (1): deployment flavour of the VNFD, e.g. `simple`; selects `BaseHOT/<flavourId>/`.
    pub flavour_id: String,
    /// `instantiationLevelId` (0..1): instantiation level of the flavour; VNFD default if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_level_id: Option<String>,
    /// `extVirtualLinks` (0..N): external networks the VNF's external CPs attach to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
    /// `extManagedVirtualLinks` (0..N): externally managed internal VLs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_managed_virtual_links: Vec<ExtManagedVirtualLinkData>,
    /// `vimConnectionInfo` (0..N): list (v2.6.1) or map keyed by id (v3.3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_info: Option<VimConnectionInfos>,
    /// `localizationLanguage` (0..1): RFC 5646 language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localization_language: Option<String>,
    /// `additionalParams` (0..1): the MgmtDriver parameters of Tacker's Kubernetes-cluster specs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<InstantiateAdditionalParams>,
    /// `extensions` (0..1, v3): VNF extension attributes, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
    /// `vnfConfigurableProperties` (0..1, v3): kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_configurable_properties: Option<Map<String, Value>>,
}

/// ExtVirtualLinkData (SOL003 §4.4.1.11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtVirtualLinkData {
    /// `id` (1): identifier of this external VL in the request, e.g. `net0_master`.
    pub id: String,
    /// `vimConnectionId` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `resourceId` (1): the Neutron network ID.
    pub resource_id: String,
    /// `extCps` (1..N): external CPs connected to this VL.
    pub ext_cps: Vec<VnfExtCpData>,
    /// Other attributes (`extLinkPorts`, v3 additions), kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// VnfExtCpData (SOL003 §4.4.1.10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfExtCpData {
    /// `cpdId` (1): the VNFD CP (VduCp) name, e.g. `masterNode_CP1`.
    pub cpd_id: String,
    /// `cpConfig` (1..N): list (v2.6.1) or map (v3.3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cp_config: Option<CpConfigs>,
    /// Other attributes, kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `cpConfig` in its list (v2.6.1) or map (v3.3.1) form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CpConfigs {
    /// v2.6.1 list.
    List(Vec<VnfExtCpConfig>),
    /// v3.3.1 map keyed by an identifier chosen by the API consumer.
    Map(Map<String, Value>),
}

impl CpConfigs {
    /// The `cpProtocolData[].ipOverEthernet` objects of every configuration, in either form
    /// (SOL003 §4.4.1.10b IpOverEthernetAddressData): where fixed addresses of a CP are given.
    pub fn ip_over_ethernet(&self) -> Vec<Value> {
        match self {
            CpConfigs::List(v) => v
                .iter()
                .flat_map(|cfg| cfg.cp_protocol_data.iter())
                .filter_map(|pd| pd.ip_over_ethernet.clone().map(Value::Object))
                .collect(),
            CpConfigs::Map(m) => m
                .values()
                .flat_map(|cfg| {
                    cfg["cpProtocolData"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .map(|pd| pd["ipOverEthernet"].clone())
                .filter(Value::is_object)
                .collect(),
        }
    }
}

/// VnfExtCpConfig (SOL003 §4.4.1.10a).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfExtCpConfig {
    /// `cpInstanceId` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cp_instance_id: Option<String>,
    /// `linkPortId` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_port_id: Option<String>,
    /// `cpProtocolData` (0..N).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cp_protocol_data: Vec<CpProtocolData>,
    /// Other attributes, kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// CpProtocolData (SOL003 §4.4.1.10b).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpProtocolData {
    /// `layerProtocol` (1): `IP_OVER_ETHERNET` (v3 also `IP_FOR_VIRTUAL_CP`).
    pub layer_protocol: String,
    /// `ipOverEthernet` (0..1): MAC and IP addresses, kept as given (addresses validated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_over_ethernet: Option<Map<String, Value>>,
    /// Other attributes, kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// ExtManagedVirtualLinkData (SOL003 §4.4.1.12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtManagedVirtualLinkData {
    /// `id` (1).
    pub id: String,
    /// `vnfVirtualLinkDescId` (1): the VNFD VL it replaces, e.g. `internalVL1`.
    pub vnf_virtual_link_desc_id: String,
    /// `vimConnectionId` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `resourceId` (1): the Neutron network ID.
    pub resource_id: String,
    /// Other attributes, kept as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `vimConnectionInfo`: list (SOL003 v2.6.1, as in Tacker's MgmtDriver specs) or map keyed by id
/// (v3.3.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum VimConnectionInfos {
    /// v2.6.1 list, each entry with its `id`.
    List(Vec<VimConnectionInfo>),
    /// v3.3.1 map; the key is the id.
    Map(BTreeMap<String, VimConnectionInfo>),
}

impl VimConnectionInfos {
    /// The entries as `(id, info)` (list order, or key order for the map form).
    pub fn entries(&self) -> Vec<(&str, &VimConnectionInfo)> {
        match self {
            Self::List(l) => l
                .iter()
                .map(|v| (v.id.as_deref().unwrap_or(""), v))
                .collect(),
            Self::Map(m) => m.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        }
    }
}

/// VimConnectionInfo (SOL003 §4.4.1.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimConnectionInfo {
    /// `id` (1 in the v2.6.1 list form; absent in the v3 map form, where the key is the id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `vimId` (0..1): the VIM (OpenStack) registered with the NFVO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_id: Option<String>,
    /// `vimType` (1): e.g. `openstack` or `ETSINFV.OPENSTACK_KEYSTONE.V_3`.
    pub vim_type: String,
    /// `interfaceInfo` (0..1): endpoint information, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_info: Option<Map<String, Value>>,
    /// `accessInfo` (0..1): credentials; secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_info: Option<Secret<Map<String, Value>>>,
    /// `extra` (0..1): VIM-specific additional information, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// ScaleVnfRequest `type` (SOL003 §5.5.2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ScaleType {
    /// Add VNFCs (`SCALE_OUT`).
    ScaleOut,
    /// Remove VNFCs (`SCALE_IN`).
    ScaleIn,
}

fn one() -> u32 {
    1
}

/// ScaleVnfRequest (SOL003 §5.5.2.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleVnfRequest {
    /// `type` (1): `SCALE_OUT` or `SCALE_IN`.
    #[serde(rename = "type")]
    pub scale_type: ScaleType,
    /// `aspectId` (1): scaling aspect of the VNFD, e.g. `worker_instance`.
    pub aspect_id: String,
    /// `numberOfSteps` (0..1): scaling steps, an integer ≥ 1; default 1.
    #[serde(default = "one")]
    pub number_of_steps: u32,
    /// `additionalParams` (0..1): kept as given (Tacker's MgmtDriver specs define none for scale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<Map<String, Value>>,
}

/// HealVnfRequest: SOL003 §5.5.2.9 (`cause`, `additionalParams`) plus SOL002 v2.6.1 §5.5.2.9
/// (`vnfcInstanceId`, `healScript`), as Tacker accepts it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealVnfRequest {
    /// `vnfcInstanceId` (0..N, SOL002): VNFCs to heal; empty = the whole VNF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfc_instance_id: Vec<String>,
    /// `cause` (0..1): why healing is requested (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// `additionalParams` (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<HealAdditionalParams>,
    /// `healScript` (0..1, SOL002): kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_script: Option<String>,
}

/// TerminateVnfRequest `terminationType` (SOL003 §5.5.2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TerminationType {
    /// Shut down immediately.
    Forceful,
    /// Take the VNF out of service first, waiting at most `gracefulTerminationTimeout`.
    Graceful,
}

/// TerminateVnfRequest (SOL003 §5.5.2.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateVnfRequest {
    /// `terminationType` (1): `FORCEFUL` or `GRACEFUL`.
    pub termination_type: TerminationType,
    /// `gracefulTerminationTimeout` (0..1): seconds to wait for graceful shutdown; only with
    /// `GRACEFUL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_termination_timeout: Option<u64>,
    /// `additionalParams` (0..1): kept as given (Tacker's MgmtDriver specs define none for
    /// terminate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<Map<String, Value>>,
}

/// ChangeExtVnfConnectivityRequest (SOL003 §5.5.2.11): the external VLs the VNF's external CPs
/// attach to from now on. Each `extCps[].cpdId` names a VNFD CP whose ports (one per VNFC) move
/// to the VL's network, with the fixed addresses its `cpConfig` gives; CPs not named keep theirs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeExtVnfConnectivityRequest {
    /// `extVirtualLinks` (1..N): the external VLs and the CPs that attach to them.
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
    /// `vimConnectionInfo` (0..N): list (v2.6.1) or map keyed by id (v3.3.1); kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_info: Option<VimConnectionInfos>,
    /// `additionalParams` (0..1): `nfv` (entries merged into the stack's `nfv` parameter, as
    /// Tacker's StandardUserData does); other keys kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<Map<String, Value>>,
}

/// A typed SOL003 body, by operation.
#[derive(Debug, Clone, PartialEq)]
pub enum LcmRequest {
    /// INSTANTIATE.
    Instantiate(Box<InstantiateVnfRequest>),
    /// SCALE.
    Scale(ScaleVnfRequest),
    /// HEAL.
    Heal(HealVnfRequest),
    /// TERMINATE.
    Terminate(TerminateVnfRequest),
    /// CHANGE_EXT_CONN.
    ChangeExtConn(ChangeExtVnfConnectivityRequest),
}
