//! The endpoint vnfkeeper's MgmtDriver script (`packaging/tacker/vnfkeeper_mgmt_driver.py`,
//! run by Tacker's conductor for the `Vnflcm` hooks of the package's VNFD) talks to: on the
//! notification listener (`tacker.listen`, `tacker.hook_path`), behind the same credentials as
//! the callback (HTTP Basic, or a Bearer token of vnfkeeper's own token endpoint) and TLS when
//! configured. The conductor may run on another host than vnfkeeper, as Tacker's notifications
//! do; a Unix socket would tie them to one host.
//!
//! - `POST <hook_path>`: one hook request (`vnfkeeper_core::mgmt_hook::parse`). Checked in this
//!   order, each failure without a side effect: credentials (401), size (413 above
//!   `max_body_kib`), content (400, a ProblemDetails naming each defective field). A valid one
//!   is recorded with the operation that runs it in one transaction
//!   (`Tx::receive_tacker_hook`) and answered `202` with the operation's id and `Location:
//!   <hook_path>/<id>`; an unfinished operation of the same hook of the same Tacker
//!   occurrence is joined, not repeated. A hook with nothing to run: `200`. A refusal: its
//!   ProblemDetails (409, 422).
//! - `GET <hook_path>/<id>`: the outcome: `202` while the operation is queued or runs, `200`
//!   once COMPLETED, its error's ProblemDetails (e.g. `409` while a PersistentVolume is Bound)
//!   once it failed — the failed operation then ends `FAILED` (Tacker's operation is what an
//!   operator retries; its hooks come again).
//!
//! Every connection is short (the listener's deadline): the script polls, it never holds a
//! request open while steps run.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::notifications::{Callback, bounded_body, invalid_body, problem, unauthorized};
use crate::store::{Db, HookOutcome, HookReceipt};
use vnfkeeper_core::mgmt_hook;
use vnfkeeper_core::model::{OpOccId, OperationState, Timestamp};

/// What the hook routes need: the callback's credentials and size limit, the database, and
/// the path (for `Location`).
#[derive(Clone)]
struct Hooks {
    callback: Arc<Callback>,
    db: Db,
    path: Arc<str>,
}

/// The routes on `path` (`POST`) and `path/{id}` (`GET`) over `db`, authenticated like the
/// callback (`callback`).
pub fn router(path: &str, callback: Arc<Callback>, db: Db) -> Router {
    let state = Hooks {
        callback,
        db,
        path: Arc::from(path),
    };
    Router::new()
        .route(path, post(receive))
        .route(&format!("{path}/{{id}}"), get(outcome))
        .with_state(state)
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

/// The answer for a hook's operation `id` in `o`.
fn answer(h: &Hooks, id: &OpOccId, o: &HookOutcome) -> Response {
    let body = |state: &str| {
        json!({
            "operationId": id.as_str(),
            "hook": o.hook.as_str(),
            "vnfLcmOpOccId": o.vnf_lcm_op_occ_id,
            "state": state,
        })
    };
    match o.state {
        OperationState::Completed => json_response(StatusCode::OK, body("COMPLETED")),
        OperationState::Failed | OperationState::RolledBack | OperationState::FailedTemp => {
            let (status, detail) = match &o.error {
                Some(e) => (
                    StatusCode::from_u16(e.status)
                        .ok()
                        .filter(|s| s.is_client_error() || s.is_server_error())
                        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    e.detail.clone(),
                ),
                None => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the operation failed".to_string(),
                ),
            };
            problem(status, format!("operation {id}: {detail}"), Vec::new())
        }
        s => {
            let mut r = json_response(StatusCode::ACCEPTED, body(s.as_str()));
            if let Ok(v) = HeaderValue::from_str(&format!("{}/{id}", h.path)) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
    }
}

/// `POST <hook_path>`: one hook request, recorded with its operation before the answer.
async fn receive(State(h): State<Hooks>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if !h.callback.authorized(&parts.headers) {
        crate::ratelog::refused(crate::ratelog::Refusal::TackerCredentials);
        return unauthorized(&h.callback.check);
    }
    let bytes = match bounded_body(
        &parts.headers,
        body,
        h.callback.max_body_bytes,
        "hook request",
    )
    .await
    {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let req = match mgmt_hook::parse(&bytes) {
        Ok(r) => r,
        Err(errors) => return invalid_body("hook request", errors),
    };
    let now = Timestamp(chrono::Utc::now());
    let receipt = h.db.write(|tx| {
        let r = tx.receive_tacker_hook(&req, now)?;
        let o = match &r {
            HookReceipt::Operation { op_id, .. } => tx.tacker_hook_outcome(op_id, now)?,
            _ => None,
        };
        Ok((r, o))
    });
    match receipt {
        Ok((HookReceipt::Operation { op_id, new }, Some(o))) => {
            tracing::info!(
                vnf_instance_id = %req.vnf_instance_id,
                tacker_op_occ_id = %req.vnf_lcm_op_occ_id,
                hook = req.hook.as_str(),
                vnf_lcm_op_occ_id = %op_id,
                joined = !new,
                "Tacker MgmtDriver hook {}",
                if new { "queued" } else { "joined" }
            );
            answer(&h, &op_id, &o)
        }
        Ok((HookReceipt::Operation { op_id, .. }, None)) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("operation {op_id} of the hook vanished"),
            Vec::new(),
        ),
        Ok((HookReceipt::Nothing(why), _)) => {
            tracing::info!(
                vnf_instance_id = %req.vnf_instance_id,
                tacker_op_occ_id = %req.vnf_lcm_op_occ_id,
                hook = req.hook.as_str(),
                reason = %why,
                "Tacker MgmtDriver hook: nothing to run"
            );
            json_response(
                StatusCode::OK,
                json!({"hook": req.hook.as_str(), "vnfLcmOpOccId": req.vnf_lcm_op_occ_id,
                       "state": "COMPLETED", "detail": why}),
            )
        }
        Ok((HookReceipt::Refused(p), _)) => {
            tracing::warn!(
                vnf_instance_id = %req.vnf_instance_id,
                tacker_op_occ_id = %req.vnf_lcm_op_occ_id,
                hook = req.hook.as_str(),
                reason = %p.detail,
                "Tacker MgmtDriver hook refused"
            );
            let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
            problem(status, p.detail, p.errors)
        }
        Err(e) => {
            tracing::error!(error = %e, hook = req.hook.as_str(), "Tacker MgmtDriver hook not recorded");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the hook could not be recorded",
                Vec::new(),
            )
        }
    }
}

/// `GET <hook_path>/<id>`: the outcome of a hook's operation.
async fn outcome(State(h): State<Hooks>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if !h.callback.authorized(&headers) {
        crate::ratelog::refused(crate::ratelog::Refusal::TackerCredentials);
        return unauthorized(&h.callback.check);
    }
    if let Err(why) = vnfkeeper_core::wire::rules::identifier(&id) {
        return problem(
            StatusCode::BAD_REQUEST,
            format!("the operation id {why}"),
            Vec::new(),
        );
    }
    let op_id = OpOccId::from(&id);
    let now = Timestamp(chrono::Utc::now());
    match h.db.write(|tx| tx.tacker_hook_outcome(&op_id, now)) {
        Ok(Some(o)) => answer(&h, &op_id, &o),
        Ok(None) => problem(
            StatusCode::NOT_FOUND,
            format!("no MgmtDriver hook runs as operation {id}"),
            Vec::new(),
        ),
        Err(e) => {
            tracing::error!(error = %e, "Tacker MgmtDriver hook outcome not read");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the outcome could not be read",
                Vec::new(),
            )
        }
    }
}
