//! Companion mode with OpenStack Tacker, the decisions: which of Tacker's subscriptions to keep,
//! create or delete so that exactly one of vnfkeeper's exists (SOL003 v3.3.1 §5.4.18–19,
//! `LccnSubscription`), what a polled VNF LCM operation occurrence (`VnfLcmOpOcc`, SOL003
//! §5.5.2.13) changes in what vnfkeeper has recorded, and what vnfkeeper must do about it.
//!
//! Pure: the `vnfkeeper` crate lists, polls and writes, and hands these functions what it saw.

pub mod vim;

use std::collections::BTreeSet;

use crate::model::{InstantiationState, OperationState, VnfcId, VnfcRow};
use crate::plan::stages::{CloudAction, Hook, ReadCheck, StackDocument, Stage, StageList};

/// Where a VNF instance or an operation came from (stored as `origin`, migration V15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Origin {
    /// A request file vnfkeeper accepted from its spool: vnfkeeper owns the Heat stack.
    #[default]
    Spool,
    /// A Tacker-owned VNF, or the management steps after a Tacker operation COMPLETED: Tacker
    /// owns the VNF instance and its Heat stack; vnfkeeper never creates, updates or deletes it.
    Tacker,
}

impl Origin {
    /// The stored and shown spelling: `spool`, `tacker`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spool => "spool",
            Self::Tacker => "tacker",
        }
    }

    /// Parses a stored spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "spool" => Some(Self::Spool),
            "tacker" => Some(Self::Tacker),
            _ => None,
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stages of an INSTANTIATE of `origin`. Spool: `heat.create` of `document`,
/// `heat.wait_create`, `heat.read_vnfcs` (checked by `read`), then the flavour's
/// `instantiate_end`. Tacker: Tacker created the stack (`vnf-<vnfInstanceId>`, the name vnfkeeper
/// uses too) before its INSTANTIATE COMPLETED, so the plan only reads the existing stack's VNFCs
/// (`heat.read_vnfcs`, unchecked: the stack is Tacker's), runs `instantiate_end` — no
/// `heat.create`, no `heat.wait_create`, whatever `document` is — and then registers the
/// cluster with Tacker as a Kubernetes VIM (`tacker.register_vim`, [`vim`]), as Tacker's
/// sample MgmtDriver does at the end of its `instantiate_end`.
pub fn instantiate_stages(origin: Origin, document: StackDocument, read: ReadCheck) -> Vec<Stage> {
    let mut list = StageList::default();
    match origin {
        Origin::Spool => {
            list.cloud(CloudAction::CreateStack(document))
                .cloud(CloudAction::WaitCreate)
                .cloud(CloudAction::ReadVnfcs(read));
        }
        Origin::Tacker => {
            list.cloud(CloudAction::ReadVnfcs(ReadCheck::default()));
        }
    }
    list.wave(|w| vec![Stage::expand(w, Hook::InstantiateEnd)]);
    if origin == Origin::Tacker {
        list.cloud(CloudAction::RegisterVim);
    }
    list.into_stages()
}

/// The stages of a HEAL of origin `tacker`: Tacker already replaced the servers (marked them
/// unhealthy and updated its stack, or re-created the stack), so vnfkeeper only reads the
/// stack's VNFCs again (`heat.read_vnfcs`: the new servers, their host keys learned anew) and
/// runs the flavour's `heal_end` over the targets. The flavour's `heal_start` (e.g. removing
/// the node from the cluster, refusing while a PersistentVolume is Bound) cannot run before a
/// heal that already happened and is not run.
pub fn heal_stages() -> Vec<Stage> {
    let mut list = StageList::default();
    list.cloud(CloudAction::ReadVnfcs(ReadCheck::default()))
        .wave(|w| vec![Stage::expand(w, Hook::HealEnd)]);
    list.into_stages()
}

/// vnfkeeper's VNFC ids of the VNFCs a Tacker HEAL named: Tacker's `vnfcInstanceId`s are its
/// `vnfcInfo` ids, `<vduId>-<vnfcResourceInfo.id>` by default (Tacker v2's OpenStack driver,
/// the resource info id being the server's physical resource id), matched against the VNFC
/// rows (`vdu_id`, `server_id` as vnfkeeper last read them, before the heal). Empty: every
/// VNFC (a heal of the whole VNF). Errors: [`UnknownVnfc`] for the first id that names no VNFC
/// (Tacker's `VDU_VNFc_mapping` ids included: not supported).
pub fn tacker_heal_targets(ids: &[String], vnfcs: &[VnfcRow]) -> Result<Vec<VnfcId>, UnknownVnfc> {
    if ids.is_empty() {
        return Ok(vnfcs.iter().map(|v| v.id.clone()).collect());
    }
    let mut out = Vec::new();
    for id in ids {
        let found = vnfcs.iter().find(|v| {
            v.server_id.as_deref().is_some_and(|server| {
                id.strip_prefix(v.vdu_id.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    == Some(server)
            })
        });
        match found {
            Some(v) if !out.contains(&v.id) => out.push(v.id.clone()),
            Some(_) => {}
            None => return Err(UnknownVnfc(id.clone())),
        }
    }
    Ok(out)
}

/// Whether the Tacker HEAL `occ` whose `heal_start` hook heals vnfkeeper's VNFCs `targets`
/// (from [`tacker_heal_targets`]) is the heal a waiting vnfkeeper HEAL asked Tacker for, so that
/// reconcile's rules already checked it: that HEAL stored Tacker's op occ id `asked_occ` when it
/// sent the request and it is `occ`; or no id is stored yet (Tacker's conductor may run the hook
/// before the transaction that stores the id commits) and it heals the same VNFCs
/// (`asked_targets`, vnfkeeper's ids; empty, like empty `targets`, is every VNFC of `vnfcs`).
/// Anything else is another heal — an operator's, started in Tacker — that no rule checked.
pub fn is_heal_vnfkeeper_asked_for(
    asked_occ: Option<&str>,
    asked_targets: &[VnfcId],
    occ: &str,
    targets: &[VnfcId],
    vnfcs: &[VnfcRow],
) -> bool {
    if let Some(asked) = asked_occ {
        return asked == occ;
    }
    let set = |ids: &[VnfcId]| -> BTreeSet<VnfcId> {
        if ids.is_empty() {
            vnfcs.iter().map(|v| v.id.clone()).collect()
        } else {
            ids.iter().cloned().collect()
        }
    };
    set(asked_targets) == set(targets)
}

/// A Tacker HEAL named a `vnfcInstanceId` (Tacker's spelling, carried as it came) that matches
/// no VNFC row: [`tacker_heal_targets`] refuses the heal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("vnfcInstanceId `{0}` names no VNFC vnfkeeper knows")]
pub struct UnknownVnfc(pub String);

/// What vnfkeeper does about a Tacker operation whose follow-up is [`Followup::Manage`]: the
/// vnfkeeper operation it creates (origin `tacker`), or why none. INSTANTIATE, SCALE and HEAL
/// are followed by management steps; SCALE_TO_LEVEL (not in Tacker v2) is recorded and left
/// (`Unsupported`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adoption {
    /// Create an INSTANTIATE of origin `tacker` from the op occ's `operationParams`.
    Instantiate,
    /// Create a HEAL of origin `tacker` of the VNFCs of `operationParams.vnfcInstanceId`.
    Heal,
    /// Create a SCALE of origin `tacker` with the op occ's `operationParams` (a
    /// `ScaleVnfRequest`, SOL003 §5.5.2.5): [`tacker_scale_stages`].
    Scale,
    /// Nothing is run for this operation type (the reason names it).
    Unsupported(&'static str),
}

/// The adoption of a COMPLETED Tacker `operation` (SOL003 `LcmOperationType` spelling).
pub fn adoption(operation: &str) -> Adoption {
    match operation {
        "INSTANTIATE" => Adoption::Instantiate,
        "SCALE" => Adoption::Scale,
        "SCALE_TO_LEVEL" => {
            Adoption::Unsupported("management steps after a Tacker SCALE_TO_LEVEL are not run")
        }
        "HEAL" => Adoption::Heal,
        _ => Adoption::Unsupported("not an operation vnfkeeper follows"),
    }
}

/// The stages of a SCALE of origin `tacker`, after Tacker's SCALE COMPLETED: Tacker already
/// changed its stack, so vnfkeeper reads the stack's VNFCs (`heat.read_vnfcs`: new VNFCs get
/// rows and their host keys are learned, removed ones are forgotten), then — SCALE_OUT
/// (`scale_out`) — the flavour's `scale_end` over the new VNFCs (the engine's subjects: the
/// VNFCs whose rows were created by this operation, i.e. in the stack and not in the store
/// before), or — SCALE_IN — `cleanup`, the flavour's post-removal stages that can still run
/// after the servers are gone ([`removed_vnfcs`] gives their subjects). The flavour's
/// `scale_start` (draining a node before its server is removed) cannot run after Tacker removed
/// the server and is not run.
pub fn tacker_scale_stages(scale_out: bool, cleanup: Vec<Stage>) -> Vec<Stage> {
    let mut list = StageList::default();
    list.cloud(CloudAction::ReadVnfcs(ReadCheck::default()));
    if scale_out {
        list.wave(|w| vec![Stage::expand(w, Hook::ScaleEnd)]);
    } else {
        list.append(cleanup);
    }
    list.into_stages()
}

/// vnfkeeper's ids of the VNFCs in `before` (the rows as vnfkeeper last read them) that the
/// stack no longer has: `present` lists the `(stack_id, resource_name)` of each VNFC the stack
/// shows now (the same key `heat.read_vnfcs` matches rows by). In `before`'s order.
pub fn removed_vnfcs(before: &[VnfcRow], present: &[(String, String)]) -> Vec<VnfcId> {
    before
        .iter()
        .filter(|v| {
            !present
                .iter()
                .any(|(stack, res)| *stack == v.stack_id && *res == v.resource_name)
        })
        .map(|v| v.id.clone())
        .collect()
}

/// The request envelope vnfkeeper's intake validates for a Tacker INSTANTIATE: the op occ's
/// `operationParams` (an `InstantiateVnfRequest`, SOL003 §5.5.2.4) as `request`, the instance
/// id, and the package `[tacker.packages]` maps the instance's `vnfdId` to as `vnfPackage`.
/// Tacker's `vimConnectionInfo` (a map of VIM credentials vnfkeeper never uses: it reaches the
/// cloud through its own clouds.yaml entry) is left out.
pub fn instantiate_envelope(
    vnf_instance_id: &str,
    package: &str,
    operation_params: &serde_json::Value,
) -> serde_json::Value {
    let mut request = operation_params.clone();
    if let Some(m) = request.as_object_mut() {
        m.remove("vimConnectionInfo");
    }
    serde_json::json!({
        "vnfInstanceId": vnf_instance_id,
        "operation": "INSTANTIATE",
        "vnfPackage": package,
        "request": request,
    })
}

/// A subscription as Tacker lists it (`GET /vnflcm/v2/subscriptions`): only what identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSeen {
    /// `id`.
    pub id: String,
    /// `callbackUri`.
    pub callback_uri: String,
}

/// What to do so that exactly one subscription of vnfkeeper's exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionPlan {
    /// The subscription to keep (and store), when one of ours exists.
    pub keep: Option<String>,
    /// Create one (none of ours exists).
    pub create: bool,
    /// Extra copies of ours to delete (never another subscriber's).
    pub delete: Vec<String>,
}

/// Decides over Tacker's listing: ours are the subscriptions whose `callbackUri` is
/// `callback_uri` (compared exactly: it is the URI vnfkeeper sent). The one stored before
/// (`stored`) is kept when it is still there, else the first of ours in Tacker's order; the
/// other copies of ours are deleted; none of ours → create.
pub fn plan_subscriptions(
    seen: &[SubscriptionSeen],
    callback_uri: &str,
    stored: Option<&str>,
) -> SubscriptionPlan {
    let ours: Vec<&SubscriptionSeen> = seen
        .iter()
        .filter(|s| s.callback_uri == callback_uri)
        .collect();
    let keep = stored
        .and_then(|id| ours.iter().find(|s| s.id == id))
        .or(ours.first())
        .map(|s| s.id.clone());
    SubscriptionPlan {
        create: keep.is_none(),
        delete: ours
            .iter()
            .filter(|s| Some(&s.id) != keep.as_ref())
            .map(|s| s.id.clone())
            .collect(),
        keep,
    }
}

/// An operation occurrence as Tacker's API shows it (`GET /vnflcm/v2/vnf_lcm_op_occs`, SOL003
/// §5.5.2.13): the fields vnfkeeper records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpOccSeen {
    /// `id` (the `vnfLcmOpOccId` of notifications).
    pub id: String,
    /// `vnfInstanceId`.
    pub vnf_instance_id: String,
    /// `operation` (SOL003 `LcmOperationType` spelling).
    pub operation: String,
    /// `operationState`.
    pub state: OperationState,
    /// `isAutomaticInvocation`.
    pub is_automatic_invocation: bool,
}

/// A managed VNF instance as Tacker's API shows it (`GET /vnflcm/v2/vnf_instances/{id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSeen {
    /// `id`.
    pub id: String,
    /// `vnfdId`.
    pub vnfd_id: String,
    /// `instantiationState`.
    pub state: InstantiationState,
    /// How many entries `instantiatedVnfInfo.vnfcResourceInfo` has (0 when not instantiated).
    pub vnfc_count: usize,
}

/// What a polled operation occurrence changes in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OccChange {
    /// Recorded already in this state: nothing to write.
    Unchanged,
    /// A state not recorded before for this occurrence (first sight included): record the
    /// state, and the follow-up it calls for.
    Entered(OperationState),
}

/// Compares what Tacker reports (`observed`) with what was recorded last (`recorded`; `None`:
/// never seen). A state seen before is not recorded again (`seen_before`: the states already
/// recorded for this occurrence, e.g. `PROCESSING` again after a retry of a `FAILED_TEMP`).
pub fn decide_occ(
    recorded: Option<OperationState>,
    observed: OperationState,
    seen_before: &[OperationState],
) -> OccChange {
    if recorded == Some(observed) || seen_before.contains(&observed) {
        OccChange::Unchanged
    } else {
        OccChange::Entered(observed)
    }
}

/// What vnfkeeper must do after a Tacker operation reached a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followup {
    /// Nothing (still running, failed on Tacker's side, or not an operation vnfkeeper follows).
    None,
    /// Run the management steps of the operation (INSTANTIATE, SCALE, HEAL COMPLETED).
    Manage,
    /// Retire the VNF from vnfkeeper's state, keeping its history (TERMINATE COMPLETED).
    Retire,
}

impl Followup {
    /// The stored spelling: `MANAGE`, `RETIRE`; `None` is not stored.
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Self::None => None,
            Self::Manage => Some("MANAGE"),
            Self::Retire => Some("RETIRE"),
        }
    }

    /// Parses a stored spelling (`None` for NULL).
    pub fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None => Some(Self::None),
            Some("MANAGE") => Some(Self::Manage),
            Some("RETIRE") => Some(Self::Retire),
            Some(_) => None,
        }
    }
}

/// The follow-up of `operation` (SOL003 `LcmOperationType` spelling) in `state`: only COMPLETED
/// calls for one.
pub fn followup(operation: &str, state: OperationState) -> Followup {
    if state != OperationState::Completed {
        return Followup::None;
    }
    match operation {
        "INSTANTIATE" | "SCALE" | "SCALE_TO_LEVEL" | "HEAL" => Followup::Manage,
        "TERMINATE" => Followup::Retire,
        _ => Followup::None,
    }
}

/// A SOL013 §5.2 attribute filter `(in,attr,v1,v2,…)` (values with `,`, `(`, `)` or `'` are
/// quoted with `'`, a `'` doubled); `None` for an empty list.
pub fn filter_in(attr: &str, values: &[String]) -> Option<String> {
    if values.is_empty() {
        return None;
    }
    let quoted: Vec<String> = values
        .iter()
        .map(|v| {
            if v.contains([',', '(', ')', '\'']) {
                format!("'{}'", v.replace('\'', "''"))
            } else {
                v.clone()
            }
        })
        .collect();
    Some(format!("(in,{attr},{})", quoted.join(",")))
}

/// What reconcile does about a heal it decided for a Tacker-owned VNF: healing through Tacker
/// (SOL003 v3.3.1 §5.4.9 HealVnfRequest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TackerHealRoute {
    /// `tacker.auto_heal` is off: nothing is started (an event says why).
    Off,
    /// A Tacker operation occurrence of the VNF is in progress or waits for its operator
    /// (`STARTING`, `PROCESSING`, `FAILED_TEMP`, `ROLLING_BACK`): nothing is started.
    Blocked {
        /// Tacker's `vnfLcmOpOccId`.
        occ_id: String,
        /// Its state.
        state: OperationState,
    },
    /// A configuration repair (no new server): vnfkeeper's HEAL of origin `tacker` runs at once
    /// (`heal.read_vnfcs` of Tacker's stack, then `heal_end`): no Heat write, nothing to ask
    /// Tacker.
    Direct,
    /// A server replacement: a vnfkeeper HEAL of origin `tacker` waiting for Tacker's heal
    /// (`POST /vnflcm/v2/vnf_instances/{id}/heal`), run when Tacker's HEAL COMPLETED.
    ThroughTacker,
}

/// The route of a heal decided for a Tacker-owned VNF: `auto_heal` is `tacker.auto_heal`,
/// `occs` the recorded Tacker op occs of that VNF (`vnfLcmOpOccId`, latest state),
/// `configuration_only` the decided heal's mode.
pub fn tacker_heal_route(
    auto_heal: bool,
    occs: &[(String, OperationState)],
    configuration_only: bool,
) -> TackerHealRoute {
    if !auto_heal {
        return TackerHealRoute::Off;
    }
    if let Some((id, state)) = occs.iter().find(|(_, s)| {
        matches!(
            s,
            OperationState::Starting
                | OperationState::Processing
                | OperationState::FailedTemp
                | OperationState::RollingBack
        )
    }) {
        return TackerHealRoute::Blocked {
            occ_id: id.clone(),
            state: *state,
        };
    }
    if configuration_only {
        TackerHealRoute::Direct
    } else {
        TackerHealRoute::ThroughTacker
    }
}

/// Tacker's `vnfcInstanceId`s (its `vnfcInfo` ids, `<vduId>-<server id>`) of vnfkeeper's VNFCs
/// `targets` — the inverse of [`tacker_heal_targets`]. Empty `targets`: empty (a heal of the
/// whole VNF). Errors: a target that is no VNFC row, or whose server id is unknown.
pub fn tacker_vnfc_instance_ids(
    targets: &[String],
    vnfcs: &[VnfcRow],
) -> Result<Vec<String>, String> {
    targets
        .iter()
        .map(|t| {
            let v = vnfcs
                .iter()
                .find(|v| &v.id == t)
                .ok_or_else(|| format!("VNFC `{t}` is not a VNFC of this VNF instance"))?;
            let server = v
                .server_id
                .as_deref()
                .ok_or_else(|| format!("VNFC `{t}` has no known server id"))?;
            Ok(format!("{}-{server}", v.vdu_id))
        })
        .collect()
}

/// The `HealVnfRequest` (SOL003 v3.3.1 §5.5.2.9, as Tacker v2 takes it) vnfkeeper sends to
/// Tacker: `vnfcInstanceId` (Tacker's ids; left out when empty: the whole VNF), `cause`, and
/// `additionalParams` = the decided heal's without vnfkeeper's own keys (`configuration_only`);
/// Tacker's `all` (replace the volumes too) passes through. Left out when nothing remains.
pub fn tacker_heal_request(
    vnfc_instance_ids: &[String],
    cause: &str,
    additional_params: Option<&serde_json::Value>,
) -> serde_json::Value {
    let mut req = serde_json::Map::new();
    if !vnfc_instance_ids.is_empty() {
        req.insert("vnfcInstanceId".into(), vnfc_instance_ids.into());
    }
    req.insert("cause".into(), cause.into());
    if let Some(serde_json::Value::Object(a)) = additional_params {
        let kept: serde_json::Map<String, serde_json::Value> = a
            .iter()
            .filter(|(k, _)| k.as_str() != "configuration_only")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            req.insert("additionalParams".into(), kept.into());
        }
    }
    serde_json::Value::Object(req)
}

/// A date-time of Tacker's v2 API (SOL013 §4.3 DateTime: RFC 3339). Tacker 16.0.0 writes
/// the times of its op occs as read back from its database, without an offset
/// (`2026-11-28T04:42:34.000000`); such a time is Tacker's UTC clock (its records are written
/// with UTC) and is taken as UTC. Errors: anything else, with chrono's reason.
pub fn parse_tacker_time(s: &str) -> Result<crate::model::Timestamp, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(crate::model::Timestamp(at.with_timezone(&chrono::Utc)));
    }
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .map(|at| crate::model::Timestamp(at.and_utc()))
        .map_err(|e| format!("{s:?} is no RFC 3339 date-time nor one without offset: {e}"))
}

/// A Tacker op occ as listed, with its `startTime` (SOL003 §5.5.2.13), for
/// [`heal_sent_before`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OccStarted {
    /// `id`.
    pub id: String,
    /// `operation`.
    pub operation: String,
    /// `startTime`.
    pub start_time: crate::model::Timestamp,
}

/// After a crash between `POST …/heal` and recording its answer: the Tacker HEAL of the VNF
/// that vnfkeeper's waiting operation (started at `ours_started`, with no Tacker id stored)
/// sent — a HEAL that started at or after ours and that no vnfkeeper operation is linked to
/// (`linked`), the earliest. `None`: none was sent; send it.
pub fn heal_sent_before(
    ours_started: crate::model::Timestamp,
    occs: &[OccStarted],
    linked: &[String],
) -> Option<String> {
    occs.iter()
        .filter(|o| o.operation == "HEAL" && o.start_time.0 >= ours_started.0)
        .filter(|o| !linked.contains(&o.id))
        .min_by_key(|o| o.start_time.0)
        .map(|o| o.id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use OperationState::*;

    fn s(id: &str, uri: &str) -> SubscriptionSeen {
        SubscriptionSeen {
            id: id.into(),
            callback_uri: uri.into(),
        }
    }

    const OURS: &str = "http://vnfkeeper:9890/vnfkeeper/notifications";

    #[test]
    fn none_of_ours_creates_one_and_leaves_others_alone() {
        let p = plan_subscriptions(&[s("a", "http://other/cb")], OURS, Some("gone"));
        assert_eq!(
            p,
            SubscriptionPlan {
                keep: None,
                create: true,
                delete: vec![]
            }
        );
    }

    #[test]
    fn the_stored_one_is_kept_and_extra_copies_deleted() {
        let seen = [s("a", OURS), s("b", "http://other/cb"), s("c", OURS)];
        let p = plan_subscriptions(&seen, OURS, Some("c"));
        assert_eq!(p.keep.as_deref(), Some("c"));
        assert!(!p.create);
        assert_eq!(p.delete, vec!["a".to_string()]);
        // Without a stored id (or a stale one) the first of ours is kept.
        let p = plan_subscriptions(&seen, OURS, Some("gone"));
        assert_eq!(p.keep.as_deref(), Some("a"));
        assert_eq!(p.delete, vec!["c".to_string()]);
    }

    #[test]
    fn callback_uri_is_compared_exactly() {
        let p = plan_subscriptions(&[s("a", &format!("{OURS}/"))], OURS, None);
        assert!(p.create);
        assert!(p.delete.is_empty());
    }

    #[test]
    fn occ_states_are_recorded_once() {
        assert_eq!(
            decide_occ(None, Starting, &[]),
            OccChange::Entered(Starting)
        );
        assert_eq!(
            decide_occ(Some(Starting), Completed, &[Starting]),
            OccChange::Entered(Completed)
        );
        assert_eq!(
            decide_occ(Some(Completed), Completed, &[Starting, Completed]),
            OccChange::Unchanged
        );
        // PROCESSING again after a retry is not a new state of this occurrence.
        assert_eq!(
            decide_occ(Some(FailedTemp), Processing, &[Processing, FailedTemp]),
            OccChange::Unchanged
        );
    }

    #[test]
    fn only_completed_operations_call_for_follow_up() {
        assert_eq!(followup("INSTANTIATE", Completed), Followup::Manage);
        assert_eq!(followup("HEAL", Completed), Followup::Manage);
        assert_eq!(followup("SCALE", Completed), Followup::Manage);
        assert_eq!(followup("TERMINATE", Completed), Followup::Retire);
        assert_eq!(followup("MODIFY_INFO", Completed), Followup::None);
        assert_eq!(followup("INSTANTIATE", FailedTemp), Followup::None);
        assert_eq!(followup("HEAL", Processing), Followup::None);
        for f in [Followup::None, Followup::Manage, Followup::Retire] {
            assert_eq!(Followup::parse(f.as_str()), Some(f));
        }
        assert_eq!(Followup::parse(Some("x")), None);
    }

    fn doc() -> StackDocument {
        StackDocument {
            template: serde_json::json!({}),
            files: Default::default(),
            parameters: Default::default(),
        }
    }

    fn names(stages: &[Stage]) -> Vec<String> {
        stages.iter().map(|s| s.key.to_string()).collect()
    }

    #[test]
    fn a_tacker_instantiate_reads_the_existing_stack_and_never_creates_one() {
        let spool = instantiate_stages(Origin::Spool, doc(), ReadCheck::default());
        let tacker = instantiate_stages(Origin::Tacker, doc(), ReadCheck::default());
        assert_eq!(
            names(&spool),
            [
                "heat.create",
                "heat.wait_create",
                "heat.read_vnfcs",
                "instantiate_end"
            ]
        );
        assert_eq!(
            names(&tacker),
            ["heat.read_vnfcs", "instantiate_end", "tacker.register_vim"]
        );
        assert!(spool.iter().all(|s| !matches!(
            s.action,
            crate::plan::stages::Action::Cloud(CloudAction::RegisterVim)
        )));
        // Stored by name, carrying nothing (its facts and token are read when it runs).
        assert_eq!(
            serde_json::to_value(tacker.last().unwrap()).unwrap(),
            serde_json::json!({"key": "tacker.register_vim", "wave": 2,
                               "action": {"cloud": "register_vim"}})
        );
        assert!(tacker.iter().all(|s| !matches!(
            s.action,
            crate::plan::stages::Action::Cloud(
                CloudAction::CreateStack(_) | CloudAction::WaitCreate
            )
        )));
        crate::plan::stages::check(&tacker).unwrap();
        for o in [Origin::Spool, Origin::Tacker] {
            assert_eq!(Origin::parse(o.as_str()), Some(o));
        }
        assert_eq!(Origin::parse("Tacker"), None);
    }

    #[test]
    fn only_instantiate_is_adopted_and_vim_credentials_are_dropped() {
        assert_eq!(adoption("INSTANTIATE"), Adoption::Instantiate);
        assert_eq!(adoption("HEAL"), Adoption::Heal);
        assert_eq!(adoption("SCALE"), Adoption::Scale);
        assert!(matches!(
            adoption("SCALE_TO_LEVEL"),
            Adoption::Unsupported(_)
        ));
        assert!(matches!(adoption("TERMINATE"), Adoption::Unsupported(_)));
        let env = instantiate_envelope(
            "i-1",
            "pkg",
            &serde_json::json!({"flavourId": "simple", "vimConnectionInfo": {"v": {"accessInfo": {"password": "x"}}}}),
        );
        assert_eq!(env["request"], serde_json::json!({"flavourId": "simple"}));
        assert_eq!(env["vnfPackage"], "pkg");
        assert_eq!(env["operation"], "INSTANTIATE");
        // Not an object: left as it is, for intake's validation to refuse.
        let env = instantiate_envelope("i-1", "pkg", &serde_json::json!([1]));
        assert_eq!(env["request"], serde_json::json!([1]));
    }

    fn row(id: &str, vdu: &str, server: &str) -> VnfcRow {
        VnfcRow {
            id: id.into(),
            vnf_instance_id: "vnf-1".into(),
            vdu_id: vdu.into(),
            vnfc_index: None,
            stack_name: "vnf-vnf-1".into(),
            stack_id: "st".into(),
            resource_name: "VDU".into(),
            server_id: Some(server.into()),
            server_status: None,
            ip_address: None,
            cp_addresses: Default::default(),
            volumes: Vec::new(),
            host_key: None,
            created_at: crate::model::Timestamp::parse("2026-11-26T00:00:00Z").unwrap(),
            parameters: None,
        }
    }

    #[test]
    fn tacker_heal_targets_are_found_by_vdu_and_server() {
        let rows = [
            row("a", "workerNode", "s-1"),
            row("b", "workerNode", "s-2"),
            row("c", "masterNode", "s-3"),
        ];
        assert_eq!(
            tacker_heal_targets(&["workerNode-s-2".into(), "workerNode-s-2".into()], &rows),
            Ok(vec![VnfcId::from("b")])
        );
        assert_eq!(tacker_heal_targets(&[], &rows).unwrap(), ["a", "b", "c"]);
        // The VDU must match too, and the whole server id.
        let e = tacker_heal_targets(&["masterNode-s-1".into()], &rows).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vnfcInstanceId `masterNode-s-1` names no VNFC vnfkeeper knows"
        );
        assert!(tacker_heal_targets(&["workerNode-s".into()], &rows).is_err());
        let names: Vec<String> = heal_stages().iter().map(|s| s.key.to_string()).collect();
        assert_eq!(names, ["heat.read_vnfcs", "heal_end"]);
    }

    /// A heal_start hook is the heal vnfkeeper asked for only when its Tacker op occ is the one
    /// vnfkeeper stored, or — none stored yet — when it heals the same VNFCs; an operator's
    /// heal of the storage server while reconcile's heal of a worker waits is not.
    #[test]
    fn only_the_heal_vnfkeeper_asked_for_is_taken_as_checked() {
        let rows = [
            row("w1", "workerNode", "s-1"),
            row("w2", "workerNode", "s-2"),
            row("st", "storage_server", "s-9"),
        ];
        let ids = |v: &[&str]| v.iter().map(|i| VnfcId::from(*i)).collect::<Vec<_>>();
        // Stored: the occ decides, whatever the targets.
        assert!(is_heal_vnfkeeper_asked_for(
            Some("o1"),
            &ids(&["w1"]),
            "o1",
            &ids(&["w1"]),
            &rows
        ));
        assert!(!is_heal_vnfkeeper_asked_for(
            Some("o1"),
            &ids(&["w1"]),
            "o2",
            &ids(&["w1"]),
            &rows
        ));
        assert!(!is_heal_vnfkeeper_asked_for(
            Some("o1"),
            &ids(&["w1"]),
            "o2",
            &ids(&["st"]),
            &rows
        ));
        // Not stored yet: the same VNFCs, in any order; empty is every VNFC.
        assert!(is_heal_vnfkeeper_asked_for(
            None,
            &ids(&["w2", "w1"]),
            "o3",
            &ids(&["w1", "w2"]),
            &rows
        ));
        assert!(!is_heal_vnfkeeper_asked_for(
            None,
            &ids(&["w1"]),
            "o3",
            &ids(&["st"]),
            &rows
        ));
        assert!(!is_heal_vnfkeeper_asked_for(
            None,
            &ids(&["w1"]),
            "o3",
            &ids(&["w1", "st"]),
            &rows
        ));
        assert!(is_heal_vnfkeeper_asked_for(
            None,
            &[],
            "o3",
            &ids(&["st", "w2", "w1"]),
            &rows
        ));
        assert!(!is_heal_vnfkeeper_asked_for(
            None,
            &[],
            "o3",
            &ids(&["st"]),
            &rows
        ));
    }

    #[test]
    fn a_tacker_scale_reads_the_stack_then_configures_the_new_or_cleans_up_after_the_gone() {
        let keys = |st: &[Stage]| st.iter().map(|s| s.key.to_string()).collect::<Vec<_>>();
        let out = tacker_scale_stages(true, Vec::new());
        assert_eq!(keys(&out), ["heat.read_vnfcs", "scale_end"]);
        crate::plan::stages::check(&out).unwrap();
        // A SCALE_OUT never runs cleanup stages, whatever is passed.
        let step = crate::recipes::k8s_remove_node(
            "m",
            "10.0.0.5",
            std::time::Duration::ZERO,
            crate::recipes::DrainPolicy::Lenient,
        );
        let cleanup = vec![Stage::remote(7, "gone", crate::model::Role::Master, step)];
        assert_eq!(
            keys(&tacker_scale_stages(true, cleanup.clone())),
            ["heat.read_vnfcs", "scale_end"]
        );
        let inn = tacker_scale_stages(false, cleanup);
        assert_eq!(keys(&inn), ["heat.read_vnfcs", "k8s.remove_node@gone"]);
        crate::plan::stages::check(&inn).unwrap();
        assert!(inn[1].wave > inn[0].wave, "cleanup after the read");
        assert_eq!(
            keys(&tacker_scale_stages(false, Vec::new())),
            ["heat.read_vnfcs"]
        );
    }

    #[test]
    fn removed_vnfcs_are_the_rows_the_stack_no_longer_has() {
        let mut rows = vec![
            row("a", "workerNode", "s-1"),
            row("b", "workerNode", "s-2"),
            row("c", "masterNode", "s-3"),
        ];
        rows[0].resource_name = "w0".into();
        rows[1].resource_name = "w1".into();
        rows[2].resource_name = "m0".into();
        let p = |s: &str, r: &str| (s.to_string(), r.to_string());
        assert!(removed_vnfcs(&rows, &[p("st", "w0"), p("st", "w1"), p("st", "m0")]).is_empty());
        assert_eq!(removed_vnfcs(&rows, &[p("st", "w0"), p("st", "m0")]), ["b"]);
        // The stack id counts too (a member's nested stack re-created is another VNFC).
        assert_eq!(
            removed_vnfcs(&rows, &[p("other", "w0"), p("st", "w1"), p("st", "m0")]),
            ["a"]
        );
        assert_eq!(removed_vnfcs(&rows, &[]), ["a", "b", "c"]);
        assert!(removed_vnfcs(&[], &[p("st", "w0")]).is_empty());
    }

    #[test]
    fn filter_in_quotes_what_sol013_requires() {
        assert_eq!(filter_in("vnfInstanceId", &[]), None);
        assert_eq!(
            filter_in("vnfInstanceId", &["a".into(), "b".into()]).as_deref(),
            Some("(in,vnfInstanceId,a,b)")
        );
        assert_eq!(
            filter_in("x", &["it's,".into()]).as_deref(),
            Some("(in,x,'it''s,')")
        );
    }

    #[test]
    fn the_heal_route_follows_auto_heal_tacker_occs_and_the_mode() {
        assert_eq!(tacker_heal_route(false, &[], false), TackerHealRoute::Off);
        assert_eq!(
            tacker_heal_route(true, &[], false),
            TackerHealRoute::ThroughTacker
        );
        assert_eq!(tacker_heal_route(true, &[], true), TackerHealRoute::Direct);
        let done = [("a".to_string(), Completed), ("b".to_string(), RolledBack)];
        assert_eq!(
            tacker_heal_route(true, &done, false),
            TackerHealRoute::ThroughTacker
        );
        for state in [Starting, Processing, FailedTemp, RollingBack] {
            let occs = [("a".to_string(), Completed), ("b".to_string(), state)];
            assert_eq!(
                tacker_heal_route(true, &occs, false),
                TackerHealRoute::Blocked {
                    occ_id: "b".into(),
                    state
                }
            );
        }
    }

    #[test]
    fn vnfc_ids_map_to_tacker_and_back() {
        let rows = [
            row("w1", "workerNode", "srv-1"),
            row("m1", "masterNode", "srv-2"),
            VnfcRow {
                server_id: None,
                ..row("x", "workerNode", "-")
            },
        ];
        let ids = tacker_vnfc_instance_ids(&["w1".into(), "m1".into()], &rows).unwrap();
        assert_eq!(ids, vec!["workerNode-srv-1", "masterNode-srv-2"]);
        assert_eq!(
            tacker_heal_targets(&ids, &rows).unwrap(),
            vec!["w1".to_string(), "m1".to_string()]
        );
        assert!(tacker_vnfc_instance_ids(&[], &rows).unwrap().is_empty());
        assert!(tacker_vnfc_instance_ids(&["x".into()], &rows).is_err());
        assert!(tacker_vnfc_instance_ids(&["nope".into()], &rows).is_err());
    }

    #[test]
    fn the_tacker_heal_request_drops_vnfkeeper_keys() {
        let extra = serde_json::json!({"configuration_only": false, "all": true});
        let r = tacker_heal_request(&["workerNode-s".into()], "why", Some(&extra));
        assert_eq!(
            r,
            serde_json::json!({"vnfcInstanceId": ["workerNode-s"], "cause": "why",
                "additionalParams": {"all": true}})
        );
        let r = tacker_heal_request(
            &[],
            "why",
            Some(&serde_json::json!({"configuration_only": false})),
        );
        assert_eq!(r, serde_json::json!({"cause": "why"}));
    }

    #[test]
    fn a_heal_sent_before_a_crash_is_found_not_sent_again() {
        use chrono::TimeZone;
        let t = |s: i64| crate::model::Timestamp(chrono::Utc.timestamp_opt(s, 0).unwrap());
        let o = |id: &str, op: &str, at: i64| OccStarted {
            id: id.into(),
            operation: op.into(),
            start_time: t(at),
        };
        let occs = [
            o("old", "HEAL", 90),
            o("inst", "INSTANTIATE", 200),
            o("linked", "HEAL", 150),
            o("ours", "HEAL", 160),
            o("later", "HEAL", 300),
        ];
        assert_eq!(
            heal_sent_before(t(100), &occs, &["linked".into()]).as_deref(),
            Some("ours")
        );
        assert_eq!(heal_sent_before(t(400), &occs, &[]), None);
    }

    #[test]
    fn tacker_times_with_and_without_offset() {
        let t = |s| parse_tacker_time(s).map(|t| t.0.to_rfc3339());
        // Tacker 16.0.0's op occ times, as it answers them (no offset: UTC)
        assert_eq!(
            t("2026-11-28T04:42:34.000000").unwrap(),
            "2026-11-28T04:42:34+00:00"
        );
        assert_eq!(
            t("2026-11-28T04:42:34").unwrap(),
            "2026-11-28T04:42:34+00:00"
        );
        assert_eq!(
            t("2026-11-28T06:42:34+02:00").unwrap(),
            "2026-11-28T04:42:34+00:00"
        );
        assert_eq!(
            t("2026-11-28T04:42:34Z").unwrap(),
            "2026-11-28T04:42:34+00:00"
        );
        for bad in [
            "",
            "2026-11-28",
            "04:42:34",
            "2026-11-28T25:00:00",
            "yesterday",
        ] {
            assert!(t(bad).is_err(), "{bad:?}");
        }
    }
}
