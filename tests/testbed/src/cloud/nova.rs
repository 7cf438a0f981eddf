//! Nova (Compute API v2.1 with microversions 2.1–2.79): servers (list, detail, show, delete,
//! start/stop/reboot and os-getConsoleOutput actions) and flavors. `GET /servers[/detail]`
//! honours `changes-since` (deleted servers included, status `DELETED`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::state::{Inner, ServerRec, ts};
use super::{ApiResult, Cloud, next_link, nova_err, nova_err_fn, paginate, qget, qlimit};

/// Highest microversion answered.
pub const MAX_MICROVERSION: (u32, u32) = (2, 79);
/// Nova's `osapi_max_limit` default.
const MAX_LIMIT: usize = 1000;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    let p = "/compute/v2.1";
    Router::new()
        .route("/compute", get(versions))
        .route("/compute/", get(versions))
        .route(p, get(version))
        .route(&format!("{p}/"), get(version))
        .route(&format!("{p}/servers"), get(list))
        .route(&format!("{p}/servers/detail"), get(detail))
        .route(&format!("{p}/servers/{{id}}"), get(show).delete(delete))
        .route(&format!("{p}/servers/{{id}}/action"), post(action))
        .route(&format!("{p}/flavors"), get(flavors))
        .route(&format!("{p}/flavors/detail"), get(flavors_detail))
        .route(&format!("{p}/flavors/{{id}}"), get(flavor_show))
}

fn v21(c: &Cloud) -> Value {
    json!({
        "id": "v2.1", "status": "CURRENT", "version": format!("{}.{}", MAX_MICROVERSION.0, MAX_MICROVERSION.1),
        "min_version": "2.1", "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{}/compute/v2.1/", c.base)}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}]
    })
}

async fn versions(State(c): State<Arc<Cloud>>) -> Response {
    axum::Json(json!({"versions": [v21(&c)]})).into_response()
}

async fn version(State(c): State<Arc<Cloud>>) -> Response {
    axum::Json(json!({"version": v21(&c)})).into_response()
}

/// Requested microversion from `X-OpenStack-Nova-API-Version` or `OpenStack-API-Version: compute X`.
fn microversion(h: &HeaderMap) -> Result<(u32, u32), super::ApiError> {
    let raw = h
        .get("x-openstack-nova-api-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            h.get("openstack-api-version")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| {
                    v.trim()
                        .strip_prefix("compute")
                        .map(|x| x.trim().to_string())
                })
        });
    let Some(raw) = raw else { return Ok((2, 1)) };
    if raw == "latest" {
        return Ok(MAX_MICROVERSION);
    }
    let parsed = raw
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some(v) if v >= (2, 1) && v <= MAX_MICROVERSION => Ok(v),
        _ => Err(nova_err(
            406,
            "computeFault",
            format!(
                "Version {raw} is not supported by the API. Minimum is 2.1 and maximum is 2.79."
            ),
        )),
    }
}

fn with_version(mut r: Response, v: (u32, u32)) -> Response {
    let s = format!("{}.{}", v.0, v.1);
    let h = r.headers_mut();
    if let Ok(x) = s.parse() {
        h.insert("x-openstack-nova-api-version", x);
    }
    if let Ok(x) = format!("compute {s}").parse() {
        h.insert("openstack-api-version", x);
    }
    h.insert(
        "vary",
        "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
            .parse()
            .expect("static"),
    );
    r
}

/// (name, vcpus, ram MiB, disk GiB) of the fixed flavors; unknown names get 2/4096/40.
const FLAVORS: &[(&str, u32, u32, u32)] = &[
    ("m1.tiny", 1, 512, 1),
    ("m1.small", 1, 2048, 20),
    ("m1.medium", 2, 4096, 40),
    ("m1.large", 4, 8192, 80),
    ("m1.xlarge", 8, 16384, 160),
];

fn flavor_spec(name: &str) -> (u32, u32, u32) {
    FLAVORS
        .iter()
        .find(|f| f.0 == name)
        .map(|f| (f.1, f.2, f.3))
        .unwrap_or((2, 4096, 40))
}

/// A server's show body at microversion `v` (`server_groups` from 2.71: the testbed has no server
/// groups, so `[]`, as Nova answers for a server in none).
pub(crate) fn server_json(c: &Cloud, inner: &Inner, s: &ServerRec, v: (u32, u32)) -> Value {
    let base = format!("{}/compute/v2.1", c.base);
    let mut addrs: Map<String, Value> = Map::new();
    for p in s.ports.iter().filter_map(|p| inner.ports.get(p)) {
        let net = inner
            .networks
            .get(&p.network_id)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| p.network_id.clone());
        let e = json!({"addr": p.ip.to_string(), "version": 4, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": p.mac});
        match addrs.get_mut(&net) {
            Some(Value::Array(a)) => a.push(e),
            _ => {
                addrs.insert(net, json!([e]));
            }
        }
    }
    let (vcpus, ram, disk) = flavor_spec(&s.flavor);
    let flavor = if v >= (2, 47) {
        json!({"vcpus": vcpus, "ram": ram, "disk": disk, "ephemeral": 0, "swap": 0, "original_name": s.flavor, "extra_specs": {}})
    } else {
        json!({"id": s.flavor, "links": [{"rel": "bookmark", "href": format!("{}/flavors/{}", c.base, s.flavor)}]})
    };
    let mut j = json!({
        "id": s.id,
        "name": s.name,
        "status": s.status,
        "tenant_id": c.project_id,
        "user_id": c.user_id,
        "metadata": s.metadata,
        "hostId": if s.status == "ACTIVE" { format!("{:x}", s.seq.wrapping_mul(0x9e37_79b9_7f4a_7c15)) } else { String::new() },
        "image": {"id": s.image_id, "links": [{"rel": "bookmark", "href": format!("{}/images/{}", c.base, s.image_id)}]},
        "flavor": flavor,
        "created": ts(&s.created),
        "updated": ts(&s.updated),
        "addresses": addrs,
        "accessIPv4": "",
        "accessIPv6": "",
        "links": [
            {"rel": "self", "href": format!("{base}/servers/{}", s.id)},
            {"rel": "bookmark", "href": format!("{}/compute/servers/{}", c.base, s.id)}
        ],
        "OS-DCF:diskConfig": "MANUAL",
        "progress": 0,
        "OS-EXT-AZ:availability_zone": s.az,
        "config_drive": if s.config_drive { "True" } else { "" },
        "key_name": s.key_name,
        "OS-SRV-USG:launched_at": if s.status == "BUILD" { Value::Null } else { json!(ts(&s.created)) },
        "OS-SRV-USG:terminated_at": if s.status == "DELETED" { json!(ts(&s.updated)) } else { Value::Null },
        "OS-EXT-SRV-ATTR:host": "testbed",
        "OS-EXT-SRV-ATTR:hypervisor_hostname": "testbed",
        "OS-EXT-SRV-ATTR:instance_name": format!("instance-{:08x}", s.seq),
        "OS-EXT-STS:task_state": if s.status == "BUILD" { json!("spawning") } else { Value::Null },
        "OS-EXT-STS:vm_state": s.vm_state,
        "OS-EXT-STS:power_state": s.power_state,
        "os-extended-volumes:volumes_attached": s.volumes.iter().map(|(id, _)| json!({"id": id, "delete_on_termination": false})).collect::<Vec<_>>(),
        "security_groups": [{"name": "default"}],
        "locked": false,
        "description": null,
        "tags": [],
    });
    if let Some(f) = &s.fault {
        j["fault"] = f.clone();
    }
    if v >= (2, 71) {
        j["server_groups"] = json!([]);
    }
    j
}

/// Parses a `changes-since` value as Nova's query schema does (`format: date-time`, ISO 8601;
/// without a zone it is UTC). `None`: malformed.
pub fn parse_changes_since(v: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Some(t.with_timezone(&Utc));
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(v, f).ok())
        .map(|n| n.and_utc())
}

/// Servers matching the query. With `changes_since`, only servers whose `updated` (second
/// resolution, as Nova's `updated_at` column) is at or after it — deleted ones included, as
/// Nova lists soft-deleted instances to `changes-since` (Compute API "List Servers Detailed":
/// "the deleted servers are also returned").
fn filtered<'a>(
    inner: &'a Inner,
    q: &[(String, String)],
    changes_since: Option<DateTime<Utc>>,
) -> Vec<&'a ServerRec> {
    let deleted = changes_since
        .is_some()
        .then(|| inner.deleted_servers.values())
        .into_iter()
        .flatten();
    let mut v: Vec<&ServerRec> = inner
        .servers
        .values()
        .chain(deleted)
        .filter(|s| {
            changes_since.is_none_or(|t| {
                s.updated.timestamp() >= t.timestamp()
                    && (s.updated.timestamp() > t.timestamp() || t.timestamp_subsec_nanos() == 0)
            })
        })
        .filter(|s| {
            qget(q, "name").is_none_or(|n| {
                s.name
                    .contains(n.trim_start_matches('^').trim_end_matches('$'))
            })
        })
        .filter(|s| qget(q, "status").is_none_or(|st| s.status.eq_ignore_ascii_case(st)))
        .filter(|s| qget(q, "availability_zone").is_none_or(|z| s.az == z))
        .collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.seq));
    v
}

fn listing(c: &Cloud, h: &HeaderMap, q: &[(String, String)], detail: bool) -> ApiResult {
    let v = microversion(h)?;
    let changes_since = match qget(q, "changes-since") {
        None => None,
        Some(raw) => Some(parse_changes_since(raw).ok_or_else(|| {
            nova_err(
                400,
                "badRequest",
                format!(
                    "Invalid input for query parameters changes-since. Value: {raw}. '{raw}' is not a 'date-time'"
                ),
            )
        })?),
    };
    let inner = c.lock();
    let items: Vec<Value> = filtered(&inner, q, changes_since)
        .into_iter()
        .map(|s| {
            if detail {
                server_json(c, &inner, s, v)
            } else {
                json!({"id": s.id, "name": s.name, "links": [{"rel": "self", "href": format!("{}/compute/v2.1/servers/{}", c.base, s.id)}]})
            }
        })
        .collect();
    let limit = qlimit(q, nova_err_fn)?;
    let (page, full) = paginate(items, limit, qget(q, "marker"), MAX_LIMIT, nova_err_fn)?;
    let mut body = json!({"servers": page});
    if full && let Some(last) = page_last(&body["servers"]) {
        let url = format!(
            "{}/compute/v2.1/servers{}",
            c.base,
            if detail { "/detail" } else { "" }
        );
        body["servers_links"] = json!([next_link(
            &url,
            q,
            limit.unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
            &last
        )]);
    }
    Ok(with_version(axum::Json(body).into_response(), v))
}

pub(crate) fn page_last(v: &Value) -> Option<String> {
    v.as_array()
        .and_then(|a| a.last())
        .and_then(|x| x["id"].as_str())
        .map(String::from)
}

async fn list(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Query(q): Query<Vec<(String, String)>>,
) -> ApiResult {
    listing(&c, &h, &q, false)
}

async fn detail(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    Query(q): Query<Vec<(String, String)>>,
) -> ApiResult {
    listing(&c, &h, &q, true)
}

fn not_found(id: &str) -> super::ApiError {
    nova_err(
        404,
        "itemNotFound",
        format!("Instance {id} could not be found."),
    )
}

async fn show(State(c): State<Arc<Cloud>>, h: HeaderMap, Path(id): Path<String>) -> ApiResult {
    let v = microversion(&h)?;
    let inner = c.lock();
    let s = inner.servers.get(&id).ok_or_else(|| not_found(&id))?;
    Ok(with_version(
        axum::Json(json!({"server": server_json(&c, &inner, s, v)})).into_response(),
        v,
    ))
}

/// `DELETE /servers/{id}` → 204; the host is stopped and the record removed in the background.
async fn delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    {
        let inner = c.lock();
        if !inner.servers.contains_key(&id) {
            return Err(not_found(&id));
        }
    }
    tokio::spawn(async move {
        if let Err(e) = c.server_delete(&id).await {
            tracing::warn!("server delete: {e}");
        }
    });
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn conflict(action: &str, id: &str, state: &str) -> super::ApiError {
    nova_err(
        409,
        "conflictingRequest",
        format!("Cannot '{action}' instance {id} while it is in vm_state {state}"),
    )
}

/// `POST /servers/{id}/action` with `os-start`, `os-stop` or `reboot` (`SOFT`/`HARD`) → 202.
async fn action(
    State(c): State<Arc<Cloud>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let (status, vm_state) = {
        let inner = c.lock();
        let s = inner.servers.get(&id).ok_or_else(|| not_found(&id))?;
        (s.status.clone(), s.vm_state.clone())
    };
    let Some((name, arg)) = body.as_object().and_then(|m| m.iter().next()) else {
        return Err(nova_err(400, "badRequest", "Malformed request body"));
    };
    match name.as_str() {
        "os-stop" => {
            if status != "ACTIVE" && status != "ERROR" {
                return Err(conflict("stop", &id, &vm_state));
            }
            tokio::spawn(async move {
                if let Err(e) = c.server_stop(&id).await {
                    tracing::warn!("os-stop: {e}");
                }
            });
        }
        "os-start" => {
            if status != "SHUTOFF" {
                return Err(conflict("start", &id, &vm_state));
            }
            set_task(&c, &id, "powering-on");
            tokio::spawn(async move {
                let _ = c.server_start(&id).await;
            });
        }
        "reboot" => {
            let hard = arg["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("HARD"));
            let ok = if hard {
                matches!(status.as_str(), "ACTIVE" | "SHUTOFF" | "ERROR")
            } else {
                status == "ACTIVE"
            };
            if !ok {
                return Err(conflict("reboot", &id, &vm_state));
            }
            if hard || c.farm.is_some() {
                tokio::spawn(async move {
                    let _ = c.server_stop(&id).await;
                    let _ = c.server_start(&id).await;
                });
            }
        }
        "os-getConsoleOutput" => {
            let length = match &arg["length"] {
                Value::Null => None,
                v => match v
                    .as_i64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                {
                    Some(n) if n >= -1 => usize::try_from(n).ok(),
                    _ => {
                        return Err(nova_err(
                            400,
                            "badRequest",
                            "Invalid input for field/attribute length.",
                        ));
                    }
                },
            };
            let output = console_output(&c, &id);
            return Ok(axum::Json(json!({"output": last_lines(&output, length)})).into_response());
        }
        other => {
            return Err(nova_err(
                400,
                "badRequest",
                format!(
                    "Action '{other}' is not supported by the testbed (os-start, os-stop, reboot, os-getConsoleOutput)"
                ),
            ));
        }
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

/// What the server's console shows: the override if one is set, else — once its host is up —
/// cloud-init's end-of-boot lines with the SSH host key blocks of the host's real key, printed
/// the way cloud-init's `write-ssh-key-fingerprints` does: both blocks piped through
/// `logger -p user.info --stderr -t ec2`, so every line of them carries the syslog prefix
/// `<14>MMM DD HH:MM:SS ec2: ` (the "ec2:" lines of a real console).
fn console_output(c: &Cloud, id: &str) -> String {
    let inner = c.lock();
    if let Some(text) = &inner.console_override {
        return text.clone();
    }
    let Some(s) = inner.servers.get(id) else {
        return String::new();
    };
    let mut out = format!(
        "[    0.000000] Linux version 6.1.0 (testbed)\r\n{} login: \r\n",
        s.name
    );
    let Some(key) = s.host_key.as_deref() else {
        return out;
    };
    let prefix = format!("<14>{} ec2: ", s.created.format("%b %e %H:%M:%S"));
    let hr = "#".repeat(61);
    let fp = fingerprint(key).unwrap_or_default();
    let kind = key
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_start_matches("ssh-")
        .to_uppercase();
    let host = format!("root@{}", s.name);
    for line in [
        String::new(),
        hr.clone(),
        "-----BEGIN SSH HOST KEY FINGERPRINTS-----".into(),
        format!("256 {fp} {host} ({kind})"),
        "-----END SSH HOST KEY FINGERPRINTS-----".into(),
        hr,
        String::new(),
        "-----BEGIN SSH HOST KEY KEYS-----".into(),
        format!("{key} {host}"),
        "-----END SSH HOST KEY KEYS-----".into(),
    ] {
        out.push_str(&format!("{prefix}{line}\r\n"));
    }
    out.push_str(&format!(
        "[   12.345678] cloud-init[812]: Cloud-init v. 24.1 finished. Datasource DataSourceOpenStack.\r\n\r\n{} login: \r\n",
        s.name
    ));
    out
}

/// `SHA256:…` of an OpenSSH key line (`ssh-keygen -l`: unpadded base64 of the SHA-256 of the
/// key blob).
pub fn fingerprint(key_line: &str) -> Option<String> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let blob = base64::engine::general_purpose::STANDARD
        .decode(key_line.split_whitespace().nth(1)?)
        .ok()?;
    Some(format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(sha2::Sha256::digest(&blob))
    ))
}

/// The last `n` lines of `text` (all with `None`, as Nova does for a missing or -1 `length`).
fn last_lines(text: &str, n: Option<usize>) -> String {
    let Some(n) = n else {
        return text.to_string();
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    lines[lines.len().saturating_sub(n)..].concat()
}

fn set_task(c: &Cloud, id: &str, _task: &str) {
    if let Some(s) = c.lock().servers.get_mut(id) {
        s.updated = chrono::Utc::now();
    }
}

fn flavor_json(c: &Cloud, name: &str, detail: bool) -> Value {
    let (vcpus, ram, disk) = flavor_spec(name);
    let links = json!([{"rel": "self", "href": format!("{}/compute/v2.1/flavors/{name}", c.base)}]);
    if !detail {
        return json!({"id": name, "name": name, "links": links, "description": null});
    }
    json!({"id": name, "name": name, "vcpus": vcpus, "ram": ram, "disk": disk, "swap": 0,
           "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": false, "rxtx_factor": 1.0,
           "os-flavor-access:is_public": true, "description": null, "extra_specs": {}, "links": links})
}

fn all_flavors(c: &Cloud) -> Vec<String> {
    let inner = c.lock();
    let mut v: Vec<String> = FLAVORS.iter().map(|f| f.0.to_string()).collect();
    for s in inner.servers.values() {
        if !v.contains(&s.flavor) {
            v.push(s.flavor.clone());
        }
    }
    v
}

async fn flavors(State(c): State<Arc<Cloud>>) -> Response {
    let v: Vec<Value> = all_flavors(&c)
        .iter()
        .map(|f| flavor_json(&c, f, false))
        .collect();
    axum::Json(json!({"flavors": v})).into_response()
}

async fn flavors_detail(State(c): State<Arc<Cloud>>) -> Response {
    let v: Vec<Value> = all_flavors(&c)
        .iter()
        .map(|f| flavor_json(&c, f, true))
        .collect();
    axum::Json(json!({"flavors": v})).into_response()
}

async fn flavor_show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Response {
    axum::Json(json!({"flavor": flavor_json(&c, &id, true)})).into_response()
}
