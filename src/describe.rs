//! The one-object views: `vnfkeeper status VNF` (one VNF instance with each VNFC's health as
//! last recorded) and `vnfkeeper ops show ID` (one operation occurrence in the shape of SOL003
//! `VnfLcmOpOcc`, ETSI GS NFV-SOL 003 §5.5.2.13), and the output formats of the read commands.
//!
//! Both only read what the store records; a fact it does not record is `null` in JSON/YAML
//! and `unknown` (or `-`) in a table, never guessed. Times are RFC 3339 UTC with `Z`; tables
//! add the age relative to now.

use std::collections::BTreeMap;

use comfy_table::{Table, presets::NOTHING};
use serde_json::{Value, json};
use vnfkeeper_core::artifact::Artifact;
use vnfkeeper_core::model::{LcmOperationType, OpOccId, Timestamp, VnfInstanceId};

use crate::config::Settings;
use crate::store::{JournalRow, LastDecision, OperationRow, ReconcileStateRow, Store, Submitter};

/// `-o`: how a read command prints. `table` for people; `json` and `yaml` carry the same
/// document (field names stable, SOL003's where SOL003 has the field); `value` prints only the
/// values, for shell scripts (the openstack CLI's `-f value`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns (the default).
    #[default]
    Table,
    /// Pretty-printed JSON.
    Json,
    /// YAML (the same document as `json`).
    Yaml,
    /// The values only: a list prints one line per entry with its fields' values separated by
    /// a space, one object prints one line per field; a string as it is, `null` as an empty
    /// string, anything else as compact JSON.
    Value,
}

impl OutputFormat {
    /// The format asked for: `-o` when given, else `json` for the older `--json`, else `table`.
    pub fn pick(output: Option<OutputFormat>, json: bool) -> Self {
        output.unwrap_or(if json {
            OutputFormat::Json
        } else {
            OutputFormat::Table
        })
    }
}

/// The output options every read command takes: `--json`, `-o FORMAT`, `-c COLUMN`…
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// JSON instead of a table (the same as `-o json`).
    #[arg(long)]
    pub json: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<OutputFormat>,
    /// Show only this field (repeatable, in the order given), by its name in the JSON output,
    /// e.g. `-c id -c operationState`; a table then has these columns.
    #[arg(short = 'c', long = "column", value_name = "COLUMN")]
    pub columns: Vec<String>,
}

impl OutputArgs {
    /// What was asked for.
    pub fn output(&self) -> Output {
        Output {
            format: OutputFormat::pick(self.output, self.json),
            columns: self.columns.clone(),
        }
    }
}

/// How a read command prints: a format and, when not empty, the fields to show (`-c`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// `-o`.
    pub format: OutputFormat,
    /// `-c`, in the order given.
    pub columns: Vec<String>,
}

impl Output {
    /// Whether the command prints its own table: `-o table` without `-c` (with `-c` the
    /// selected fields of the JSON document are tabulated instead, by [`emit`]).
    pub fn is_table(&self) -> bool {
        self.format == OutputFormat::Table && self.columns.is_empty()
    }
}

/// Prints `doc` (a list of objects, or one object) as `out` asks (never its own table: see
/// [`Output::is_table`]): only the `-c` fields when there are some, then as JSON, YAML, values,
/// or a table of the selected fields. Errors: a `-c` field no entry has (naming the fields
/// there are); serialization's.
pub fn emit(doc: &Value, out: &Output) -> anyhow::Result<()> {
    let doc = select(doc, &out.columns)?;
    match out.format {
        OutputFormat::Yaml => {
            let text = serde_yaml_ng::to_string(&doc)?;
            outln!("{}", text.trim_end());
        }
        OutputFormat::Json => {
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputFormat::Value => match &doc {
            Value::Array(rows) => {
                for row in rows {
                    let cells: Vec<String> = match row {
                        Value::Object(m) => m.values().map(value_text).collect(),
                        other => vec![value_text(other)],
                    };
                    outln!("{}", cells.join(" "));
                }
            }
            Value::Object(m) => {
                for v in m.values() {
                    outln!("{}", value_text(v));
                }
            }
            other => outln!("{}", value_text(other)),
        },
        OutputFormat::Table => match &doc {
            Value::Array(rows) => {
                let mut t = Table::new();
                t.load_preset(NOTHING).set_header(
                    out.columns
                        .iter()
                        .map(|c| c.to_uppercase())
                        .collect::<Vec<_>>(),
                );
                for row in rows {
                    t.add_row(
                        out.columns
                            .iter()
                            .map(|c| value_text(&row[c.as_str()]))
                            .collect::<Vec<_>>(),
                    );
                }
                outln!("{t}");
            }
            Value::Object(m) => {
                let mut t = table(["FIELD", "VALUE"]);
                for (k, v) in m {
                    t.add_row([k.clone(), value_text(v)]);
                }
                outln!("{t}");
            }
            other => outln!("{}", value_text(other)),
        },
    }
    Ok(())
}

/// A value as `-o value` and a `-c` table print it: a string as it is, `null` empty, anything
/// else compact JSON.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `doc` with only the fields `columns` (all when empty), in their order: of each entry of a
/// list, or of one object. Errors: a field that no entry has (an empty list has every field).
fn select(doc: &Value, columns: &[String]) -> anyhow::Result<Value> {
    if columns.is_empty() {
        return Ok(doc.clone());
    }
    let objects: Vec<&serde_json::Map<String, Value>> = match doc {
        Value::Array(rows) => rows.iter().filter_map(Value::as_object).collect(),
        Value::Object(m) => vec![m],
        _ => Vec::new(),
    };
    if let Some(first) = objects.first() {
        for c in columns {
            if !objects.iter().any(|o| o.contains_key(c)) {
                anyhow::bail!(
                    "no column {c:?}; the columns are: {}",
                    first.keys().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
    }
    let pick = |m: &serde_json::Map<String, Value>| {
        Value::Object(
            columns
                .iter()
                .map(|c| (c.clone(), m.get(c).cloned().unwrap_or(Value::Null)))
                .collect(),
        )
    };
    Ok(match doc {
        Value::Array(rows) => Value::Array(
            rows.iter()
                .map(|r| r.as_object().map_or(Value::Null, pick))
                .collect(),
        ),
        Value::Object(m) => pick(m),
        other => other.clone(),
    })
}

/// A time for a table: RFC 3339 (`Z`, whole seconds) and its age, e.g.
/// `2026-11-27T06:24:33Z (5m ago)`.
pub fn table_time(t: Timestamp, now: Timestamp) -> String {
    let secs = (now.0 - t.0).num_seconds();
    let text = t.0.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (n, ahead) = if secs < 0 {
        (-secs, true)
    } else {
        (secs, false)
    };
    let age = match n {
        0..60 => format!("{n}s"),
        60..3600 => format!("{}m", n / 60),
        3600..86400 => format!("{}h", n / 3600),
        _ => format!("{}d", n / 86400),
    };
    if ahead {
        format!("{text} (in {age})")
    } else {
        format!("{text} ({age} ago)")
    }
}

fn rfc3339(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
}

fn table<const N: usize>(header: [&str; N]) -> Table {
    let mut t = Table::new();
    t.load_preset(NOTHING).set_header(header);
    t
}

/// Opens the database read-only (see `Store::open_read_only`).
fn reader(settings: &Settings) -> anyhow::Result<crate::store::Reader> {
    Ok(Store::open_read_only(&settings.database)?)
}

/// A VNFC's probe verdict from the reconcile loop's memory: `FAILING` (consecutive failed
/// probes, counted since the first of them), `NOT_FAILING` (the loop observed the VNFC and
/// holds no failed probe; a cloud-only pass does not probe, so this is not proof of a passing
/// probe), `UNKNOWN` (never observed).
pub(crate) fn probe_verdict(m: Option<&ReconcileStateRow>) -> &'static str {
    match m {
        None => "UNKNOWN",
        Some(m) if m.probe_failures > 0 => "FAILING",
        Some(_) => "NOT_FAILING",
    }
}

/// Since when the VNFC has been failing (the earlier of its first failed cloud observation
/// and its first failed probe, while they are counted); `None` when no failure is counted.
pub(crate) fn unhealthy_since(m: Option<&ReconcileStateRow>) -> Option<Timestamp> {
    let m = m?;
    let cloud = (m.cloud_failures > 0)
        .then_some(m.cloud_first_failure_at)
        .flatten();
    let probe = (m.probe_failures > 0)
        .then_some(m.probe_first_failure_at)
        .flatten();
    match (cloud, probe) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `RECONCILE_DEFERRED_GRACE` → `DEFERRED_GRACE` (the `decision` of the view
/// `reconcile_decisions`); other kinds as they are.
fn decision_name(kind: &str) -> &str {
    kind.strip_prefix("RECONCILE_").unwrap_or(kind)
}

fn decision_json(d: &LastDecision) -> Value {
    json!({
        "at": d.at.to_rfc3339(),
        "decision": decision_name(&d.kind),
        "reason": d.reason,
        "vnfLcmOpOccId": d.vnf_lcm_op_occ_id,
        "evidence": d.evidence,
    })
}

/// What `status VNF` shows of one instance: its JSON document (the `-o json` output, also what
/// the daemon's status page draws) and the typed facts its table prints.
#[derive(Debug)]
pub struct VnfView {
    /// The document: instance facts, cluster endpoint, Kubernetes VIM (never its token),
    /// pause, operations, last VNF decision and `vnfcs` (one object per VNFC, see `vnfc_rows`).
    pub doc: Value,
    inst: crate::store::InstanceRow,
    summary: Option<crate::store::OperationSummary>,
    pause: Option<vnfkeeper_core::model::MaintenancePause>,
    vnf_decision: Option<LastDecision>,
    rows: Vec<Value>,
}

/// Reads one instance's [`VnfView`] through `q` at `now`; `state_dir` is the directory of the
/// database, where the engine keeps the cluster's artifacts (admin kubeconfig, VIM). `None`: no
/// such instance. Work: the instance list, its VNFCs, the reconcile memory, its last decisions,
/// the newest operation per instance and the pauses (what `status` reads), and two small files.
/// Errors: the store's.
pub fn vnf_view(
    q: crate::store::ReaderRef<'_>,
    state_dir: Option<&std::path::Path>,
    vnf: &str,
    now: Timestamp,
) -> anyhow::Result<Option<VnfView>> {
    let Some(inst) = q.instances()?.into_iter().find(|i| i.id == vnf) else {
        return Ok(None);
    };
    let vnf_id = VnfInstanceId::from(vnf);
    let vnfcs = q.vnfcs(&vnf_id)?;
    let memory: BTreeMap<String, ReconcileStateRow> = q
        .reconcile_states()?
        .into_iter()
        .filter(|((v, _), _)| v == vnf)
        .map(|((_, c), m)| (c, m))
        .collect();
    let mut decisions = q.last_decisions(vnf)?;
    let synced = q.vnfc_synced_at(vnf)?;
    let summary = q.operation_summaries()?.remove(vnf);
    let pauses = q.maintenance_pauses()?;
    let pause = vnfkeeper_core::model::pause::in_force(&pauses, &vnf_id, now).cloned();
    let kubeconfig = state_dir
        .and_then(|dir| std::fs::read_to_string(Artifact::AdminKubeconfig.path(dir, vnf)).ok());
    let endpoint = kubeconfig
        .as_deref()
        .and_then(vnfkeeper_core::artifact::kubeconfig_server);
    let vim = kubernetes_vim(state_dir, vnf, kubeconfig.as_deref(), endpoint.as_deref());
    let vnf_decision = decisions.remove(&None);

    let rows = vnfc_rows(&vnfcs, &memory, &mut decisions, &synced);
    let doc = json!({
        "id": inst.id,
        "origin": inst.origin.as_str(),
        "instantiationState": inst.instantiation_state.as_str(),
        "flavourId": inst.flavour_id,
        "vnfPackage": inst.vnf_package,
        "stackId": inst.stack_id,
        "createdAt": inst.created_at.to_rfc3339(),
        "updatedAt": inst.updated_at.to_rfc3339(),
        "clusterEndpoint": endpoint,
        "kubernetesVim": vim,
        "maintenancePause": pause.as_ref().map(vnfkeeper_core::policy::pause_json),
        "unfinishedOperations": summary.as_ref().map_or(0, |s| s.unfinished),
        "lastOperation": summary.as_ref().map(|s| json!({
            "id": s.last.id,
            "operation": s.last.operation.as_str(),
            "operationState": s.last.operation_state.as_str(),
            "stateEnteredTime": s.last.state_entered_time.to_rfc3339(),
        })),
        "lastVnfDecision": vnf_decision.as_ref().map(decision_json),
        "vnfcs": rows,
    });
    Ok(Some(VnfView {
        doc,
        inst,
        summary,
        pause,
        vnf_decision,
        rows,
    }))
}

/// `status VNF`: one instance and its VNFCs. Errors: no such instance (naming `status`), the
/// store's.
pub fn status_vnf(
    settings: &Settings,
    vnf: &str,
    out: &Output,
    now: Timestamp,
) -> anyhow::Result<()> {
    let db = reader(settings)?;
    let Some(view) = vnf_view(db.queries(), settings.database.parent(), vnf, now)? else {
        anyhow::bail!(
            "no VNF instance {vnf:?} in {} (`vnfkeeper status` lists them)",
            settings.database.display()
        );
    };
    let VnfView {
        doc,
        inst,
        summary,
        pause,
        vnf_decision,
        rows,
    } = view;
    let pause = pause.as_ref();
    if !out.is_table() {
        return emit(&doc, out);
    }

    let unknown = or_unknown;
    outln!("VNF instance:      {}", inst.id);
    outln!(
        "state:             {} (origin {})",
        inst.instantiation_state.as_str(),
        inst.origin
    );
    outln!("flavour:           {}", unknown(&doc["flavourId"]));
    outln!("stack:             {}", unknown(&doc["stackId"]));
    outln!("endpoint:          {}", unknown(&doc["clusterEndpoint"]));
    if let Some(v) = doc["kubernetesVim"].as_object() {
        outln!(
            "Kubernetes VIM:    {} (CA sha256 {}, bearer token {})",
            unknown(&v["name"]),
            unknown(&v["caCertSha256"]),
            unknown(&v["bearerToken"])
        );
    }
    outln!(
        "maintenance pause: {}",
        pause.map_or_else(|| "none".to_owned(), |p| p.describe())
    );
    match &summary {
        Some(s) => outln!(
            "last operation:    {} {} {} (entered {}); {} unfinished",
            s.last.id,
            s.last.operation,
            s.last.operation_state,
            table_time(s.last.state_entered_time, now),
            s.unfinished
        ),
        None => outln!("last operation:    none"),
    }
    if let Some(d) = &vnf_decision {
        outln!(
            "last VNF decision: {} at {}: {}",
            decision_name(&d.kind),
            table_time(d.at, now),
            d.reason
        );
    }
    print_vnfc_table(&rows, now);
    Ok(())
}

/// The cluster as a Kubernetes VIM, as kept under the state directory
/// ([`Artifact::KubernetesVim`]): its name, endpoint, the SHA-256 of its CA (from the admin
/// kubeconfig) and where its bearer token is kept — never the token. `None` when none is kept.
fn kubernetes_vim(
    state_dir: Option<&std::path::Path>,
    vnf: &str,
    kubeconfig: Option<&str>,
    endpoint: Option<&str>,
) -> Option<Value> {
    let path = Artifact::KubernetesVim.path(state_dir?, vnf);
    let vim = vnfkeeper_core::artifact::KubernetesVim::parse(&std::fs::read_to_string(&path).ok()?)
        .ok()?;
    Some(json!({
        "name": vim.name,
        "server": endpoint,
        "caCertSha256": kubeconfig.and_then(vnfkeeper_core::artifact::kubeconfig_ca_sha256),
        "bearerToken": format!("kept in {}", path.display()),
    }))
}

/// One `status VNF` object per VNFC of `vnfcs`: what the store recorded of it (reconcile's
/// memory and last decision, when its Nova status was read); `decisions` loses the ones used.
fn vnfc_rows(
    vnfcs: &[crate::store::VnfcRow],
    memory: &BTreeMap<String, ReconcileStateRow>,
    decisions: &mut BTreeMap<Option<String>, LastDecision>,
    synced: &BTreeMap<String, Timestamp>,
) -> Vec<Value> {
    let mut rows = Vec::new();
    for c in vnfcs {
        let m = memory.get(c.id.as_str());
        let d = decisions.get(&Some(c.id.as_str().to_owned()));
        let role = d
            .and_then(|d| d.evidence.as_ref())
            .and_then(|e| e.get("role"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        rows.push(json!({
            "id": c.id,
            "vduId": c.vdu_id,
            "index": c.vnfc_index,
            "role": role,
            "serverId": c.server_id,
            "ipAddress": c.ip_address,
            "novaStatus": c.server_status,
            "novaStatusObservedAt": rfc3339(synced.get(c.id.as_str()).copied()),
            "probeVerdict": probe_verdict(m),
            "probeFailures": m.map(|m| m.probe_failures),
            "cloudFailures": m.map(|m| m.cloud_failures),
            "unhealthySince": rfc3339(unhealthy_since(m)),
            "healAttempts": m.map(|m| m.heal_attempts),
            "lastHealAt": rfc3339(m.and_then(|m| m.last_heal_at)),
            "lastDecision": d.map(decision_json),
        }));
    }
    rows
}

/// A JSON value as a table cell: `unknown` for `null`, a string as it is, anything else as JSON.
fn or_unknown(v: &Value) -> String {
    match v {
        Value::Null => "unknown".to_owned(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// An RFC 3339 JSON time as a table time ([`table_time`]), `-` when absent.
fn cell_time(v: &Value, now: Timestamp) -> String {
    v.as_str()
        .and_then(|s| Timestamp::parse(s).ok())
        .map_or_else(|| "-".to_owned(), |t| table_time(t, now))
}

/// The VNFC table of `status VNF` from its `vnfcs` objects, then each last decision's reason.
fn print_vnfc_table(rows: &[Value], now: Timestamp) {
    let unknown = or_unknown;
    let time = |v: &Value| cell_time(v, now);
    let mut t = table([
        "VNFC",
        "VDU",
        "ROLE",
        "SERVER",
        "ADDRESS",
        "NOVA STATUS (OBSERVED)",
        "PROBE",
        "UNHEALTHY SINCE",
        "LAST DECISION",
    ]);
    for r in rows {
        let nova = format!(
            "{} ({})",
            unknown(&r["novaStatus"]),
            time(&r["novaStatusObservedAt"])
        );
        let decision = match r["lastDecision"].as_object() {
            Some(d) => {
                let op = d["vnfLcmOpOccId"]
                    .as_str()
                    .map(|o| format!(" -> {o}"))
                    .unwrap_or_default();
                format!(
                    "{}{op} at {}",
                    d["decision"].as_str().unwrap_or_default(),
                    time(&d["at"])
                )
            }
            None => "none recorded".into(),
        };
        t.add_row([
            unknown(&r["id"]),
            unknown(&r["vduId"]),
            unknown(&r["role"]),
            unknown(&r["serverId"]),
            unknown(&r["ipAddress"]),
            nova,
            unknown(&r["probeVerdict"]),
            time(&r["unhealthySince"]),
            decision,
        ]);
    }
    outln!("\n{t}");
    for r in rows {
        if let Some(reason) = r["lastDecision"]["reason"].as_str() {
            outln!("{}: {reason}", unknown(&r["id"]));
        }
    }
}

/// SOL003 `AffectedVnfc` (§5.5.3.2) entries of an operation, derived from what the store
/// records (see [`affected_vnfcs`]).
fn affected(id: &str, vdu: Option<&str>, change: &str, server: Option<&str>) -> Value {
    json!({
        "id": id,
        "vduId": vdu,
        "changeType": change,
        "computeResource": server.map(|s| json!({
            "resourceId": s,
            "vimLevelResourceType": "OS::Nova::Server",
        })),
    })
}

/// `resourceChanges.affectedVnfcs` of `op`, from what the store records:
/// - `ADDED`: VNFC rows of the instance created between the operation's start and the time it
///   reached a final state (now, while it runs): operations of one VNF run one at a time.
/// - `MODIFIED`: a HEAL's `vnfcInstanceId` targets (its request as stored).
/// - `REMOVED`: the VNFCs its plan required gone (`heat.read_vnfcs`' `absent`: SCALE_IN
///   victims); their rows are deleted, so `vduId` and `computeResource` are `null`.
///
/// Not derivable, hence absent: VNFCs a TERMINATE or rollback removed (the rows are deleted
/// with no record of their ids), VNFCs added then removed again later (their rows are gone),
/// and the VNFCs of a HEAL of the whole VNF (no `vnfcInstanceId`).
fn affected_vnfcs(
    op: &OperationRow,
    params: &Value,
    plan: Option<&Value>,
    vnfcs: &[crate::store::VnfcRow],
    now: Timestamp,
) -> Vec<Value> {
    let end = if op.operation_state.is_final() {
        op.state_entered_time
    } else {
        now
    };
    let mut out: Vec<Value> = vnfcs
        .iter()
        .filter(|c| c.created_at >= op.start_time && c.created_at <= end)
        .map(|c| {
            affected(
                c.id.as_str(),
                Some(&c.vdu_id),
                "ADDED",
                c.server_id.as_deref(),
            )
        })
        .collect();
    if op.operation == LcmOperationType::Heal {
        for id in params["vnfcInstanceId"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if out.iter().any(|a| a["id"] == id) {
                continue;
            }
            let row = vnfcs.iter().find(|c| c.id == id);
            out.push(affected(
                id,
                row.map(|c| c.vdu_id.as_str()),
                "MODIFIED",
                row.and_then(|c| c.server_id.as_deref()),
            ));
        }
    }
    let stages = plan
        .and_then(|p| p.get("stages"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for s in stages {
        let absent = s
            .pointer("/action/cloud/read_vnfcs/absent")
            .and_then(Value::as_array);
        for id in absent.into_iter().flatten().filter_map(Value::as_str) {
            if !out.iter().any(|a| a["id"] == id) {
                out.push(affected(id, None, "REMOVED", None));
            }
        }
    }
    out
}

fn stage_json(j: &JournalRow) -> Value {
    json!({
        "key": j.stage_key,
        "stepNo": j.step_no,
        "name": j.name,
        "host": (!j.host.is_empty()).then_some(&j.host),
        "state": j.state.as_str(),
        "attempts": j.attempts,
        "startedAt": rfc3339(j.started_at),
        "finishedAt": rfc3339(j.finished_at),
        "exitStatus": j.exit_status,
        "detail": j.detail,
    })
}

/// `ops show ID`: one operation as SOL003 `VnfLcmOpOcc` (§5.5.2.13: `id`, `operationState`,
/// `stateEnteredTime`, `startTime`, `vnfInstanceId`, `operation`, `isAutomaticInvocation`,
/// `operationParams` with every secret `"***"`, `isCancelPending`, `error` as ProblemDetails,
/// `resourceChanges.affectedVnfcs`), plus vnfkeeper's `origin`, `tackerOpOccId`, `requestId`,
/// `statusDetail` and `stages` (the step journal: each stage's state, attempts and times).
/// Errors: no such operation, the store's.
pub fn ops_show(settings: &Settings, id: &str, out: &Output, now: Timestamp) -> anyhow::Result<()> {
    let db = reader(settings)?;
    let q = db.queries();
    let op_id = OpOccId::from(id);
    let (Some(op), Some((stored, plan))) = (q.operation(&op_id)?, q.stored_request(id)?) else {
        anyhow::bail!(
            "no operation {id:?} in {} (`vnfkeeper ops` lists them)",
            settings.database.display()
        );
    };
    // Stored bodies hold "***" for every secret; splitting again is a no-op on them and masks
    // a body written before secrets were kept apart.
    let masked = crate::store::RequestBody::split(op.operation, &stored);
    let params: Value = serde_json::from_str(masked.stored())
        .unwrap_or_else(|_| Value::String(masked.stored().to_owned()));
    let plan: Option<Value> = plan.and_then(|p| serde_json::from_str(&p).ok());
    let vnfcs = q.vnfcs(&op.vnf_instance_id)?;
    let journal = q.journal(&op_id)?;
    // A task envelope's accepted intake row names the occurrence too: the first is the request.
    let intake = q.intake_of_operation(id)?;
    let doc = json!({
        "id": op.id,
        "operationState": op.operation_state.as_str(),
        "stateEnteredTime": op.state_entered_time.to_rfc3339(),
        "startTime": op.start_time.to_rfc3339(),
        "vnfInstanceId": op.vnf_instance_id,
        "operation": op.operation.as_str(),
        "isAutomaticInvocation": op.is_automatic_invocation,
        "operationParams": params,
        "isCancelPending": false,
        "error": op.error,
        "resourceChanges": {
            "affectedVnfcs": affected_vnfcs(&op, &params, plan.as_ref(), &vnfcs, now),
        },
        "origin": op.origin.as_str(),
        "tackerOpOccId": op.tacker_op_occ_id,
        "requestId": op.request_id,
        "statusDetail": op.status_detail,
        "intake": intake.as_ref().map(|i| json!({
            "id": i.id,
            "fileName": i.file_name,
            "committedAt": i.committed_at.to_rfc3339(),
            "submitter": submitter_json(i.submitter.as_ref()),
        })),
        "stages": journal.iter().map(stage_json).collect::<Vec<_>>(),
    });
    if !out.is_table() {
        return emit(&doc, out);
    }
    outln!("operation:       {} {}", op.id, op.operation);
    outln!("VNF instance:    {}", op.vnf_instance_id);
    outln!(
        "state:           {} (entered {})",
        op.operation_state,
        table_time(op.state_entered_time, now)
    );
    outln!("started:         {}", table_time(op.start_time, now));
    outln!(
        "automatic:       {}",
        if op.is_automatic_invocation {
            "yes"
        } else {
            "no"
        }
    );
    let origin = match &op.tacker_op_occ_id {
        Some(occ) => format!("{} ({occ})", op.origin),
        None => op.origin.to_string(),
    };
    outln!("origin:          {origin}");
    if let Some(r) = &op.request_id {
        outln!("request id:      {r}");
    }
    if let Some(i) = &intake {
        let who = i
            .submitter
            .as_ref()
            .map_or_else(|| "unknown".into(), submitter_text);
        outln!(
            "submitted:       {} by {who}, spool file {}",
            table_time(i.committed_at, now),
            i.file_name.as_deref().unwrap_or("unknown")
        );
    }
    if let Some(d) = &op.status_detail {
        outln!("detail:          {d}");
    }
    if let Some(e) = &op.error {
        outln!("error:           {} {}: {}", e.status, e.title, e.detail);
    }
    outln!("operationParams: {}", doc["operationParams"]);
    print_changes_and_stages(&doc, &journal, now);
    Ok(())
}

/// The affected VNFCs (from `doc`'s `resourceChanges`) and the stages of `ops show`'s table.
fn print_changes_and_stages(doc: &Value, journal: &[JournalRow], now: Timestamp) {
    let mut changes = table(["AFFECTED VNFC", "VDU", "CHANGE", "SERVER"]);
    for a in doc["resourceChanges"]["affectedVnfcs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let s = |v: &Value| v.as_str().unwrap_or("unknown").to_owned();
        changes.add_row([
            s(&a["id"]),
            s(&a["vduId"]),
            s(&a["changeType"]),
            s(&a["computeResource"]["resourceId"]),
        ]);
    }
    if changes.row_count() > 0 {
        outln!("\n{changes}");
    } else {
        outln!("\naffected VNFCs:  none recorded");
    }
    let mut stages = table(["#", "STAGE", "STATE", "ATTEMPTS", "STARTED", "FINISHED"]);
    for j in journal {
        let t = |t: Option<Timestamp>| t.map_or_else(|| "-".to_owned(), |t| table_time(t, now));
        stages.add_row([
            j.step_no.to_string(),
            j.stage_key.as_str().to_owned(),
            j.state.as_str().to_owned(),
            j.attempts.to_string(),
            t(j.started_at),
            t(j.finished_at),
        ]);
    }
    if stages.row_count() > 0 {
        outln!("\n{stages}");
    }
}

/// `{uid, name, sudoUser, file}`: who submitted a spool file — its owner's uid and user name
/// (`null` when the password database had none), `SUDO_USER` of a root-owned file's submitting
/// command, and the operator's file name as the command labelled it (`null` for a file not
/// submitted by vnfkeeper's CLI) — or `null` when not recorded (before V19, not from the spool).
pub fn submitter_json(s: Option<&Submitter>) -> Value {
    s.map_or(
        Value::Null,
        |s| json!({"uid": s.uid, "name": s.name, "sudoUser": s.sudo_user, "file": s.file}),
    )
}

/// `alice (uid 1000)`, `root (uid 0) via sudo from alice`, plus `, file scale.json` when the
/// operator's file name is known.
pub fn submitter_text(s: &Submitter) -> String {
    let mut t = format!("{} (uid {})", s.name.as_deref().unwrap_or("?"), s.uid);
    if let Some(u) = &s.sudo_user {
        t.push_str(&format!(" via sudo from {u}"));
    }
    if let Some(f) = &s.file {
        t.push_str(&format!(", file {f}"));
    }
    t
}
