//! Neutron (Networking API v2.0): ports (create, show, update of `name` and
//! `allowed_address_pairs`, delete), networks, subnets and floating IPs (create, list, show,
//! delete), with Neutron's filters and `limit`/`marker` pagination (`ports_links`,
//! `networks_links`). The writes are what a real Heat's `OS::Neutron::Port`, `Net`, `Subnet` and
//! `FloatingIP` call; the simulated Heat makes the same records in-process.
//!
//! Every network maps onto the testbed's single bridge; a port keeps the network id the client
//! asked for. Each network has a subnet of its own, the bridge's (every port's address comes
//! from it); a subnet created through the API is a record on its network, shown and deleted as
//! Neutron does, that hands out no addresses. Floating IPs cannot be re-associated (`PUT` is not
//! served): Heat's `OS::Neutron::FloatingIP` updates one only when its `port_id` changes.

use std::net::Ipv4Addr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::ops::allowed_pairs;
use serde_json::{Value, json};

use super::state::{FloatingIpRec, Inner, NetworkRec, PortRec, SubnetRec, new_id, ts};
use super::{ApiResult, Cloud, neutron_err, neutron_err_fn, next_link, paginate, qget, qlimit};

const MAX_LIMIT: usize = 100_000;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    let p = "/network/v2.0";
    Router::new()
        .route("/network", get(versions))
        .route("/network/", get(versions))
        .route(p, get(resources))
        .route(&format!("{p}/"), get(resources))
        .route(&format!("{p}/ports"), get(ports).post(port_create))
        .route(
            &format!("{p}/ports/{{id}}"),
            get(port_show).put(port_update).delete(port_delete),
        )
        .route(
            &format!("{p}/floatingips"),
            get(floating_ips).post(floating_ip_create),
        )
        .route(
            &format!("{p}/floatingips/{{id}}"),
            get(floating_ip_show).delete(floating_ip_delete),
        )
        .route(&format!("{p}/networks"), get(networks).post(network_create))
        .route(
            &format!("{p}/networks/{{id}}"),
            get(network_show).delete(network_delete),
        )
        .route(&format!("{p}/subnets"), get(subnets).post(subnet_create))
        .route(
            &format!("{p}/subnets/{{id}}"),
            get(subnet_show).delete(subnet_delete),
        )
}

async fn versions(State(c): State<Arc<Cloud>>) -> Response {
    axum::Json(json!({"versions": [{"id": "v2.0", "status": "CURRENT",
        "links": [{"rel": "self", "href": format!("{}/network/v2.0/", c.base)}]}]}))
    .into_response()
}

async fn resources(State(c): State<Arc<Cloud>>) -> Response {
    let r: Vec<Value> = ["port", "network", "subnet", "floatingip"]
        .iter()
        .map(|n| json!({"name": n, "collection": format!("{n}s"),
                        "links": [{"rel": "self", "href": format!("{}/network/v2.0/{n}s", c.base)}]}))
        .collect();
    axum::Json(json!({"resources": r})).into_response()
}

/// A port's show body (Networking API v2.0).
pub(crate) fn port_json(c: &Cloud, inner: &Inner, p: &PortRec) -> Value {
    let active = !p.device_id.is_empty()
        && inner
            .servers
            .get(&p.device_id)
            .is_some_and(|s| s.status == "ACTIVE");
    json!({
        "id": p.id, "name": p.name, "network_id": p.network_id,
        "tenant_id": c.project_id, "project_id": c.project_id,
        "mac_address": p.mac, "admin_state_up": true,
        "status": if active { "ACTIVE" } else { "DOWN" },
        "device_id": p.device_id, "device_owner": p.device_owner,
        "fixed_ips": [{"subnet_id": p.subnet_id, "ip_address": p.ip.to_string()}],
        "allowed_address_pairs": p.allowed_address_pairs,
        "extra_dhcp_opts": [], "security_groups": [], "description": "",
        "binding:vnic_type": "normal", "port_security_enabled": true,
        "created_at": ts(&p.created), "updated_at": ts(&p.created), "revision_number": 1, "tags": [],
    })
}

fn network_json(c: &Cloud, inner: &Inner, n: &NetworkRec) -> Value {
    let mut subnets = vec![n.subnet_id.clone()];
    subnets.extend(
        inner
            .subnets
            .values()
            .filter(|s| s.network_id == n.id)
            .map(|s| s.id.clone()),
    );
    json!({
        "id": n.id, "name": n.name, "admin_state_up": true, "status": "ACTIVE",
        "subnets": subnets, "tenant_id": c.project_id, "project_id": c.project_id,
        "shared": false, "router:external": false, "mtu": 1500, "availability_zones": ["nova"],
        "port_security_enabled": true, "description": "", "created_at": ts(&n.created),
        "updated_at": ts(&n.created), "revision_number": 1, "tags": [],
    })
}

fn subnet_json(c: &Cloud, n: &NetworkRec) -> Value {
    let gw = Ipv4Addr::from(c.net_addr + 1);
    let size = 1u32 << (32 - c.prefix_len);
    json!({
        "id": n.subnet_id, "name": format!("{}-subnet", n.name), "network_id": n.id,
        "cidr": c.cidr(), "ip_version": 4, "gateway_ip": gw.to_string(), "enable_dhcp": true,
        "allocation_pools": [{"start": Ipv4Addr::from(c.net_addr + 10).to_string(),
                              "end": Ipv4Addr::from(c.net_addr + size - 2).to_string()}],
        "dns_nameservers": [], "host_routes": [], "tenant_id": c.project_id, "project_id": c.project_id,
        "created_at": ts(&n.created), "updated_at": ts(&n.created), "description": "", "tags": [],
    })
}

/// Neutron filter semantics: each key may repeat (OR); all keys must match (AND).
fn matches(q: &[(String, String)], key: &str, value: &str) -> bool {
    let vals: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect();
    vals.is_empty() || vals.contains(&value)
}

fn list_response(c: &Cloud, q: &[(String, String)], items: Vec<Value>, coll: &str) -> ApiResult {
    let limit = qlimit(q, neutron_err_fn)?;
    let (page, full) = paginate(items, limit, qget(q, "marker"), MAX_LIMIT, neutron_err_fn)?;
    let mut body = json!({ coll: page });
    if full && let Some(last) = super::nova::page_last(&body[coll]) {
        let url = format!("{}/network/v2.0/{coll}", c.base);
        body[format!("{coll}_links")] =
            json!([next_link(&url, q, limit.unwrap_or(MAX_LIMIT), &last)]);
    }
    Ok(axum::Json(body).into_response())
}

async fn ports(State(c): State<Arc<Cloud>>, Query(q): Query<Vec<(String, String)>>) -> ApiResult {
    let items: Vec<Value> = {
        let inner = c.lock();
        inner
            .ports
            .values()
            .filter(|p| matches(&q, "id", &p.id) && matches(&q, "name", &p.name))
            .filter(|p| {
                matches(&q, "device_id", &p.device_id)
                    && matches(&q, "device_owner", &p.device_owner)
            })
            .filter(|p| {
                matches(&q, "network_id", &p.network_id) && matches(&q, "mac_address", &p.mac)
            })
            .filter(|p| {
                q.iter().filter(|(k, _)| k == "fixed_ips").all(|(_, v)| {
                    v.split(',').all(|cond| match cond.split_once('=') {
                        Some(("ip_address", ip)) => p.ip.to_string() == ip,
                        Some(("subnet_id", s)) => p.subnet_id == s,
                        Some(("ip_address_substr", s)) => p.ip.to_string().contains(s),
                        _ => false,
                    })
                })
            })
            .map(|p| port_json(&c, &inner, p))
            .filter(|j| matches(&q, "status", j["status"].as_str().unwrap_or("")))
            .collect()
    };
    list_response(&c, &q, items, "ports")
}

/// The id of the one (implicit) router of the testbed's floating IPs.
pub(crate) const ROUTER_ID: &str = "7f3c1e52-1b1e-4c5b-9d9e-2a6f0b7c0f1a";

/// A floating IP's show body (Networking API v2.0 "Show floating IP details").
pub(crate) fn floating_ip_json(c: &Cloud, f: &FloatingIpRec) -> Value {
    json!({
        "id": f.id, "tenant_id": c.project_id, "project_id": c.project_id,
        "floating_network_id": f.network_id,
        "router_id": f.port_id.as_ref().map(|_| ROUTER_ID),
        "fixed_ip_address": f.fixed.map(|a| a.to_string()),
        "floating_ip_address": f.address.to_string(),
        "port_id": f.port_id,
        "status": if f.port_id.is_some() { "ACTIVE" } else { "DOWN" },
        "description": "", "dns_domain": "", "dns_name": "", "qos_policy_id": null,
        "port_forwardings": [], "tags": [],
        "created_at": ts(&f.created), "updated_at": ts(&f.created), "revision_number": 1,
    })
}

/// `GET /v2.0/floatingips` with Neutron's filters on `id`, `floating_ip_address`,
/// `fixed_ip_address`, `port_id`, `floating_network_id`, `router_id` and `status`.
async fn floating_ips(
    State(c): State<Arc<Cloud>>,
    Query(q): Query<Vec<(String, String)>>,
) -> ApiResult {
    let items: Vec<Value> = {
        let inner = c.lock();
        inner
            .floating_ips
            .values()
            .map(|f| floating_ip_json(&c, f))
            .filter(|j| {
                [
                    "id",
                    "floating_ip_address",
                    "fixed_ip_address",
                    "port_id",
                    "floating_network_id",
                    "router_id",
                    "status",
                ]
                .iter()
                .all(|k| matches(&q, k, j[*k].as_str().unwrap_or("")))
            })
            .collect()
    };
    list_response(&c, &q, items, "floatingips")
}

fn floating_ip_not_found(id: &str) -> super::ApiError {
    neutron_err(
        404,
        "FloatingIPNotFound",
        format!("Floating IP {id} could not be found"),
    )
}

/// `POST /v2.0/floatingips` (Networking API v2.0 "Create floating IP"): `floating_network_id`
/// (required, a known network) and `port_id` (optional, a known port); 201 with the floating
/// IP.
async fn floating_ip_create(
    State(c): State<Arc<Cloud>>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let f = body_of(&body, "floatingip")?;
    let net = required(f, "floating_network_id")?;
    if !c.lock().networks.contains_key(net) {
        return Err(neutron_err(
            404,
            "ExternalNetworkNotFound",
            format!("Network {net} could not be found."),
        ));
    }
    let port = match &f["port_id"] {
        Value::Null => None,
        Value::String(p) => Some(p.as_str()),
        _ => {
            return Err(neutron_err(
                400,
                "InvalidInput",
                "Invalid input for port_id: not a string",
            ));
        }
    };
    if let Some(p) = port
        && !c.lock().ports.contains_key(p)
    {
        return Err(port_not_found(p));
    }
    let id = c
        .floating_ip_create(net, port)
        .await
        .map_err(|e| neutron_err(409, "IpAddressGenerationFailure", e))?;
    let inner = c.lock();
    let rec = inner
        .floating_ips
        .get(&id)
        .ok_or_else(|| floating_ip_not_found(&id))?;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({"floatingip": floating_ip_json(&c, rec)})),
    )
        .into_response())
}

/// `DELETE /v2.0/floatingips/{id}`: 204; 404 when there is none.
async fn floating_ip_delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    if !c.lock().floating_ips.contains_key(&id) {
        return Err(floating_ip_not_found(&id));
    }
    c.floating_ip_delete(&id)
        .await
        .map_err(|e| neutron_err(500, "InternalServerError", e))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn floating_ip_show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let f = inner
        .floating_ips
        .get(&id)
        .ok_or_else(|| floating_ip_not_found(&id))?;
    Ok(axum::Json(json!({"floatingip": floating_ip_json(&c, f)})).into_response())
}

async fn port_show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let p = inner.ports.get(&id).ok_or_else(|| {
        neutron_err(
            404,
            "PortNotFound",
            format!("Port {id} could not be found."),
        )
    })?;
    Ok(axum::Json(json!({"port": port_json(&c, &inner, p)})).into_response())
}

async fn networks(
    State(c): State<Arc<Cloud>>,
    Query(q): Query<Vec<(String, String)>>,
) -> ApiResult {
    let items: Vec<Value> = {
        let inner = c.lock();
        inner
            .networks
            .values()
            .filter(|n| matches(&q, "id", &n.id) && matches(&q, "name", &n.name))
            .map(|n| network_json(&c, &inner, n))
            .collect()
    };
    list_response(&c, &q, items, "networks")
}

async fn network_show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let n = inner.networks.get(&id).ok_or_else(|| {
        neutron_err(
            404,
            "NetworkNotFound",
            format!("Network {id} could not be found."),
        )
    })?;
    Ok(axum::Json(json!({"network": network_json(&c, &inner, n)})).into_response())
}

/// A subnet created through the API: its show body (Networking API v2.0 "Show subnet details").
fn api_subnet_json(c: &Cloud, s: &SubnetRec) -> Value {
    json!({
        "id": s.id, "name": s.name, "network_id": s.network_id, "cidr": s.cidr,
        "ip_version": s.ip_version, "gateway_ip": null, "enable_dhcp": true,
        "allocation_pools": [], "dns_nameservers": [], "host_routes": [],
        "tenant_id": c.project_id, "project_id": c.project_id, "created_at": ts(&s.created),
        "updated_at": ts(&s.created), "description": "", "tags": [], "revision_number": 1,
    })
}

async fn subnets(State(c): State<Arc<Cloud>>, Query(q): Query<Vec<(String, String)>>) -> ApiResult {
    let items: Vec<Value> = {
        let inner = c.lock();
        let own = inner
            .networks
            .values()
            .map(|n| (n.id.as_str(), n.subnet_id.as_str(), subnet_json(&c, n)));
        let api = inner
            .subnets
            .values()
            .map(|s| (s.network_id.as_str(), s.id.as_str(), api_subnet_json(&c, s)));
        own.chain(api)
            .filter(|(net, id, _)| matches(&q, "network_id", net) && matches(&q, "id", id))
            .map(|(_, _, j)| j)
            .collect()
    };
    list_response(&c, &q, items, "subnets")
}

fn subnet_not_found(id: &str) -> super::ApiError {
    neutron_err(
        404,
        "SubnetNotFound",
        format!("Subnet {id} could not be found."),
    )
}

async fn subnet_show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let j = if let Some(s) = inner.subnets.get(&id) {
        api_subnet_json(&c, s)
    } else {
        let n = inner
            .networks
            .values()
            .find(|n| n.subnet_id == id)
            .ok_or_else(|| subnet_not_found(&id))?;
        subnet_json(&c, n)
    };
    Ok((StatusCode::OK, axum::Json(json!({"subnet": j}))).into_response())
}

/// The object under `key` of a request body, or 400 as Neutron answers a body without it.
fn body_of<'a>(body: &'a Value, key: &str) -> ApiResult<&'a Value> {
    body.get(key).filter(|p| p.is_object()).ok_or_else(|| {
        neutron_err(
            400,
            "BadRequest",
            format!("Resource body required: '{key}'"),
        )
    })
}

/// A required non-empty string attribute, or 400 as Neutron answers its absence.
fn required<'a>(v: &'a Value, key: &str) -> ApiResult<&'a str> {
    v[key].as_str().filter(|s| !s.is_empty()).ok_or_else(|| {
        neutron_err(
            400,
            "BadRequest",
            format!("Failed to parse request. Required attribute '{key}' not specified"),
        )
    })
}

fn network_not_found(id: &str) -> super::ApiError {
    neutron_err(
        404,
        "NetworkNotFound",
        format!("Network {id} could not be found."),
    )
}

/// `POST /v2.0/networks` → 201: a new network (a new id even when the name is taken, as in
/// Neutron), `ACTIVE` at once, with the testbed's bridge as its own subnet.
async fn network_create(
    State(c): State<Arc<Cloud>>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let n = body_of(&body, "network")?;
    let name = n["name"].as_str().unwrap_or("").to_string();
    let mut inner = c.lock();
    let id = inner.network_for(&new_id(), &c.default_subnet);
    let rec = inner.networks.get_mut(&id).expect("just created");
    rec.name = name;
    let j = network_json(&c, &inner, &inner.networks[&id]);
    Ok((StatusCode::CREATED, axum::Json(json!({"network": j}))).into_response())
}

/// `DELETE /v2.0/networks/{id}` → 204 with the subnets created on it; 409 `NetworkInUse` while a
/// port is on it, and for the testbed's default network.
async fn network_delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let mut inner = c.lock();
    if !inner.networks.contains_key(&id) {
        return Err(network_not_found(&id));
    }
    if id == c.default_net || inner.ports.values().any(|p| p.network_id == id) {
        return Err(neutron_err(
            409,
            "NetworkInUse",
            format!(
                "Unable to complete operation on network {id}. There are one or more ports still in use on the network."
            ),
        ));
    }
    inner.networks.remove(&id);
    inner.subnets.retain(|_, s| s.network_id != id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v2.0/subnets` → 201: a subnet record on an existing network (404 `NetworkNotFound`
/// otherwise); `network_id` and `cidr` are required, `ip_version` is 4 or 6.
async fn subnet_create(
    State(c): State<Arc<Cloud>>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let s = body_of(&body, "subnet")?;
    let net = required(s, "network_id")?;
    let cidr = required(s, "cidr")?;
    let ip_version = match s["ip_version"].as_u64() {
        None | Some(4) => 4,
        Some(6) => 6,
        Some(v) => {
            return Err(neutron_err(
                400,
                "InvalidInput",
                format!("Invalid input for ip_version. Reason: {v} is not in [4, 6]."),
            ));
        }
    };
    let mut inner = c.lock();
    if !inner.networks.contains_key(net) {
        return Err(network_not_found(net));
    }
    let rec = SubnetRec {
        id: new_id(),
        network_id: net.to_string(),
        name: s["name"].as_str().unwrap_or("").to_string(),
        cidr: cidr.to_string(),
        ip_version,
        created: chrono::Utc::now(),
    };
    let j = api_subnet_json(&c, &rec);
    inner.subnets.insert(rec.id.clone(), rec);
    Ok((StatusCode::CREATED, axum::Json(json!({"subnet": j}))).into_response())
}

/// `DELETE /v2.0/subnets/{id}` → 204 for a subnet created through the API; a network's own
/// subnet (the testbed's bridge) cannot be deleted (409 `SubnetInUse`).
async fn subnet_delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let mut inner = c.lock();
    if inner.subnets.remove(&id).is_some() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    if inner.networks.values().any(|n| n.subnet_id == id) {
        return Err(neutron_err(
            409,
            "SubnetInUse",
            format!(
                "Unable to complete operation on subnet {id}: it is the testbed bridge's subnet of its network."
            ),
        ));
    }
    Err(subnet_not_found(&id))
}

fn port_not_found(id: &str) -> super::ApiError {
    neutron_err(
        404,
        "PortNotFound",
        format!("Port {id} could not be found."),
    )
}

/// `POST /v2.0/ports` → 201: a port on an existing network (404 `NetworkNotFound` otherwise), at
/// the first `fixed_ips[].ip_address` if one is asked for (409 `IpAddressAlreadyAllocated` when
/// taken), else at the next free address.
async fn port_create(
    State(c): State<Arc<Cloud>>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let p = body_of(&body, "port")?;
    let net = required(p, "network_id")?;
    let mut fixed = None;
    for f in p["fixed_ips"].as_array().into_iter().flatten() {
        if let Some(ip) = f["ip_address"].as_str() {
            fixed = Some(ip.parse::<Ipv4Addr>().map_err(|_| {
                neutron_err(
                    400,
                    "InvalidInput",
                    format!("Invalid input for operation: '{ip}' is not a valid IP address."),
                )
            })?);
            break;
        }
    }
    let name = p["name"].as_str().unwrap_or("").to_string();
    let pairs = allowed_pairs(&p["allowed_address_pairs"])
        .map_err(|e| neutron_err(400, "InvalidInput", e))?;
    let mut inner = c.lock();
    if !inner.networks.contains_key(net) {
        return Err(neutron_err(
            404,
            "NetworkNotFound",
            format!("Network {net} could not be found."),
        ));
    }
    let id = c
        .port_create(&mut inner, net, &name, fixed, pairs)
        .map_err(|e| neutron_err(409, "IpAddressAlreadyAllocated", e))?;
    let j = port_json(&c, &inner, &inner.ports[&id]);
    Ok((StatusCode::CREATED, axum::Json(json!({"port": j}))).into_response())
}

/// `PUT /v2.0/ports/{id}`: `name` and `allowed_address_pairs` change; other attributes are
/// accepted and ignored (the testbed has no security groups, QoS or bindings).
async fn port_update(
    State(c): State<Arc<Cloud>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let p = body_of(&body, "port")?;
    let pairs = match p.get("allowed_address_pairs") {
        None => None,
        Some(v) => Some(allowed_pairs(v).map_err(|e| neutron_err(400, "InvalidInput", e))?),
    };
    let mut inner = c.lock();
    let port = inner
        .ports
        .get_mut(&id)
        .ok_or_else(|| port_not_found(&id))?;
    if let Some(n) = p["name"].as_str() {
        port.name = n.to_string();
    }
    if let Some(pairs) = pairs {
        port.allowed_address_pairs = pairs;
    }
    let j = port_json(&c, &inner, &inner.ports[&id]);
    Ok(axum::Json(json!({"port": j})).into_response())
}

/// `DELETE /v2.0/ports/{id}` → 204; the address is released and the port detached from its
/// server.
async fn port_delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let mut inner = c.lock();
    if !inner.ports.contains_key(&id) {
        return Err(port_not_found(&id));
    }
    c.port_delete(&mut inner, &id);
    Ok(StatusCode::NO_CONTENT.into_response())
}
