//! vnfkeeper as Tacker v2's MgmtDriver: the hook requests vnfkeeper's driver script
//! (`packaging/tacker/vnfkeeper_mgmt_driver.py`) sends from Tacker's conductor, checked
//! completely before anything is recorded, and what each hook runs.
//!
//! Tacker v2 runs the script the VNFD's `Vnflcm` interface names for an LCM operation's
//! `<operation>_start` and `<operation>_end` (SOL001 v2.6.1 §6.7.4,
//! `tosca.interfaces.nfv.Vnflcm`) with a pickled dict on stdin; the script forwards the part
//! vnfkeeper needs as one JSON body:
//!
//! ```json
//! {"hook": "heal_start", "vnfInstanceId": "…", "vnfLcmOpOccId": "…",
//!  "request": {"vnfcInstanceId": ["workerNode-…"], "cause": "…"},
//!  "removeResources": ["<server id>", …]}
//! ```
//!
//! `vnfLcmOpOccId` is the `GrantRequest`'s (SOL003 v3.3.1 §9.5.2.2), `request` Tacker's
//! `HealVnfRequest` (§5.5.2.9 with SOL002's `vnfcInstanceId`) or `ScaleVnfRequest` (§5.5.2.5),
//! `removeResources` the resource ids of the Grant request's `removeResources` (the servers a
//! SCALE_IN removes). Pure: the `vnfkeeper` crate reads the body and records the outcome.

use serde_json::{Map, Value};

use crate::model::{FieldProblem, LcmOperationType};
use crate::wire::rules;
use crate::wire::sol003::{ScaleType, ScaleVnfRequest};

/// Largest number of `vnfcInstanceId`s or `removeResources` one hook request may carry.
pub const MAX_TARGETS: usize = 256;
/// Longest `cause` accepted, in bytes.
pub const MAX_CAUSE_BYTES: usize = 1024;
/// Largest `numberOfSteps` accepted.
pub const MAX_STEPS: u64 = 1000;

/// A hook of Tacker's `Vnflcm` interface that vnfkeeper runs (SOL001 operation names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MgmtHook {
    /// `heal_start`: before Tacker replaces servers — the flavour's `heal_start` (for the
    /// kubeadm cluster: refused while a PersistentVolume is Bound when the storage server is a
    /// target; the nodes removed from the cluster).
    HealStart,
    /// `heal_end`: after Tacker replaced them — the stack read again and the flavour's
    /// `heal_end` over the targets (the node joins again).
    HealEnd,
    /// `scale_start`: before Tacker changes its stack — for a SCALE_IN the flavour's
    /// `scale_start` over the VNFCs whose servers the Grant removes (nodes drained and
    /// deleted); nothing for a SCALE_OUT.
    ScaleStart,
    /// `scale_end`: after Tacker changed its stack — the stack read, the flavour's `scale_end`
    /// over the new VNFCs (SCALE_OUT) or its post-removal clean-up (SCALE_IN).
    ScaleEnd,
}

impl MgmtHook {
    /// Every hook, in declaration order.
    pub const ALL: [MgmtHook; 4] = [
        MgmtHook::HealStart,
        MgmtHook::HealEnd,
        MgmtHook::ScaleStart,
        MgmtHook::ScaleEnd,
    ];

    /// The SOL001 spelling, also stored: `heal_start`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            MgmtHook::HealStart => "heal_start",
            MgmtHook::HealEnd => "heal_end",
            MgmtHook::ScaleStart => "scale_start",
            MgmtHook::ScaleEnd => "scale_end",
        }
    }

    /// Parses the SOL001 spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }

    /// The LCM operation the hook belongs to.
    pub fn operation(self) -> LcmOperationType {
        match self {
            MgmtHook::HealStart | MgmtHook::HealEnd => LcmOperationType::Heal,
            MgmtHook::ScaleStart | MgmtHook::ScaleEnd => LcmOperationType::Scale,
        }
    }

    /// `*_start` (before Tacker acts) rather than `*_end`.
    pub fn is_start(self) -> bool {
        matches!(self, MgmtHook::HealStart | MgmtHook::ScaleStart)
    }
}

impl std::fmt::Display for MgmtHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The operation's request a hook carries, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum HookParams {
    /// A `HealVnfRequest`: Tacker's `vnfcInstanceId`s (`<vduId>-<server id>`; empty: the whole
    /// VNF).
    Heal {
        /// Tacker's VNFC ids, as sent.
        vnfc_instance_id: Vec<String>,
    },
    /// A `ScaleVnfRequest`.
    Scale(ScaleVnfRequest),
}

/// One hook request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct HookRequest {
    /// The hook.
    pub hook: MgmtHook,
    /// Tacker's `vnfInstanceId` (vnfkeeper's id of the adopted VNF too).
    pub vnf_instance_id: String,
    /// Tacker's `vnfLcmOpOccId` of the running operation.
    pub vnf_lcm_op_occ_id: String,
    /// The operation's request.
    pub params: HookParams,
    /// Server ids the Grant request removes (SCALE_IN), as sent.
    pub remove_resources: Vec<String>,
}

fn problem(pointer: &str, reason: impl Into<String>) -> FieldProblem {
    FieldProblem {
        pointer: pointer.into(),
        reason: reason.into(),
    }
}

/// A string field that must be an identifier (`rules::identifier`).
fn id_field(obj: &Map<String, Value>, key: &str, errs: &mut Vec<FieldProblem>) -> String {
    let pointer = format!("/{key}");
    match obj.get(key) {
        Some(Value::String(s)) => match rules::identifier(s) {
            Ok(()) => s.clone(),
            Err(why) => {
                errs.push(problem(&pointer, why));
                String::new()
            }
        },
        Some(_) => {
            errs.push(problem(&pointer, "must be a string"));
            String::new()
        }
        None => {
            errs.push(problem(&pointer, "is required"));
            String::new()
        }
    }
}

/// An optional array of identifiers (at most [`MAX_TARGETS`]).
fn id_list(value: Option<&Value>, pointer: &str, errs: &mut Vec<FieldProblem>) -> Vec<String> {
    let Some(v) = value else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        errs.push(problem(pointer, "must be an array of strings"));
        return Vec::new();
    };
    if items.len() > MAX_TARGETS {
        errs.push(problem(
            pointer,
            format!("has {} entries; at most {MAX_TARGETS}", items.len()),
        ));
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_str().map(|s| (s, rules::identifier(s))) {
            Some((s, Ok(()))) => out.push(s.to_string()),
            Some((_, Err(why))) => errs.push(problem(&format!("{pointer}/{i}"), why)),
            None => errs.push(problem(&format!("{pointer}/{i}"), "must be a string")),
        }
    }
    out
}

fn unknown_keys(
    obj: &Map<String, Value>,
    known: &[&str],
    base: &str,
    errs: &mut Vec<FieldProblem>,
) {
    for k in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        // The key is outside input: only as an RFC 6901 reference token, never interpreted.
        errs.push(problem(&crate::wire::check::push(base, k), "unknown field"));
    }
}

fn additional_params(obj: &Map<String, Value>, base: &str, errs: &mut Vec<FieldProblem>) {
    if let Some(v) = obj.get("additionalParams")
        && !v.is_object()
        && !v.is_null()
    {
        errs.push(problem(
            &format!("{base}/additionalParams"),
            "must be an object",
        ));
    }
}

fn heal_params(req: &Map<String, Value>, errs: &mut Vec<FieldProblem>) -> HookParams {
    unknown_keys(
        req,
        &["vnfcInstanceId", "cause", "additionalParams"],
        "/request",
        errs,
    );
    let vnfc_instance_id = id_list(req.get("vnfcInstanceId"), "/request/vnfcInstanceId", errs);
    match req.get("cause") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= MAX_CAUSE_BYTES => {}
        Some(Value::String(_)) => errs.push(problem(
            "/request/cause",
            format!("is longer than {MAX_CAUSE_BYTES} bytes"),
        )),
        Some(_) => errs.push(problem("/request/cause", "must be a string")),
    }
    additional_params(req, "/request", errs);
    HookParams::Heal { vnfc_instance_id }
}

fn scale_params(req: &Map<String, Value>, errs: &mut Vec<FieldProblem>) -> Option<HookParams> {
    unknown_keys(
        req,
        &["type", "aspectId", "numberOfSteps", "additionalParams"],
        "/request",
        errs,
    );
    let scale_type = match req.get("type").and_then(Value::as_str) {
        Some("SCALE_OUT") => Some(ScaleType::ScaleOut),
        Some("SCALE_IN") => Some(ScaleType::ScaleIn),
        _ => {
            errs.push(problem("/request/type", "must be SCALE_OUT or SCALE_IN"));
            None
        }
    };
    let aspect_id = match req.get("aspectId").and_then(Value::as_str) {
        Some(a) => match rules::identifier(a) {
            Ok(()) => Some(a.to_string()),
            Err(why) => {
                errs.push(problem("/request/aspectId", why));
                None
            }
        },
        None => {
            errs.push(problem("/request/aspectId", "is required (a string)"));
            None
        }
    };
    let steps = match req.get("numberOfSteps") {
        None | Some(Value::Null) => Some(1),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_STEPS).contains(&n) => Some(n as u32),
            _ => {
                errs.push(problem(
                    "/request/numberOfSteps",
                    format!("must be an integer 1-{MAX_STEPS}"),
                ));
                None
            }
        },
    };
    additional_params(req, "/request", errs);
    Some(HookParams::Scale(ScaleVnfRequest {
        scale_type: scale_type?,
        aspect_id: aspect_id?,
        number_of_steps: steps?,
        additional_params: req
            .get("additionalParams")
            .and_then(Value::as_object)
            .cloned(),
    }))
}

/// Parses and checks a hook request body (JSON, see the module comment). Every defect is
/// reported with its JSON pointer (values are never echoed). Errors: the list of defects.
pub fn parse(bytes: &[u8]) -> Result<HookRequest, Vec<FieldProblem>> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| vec![problem("", format!("not JSON: {e}"))])?;
    let Some(obj) = value.as_object() else {
        return Err(vec![problem("", "must be a JSON object")]);
    };
    let mut errs = Vec::new();
    unknown_keys(
        obj,
        &[
            "hook",
            "vnfInstanceId",
            "vnfLcmOpOccId",
            "request",
            "removeResources",
        ],
        "",
        &mut errs,
    );
    let hook = match obj.get("hook").and_then(Value::as_str) {
        Some(h) => MgmtHook::parse(h).or_else(|| {
            errs.push(problem(
                "/hook",
                format!(
                    "not a hook vnfkeeper runs (one of {})",
                    MgmtHook::ALL.map(MgmtHook::as_str).join(", ")
                ),
            ));
            None
        }),
        None => {
            errs.push(problem("/hook", "is required (a string)"));
            None
        }
    };
    let vnf_instance_id = id_field(obj, "vnfInstanceId", &mut errs);
    let vnf_lcm_op_occ_id = id_field(obj, "vnfLcmOpOccId", &mut errs);
    let remove_resources = id_list(obj.get("removeResources"), "/removeResources", &mut errs);
    let params = match (hook, obj.get("request")) {
        (_, None) => {
            errs.push(problem("/request", "is required (the operation's request)"));
            None
        }
        (_, Some(r)) if !r.is_object() => {
            errs.push(problem("/request", "must be an object"));
            None
        }
        (Some(h), Some(Value::Object(r))) => match h.operation() {
            LcmOperationType::Heal => Some(heal_params(r, &mut errs)),
            _ => scale_params(r, &mut errs),
        },
        _ => None,
    };
    match (hook, params) {
        (Some(hook), Some(params)) if errs.is_empty() => Ok(HookRequest {
            hook,
            vnf_instance_id,
            vnf_lcm_op_occ_id,
            params,
            remove_resources,
        }),
        _ => Err(errs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn hooks_round_trip_and_belong_to_their_operation() {
        for h in MgmtHook::ALL {
            assert_eq!(MgmtHook::parse(h.as_str()), Some(h));
        }
        assert_eq!(MgmtHook::parse("instantiate_end"), None);
        assert!(MgmtHook::HealStart.is_start() && !MgmtHook::HealEnd.is_start());
        assert_eq!(MgmtHook::ScaleEnd.operation(), LcmOperationType::Scale);
    }

    #[test]
    fn a_heal_hook_is_parsed() {
        let r = parse(&body(json!({
            "hook": "heal_start", "vnfInstanceId": "vnf-1", "vnfLcmOpOccId": "occ-1",
            "request": {"vnfcInstanceId": ["workerNode-abc"], "cause": "x", "additionalParams": {}}
        })))
        .unwrap();
        assert_eq!(r.hook, MgmtHook::HealStart);
        assert_eq!(
            r.params,
            HookParams::Heal {
                vnfc_instance_id: vec!["workerNode-abc".into()]
            }
        );
        assert!(r.remove_resources.is_empty());
    }

    #[test]
    fn a_scale_hook_is_parsed_with_its_removed_servers() {
        let r = parse(&body(json!({
            "hook": "scale_start", "vnfInstanceId": "vnf-1", "vnfLcmOpOccId": "occ-1",
            "request": {"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1},
            "removeResources": ["srv-1"]
        })))
        .unwrap();
        let HookParams::Scale(s) = r.params else {
            panic!("not a scale")
        };
        assert_eq!(s.scale_type, ScaleType::ScaleIn);
        assert_eq!(r.remove_resources, ["srv-1"]);
    }

    #[test]
    fn hostile_bodies_are_refused_naming_each_field() {
        let pointers = |v: &[u8]| -> Vec<String> {
            parse(v)
                .unwrap_err()
                .into_iter()
                .map(|p| p.pointer)
                .collect()
        };
        assert_eq!(pointers(b"\xff\x00"), [""]);
        assert_eq!(pointers(b"[1]"), [""]);
        let p = pointers(&body(json!({
            "hook": "rm_rf", "vnfInstanceId": "../etc", "vnfLcmOpOccId": 7,
            "request": {"vnfcInstanceId": ["a b", 3], "cause": "x".repeat(2000)},
            "removeResources": "all", "extra": 1
        })));
        for want in [
            "/extra",
            "/hook",
            "/vnfInstanceId",
            "/vnfLcmOpOccId",
            "/removeResources",
        ] {
            assert!(p.iter().any(|x| x == want), "{want} in {p:?}");
        }
        let p = pointers(&body(json!({
            "hook": "heal_end", "vnfInstanceId": "v", "vnfLcmOpOccId": "o",
            "request": {"vnfcInstanceId": ["a b", 3], "cause": "x".repeat(2000), "healScript": "x"}
        })));
        assert_eq!(
            p,
            [
                "/request/healScript",
                "/request/vnfcInstanceId/0",
                "/request/vnfcInstanceId/1",
                "/request/cause"
            ]
        );
        let p = pointers(&body(json!({
            "hook": "scale_end", "vnfInstanceId": "v", "vnfLcmOpOccId": "o",
            "request": {"type": "SCALE_SIDEWAYS", "numberOfSteps": 0}
        })));
        assert_eq!(
            p,
            [
                "/request/type",
                "/request/aspectId",
                "/request/numberOfSteps"
            ]
        );
        let many: Vec<String> = (0..=MAX_TARGETS).map(|i| format!("s{i}")).collect();
        let p = pointers(&body(json!({
            "hook": "heal_start", "vnfInstanceId": "v", "vnfLcmOpOccId": "o",
            "request": {"vnfcInstanceId": many}
        })));
        assert_eq!(p, ["/request/vnfcInstanceId"]);
        assert_eq!(
            pointers(&body(
                json!({"hook": "heal_start", "vnfInstanceId": "v", "vnfLcmOpOccId": "o"})
            )),
            ["/request"]
        );
        let p = pointers(&body(json!({"hook": "heal_start", "vnfInstanceId": "v",
                                      "vnfLcmOpOccId": "o", "request": {}, "a/b~": 1})));
        assert_eq!(p, ["/a~1b~0"]);
    }
}
