//! Nova (Compute API v2.1 with microversions 2.1–2.79): servers (create, list, detail, show,
//! delete, start/stop/reboot and os-getConsoleOutput actions, port interfaces) and flavors.
//! `GET /servers[/detail]` honours `changes-since` (deleted servers included, status `DELETED`).
//!
//! `POST /servers` is what a real Heat's `OS::Nova::Server` calls (the simulated Heat creates its
//! servers in-process): the server is BUILD until its host is up, then ACTIVE.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::ops::{NetReq, ServerSpec};
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
        .route(&format!("{p}/servers"), get(list).post(create))
        .route(&format!("{p}/servers/detail"), get(detail))
        .route(&format!("{p}/servers/{{id}}"), get(show).delete(delete))
        .route(&format!("{p}/servers/{{id}}/action"), post(action))
        .route(&format!("{p}/servers/{{id}}/os-interface"), get(interfaces))
        .route(
            &format!("{p}/servers/{{id}}/os-interface/{{port}}"),
            get(interface_show).delete(interface_detach),
        )
        .route(
            &format!("{p}/servers/{{id}}/os-volume_attachments"),
            get(volume_attachments),
        )
        .route(
            &format!("{p}/servers/{{id}}/os-volume_attachments/{{volume}}"),
            get(volume_attachment_show).delete(volume_detach),
        )
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
        // A floating IP of the port follows its fixed address on the same network, as Nova's
        // network info cache shows it (`OS-EXT-IPS:type: floating`).
        let floating = inner
            .floating_ips
            .values()
            .filter(|f| f.port_id.as_deref() == Some(p.id.as_str()))
            .map(|f| json!({"addr": f.address.to_string(), "version": 4, "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": p.mac}));
        let entries: Vec<Value> = std::iter::once(e).chain(floating).collect();
        match addrs.get_mut(&net) {
            Some(Value::Array(a)) => a.extend(entries),
            _ => {
                addrs.insert(net, Value::Array(entries));
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

fn bad_request(msg: impl Into<String>) -> super::ApiError {
    nova_err(400, "badRequest", msg)
}

/// A string field of a request body: absent or null → `None`; another type → 400.
fn opt_str(v: &Value, field: &str) -> Result<Option<String>, super::ApiError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad_request(format!(
            "Invalid input for field/attribute {field}. Value: {other}. {other} is not of type 'string'"
        ))),
    }
}

/// Builds a server request from a `POST /servers` body (Compute API "Create Server"): `name`,
/// `flavorRef`, `imageRef` (or a `block_device_mapping_v2` entry with `source_type: image` and
/// `boot_index: 0`), `availability_zone`, `networks` (a list of `{uuid, port, fixed_ip}`, or
/// `"auto"`/`"none"` as of 2.37), volume entries of `block_device_mapping_v2`, `user_data`
/// (base64, stored decoded), `metadata`, `key_name`, `config_drive`. The image must exist in
/// Glance, as Nova checks (400 otherwise).
fn create_spec(inner: &Inner, body: &Value) -> Result<ServerSpec, super::ApiError> {
    use base64::Engine as _;
    let s = body
        .get("server")
        .filter(|s| s.is_object())
        .ok_or_else(|| bad_request("Malformed request body: 'server' is a required property"))?;
    let name = opt_str(s, "name")?
        .filter(|n| !n.trim().is_empty() && n.len() <= 255)
        .ok_or_else(|| bad_request("Invalid input for field/attribute name."))?;
    let flavor = opt_str(s, "flavorRef")?
        .filter(|f| !f.is_empty())
        .ok_or_else(|| bad_request("Invalid input for field/attribute flavorRef."))?;
    let mut image = opt_str(s, "imageRef")?.unwrap_or_default();
    let mut volumes = Vec::new();
    let mut next_dev = b'b';
    for b in s
        .get("block_device_mapping_v2")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let uuid = opt_str(b, "uuid")?.unwrap_or_default();
        match b.get("source_type").and_then(Value::as_str) {
            Some("volume") if !uuid.is_empty() => {
                let dev = opt_str(b, "device_name")?.unwrap_or_else(|| {
                    let d = format!("vd{}", next_dev as char);
                    next_dev += 1;
                    d
                });
                volumes.push((uuid, dev));
            }
            Some("image") if image.is_empty() && !uuid.is_empty() => image = uuid,
            _ => {}
        }
    }
    if image.is_empty() {
        return Err(bad_request(
            "Block Device Mapping is Invalid: You specified more local devices than the limit allows",
        ));
    }
    let known = inner.images.contains_key(&image) || inner.images.values().any(|i| i.name == image);
    if !known {
        return Err(bad_request(format!("Image {image} could not be found.")));
    }
    let mut networks = Vec::new();
    match s.get("networks") {
        None | Some(Value::Null) => {}
        Some(Value::String(a)) if a == "auto" || a == "none" => {}
        Some(Value::Array(list)) => {
            for n in list {
                if let Some(p) = opt_str(n, "port")?.filter(|p| !p.is_empty()) {
                    networks.push(NetReq::Port(p));
                } else if let Some(net) = opt_str(n, "uuid")?.filter(|u| !u.is_empty()) {
                    let fixed_ip = match opt_str(n, "fixed_ip")? {
                        Some(ip) => Some(ip.parse().map_err(|_| {
                            bad_request(format!(
                                "Invalid input for field/attribute fixed_ip. Value: {ip}."
                            ))
                        })?),
                        None => None,
                    };
                    networks.push(NetReq::Network { net, fixed_ip });
                } else {
                    return Err(bad_request(format!(
                        "Invalid input for field/attribute networks. Value: {n}."
                    )));
                }
            }
        }
        Some(other) => {
            return Err(bad_request(format!(
                "Invalid input for field/attribute networks. Value: {other}."
            )));
        }
    }
    if networks.is_empty() {
        networks.push(NetReq::Network {
            net: "testbed-net".into(),
            fixed_ip: None,
        });
    }
    let user_data = match opt_str(s, "user_data")? {
        None => None,
        Some(b64) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|_| bad_request("User data needs to be valid base 64."))?;
            Some(String::from_utf8_lossy(&raw).into_owned())
        }
    };
    let metadata = s
        .get("metadata")
        .and_then(Value::as_object)
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
        .unwrap_or_default();
    Ok(ServerSpec {
        name,
        flavor,
        image,
        az: opt_str(s, "availability_zone")?.filter(|z| !z.is_empty()),
        networks,
        volumes,
        user_data,
        config_drive: matches!(s.get("config_drive"), Some(Value::Bool(true)))
            || opt_str(s, "config_drive")
                .ok()
                .flatten()
                .is_some_and(|c| c.eq_ignore_ascii_case("true")),
        metadata,
        key_name: opt_str(s, "key_name")?.filter(|k| !k.is_empty()),
        // A server created through the API belongs to no stack the testbed knows of.
        cluster: String::new(),
    })
}

/// `POST /servers` → 202 with the new server's id and links; the server is BUILD until its
/// host is up (ACTIVE) or failed (ERROR with a `fault`).
async fn create(
    State(c): State<Arc<Cloud>>,
    h: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let v = microversion(&h)?;
    let id = {
        let mut inner = c.lock();
        let spec = create_spec(&inner, &body)?;
        c.server_begin(&mut inner, &spec).map_err(bad_request)?
    };
    let base = format!("{}/compute/v2.1", c.base);
    let r = json!({"server": {
        "id": id,
        "links": [
            {"rel": "self", "href": format!("{base}/servers/{id}")},
            {"rel": "bookmark", "href": format!("{}/compute/servers/{id}", c.base)}
        ],
        "OS-DCF:diskConfig": "MANUAL",
        "security_groups": [{"name": "default"}],
    }});
    let boot = c.clone();
    let sid = id.clone();
    tokio::spawn(async move {
        if let Err(e) = boot.server_boot(&sid).await {
            tracing::warn!("server {sid} boot: {e}");
        }
    });
    Ok(with_version(
        (StatusCode::ACCEPTED, axum::Json(r)).into_response(),
        v,
    ))
}

fn interface_json(inner: &Inner, port: &str) -> Option<Value> {
    let p = inner.ports.get(port)?;
    Some(json!({
        "port_id": p.id, "net_id": p.network_id, "mac_addr": p.mac, "port_state": "ACTIVE",
        "fixed_ips": [{"subnet_id": p.subnet_id, "ip_address": p.ip.to_string()}],
    }))
}

/// `GET /servers/{id}/os-interface`: the server's ports (`interfaceAttachments`).
async fn interfaces(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let s = inner.servers.get(&id).ok_or_else(|| not_found(&id))?;
    let list: Vec<Value> = s
        .ports
        .iter()
        .filter_map(|p| interface_json(&inner, p))
        .collect();
    Ok(axum::Json(json!({"interfaceAttachments": list})).into_response())
}

/// `GET /servers/{id}/os-interface/{port}`: one attachment, 404 when the port is not attached.
async fn interface_show(
    State(c): State<Arc<Cloud>>,
    Path((id, port)): Path<(String, String)>,
) -> ApiResult {
    let inner = c.lock();
    let s = inner.servers.get(&id).ok_or_else(|| not_found(&id))?;
    s.ports
        .iter()
        .find(|p| **p == port)
        .and_then(|p| interface_json(&inner, p))
        .map(|j| axum::Json(json!({"interfaceAttachment": j})).into_response())
        .ok_or_else(|| nova_err(404, "itemNotFound", format!("Port {port} is not attached")))
}

/// `DELETE /servers/{id}/os-interface/{port}` → 202: the port is detached
/// ([`Cloud::interface_detach`]: a port Nova created is deleted, others stay in Neutron). A
/// server left without any port is unreachable: its host is stopped, so that the address can go
/// to the server the port is attached to next (Heat detaches a server's ports before it creates
/// the server's replacement).
async fn interface_detach(
    State(c): State<Arc<Cloud>>,
    Path((id, port)): Path<(String, String)>,
) -> ApiResult {
    let orphaned = {
        let mut inner = c.lock();
        if !inner.servers.contains_key(&id) {
            return Err(not_found(&id));
        }
        c.interface_detach(&mut inner, &id, &port)
            .map_err(|e| nova_err(404, "itemNotFound", e))?
    };
    if orphaned && let Some(farm) = &c.farm {
        farm.stop(&id)
            .await
            .map_err(|e| nova_err(500, "computeFault", format!("detaching {port}: {e:#}")))?;
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

fn volume_attachment_json(server: &str, vol: &str, dev: &str) -> Value {
    json!({"id": vol, "volumeId": vol, "serverId": server, "device": dev})
}

/// `GET /servers/{id}/os-volume_attachments`: the server's volumes (`volumeAttachments`).
async fn volume_attachments(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let s = inner.servers.get(&id).ok_or_else(|| not_found(&id))?;
    let list: Vec<Value> = s
        .volumes
        .iter()
        .map(|(v, d)| volume_attachment_json(&id, v, d))
        .collect();
    Ok(axum::Json(json!({"volumeAttachments": list})).into_response())
}

/// `GET /servers/{id}/os-volume_attachments/{volume}`: one attachment, 404 when the volume is
/// not attached to the server.
async fn volume_attachment_show(
    State(c): State<Arc<Cloud>>,
    Path((id, vol)): Path<(String, String)>,
) -> ApiResult {
    let inner = c.lock();
    let s = inner.servers.get(&id).ok_or_else(|| not_found(&id))?;
    s.volumes
        .iter()
        .find(|(v, _)| *v == vol)
        .map(|(v, d)| {
            axum::Json(json!({"volumeAttachment": volume_attachment_json(&id, v, d)}))
                .into_response()
        })
        .ok_or_else(|| nova_err(404, "itemNotFound", format!("volume_id not found: {vol}")))
}

/// `DELETE /servers/{id}/os-volume_attachments/{volume}` → 202: the volume is detached
/// ([`Cloud::volume_detach`]; 409 unless the server is `SHUTOFF`, 404 when not attached).
async fn volume_detach(
    State(c): State<Arc<Cloud>>,
    Path((id, vol)): Path<(String, String)>,
) -> ApiResult {
    let mut inner = c.lock();
    c.volume_detach(&mut inner, &id, &vol)
        .map_err(|(status, msg)| {
            let kind = if status == 404 {
                "itemNotFound"
            } else {
                "conflictingRequest"
            };
            nova_err(status, kind, msg)
        })?;
    Ok(StatusCode::ACCEPTED.into_response())
}
