//! The Tacker stand-in: the part of OpenStack Tacker's VNF LCM API v2 (`/vnflcm/v2`, ETSI GS NFV-SOL
//! 003 v3.3.1 as Tacker 16.0.0 implements it) that companion mode talks to, running each
//! operation against the testbed's own Heat, and sending LCM notifications to subscribers.
//!
//! It is a stand-in, not Tacker: it has no VNF packages API (a test registers a package's
//! BaseHOT, files and stack parameters by `vnfdId` with [`Cloud::tacker_register_package`] or
//! `POST /testbed/tacker/packages`), no grants, no MgmtDriver, no LCM coordination.
//!
//! Catalog type `nfv-orchestration`, URL `{base}/tacker`; every request needs a Keystone token
//! (`X-Auth-Token`) and the header `Version` (Tacker's API version check).
//!
//! | method + path under `/tacker/vnflcm/v2` | answer |
//! |---|---|
//! | `POST /subscriptions` (`LccnSubscriptionRequest`) | the callback test first: `GET callbackUri` with the subscription's authentication (BASIC, or OAUTH2_CLIENT_CREDENTIALS: a token from `tokenEndpoint` first, then Bearer) must answer 204, else 400; then 201 + `Location` and the `LccnSubscription` (never its `authentication`) |
//! | `GET /subscriptions`, `GET /subscriptions/{id}` | 200 (list in creation order) / 404 |
//! | `DELETE /subscriptions/{id}` | 204 / 404 |
//! | `POST /vnf_instances` (`CreateVnfRequest`: `vnfdId` of a registered package) | 201 + `Location`, `VnfInstance` `NOT_INSTANTIATED`; `VnfIdentifierCreationNotification` |
//! | `GET /vnf_instances`, `GET /vnf_instances/{id}` | 200: `instantiatedVnfInfo` (when instantiated) with `vnfcResourceInfo` and `vnfcInfo` from the stack's servers |
//! | `DELETE /vnf_instances/{id}` | 204 (409 while `INSTANTIATED`); `VnfIdentifierDeletionNotification` |
//! | `POST /vnf_instances/{id}/instantiate` (`flavourId` required) | 202 + `Location` of the op occ; creates stack `vnf-{id}` |
//! | `POST /vnf_instances/{id}/heal` (`vnfcInstanceId`: `vnfcInfo` ids; none = every VNFC) | 202; marks the servers' resources unhealthy, then a stack UPDATE |
//! | `POST /vnf_instances/{id}/scale` (`type` `SCALE_OUT`/`SCALE_IN`, `aspectId` of the package, `numberOfSteps` default 1) | 202 (400 for an unknown aspect or a level beyond 0..); the `desired_capacity` of the aspect's VDUs changed, then a stack UPDATE; `scaleStatus` in the instance |
//! | `POST /vnf_instances/{id}/terminate` | 202; deletes the stack |
//! | `GET /vnf_lcm_op_occs` (`filter=(eq,f,v)` / `(in,f,v1,v2)` on `vnfInstanceId`, `operationState`, `operation`, `id`, joined by `;`; `all_fields`) | 200 |
//! | `GET /vnf_lcm_op_occs/{id}` | 200 (every field) / 404 |
//!
//! The three lists are paged as Tacker pages them when its `*_page_size` options are set
//! ([`Cloud::tacker_set_page_size`]): `nextpage_opaque_marker` and `Link: <…>;rel="next"`.
//!
//! An operation is answered 202 and then runs on its own task: `STARTING`, `PROCESSING`, then
//! `COMPLETED` or `FAILED_TEMP` (with `error`), each state notified
//! (`VnfLcmOperationOccurrenceNotification`, `notificationStatus` `START` for `STARTING`, `RESULT`
//! otherwise) to every subscription whose `filter` matches (SOL003 §5.5.3.12: instance filter,
//! `notificationTypes`, `operationTypes`, `operationStates`), once, no retry — as Tacker v2.
//! A second operation on an instance whose operation is `STARTING` or `PROCESSING` is 409.
//!
//! Fault switches ([`NotifyFaults`], `POST /testbed/tacker/notifications`): drop a share of the
//! notifications, send a share twice, delay every one, and reorder them (a random extra delay per
//! delivery). `GET /testbed/tacker/notifications` shows the switches and the delivery counters.
//!
//! Tacker's v1 VIM resource (`/tacker/v1.0/vims`) is answered by `super::tacker_vims`.
//!
//! Not answered: `change_ext_conn`, `change_vnfpkg`, `retry`/`rollback`/`fail` of an op
//! occ, `PATCH` of an instance, mTLS authentication (`OAUTH2_CLIENT_CERT`).
//!
//! Like Tacker v2 the stand-in fetches a new OAuth 2.0 token before every request to a
//! subscriber (the callback test and each notification). HTTPS subscribers are verified
//! against the system roots, or only against the CA a test sets with
//! [`Cloud::tacker_set_notification_ca`].

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::Cloud;
use super::heat::engine::{converge, delete_stack, insert_stack};
use super::heat::template::parse_template;
use super::state::{new_id, random_unit};

/// Prefix of the API in the testbed's URL space.
pub const PREFIX: &str = "/tacker/vnflcm/v2";

/// A VNF package as the stand-in knows it: what instantiate gives Heat.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StandInPackage {
    /// The VNFD id Tacker would have read from the package.
    #[serde(rename = "vnfdId")]
    pub vnfd_id: String,
    /// The top-level BaseHOT (object or YAML string).
    pub template: Value,
    /// Nested templates by name (as Heat's `files`).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Stack parameters (e.g. `nfv`) given to Heat at instantiate.
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// Scaling aspects (what the VNFD's `ScalingAspects` and `VduScalingAspectDeltas` would
    /// say): aspect id → VDU → VNFCs added per step. Scale changes
    /// `nfv.VDU.<vdu>.desired_capacity` by `delta × numberOfSteps` and updates the stack.
    #[serde(default)]
    pub aspects: BTreeMap<String, BTreeMap<String, u32>>,
    /// The package's MgmtDriver, run by **Tacker's own code**: when set, each operation runs
    /// its `<operation>_start` hook after `PROCESSING` and before its stack work, and its
    /// `<operation>_end` hook after it, through Tacker 16.0.0's
    /// `VnfLcmDriverV2._exec_mgmt_driver_script` (`tests/tacker/mgmt/conductor.py` in Tacker's
    /// venv), which runs the script the package's VNFD names for the hook, if any. A hook that
    /// fails ends the operation `FAILED_TEMP` with Tacker's error (`MgmtDriverExecutionFailed`,
    /// 422) as its `error`, as Tacker's conductor does; a failed `*_start` leaves the stack
    /// untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mgmt_driver: Option<MgmtDriverRun>,
}

/// How the stand-in runs a package's MgmtDriver hooks through Tacker's code.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MgmtDriverRun {
    /// The python of Tacker's venv (`scripts/tacker-venv`).
    pub python: std::path::PathBuf,
    /// `tests/tacker/mgmt/conductor.py`.
    pub conductor: std::path::PathBuf,
    /// The unpacked VNF package (`TOSCA-Metadata/`, `Definitions/`, `Scripts/`).
    pub csar_dir: std::path::PathBuf,
    /// Environment of the conductor process (and so of the script it runs).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Notification fault switches; the default delivers every notification once, at once.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NotifyFaults {
    /// Share of notifications never sent, 0.0–1.0 (1.0 = delivery switched off).
    #[serde(default)]
    pub drop: f64,
    /// Share of notifications sent twice (same body, same `id`), 0.0–1.0.
    #[serde(default)]
    pub duplicate: f64,
    /// Delay before every delivery, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Extra random delay per delivery, uniform in 0..`reorder_ms` milliseconds: later
    /// notifications may overtake earlier ones.
    #[serde(default)]
    pub reorder_ms: u64,
}

/// Delivery counters.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct NotifyCounters {
    /// Notifications generated for a matching subscription (before faults).
    pub generated: u64,
    /// Dropped by the `drop` switch.
    pub dropped: u64,
    /// POSTs sent (duplicates included).
    pub sent: u64,
    /// POSTs answered 204.
    pub answered_204: u64,
    /// POSTs answered otherwise or not answered.
    pub failed: u64,
    /// Deliveries scheduled and not finished (waiting for their delay or their answer).
    pub pending: u64,
}

#[derive(Clone, Debug)]
struct Subscription {
    id: String,
    callback_uri: String,
    filter: Option<Value>,
    verbosity: String,
    auth: Option<SubAuth>,
}

/// A subscription's `authentication` (SOL013 §8.3.4), as Tacker v2 uses it to send.
#[derive(Clone, Debug)]
enum SubAuth {
    /// `BASIC`: `paramsBasic`.
    Basic { user: String, password: String },
    /// `OAUTH2_CLIENT_CREDENTIALS`: `paramsOauth2ClientCredentials`. Before each request a
    /// token is fetched from `token_endpoint` (`POST grant_type=client_credentials`, the client
    /// credentials by HTTP Basic), then sent as `Authorization: Bearer`; a failed fetch sends
    /// the request without `Authorization` (as Tacker's OAuth2 plugin, which logs and goes on).
    Oauth2 {
        client_id: String,
        client_password: String,
        token_endpoint: String,
    },
}

#[derive(Clone, Debug)]
struct Instance {
    id: String,
    name: Option<String>,
    description: Option<String>,
    vnfd_id: String,
    metadata: Option<Value>,
    instantiated: bool,
    flavour_id: Option<String>,
    stack_id: Option<String>,
    /// Scale level per aspect (instantiate: 0 for each aspect of the package).
    scale: BTreeMap<String, u32>,
}

#[derive(Clone, Debug)]
struct OpOcc {
    id: String,
    state: &'static str,
    entered: String,
    start: String,
    instance: String,
    operation: &'static str,
    params: Value,
    error: Option<Value>,
}

/// The stand-in's records, behind its own lock (never held with the cloud's).
#[derive(Default)]
pub struct TackerState {
    packages: BTreeMap<String, StandInPackage>,
    subscriptions: Vec<Subscription>,
    instances: BTreeMap<String, Instance>,
    occs: Vec<OpOcc>,
    /// Entries per page of the lists (Tacker's `vnf_instance_page_size`,
    /// `lcmocc_page_size`, `subscription_page_size`); 0: no paging (Tacker's default).
    page_size: usize,
    faults: NotifyFaults,
    counters: NotifyCounters,
    /// The HTTP client of callback tests, notifications and token requests; with a CA set by
    /// [`Cloud::tacker_set_notification_ca`], HTTPS servers are verified against it only
    /// (Tacker's `[v2_vnfm] notification_verify_cert` and `notification_ca_cert_file`).
    client: Option<reqwest::Client>,
    /// OAuth 2.0 token requests answered 200 / otherwise.
    tokens: (u64, u64),
    /// The VIMs of Tacker's v1 API (`super::tacker_vims`), as stored, in creation order.
    pub(crate) vims: Vec<Value>,
}

impl Cloud {
    pub(crate) fn tacker(&self) -> MutexGuard<'_, TackerState> {
        self.tacker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers (or replaces) a package by its `vnfdId`. Errors: a template Heat would refuse.
    pub fn tacker_register_package(&self, pkg: StandInPackage) -> anyhow::Result<()> {
        parse_template(&pkg.template).map_err(|e| anyhow::anyhow!("template: {e}"))?;
        self.tacker().packages.insert(pkg.vnfd_id.clone(), pkg);
        Ok(())
    }

    /// Sets the notification fault switches.
    pub fn tacker_set_notify_faults(&self, f: NotifyFaults) {
        self.tacker().faults = f;
    }

    /// Verifies the TLS of subscribers (callback tests, notifications, token endpoints) against
    /// the CA certificate `ca_pem` (PEM) only. Errors: not a PEM certificate.
    pub fn tacker_set_notification_ca(&self, ca_pem: &[u8]) -> anyhow::Result<()> {
        let ca = reqwest::Certificate::from_pem(ca_pem)?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .build()?;
        self.tacker().client = Some(client);
        Ok(())
    }

    /// The `tokenEndpoint` of each subscription's OAUTH2_CLIENT_CREDENTIALS authentication, in
    /// creation order (`None`: BASIC or none).
    pub fn tacker_subscription_token_endpoints(&self) -> Vec<Option<String>> {
        self.tacker()
            .subscriptions
            .iter()
            .map(|s| match &s.auth {
                Some(SubAuth::Oauth2 { token_endpoint, .. }) => Some(token_endpoint.clone()),
                _ => None,
            })
            .collect()
    }

    /// OAuth 2.0 token requests so far: (answered 200 with a token, refused or failed).
    pub fn tacker_token_requests(&self) -> (u64, u64) {
        self.tacker().tokens
    }

    /// The delivery counters so far.
    pub fn tacker_notify_counters(&self) -> NotifyCounters {
        self.tacker().counters.clone()
    }

    /// Ids of the subscriptions, in creation order.
    pub fn tacker_subscription_ids(&self) -> Vec<String> {
        self.tacker()
            .subscriptions
            .iter()
            .map(|s| s.id.clone())
            .collect()
    }

    /// Pages the lists (`vnf_instances`, `vnf_lcm_op_occs`, `subscriptions`) by `n` entries,
    /// as Tacker does with its `*_page_size` options; 0 turns paging off.
    pub fn tacker_set_page_size(&self, n: usize) {
        self.tacker().page_size = n;
    }

    /// Deletes a subscription behind its owner's back; false when unknown.
    pub fn tacker_delete_subscription(&self, id: &str) -> bool {
        let mut t = self.tacker();
        let before = t.subscriptions.len();
        t.subscriptions.retain(|s| s.id != id);
        t.subscriptions.len() != before
    }

    /// The VIMs registered through `/v1.0/vims`, as Tacker would answer them (`auth_cred`
    /// masked), in creation order.
    pub fn tacker_vims(&self) -> Vec<Value> {
        self.tacker()
            .vims
            .iter()
            .map(super::tacker_vims::shown)
            .collect()
    }

    /// `(operation, operationState)` of every op occ, in creation order, by id.
    pub fn tacker_op_occs(&self) -> Vec<(String, String, String)> {
        self.tacker()
            .occs
            .iter()
            .map(|o| (o.id.clone(), o.operation.to_string(), o.state.to_string()))
            .collect()
    }
}

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    let p = PREFIX;
    Router::new()
        .route(
            &format!("{p}/subscriptions"),
            get(subscription_list).post(subscription_create),
        )
        .route(
            &format!("{p}/subscriptions/{{id}}"),
            get(subscription_show).delete(subscription_delete),
        )
        .route(
            &format!("{p}/vnf_instances"),
            get(instance_list).post(instance_create),
        )
        .route(
            &format!("{p}/vnf_instances/{{id}}"),
            get(instance_show).delete(instance_delete),
        )
        .route(&format!("{p}/vnf_instances/{{id}}/{{action}}"), post(lcm))
        .route(&format!("{p}/vnf_lcm_op_occs"), get(occ_list))
        .route(&format!("{p}/vnf_lcm_op_occs/{{id}}"), get(occ_show))
        .route("/testbed/tacker/packages", post(admin_package))
        .route(
            "/testbed/tacker/notifications",
            get(admin_notify_show).post(admin_notify_set),
        )
}

/// A SOL013 ProblemDetails answer: status and `detail`.
#[derive(Debug)]
pub struct Problem(u16, String);

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.0).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            code,
            axum::Json(json!({
                "status": self.0,
                "title": code.canonical_reason().unwrap_or(""),
                "detail": self.1,
            })),
        )
            .into_response()
    }
}

fn problem(status: u16, detail: impl Into<String>) -> Problem {
    Problem(status, detail.into())
}

type Answer = Result<Response, Problem>;

fn check_version(h: &HeaderMap) -> Result<(), Problem> {
    match h.get("version").and_then(|v| v.to_str().ok()) {
        Some(v) if v.starts_with("2.") => Ok(()),
        Some(v) => Err(problem(406, format!("Version {v} is not supported."))),
        None => Err(problem(400, "'Version' HTTP header missing.")),
    }
}

fn body(b: &Bytes) -> Result<Value, Problem> {
    serde_json::from_slice::<Value>(b)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| problem(400, "The request body is not a JSON object."))
}

fn base(c: &Cloud) -> String {
    format!("{}{PREFIX}", c.base)
}

fn now() -> String {
    super::state::ts(&Utc::now())
}

/// An op occ's `startTime`/`stateEnteredTime` as the real Tacker 16.0.0 answers them: read back
/// from its database, UTC without an offset and with microseconds (`2026-11-28T04:42:34.000000`),
/// not the RFC 3339 form SOL013 asks for.
fn occ_time() -> String {
    Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

fn created(location: String, v: Value) -> Response {
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(v),
    )
        .into_response()
}

/// A list answer as Tacker pages it (`controller/vnflcm_view.py` `Pager`): with a page size,
/// the entries after the one whose `id` is the query's `nextpage_opaque_marker` (400 for an
/// unknown marker), at most `page_size` of them, and when more follow a `Link` header
/// `<request URL with nextpage_opaque_marker=<last id>>;rel="next"`.
fn paged(c: &Cloud, items: Vec<Value>, uri: &axum::http::Uri) -> Answer {
    let size = c.tacker().page_size;
    let marker = uri.query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("nextpage_opaque_marker="))
            .map(str::to_owned)
    });
    if size == 0 {
        return Ok(axum::Json(items).into_response());
    }
    let start = match &marker {
        None => 0,
        Some(m) => {
            items
                .iter()
                .position(|i| i["id"].as_str() == Some(m.as_str()))
                .ok_or_else(|| problem(400, format!("Paging marker value {m} is invalid.")))?
                + 1
        }
    };
    let page: Vec<Value> = items.iter().skip(start).take(size).cloned().collect();
    let more = start + page.len() < items.len();
    let mut resp = axum::Json(page.clone()).into_response();
    if more && let Some(last) = page.last().and_then(|i| i["id"].as_str()) {
        let next = format!("nextpage_opaque_marker={last}");
        let query = match (uri.query(), &marker) {
            (Some(q), Some(m)) => q.replace(&format!("nextpage_opaque_marker={m}"), &next),
            (Some(q), None) => format!("{q}&{next}"),
            (None, _) => next,
        };
        let url = format!("{}{}?{query}", c.base, uri.path());
        if let Ok(v) = axum::http::HeaderValue::from_str(&format!("<{url}>;rel=\"next\"")) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
    Ok(resp)
}

// --- subscriptions -------------------------------------------------------------------------------

fn subscription_json(c: &Cloud, s: &Subscription) -> Value {
    let mut v = json!({
        "id": s.id,
        "callbackUri": s.callback_uri,
        "verbosity": s.verbosity,
        "_links": {"self": {"href": format!("{}/subscriptions/{}", base(c), s.id)}},
    });
    if let Some(f) = &s.filter {
        v["filter"] = f.clone();
    }
    v
}

fn http(c: &Cloud) -> reqwest::Client {
    static C: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = &c.tacker().client {
        return client.clone();
    }
    C.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("HTTP client")
    })
    .clone()
}

/// `rb` with the subscription's authentication: Basic, or a Bearer token fetched now from the
/// token endpoint (RFC 6749 §4.4.2 with HTTP Basic client authentication, §2.3.1).
async fn authorize(
    c: &Cloud,
    rb: reqwest::RequestBuilder,
    auth: &Option<SubAuth>,
) -> reqwest::RequestBuilder {
    match auth {
        None => rb,
        Some(SubAuth::Basic { user, password }) => rb.basic_auth(user, Some(password)),
        Some(SubAuth::Oauth2 {
            client_id,
            client_password,
            token_endpoint,
        }) => {
            let answer = http(c)
                .post(token_endpoint)
                .basic_auth(client_id, Some(client_password))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(header::ACCEPT, "application/json")
                .body("grant_type=client_credentials")
                .send()
                .await;
            let token = match answer {
                Ok(r) if r.status() == StatusCode::OK => r
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["access_token"].as_str().map(str::to_string)),
                _ => None,
            };
            let mut t = c.tacker();
            match token {
                Some(token) => {
                    t.tokens.0 += 1;
                    rb.bearer_auth(token)
                }
                None => {
                    t.tokens.1 += 1;
                    rb
                }
            }
        }
    }
}

async fn subscription_create(State(c): State<Arc<Cloud>>, h: HeaderMap, b: Bytes) -> Answer {
    check_version(&h)?;
    let req = body(&b)?;
    let Some(uri) = req["callbackUri"].as_str().map(str::to_string) else {
        return Err(problem(400, "'callbackUri' is a required property"));
    };
    let auth = match req.get("authentication") {
        None | Some(Value::Null) => None,
        Some(a) => {
            let types: Vec<&str> = a["authType"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match types.as_slice() {
                ["BASIC"] => match (
                    a["paramsBasic"]["userName"].as_str(),
                    a["paramsBasic"]["password"].as_str(),
                ) {
                    (Some(u), Some(p)) => Some(SubAuth::Basic {
                        user: u.to_string(),
                        password: p.to_string(),
                    }),
                    _ => {
                        return Err(problem(400, "paramsBasic must have userName and password"));
                    }
                },
                ["OAUTH2_CLIENT_CREDENTIALS"] => {
                    let o = &a["paramsOauth2ClientCredentials"];
                    match (
                        o["clientId"].as_str(),
                        o["clientPassword"].as_str(),
                        o["tokenEndpoint"].as_str(),
                    ) {
                        (Some(i), Some(p), Some(t)) => Some(SubAuth::Oauth2 {
                            client_id: i.to_string(),
                            client_password: p.to_string(),
                            token_endpoint: t.to_string(),
                        }),
                        _ => {
                            return Err(problem(
                                400,
                                "paramsOauth2ClientCredentials must have clientId, clientPassword and tokenEndpoint",
                            ));
                        }
                    }
                }
                _ => {
                    return Err(problem(
                        400,
                        "the stand-in supports authType [\"BASIC\"] or [\"OAUTH2_CLIENT_CREDENTIALS\"]",
                    ));
                }
            }
        }
    };
    let filter = req.get("filter").filter(|f| !f.is_null()).cloned();
    if filter.as_ref().is_some_and(|f| !f.is_object()) {
        return Err(problem(400, "'filter' must be an object"));
    }
    // The callback test (Tacker's `test_callback_uri`): GET, expecting 204.
    let rb = authorize(&c, http(&c).get(&uri), &auth).await;
    match rb.send().await {
        Ok(r) if r.status() == StatusCode::NO_CONTENT => {}
        Ok(r) => {
            return Err(problem(
                400,
                format!(
                    "callbackUri {uri} answered the test GET with {}, not 204",
                    r.status().as_u16()
                ),
            ));
        }
        Err(e) => {
            return Err(problem(
                400,
                format!("callbackUri {uri} did not answer the test GET: {e}"),
            ));
        }
    }
    let s = Subscription {
        id: new_id(),
        callback_uri: uri,
        filter,
        verbosity: req["verbosity"].as_str().unwrap_or("FULL").to_string(),
        auth,
    };
    let v = subscription_json(&c, &s);
    let loc = format!("{}/subscriptions/{}", base(&c), s.id);
    c.tacker().subscriptions.push(s);
    Ok(created(loc, v))
}

async fn subscription_list(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    uri: axum::http::Uri,
) -> Answer {
    check_version(&h)?;
    let subs = c.tacker().subscriptions.clone();
    let v: Vec<Value> = subs.iter().map(|s| subscription_json(&c, s)).collect();
    paged(&c, v, &uri)
}

async fn subscription_show(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    check_version(&h)?;
    let s = c
        .tacker()
        .subscriptions
        .iter()
        .find(|s| s.id == id)
        .cloned();
    match s {
        Some(s) => Ok(axum::Json(subscription_json(&c, &s)).into_response()),
        None => Err(problem(404, format!("LccnSubscription {id} not found."))),
    }
}

async fn subscription_delete(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    check_version(&h)?;
    if c.tacker_delete_subscription(&id) {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(problem(404, format!("LccnSubscription {id} not found.")))
    }
}

// --- notifications -------------------------------------------------------------------------------

fn strs(v: &Value) -> Option<Vec<&str>> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
}

/// Whether a subscription's filter matches (SOL003 §5.5.3.12; Tacker's `get_matched_subscs`).
fn matches(s: &Subscription, inst: &Instance, ntype: &str, op: Option<(&str, &str)>) -> bool {
    let Some(f) = &s.filter else {
        return true;
    };
    let i = &f["vnfInstanceSubscriptionFilter"];
    if let Some(ids) = strs(&i["vnfdIds"])
        && !ids.contains(&inst.vnfd_id.as_str())
    {
        return false;
    }
    if let Some(ids) = strs(&i["vnfInstanceIds"])
        && !ids.contains(&inst.id.as_str())
    {
        return false;
    }
    if let Some(names) = strs(&i["vnfInstanceNames"])
        && !inst.name.as_deref().is_some_and(|n| names.contains(&n))
    {
        return false;
    }
    if let Some(t) = strs(&f["notificationTypes"])
        && !t.contains(&ntype)
    {
        return false;
    }
    if let Some((op, state)) = op {
        if let Some(t) = strs(&f["operationTypes"])
            && !t.contains(&op)
        {
            return false;
        }
        if let Some(t) = strs(&f["operationStates"])
            && !t.contains(&state)
        {
            return false;
        }
    }
    true
}

/// Sends a notification to every matching subscription, through the fault switches. `make`
/// builds the body for one subscription (its id and links go in).
fn notify(
    c: &Arc<Cloud>,
    inst: &Instance,
    ntype: &str,
    op: Option<(&str, &str)>,
    make: impl Fn(&Subscription) -> Value,
) {
    let (targets, faults) = {
        let mut t = c.tacker();
        let targets: Vec<(Subscription, Value)> = t
            .subscriptions
            .iter()
            .filter(|s| matches(s, inst, ntype, op))
            .map(|s| (s.clone(), make(s)))
            .collect();
        t.counters.generated += targets.len() as u64;
        (targets, t.faults.clone())
    };
    for (s, body) in targets {
        if faults.drop > 0.0 && random_unit() < faults.drop {
            c.tacker().counters.dropped += 1;
            continue;
        }
        let copies = if faults.duplicate > 0.0 && random_unit() < faults.duplicate {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let extra = if faults.reorder_ms > 0 {
                (random_unit() * faults.reorder_ms as f64) as u64
            } else {
                0
            };
            let delay = Duration::from_millis(faults.delay_ms + extra);
            let (c, s, body) = (c.clone(), s.clone(), body.clone());
            c.tacker().counters.pending += 1;
            tokio::spawn(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                c.tacker().counters.sent += 1;
                let rb = http(&c).post(&s.callback_uri).json(&body);
                let rb = authorize(&c, rb, &s.auth).await;
                let ok = matches!(rb.send().await, Ok(r) if r.status() == StatusCode::NO_CONTENT);
                let mut t = c.tacker();
                t.counters.pending -= 1;
                if ok {
                    t.counters.answered_204 += 1;
                } else {
                    t.counters.failed += 1;
                }
            });
        }
    }
}

fn identifier_notification(c: &Cloud, inst: &Instance, s: &Subscription, ntype: &str) -> Value {
    json!({
        "id": new_id(),
        "notificationType": ntype,
        "subscriptionId": s.id,
        "timeStamp": now(),
        "vnfInstanceId": inst.id,
        "_links": {
            "vnfInstance": {"href": format!("{}/vnf_instances/{}", base(c), inst.id)},
            "subscription": {"href": format!("{}/subscriptions/{}", base(c), s.id)},
        },
    })
}

fn occ_notification(c: &Cloud, o: &OpOcc, s: &Subscription) -> Value {
    let mut v = json!({
        "id": new_id(),
        "notificationType": "VnfLcmOperationOccurrenceNotification",
        "subscriptionId": s.id,
        "timeStamp": now(),
        "notificationStatus": if o.state == "STARTING" { "START" } else { "RESULT" },
        "operationState": o.state,
        "vnfInstanceId": o.instance,
        "operation": o.operation,
        "isAutomaticInvocation": false,
        "verbosity": s.verbosity,
        "vnfLcmOpOccId": o.id,
        "_links": {
            "vnfInstance": {"href": format!("{}/vnf_instances/{}", base(c), o.instance)},
            "subscription": {"href": format!("{}/subscriptions/{}", base(c), s.id)},
            "vnfLcmOpOcc": {"href": format!("{}/vnf_lcm_op_occs/{}", base(c), o.id)},
        },
    });
    if let Some(e) = &o.error {
        v["error"] = e.clone();
    }
    v
}

// --- VNF instances -------------------------------------------------------------------------------

/// The servers of a stack tree: (VDU = resource name, server id), in creation order.
fn stack_servers(c: &Cloud, stack_id: &str) -> Vec<(String, String)> {
    let inner = c.lock();
    let mut out: Vec<(u64, String, String)> = inner
        .stacks
        .values()
        .filter(|s| s.top == stack_id && s.deleted.is_none())
        .flat_map(|s| s.resources.iter())
        .filter(|r| r.rtype == "OS::Nova::Server" && !r.physical_id.is_empty())
        .map(|r| (r.seq, r.name.clone(), r.physical_id.clone()))
        .collect();
    out.sort();
    out.into_iter().map(|(_, n, id)| (n, id)).collect()
}

fn instance_json(c: &Cloud, i: &Instance, pkg: Option<&StandInPackage>) -> Value {
    let b = base(c);
    let mut v = json!({
        "id": i.id,
        "vnfdId": i.vnfd_id,
        "vnfProvider": "testbed",
        "vnfProductName": pkg.map(|_| "stand-in package").unwrap_or("unknown"),
        "vnfSoftwareVersion": "1.0",
        "vnfdVersion": "1.0",
        "instantiationState": if i.instantiated { "INSTANTIATED" } else { "NOT_INSTANTIATED" },
        "_links": {
            "self": {"href": format!("{b}/vnf_instances/{}", i.id)},
            "instantiate": {"href": format!("{b}/vnf_instances/{}/instantiate", i.id)},
            "terminate": {"href": format!("{b}/vnf_instances/{}/terminate", i.id)},
            "heal": {"href": format!("{b}/vnf_instances/{}/heal", i.id)},
        },
    });
    if let Some(n) = &i.name {
        v["vnfInstanceName"] = json!(n);
    }
    if let Some(d) = &i.description {
        v["vnfInstanceDescription"] = json!(d);
    }
    if let Some(m) = &i.metadata {
        v["metadata"] = m.clone();
    }
    if i.instantiated {
        let stack = i.stack_id.clone().unwrap_or_default();
        let servers = stack_servers(c, &stack);
        let rinfo: Vec<Value> = servers
            .iter()
            .map(|(vdu, id)| {
                json!({
                    "id": id,
                    "vduId": vdu,
                    "computeResource": {"resourceId": id, "vimLevelResourceType": "OS::Nova::Server"},
                    "metadata": {"stack_id": stack},
                })
            })
            .collect();
        let vnfc: Vec<Value> = servers
            .iter()
            .map(|(vdu, id)| {
                json!({"id": format!("{vdu}-{id}"), "vduId": vdu, "vnfcResourceInfoId": id, "vnfcState": "STARTED"})
            })
            .collect();
        v["instantiatedVnfInfo"] = json!({
            "flavourId": i.flavour_id,
            "vnfState": "STARTED",
            "extCpInfo": [],
            "vnfcResourceInfo": rinfo,
            "vnfcInfo": vnfc,
            "metadata": {"stack_id": stack},
        });
        if !i.scale.is_empty() {
            v["instantiatedVnfInfo"]["scaleStatus"] = json!(
                i.scale
                    .iter()
                    .map(|(a, l)| json!({"aspectId": a, "scaleLevel": l}))
                    .collect::<Vec<_>>()
            );
        }
    }
    v
}

async fn instance_create(State(c): State<Arc<Cloud>>, h: HeaderMap, b: Bytes) -> Answer {
    check_version(&h)?;
    let req = body(&b)?;
    let Some(vnfd) = req["vnfdId"].as_str() else {
        return Err(problem(400, "'vnfdId' is a required property"));
    };
    let inst = {
        let mut t = c.tacker();
        if !t.packages.contains_key(vnfd) {
            return Err(problem(
                422,
                format!("VnfPackage with vnfdId {vnfd} is not found."),
            ));
        }
        let inst = Instance {
            id: new_id(),
            name: req["vnfInstanceName"].as_str().map(String::from),
            description: req["vnfInstanceDescription"].as_str().map(String::from),
            vnfd_id: vnfd.to_string(),
            metadata: req.get("metadata").filter(|m| m.is_object()).cloned(),
            instantiated: false,
            flavour_id: None,
            stack_id: None,
            scale: BTreeMap::new(),
        };
        t.instances.insert(inst.id.clone(), inst.clone());
        inst
    };
    let v = instance_json(&c, &inst, None);
    notify(&c, &inst, "VnfIdentifierCreationNotification", None, |s| {
        identifier_notification(&c, &inst, s, "VnfIdentifierCreationNotification")
    });
    Ok(created(
        format!("{}/vnf_instances/{}", base(&c), inst.id),
        v,
    ))
}

async fn instance_list(State(c): State<Arc<Cloud>>, h: HeaderMap, uri: axum::http::Uri) -> Answer {
    check_version(&h)?;
    let all: Vec<Instance> = c.tacker().instances.values().cloned().collect();
    let v: Vec<Value> = all.iter().map(|i| instance_json(&c, i, None)).collect();
    paged(&c, v, &uri)
}

fn find_instance(c: &Cloud, id: &str) -> Result<(Instance, Option<StandInPackage>), Problem> {
    let t = c.tacker();
    let i = t
        .instances
        .get(id)
        .cloned()
        .ok_or_else(|| problem(404, format!("VnfInstance {id} not found.")))?;
    let p = t.packages.get(&i.vnfd_id).cloned();
    Ok((i, p))
}

async fn instance_show(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    check_version(&h)?;
    let (i, p) = find_instance(&c, &id)?;
    Ok(axum::Json(instance_json(&c, &i, p.as_ref())).into_response())
}

async fn instance_delete(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    check_version(&h)?;
    let inst = {
        let mut t = c.tacker();
        match t.instances.get(&id) {
            None => return Err(problem(404, format!("VnfInstance {id} not found."))),
            Some(i) if i.instantiated => {
                return Err(problem(
                    409,
                    format!("VnfInstance {id} is INSTANTIATED; terminate it first."),
                ));
            }
            Some(_) => {}
        }
        if busy(&t, &id) {
            return Err(problem(
                409,
                format!("Other LCM operation of vnfInstance {id} is in progress."),
            ));
        }
        t.instances.remove(&id).expect("checked")
    };
    notify(&c, &inst, "VnfIdentifierDeletionNotification", None, |s| {
        identifier_notification(&c, &inst, s, "VnfIdentifierDeletionNotification")
    });
    Ok(StatusCode::NO_CONTENT.into_response())
}

// --- LCM operations ------------------------------------------------------------------------------

fn busy(t: &TackerState, inst: &str) -> bool {
    t.occs
        .iter()
        .any(|o| o.instance == inst && matches!(o.state, "STARTING" | "PROCESSING"))
}

async fn lcm(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    b: Bytes,
) -> Answer {
    check_version(&h)?;
    let operation: &'static str = match action.as_str() {
        "instantiate" => "INSTANTIATE",
        "heal" => "HEAL",
        "scale" => "SCALE",
        "terminate" => "TERMINATE",
        other => {
            return Err(problem(
                404,
                format!("the stand-in does not answer {other}"),
            ));
        }
    };
    let req = if b.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        body(&b)?
    };
    let occ = {
        let mut t = c.tacker();
        let Some(inst) = t.instances.get(&id).cloned() else {
            return Err(problem(404, format!("VnfInstance {id} not found.")));
        };
        match (operation, inst.instantiated) {
            ("INSTANTIATE", true) => {
                return Err(problem(
                    409,
                    format!("VnfInstance {id} is already INSTANTIATED."),
                ));
            }
            ("HEAL" | "SCALE" | "TERMINATE", false) => {
                return Err(problem(
                    409,
                    format!("VnfInstance {id} is NOT_INSTANTIATED."),
                ));
            }
            _ => {}
        }
        if operation == "INSTANTIATE" && req["flavourId"].as_str().is_none() {
            return Err(problem(400, "'flavourId' is a required property"));
        }
        if operation == "SCALE" {
            let pkg = t.packages.get(&inst.vnfd_id);
            scale_target(&req, pkg, &inst).map_err(|e| problem(400, e))?;
        }
        if busy(&t, &id) {
            return Err(problem(
                409,
                format!("Other LCM operation of vnfInstance {id} is in progress."),
            ));
        }
        let ts = occ_time();
        let occ = OpOcc {
            id: new_id(),
            state: "STARTING",
            entered: ts.clone(),
            start: ts,
            instance: id.clone(),
            operation,
            params: req,
            error: None,
        };
        t.occs.push(occ.clone());
        occ
    };
    let loc = format!("{}/vnf_lcm_op_occs/{}", base(&c), occ.id);
    tokio::spawn(run(c.clone(), occ.id.clone()));
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, loc)]).into_response())
}

/// Moves an op occ to `state` and notifies it.
fn transition(c: &Arc<Cloud>, occ_id: &str, state: &'static str, error: Option<Value>) {
    let (occ, inst) = {
        let mut t = c.tacker();
        let Some(o) = t.occs.iter_mut().find(|o| o.id == occ_id) else {
            return;
        };
        o.state = state;
        o.entered = occ_time();
        o.error = error;
        let occ = o.clone();
        let inst = t.instances.get(&occ.instance).cloned();
        (occ, inst)
    };
    let Some(inst) = inst else { return };
    notify(
        c,
        &inst,
        "VnfLcmOperationOccurrenceNotification",
        Some((occ.operation, state)),
        |s| occ_notification(c, &occ, s),
    );
}

async fn run(c: Arc<Cloud>, occ_id: String) {
    transition(&c, &occ_id, "STARTING", None);
    tokio::time::sleep(Duration::from_millis(50)).await;
    transition(&c, &occ_id, "PROCESSING", None);
    if let Err(e) = hook(&c, &occ_id, "start").await {
        transition(&c, &occ_id, "FAILED_TEMP", Some(e));
        return;
    }
    let r = work(&c, &occ_id).await;
    let r = match r {
        Ok(()) => match hook(&c, &occ_id, "end").await {
            Ok(()) => Ok(()),
            Err(e) => {
                transition(&c, &occ_id, "FAILED_TEMP", Some(e));
                return;
            }
        },
        Err(detail) => Err(detail),
    };
    match r {
        Ok(()) => transition(&c, &occ_id, "COMPLETED", None),
        Err(detail) => transition(
            &c,
            &occ_id,
            "FAILED_TEMP",
            Some(json!({"status": 500, "title": "Stack operation failed", "detail": detail})),
        ),
    }
}

const STACK_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs the `<operation>_<phase>` hook of `occ_id`'s package through Tacker's own
/// `_exec_mgmt_driver_script` ([`StandInPackage::mgmt_driver`]); nothing without one. Errors:
/// the ProblemDetails Tacker records for the op occ (its exception's status, title, detail).
async fn hook(c: &Arc<Cloud>, occ_id: &str, phase: &str) -> Result<(), Value> {
    let (occ, inst, run) = {
        let t = c.tacker();
        let Some(occ) = t.occs.iter().find(|o| o.id == occ_id).cloned() else {
            return Ok(());
        };
        let Some(inst) = t.instances.get(&occ.instance).cloned() else {
            return Ok(());
        };
        let run = t
            .packages
            .get(&inst.vnfd_id)
            .and_then(|p| p.mgmt_driver.clone());
        (occ, inst, run)
    };
    let Some(run) = run else { return Ok(()) };
    let flavour = inst
        .flavour_id
        .clone()
        .or_else(|| occ.params["flavourId"].as_str().map(str::to_string))
        .unwrap_or_default();
    let input = json!({
        "csar_dir": run.csar_dir,
        "flavour_id": flavour,
        "hook": format!("{}_{phase}", occ.operation.to_lowercase()),
        "operation": occ.operation,
        "vnf_instance_id": inst.id,
        "vnfd_id": inst.vnfd_id,
        "vnf_lcm_op_occ_id": occ.id,
        "request": occ.params,
    });
    let failed =
        |detail: String| json!({"status": 500, "title": "Internal Server Error", "detail": detail});
    let mut child = tokio::process::Command::new(&run.python)
        .arg(&run.conductor)
        .envs(&run.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(format!("cannot run Tacker's conductor code: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt as _;
        let _ = stdin.write_all(input.to_string().as_bytes()).await;
    }
    let out = tokio::time::timeout(STACK_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| failed("Tacker's conductor code did not return".into()))?
        .map_err(|e| failed(e.to_string()))?;
    let answer: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        failed(format!(
            "Tacker's conductor code failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;
    if answer.get("detail").is_some() {
        return Err(answer);
    }
    Ok(())
}

async fn work(c: &Arc<Cloud>, occ_id: &str) -> Result<(), String> {
    let (occ, inst, pkg) = {
        let t = c.tacker();
        let occ = t
            .occs
            .iter()
            .find(|o| o.id == occ_id)
            .cloned()
            .ok_or("op occ vanished")?;
        let inst = t
            .instances
            .get(&occ.instance)
            .cloned()
            .ok_or("instance vanished")?;
        let pkg = t.packages.get(&inst.vnfd_id).cloned();
        (occ, inst, pkg)
    };
    match occ.operation {
        "INSTANTIATE" => {
            let pkg = pkg.ok_or("the package of the instance is gone")?;
            let tpl = parse_template(&pkg.template)?;
            let name = format!("vnf-{}", inst.id);
            let sid = {
                let mut inner = c.lock();
                let sid = insert_stack(
                    &mut inner,
                    name,
                    None,
                    None,
                    tpl,
                    pkg.files.clone(),
                    pkg.parameters.clone(),
                    (true, None, None),
                );
                let s = inner.stacks.get_mut(&sid).expect("just inserted");
                s.action = "CREATE".into();
                s.status = "IN_PROGRESS".into();
                sid
            };
            {
                let mut t = c.tacker();
                if let Some(i) = t.instances.get_mut(&inst.id) {
                    i.stack_id = Some(sid.clone());
                }
            }
            converge(c.clone(), sid.clone(), "CREATE").await?;
            stack_done(c, &sid, "CREATE_COMPLETE").await?;
            let mut t = c.tacker();
            if let Some(i) = t.instances.get_mut(&inst.id) {
                i.instantiated = true;
                i.flavour_id = occ.params["flavourId"].as_str().map(String::from);
                i.scale = pkg.aspects.keys().map(|a| (a.clone(), 0)).collect();
            }
            Ok(())
        }
        "HEAL" => {
            let sid = inst.stack_id.clone().ok_or("the instance has no stack")?;
            let servers = stack_servers(c, &sid);
            let wanted: Option<Vec<&str>> = strs(&occ.params["vnfcInstanceId"]);
            let chosen: Vec<String> = servers
                .iter()
                .filter(|(vdu, id)| {
                    wanted
                        .as_ref()
                        .is_none_or(|w| w.contains(&format!("{vdu}-{id}").as_str()))
                })
                .map(|(_, id)| id.clone())
                .collect();
            if let Some(w) = &wanted
                && w.len() != chosen.len()
            {
                return Err(format!("vnfcInstanceId {w:?} names unknown VNFCs"));
            }
            {
                let mut inner = c.lock();
                for s in inner.stacks.values_mut().filter(|s| s.top == sid) {
                    for r in s.resources.iter_mut() {
                        if r.rtype == "OS::Nova::Server" && chosen.contains(&r.physical_id) {
                            r.action = "CHECK".into();
                            r.status = "FAILED".into();
                            r.reason = "marked unhealthy by the Tacker stand-in's heal".into();
                        }
                    }
                }
            }
            converge(c.clone(), sid.clone(), "UPDATE").await?;
            stack_done(c, &sid, "UPDATE_COMPLETE").await
        }
        "SCALE" => {
            let sid = inst.stack_id.clone().ok_or("the instance has no stack")?;
            let (aspect, level, capacities) = scale_target(&occ.params, pkg.as_ref(), &inst)?;
            {
                let mut inner = c.lock();
                let s = inner.stacks.get_mut(&sid).ok_or("the stack is gone")?;
                for (vdu, cap) in &capacities {
                    let nfv = s.params_given.entry("nfv").or_insert_with(|| json!({}));
                    nfv["VDU"][vdu]["desired_capacity"] = json!(cap);
                }
            }
            converge(c.clone(), sid.clone(), "UPDATE").await?;
            stack_done(c, &sid, "UPDATE_COMPLETE").await?;
            let mut t = c.tacker();
            if let Some(i) = t.instances.get_mut(&inst.id) {
                i.scale.insert(aspect, level);
            }
            Ok(())
        }
        "TERMINATE" => {
            if let Some(sid) = inst.stack_id.clone() {
                delete_stack(c.clone(), sid.clone()).await?;
                stack_done(c, &sid, "DELETE_COMPLETE").await?;
            }
            let mut t = c.tacker();
            if let Some(i) = t.instances.get_mut(&inst.id) {
                i.instantiated = false;
                i.stack_id = None;
                i.flavour_id = None;
                i.scale.clear();
            }
            Ok(())
        }
        other => Err(format!("{other} is not answered by the stand-in")),
    }
}

/// The aspect, its new level, and (VDU, new `desired_capacity`) of each of its VDUs.
type ScaleTarget = (String, u32, Vec<(String, u64)>);

/// A scale request's target: the aspect, its new level, and each of its VDUs' new
/// `desired_capacity` (from the package's `nfv` parameter plus the deltas of the new level).
/// Errors: why the request is refused.
fn scale_target(
    req: &Value,
    pkg: Option<&StandInPackage>,
    inst: &Instance,
) -> Result<ScaleTarget, String> {
    let out = match req["type"].as_str() {
        Some("SCALE_OUT") => true,
        Some("SCALE_IN") => false,
        _ => return Err("'type' must be SCALE_OUT or SCALE_IN".into()),
    };
    let aspect = req["aspectId"]
        .as_str()
        .ok_or("'aspectId' is a required property")?;
    let steps = req["numberOfSteps"].as_u64().unwrap_or(1);
    let pkg = pkg.ok_or("the package of the instance is gone")?;
    let deltas = pkg
        .aspects
        .get(aspect)
        .ok_or_else(|| format!("aspectId {aspect} is not in the VNFD"))?;
    let level = i64::from(inst.scale.get(aspect).copied().unwrap_or(0))
        + if out { steps as i64 } else { -(steps as i64) };
    let level =
        u32::try_from(level).map_err(|_| format!("scale level of {aspect} would go below 0"))?;
    let capacities = deltas
        .iter()
        .map(|(vdu, delta)| {
            let base = pkg.parameters["nfv"]["VDU"][vdu]["desired_capacity"]
                .as_u64()
                .unwrap_or(0);
            (vdu.clone(), base + u64::from(*delta) * u64::from(level))
        })
        .collect();
    Ok((aspect.to_string(), level, capacities))
}

async fn stack_done(c: &Cloud, sid: &str, want: &str) -> Result<(), String> {
    let (st, reason) = c
        .wait_stack(sid, STACK_TIMEOUT)
        .await
        .map_err(|e| format!("{e:#}"))?;
    if st == want {
        Ok(())
    } else {
        Err(format!("stack {sid} is {st}: {reason}"))
    }
}

// --- op occs -------------------------------------------------------------------------------------

fn occ_json(c: &Cloud, o: &OpOcc, all: bool) -> Value {
    let b = base(c);
    let mut v = json!({
        "id": o.id,
        "operationState": o.state,
        "stateEnteredTime": o.entered,
        "startTime": o.start,
        "vnfInstanceId": o.instance,
        "operation": o.operation,
        "isAutomaticInvocation": false,
        "isCancelPending": false,
        "_links": {
            "self": {"href": format!("{b}/vnf_lcm_op_occs/{}", o.id)},
            "vnfInstance": {"href": format!("{b}/vnf_instances/{}", o.instance)},
        },
    });
    if all {
        v["operationParams"] = o.params.clone();
        if let Some(e) = &o.error {
            v["error"] = e.clone();
        }
    }
    v
}

/// One term of a SOL013 §5.2 attribute filter: `(eq,attr,value)` or `(in,attr,v1,v2,…)`.
fn filter_terms(f: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    f.split(';')
        .filter(|t| !t.is_empty())
        .map(|t| {
            let inner = t
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .ok_or_else(|| format!("bad filter term {t}"))?;
            let mut parts = inner.split(',');
            let op = parts.next().unwrap_or("");
            let attr = parts.next().ok_or_else(|| format!("bad filter term {t}"))?;
            let vals: Vec<String> = parts.map(String::from).collect();
            match (op, vals.len()) {
                ("eq", 1) | ("in", 1..) => Ok((attr.to_string(), vals)),
                _ => Err(format!("unsupported filter term {t} (eq, in only)")),
            }
        })
        .collect()
}

async fn occ_list(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    uri: axum::http::Uri,
    Query(q): Query<Vec<(String, String)>>,
) -> Answer {
    check_version(&h)?;
    let terms = match q.iter().find(|(k, _)| k == "filter") {
        Some((_, f)) => filter_terms(f).map_err(|e| problem(400, e))?,
        None => Vec::new(),
    };
    for (a, _) in &terms {
        if !["id", "vnfInstanceId", "operationState", "operation"].contains(&a.as_str()) {
            return Err(problem(400, format!("the stand-in cannot filter on {a}")));
        }
    }
    let all = q.iter().any(|(k, _)| k == "all_fields");
    let occs = c.tacker().occs.clone();
    let v: Vec<Value> = occs
        .iter()
        .filter(|o| {
            terms.iter().all(|(a, vals)| {
                let got = match a.as_str() {
                    "id" => o.id.as_str(),
                    "vnfInstanceId" => o.instance.as_str(),
                    "operationState" => o.state,
                    _ => o.operation,
                };
                vals.iter().any(|v| v == got)
            })
        })
        .map(|o| occ_json(&c, o, all))
        .collect();
    paged(&c, v, &uri)
}

async fn occ_show(State(c): State<Arc<Cloud>>, h: HeaderMap, Path(id): Path<String>) -> Answer {
    check_version(&h)?;
    let o = c.tacker().occs.iter().find(|o| o.id == id).cloned();
    match o {
        Some(o) => Ok(axum::Json(occ_json(&c, &o, true)).into_response()),
        None => Err(problem(404, format!("VnfLcmOpOcc {id} not found."))),
    }
}

// --- testbed admin -------------------------------------------------------------------------------

async fn admin_package(State(c): State<Arc<Cloud>>, b: Bytes) -> Answer {
    let pkg: StandInPackage =
        serde_json::from_slice(&b).map_err(|e| problem(400, format!("bad package: {e}")))?;
    let id = pkg.vnfd_id.clone();
    c.tacker_register_package(pkg)
        .map_err(|e| problem(400, format!("{e:#}")))?;
    Ok((StatusCode::CREATED, axum::Json(json!({"vnfdId": id}))).into_response())
}

async fn admin_notify_show(State(c): State<Arc<Cloud>>) -> Response {
    let t = c.tacker();
    axum::Json(json!({"faults": t.faults, "counters": t.counters})).into_response()
}

async fn admin_notify_set(State(c): State<Arc<Cloud>>, b: Bytes) -> Answer {
    let f: NotifyFaults = serde_json::from_slice(&b)
        .map_err(|e| problem(400, format!("bad notification faults: {e}")))?;
    if !(0.0..=1.0).contains(&f.drop) || !(0.0..=1.0).contains(&f.duplicate) {
        return Err(problem(400, "drop and duplicate must be within 0.0..=1.0"));
    }
    c.tacker_set_notify_faults(f.clone());
    Ok(axum::Json(json!({"faults": f})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_terms_parse_eq_and_in() {
        assert_eq!(
            filter_terms("(eq,vnfInstanceId,a);(in,operationState,COMPLETED,FAILED_TEMP)").unwrap(),
            vec![
                ("vnfInstanceId".to_string(), vec!["a".to_string()]),
                (
                    "operationState".to_string(),
                    vec!["COMPLETED".to_string(), "FAILED_TEMP".to_string()]
                ),
            ]
        );
        assert!(filter_terms("(neq,id,a)").is_err());
        assert!(filter_terms("eq,id,a").is_err());
    }

    #[test]
    fn subscription_filter_matches_as_sol003_says() {
        let inst = Instance {
            id: "i1".into(),
            name: Some("n".into()),
            description: None,
            vnfd_id: "d1".into(),
            metadata: None,
            instantiated: false,
            flavour_id: None,
            stack_id: None,
            scale: BTreeMap::new(),
        };
        let sub = |f: Value| Subscription {
            id: "s".into(),
            callback_uri: "http://x".into(),
            filter: Some(f),
            verbosity: "FULL".into(),
            auth: None,
        };
        let n = "VnfLcmOperationOccurrenceNotification";
        let op = Some(("HEAL", "COMPLETED"));
        assert!(matches(
            &sub(json!({"vnfInstanceSubscriptionFilter": {"vnfdIds": ["d1"]}})),
            &inst,
            n,
            op
        ));
        assert!(!matches(
            &sub(json!({"vnfInstanceSubscriptionFilter": {"vnfdIds": ["d2"]}})),
            &inst,
            n,
            op
        ));
        assert!(!matches(
            &sub(json!({"notificationTypes": ["VnfIdentifierCreationNotification"]})),
            &inst,
            n,
            op
        ));
        assert!(!matches(
            &sub(json!({"operationStates": ["STARTING"]})),
            &inst,
            n,
            op
        ));
        // Operation filters do not apply to identifier notifications.
        assert!(matches(
            &sub(json!({"operationTypes": ["INSTANTIATE"]})),
            &inst,
            "VnfIdentifierCreationNotification",
            None
        ));
    }
}
