//! `vnfkeeper events VNF [--since TIME] [-o table|json|yaml]`: the timeline of one VNF instance (what the
//! store's `ReaderRef::timeline` merges from events, intake records and the step journal),
//! as a table or as a JSON (or YAML) array whose field names are stable (README "vnfkeeper events").

use anyhow::{anyhow, bail};
use comfy_table::{Table, presets::NOTHING};
use serde_json::{Value, json};

use crate::config::Settings;
use crate::describe::{Output, submitter_json, submitter_text};
use crate::store::{IntakeFacts, StepFacts, Store, TimelineEntry};

use vnfkeeper_core::model::{Timestamp, VnfInstanceId, pause};

/// Prints the timeline of `vnf_instance_id` read through a read-only connection: entries at or
/// after `since` (an RFC 3339 time, or a span back from `now` such as `90m`, `2h`, `1d`), as an
/// aligned table (times RFC 3339 UTC with milliseconds and `Z`) or, as `out` asks (`json`,
/// `yaml`, `value`, `-c`), an array of [`entry_json`] objects. Errors: a `since`
/// of neither form; a VNF instance nothing in the database names (`vnfkeeper status` lists
/// the instances); the store's.
pub fn run(
    settings: &Settings,
    vnf_instance_id: &str,
    since: Option<&str>,
    out: &Output,
    now: Timestamp,
) -> anyhow::Result<()> {
    let since = since
        .map(|s| pause::parse_since(s, now).map_err(|e| anyhow!("--since {e}")))
        .transpose()?;
    let db = Store::open_read_only(&settings.database)?;
    let Some(entries) = db
        .queries()
        .timeline(&VnfInstanceId::from(vnf_instance_id), since)?
    else {
        bail!(
            "no VNF instance {vnf_instance_id:?} in {}: no instance, event or request names it \
             (`vnfkeeper status` lists the instances)",
            settings.database.display()
        );
    };
    if !out.is_table() {
        let list: Vec<Value> = entries.iter().map(entry_json).collect();
        return crate::describe::emit(&Value::Array(list), out);
    }
    let mut t = Table::new();
    t.load_preset(NOTHING)
        .set_header(["TIME", "KIND", "OPERATION", "VNFC", "MESSAGE"]);
    for e in &entries {
        let op = match (&e.operation, &e.operation_id) {
            (Some(o), Some(id)) => format!("{o} {id}"),
            (None, Some(id)) => id.to_string(),
            _ => String::new(),
        };
        t.add_row([
            e.at.0.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            e.kind.clone(),
            op,
            e.vnfc_id
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            human_message(e),
        ]);
    }
    if entries.is_empty() {
        outln!("no entries for VNF instance {vnf_instance_id}");
    } else {
        outln!("{t}");
    }
    Ok(())
}

/// The message on one line (a step's detail may hold a stderr tail), with the spool file of a
/// request entry when the message does not name it, and `(every VNF instance)` for a global
/// pause.
fn human_message(e: &TimelineEntry) -> String {
    let mut m: String = e
        .message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ⏎ ");
    if let Some(f) = e.intake.as_ref().and_then(|i| i.file_name.as_deref())
        && !m.contains(f)
    {
        m.push_str(&format!(" (spool file {f})"));
    }
    if let Some(s) = e.intake.as_ref().and_then(|i| i.submitter.as_ref()) {
        m.push_str(&format!(" submitted by {}", submitter_text(s)));
    }
    if e.vnf_instance_id.is_none() {
        m.push_str(" (every VNF instance)");
    }
    m
}

/// One entry of `events --json`; every field is always present (`null` when it does not apply).
/// Field names are stable (README "vnfkeeper events"): `at` (RFC 3339 UTC, microseconds),
/// `source` (`event`, `intake`, `step`), `eventId`, `kind`, `vnfInstanceId` (`null`: a pause of
/// every instance), `vnfLcmOpOccId`, `operation`, `vnfcInstanceId`, `message`, `evidence` (the
/// event's evidence as JSON, not as a string), `intake` ([`intake_json`]), `step`
/// ([`step_json`]).
pub fn entry_json(e: &TimelineEntry) -> Value {
    json!({
        "at": e.at.to_rfc3339(),
        "source": e.source.as_str(),
        "eventId": e.event_id,
        "kind": e.kind,
        "vnfInstanceId": e.vnf_instance_id,
        "vnfLcmOpOccId": e.operation_id,
        "operation": e.operation.map(|o| o.as_str()),
        "vnfcInstanceId": e.vnfc_id,
        "message": e.message,
        "evidence": e.evidence,
        "intake": e.intake.as_ref().map(intake_json),
        "step": e.step.as_ref().map(step_json),
    })
}

/// `{id, fileName, outcome, requestId, problem, submitter}`: the intake record of a request
/// entry; `problem` is the stored ProblemDetails (`status`, `title`, `detail`, `errors`) of a
/// rejection, else `null`; `submitter` ([`submitter_json`]).
pub fn intake_json(i: &IntakeFacts) -> Value {
    json!({
        "id": i.id,
        "fileName": i.file_name,
        "outcome": i.outcome.as_str(),
        "requestId": i.request_id,
        "problem": i.problem,
        "submitter": submitter_json(i.submitter.as_ref()),
    })
}

/// `{stageKey, stepNo, name, host, state, attempts, startedAt, finishedAt, exitStatus,
/// detail}`: the journal row of a step entry (its last attempt; `host` is `""` for a cloud
/// step, `finishedAt` `null` while it runs).
pub fn step_json(s: &StepFacts) -> Value {
    json!({
        "stageKey": s.stage_key,
        "stepNo": s.step_no,
        "name": s.name,
        "host": s.host,
        "state": s.state.as_str(),
        "attempts": s.attempts,
        "startedAt": s.started_at.to_rfc3339(),
        "finishedAt": s.finished_at.map(Timestamp::to_rfc3339),
        "exitStatus": s.exit_status,
        "detail": s.detail,
    })
}
