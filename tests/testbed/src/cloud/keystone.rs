//! Keystone v3 (Identity API v3 reference): version documents and token issue with the
//! `password` and `application_credential` methods.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde_json::{Value, json};

use super::{ApiResult, Cloud, PROJECT_NAME, REGION, USER_NAME, heat_err};

/// Token lifetime.
const TOKEN_HOURS: i64 = 24;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/", get(root_versions))
        .route("/identity", get(versions))
        .route("/identity/", get(versions))
        .route("/identity/v3", get(version))
        .route("/identity/v3/", get(version))
        .route("/identity/v3/auth/tokens", post(issue).get(validate))
}

fn v3(c: &Cloud) -> Value {
    json!({
        "id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{}/identity/v3/", c.base)}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]
    })
}

async fn root_versions(State(c): State<Arc<Cloud>>) -> Response {
    let cat: Vec<Value> = c
        .catalog()
        .into_iter()
        .map(|(t, _, u)| json!({"type": t, "url": u}))
        .collect();
    axum::Json(json!({"testbed": "simulated OpenStack cloud", "catalog": cat})).into_response()
}

async fn versions(State(c): State<Arc<Cloud>>) -> Response {
    (
        StatusCode::MULTIPLE_CHOICES,
        axum::Json(json!({"versions": {"values": [v3(&c)]}})),
    )
        .into_response()
}

async fn version(State(c): State<Arc<Cloud>>) -> Response {
    axum::Json(json!({"version": v3(&c)})).into_response()
}

fn domain() -> Value {
    json!({"id": "default", "name": "Default"})
}

fn token_body(c: &Cloud, issued: chrono::DateTime<Utc>, expires: chrono::DateTime<Utc>) -> Value {
    token_body_by(c, issued, expires, "password")
}

/// A token body issued by authentication `method` (`password` or `application_credential`;
/// the latter also names the credential, as Keystone's token body does).
fn token_body_by(
    c: &Cloud,
    issued: chrono::DateTime<Utc>,
    expires: chrono::DateTime<Utc>,
    method: &str,
) -> Value {
    let catalog: Vec<Value> = c
        .catalog()
        .into_iter()
        .map(|(ty, name, url)| {
            let eps: Vec<Value> = ["public", "internal", "admin"]
                .iter()
                .map(|i| {
                    json!({"id": uuid::Uuid::new_v4().simple().to_string(), "interface": i,
                           "region": REGION, "region_id": REGION, "url": url})
                })
                .collect();
            json!({"endpoints": eps, "id": uuid::Uuid::new_v4().simple().to_string(), "type": ty, "name": name})
        })
        .collect();
    let f = "%Y-%m-%dT%H:%M:%S%.6fZ";
    let mut body = json!({"token": {
        "methods": [method],
        "user": {"id": c.user_id, "name": USER_NAME, "domain": domain(), "password_expires_at": null},
        "audit_ids": [uuid::Uuid::new_v4().simple().to_string()[..22].to_string()],
        "expires_at": expires.format(f).to_string(),
        "issued_at": issued.format(f).to_string(),
        "project": {"id": c.project_id, "name": PROJECT_NAME, "domain": domain()},
        "is_domain": false,
        "roles": [{"id": "r-admin", "name": "admin"}, {"id": "r-member", "name": "member"}, {"id": "r-reader", "name": "reader"}],
        "catalog": catalog,
    }});
    if method == "application_credential" {
        let a = &c.application_credential;
        body["token"]["application_credential"] =
            json!({"id": a.id, "name": a.name, "restricted": true});
    }
    body
}

fn unauthorized(msg: &str) -> super::ApiError {
    heat_err(401, "Unauthorized", msg)
}

/// `POST /identity/v3/auth/tokens` → 201 + `X-Subject-Token`. Method `password`: user
/// `admin` (by name in domain Default, or by id), project `testbed` (by name or id). Method
/// `application_credential` (Identity API v3, "Authenticating with an Application
/// Credential"): the credential by `id`, or by `name` with its owner as `user` (`id`, or `name`
/// and `domain`), and its `secret`; the token is scoped to the credential's project, and a
/// request that also asks for a scope is refused (401), as Keystone refuses it.
async fn issue(State(c): State<Arc<Cloud>>, axum::Json(body): axum::Json<Value>) -> ApiResult {
    let ident = &body["auth"]["identity"];
    let methods = ident["methods"].as_array().cloned().unwrap_or_default();
    if methods.iter().any(|m| m == "application_credential") {
        return issue_for_application_credential(&c, &body);
    }
    if !methods.iter().any(|m| m == "password") {
        return Err(unauthorized(
            "The testbed supports the password and application_credential auth methods.",
        ));
    }
    let user = &ident["password"]["user"];
    let name_ok = user["name"] == USER_NAME || user["id"] == c.user_id.as_str();
    let pw_ok = user["password"] == c.password.as_str();
    if !name_ok || !pw_ok {
        return Err(unauthorized(
            "The request you have made requires authentication.",
        ));
    }
    let scope = &body["auth"]["scope"]["project"];
    if !scope.is_null() && scope["name"] != PROJECT_NAME && scope["id"] != c.project_id.as_str() {
        return Err(unauthorized(&format!(
            "User {USER_NAME} has no access to project {scope}"
        )));
    }
    new_token(&c, "password")
}

/// Issues a token by `method`: 201, the token body and `X-Subject-Token`.
fn new_token(c: &Cloud, method: &str) -> ApiResult {
    let token = format!("gAAAAA{}", uuid::Uuid::new_v4().simple());
    let issued = Utc::now();
    let expires = issued + chrono::Duration::hours(TOKEN_HOURS);
    c.lock().tokens.insert(token.clone(), expires);
    let mut r = (
        StatusCode::CREATED,
        axum::Json(token_body_by(c, issued, expires, method)),
    )
        .into_response();
    r.headers_mut()
        .insert("x-subject-token", token.parse().expect("ascii token"));
    Ok(r)
}

/// The `application_credential` method of `POST /v3/auth/tokens`.
fn issue_for_application_credential(c: &Cloud, body: &Value) -> ApiResult {
    let a = &body["auth"]["identity"]["application_credential"];
    let known = &c.application_credential;
    let user = &a["user"];
    let owner_ok = user["id"] == c.user_id.as_str()
        || (user["name"] == USER_NAME
            && (user["domain"]["name"] == "Default" || user["domain"]["id"] == "default"));
    let named = if !a["id"].is_null() {
        a["id"] == known.id.as_str()
    } else {
        a["name"] == known.name.as_str() && owner_ok
    };
    if !named || a["secret"] != known.secret.as_str() {
        return Err(unauthorized(
            "The request you have made requires authentication.",
        ));
    }
    if !body["auth"]["scope"].is_null() {
        return Err(unauthorized(
            "Application credentials cannot request a scope.",
        ));
    }
    new_token(c, "application_credential")
}

/// `GET /identity/v3/auth/tokens` with `X-Subject-Token`: 200 and the token body, 404 if unknown.
async fn validate(State(c): State<Arc<Cloud>>, headers: axum::http::HeaderMap) -> ApiResult {
    let t = headers
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let exp = c.lock().tokens.get(t).copied();
    match exp {
        Some(exp) if exp > Utc::now() => {
            let mut r = axum::Json(token_body(
                &c,
                exp - chrono::Duration::hours(TOKEN_HOURS),
                exp,
            ))
            .into_response();
            r.headers_mut()
                .insert("x-subject-token", t.parse().expect("ascii token"));
            Ok(r)
        }
        _ => Err(heat_err(404, "NotFound", "Could not find token")),
    }
}
