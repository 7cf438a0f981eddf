//! [`OpenStackCloud`]: the [`Cloud`] implementation over an osauth session.
//!
//! Raw requests go through `Session::request(service, method, path)` (token, catalog, region and
//! interface filters from osauth) and are answered with `send_unchecked`, so we see the status,
//! the final URL and the body ourselves. Service types:
//!
//! | service | catalog type | version discovery |
//! |---|---|---|
//! | Nova | `compute` | off: the catalog URL (`…/v2.1`) is used verbatim |
//! | Neutron | `network` | on: the catalog URL is usually unversioned; discovery finds `/v2.0` |
//! | Cinder | `block-storage`, falling back to `volumev3` | off: `…/v3/{project_id}` verbatim |
//! | Heat | `orchestration` | off: `…/v1/{project_id}` verbatim |
//! | Tacker | `nfv-orchestration` | off: the catalog URL (unversioned) + `vnflcm/v2/…`, with the `Version: 2.0.0` header Tacker's v2 API requires |
//!
//! Cinder: osauth itself looks Cinder up only as `block-storage`, but some clouds register only
//! `volumev3`; and osauth's version discovery (GET the catalog URL, on 404 its parent, then follow
//! the version document's `self` link) can turn `…/v3/{project_id}` into project-less URLs
//! (`…/v3/volumes/detail`) that only recent Cinder releases accept.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use openstack::session::{ServiceType, Session};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::config::{self, ApplicationCredentialRef, Credentials, Project};
use super::error::error_message;
use super::types::{FloatingIp, Port, Server, Stack, StackCreate, StackRef, StackResource, Volume};
use super::{Cloud, CloudError, StackStatus};

/// A catalog service type with its discovery setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Svc {
    catalog: &'static str,
    discovery: bool,
}

impl ServiceType for Svc {
    fn catalog_type(&self) -> &'static str {
        self.catalog
    }

    fn version_discovery_supported(&self) -> bool {
        self.discovery
    }
}

/// Nova, catalog URL verbatim.
pub(crate) const COMPUTE: Svc = Svc {
    catalog: "compute",
    discovery: false,
};
/// Neutron, with version discovery.
pub(crate) const NETWORK: Svc = Svc {
    catalog: "network",
    discovery: true,
};
/// Heat, catalog URL verbatim.
pub(crate) const ORCHESTRATION: Svc = Svc {
    catalog: "orchestration",
    discovery: false,
};
/// Tacker (companion mode), catalog URL verbatim.
pub(crate) const NFV_ORCHESTRATION: Svc = Svc {
    catalog: "nfv-orchestration",
    discovery: false,
};
/// The API version Tacker's `/vnflcm/v2` is asked for (SOL013 §4.2 `Version` header).
const TACKER_API_VERSION: &str = "2.0.0";
/// Cinder catalog types, in order of preference.
const BLOCK_STORAGE_TYPES: [&str; 2] = ["block-storage", "volumev3"];

/// How [`Cloud::wait_stack`] polls: the first sleep is `initial`, each next one is multiplied
/// by `factor` up to `max`, and every sleep is varied by ±`jitter` (a fraction, 0.0–1.0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PollPolicy {
    /// First sleep between two polls.
    pub initial: Duration,
    /// Longest sleep between two polls.
    pub max: Duration,
    /// Growth factor per poll (≥ 1.0).
    pub factor: f64,
    /// Relative jitter applied to each sleep, e.g. 0.2 = ±20 %.
    pub jitter: f64,
}

impl Default for PollPolicy {
    /// 0.15 s, growing by half up to 20 s, ±20 % (Tacker polls every 5 s). A short first sleep
    /// because a stack update that replaces one server often completes within a second, and a
    /// wait overshoots the stack's end by up to the sleep it is in: polls fall at 0.15, 0.375,
    /// 0.71, 1.22 s… (with a first sleep of 0.5 s at 0.5, 1.25, 2.38 s…). The growth keeps a
    /// long create to 14 polls in its first minute (11 from 0.5 s) and one every 20 s after.
    fn default() -> PollPolicy {
        PollPolicy {
            initial: Duration::from_millis(150),
            max: Duration::from_secs(20),
            factor: 1.5,
            jitter: 0.2,
        }
    }
}

impl PollPolicy {
    /// The sleep before poll number `n` (0-based), with jitter.
    pub(crate) fn delay(&self, n: u32) -> Duration {
        let base = self.initial.as_secs_f64() * self.factor.max(1.0).powi(n.min(64) as i32);
        let base = base.min(self.max.as_secs_f64());
        let j = self.jitter.clamp(0.0, 1.0);
        let r = (uuid::Uuid::new_v4().as_u128() % 10_000) as f64 / 10_000.0; // 0.0..1.0
        Duration::from_secs_f64((base * (1.0 - j + 2.0 * j * r)).max(0.0))
    }
}

/// One decoded HTTP answer.
pub(crate) struct Reply {
    /// HTTP status.
    pub(crate) status: u16,
    /// Method, for errors.
    pub(crate) method: Method,
    /// Final URL (after redirects), for errors.
    pub(crate) url: String,
    /// Body text.
    pub(crate) body: String,
    /// `Location` header of a 3xx answer that was not followed.
    pub(crate) location: Option<String>,
    /// `Date` header (RFC 9110 §6.6.1), as given.
    pub(crate) date: Option<String>,
    /// `Link` header (RFC 8288), as given: Tacker's next page of a list.
    pub(crate) link: Option<String>,
}

impl Reply {
    /// Decodes the body as JSON into `T`.
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T, CloudError> {
        serde_json::from_str(&self.body).map_err(|e| self.invalid(e.to_string()))
    }

    /// An [`CloudError::InvalidResponse`] for this reply.
    pub(crate) fn invalid(&self, message: String) -> CloudError {
        CloudError::InvalidResponse {
            method: self.method.to_string(),
            url: self.url.clone(),
            message,
        }
    }
}

/// One `changes-since` answer: the changed servers and the server's time.
#[derive(Debug, Clone)]
pub struct ChangedServers {
    /// Servers changed at or after the time asked (deleted ones with status `DELETED`).
    pub servers: Vec<Server>,
    /// The answer's `Date` header.
    pub date: Option<vnfkeeper_core::model::Timestamp>,
}

/// The OpenStack implementation of [`Cloud`], built from one clouds.yaml entry.
///
/// Cheap to clone: clones share the session (token and endpoint cache) and the request counter.
/// `Debug` shows neither the token nor the password.
#[derive(Clone)]
pub struct OpenStackCloud {
    session: Session,
    cloud: String,
    timeout: Duration,
    page_size: Option<u32>,
    poll: PollPolicy,
    requests: Arc<AtomicU64>,
    block_storage: Arc<OnceLock<&'static str>>,
}

impl fmt::Debug for OpenStackCloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenStackCloud")
            .field("cloud", &self.cloud)
            .field("timeout", &self.timeout)
            .field("page_size", &self.page_size)
            .field("poll", &self.poll)
            .field("requests", &self.requests.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl OpenStackCloud {
    /// Loads entry `cloud` of the clouds.yaml at `clouds_yaml`, authenticates with Keystone v3
    /// (one token request) and returns a client whose every request times out after `timeout`.
    ///
    /// Supported entry keys: see the `config` module docs (password or v3token auth, project by
    /// name or id, `region_name`, `interface`, `cacert` (PEM; relative to the file), `verify`).
    ///
    /// Errors: [`CloudError::Config`] (file, entry or key problems, unreadable `cacert`),
    /// [`CloudError::Auth`] (Keystone refused the credentials), [`CloudError::Timeout`] /
    /// [`CloudError::Connection`] (Keystone unreachable; transient).
    pub async fn connect(
        clouds_yaml: &Path,
        cloud: &str,
        timeout: Duration,
    ) -> Result<OpenStackCloud, CloudError> {
        let entry = config::load(clouds_yaml, cloud)?;
        let cfg_err = |message: String| CloudError::Config {
            path: clouds_yaml.to_path_buf(),
            message,
        };
        let client = http_client(&entry, cloud, timeout).map_err(cfg_err)?;
        let started = Instant::now();
        let mut session = tokio::time::timeout(timeout, keystone_session(&entry, cloud, client))
            .await
            .map_err(|_| CloudError::Timeout {
                method: "POST".into(),
                url: format!("{}/auth/tokens", entry.auth_url.trim_end_matches('/')),
                after: timeout,
            })??;
        tracing::debug!(
            cloud,
            ms = started.elapsed().as_millis() as u64,
            "keystone token issued"
        );
        if let Some(region) = &entry.region_name {
            session.set_region(region.clone());
        }
        if let Some(interface) = &entry.interface {
            let i = openstack::InterfaceType::from_str(interface)
                .map_err(|_| cfg_err(format!("clouds.{cloud}: unknown interface `{interface}`")))?;
            session.set_endpoint_interface(i);
        }
        Ok(OpenStackCloud {
            session,
            cloud: cloud.to_string(),
            timeout,
            page_size: None,
            poll: PollPolicy::default(),
            requests: Arc::new(AtomicU64::new(0)),
            block_storage: Arc::new(OnceLock::new()),
        })
    }

    /// Checks offline that entry `cloud` of the clouds.yaml at `clouds_yaml` exists and is
    /// usable (the keys [`OpenStackCloud::connect`] needs). Errors: [`CloudError::Config`]
    /// naming the file and the problem, never a credential.
    pub fn check_entry(clouds_yaml: &Path, cloud: &str) -> Result<(), CloudError> {
        config::load(clouds_yaml, cloud).map(|_| ())
    }

    /// Sets the `limit` sent with list calls (`None` = the service's default page size, e.g.
    /// Nova's `osapi_max_limit` 1000). Small values are for tests.
    pub fn with_page_size(mut self, limit: Option<u32>) -> OpenStackCloud {
        self.page_size = limit.filter(|l| *l > 0);
        self
    }

    /// Sets the polling policy of [`Cloud::wait_stack`].
    pub fn with_poll_policy(mut self, poll: PollPolicy) -> OpenStackCloud {
        self.poll = poll;
        self
    }

    /// The per-request timeout given to [`OpenStackCloud::connect`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The polling policy of [`Cloud::wait_stack`].
    pub fn poll_policy(&self) -> PollPolicy {
        self.poll
    }

    /// Sends one request and reads the whole answer; HTTP error statuses become
    /// [`CloudError::Api`]. Counts and logs the request.
    pub(crate) async fn call(
        &self,
        svc: Svc,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Reply, CloudError> {
        let reply = self.call_unchecked(svc, method, path, query, body).await?;
        if reply.status >= 400 {
            let (error_type, message) = error_message(&reply.body);
            return Err(CloudError::Api {
                method: reply.method.to_string(),
                url: reply.url,
                status: reply.status,
                error_type,
                message,
            });
        }
        Ok(reply)
    }

    /// Like [`OpenStackCloud::call`] but returns HTTP error statuses as a [`Reply`].
    ///
    /// A 401 answer (token revoked or expired early) makes the shared session fetch a new token
    /// and the request is sent once more, as keystoneauth does; both attempts are counted.
    pub(crate) async fn call_unchecked(
        &self,
        svc: Svc,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Reply, CloudError> {
        let reply = self
            .send_once(svc, method.clone(), path, query, body)
            .await?;
        if reply.status != 401 {
            return Ok(reply);
        }
        tracing::info!(method = %method, path = %path.join("/"), "token refused (401); re-authenticating once");
        let mut session = self.session.clone();
        match tokio::time::timeout(self.timeout, session.refresh()).await {
            Ok(Ok(())) => self.send_once(svc, method, path, query, body).await,
            Ok(Err(e)) => Err(map_osauth(
                e,
                &format!("re-authenticate for {method} {}", reply.url),
                "identity",
            )),
            Err(_) => Err(CloudError::Timeout {
                method: "POST".into(),
                url: "identity:/auth/tokens".into(),
                after: self.timeout,
            }),
        }
    }

    /// Sends one request with the per-request timeout; counts and logs it.
    async fn send_once(
        &self,
        svc: Svc,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Reply, CloudError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let shown = format!("{}:/{}", svc.catalog, path.join("/"));
        let mut rb = self
            .session
            .request(svc, method.clone(), path.iter().copied());
        if !query.is_empty() {
            rb = rb.query(query);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let mut rb = rb.header("accept", "application/json");
        if svc == NFV_ORCHESTRATION {
            rb = rb.header("version", TACKER_API_VERSION);
        }
        let started = Instant::now();
        let fut = async {
            let resp = rb.send_unchecked().await?;
            let status = resp.status().as_u16();
            let url = resp.url().clone();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let header = |name: reqwest::header::HeaderName| {
                resp.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(String::from)
            };
            let date = header(reqwest::header::DATE);
            let link = header(reqwest::header::LINK);
            let text = resp.text().await.map_err(openstack::Error::from)?;
            Ok::<_, openstack::Error>((status, url, text, location, date, link))
        };
        let result = tokio::time::timeout(self.timeout, fut).await;
        let ms = started.elapsed().as_millis() as u64;
        match result {
            Err(_) => {
                tracing::debug!(method = %method, path = %shown, ms, "openstack request timed out");
                Err(CloudError::Timeout {
                    method: method.to_string(),
                    url: shown,
                    after: self.timeout,
                })
            }
            Ok(Err(e)) => {
                tracing::debug!(method = %method, path = %shown, ms, error = %e, "openstack request failed");
                Err(map_osauth(e, &format!("{method} {shown}"), svc.catalog))
            }
            Ok(Ok((status, url, body, location, date, link))) => {
                tracing::debug!(method = %method, path = %url.path(), status, ms, "openstack request");
                Ok(Reply {
                    status,
                    method,
                    url: url.to_string(),
                    body,
                    location,
                    date,
                    link,
                })
            }
        }
    }

    /// The Cinder service type this cloud's catalog has (`block-storage`, else `volumev3`);
    /// looked up once (no HTTP request: the catalog came with the token).
    pub(crate) async fn block_storage(&self) -> Result<Svc, CloudError> {
        if let Some(c) = self.block_storage.get() {
            return Ok(Svc {
                catalog: c,
                discovery: false,
            });
        }
        let mut last = String::new();
        for catalog in BLOCK_STORAGE_TYPES {
            let svc = Svc {
                catalog,
                discovery: false,
            };
            let lookup = tokio::time::timeout(
                self.timeout,
                self.session.get_endpoint(svc, Vec::<&str>::new()),
            );
            match lookup.await {
                Err(_) => {
                    return Err(CloudError::Timeout {
                        method: "GET".into(),
                        url: format!("catalog lookup of {catalog}"),
                        after: self.timeout,
                    });
                }
                Ok(Ok(_)) => {
                    let _ = self.block_storage.set(catalog);
                    return Ok(svc);
                }
                Ok(Err(e)) if e.kind() == openstack::ErrorKind::EndpointNotFound => {
                    last = e.to_string()
                }
                Ok(Err(e)) => {
                    return Err(map_osauth(
                        e,
                        &format!("catalog lookup of {catalog}"),
                        catalog,
                    ));
                }
            }
        }
        Err(CloudError::EndpointNotFound {
            service: "block-storage (or volumev3)".into(),
            message: last,
        })
    }

    /// GETs every page of a collection: sends `limit` (if a page size is set) and `marker`,
    /// follows `{collection}_links[rel=next]` until a page has no next link (or is empty).
    /// The marker comes from the next link's query, else from the last item's `id`.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        svc: Svc,
        path: &[&str],
        collection: &str,
    ) -> Result<Vec<T>, CloudError> {
        Ok(self.list_query(svc, path, collection, &[]).await?.0)
    }

    /// [`OpenStackCloud::list_all`] with `extra` query parameters sent on the first page (the
    /// next links carry them on); also returns the first answer's `Date` header.
    async fn list_query<T: DeserializeOwned>(
        &self,
        svc: Svc,
        path: &[&str],
        collection: &str,
        extra: &[(&str, String)],
    ) -> Result<(Vec<T>, Option<String>), CloudError> {
        let mut date = None;
        let links_key = format!("{collection}_links");
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        let mut seen = HashSet::new();
        loop {
            let mut q: Vec<(&str, String)> = extra.to_vec();
            if let Some(l) = self.page_size {
                q.push(("limit", l.to_string()));
            }
            if let Some(m) = &marker {
                q.push(("marker", m.clone()));
            }
            let reply = self.call(svc, Method::GET, path, &q, None).await?;
            if date.is_none() {
                date = reply.date.clone();
            }
            let mut page: Value = reply.json()?;
            let Some(Value::Array(items)) = page.get_mut(collection).map(Value::take) else {
                return Err(reply.invalid(format!("no `{collection}` array in the answer")));
            };
            let count = items.len();
            let last_id = items
                .last()
                .and_then(|v| v.get("id"))
                .and_then(Value::as_str)
                .map(String::from);
            for (i, item) in items.into_iter().enumerate() {
                let v = T::deserialize(item)
                    .map_err(|e| reply.invalid(format!("{collection}[{i}] (page item): {e}")))?;
                out.push(v);
            }
            let next = page
                .get(&links_key)
                .and_then(Value::as_array)
                .and_then(|ls| {
                    ls.iter()
                        .find(|l| l.get("rel").and_then(Value::as_str) == Some("next"))
                })
                .and_then(|l| l.get("href"))
                .and_then(Value::as_str);
            let Some(next) = next else { break };
            if count == 0 {
                break;
            }
            let Some(m) = query_param(next, "marker").or(last_id) else {
                return Err(reply.invalid(format!("`{links_key}` next link without a marker")));
            };
            if !seen.insert(m.clone()) {
                return Err(reply.invalid(format!("pagination loops at marker {m}")));
            }
            marker = Some(m);
        }
        Ok((out, date))
    }

    /// The servers whose `updated` is at or after `since`, deleted ones included (status
    /// `DELETED`): `GET /v2.1/servers/detail?changes-since=<since>` (Compute API v2.1 "List
    /// Servers Detailed", `changes-since`, ISO 8601), every page — one request unless more
    /// servers changed than a page holds. `date` is the answer's `Date` header (the server's
    /// clock, second resolution), `None` when absent or unreadable. Errors: as
    /// [`Cloud::servers`].
    pub async fn servers_changed_since(
        &self,
        since: vnfkeeper_core::model::Timestamp,
    ) -> Result<ChangedServers, CloudError> {
        let (servers, date) = self
            .list_query(
                COMPUTE,
                &["servers", "detail"],
                "servers",
                &[(
                    "changes-since",
                    since.0.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                )],
            )
            .await?;
        let date = date
            .and_then(|d| chrono::DateTime::parse_from_rfc2822(&d).ok())
            .map(|d| vnfkeeper_core::model::Timestamp(d.with_timezone(&chrono::Utc)));
        Ok(ChangedServers { servers, date })
    }
}

/// Follows at most 5 redirects, and only to the same scheme, host and port: the token header
/// must not go to another origin (Heat behind a proxy may redirect to an internal URL). A
/// redirect that is not followed is returned to the caller as the 3xx answer.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt.previous().last().is_some_and(|prev| {
            let next = attempt.url();
            prev.scheme() == next.scheme()
                && prev.host_str() == next.host_str()
                && prev.port_or_known_default() == next.port_or_known_default()
        });
        if attempt.previous().len() > 5 || !same {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

/// The decoded value of query parameter `key` in `url`.
fn query_param(url: &str, key: &str) -> Option<String> {
    let q = url.split_once('?')?.1.split('#').next()?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (super::types::percent_decode(k) == key)
            .then(|| super::types::percent_decode(&v.replace('+', " ")))
    })
}

/// The HTTP client of clouds.yaml entry `cloud` (`entry`): requests bounded by `timeout`
/// (plus a second, as a backstop), connections by at most 10 s, same-origin redirects only,
/// `cacert` trusted, certificates unchecked with `verify: false` (logged). Errors: the message
/// of a [`CloudError::Config`] (unreadable or invalid `cacert`, a client that cannot be built).
fn http_client(
    entry: &config::CloudEntry,
    cloud: &str,
    timeout: Duration,
) -> Result<reqwest::Client, String> {
    // The client-level timeout is a backstop for requests osauth makes on its own (token
    // refresh, version discovery); our own calls are bounded by tokio::time::timeout.
    let mut builder = reqwest::Client::builder()
        .timeout(timeout + Duration::from_secs(1))
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .redirect(same_origin_redirects());
    if let Some(ca) = &entry.cacert {
        let pem = std::fs::read(ca).map_err(|e| format!("cacert {}: {e}", ca.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| format!("cacert {}: not a PEM certificate: {e}", ca.display()))?;
        builder = builder.add_root_certificate(cert);
    }
    if !entry.verify {
        tracing::warn!(
            cloud,
            "clouds.yaml sets verify: false; TLS certificates of the cloud are NOT verified"
        );
        builder = builder.danger_accept_invalid_certs(true);
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// The Keystone scope of `entry`: its project (by id or name) in its project domain; `None`
/// without a project (an unscoped token).
fn project_scope(entry: &config::CloudEntry) -> Option<openstack::auth::Scope> {
    entry.project.as_ref().map(|p| {
        let project = match p {
            Project::Id(id) => openstack::IdOrName::Id(id.clone()),
            Project::Name(n) => openstack::IdOrName::Name(n.clone()),
        };
        let domain = match &entry.project_domain {
            (true, id) => openstack::IdOrName::Id(id.clone()),
            (false, n) => openstack::IdOrName::Name(n.clone()),
        };
        openstack::auth::Scope::Project {
            project,
            domain: Some(domain),
        }
    })
}

/// A Keystone v3 session of clouds.yaml entry `cloud` (`entry`) over `client`: one token
/// request with its password or token credentials, scoped by [`project_scope`]. Errors: as
/// [`map_osauth`] maps them (refused credentials, Keystone unreachable).
async fn keystone_session(
    entry: &config::CloudEntry,
    cloud: &str,
    client: reqwest::Client,
) -> Result<Session, CloudError> {
    let scope = project_scope(entry);
    let context = format!("connect to cloud '{cloud}' at {}", entry.auth_url);
    let map = |e: openstack::Error| map_osauth(e, &context, "identity");
    match &entry.credentials {
        Credentials::Password {
            username,
            password,
            user_domain_name,
        } => {
            let mut auth = openstack::auth::Password::new(
                &entry.auth_url,
                username.clone(),
                password.clone(),
                user_domain_name.clone(),
            )
            .map_err(map)?;
            if let Some(s) = scope {
                auth.set_scope(s);
            }
            Session::new_with_client(client, auth).await.map_err(map)
        }
        Credentials::Token(token) => {
            let mut auth =
                openstack::auth::Token::new(&entry.auth_url, token.clone()).map_err(map)?;
            if let Some(s) = scope {
                auth.set_scope(s);
            }
            Session::new_with_client(client, auth).await.map_err(map)
        }
        // Identity API v3, "Authenticating with an Application Credential": the credential is
        // bound to its project; a request naming a scope is refused, so none is sent.
        Credentials::ApplicationCredential { credential, secret } => {
            let auth = match credential {
                ApplicationCredentialRef::Id(id) => osauth::identity::ApplicationCredential::new(
                    &entry.auth_url,
                    id.clone(),
                    secret.clone(),
                ),
                ApplicationCredentialRef::Name { name, user_id } => {
                    osauth::identity::ApplicationCredential::with_user_id(
                        &entry.auth_url,
                        name.clone(),
                        secret.clone(),
                        user_id.clone(),
                    )
                }
                ApplicationCredentialRef::NameOfUser {
                    name,
                    username,
                    user_domain,
                } => {
                    let user_id = application_credential_owner(
                        &client,
                        &entry.auth_url,
                        name,
                        username,
                        user_domain,
                        secret,
                        &context,
                    )
                    .await?;
                    osauth::identity::ApplicationCredential::with_user_id(
                        &entry.auth_url,
                        name.clone(),
                        secret.clone(),
                        user_id,
                    )
                }
            }
            .map_err(map)?;
            Session::new_with_client(client, auth).await.map_err(map)
        }
    }
}

/// The user id of the owner of application credential `name`, named by `username` in
/// `user_domain` (`(is_id, value)`): one `POST /v3/auth/tokens` with method
/// `application_credential` and the owner by name (Identity API v3, "Authenticating with an
/// Application Credential"), whose token body names the user by id. The osauth crate names an
/// owner by id only; with the id the session then authenticates (and re-authenticates) by
/// itself. Our own code because no maintained crate sends this form. Errors:
/// [`CloudError::Auth`] (refused; Keystone's status, never the secret),
/// [`CloudError::Connection`], [`CloudError::InvalidResponse`].
async fn application_credential_owner(
    client: &reqwest::Client,
    auth_url: &str,
    name: &str,
    username: &str,
    user_domain: &(bool, String),
    secret: &str,
    context: &str,
) -> Result<String, CloudError> {
    let base = auth_url.trim_end_matches('/');
    let url = if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    };
    let domain = match user_domain {
        (true, id) => json!({"id": id}),
        (false, n) => json!({"name": n}),
    };
    let body = json!({"auth": {"identity": {
        "methods": ["application_credential"],
        "application_credential": {
            "name": name,
            "secret": secret,
            "user": {"name": username, "domain": domain},
        },
    }}});
    let reply = client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| CloudError::Connection {
            method: "POST".into(),
            url: url.clone(),
            message: e.without_url().to_string(),
        })?;
    let status = reply.status();
    if !status.is_success() {
        return Err(CloudError::Auth {
            context: context.to_owned(),
            message: format!(
                "Keystone answered {status} to the application credential of user {username}"
            ),
        });
    }
    let invalid = |message: String| CloudError::InvalidResponse {
        method: "POST".into(),
        url: url.clone(),
        message,
    };
    let bytes = reply
        .bytes()
        .await
        .map_err(|e| invalid(e.without_url().to_string()))?;
    let token: Value = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    token["token"]["user"]["id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| invalid("the token names no user id".into()))
}

/// Maps an osauth error (auth, catalog, transport) to a [`CloudError`].
fn map_osauth(e: openstack::Error, context: &str, service: &str) -> CloudError {
    use openstack::ErrorKind as K;
    let message = e.to_string();
    let (method, url) = context
        .split_once(' ')
        .map(|(m, u)| (m.to_string(), u.to_string()))
        .unwrap_or_default();
    match e.kind() {
        K::AuthenticationFailed => CloudError::Auth {
            context: context.to_string(),
            message,
        },
        K::EndpointNotFound => CloudError::EndpointNotFound {
            service: service.to_string(),
            message,
        },
        K::ProtocolError => CloudError::Connection {
            method,
            url,
            message,
        },
        K::OperationTimedOut => CloudError::Connection {
            method,
            url,
            message,
        },
        // Keystone (token refresh) or version discovery answered 5xx; the exact status is lost.
        K::InternalServerError => CloudError::Api {
            method,
            url,
            status: 503,
            error_type: Some("auth/catalog layer".into()),
            message,
        },
        K::InvalidConfig => CloudError::Config {
            path: Default::default(),
            message,
        },
        _ => CloudError::Other {
            context: context.to_string(),
            message,
        },
    }
}

impl Cloud for OpenStackCloud {
    async fn create_stack(&self, req: &StackCreate) -> Result<StackRef, CloudError> {
        self.heat_create(req).await
    }

    async fn stack(&self, s: &StackRef) -> Result<Stack, CloudError> {
        self.heat_show(s).await
    }

    async fn wait_stack(
        &self,
        s: &StackRef,
        done: &[StackStatus],
        deadline: Duration,
    ) -> Result<Stack, CloudError> {
        self.heat_wait(s, done, deadline).await
    }

    async fn stack_resources(
        &self,
        s: &StackRef,
        nested_depth: u32,
    ) -> Result<Vec<StackResource>, CloudError> {
        self.heat_resources(s, nested_depth).await
    }

    async fn update_stack_patch(&self, s: &StackRef, parameters: Value) -> Result<(), CloudError> {
        self.heat_patch(s, parameters).await
    }

    async fn update_stack(&self, s: &StackRef, req: &StackCreate) -> Result<(), CloudError> {
        self.heat_put(s, req).await
    }

    async fn mark_unhealthy(
        &self,
        owner: &StackRef,
        resource_name: &str,
        reason: &str,
    ) -> Result<(), CloudError> {
        self.heat_mark_unhealthy(owner, resource_name, reason).await
    }

    async fn delete_stack(&self, s: &StackRef) -> Result<(), CloudError> {
        self.heat_delete(s).await
    }

    async fn find_stack(&self, name: &str) -> Result<Option<StackRef>, CloudError> {
        self.heat_find(name).await
    }

    async fn servers(&self) -> Result<Vec<Server>, CloudError> {
        self.list_all(COMPUTE, &["servers", "detail"], "servers")
            .await
    }

    async fn console_output(&self, server_id: &str, length: u32) -> Result<String, CloudError> {
        let body = serde_json::json!({"os-getConsoleOutput": {"length": length}});
        let reply = self
            .call(
                COMPUTE,
                Method::POST,
                &["servers", server_id, "action"],
                &[],
                Some(&body),
            )
            .await?;
        #[derive(serde::Deserialize)]
        struct ConsoleOutput {
            #[serde(default)]
            output: Option<String>,
        }
        let out: ConsoleOutput = reply.json()?;
        let mut text = out.output.unwrap_or_default();
        if text.len() > super::CONSOLE_LIMIT {
            let mut cut = text.len() - super::CONSOLE_LIMIT;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text.drain(..cut);
        }
        Ok(text)
    }

    async fn server(&self, server_id: &str) -> Result<Option<Server>, CloudError> {
        #[derive(serde::Deserialize)]
        struct Show {
            server: Server,
        }
        match self
            .call(COMPUTE, Method::GET, &["servers", server_id], &[], None)
            .await
        {
            Ok(reply) => Ok(Some(reply.json::<Show>()?.server)),
            Err(e) if matches!(e.kind(), super::ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn stop_server(&self, server_id: &str) -> Result<(), CloudError> {
        let body = serde_json::json!({"os-stop": null});
        self.call(
            COMPUTE,
            Method::POST,
            &["servers", server_id, "action"],
            &[],
            Some(&body),
        )
        .await
        .map(|_| ())
    }

    async fn volume(&self, volume_id: &str) -> Result<Option<Volume>, CloudError> {
        #[derive(serde::Deserialize)]
        struct Show {
            volume: Volume,
        }
        let svc = self.block_storage().await?;
        match self
            .call(svc, Method::GET, &["volumes", volume_id], &[], None)
            .await
        {
            Ok(reply) => Ok(Some(reply.json::<Show>()?.volume)),
            Err(e) if matches!(e.kind(), super::ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn detach_volume(&self, server_id: &str, volume_id: &str) -> Result<(), CloudError> {
        self.call(
            COMPUTE,
            Method::DELETE,
            &["servers", server_id, "os-volume_attachments", volume_id],
            &[],
            None,
        )
        .await
        .map(|_| ())
    }

    async fn ports(&self) -> Result<Vec<Port>, CloudError> {
        self.list_all(NETWORK, &["ports"], "ports").await
    }

    async fn floating_ips(&self) -> Result<Vec<FloatingIp>, CloudError> {
        self.list_all(NETWORK, &["floatingips"], "floatingips")
            .await
    }

    async fn volumes(&self) -> Result<Vec<Volume>, CloudError> {
        let svc = self.block_storage().await?;
        self.list_all(svc, &["volumes", "detail"], "volumes").await
    }

    fn request_count(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params() {
        assert_eq!(
            query_param("http://h/x?limit=2&marker=a%2Db", "marker").as_deref(),
            Some("a-b")
        );
        assert_eq!(query_param("http://h/x?limit=2", "marker"), None);
        assert_eq!(query_param("http://h/x", "marker"), None);
    }

    #[test]
    fn poll_delays_grow_and_cap() {
        let p = PollPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            factor: 2.0,
            jitter: 0.2,
        };
        for _ in 0..50 {
            let d0 = p.delay(0).as_millis();
            assert!((80..=120).contains(&d0), "{d0}");
            let d10 = p.delay(10).as_millis();
            assert!((800..=1200).contains(&d10), "{d10}");
        }
        let p = PollPolicy { jitter: 0.0, ..p };
        assert_eq!(p.delay(1), Duration::from_millis(200));
    }
}
