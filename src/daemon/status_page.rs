//! The read-only status page (`[metrics] status_page = true`), served on the metrics listener:
//!
//! - `GET /status`: the fleet — the state gauges' counts, every VNF instance with its state,
//!   VNFCs, unhealthy VNFCs, unfinished operations, last operation and maintenance pause, each
//!   VNFC's health (Nova status, probe verdict, unhealthy since) and the operations that failed
//!   (`FAILED_TEMP`, waiting for an operator; an instance whose newest operation is `FAILED` or
//!   `ROLLED_BACK`);
//! - `GET /status/vnf?id=ID[&hours=N]`: one VNF instance as `vnfkeeper status VNF` shows it, and
//!   its timeline of the last `N` hours (default 24, 1 to 168) drawn as an SVG picture with one
//!   lane each for operations (a bar per operation, coloured by the last state seen), steps,
//!   heals, faults, reconcile's probe verdicts and decisions, and maintenance pauses; then the
//!   newest entries as a table.
//!
//! Plain server-rendered HTML and inline SVG (maud, which escapes every interpolated value), no
//! script (`Content-Security-Policy: default-src 'none'` allows none), no form, no write action:
//! the routes answer `GET` (and `HEAD`) only, any other method 405. The pages read the store as
//! `status`, `status VNF` and `events` do (`describe::vnf_view`, `ReaderRef::timeline`), on the
//! daemon's shared connection (`Db::with`), and show what those commands show — never a request
//! body, a token or a password. Work per request is bounded: at most [`MAX_ROWS`] rows per
//! table, a timeline window of at most [`MAX_HOURS`] hours of which the newest
//! [`MAX_DRAWN`] entries are drawn and [`MAX_LISTED`] listed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;
use vnfkeeper_core::model::{
    EventKind, LcmOperationType, OperationState, StepState, Timestamp, VnfInstanceId, pause,
};

use crate::store::{Db, OperationRow, ReaderRef, TimelineEntry};

/// Most rows of one table on a page (instances, VNFCs, failed operations).
pub const MAX_ROWS: usize = 500;
/// Longest timeline window, in hours (`hours=`).
pub const MAX_HOURS: i64 = 168;
/// Default timeline window, in hours.
pub const DEFAULT_HOURS: i64 = 24;
/// Most timeline entries drawn (the newest).
pub const MAX_DRAWN: usize = 2000;
/// Most timeline entries listed under the picture (the newest).
pub const MAX_LISTED: usize = 100;
/// Longest VNF instance id looked up (longer: 404 without a read).
const MAX_ID_LEN: usize = 256;
/// Longest message shown in a cell or a tooltip, in characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// What the pages read: the daemon's store and the directory of the database (where the engine
/// keeps the cluster's artifacts; for the cluster endpoint).
#[derive(Clone)]
struct PageState {
    db: Db,
    state_dir: Option<PathBuf>,
}

/// The routes `GET /status` and `GET /status/vnf` (axum answers `HEAD` like `GET` and any other
/// method with 405). `state_dir`: the directory of the database.
pub fn router(db: Db, state_dir: Option<PathBuf>) -> Router {
    Router::new()
        .route("/status", get(fleet))
        .route("/status/vnf", get(vnf))
        .with_state(PageState { db, state_dir })
}

/// An HTML answer with the headers every page carries: no script, no framing, no caching, no
/// referrer, no content sniffing.
fn page(status: StatusCode, body: Markup) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'none'; frame-ancestors 'none'",
                ),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ],
        body.into_string(),
    )
        .into_response()
}

/// An error page: `title` and `detail` (escaped).
fn error_page(status: StatusCode, title: &str, detail: &str) -> Response {
    page(
        status,
        layout(
            title,
            html! {
                p { (detail) }
                p { a href="/status" { "the fleet" } }
            },
        ),
    )
}

/// A store error: logged, answered 500 without its text.
fn store_error(e: &dyn std::fmt::Display) -> Response {
    tracing::error!(error = %e, "status page: cannot read the database");
    error_page(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Cannot read the database",
        "The daemon's journal says why.",
    )
}

const STYLE: &str = "body{font-family:'DejaVu Sans',sans-serif;font-size:13px;margin:16px;color:#222}\
h1{font-size:20px}h2{font-size:16px;margin-top:24px}\
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}\
th{background:#eee}.ok{color:#1a7f37}.bad{color:#c62828;font-weight:bold}.warn{color:#b26a00}\
.muted{color:#777}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:bold}dd{margin:0}\
svg text{font-family:'DejaVu Sans',sans-serif;font-size:11px}";

/// The page around `body`, titled `title`.
fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " — vnfkeeper" }
                style { (STYLE) }
            }
            body {
                h1 { (title) }
                (body)
            }
        }
    }
}

fn rfc3339(t: Timestamp) -> String {
    t.0.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `text` cut to [`MAX_MESSAGE_CHARS`] characters (with `…`), on one line.
fn short(text: &str) -> String {
    let one: String = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ⏎ ");
    if one.chars().count() > MAX_MESSAGE_CHARS {
        let mut s: String = one.chars().take(MAX_MESSAGE_CHARS).collect();
        s.push('…');
        s
    } else {
        one
    }
}

/// The link to one VNF's page (the id form-encoded in the query).
fn vnf_href(id: &str) -> String {
    let q: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("id", id)
        .finish();
    format!("/status/vnf?{q}")
}

/// The CSS class of an operation state: `ok`, `bad` (waits for a human or failed) or none.
fn state_class(s: OperationState) -> &'static str {
    match s {
        OperationState::Completed => "ok",
        OperationState::FailedTemp | OperationState::Failed => "bad",
        OperationState::RolledBack => "warn",
        _ => "",
    }
}

/// Everything the fleet page shows, read in one call on the shared connection.
struct Fleet {
    gauges: crate::store::StateGauges,
    instances: Vec<crate::store::InstanceRow>,
    summaries: BTreeMap<String, crate::store::OperationSummary>,
    vnfcs: BTreeMap<String, Vec<crate::store::VnfcRow>>,
    memory: std::collections::HashMap<(String, String), crate::store::ReconcileStateRow>,
    pauses: Vec<vnfkeeper_core::model::MaintenancePause>,
    failed_temp: Vec<OperationRow>,
}

fn read_fleet(q: ReaderRef<'_>, now: Timestamp) -> crate::store::Result<Fleet> {
    Ok(Fleet {
        gauges: q.state_gauges(now)?,
        instances: q.instances()?,
        summaries: q.operation_summaries()?,
        vnfcs: q.vnfcs_all()?,
        memory: q.reconcile_states()?,
        pauses: q.maintenance_pauses()?,
        failed_temp: q.operations_in_state(OperationState::FailedTemp, MAX_ROWS + 1)?,
    })
}

/// `GET /status`.
async fn fleet(State(st): State<PageState>) -> Response {
    let now = Timestamp(chrono::Utc::now());
    match st.db.with(|s| read_fleet(s.reader(), now)) {
        Ok(f) => page(StatusCode::OK, fleet_page(&f, now)),
        Err(e) => store_error(&e),
    }
}

/// "N more not shown" under a table cut at [`MAX_ROWS`].
fn more(total: usize) -> Markup {
    html! {
        @if total > MAX_ROWS {
            p.muted { (total - MAX_ROWS) " more not shown" }
        }
    }
}

fn fleet_page(f: &Fleet, now: Timestamp) -> Markup {
    let g = &f.gauges;
    let failed_temp: u64 = g
        .operations
        .iter()
        .filter(|((_, s), _)| *s == OperationState::FailedTemp)
        .map(|(_, n)| n)
        .sum();
    let unfinished: u64 = g.operations.values().sum();
    let unhealthy: u64 = g.unhealthy_vnfcs.values().sum();
    let finished_failed: Vec<&crate::store::OperationSummary> = f
        .summaries
        .values()
        .filter(|s| {
            matches!(
                s.last.operation_state,
                OperationState::Failed | OperationState::RolledBack
            )
        })
        .collect();
    let body = html! {
        p.muted { "Read-only view of the daemon's database at " (rfc3339(now)) ". Reload the page for newer facts." }
        table #summary {
            tr { th { "VNF instances" } th { "unfinished operations" } th { "FAILED_TEMP" } th { "unhealthy VNFCs" } th { "paused VNFs" } }
            tr {
                td { (f.instances.len()) }
                td { (unfinished) }
                td #failed-temp class=(if failed_temp > 0 { "bad" } else { "ok" }) { (failed_temp) }
                td #unhealthy-vnfcs class=(if unhealthy > 0 { "bad" } else { "ok" }) { (unhealthy) }
                td { (g.paused_vnfs) }
            }
        }
        h2 { "VNF instances" }
        @if f.instances.is_empty() {
            p.muted { "none" }
        } @else {
            table #instances {
                tr { th { "VNF instance" } th { "state" } th { "flavour" } th { "VNFCs" } th { "unhealthy" }
                     th { "unfinished ops" } th { "last operation" } th { "maintenance pause" } th { "origin" } }
                @for i in f.instances.iter().take(MAX_ROWS) {
                    @let id = i.id.as_str();
                    @let n_vnfcs = f.vnfcs.get(id).map_or(0, Vec::len);
                    @let bad = f.vnfcs.get(id).map_or(0, |cs| cs.iter().filter(|c| {
                        crate::describe::unhealthy_since(f.memory.get(&(id.to_owned(), c.id.to_string()))).is_some()
                    }).count());
                    @let summary = f.summaries.get(id);
                    @let pause = pause::in_force(&f.pauses, &VnfInstanceId::from(id), now);
                    tr.instance data-vnf=(id) {
                        td { a href=(vnf_href(id)) { (id) } }
                        td.state { (i.instantiation_state.as_str()) }
                        td { (i.flavour_id.as_deref().unwrap_or("-")) }
                        td { (n_vnfcs) }
                        td class=(if bad > 0 { "bad" } else { "" }) { (bad) }
                        td { (summary.map_or(0, |s| s.unfinished)) }
                        td {
                            @if let Some(s) = summary {
                                (s.last.operation.as_str()) " "
                                span class=(state_class(s.last.operation_state)) { (s.last.operation_state.as_str()) }
                                " " span.muted { (rfc3339(s.last.state_entered_time)) }
                            } @else { "-" }
                        }
                        td { (pause.map_or_else(|| "none".to_owned(), |p| p.describe())) }
                        td { (i.origin.as_str()) }
                    }
                }
            }
            (more(f.instances.len()))
        }
        h2 { "VNFC health" }
        @let all: Vec<(&str, &crate::store::VnfcRow)> = f.instances.iter()
            .flat_map(|i| f.vnfcs.get(i.id.as_str()).into_iter().flatten().map(move |c| (i.id.as_str(), c)))
            .collect();
        @if all.is_empty() {
            p.muted { "no VNFC" }
        } @else {
            table #vnfcs {
                tr { th { "VNF instance" } th { "VNFC" } th { "VDU" } th { "server" } th { "address" }
                     th { "Nova status" } th { "probe verdict" } th { "unhealthy since" } }
                @for (vnf, c) in all.iter().take(MAX_ROWS) {
                    @let m = f.memory.get(&((*vnf).to_owned(), c.id.to_string()));
                    @let verdict = crate::describe::probe_verdict(m);
                    @let since = crate::describe::unhealthy_since(m);
                    tr {
                        td { a href=(vnf_href(vnf)) { (vnf) } }
                        td { (c.id.as_str()) }
                        td { (c.vdu_id) }
                        td { (c.server_id.as_deref().unwrap_or("-")) }
                        td { (c.ip_address.as_deref().unwrap_or("-")) }
                        td class=(match c.server_status.as_deref() { Some("ACTIVE") => "ok", Some("ERROR") => "bad", _ => "" }) {
                            (c.server_status.as_deref().unwrap_or("unknown"))
                        }
                        td class=(if verdict == "FAILING" { "bad" } else { "" }) { (verdict) }
                        td class=(if since.is_some() { "bad" } else { "" }) { (since.map_or_else(|| "-".to_owned(), rfc3339)) }
                    }
                }
            }
            (more(all.len()))
        }
        h2 { "Failed operations" }
        @if f.failed_temp.is_empty() && finished_failed.is_empty() {
            p.ok { "none" }
        } @else {
            table #failed {
                tr { th { "operation" } th { "VNF instance" } th { "type" } th { "state" } th { "entered" } th { "detail" } }
                @for o in f.failed_temp.iter().take(MAX_ROWS).chain(finished_failed.iter().take(MAX_ROWS).map(|s| &s.last)) {
                    tr {
                        td { (o.id.as_str()) }
                        td { a href=(vnf_href(o.vnf_instance_id.as_str())) { (o.vnf_instance_id.as_str()) } }
                        td { (o.operation.as_str()) }
                        td class=(state_class(o.operation_state)) { (o.operation_state.as_str()) }
                        td { (rfc3339(o.state_entered_time)) }
                        td { (short(&operation_detail(o))) }
                    }
                }
            }
            @if f.failed_temp.len() > MAX_ROWS { p.muted { "more operations in FAILED_TEMP not shown" } }
            p.muted { "FAILED_TEMP waits for an operator: vnfkeeper retry|rollback|fail ID." }
        }
    };
    layout("vnfkeeper status", body)
}

/// What an operation's row says of why it failed: its error's title and detail, else its status
/// detail.
fn operation_detail(o: &OperationRow) -> String {
    match &o.error {
        Some(p) => format!("{}: {}", p.title, p.detail),
        None => o.status_detail.clone().unwrap_or_default(),
    }
}

/// `id` and `hours` of `GET /status/vnf`'s query. Errors: a missing `id`, an `hours` that is not
/// a whole number within 1..=[`MAX_HOURS`].
fn vnf_query(query: Option<&str>) -> Result<(String, i64), String> {
    let mut id = None;
    let mut hours = DEFAULT_HOURS;
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match k.as_ref() {
            "id" => id = Some(v.into_owned()),
            "hours" => {
                hours = v
                    .parse()
                    .ok()
                    .filter(|h| (1..=MAX_HOURS).contains(h))
                    .ok_or_else(|| format!("hours must be a whole number from 1 to {MAX_HOURS}"))?;
            }
            _ => {}
        }
    }
    Ok((id.ok_or("the query names no VNF instance (?id=…)")?, hours))
}

/// `GET /status/vnf?id=ID[&hours=N]`.
async fn vnf(State(st): State<PageState>, RawQuery(query): RawQuery) -> Response {
    let (id, hours) = match vnf_query(query.as_deref()) {
        Ok(q) => q,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "Bad request", &e),
    };
    let not_found = || {
        error_page(
            StatusCode::NOT_FOUND,
            "No such VNF instance",
            &format!("The database holds no VNF instance {id:?}."),
        )
    };
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return not_found();
    }
    let now = Timestamp(chrono::Utc::now());
    let since = Timestamp(now.0 - chrono::Duration::hours(hours));
    let read = st.db.with(|s| -> anyhow::Result<_> {
        let q = s.reader();
        let Some(view) = crate::describe::vnf_view(q, st.state_dir.as_deref(), &id, now)? else {
            return Ok(None);
        };
        let mut entries = q
            .timeline(&VnfInstanceId::from(id.as_str()), Some(since))?
            .unwrap_or_default();
        if entries.len() > MAX_DRAWN {
            entries.drain(..entries.len() - MAX_DRAWN);
        }
        Ok(Some((view.doc, entries)))
    });
    match read {
        Ok(Some((doc, entries))) => page(
            StatusCode::OK,
            vnf_page(&id, &doc, &entries, since, now, hours),
        ),
        Ok(None) => not_found(),
        Err(e) => store_error(&e),
    }
}

/// A JSON value as text: `-` for `null`, a string as it is, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn vnf_page(
    id: &str,
    doc: &Value,
    entries: &[TimelineEntry],
    since: Timestamp,
    now: Timestamp,
    hours: i64,
) -> Markup {
    let last = &doc["lastOperation"];
    let body = html! {
        p { a href="/status" { "← the fleet" } " · read at " (rfc3339(now)) }
        dl #facts {
            dt { "state" } dd #state { (text(&doc["instantiationState"])) }
            dt { "origin" } dd { (text(&doc["origin"])) }
            dt { "flavour" } dd { (text(&doc["flavourId"])) }
            dt { "VNF package" } dd { (text(&doc["vnfPackage"])) }
            dt { "Heat stack" } dd { (text(&doc["stackId"])) }
            dt { "cluster endpoint" } dd { (text(&doc["clusterEndpoint"])) }
            dt { "Kubernetes VIM" } dd { (text(&doc["kubernetesVim"]["name"])) }
            dt { "maintenance pause" } dd {
                @if doc["maintenancePause"].is_null() { "none" } @else { (text(&doc["maintenancePause"]["reason"])) " (by " (text(&doc["maintenancePause"]["pausedBy"])) ")" }
            }
            dt { "unfinished operations" } dd { (text(&doc["unfinishedOperations"])) }
            dt { "last operation" } dd {
                @if last.is_null() { "none" } @else {
                    (text(&last["id"])) " " (text(&last["operation"])) " "
                    span class=(OperationState::parse(last["operationState"].as_str().unwrap_or_default()).map_or("", state_class)) { (text(&last["operationState"])) }
                    " at " (text(&last["stateEnteredTime"]))
                }
            }
            dt { "last VNF decision" } dd {
                @if doc["lastVnfDecision"].is_null() { "none" } @else {
                    (text(&doc["lastVnfDecision"]["decision"])) ": " (short(&text(&doc["lastVnfDecision"]["reason"])))
                }
            }
        }
        h2 { "VNFCs" }
        @let vnfcs = doc["vnfcs"].as_array().map(Vec::as_slice).unwrap_or_default();
        @if vnfcs.is_empty() { p.muted { "none" } } @else {
            table #vnfcs {
                tr { th { "VNFC" } th { "VDU" } th { "role" } th { "server" } th { "address" } th { "Nova status" }
                     th { "probe verdict" } th { "unhealthy since" } th { "heal attempts" } th { "last decision" } }
                @for c in vnfcs.iter().take(MAX_ROWS) {
                    tr {
                        td { (text(&c["id"])) }
                        td { (text(&c["vduId"])) }
                        td { (text(&c["role"])) }
                        td { (text(&c["serverId"])) }
                        td { (text(&c["ipAddress"])) }
                        td class=(match c["novaStatus"].as_str() { Some("ACTIVE") => "ok", Some("ERROR") => "bad", _ => "" }) { (text(&c["novaStatus"])) }
                        td class=(if c["probeVerdict"] == "FAILING" { "bad" } else { "" }) { (text(&c["probeVerdict"])) }
                        td class=(if c["unhealthySince"].is_null() { "" } else { "bad" }) { (text(&c["unhealthySince"])) }
                        td { (text(&c["healAttempts"])) }
                        td {
                            @if c["lastDecision"].is_null() { "none recorded" } @else {
                                (text(&c["lastDecision"]["decision"])) ": " (short(&text(&c["lastDecision"]["reason"])))
                            }
                        }
                    }
                }
            }
            (more(vnfcs.len()))
        }
        h2 { "Timeline, last " (hours) " h" }
        p.muted {
            "Operations (bars: from their first to their last entry, coloured by the last state seen), steps, heals, faults, "
            "reconcile's probe verdicts and decisions, and maintenance pauses. Hover a mark for its entry. Other windows: "
            a href={ (vnf_href(id)) "&hours=6" } { "6 h" } " · "
            a href={ (vnf_href(id)) "&hours=24" } { "24 h" } " · "
            a href={ (vnf_href(id)) "&hours=168" } { "7 days" }
        }
        (timeline_svg(entries, since, now))
        h2 { "Newest entries" }
        @if entries.is_empty() { p.muted { "none in this window" } } @else {
            table #entries {
                tr { th { "time" } th { "kind" } th { "operation" } th { "VNFC" } th { "message" } }
                @for e in entries.iter().rev().take(MAX_LISTED) {
                    tr {
                        td { (e.at.0.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)) }
                        td { (e.kind) }
                        td {
                            @if let Some(o) = e.operation { (o.as_str()) " " }
                            (e.operation_id.as_ref().map_or("", |o| o.as_str()))
                        }
                        td { (e.vnfc_id.as_ref().map_or("", |c| c.as_str())) }
                        td { (short(&e.message)) }
                    }
                }
            }
        }
    };
    layout(&format!("VNF instance {id}"), body)
}

/// The timeline's lanes, top to bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Operations,
    Steps,
    Heals,
    Faults,
    Probes,
    Pauses,
}

impl Lane {
    const ALL: [Lane; 6] = [
        Lane::Operations,
        Lane::Steps,
        Lane::Heals,
        Lane::Faults,
        Lane::Probes,
        Lane::Pauses,
    ];

    fn label(self) -> &'static str {
        match self {
            Lane::Operations => "operations",
            Lane::Steps => "steps",
            Lane::Heals => "heals",
            Lane::Faults => "faults",
            Lane::Probes => "probe verdicts",
            Lane::Pauses => "pauses",
        }
    }

    fn index(self) -> usize {
        Lane::ALL.iter().position(|l| *l == self).unwrap_or(0)
    }
}

/// The state a `STATE_CHANGED` entry's message names after `→` (`HEAL PROCESSING → COMPLETED…`).
fn state_entered(e: &TimelineEntry) -> Option<OperationState> {
    let (_, after) = e.message.split_once('→')?;
    let word = after.trim_start().split([':', ' ']).next()?;
    OperationState::parse(word)
}

/// The lanes an entry is drawn in, with the colour of its mark.
fn lanes(e: &TimelineEntry) -> Vec<(Lane, &'static str)> {
    const GREEN: &str = "#1a7f37";
    const RED: &str = "#c62828";
    const AMBER: &str = "#e08e0b";
    const BLUE: &str = "#1f6feb";
    const GREY: &str = "#888888";
    const PURPLE: &str = "#8e24aa";
    let mut out = Vec::new();
    if let Some(step) = &e.step {
        let failed = step.state == StepState::Failed;
        let colour = match step.state {
            StepState::Done | StepState::Skipped => GREEN,
            StepState::Failed => RED,
            StepState::Pending | StepState::Started => BLUE,
        };
        out.push((Lane::Steps, colour));
        if failed {
            out.push((Lane::Faults, RED));
        }
        return out;
    }
    let kind = EventKind::parse(&e.kind);
    let heal_op = e.operation == Some(LcmOperationType::Heal);
    match kind {
        Some(EventKind::StateChanged) => {
            let to = state_entered(e);
            let colour = match to {
                Some(OperationState::Completed) => GREEN,
                Some(OperationState::FailedTemp | OperationState::Failed) => RED,
                Some(OperationState::RolledBack) => AMBER,
                _ => BLUE,
            };
            out.push((Lane::Operations, colour));
            if heal_op {
                out.push((Lane::Heals, colour));
            }
            if matches!(
                to,
                Some(OperationState::FailedTemp | OperationState::Failed)
            ) {
                out.push((Lane::Faults, RED));
            }
        }
        Some(
            EventKind::RequestAccepted
            | EventKind::RequestDuplicate
            | EventKind::TaskAccepted
            | EventKind::TackerOperationAdopted,
        ) => {
            out.push((Lane::Operations, GREY));
            if heal_op {
                out.push((Lane::Heals, BLUE));
            }
        }
        Some(EventKind::RequestRejected | EventKind::TackerOperationRefused) => {
            out.push((Lane::Operations, RED));
            out.push((Lane::Faults, RED));
        }
        Some(EventKind::ReconcileHealStarted) => {
            out.push((Lane::Heals, AMBER));
            out.push((Lane::Probes, RED));
        }
        Some(EventKind::TackerHealSent) => out.push((Lane::Heals, BLUE)),
        Some(EventKind::TackerHealCompleted) => out.push((Lane::Heals, GREEN)),
        Some(EventKind::TackerHealNotStarted) => {
            out.push((Lane::Heals, RED));
            out.push((Lane::Faults, RED));
        }
        Some(EventKind::ReconcileDeferredGrace) => {
            out.push((Lane::Probes, AMBER));
            out.push((Lane::Faults, AMBER));
        }
        Some(EventKind::ReconcileDeferredUnknown) => out.push((Lane::Probes, GREY)),
        Some(
            EventKind::ReconcileDeferredBackoff
            | EventKind::ReconcileInFlight
            | EventKind::ReconcileDriftDetected,
        ) => out.push((Lane::Probes, BLUE)),
        Some(k) if crate::store::holds_heal(k) => {
            out.push((Lane::Probes, PURPLE));
            out.push((Lane::Faults, PURPLE));
        }
        Some(EventKind::MaintenancePaused) => out.push((Lane::Pauses, PURPLE)),
        Some(EventKind::MaintenanceResumed) => out.push((Lane::Pauses, GREEN)),
        _ => out.push((Lane::Operations, GREY)),
    }
    out
}

const SVG_WIDTH: f64 = 1000.0;
const LABEL_WIDTH: f64 = 110.0;
const LANE_HEIGHT: f64 = 30.0;
const TOP: f64 = 8.0;

/// One operation's bar: its first and last entry in the window and the last state seen.
struct Bar {
    from: Timestamp,
    to: Timestamp,
    operation: Option<LcmOperationType>,
    state: Option<OperationState>,
}

/// Where the picture's time axis starts: just before the first entry (a tenth of the span
/// drawn before it, the axis at least ten seconds long), never before `since`; `since` when there is no
/// entry. The axis ends at `now`.
fn axis_start(entries: &[TimelineEntry], since: Timestamp, now: Timestamp) -> Timestamp {
    let Some(first) = entries.iter().map(|e| e.at).min() else {
        return since;
    };
    let span = (now.0 - first.0).max(chrono::Duration::seconds(9));
    Timestamp(
        (first.0 - span / 9)
            .max(since.0)
            .min(now.0 - chrono::Duration::seconds(10)),
    )
}

/// Tick spacing, in seconds, for an axis of `span_secs`: the smallest of the usual steps that
/// gives at most ten ticks.
fn tick_step(span_secs: i64) -> i64 {
    const STEPS: [i64; 17] = [
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 10_800, 21_600, 43_200, 86_400,
    ];
    STEPS
        .into_iter()
        .find(|s| span_secs / s <= 10)
        .unwrap_or(86_400)
}

/// The timeline of `entries` up to `now` as inline SVG (`id="timeline"`; the axis from
/// [`axis_start`]): a lane per [`Lane`], a bar per operation, a circle per entry (its `title`
/// the entry's time, kind and message), ticks along the bottom (UTC).
fn timeline_svg(entries: &[TimelineEntry], since: Timestamp, now: Timestamp) -> Markup {
    let start = axis_start(entries, since, now);
    let span = (now.0 - start.0).num_milliseconds().max(1) as f64;
    let plot = SVG_WIDTH - LABEL_WIDTH - 10.0;
    let x = |t: Timestamp| {
        let ms = (t.0 - start.0).num_milliseconds() as f64;
        LABEL_WIDTH + (ms / span).clamp(0.0, 1.0) * plot
    };
    let lane_y = |l: Lane| TOP + LANE_HEIGHT * l.index() as f64;
    let height = TOP + LANE_HEIGHT * Lane::ALL.len() as f64 + 24.0;

    let mut bars: BTreeMap<String, Bar> = BTreeMap::new();
    for e in entries {
        let Some(op) = &e.operation_id else { continue };
        let bar = bars.entry(op.to_string()).or_insert(Bar {
            from: e.at,
            to: e.at,
            operation: e.operation,
            state: None,
        });
        bar.to = bar.to.max(e.at);
        bar.from = bar.from.min(e.at);
        if EventKind::parse(&e.kind) == Some(EventKind::StateChanged)
            && let Some(s) = state_entered(e)
        {
            bar.state = Some(s);
        }
    }
    // An operation whose last state seen is not final runs on until now.
    for bar in bars.values_mut() {
        if bar.state.is_none_or(|s| !s.is_final()) {
            bar.to = now;
        }
    }
    let step = tick_step((now.0 - start.0).num_seconds());
    let first_tick = start.0.timestamp().div_euclid(step) * step + step;
    let ticks: Vec<i64> = (0..)
        .map(|i| first_tick + i * step)
        .take_while(|t| *t <= now.0.timestamp())
        .collect();
    let tick_format = match step {
        0..60 => "%H:%M:%S",
        60..86_400 => "%H:%M",
        _ => "%m-%d",
    };
    let bottom = TOP + LANE_HEIGHT * Lane::ALL.len() as f64;
    html! {
        svg #timeline xmlns="http://www.w3.org/2000/svg" width=(SVG_WIDTH) height=(height)
            viewBox={ "0 0 " (SVG_WIDTH) " " (height) } role="img" aria-label="timeline" {
            @for l in Lane::ALL {
                rect x=(LABEL_WIDTH) y=(lane_y(l)) width=(plot) height=(LANE_HEIGHT - 2.0)
                    fill=(if l.index() % 2 == 0 { "#f6f8fa" } else { "#ffffff" }) {}
                text x="4" y=(lane_y(l) + LANE_HEIGHT / 2.0 + 4.0) { (l.label()) }
            }
            @for t in &ticks {
                @if let Some(at) = chrono::DateTime::from_timestamp(*t, 0) {
                    @let tx = x(Timestamp(at));
                    line x1=(tx) x2=(tx) y1=(TOP) y2=(bottom) stroke="#ddd" {}
                    text x=(tx) y=(bottom + 14.0)
                        text-anchor=(if tx > SVG_WIDTH - 50.0 { "end" } else { "middle" }) {
                        (at.format(tick_format).to_string())
                    }
                }
            }
            text x="4" y=(bottom + 14.0) { "time (UTC)" }
            @for (id, b) in &bars {
                @let x0 = x(b.from);
                @let w = (x(b.to) - x0).max(3.0);
                @let colour = match b.state {
                    Some(OperationState::Completed) => "#8fd19e",
                    Some(OperationState::FailedTemp | OperationState::Failed) => "#ef9a9a",
                    Some(OperationState::RolledBack) => "#ffcc80",
                    _ => "#90caf9",
                };
                rect.operation x=(x0) y=(lane_y(Lane::Operations) + 6.0) width=(w) height=(LANE_HEIGHT - 14.0)
                    fill=(colour) stroke="#555" stroke-width="0.5" data-operation=(id) {
                    title { (id) " " (b.operation.map_or("", |o| o.as_str())) " " (b.state.map_or("", |s| s.as_str())) }
                }
                @if w > 40.0 {
                    text x=(x0 + 3.0) y=(lane_y(Lane::Operations) + 18.0) { (b.operation.map_or("", |o| o.as_str())) }
                }
            }
            @for e in entries {
                @for (l, colour) in lanes(e) {
                    circle.mark cx=(x(e.at)) cy=(lane_y(l) + LANE_HEIGHT / 2.0 - 1.0) r="4"
                        fill=(colour) stroke="#333" stroke-width="0.5" data-kind=(e.kind) {
                        title { (rfc3339(e.at)) " " (e.kind) ": " (short(&e.message)) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vnf_query_takes_an_id_and_a_bounded_window() {
        assert_eq!(
            vnf_query(Some("id=a%20b%3C")).unwrap(),
            ("a b<".to_owned(), DEFAULT_HOURS)
        );
        assert_eq!(vnf_query(Some("id=x&hours=6")).unwrap().1, 6);
        for bad in [
            "id=x&hours=0",
            "id=x&hours=169",
            "id=x&hours=-1",
            "id=x&hours=1e3",
        ] {
            assert!(vnf_query(Some(bad)).is_err(), "{bad}");
        }
        assert!(vnf_query(None).is_err());
        assert_eq!(vnf_href("a b&<"), "/status/vnf?id=a+b%26%3C");
    }

    #[test]
    fn outside_values_are_escaped() {
        let hostile = "<script>alert(1)</script>\"'&";
        let body = layout(hostile, html! { p { (short(hostile)) } }).into_string();
        assert!(!body.contains("<script>"), "{body}");
        assert!(body.contains("&lt;script&gt;"), "{body}");
    }

    #[test]
    fn the_axis_fits_the_entries_and_ticks_stay_few() {
        assert_eq!(tick_step(50), 5);
        assert_eq!(tick_step(600), 60);
        assert_eq!(tick_step(86_400), 10_800);
        assert_eq!(tick_step(7 * 86_400), 86_400);
        let now = Timestamp::parse("2026-11-27T12:00:00Z").unwrap();
        let since = Timestamp(now.0 - chrono::Duration::hours(24));
        assert_eq!(axis_start(&[], since, now), since);
    }

    #[test]
    fn long_messages_are_cut_to_one_line() {
        let s = short(&format!("a\n\n{}", "b".repeat(1000)));
        assert_eq!(s.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(s.starts_with("a ⏎ b") && s.ends_with('…'));
    }
}
