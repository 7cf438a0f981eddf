//! Heat orchestration API v1 handlers (`/heat-api/v1/{project_id}/…`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::super::state::{Inner, ts};
use super::super::{ApiError, ApiResult, Cloud, heat_err, heat_err_fn, qget};
use super::engine::{converge, delete_stack, insert_stack};
use super::template::{Ctx, param_string, parse_template};
use super::{Res, Stack, find_stack};

type St = State<Arc<Cloud>>;
type Q = Query<Vec<(String, String)>>;

/// Routes of the orchestration service.
pub fn routes() -> Router<Arc<Cloud>> {
    let p = "/heat-api/v1/{project}";
    Router::new()
        .route("/heat-api", get(versions))
        .route("/heat-api/", get(versions))
        .route(&format!("{p}/build_info"), get(build_info))
        .route(&format!("{p}/stacks"), get(list).post(create))
        .route(
            &format!("{p}/stacks/{{name}}"),
            get(redirect).put(redirect).patch(redirect).delete(redirect),
        )
        .route(
            &format!("{p}/stacks/{{name}}/{{id}}"),
            get(show).put(update_put).patch(update_patch).delete(delete),
        )
        .route(
            &format!("{p}/stacks/{{name}}/resources/{{res}}"),
            get(resource_redirect).patch(resource_redirect),
        )
        .route(
            &format!("{p}/stacks/{{name}}/{{id}}/resources"),
            get(resources),
        )
        .route(
            &format!("{p}/stacks/{{name}}/{{id}}/resources/{{res}}"),
            get(resource_show).patch(mark_unhealthy),
        )
        .route(
            &format!("{p}/stacks/{{name}}/{{id}}/template"),
            get(template),
        )
        .route(&format!("{p}/stacks/{{name}}/{{id}}/files"), get(files))
        .route(&format!("{p}/stacks/{{name}}/{{id}}/outputs"), get(outputs))
        .route(&format!("{p}/stacks/{{name}}/{{id}}/events"), get(events))
}

async fn versions(State(c): St) -> Response {
    (
        StatusCode::MULTIPLE_CHOICES,
        axum::Json(json!({"versions": [{"id": "v1.0", "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{}/heat-api/v1/", c.base)}]}]})),
    )
        .into_response()
}

/// `GET /v1/{project}/build_info` (Orchestration API v1 "Show build information"): what answers
/// is this simulation, so both revisions name the testbed's own version.
async fn build_info() -> Response {
    let revision = format!("testbed {} (simulated Heat)", env!("CARGO_PKG_VERSION"));
    axum::Json(json!({"api": {"revision": revision}, "engine": {"revision": revision}}))
        .into_response()
}

fn not_found(what: &str) -> ApiError {
    heat_err(
        404,
        "EntityNotFound",
        format!("The Stack ({what}) could not be found."),
    )
}

fn stack_url(c: &Cloud, s: &Stack) -> String {
    format!(
        "{}/heat-api/v1/{}/stacks/{}/{}",
        c.base, c.project_id, s.name, s.id
    )
}

fn opt_ts(t: &Option<chrono::DateTime<chrono::Utc>>) -> Value {
    t.as_ref().map(|t| json!(ts(t))).unwrap_or(Value::Null)
}

/// Stack JSON (list entry, or `show` with parameters and outputs).
fn stack_json(c: &Cloud, inner: &Inner, s: &Stack, detail: bool) -> Value {
    let mut v = json!({
        "id": s.id,
        "stack_name": s.name,
        "description": s.template.get("description").cloned().unwrap_or(json!("")),
        "creation_time": ts(&s.created),
        "updated_time": opt_ts(&s.updated),
        "deletion_time": opt_ts(&s.deleted),
        "stack_status": s.status_string(),
        "stack_status_reason": s.reason,
        "stack_owner": super::super::USER_NAME,
        "parent": s.parent.as_ref().map(|p| p.0.clone()),
        "project": c.project_id,
        "stack_user_project_id": c.project_id,
        "tags": s.tags,
        "links": [{"href": stack_url(c, s), "rel": "self"}],
    });
    if detail {
        let mut params = Map::new();
        for (k, val) in &s.params {
            params.insert(k.clone(), param_string(val));
        }
        if s.params.is_empty() {
            for (k, val) in &s.params_given {
                params.insert(k.clone(), param_string(val));
            }
        }
        params.insert("OS::stack_id".into(), json!(s.id));
        params.insert("OS::stack_name".into(), json!(s.name));
        params.insert("OS::project_id".into(), json!(c.project_id));
        let m = v.as_object_mut().expect("object");
        m.insert("parameters".into(), Value::Object(params));
        m.insert("outputs".into(), Value::Array(outputs_of(c, inner, s)));
        m.insert("disable_rollback".into(), json!(s.disable_rollback));
        m.insert("timeout_mins".into(), json!(s.timeout_mins));
        m.insert("capabilities".into(), json!([]));
        m.insert("notification_topics".into(), json!([]));
        m.insert(
            "template_description".into(),
            s.template.get("description").cloned().unwrap_or(json!("")),
        );
    }
    v
}

fn outputs_of(c: &Cloud, inner: &Inner, s: &Stack) -> Vec<Value> {
    let Some(outs) = s.template.get("outputs").and_then(Value::as_object) else {
        return Vec::new();
    };
    let ctx = Ctx {
        inner,
        stack: s,
        cloud: c,
    };
    outs.iter()
        .map(|(k, o)| {
            let desc = o.get("description").cloned().unwrap_or(json!("No description given"));
            match ctx.output(k) {
                Ok(v) => json!({"output_key": k, "output_value": v, "description": desc}),
                Err(e) => json!({"output_key": k, "output_value": null, "description": desc, "output_error": e}),
            }
        })
        .collect()
}

async fn list(State(c): St, Path(_p): Path<String>, Query(q): Q) -> ApiResult<axum::Json<Value>> {
    let inner = c.lock();
    let nested = qget(&q, "show_nested").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut v: Vec<&Stack> = inner
        .stacks
        .values()
        .filter(|s| s.deleted.is_none() && (nested || s.parent.is_none()))
        .filter(|s| qget(&q, "name").is_none_or(|n| s.name == n))
        .filter(|s| qget(&q, "status").is_none_or(|st| s.status == st || s.status_string() == st))
        .collect();
    v.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
    let items: Vec<Value> = v.iter().map(|s| stack_json(&c, &inner, s, false)).collect();
    let limit = super::super::qlimit(&q, heat_err_fn)?;
    let (page, _) = super::super::paginate(items, limit, qget(&q, "marker"), 100_000, heat_err_fn)?;
    Ok(axum::Json(json!({"stacks": page})))
}

fn body_files(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(String::from)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Parameters from `parameters` plus `environment.parameters` (environment as object or YAML).
fn body_params(body: &Value) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    if let Some(env) = body.get("environment") {
        let env = match env {
            Value::String(s) if !s.trim().is_empty() => serde_yaml_ng::from_str::<Value>(s)
                .map_err(|e| {
                    heat_err(
                        400,
                        "InvalidEnvironment",
                        format!("environment is not valid YAML: {e}"),
                    )
                })?,
            other => other.clone(),
        };
        if env
            .get("resource_registry")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
        {
            return Err(heat_err(
                400,
                "NotSupported",
                "environment resource_registry is not supported by the testbed",
            ));
        }
        if let Some(p) = env.get("parameters").and_then(Value::as_object) {
            out.extend(p.clone());
        }
    }
    if let Some(p) = body.get("parameters") {
        match p {
            Value::Object(m) => out.extend(m.clone()),
            Value::Null => {}
            _ => {
                return Err(heat_err(
                    400,
                    "HTTPBadRequest",
                    "parameters must be an object",
                ));
            }
        }
    }
    Ok(out)
}

fn valid_name(n: &str) -> bool {
    let mut ch = n.chars();
    ch.next().is_some_and(|c| c.is_ascii_alphabetic())
        && ch.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        && n.len() <= 255
}

async fn create(
    State(c): St,
    Path(_p): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let name = body
        .get("stack_name")
        .and_then(Value::as_str)
        .ok_or_else(|| heat_err(400, "HTTPBadRequest", "stack_name is required"))?;
    if !valid_name(name) {
        return Err(heat_err(
            400,
            "StackValidationFailed",
            format!(
                "Invalid stack name {name} must contain only alphanumeric or \"_-.\" characters, must start with alpha"
            ),
        ));
    }
    if body.get("template_url").is_some() && body.get("template").is_none() {
        return Err(heat_err(
            400,
            "NotSupported",
            "template_url is not supported by the testbed; send template",
        ));
    }
    let tpl = parse_template(body.get("template").unwrap_or(&Value::Null))
        .map_err(|e| heat_err(400, "StackValidationFailed", e))?;
    let files = body_files(body.get("files"));
    let params = body_params(&body)?;
    let id = {
        let mut inner = c.lock();
        if find_stack(&inner, name, true).is_some_and(|s| s.deleted.is_none() && s.name == name) {
            return Err(heat_err(
                409,
                "StackExists",
                format!("The Stack ({name}) already exists."),
            ));
        }
        let id = insert_stack(
            &mut inner,
            name.to_string(),
            None,
            None,
            tpl,
            files,
            params,
            (
                body.get("disable_rollback")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                body.get("timeout_mins").and_then(Value::as_u64),
                body.get("tags").cloned(),
            ),
        );
        let s = inner.stacks.get_mut(&id).expect("just inserted");
        s.action = "CREATE".into();
        s.status = "IN_PROGRESS".into();
        s.reason = "Stack CREATE started".into();
        id
    };
    tokio::spawn(converge(c.clone(), id.clone(), "CREATE"));
    let href = format!(
        "{}/heat-api/v1/{}/stacks/{}/{}",
        c.base, c.project_id, name, id
    );
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({"stack": {"id": id, "links": [{"href": href, "rel": "self"}]}})),
    )
        .into_response())
}

/// `/stacks/{name_or_id}` with any method → 302 to `/stacks/{name}/{id}` (query kept), as Heat's
/// `stack_lookup` does. keystoneauth and reqwest (osauth) both re-send PATCH/PUT/DELETE with
/// the same method (and body) to the new location.
async fn redirect(State(c): St, Path((p, name)): Path<(String, String)>, uri: Uri) -> ApiResult {
    let inner = c.lock();
    let s = find_stack(&inner, &name, true).ok_or_else(|| not_found(&name))?;
    if s.deleted.is_some() && s.id != name {
        return Err(not_found(&name));
    }
    let mut loc = format!("{}/heat-api/v1/{p}/stacks/{}/{}", c.base, s.name, s.id);
    if let Some(q) = uri.query() {
        loc.push('?');
        loc.push_str(q);
    }
    Ok((
        StatusCode::FOUND,
        [(header::LOCATION, loc.clone())],
        axum::Json(json!({"location": loc})),
    )
        .into_response())
}

fn lookup<'a>(inner: &'a Inner, name: &str, id: &str) -> Result<&'a Stack, ApiError> {
    match inner.stacks.get(id) {
        Some(s) if s.name == name || s.id == name => Ok(s),
        _ => Err(not_found(&format!("{name}/{id}"))),
    }
}

async fn show(
    State(c): St,
    Path((p, name, id)): Path<(String, String, String)>,
    uri: Uri,
) -> ApiResult {
    if SUBS.contains(&id.as_str()) && !c.lock().stacks.contains_key(&id) {
        return redirect_sub(&c, &p, &name, &format!("/{id}"), uri.query());
    }
    let inner = c.lock();
    let s = lookup(&inner, &name, &id)?;
    Ok(axum::Json(json!({"stack": stack_json(&c, &inner, s, true)})).into_response())
}

/// Sub-collections Heat reaches through `/stacks/{name_or_id}/…` with a redirect.
const SUBS: &[&str] = &["resources", "template", "outputs", "files", "events"];

/// `302` from `/stacks/{name_or_id}{rest}` to `/stacks/{name}/{id}{rest}` (query kept), as Heat's
/// stack lookup does; clients that follow redirects with the same method (keystoneauth) work.
fn redirect_sub(c: &Cloud, p: &str, name: &str, rest: &str, query: Option<&str>) -> ApiResult {
    let inner = c.lock();
    let s = find_stack(&inner, name, false)
        .filter(|s| s.deleted.is_none() || s.id == name)
        .ok_or_else(|| not_found(name))?;
    let mut loc = format!(
        "{}/heat-api/v1/{p}/stacks/{}/{}{rest}",
        c.base, s.name, s.id
    );
    if let Some(q) = query {
        loc.push('?');
        loc.push_str(q);
    }
    Ok((StatusCode::FOUND, [(header::LOCATION, loc)]).into_response())
}

async fn resource_redirect(
    State(c): St,
    Path((p, name, res)): Path<(String, String, String)>,
    uri: Uri,
) -> ApiResult {
    redirect_sub(&c, &p, &name, &format!("/resources/{res}"), uri.query())
}

async fn template(
    State(c): St,
    Path((_p, name, id)): Path<(String, String, String)>,
) -> ApiResult<axum::Json<Value>> {
    let inner = c.lock();
    Ok(axum::Json(lookup(&inner, &name, &id)?.template.clone()))
}

async fn files(
    State(c): St,
    Path((_p, name, id)): Path<(String, String, String)>,
) -> ApiResult<axum::Json<Value>> {
    let inner = c.lock();
    Ok(axum::Json(json!(lookup(&inner, &name, &id)?.files)))
}

async fn outputs(
    State(c): St,
    Path((_p, name, id)): Path<(String, String, String)>,
) -> ApiResult<axum::Json<Value>> {
    let inner = c.lock();
    let s = lookup(&inner, &name, &id)?;
    let outs: Vec<Value> = outputs_of(&c, &inner, s)
        .into_iter()
        .map(|mut o| {
            o.as_object_mut().map(|m| m.remove("output_value"));
            o
        })
        .collect();
    Ok(axum::Json(json!({"outputs": outs})))
}

async fn update_put(
    State(c): St,
    Path((_p, name, id)): Path<(String, String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    update(c, name, id, body, false).await
}

async fn update_patch(
    State(c): St,
    Path((_p, name, id)): Path<(String, String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    update(c, name, id, body, true).await
}

/// PUT (full: template required, parameters replaced) or PATCH (existing template unless given,
/// parameters and files merged, `clear_parameters` honoured).
async fn update(c: Arc<Cloud>, name: String, id: String, body: Value, patch: bool) -> ApiResult {
    let tpl = match body.get("template") {
        Some(t) if !t.is_null() => {
            Some(parse_template(t).map_err(|e| heat_err(400, "StackValidationFailed", e))?)
        }
        _ if patch => None,
        _ => {
            return Err(heat_err(
                400,
                "HTTPBadRequest",
                "template is required for PUT (use PATCH to keep it)",
            ));
        }
    };
    let params = body_params(&body)?;
    let files = body_files(body.get("files"));
    {
        let mut inner = c.lock();
        let sid = lookup(&inner, &name, &id)?.id.clone();
        let s = inner.stacks.get_mut(&sid).expect("found");
        if s.deleted.is_some() {
            return Err(not_found(&name));
        }
        if s.busy() {
            return Err(heat_err(
                409,
                "ActionInProgress",
                format!(
                    "Stack {} already has an action ({}) in progress.",
                    s.name, s.action
                ),
            ));
        }
        if let Some(t) = tpl {
            s.template = t;
        }
        if patch {
            s.params_given.extend(params);
            for k in body
                .get("clear_parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(k) = k.as_str() {
                    s.params_given.remove(k);
                }
            }
            s.files.extend(files);
        } else {
            s.params_given = params;
            if body.get("files").is_some() {
                s.files = files;
            }
        }
        s.action = "UPDATE".into();
        s.status = "IN_PROGRESS".into();
        s.reason = "Stack UPDATE started".into();
    }
    tokio::spawn(converge(c.clone(), id, "UPDATE"));
    Ok((StatusCode::ACCEPTED, "").into_response())
}

async fn delete(State(c): St, Path((_p, name, id)): Path<(String, String, String)>) -> ApiResult {
    {
        let inner = c.lock();
        let s = lookup(&inner, &name, &id)?;
        if s.deleted.is_some() {
            return Err(not_found(&name));
        }
    }
    start_delete(c, id)
}

fn start_delete(c: Arc<Cloud>, id: String) -> ApiResult {
    let busy = {
        let mut inner = c.lock();
        let busy = inner
            .stacks
            .get(&id)
            .is_some_and(|s| s.busy() && s.action != "DELETE");
        // Heat's API answers once the engine has stored DELETE_IN_PROGRESS: a GET right after
        // the 204 never shows the stack's previous state.
        if !busy && let Some(s) = inner.stacks.get_mut(&id) {
            s.mark_delete_in_progress();
        }
        busy
    };
    tokio::spawn(async move {
        if busy {
            // Heat cancels the running action; the testbed waits for it to finish.
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                if !c.lock().stacks.get(&id).is_some_and(|s| s.busy()) {
                    break;
                }
            }
        }
        if let Err(e) = delete_stack(c, id).await {
            tracing::warn!("stack delete failed: {e}");
        }
    });
    Ok((StatusCode::NO_CONTENT, "").into_response())
}

fn res_json(c: &Cloud, inner: &Inner, s: &Stack, r: &Res) -> Value {
    let base = stack_url(c, s);
    let mut links = vec![
        json!({"href": format!("{base}/resources/{}", r.name), "rel": "self"}),
        json!({"href": base, "rel": "stack"}),
    ];
    if let Some(n) = r.nested.as_ref().and_then(|n| inner.stacks.get(n)) {
        links.push(json!({"href": stack_url(c, n), "rel": "nested"}));
    }
    let required_by: Vec<&str> = s
        .resources
        .iter()
        .filter(|o| o.deps.contains(&r.name))
        .map(|o| o.name.as_str())
        .collect();
    let mut v = json!({
        "resource_name": r.name,
        "logical_resource_id": r.name,
        "physical_resource_id": r.physical_id,
        "resource_type": r.rtype,
        "resource_status": r.status_string(),
        "resource_status_reason": r.reason,
        "creation_time": ts(&r.created),
        "updated_time": ts(r.updated.as_ref().unwrap_or(&r.created)),
        "required_by": required_by,
        "links": links,
        "stack_name": s.name,
        "stack_id": s.id,
    });
    if let Some((_, pr)) = &s.parent {
        v["parent_resource"] = json!(pr);
    }
    v
}

fn collect(c: &Cloud, inner: &Inner, s: &Stack, depth: u32, max: u32, out: &mut Vec<Value>) {
    for r in &s.resources {
        out.push(res_json(c, inner, s, r));
        if depth < max
            && let Some(n) = r.nested.as_ref().and_then(|n| inner.stacks.get(n))
        {
            collect(c, inner, n, depth + 1, max, out);
        }
    }
}

async fn resources(
    State(c): St,
    Path((_p, name, id)): Path<(String, String, String)>,
    Query(q): Q,
) -> ApiResult<axum::Json<Value>> {
    let depth: u32 = match qget(&q, "nested_depth") {
        None => 0,
        Some(d) => d
            .parse()
            .map_err(|_| heat_err(400, "HTTPBadRequest", format!("Invalid nested_depth {d}")))?,
    };
    let inner = c.lock();
    let s = lookup(&inner, &name, &id)?;
    let mut out = Vec::new();
    collect(&c, &inner, s, 0, depth, &mut out);
    if let Some(t) = qget(&q, "type") {
        out.retain(|r| r["resource_type"] == t);
    }
    Ok(axum::Json(json!({"resources": out})))
}

/// `GET …/stacks/{name}/{id}/events`: the events of the stack and its resources (with
/// `nested_depth=N` also those of its nested stacks N levels down), oldest first (`sort_dir=desc`:
/// newest first); filters `resource_name`, `resource_status` (`COMPLETE`…), `resource_action`
/// (`CREATE`…), `resource_type`; `marker` (an event id: only the events after it) and `limit`.
/// Each event as Heat's list shows it: `id`, `event_time`, `resource_name`,
/// `logical_resource_id`, `physical_resource_id`, `resource_status`, `resource_status_reason`,
/// links `self`, `resource`, `stack` (a stack's own events have the stack's name and id), and
/// with `nested_depth` `root_stack` (the stack asked for).
async fn events(
    State(c): St,
    Path((p, name, id)): Path<(String, String, String)>,
    Query(q): Q,
) -> ApiResult<axum::Json<Value>> {
    let depth: u32 = match qget(&q, "nested_depth") {
        None => 0,
        Some(d) => d
            .parse()
            .map_err(|_| heat_err(400, "HTTPBadRequest", format!("Invalid nested_depth {d}")))?,
    };
    let limit: Option<usize> = match qget(&q, "limit") {
        None => None,
        Some(l) => Some(
            l.parse()
                .map_err(|_| heat_err(400, "HTTPBadRequest", format!("Invalid limit {l}")))?,
        ),
    };
    let inner = c.lock();
    let top = lookup(&inner, &name, &id)?;
    // the stack and its descendants up to `depth`
    let mut stacks: Vec<&Stack> = vec![top];
    let mut level = vec![top.id.clone()];
    for _ in 0..depth {
        let next: Vec<&Stack> = inner
            .stacks
            .values()
            .filter(|s| {
                s.parent
                    .as_ref()
                    .is_some_and(|(pid, _)| level.contains(pid))
            })
            .collect();
        level = next.iter().map(|s| s.id.clone()).collect();
        stacks.extend(next);
    }
    let mut evs: Vec<(&Stack, &super::Event)> = stacks
        .iter()
        .flat_map(|s| s.events.iter().map(move |e| (*s, e)))
        .collect();
    evs.sort_by_key(|(_, e)| e.seq);
    if qget(&q, "sort_dir") == Some("desc") {
        evs.reverse();
    }
    // `ACTION_STATUS`: the action is the part before the first `_` (actions have none)
    let action_of = |e: &super::Event| {
        e.status
            .split_once('_')
            .map(|(a, s)| (a.to_string(), s.to_string()))
            .unwrap_or_default()
    };
    evs.retain(|(_, e)| {
        let (act, st) = action_of(e);
        qget(&q, "resource_name").is_none_or(|n| e.resource_name == n)
            && qget(&q, "resource_status").is_none_or(|v| st == v)
            && qget(&q, "resource_action").is_none_or(|v| act == v)
            && qget(&q, "resource_type").is_none_or(|v| e.rtype == v)
    });
    if let Some(m) = qget(&q, "marker") {
        let at = evs.iter().position(|(_, e)| e.id == m).ok_or_else(|| {
            heat_err(
                404,
                "EntityNotFound",
                format!("The Event ({m}) could not be found."),
            )
        })?;
        evs.drain(..=at);
    }
    if let Some(l) = limit {
        evs.truncate(l);
    }
    // with nested_depth Heat adds a `root_stack` link to every event: heatclient takes it as the
    // sign that the server did the nested listing (else it walks the nested stacks itself)
    let root = format!("{}/heat-api/v1/{p}/stacks/{}/{}", c.base, top.name, top.id);
    let links = |res: &str, stack: &str, eid: &str| {
        let mut l = vec![
            json!({"href": format!("{res}/events/{eid}"), "rel": "self"}),
            json!({"href": res, "rel": "resource"}),
            json!({"href": stack, "rel": "stack"}),
        ];
        if depth > 0 {
            l.push(json!({"href": root, "rel": "root_stack"}));
        }
        l
    };
    let out: Vec<Value> = evs
        .iter()
        .map(|(s, e)| {
            let stack = format!("{}/heat-api/v1/{p}/stacks/{}/{}", c.base, s.name, s.id);
            let res = format!("{stack}/resources/{}", e.resource_name);
            json!({
                "id": e.id,
                "event_time": e.time.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                "resource_name": e.resource_name,
                "logical_resource_id": e.resource_name,
                "physical_resource_id": e.physical_id,
                "resource_status": e.status,
                "resource_status_reason": e.reason,
                "links": links(&res, &stack, &e.id),
            })
        })
        .collect();
    Ok(axum::Json(json!({"events": out})))
}

fn find_res<'a>(s: &'a Stack, key: &str) -> Option<&'a Res> {
    s.res(key).or_else(|| {
        s.resources
            .iter()
            .find(|r| !r.physical_id.is_empty() && r.physical_id == key)
    })
}

/// `GET …/resources/{name_or_physical_id}[?with_attr=A…]`: the resource with `attributes` as Heat
/// shows them (see [`Ctx::shown_attributes`]), `description` and `properties`.
async fn resource_show(
    State(c): St,
    Path((_p, name, id, res)): Path<(String, String, String, String)>,
    Query(q): Q,
) -> ApiResult<axum::Json<Value>> {
    let inner = c.lock();
    let s = lookup(&inner, &name, &id)?;
    let r = find_res(s, &res).ok_or_else(|| {
        heat_err(
            404,
            "EntityNotFound",
            format!("The Resource ({res}) could not be found in Stack {name}."),
        )
    })?;
    let mut v = res_json(&c, &inner, s, r);
    let with_attr: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "with_attr")
        .map(|(_, v)| v.clone())
        .collect();
    v["attributes"] = Ctx {
        inner: &inner,
        stack: s,
        cloud: &c,
    }
    .shown_attributes(&r.name, &with_attr);
    v["description"] = json!("");
    v["properties"] = r.props.clone();
    Ok(axum::Json(json!({"resource": v})))
}

/// `PATCH …/resources/{name_or_physical_id}` with `{"mark_unhealthy": bool, "resource_status_reason": str}`
/// → 200; true sets `CHECK_FAILED`, false turns `CHECK_FAILED` into `CHECK_COMPLETE`.
async fn mark_unhealthy(
    State(c): St,
    Path((_p, name, id, res)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let _ = headers;
    let mark = body
        .get("mark_unhealthy")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            heat_err(
                400,
                "HTTPBadRequest",
                "mark_unhealthy (boolean) is required",
            )
        })?;
    let reason = body
        .get("resource_status_reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut inner = c.lock();
    let sid = lookup(&inner, &name, &id)?.id.clone();
    // Heat takes the stack lock: refuse while the stack (or its top) runs an action.
    let busy = {
        let s = &inner.stacks[&sid];
        s.busy()
            || inner
                .stacks
                .get(&s.top)
                .is_some_and(|t| t.busy() && t.action != "INIT")
    };
    if busy {
        return Err(heat_err(
            409,
            "ActionInProgress",
            format!("Stack {name} has an action in progress."),
        ));
    }
    let s = inner.stacks.get_mut(&sid).expect("found");
    let rn = find_res(s, &res).map(|r| r.name.clone()).ok_or_else(|| {
        heat_err(
            404,
            "EntityNotFound",
            format!("The Resource ({res}) could not be found in Stack {name}."),
        )
    })?;
    let r = s.res_mut(&rn).expect("found");
    if mark {
        r.action = "CHECK".into();
        r.status = "FAILED".into();
        r.reason = if reason.is_empty() {
            "Marked unhealthy".into()
        } else {
            reason
        };
    } else if r.action == "CHECK" && r.status == "FAILED" {
        r.status = "COMPLETE".into();
        r.reason = reason;
    }
    s.res_event(&rn);
    Ok((StatusCode::OK, "").into_response())
}
