//! Fault injection and inspection over HTTP under `/testbed/…` (no authentication).
//!
//! | method + path | body | effect |
//! |---|---|---|
//! | `GET /testbed/hosts` | | every server (id, name, status, ip, cluster, volumes, host key) + the farm's view |
//! | `POST /testbed/servers/{id}/error` | `{"message": str}` (optional) | server → ERROR with `fault`, host stopped |
//! | `POST /testbed/servers/{id}/vanish` | | server deleted behind Heat's back |
//! | `POST /testbed/servers/{id}/stop-sshd` / `start-sshd` | | sshd of the host stopped / started |
//! | `POST /testbed/servers/{id}/hang` | `{"hang": bool}` (default true) | SSH commands hang |
//! | `POST /testbed/servers/{id}/rotate-host-key` | | new host key → `{"host_key": str}` |
//! | `POST /testbed/images/{id_or_name}/properties` | `{"os_distro": "ubuntu", "os_version": "20.04", …}` (string values) | Glance properties of an image (created if unknown); servers booted from it afterwards get the host profile they name → `{"image_id": str}` |
//! | `POST /testbed/networks/{id_or_name}` | | a Neutron network (created if unknown; a UUID is its id), on the testbed bridge → `{"network_id": str}` (a real Heat looks up the networks a template names) |
//! | `POST /testbed/console` | `{"output": str or null}` | every server's `os-getConsoleOutput` text (null: cloud-init's host key blocks) |
//! | `POST /testbed/faults/{service}` | [`FaultRule`] JSON | add a 5xx/latency rule (`identity`, `compute`, `network`, `volume`, `image`, `orchestration`) |
//! | `GET /testbed/faults` / `DELETE /testbed/faults` / `DELETE /testbed/faults/{service}` | | list / clear rules |
//! | `GET /testbed/counters` / `DELETE /testbed/counters` | | request counters per service and `METHOD /path` (ids as `{id}`) / reset |
//! | `POST /testbed/clusters/{cluster}/pvs/{pv}/bind` | `{"node": str}` (optional) | PV Bound in the Kubernetes stand-in |
//! | `POST /testbed/clusters/{cluster}/pvs/{pv}/unbind` | `{"released": bool}` (default false) | PV Released / Available |
//! | `POST /testbed/clusters/{cluster}/nodes/{node}/ready` | `{"ready": bool}` | node Ready condition |
//!
//! Answers: 200/201/204 with JSON, or 4xx `{"error": message}` (404 unknown server, 409 no farm).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::Cloud;
use super::faults::FaultRule;

type St = State<Arc<Cloud>>;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/testbed/hosts", get(hosts))
        .route("/testbed/servers/{id}/error", post(error))
        .route("/testbed/servers/{id}/vanish", post(vanish))
        .route("/testbed/servers/{id}/stop-sshd", post(stop_sshd))
        .route("/testbed/servers/{id}/start-sshd", post(start_sshd))
        .route("/testbed/servers/{id}/hang", post(hang))
        .route("/testbed/servers/{id}/rotate-host-key", post(rotate))
        .route("/testbed/networks/{network}", post(network))
        .route("/testbed/console", post(console))
        .route("/testbed/images/{image}/properties", post(image_properties))
        .route("/testbed/faults", get(faults_list).delete(faults_clear_all))
        .route(
            "/testbed/faults/{service}",
            post(fault_add).delete(faults_clear),
        )
        .route("/testbed/counters", get(counters).delete(counters_reset))
        .route("/testbed/clusters/{cluster}/pvs/{pv}/bind", post(bind))
        .route("/testbed/clusters/{cluster}/pvs/{pv}/unbind", post(unbind))
        .route(
            "/testbed/clusters/{cluster}/nodes/{node}/ready",
            post(ready),
        )
}

fn body_json(b: &Bytes) -> Result<Value, Box<Response>> {
    if b.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(b)
        .map_err(|e| Box::new(err(StatusCode::BAD_REQUEST, format!("bad JSON body: {e}"))))
}

fn err(status: StatusCode, msg: String) -> Response {
    (status, axum::Json(json!({"error": msg}))).into_response()
}

fn result(r: anyhow::Result<Value>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => {
            let msg = format!("{e:#}");
            let status = if msg.contains("without hosts") {
                StatusCode::CONFLICT
            } else if msg.starts_with("no server") {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::BAD_REQUEST
            };
            err(status, msg)
        }
    }
}

async fn hosts(State(c): St) -> Response {
    axum::Json(json!({"servers": c.hosts(), "farm": c.farm_hosts()})).into_response()
}

async fn error(State(c): St, Path(id): Path<String>, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let msg = body["message"]
        .as_str()
        .unwrap_or("injected failure")
        .to_string();
    result(
        c.inject_server_error(&id, &msg)
            .await
            .map(|_| json!({"server_id": id, "status": "ERROR"})),
    )
}

async fn vanish(State(c): St, Path(id): Path<String>) -> Response {
    result(
        c.inject_server_vanish(&id)
            .await
            .map(|_| json!({"server_id": id, "deleted": true})),
    )
}

fn known(c: &Cloud, id: &str) -> anyhow::Result<()> {
    anyhow::ensure!(c.lock().servers.contains_key(id), "no server {id}");
    Ok(())
}

async fn stop_sshd(State(c): St, Path(id): Path<String>) -> Response {
    let r = async {
        known(&c, &id)?;
        c.inject_stop_sshd(&id).await
    }
    .await;
    result(r.map(|_| json!({"server_id": id, "sshd": "stopped"})))
}

async fn start_sshd(State(c): St, Path(id): Path<String>) -> Response {
    let r = async {
        known(&c, &id)?;
        c.inject_start_sshd(&id).await
    }
    .await;
    result(r.map(|_| json!({"server_id": id, "sshd": "running"})))
}

async fn hang(State(c): St, Path(id): Path<String>, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let h = body["hang"].as_bool().unwrap_or(true);
    let r = async {
        known(&c, &id)?;
        c.inject_hang(&id, h).await
    }
    .await;
    result(r.map(|_| json!({"server_id": id, "hang": h})))
}

async fn image_properties(State(c): St, Path(image): Path<String>, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let Some(obj) = body.as_object() else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "the body must be an object of string properties"})),
        )
            .into_response();
    };
    let mut props = std::collections::BTreeMap::new();
    for (k, v) in obj {
        let Some(s) = v.as_str() else {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": format!("property {k} is not a string")})),
            )
                .into_response();
        };
        props.insert(k.clone(), s.to_string());
    }
    let id = c.set_image_properties(&image, props);
    (StatusCode::OK, axum::Json(json!({"image_id": id}))).into_response()
}

async fn network(State(c): St, Path(network): Path<String>) -> Response {
    // a name or id, as a template names it: printable, bounded (Neutron names are at most 255)
    if network.is_empty() || network.len() > 255 || network.chars().any(char::is_control) {
        return err(StatusCode::BAD_REQUEST, "bad network name or id".into());
    }
    let id = c.add_network(&network);
    (StatusCode::OK, axum::Json(json!({"network_id": id}))).into_response()
}

async fn console(State(c): St, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let text = body["output"].as_str().map(str::to_string);
    c.set_console_override(text.clone());
    (StatusCode::OK, axum::Json(json!({"output": text}))).into_response()
}

async fn rotate(State(c): St, Path(id): Path<String>) -> Response {
    let r = async {
        known(&c, &id)?;
        c.inject_rotate_host_key(&id).await
    }
    .await;
    result(r.map(|k| json!({"server_id": id, "host_key": k})))
}

const SERVICES: &[&str] = &[
    "identity",
    "compute",
    "network",
    "volume",
    "image",
    "orchestration",
    "nfv-orchestration",
];

async fn fault_add(State(c): St, Path(service): Path<String>, b: Bytes) -> Response {
    if !SERVICES.contains(&service.as_str()) {
        return err(
            StatusCode::NOT_FOUND,
            format!("unknown service {service} (one of {})", SERVICES.join(", ")),
        );
    }
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let rule: FaultRule = match serde_json::from_value(body) {
        Ok(r) => r,
        Err(e) => return err(StatusCode::BAD_REQUEST, format!("bad fault rule: {e}")),
    };
    if !(0.0..=1.0).contains(&rule.probability) {
        return err(
            StatusCode::BAD_REQUEST,
            "probability must be within 0.0..=1.0".into(),
        );
    }
    c.add_api_fault(&service, rule.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({"service": service, "rule": rule})),
    )
        .into_response()
}

async fn faults_list(State(c): St) -> Response {
    axum::Json(json!(c.api_faults())).into_response()
}

async fn faults_clear_all(State(c): St) -> Response {
    c.clear_api_faults(None);
    StatusCode::NO_CONTENT.into_response()
}

async fn faults_clear(State(c): St, Path(service): Path<String>) -> Response {
    c.clear_api_faults(Some(&service));
    StatusCode::NO_CONTENT.into_response()
}

async fn counters(State(c): St) -> Response {
    axum::Json(json!({"totals": c.request_totals(), "paths": c.request_counts()})).into_response()
}

async fn counters_reset(State(c): St) -> Response {
    c.reset_request_counts();
    StatusCode::NO_CONTENT.into_response()
}

async fn bind(State(c): St, Path((cluster, pv)): Path<(String, String)>, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let node = body["node"].as_str().map(String::from);
    result(
        c.inject_bind_pv(&cluster, &pv, node.as_deref())
            .await
            .map(|_| json!({"pv": pv, "phase": "Bound"})),
    )
}

async fn unbind(State(c): St, Path((cluster, pv)): Path<(String, String)>, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let released = body["released"].as_bool().unwrap_or(false);
    let phase = if released { "Released" } else { "Available" };
    result(
        c.inject_unbind_pv(&cluster, &pv, released)
            .await
            .map(|_| json!({"pv": pv, "phase": phase})),
    )
}

async fn ready(State(c): St, Path((cluster, node)): Path<(String, String)>, b: Bytes) -> Response {
    let body = match body_json(&b) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let Some(ready) = body["ready"].as_bool() else {
        return err(
            StatusCode::BAD_REQUEST,
            "body must be {\"ready\": bool}".into(),
        );
    };
    result(
        c.inject_node_ready(&cluster, &node, ready)
            .await
            .map(|_| json!({"node": node, "ready": ready})),
    )
}
