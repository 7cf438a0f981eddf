//! The Tacker stand-in's VIM registry: the part of Tacker's v1 API (`/v1.0/vims`, the NFVO's
//! VIM resource) a Tacker MgmtDriver uses to register a Kubernetes cluster as a VIM, answered
//! with the field names, status codes and envelopes of Tacker 16.0.0:
//!
//! | request | answer | Tacker 16.0.0 source |
//! |---|---|---|
//! | `POST /tacker/v1.0/vims` `{"vim": {…}}` | 201 `{"vim": {…}}` | `tacker/api/v1/base.py` (create, `prepare_request_body`), `tacker/extensions/nfvo.py` (`RESOURCE_ATTRIBUTE_MAP['vims']`: which attributes are required, allowed, validated), `tacker/nfvo/nfvo_plugin.py` `create_vim`, `tacker/db/nfvo/nfvo_db_plugin.py` `create_vim`/`_make_vim_dict` |
//! | body without `vim`, a required attribute missing, an unknown one, one not allowed in POST, a value of the wrong type | 400 `HTTPBadRequest` with Tacker's messages (`Unable to find 'vim' in request body`, `Failed to parse request. Required attribute 'X' not specified`, `Unrecognized attribute(s) 'X'`, `Attribute 'X' not allowed in POST`, `Invalid input for X. Reason: …`) | `tacker/api/v1/base.py`, `tacker/api/v1/attributes.py` |
//! | `type` `kubernetes`: the cluster asked with the bearer token (`GET {auth_url}/api/`, then `GET {auth_url}/api/v1/namespaces`; TLS verified against `ssl_ca_cert` when given, else not verified) | 500 `VimUnauthorizedException` when the first call fails; 500 `HTTPInternalServerError` ("Request Failed: internal server error while processing your request.") when the second does; `placement_attr.regions` the namespaces | `tacker/nfvo/drivers/vim/kubernetes_driver.py` (`_validate_vim`: `get_api_versions`; `discover_placement_attr`: `list_namespace`), `tacker/common/container/kubernetes_utils.py` |
//! | same `name` in the same project | 409 `DuplicateEntity` | `nfvo_db_plugin.py` (unique `tenant_id`, `name`, `deleted_at`), `tacker/common/exceptions.py` |
//! | `GET /tacker/v1.0/vims[?attr=value…]` | 200 `{"vims": […]}` filtered on each attribute given | `tacker/api/v1/base.py` `_items` |
//! | `GET /tacker/v1.0/vims/{id}` | 200 `{"vim": {…}}`; unknown id **500** `VimNotFoundException` (not one of the v1 API's mapped faults) | `nfvo_db_plugin.py` `_get_resource`, `tacker/api/v1/base.py` `FAULT_MAP`, `tacker/api/api_common.py` `convert_exception_to_http_exc` |
//! | `DELETE /tacker/v1.0/vims/{id}` | 204; unknown id 500 `VimNotFoundException` | `nfvo_plugin.py` `delete_vim` |
//!
//! Errors are `{"TackerError": {"type", "message", "detail": ""}}` (`api_common.py`
//! `get_exception_data`). A VIM is answered as `_make_vim_dict` makes it: `status` `ACTIVE`,
//! `auth_cred` as the Kubernetes driver stores it (`auth_url`, `username` `"None"`,
//! `key_type`, the bearer token and `secret_uuid` masked `***` by oslo.utils'
//! `mask_dict_password`, `ssl_ca_cert` an opaque encrypted value, as Tacker's Fernet
//! encryption leaves it), `shared` hidden. Only `type` `kubernetes` with a `bearer_token` is
//! modelled: another type or credential is refused 400 (a stand-in limit, named in the
//! message). The caller's project is the testbed's.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::Cloud;
use super::state::new_id;

/// Prefix of Tacker's v1 VIM resource in the testbed's URL space.
pub const PREFIX: &str = "/tacker/v1.0/vims";

/// Attributes of `RESOURCE_ATTRIBUTE_MAP['vims']` a POST may carry, whether each has a
/// default (else it is required; `tenant_id` is filled from the caller's token).
const POST_ALLOWED: [(&str, bool); 9] = [
    ("tenant_id", true),
    ("type", false),
    ("auth_url", false),
    ("auth_cred", false),
    ("vim_project", false),
    ("name", false),
    ("description", true),
    ("is_default", true),
    ("extra", true),
];
/// Attributes of the map a POST must not carry.
const POST_REFUSED: [&str; 6] = [
    "id",
    "status",
    "placement_attr",
    "shared",
    "created_at",
    "updated_at",
];

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route(PREFIX, get(list).post(create))
        .route(&format!("{PREFIX}/{{id}}"), get(show).delete(delete))
}

/// A Tacker v1 error answer.
fn tacker_error(status: u16, kind: &str, message: impl Into<String>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        axum::Json(json!({"TackerError": {"type": kind, "message": message.into(), "detail": ""}})),
    )
        .into_response()
}

fn bad_request(message: impl Into<String>) -> Response {
    tacker_error(400, "HTTPBadRequest", message)
}

fn not_found(id: &str) -> Response {
    tacker_error(
        500,
        "VimNotFoundException",
        format!("Specified VIM id {id} is invalid. Please verify and pass a valid VIM id"),
    )
}

/// A stored VIM as `_make_vim_dict` answers it (`auth_cred` masked).
pub(crate) fn shown(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(cred) = v.get_mut("auth_cred").and_then(Value::as_object_mut) {
        for (k, val) in cred.iter_mut() {
            let lower = k.to_ascii_lowercase();
            if ["password", "secret", "token"]
                .iter()
                .any(|s| lower.contains(s))
            {
                *val = json!("***");
            }
        }
    }
    v
}

/// `Invalid input for …` of the validators named in the attribute map, or `None`.
fn invalid(attr: &str, v: &Value) -> Option<String> {
    let reason = match attr {
        "type" => match v.as_str() {
            Some(s) if !s.trim().is_empty() => None,
            Some(s) => Some(format!("'{s}' Blank strings are not permitted")),
            None => Some(format!("'{v}' is not a valid string")),
        },
        "auth_url" | "tenant_id" | "description" => {
            (!v.is_string()).then(|| format!("'{v}' is not a valid string"))
        }
        "name" => match v.as_str() {
            Some(s) if s.len() > 255 => Some(format!("'{s}' exceeds maximum length of 255")),
            Some(_) => None,
            None => Some(format!("'{v}' is not a valid string")),
        },
        "auth_cred" | "vim_project" => v
            .as_object()
            .is_none_or(Map::is_empty)
            .then(|| format!("'{v}' is not a valid dictionary or it is an empty dictionary")),
        "is_default" => (!v.is_boolean()).then(|| format!("'{v}' is not a valid boolean value")),
        "extra" => (!v.is_null() && !v.is_object())
            .then(|| format!("'{v}' is not a valid dictionary or it is an empty dictionary")),
        _ => None,
    }?;
    Some(format!("Invalid input for {attr}. Reason: {reason}."))
}

async fn create(State(c): State<Arc<Cloud>>, body: Bytes) -> Response {
    let Ok(Value::Object(mut top)) = serde_json::from_slice::<Value>(&body) else {
        return bad_request("Resource body required");
    };
    let Some(Value::Object(mut vim)) = top.remove("vim") else {
        return bad_request("Unable to find 'vim' in request body");
    };
    vim.entry("tenant_id")
        .or_insert_with(|| json!(c.project_id.clone()));
    let unknown: Vec<&str> = vim
        .keys()
        .map(String::as_str)
        .filter(|k| {
            *k != "project_id"
                && !POST_ALLOWED.iter().any(|(a, _)| a == k)
                && !POST_REFUSED.contains(k)
        })
        .collect();
    if !unknown.is_empty() {
        return bad_request(format!(
            "Unrecognized attribute(s) '{}'",
            unknown.join(", ")
        ));
    }
    for (attr, has_default) in POST_ALLOWED {
        if !has_default && !vim.contains_key(attr) {
            return bad_request(format!(
                "Failed to parse request. Required attribute '{attr}' not specified"
            ));
        }
    }
    if let Some(attr) = POST_REFUSED.iter().find(|a| vim.contains_key(**a)) {
        return bad_request(format!("Attribute '{attr}' not allowed in POST"));
    }
    for (attr, v) in &vim {
        if let Some(msg) = invalid(attr, v) {
            return bad_request(msg);
        }
    }
    let vim_type = vim["type"].as_str().unwrap_or_default().to_owned();
    let mut cred = vim["auth_cred"].as_object().cloned().unwrap_or_default();
    let Some(token) = cred
        .get("bearer_token")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return bad_request(
            "testbed Tacker stand-in: only kubernetes VIMs with a bearer_token are modelled",
        );
    };
    if vim_type != "kubernetes" {
        return bad_request("testbed Tacker stand-in: only kubernetes VIMs are modelled");
    }
    let auth_url = vim["auth_url"].as_str().unwrap_or_default().to_owned();
    let ca = cred
        .get("ssl_ca_cert")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && *s != "None")
        .map(str::to_owned);
    let regions = match ask_cluster(&auth_url, &token, ca.as_deref()).await {
        Ok(r) => r,
        Err(ClusterRefused::Unauthorized(message)) => {
            return tacker_error(500, "VimUnauthorizedException", message);
        }
        Err(ClusterRefused::Namespaces) => {
            return tacker_error(
                500,
                "HTTPInternalServerError",
                "Request Failed: internal server error while processing your request.",
            );
        }
    };
    let name = vim["name"].as_str().unwrap_or_default().to_owned();
    let tenant = vim["tenant_id"].as_str().unwrap_or_default().to_owned();
    let id = new_id();
    // As the Kubernetes driver stores the credentials (`register_vim`, `encode_vim_auth`).
    cred.insert("auth_url".into(), json!(auth_url));
    if !cred.contains_key("username") && !cred.contains_key("password") {
        cred.insert("username".into(), json!("None"));
    }
    cred.insert("bearer_token".into(), json!(opaque()));
    if ca.is_some() {
        cred.insert("ssl_ca_cert".into(), json!(opaque()));
    }
    cred.insert("key_type".into(), json!("barbican_key"));
    cred.insert("secret_uuid".into(), json!(new_id()));
    let stored = json!({
        "id": id,
        "type": vim_type,
        "tenant_id": tenant,
        "name": name,
        "description": vim.get("description").cloned().unwrap_or(json!("")),
        "placement_attr": {"regions": regions},
        "is_default": vim.get("is_default").cloned().unwrap_or(json!(false)),
        "created_at": super::state::ts(&chrono::Utc::now()),
        "updated_at": null,
        "extra": vim.get("extra").cloned().filter(Value::is_object).unwrap_or(json!({})),
        "auth_url": auth_url,
        "vim_project": vim["vim_project"],
        "auth_cred": cred,
        "status": "ACTIVE",
    });
    {
        let mut t = c.tacker();
        if t.vims
            .iter()
            .any(|v| v["tenant_id"] == tenant.as_str() && v["name"] == name.as_str())
        {
            return tacker_error(
                409,
                "DuplicateEntity",
                "vim already exist with given ['tenant_id', 'name', 'deleted_at']",
            );
        }
        t.vims.push(stored.clone());
    }
    (
        StatusCode::CREATED,
        axum::Json(json!({"vim": shown(&stored)})),
    )
        .into_response()
}

/// A value standing for what Tacker's Fernet encryption stores (never the secret itself).
fn opaque() -> String {
    format!("gAAAAA{}", new_id().replace('-', ""))
}

/// Why the cluster's API did not answer the VIM driver.
enum ClusterRefused {
    /// `get_api_versions` failed (`_validate_vim` → `VimUnauthorizedException`): the message.
    Unauthorized(String),
    /// `list_namespace` failed (not wrapped by the driver: an internal server error).
    Namespaces,
}

/// What Tacker's Kubernetes VIM driver asks the cluster before it stores the VIM: `GET
/// /api/` (the API versions), then `GET /api/v1/namespaces` (the placement regions), each
/// with `Authorization: Bearer <token>`.
async fn ask_cluster(
    auth_url: &str,
    token: &str,
    ca_pem: Option<&str>,
) -> Result<Vec<String>, ClusterRefused> {
    let mut b = reqwest::Client::builder().timeout(Duration::from_secs(10));
    b = match ca_pem.map(|p| reqwest::Certificate::from_pem(p.as_bytes())) {
        Some(Ok(ca)) => b.tls_built_in_root_certs(false).add_root_certificate(ca),
        Some(Err(e)) => {
            return Err(ClusterRefused::Unauthorized(format!(
                "ssl_ca_cert is not a PEM certificate: {e}"
            )));
        }
        None => b.danger_accept_invalid_certs(true),
    };
    let client = b
        .build()
        .map_err(|e| ClusterRefused::Unauthorized(e.to_string()))?;
    let base = auth_url.trim_end_matches('/');
    let get = |path: &str| {
        client
            .get(format!("{base}{path}"))
            .header("authorization", format!("Bearer {token}"))
            .header("accept", "application/json")
            .send()
    };
    // The Kubernetes Python client's ApiException text: "(status)\nReason: …\n…".
    match get("/api/").await {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => {
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            return Err(ClusterRefused::Unauthorized(format!(
                "({})\nReason: {}\nHTTP response body: {body}\n",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            )));
        }
        Err(e) => return Err(ClusterRefused::Unauthorized(e.to_string())),
    }
    let list: Value = match get("/api/v1/namespaces").await {
        Ok(r) if r.status().is_success() => {
            r.json().await.map_err(|_| ClusterRefused::Namespaces)?
        }
        _ => return Err(ClusterRefused::Namespaces),
    };
    Ok(list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

async fn list(
    State(c): State<Arc<Cloud>>,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    let vims: Vec<Value> = c
        .tacker()
        .vims
        .iter()
        .filter(|v| {
            q.iter()
                .filter(|(k, _)| *k != "fields")
                .all(|(k, want)| match &v[k.as_str()] {
                    Value::String(s) => s == want,
                    Value::Bool(b) => b.to_string() == *want,
                    _ => false,
                })
        })
        .map(shown)
        .collect();
    axum::Json(json!({ "vims": vims })).into_response()
}

async fn show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Response {
    match c.tacker().vims.iter().find(|v| v["id"] == id.as_str()) {
        Some(v) => axum::Json(json!({"vim": shown(v)})).into_response(),
        None => not_found(&id),
    }
}

async fn delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Response {
    let mut t = c.tacker();
    let before = t.vims.len();
    t.vims.retain(|v| v["id"] != id.as_str());
    if t.vims.len() == before {
        return not_found(&id);
    }
    StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_masked_as_oslo_masks_them() {
        let v = json!({"auth_cred": {"bearer_token": "eyJ.x.y", "secret_uuid": "u",
                       "ssl_ca_cert": "gAAAAAx", "username": "None", "auth_url": "https://a",
                       "password": null}});
        let s = shown(&v);
        assert_eq!(s["auth_cred"]["bearer_token"], "***");
        assert_eq!(s["auth_cred"]["secret_uuid"], "***");
        assert_eq!(s["auth_cred"]["ssl_ca_cert"], "gAAAAAx");
        assert_eq!(s["auth_cred"]["username"], "None");
    }

    #[test]
    fn attributes_are_validated_with_tackers_messages() {
        assert_eq!(
            invalid("auth_cred", &json!({})).as_deref(),
            Some(
                "Invalid input for auth_cred. Reason: '{}' is not a valid dictionary or it is an empty dictionary."
            )
        );
        assert!(invalid("type", &json!(" ")).is_some());
        assert!(invalid("name", &json!("x".repeat(256))).is_some());
        assert_eq!(invalid("vim_project", &json!({"name": ""})), None);
        assert_eq!(invalid("extra", &Value::Null), None);
    }
}
