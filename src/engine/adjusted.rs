//! The I/O side of individual VNFC management (C4) shared by INSTANTIATE, SCALE and HEAL: whether
//! the flavour's BaseHOT takes the adjusted-HOT path, the instance's current state for
//! [`plan::individual::current`] (VNFC rows, and the stack's `nfv` as Heat shows it), storing the
//! decision once with an audit event, sending Heat the full adjusted documents, and checking that
//! the stack holds exactly the planned VNFCs afterwards. The decisions themselves are pure
//! (`plan::individual`, `heat`).

use std::collections::BTreeSet;

use serde_json::json;

use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, StackCreate, StackRef};
use crate::heat::{Analysis, Current};
use crate::intake::wire::sol003::ExtVirtualLinkData;
use crate::package::{BaseHot, VnfPackage};
use crate::plan::individual::{self, AdjustedPlan, Known};
use crate::store::{NewEvent, OperationRow, VnfcRow};

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
    )
    .map_err(|err| StepFailure::input("plan", err.to_string()))?)
}

/// Stores `plan_json` (the operation's plan, holding `adjusted`) once, with a `HOT_ADJUSTED`
/// event whose evidence is what changes: the merge patches and the VNFCs created, removed and
/// healed. A plan already stored is kept (resume and RETRY follow it).
pub(super) fn store<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    plan_json: &str,
    adjusted: &AdjustedPlan,
) -> Result<(), EngineError> {
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
    e.db.write(|tx| {
        if tx.reader().operation_plan(&op.id)?.is_some() {
            return Ok(());
        }
        tx.set_operation_plan(&op.id, plan_json)?;
        tx.append_event(
            &NewEvent {
                kind: "HOT_ADJUSTED",
                vnf_instance_id: Some(&op.vnf_instance_id),
                vnf_lcm_op_occ_id: Some(&op.id),
                vnfc_id: None,
                message: &message,
                evidence: Some(&evidence),
            },
            now(),
        )
    })?;
    for w in &adjusted.warnings {
        tracing::warn!(warning = %w, "adjusted HOT");
    }
    Ok(())
}

/// The Heat request carrying the full adjusted template, the nested templates and the full
/// `nfv` (create, or the body of a full update).
pub(super) fn stack_request<C: Cloud>(
    e: &Engine<C>,
    stack_name: &str,
    hot: &Hot,
    adjusted: &AdjustedPlan,
) -> StackCreate {
    let mut parameters = serde_json::Map::new();
    parameters.insert("nfv".into(), adjusted.nfv.clone());
    StackCreate {
        stack_name: stack_name.to_owned(),
        template: adjusted.template.clone(),
        files: hot.base.files.clone(),
        parameters,
        timeout_mins: Some((e.limits.stack_timeout.as_secs() / 60).max(1) as u32),
        disable_rollback: true,
    }
}

/// Cloud step `heat.update`: a full update (PUT) with the adjusted documents. Heat keeps every
/// resource whose definition is unchanged (the other VNFCs' servers), creates the new
/// `<VDU>-<index>` resources, deletes the removed ones and replaces resources marked unhealthy.
pub(super) async fn update<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    no: i64,
    stack: &StackRef,
    hot: &Hot,
    adjusted: &AdjustedPlan,
) -> Result<(), EngineError> {
    let req = stack_request(e, &stack.name, hot, adjusted);
    e.cloud_step(
        op,
        no,
        "heat.update",
        || e.cloud.update_stack(stack, &req),
        |_| Ok(()),
    )
    .await
}

/// After an update: the stack holds exactly the planned individually managed VNFCs
/// (`<VDU>-<index>` read from the nested stacks' parent resources).
pub(super) fn verify(rows: &[VnfcRow], adjusted: &AdjustedPlan) -> Result<(), StepFailure> {
    let planned: BTreeSet<String> = adjusted
        .vnfcs
        .iter()
        .filter(|c| c.parameters.is_some())
        .map(|c| c.name())
        .collect();
    let found: BTreeSet<String> = rows
        .iter()
        .filter_map(|r| {
            r.vnfc_index
                .map(|i| crate::heat::template::indexed(&r.vdu_id, i as u32))
        })
        .collect();
    if planned != found {
        return Err(StepFailure::input(
            "heat.read_vnfcs",
            format!(
                "the stack holds VNFCs [{}], the adjusted HOT plans [{}]",
                found.into_iter().collect::<Vec<_>>().join(", "),
                planned.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    Ok(())
}
