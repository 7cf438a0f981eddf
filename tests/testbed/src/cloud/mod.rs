//! The simulated OpenStack cloud: Keystone v3, Nova, Neutron, Cinder, Glance and Heat in one axum app.
//!
//! Service prefixes (catalog URLs, public interface, region `RegionOne`):
//!
//! | service | catalog type | catalog URL |
//! |---|---|---|
//! | Keystone v3 | `identity` | `{base}/identity/v3` |
//! | Nova 2.1 (microversions 2.1–2.79) | `compute` | `{base}/compute/v2.1` |
//! | Neutron 2.0 | `network` | `{base}/network` (API under `/network/v2.0`) |
//! | Cinder 3 | `block-storage`, `volumev3` | `{base}/volume/v3/{project_id}` (project-less paths work too) |
//! | Glance 2 | `image` | `{base}/image` (API under `/image/v2`) |
//! | Heat 1 | `orchestration` | `{base}/heat-api/v1/{project_id}` |
//! | the Tacker stand-in ([`tacker`]: VNF LCM v2) | `nfv-orchestration` | `{base}/tacker` (API under `/tacker/vnflcm/v2`) |
//!
//! Fault injection and inspection live under `{base}/testbed/…` without authentication (see
//! [`faults_api`]), and as methods on [`Cloud`].

pub mod backend;
mod cinder;
pub mod farm;
pub mod faults;
pub mod faults_api;
mod glance;
pub mod heat;
mod keystone;
mod neutron;
mod nova;
pub mod ops;
pub mod real;
pub mod state;
pub mod tacker;
pub mod tacker_vims;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub use backend::{HostBackend, HostRequest, HostStarted, HostVolume};
pub use faults::FaultRule;
pub use real::{ControlPlane, RealControlPlane};
use state::Inner;

/// Project (tenant) name every client authenticates to.
pub const PROJECT_NAME: &str = "testbed";
/// User name in the generated clouds.yaml.
pub const USER_NAME: &str = "admin";
/// Region of every catalog endpoint.
pub const REGION: &str = "RegionOne";
/// With a real control plane: the file beside clouds.yaml that points at the simulated Keystone
/// (whose catalog lists the simulated Heat), cloud [`CLOUD_NAME`].
pub const SIMULATED_CLOUDS_YAML: &str = "clouds-simulated.yaml";
/// Cloud name in the generated clouds.yaml.
pub const CLOUD_NAME: &str = "testbed";

/// How to run a simulated cloud.
#[derive(Clone)]
pub struct CloudOptions {
    /// Where clouds.yaml (and the farm's state) go.
    pub state_dir: PathBuf,
    /// Listen address; port 0 picks a free port. Only loopback makes sense.
    pub listen: SocketAddr,
    /// The testbed subnet, e.g. `10.231.0.0/24`; `.1` is the bridge, servers get `.10` upwards.
    pub subnet: String,
    /// Password of user `admin` written into clouds.yaml.
    pub password: String,
    /// The host farm; `None` = servers are records only.
    pub farm: Option<Arc<dyn HostBackend>>,
    /// Start the kubespray flavour's Ansible server (needs `farm`): a host outside any stack at
    /// the subnet's last usable address, described in `state_dir/ansible-server.json`
    /// ([`crate::hosts::AnsibleServer`]). Default `false`.
    pub ansible_server: bool,
    /// Simulated (default) or real Keystone and Heat ([`real`]): with a real control plane,
    /// clouds.yaml points at the real Keystone, whose catalog lists the real Heat and the
    /// simulated Nova, Neutron, Cinder and Glance, and those accept the real Keystone's tokens
    /// too; [`SIMULATED_CLOUDS_YAML`] beside it points at the simulated Keystone and Heat.
    pub control_plane: ControlPlane,
}

impl std::fmt::Debug for CloudOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudOptions")
            .field("state_dir", &self.state_dir)
            .field("listen", &self.listen)
            .field("subnet", &self.subnet)
            .field("farm", &self.farm.is_some())
            .field("ansible_server", &self.ansible_server)
            .field("control_plane", &self.control_plane)
            .finish()
    }
}

impl CloudOptions {
    /// Options for an in-process cloud on `127.0.0.1:0` without hosts, default subnet.
    pub fn no_hosts(state_dir: impl Into<PathBuf>) -> CloudOptions {
        CloudOptions {
            state_dir: state_dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            subnet: "10.231.0.0/24".to_string(),
            password: "testbed-secret".to_string(),
            farm: None,
            ansible_server: false,
            control_plane: ControlPlane::Simulated,
        }
    }
}

/// An application credential as Keystone keeps it (Identity API v3, application credentials):
/// its id, its name (unique per user) and its secret, shown once at creation.
#[derive(Debug, Clone)]
pub struct ApplicationCredential {
    /// The credential's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its secret.
    pub secret: String,
}

/// The cloud's shared state: records, stacks, faults, counters and the optional farm.
///
/// Fault-injection and inspection methods are in [`ops`] (`impl Cloud`).
pub struct Cloud {
    pub(crate) inner: Mutex<Inner>,
    pub(crate) farm: Option<Arc<dyn HostBackend>>,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub(crate) base: String,
    pub(crate) project_id: String,
    pub(crate) user_id: String,
    pub(crate) password: String,
    /// The one application credential of user `admin` on project `testbed`.
    pub(crate) application_credential: ApplicationCredential,
    /// Network address of the subnet as u32.
    pub(crate) net_addr: u32,
    /// Prefix length of the subnet.
    pub(crate) prefix_len: u8,
    /// The default network (the bridge) id.
    pub(crate) default_net: String,
    /// The subnet id of the default network.
    pub(crate) default_subnet: String,
    /// The Tacker stand-in's records (own lock, never held with `inner`).
    pub(crate) tacker: Mutex<tacker::TackerState>,
    /// With a real control plane: the real Keystone checks the tokens (set once it is up).
    pub(crate) token_check: std::sync::OnceLock<real::TokenCheck>,
}

impl Cloud {
    fn new(opts: &CloudOptions, base: String) -> anyhow::Result<Cloud> {
        let (addr, len) = opts
            .subnet
            .split_once('/')
            .context("subnet must be A.B.C.D/N")?;
        let addr: Ipv4Addr = addr.parse().context("subnet address")?;
        let prefix_len: u8 = len.parse().context("subnet prefix length")?;
        anyhow::ensure!(
            (8..=28).contains(&prefix_len),
            "subnet prefix length must be 8..=28"
        );
        let mask = u32::MAX << (32 - prefix_len);
        let mut inner = Inner::default();
        let default_subnet = state::new_id();
        let default_net = inner.network_for("testbed-net", &default_subnet);
        // The network floating IPs come from, by the name devstack gives it and templates use
        // (`floating_network: public`, e.g. Tacker's sample BaseHOTs); on the same bridge.
        inner.network_for("public", &default_subnet);
        // The floating IP router of the host farm (`HostFarm::floating_router_ip`).
        inner.ips_in_use.insert(2);
        for name in [
            "ubuntu-22.04-server-cloudimg-amd64",
            "cirros-0.5.2-x86_64-disk",
            "debian-12-generic-amd64",
        ] {
            inner.image_for(name);
        }
        Ok(Cloud {
            inner: Mutex::new(inner),
            farm: opts.farm.clone(),
            base,
            project_id: uuid::Uuid::new_v4().simple().to_string(),
            user_id: uuid::Uuid::new_v4().simple().to_string(),
            password: opts.password.clone(),
            application_credential: ApplicationCredential {
                id: uuid::Uuid::new_v4().simple().to_string(),
                name: "vnfkeeper".to_string(),
                secret: format!("appcred-{}", uuid::Uuid::new_v4().simple()),
            },
            net_addr: u32::from(addr) & mask,
            prefix_len,
            default_net,
            default_subnet,
            tacker: Mutex::default(),
            token_check: std::sync::OnceLock::new(),
        })
    }

    /// Locks the records (never hold the guard across an await).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The project id every token is scoped to.
    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    /// Allocates the lowest free address from `.10` upwards; `None` when the subnet is full.
    pub(crate) fn alloc_ip(&self, inner: &mut Inner) -> Option<Ipv4Addr> {
        let size = 1u32 << (32 - self.prefix_len);
        (10..size - 1)
            .find(|o| !inner.ips_in_use.contains(o))
            .map(|o| {
                inner.ips_in_use.insert(o);
                Ipv4Addr::from(self.net_addr + o)
            })
    }

    /// Allocates a floating address: the highest free one below the subnet's last usable
    /// address (kept for kubespray's Ansible server), so that floating and fixed addresses of
    /// one stack differ visibly; `None` when the subnet is full. The floating pool shares the
    /// bridge with the fixed addresses (the farm's router answers for it).
    pub(crate) fn alloc_floating_ip(&self, inner: &mut Inner) -> Option<Ipv4Addr> {
        let size = 1u32 << (32 - self.prefix_len);
        (10..size - 2)
            .rev()
            .find(|o| !inner.ips_in_use.contains(o))
            .map(|o| {
                inner.ips_in_use.insert(o);
                Ipv4Addr::from(self.net_addr + o)
            })
    }

    /// Reserves a specific address (a `fixed_ips` request); false when taken or outside the subnet.
    pub(crate) fn reserve_ip(&self, inner: &mut Inner, ip: Ipv4Addr) -> bool {
        let size = 1u32 << (32 - self.prefix_len);
        let v = u32::from(ip);
        if v < self.net_addr || v >= self.net_addr + size {
            return false;
        }
        let o = v - self.net_addr;
        if o < 2 || o == size - 1 {
            return false;
        }
        inner.ips_in_use.insert(o)
    }

    /// Releases an address.
    pub(crate) fn release_ip(&self, inner: &mut Inner, ip: Ipv4Addr) {
        let v = u32::from(ip);
        if v >= self.net_addr {
            inner.ips_in_use.remove(&(v - self.net_addr));
        }
    }

    /// CIDR string of the subnet.
    pub(crate) fn cidr(&self) -> String {
        format!("{}/{}", Ipv4Addr::from(self.net_addr), self.prefix_len)
    }

    /// The catalog entries (type, name, url).
    pub(crate) fn catalog(&self) -> Vec<(&'static str, &'static str, String)> {
        let b = &self.base;
        let p = &self.project_id;
        vec![
            ("identity", "keystone", format!("{b}/identity/v3")),
            ("compute", "nova", format!("{b}/compute/v2.1")),
            ("network", "neutron", format!("{b}/network")),
            ("block-storage", "cinder", format!("{b}/volume/v3/{p}")),
            ("volumev3", "cinderv3", format!("{b}/volume/v3/{p}")),
            ("image", "glance", format!("{b}/image")),
            ("orchestration", "heat", format!("{b}/heat-api/v1/{p}")),
            ("nfv-orchestration", "tacker", format!("{b}/tacker")),
        ]
    }
}

/// An API error: status plus the service's JSON error body.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON body in the owning service's error format.
    pub body: Value,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

/// Result of an API handler.
pub type ApiResult<T = Response> = Result<T, ApiError>;

/// Nova/Cinder style error: `{"itemNotFound": {"code": 404, "message": …}}`.
pub(crate) fn nova_err(status: u16, kind: &str, msg: impl Into<String>) -> ApiError {
    ApiError {
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body: json!({ kind: {"code": status, "message": msg.into()} }),
    }
}

/// Neutron style error: `{"NeutronError": {"type": …, "message": …, "detail": ""}}`.
pub(crate) fn neutron_err(status: u16, kind: &str, msg: impl Into<String>) -> ApiError {
    ApiError {
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body: json!({"NeutronError": {"type": kind, "message": msg.into(), "detail": ""}}),
    }
}

/// Heat / Keystone style error: `{"code", "title", "explanation", "error": {"type", "message"}}`.
pub(crate) fn heat_err(status: u16, kind: &str, msg: impl Into<String>) -> ApiError {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let msg = msg.into();
    ApiError {
        status: code,
        body: json!({
            "code": status,
            "title": code.canonical_reason().unwrap_or(""),
            "explanation": msg,
            "error": {"type": kind, "message": msg, "traceback": null},
        }),
    }
}

/// Splits `limit`/`marker` pagination over items that have an `"id"`.
///
/// Returns the page and whether it is full (`len == limit`), which is when Nova, Neutron and
/// Cinder add a `next` link. An unknown marker is a 400 (as Nova's "marker [x] not found").
pub(crate) fn paginate(
    items: Vec<Value>,
    limit: Option<usize>,
    marker: Option<&str>,
    max_limit: usize,
    err: fn(u16, &str, String) -> ApiError,
) -> ApiResult<(Vec<Value>, bool)> {
    let start = match marker {
        Some(m) => match items.iter().position(|v| v["id"] == m) {
            Some(i) => i + 1,
            None => return Err(err(400, "badRequest", format!("marker [{m}] not found"))),
        },
        None => 0,
    };
    let limit = limit.unwrap_or(max_limit).min(max_limit);
    let page: Vec<Value> = items.into_iter().skip(start).take(limit).collect();
    let full = limit > 0 && page.len() == limit;
    Ok((page, full))
}

/// Builds a `next` link: `url` + the original query without `limit`/`marker` + new ones.
pub(crate) fn next_link(
    url: &str,
    query: &[(String, String)],
    limit: usize,
    marker: &str,
) -> Value {
    let mut q: Vec<String> = query
        .iter()
        .filter(|(k, _)| k != "limit" && k != "marker")
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    q.push(format!("limit={limit}"));
    q.push(format!("marker={}", enc(marker)));
    json!({"rel": "next", "href": format!("{url}?{}", q.join("&"))})
}

/// Minimal percent-encoding for query components.
pub(crate) fn enc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// Query pairs → first value of a key.
pub(crate) fn qget<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Parses `limit` (400 on garbage).
pub(crate) fn qlimit(
    q: &[(String, String)],
    err: fn(u16, &str, String) -> ApiError,
) -> ApiResult<Option<usize>> {
    match qget(q, "limit") {
        None => Ok(None),
        Some(v) => v.parse::<usize>().map(Some).map_err(|_| {
            err(
                400,
                "badRequest",
                format!("Invalid input for field/attribute limit. Value: {v}."),
            )
        }),
    }
}

pub(crate) fn nova_err_fn(status: u16, kind: &str, msg: String) -> ApiError {
    nova_err(status, kind, msg)
}
pub(crate) fn heat_err_fn(status: u16, kind: &str, msg: String) -> ApiError {
    heat_err(status, kind, msg)
}
pub(crate) fn neutron_err_fn(status: u16, kind: &str, msg: String) -> ApiError {
    neutron_err(status, kind, msg)
}

/// Which service a path belongs to (the counter and fault key), and whether it needs a token.
fn classify(method: &axum::http::Method, path: &str) -> (Option<&'static str>, bool) {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let service = match first {
        "identity" => Some("identity"),
        "compute" => Some("compute"),
        "network" => Some("network"),
        "volume" => Some("volume"),
        "image" => Some("image"),
        "heat-api" => Some("orchestration"),
        "tacker" => Some("nfv-orchestration"),
        _ => None,
    };
    let trimmed = path.trim_end_matches('/');
    let version_root = matches!(
        trimmed,
        "" | "/identity"
            | "/identity/v3"
            | "/compute"
            | "/compute/v2.1"
            | "/network"
            | "/network/v2.0"
            | "/volume"
            | "/volume/v3"
            | "/image"
            | "/image/v2"
            | "/heat-api"
            | "/tacker"
    );
    let token_issue = method == axum::http::Method::POST && trimmed == "/identity/v3/auth/tokens";
    let needs_auth = service.is_some() && !version_root && !token_issue;
    (service, needs_auth)
}

/// Path with ids replaced by `{id}` and the project segment by `{project}`, for counters.
fn normalize_path(path: &str, project: &str) -> String {
    path.split('/')
        .map(|s| {
            if s == project {
                "{project}"
            } else if uuid::Uuid::parse_str(s).is_ok() {
                "{id}"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn gatekeeper(State(cloud): State<Arc<Cloud>>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let (service, needs_auth) = classify(&method, &path);
    let Some(service) = service else {
        return next.run(req).await;
    };
    let decision = {
        let mut inner = cloud.lock();
        let key = format!("{method} {}", normalize_path(&path, &cloud.project_id));
        *inner
            .counters
            .entry(service.to_string())
            .or_default()
            .entry(key)
            .or_default() += 1;
        inner.faults.decide(service, method.as_str(), &path)
    };
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if let Some(status) = decision.status {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let msg = format!("injected fault: {service} answers {status}");
        let err = match service {
            "network" => neutron_err(status, "InjectedFault", msg),
            "orchestration" | "identity" => heat_err(status, "InjectedFault", msg),
            _ => nova_err(status, "computeFault", msg),
        };
        return (code, axum::Json(err.body)).into_response();
    }
    if needs_auth {
        let token = req
            .headers()
            .get("x-auth-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // A token of the simulated Keystone, or (with a real control plane) of the real one.
        let simulated = |t: &str| {
            let inner = cloud.lock();
            inner
                .tokens
                .get(t)
                .is_some_and(|exp| *exp > chrono::Utc::now())
        };
        let ok = match (token, cloud.token_check.get()) {
            (None, _) => false,
            (Some(t), None) => simulated(&t),
            (Some(t), Some(check)) => simulated(&t) || check.is_valid(&t).await,
        };
        if !ok {
            let mut r = heat_err(
                401,
                "Unauthorized",
                "The request you have made requires authentication.",
            )
            .into_response();
            r.headers_mut().insert(
                "www-authenticate",
                HeaderValue::from_str(&format!("Keystone uri=\"{}/identity\"", cloud.base))
                    .unwrap_or(HeaderValue::from_static("Keystone")),
            );
            return r;
        }
    }
    next.run(req).await
}

async fn fallback(req: Request<Body>) -> ApiError {
    heat_err(
        404,
        "NotFound",
        format!("no route for {} {}", req.method(), req.uri().path()),
    )
}

/// Builds the axum app for a cloud.
pub fn router(cloud: Arc<Cloud>) -> Router {
    Router::new()
        .merge(keystone::routes())
        .merge(nova::routes())
        .merge(neutron::routes())
        .merge(cinder::routes())
        .merge(glance::routes())
        .merge(heat::api::routes())
        .merge(tacker::routes())
        .merge(tacker_vims::routes())
        .merge(faults_api::routes())
        .fallback(fallback)
        .layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            gatekeeper,
        ))
        .with_state(cloud)
}

/// The clouds.yaml text for a cloud (password auth; usable by the `openstack` crate 0.6 and
/// python-openstackclient).
pub fn clouds_yaml(base: &str, password: &str) -> String {
    format!(
        "# Written by `testbed serve`; valid while it runs.\nclouds:\n  {CLOUD_NAME}:\n    auth_type: password\n    auth:\n      auth_url: {base}/identity/v3\n      username: {USER_NAME}\n      password: {password}\n      project_name: {PROJECT_NAME}\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: {REGION}\n    interface: public\n    identity_api_version: 3\n"
    )
}

/// The clouds.yaml text for a real control plane: user `admin` in project `admin` of the real
/// Keystone at `keystone_url` (`…/v3`), cloud [`CLOUD_NAME`].
pub fn real_clouds_yaml(keystone_url: &str, password: &str) -> String {
    format!(
        "# Written by the testbed; valid while its real control plane runs.\nclouds:\n  {CLOUD_NAME}:\n    auth_type: password\n    auth:\n      auth_url: {keystone_url}\n      username: admin\n      password: {password}\n      project_name: admin\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: {REGION}\n    interface: public\n    identity_api_version: 3\n"
    )
}

/// [`write_atomic`] with the file readable by its owner only (it holds a password).
pub fn write_private_atomic(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path.parent().context("path has no parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".clouds.tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(contents.as_bytes())?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// Writes `path` atomically (temporary file in the same directory, then rename).
pub fn write_atomic(path: &Path, contents: &str) -> anyhow::Result<()> {
    let dir = path.parent().context("path has no parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// A running simulated cloud (in-process): HTTP server + state (+ farm).
///
/// `shutdown()` stops the server and every host; `Drop` stops the server and, if a tokio runtime
/// is still around, asks the farm to stop its hosts in the background (prefer `shutdown()`).
pub struct Testbed {
    cloud: Arc<Cloud>,
    addr: SocketAddr,
    clouds_yaml: PathBuf,
    ansible: Option<(crate::hosts::AnsibleServer, PathBuf)>,
    server: Option<tokio::task::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    real: Option<RealControlPlane>,
    down: bool,
}

impl Testbed {
    /// Binds the listener, starts the HTTP server and writes `state_dir/clouds.yaml` (atomically)
    /// once the server accepts connections; with [`CloudOptions::ansible_server`], then starts the
    /// Ansible server and writes `state_dir/ansible-server.json` (mode 0600).
    ///
    /// Errors: bind failure, bad subnet, unwritable state dir; an Ansible server without a farm
    /// or failing to start (everything started is stopped again).
    pub async fn start(opts: CloudOptions) -> anyhow::Result<Testbed> {
        // Loopback, or with a host farm the farm bridge's own address (`.1` of the subnet):
        // reachable from the farm's network namespaces only (a cluster node namespace on the
        // bridge, scripts/demo-failover), never from outside this machine.
        let bridge = opts.farm.as_ref().and_then(|_| {
            let net: ipnet::Ipv4Net = opts.subnet.parse().ok()?;
            net.hosts().next()
        });
        anyhow::ensure!(
            opts.listen.ip().is_loopback()
                || bridge.is_some_and(|b| opts.listen.ip() == std::net::IpAddr::V4(b)),
            "the testbed only listens on loopback or, with hosts, on the farm bridge's address"
        );
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .with_context(|| format!("binding {}", opts.listen))?;
        let addr = listener.local_addr()?;
        let base = format!("http://{addr}");
        let cloud = Arc::new(Cloud::new(&opts, base.clone())?);
        let app = router(cloud.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let r = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = r {
                tracing::error!("testbed HTTP server failed: {e}");
            }
        });
        let path = opts.state_dir.join("clouds.yaml");
        let mut tb = Testbed {
            cloud,
            addr,
            clouds_yaml: path.clone(),
            ansible: None,
            server: Some(server),
            stop: Some(tx),
            real: None,
            down: false,
        };
        match &opts.control_plane {
            ControlPlane::Simulated => {
                write_atomic(&path, &clouds_yaml(&base, &opts.password))?;
            }
            ControlPlane::Real(tag) | ControlPlane::RealWithTacker(tag) => {
                let started = RealControlPlane::start(
                    &opts.state_dir.join("openstack"),
                    tag,
                    &base,
                    opts.control_plane.with_tacker(),
                )
                .await;
                let plane = match started {
                    Ok(p) => p,
                    Err(e) => {
                        tb.shutdown().await;
                        return Err(e.context("starting the real control plane"));
                    }
                };
                // The simulated Keystone (and through its catalog the simulated Heat) stays
                // reachable, for differential checks against the real Heat.
                write_atomic(
                    &opts.state_dir.join(SIMULATED_CLOUDS_YAML),
                    &clouds_yaml(&base, &opts.password),
                )?;
                let check = real::TokenCheck::new(&plane)?;
                let _ = tb.cloud.token_check.set(check);
                write_private_atomic(
                    &path,
                    &real_clouds_yaml(&plane.keystone_url, plane.admin_password()),
                )?;
                tb.real = Some(plane);
            }
        }
        if opts.ansible_server {
            match tb.start_ansible_server(&opts.state_dir).await {
                Ok(a) => tb.ansible = Some(a),
                Err(e) => {
                    tb.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(tb)
    }

    async fn start_ansible_server(
        &self,
        state_dir: &Path,
    ) -> anyhow::Result<(crate::hosts::AnsibleServer, PathBuf)> {
        let farm = self
            .cloud
            .farm
            .clone()
            .context("the Ansible server needs the host farm (not --no-hosts)")?;
        let ip = {
            let c = &self.cloud;
            let last = Ipv4Addr::from(c.net_addr + (1u32 << (32 - c.prefix_len)) - 2);
            anyhow::ensure!(
                c.reserve_ip(&mut c.lock(), last),
                "address {last} for the Ansible server is taken"
            );
            last
        };
        let server = farm.start_ansible_server(ip).await?;
        let path = state_dir.join(crate::hosts::ANSIBLE_SERVER_FILE);
        server.write(&path)?;
        Ok((server, path))
    }

    /// The Ansible server and the path of its `ansible-server.json` (next to clouds.yaml), when
    /// started with [`CloudOptions::ansible_server`].
    pub fn ansible_server(&self) -> Option<(&crate::hosts::AnsibleServer, &Path)> {
        self.ansible.as_ref().map(|(a, p)| (a, p.as_path()))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Keystone auth URL (`{base}/identity/v3`).
    pub fn auth_url(&self) -> String {
        format!("{}/identity/v3", self.base_url())
    }

    /// Path of the generated clouds.yaml (cloud name [`CLOUD_NAME`]).
    pub fn clouds_yaml(&self) -> &Path {
        &self.clouds_yaml
    }

    /// The application credential user `admin` holds on project `testbed` (Keystone's
    /// `POST /v3/auth/tokens` method `application_credential` accepts it), and that user's id.
    pub fn application_credential(&self) -> (ApplicationCredential, String) {
        (
            self.cloud.application_credential.clone(),
            self.cloud.user_id.clone(),
        )
    }

    /// The cloud state: fault injection and inspection methods.
    pub fn cloud(&self) -> &Arc<Cloud> {
        &self.cloud
    }

    /// The real control plane, when the testbed runs one ([`ControlPlane::Real`]).
    pub fn real(&self) -> Option<&RealControlPlane> {
        self.real.as_ref()
    }

    /// Stops the real control plane (if any: Heat before RabbitMQ, then Keystone, RabbitMQ and
    /// MariaDB), the HTTP server, then every host (servers are deleted from the farm).
    pub async fn shutdown(mut self) {
        if let Some(real) = self.real.take() {
            real.stop().await;
        }
        self.stop_server().await;
        if let Some(farm) = self.cloud.farm.clone() {
            farm.shutdown().await;
        }
        self.down = true;
    }

    async fn stop_server(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.server.take()
            && tokio::time::timeout(std::time::Duration::from_secs(3), h)
                .await
                .is_err()
        {
            tracing::warn!("testbed HTTP server did not stop within 3 s");
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.server.take() {
            h.abort();
        }
        if !self.down
            && let Some(farm) = self.cloud.farm.clone()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move { farm.shutdown().await });
        }
    }
}
