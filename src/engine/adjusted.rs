//! The I/O side of individual VNFC management (one Heat resource `<VDU>-<index>` per VNFC from a
//! BaseHOT without AutoScalingGroup) shared by INSTANTIATE, SCALE and HEAL: whether the flavour's
//! BaseHOT takes the adjusted-HOT path, the instance's current state for
//! [`plan::individual::current`] (VNFC rows, and the stack's `nfv` as Heat shows it), storing the
//! operation's plan once with an audit event, the Heat documents of the adjusted HOT and the
//! VNFCs it plans. The decisions themselves are pure (`plan::individual`, `heat`).

use std::collections::BTreeSet;

use vnfkeeper_core::model::EventKind;

use serde_json::json;

use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, StackRef};
use crate::store::{NewEvent, OperationRow, VnfcRow};
use vnfkeeper_core::heat::{Analysis, Current};
use vnfkeeper_core::package::{BaseHot, VnfPackage};
use vnfkeeper_core::plan::individual::{self, AdjustedPlan, Known};
use vnfkeeper_core::plan::stages::StackDocument;
use vnfkeeper_core::wire::sol003::{ExtManagedVirtualLinkData, ExtVirtualLinkData};

/// The flavour's BaseHOT and its analysis, when some VDU is managed individually.
pub(super) struct Hot {
    /// The BaseHOT (nested templates are sent as `files`).
    pub base: BaseHot,
    /// Per-VDU modes and `nfv` references.
    pub analysis: Analysis,
}

/// `Some` when the BaseHOT of `flavour` has a VDU without AutoScalingGroup (heat
/// `Mode::Individual`), `None` for AutoScalingGroup BaseHOTs (the `plan::nfv` path).
/// Errors: a missing BaseHOT or one the analysis refuses (named by template path).
pub(super) fn load(pkg: &VnfPackage, flavour: &str) -> Result<Option<Hot>, StepFailure> {
    let base = pkg
        .base_hot(flavour)
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    let analysis = Analysis::new(&base, &pkg.vnfd)
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    Ok(individual::uses_adjusted_hot(&analysis).then_some(Hot { base, analysis }))
}

/// The stored plan's adjusted HOT with the package's BaseHOT, when the plan has one. The stored
/// plan decides the path: a plan made by the AutoScalingGroup path is finished that way even if
/// the package changed since. Errors: the plan has an adjusted HOT but the BaseHOT no longer
/// has an individually managed VDU.
pub(super) fn pair<'a>(
    adjusted: Option<&'a AdjustedPlan>,
    hot: Option<&'a Hot>,
) -> Result<Option<(&'a AdjustedPlan, &'a Hot)>, StepFailure> {
    match (adjusted, hot) {
        (Some(a), Some(h)) => Ok(Some((a, h))),
        (Some(_), None) => Err(StepFailure::input(
            "plan",
            "the stored plan uses an adjusted HOT, but the package's BaseHOT no longer has an individually managed VDU",
        )),
        (None, _) => Ok(None),
    }
}

/// The rows as [`Known`] VNFCs (index, parsed parameters, server).
pub(super) fn known(rows: &[VnfcRow]) -> Vec<Known> {
    rows.iter()
        .map(|r| Known {
            id: r.id.clone(),
            vdu_id: r.vdu_id.clone(),
            index: r.vnfc_index.and_then(|i| u32::try_from(i).ok()),
            parameters: r.parameters.clone(),
            server_id: r.server_id.clone(),
        })
        .collect()
}

/// The instance's current state for the adjusted HOT: the rows, plus the stack's `nfv` read from
/// Heat (for entries of VDUs that are not managed individually). A read, not a journaled step:
/// it only feeds the decision, which is stored before anything changes.
pub(super) async fn current<C: Cloud>(
    e: &Engine<C>,
    hot: &Hot,
    stack: &StackRef,
    rows: &[VnfcRow],
    ext_virtual_links: &[ExtVirtualLinkData],
    ext_managed_virtual_links: &[ExtManagedVirtualLinkData],
) -> Result<Current, EngineError> {
    let shown = e
        .cloud
        .stack(stack)
        .await
        .map_err(|err| StepFailure::cloud("plan", &err))?;
    Ok(individual::current(
        &hot.analysis,
        &known(rows),
        shown.parameters.get("nfv"),
        ext_virtual_links,
        ext_managed_virtual_links,
    )
    .map_err(|err| StepFailure::input("plan", err.to_string()))?)
}

/// Stores the operation's plan (`plan_json`, with its `stages`) once; with an adjusted HOT, a
/// `HOT_ADJUSTED` event whose evidence is what changes: the merge patches and the VNFCs created,
/// removed and healed. A plan whose stages are already stored is kept (resume and RETRY follow
/// it); a plan stored by an earlier version without stages gets them. Returns the stored plan
/// text.
pub(super) fn store<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    plan_json: &str,
    adjusted: Option<&AdjustedPlan>,
    steps_total: usize,
) -> Result<String, EngineError> {
    let stored = e.db.write(|tx| {
        let before = tx.reader().operation_plan(&op.id)?;
        let has_stages = before
            .as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .is_some_and(|v| {
                v.get("stages")
                    .and_then(|s| s.as_array())
                    .is_some_and(|a| !a.is_empty())
            });
        if has_stages && let Some(text) = before {
            return Ok(text);
        }
        tx.replace_operation_plan(&op.id, plan_json)?;
        tx.set_steps_total(&op.id, steps_total as i64)?;
        if let (None, Some(a)) = (&before, adjusted) {
            let (message, evidence) = hot_adjusted_event(a);
            tx.append_event(
                &NewEvent {
                    kind: EventKind::HotAdjusted,
                    vnf_instance_id: Some(&op.vnf_instance_id),
                    vnf_lcm_op_occ_id: Some(&op.id),
                    vnfc_id: None,
                    message: &message,
                    evidence: Some(&evidence),
                },
                now(),
            )?;
            for w in &a.warnings {
                tracing::warn!(warning = %w, "adjusted HOT");
            }
        }
        Ok(plan_json.to_owned())
    })?;
    Ok(stored)
}

/// Stores the plan of a ROLLBACK (`plan_json`: the operation's plan with its `rollback` decided)
/// with `steps_total` = the rollback's stages, and a `HOT_ADJUSTED` event for the documents it
/// sends (what it removes). Called once: the caller decides only when no rollback is stored.
pub(super) fn store_rollback<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    plan_json: &str,
    adjusted: &AdjustedPlan,
    steps_total: usize,
) -> Result<(), EngineError> {
    e.db.write(|tx| {
        tx.replace_operation_plan(&op.id, plan_json)?;
        tx.set_steps_total(&op.id, steps_total as i64)?;
        let (message, evidence) = hot_adjusted_event(adjusted);
        tx.append_event(
            &NewEvent {
                kind: EventKind::HotAdjusted,
                vnf_instance_id: Some(&op.vnf_instance_id),
                vnf_lcm_op_occ_id: Some(&op.id),
                vnfc_id: None,
                message: &format!("rollback: {message}"),
                evidence: Some(&evidence),
            },
            now(),
        )
    })?;
    Ok(())
}

fn hot_adjusted_event(adjusted: &AdjustedPlan) -> (String, String) {
    let evidence = json!({
        "templatePatch": adjusted.template_patch,
        "nfvPatch": adjusted.nfv_patch,
        "created": adjusted.created,
        "removed": adjusted.removed,
        "healed": adjusted.healed,
        "imageChanged": adjusted.image_changed,
        "warnings": adjusted.warnings,
    })
    .to_string();
    let message = format!(
        "adjusted HOT: created [{}], removed [{}], healed [{}]",
        adjusted.created.join(", "),
        adjusted.removed.join(", "),
        adjusted.healed.join(", ")
    );
    (message, evidence)
}

/// The Heat documents of the adjusted HOT: the full adjusted template, the nested templates and
/// the full `nfv` (create, or the body of a full update).
pub(super) fn document(hot: &Hot, adjusted: &AdjustedPlan) -> StackDocument {
    let mut parameters = serde_json::Map::new();
    parameters.insert("nfv".into(), adjusted.nfv.clone());
    StackDocument {
        template: adjusted.template.clone(),
        files: hot.base.files.clone(),
        parameters,
    }
}

/// The individually managed VNFCs (`<VDU>-<index>`) the adjusted HOT plans: what
/// `heat.read_vnfcs` must find afterwards.
pub(super) fn planned(adjusted: &AdjustedPlan) -> BTreeSet<String> {
    adjusted
        .vnfcs
        .iter()
        .filter(|c| c.parameters.is_some())
        .map(|c| c.name())
        .collect()
}
