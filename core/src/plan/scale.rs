//! Scale levels and capacities (SOL003 §5.5.2.5 ScaleVnfRequest, `scaleStatus`; VNFD
//! `tosca.policies.nfv.ScalingAspects` / `VduScalingAspectDeltas` / `InstantiationLevels`). Pure.
//!
//! A VDU's number of VNFCs is its count at the instantiation level plus, for each aspect that
//! scales it, `(level − level at instantiation) × delta`. Levels run `0..=max_scale_level`.

use std::collections::BTreeMap;

use super::PlanError;
use crate::package::Vnfd;
use crate::wire::sol003::{ScaleType, ScaleVnfRequest};

/// Scale level per aspect right after INSTANTIATE at `level` (the instantiation level's
/// `scale_info`, else 0 for every aspect of the VNFD).
pub fn initial_levels(vnfd: &Vnfd, level: Option<&str>) -> BTreeMap<String, u32> {
    let level = level.or(vnfd.default_level.as_deref());
    let info = level.and_then(|l| vnfd.instantiation_levels.get(l));
    vnfd.aspects
        .keys()
        .map(|a| {
            let l = info
                .and_then(|i| i.scale_levels.get(a))
                .copied()
                .unwrap_or(0);
            (a.clone(), l)
        })
        .collect()
}

/// `desired_capacity` per VDU for the scale levels `levels` of an instance instantiated at
/// `level`. VDUs no aspect scales keep their instantiation count.
pub fn capacities(
    vnfd: &Vnfd,
    level: Option<&str>,
    levels: &BTreeMap<String, u32>,
) -> BTreeMap<String, u32> {
    let initial = initial_levels(vnfd, level);
    vnfd.vdus
        .keys()
        .map(|vdu| {
            let mut n = i64::from(vnfd.instances_at_level(vdu, level));
            for (aspect, a) in &vnfd.aspects {
                if let Some(delta) = a.vdu_deltas.get(vdu) {
                    let now = i64::from(levels.get(aspect).copied().unwrap_or(0));
                    let base = i64::from(initial.get(aspect).copied().unwrap_or(0));
                    n += (now - base) * i64::from(*delta);
                }
            }
            (vdu.clone(), n.max(0) as u32)
        })
        .collect()
}

/// The scale levels after `req` applied to `levels`. Errors (pointer into the envelope): an
/// aspect the VNFD does not have (`/request/aspectId`), a level above `max_scale_level` or below
/// 0 (`/request/numberOfSteps`).
pub fn apply(
    vnfd: &Vnfd,
    levels: &BTreeMap<String, u32>,
    req: &ScaleVnfRequest,
) -> Result<BTreeMap<String, u32>, PlanError> {
    let aspect = vnfd.aspects.get(&req.aspect_id).ok_or_else(|| {
        PlanError::at(
            "/request/aspectId",
            format!(
                "the VNFD has no scaling aspect `{}` (aspects: {})",
                req.aspect_id,
                vnfd.aspects.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
    })?;
    let now = levels.get(&req.aspect_id).copied().unwrap_or(0);
    let steps = req.number_of_steps;
    let next = match req.scale_type {
        ScaleType::ScaleOut => now
            .checked_add(steps)
            .filter(|n| *n <= aspect.max_scale_level)
            .ok_or_else(|| {
                PlanError::at(
                    "/request/numberOfSteps",
                    format!(
                        "SCALE_OUT by {steps} step(s) from level {now} would exceed max_scale_level {} of aspect `{}`",
                        aspect.max_scale_level, req.aspect_id
                    ),
                )
            })?,
        ScaleType::ScaleIn => now.checked_sub(steps).ok_or_else(|| {
            PlanError::at(
                "/request/numberOfSteps",
                format!(
                    "SCALE_IN by {steps} step(s) from level {now} would go below level 0 of aspect `{}`",
                    req.aspect_id
                ),
            )
        })?,
    };
    let mut out = levels.clone();
    out.insert(req.aspect_id.clone(), next);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::VnfPackage;

    fn vnfd() -> Vnfd {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/packages/pv-k8s-cluster");
        VnfPackage::load(&root).unwrap().vnfd
    }

    fn req(t: ScaleType, steps: u32) -> ScaleVnfRequest {
        serde_json::from_value(serde_json::json!({
            "type": match t { ScaleType::ScaleOut => "SCALE_OUT", ScaleType::ScaleIn => "SCALE_IN" },
            "aspectId": "worker_instance",
            "numberOfSteps": steps,
        }))
        .unwrap()
    }

    #[test]
    fn scale_out_and_in_move_the_worker_capacity_by_the_delta() {
        let v = vnfd();
        let l0 = initial_levels(&v, None);
        let c0 = capacities(&v, None, &l0);
        let l1 = apply(&v, &l0, &req(ScaleType::ScaleOut, 1)).unwrap();
        let c1 = capacities(&v, None, &l1);
        let delta = v.aspects["worker_instance"].vdu_deltas["workerNode"];
        assert_eq!(c1["workerNode"], c0["workerNode"] + delta);
        assert_eq!(c1["masterNode"], c0["masterNode"]);
        let back = apply(&v, &l1, &req(ScaleType::ScaleIn, 1)).unwrap();
        assert_eq!(capacities(&v, None, &back), c0);
    }

    #[test]
    fn levels_outside_the_aspect_are_refused_with_their_pointer() {
        let v = vnfd();
        let l0 = initial_levels(&v, None);
        let max = v.aspects["worker_instance"].max_scale_level;
        let e = apply(&v, &l0, &req(ScaleType::ScaleOut, max + 1)).unwrap_err();
        assert_eq!(e.pointer.as_deref(), Some("/request/numberOfSteps"));
        assert!(e.reason.contains("max_scale_level"), "{e}");
        let e = apply(&v, &l0, &req(ScaleType::ScaleIn, 1 + l0["worker_instance"])).unwrap_err();
        assert!(e.reason.contains("below level 0"), "{e}");
        let mut bad = req(ScaleType::ScaleOut, 1);
        bad.aspect_id = "nope".into();
        let e = apply(&v, &l0, &bad).unwrap_err();
        assert_eq!(e.pointer.as_deref(), Some("/request/aspectId"));
    }
}
