//! Nodes that trust private registries (`private_registry_connection_info` of
//! `k8s_cluster_installation_param`, cir spec): what each Kubernetes node must hold so that its
//! container runtime pulls from every listed registry, decided as data.
//!
//! Per registry entry, on every node (Tacker `kubernetes_mgmt.py` `_connect_to_private_registries`
//! and the install script's `set_docker_proxy`, with their defects removed):
//! - `connection_type` 0 (HTTP): the server in `insecure-registries` of Docker's `daemon.json`,
//!   **merged** into the file the node has ([`merge_daemon_json`]: every other key kept; the
//!   reference overwrites the file), and a containerd `hosts.toml` under
//!   `/etc/containerd/certs.d/<server>/` ([`containerd_hosts_toml`]);
//! - `connection_type` 1 (HTTPS): the package's `certificate_path` CA as
//!   `/etc/docker/certs.d/<server>/ca.crt` and `/etc/containerd/certs.d/<server>/ca.crt`, named by
//!   the containerd `hosts.toml`;
//! - `hosts_string`: a line of the vnfkeeper-managed block of `/etc/hosts` ([`hosts_block`]),
//!   rewritten whole (the reference appends with `tee -a` on every run);
//! - `username`/`password`: Docker's client `config.json` ([`docker_config_json`]) written over
//!   SFTP with mode 0600 and linked for the kubelet (`/var/lib/kubelet/config.json`, as the cir
//!   spec's install script links it) — never `docker login --password` on a command line; the
//!   check compares the node's token with the request's by a salted, iterated digest
//!   ([`auth_digest`]), so a changed password is written again.
//!
//! The merge of `daemon.json` needs what the node's file lists: `trust.observe` reports its
//! digest and its `insecure-registries` only — never the rest of the file, which may hold
//! credentials (`proxies`) and would be journaled with the verdict ([`parse_observed`]); the
//! flavour's `configure` decides the new list from it ([`merge_daemon_json`]), and `trust.docker`
//! sets that key on the node, every other key kept, while the file is still the one observed.
//! A Kubernetes flavour shares the stages: [`node_stages`] after its nodes are installed (in
//! `instantiate_end`, `scale_end`, `heal_end`), [`configure_stages`] in its `configure`,
//! [`probes`] for reconcile. Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};
use sha2::Sha256;

use super::{FlavourError, Role};
use crate::digest::{hex, sha256_hex};
use crate::model::StageKey;
use crate::plan::stages::{Hook, Stage, StageList};
use crate::recipes::{self, Step, trust::RegistryFiles};
use crate::wire::Secret;
use crate::wire::params::{ConnectionType, PrivateRegistryConnectionInfo};

/// Docker daemon configuration file.
pub const DAEMON_JSON: &str = "/etc/docker/daemon.json";

/// Where the merged `daemon.json` is uploaded before `trust.docker` moves it into place.
pub const DAEMON_JSON_STAGED: &str = "/var/lib/vnfkeeper/trust/daemon.json";

/// Directory the registries' CA certificates are uploaded to (`<server>.crt`) before
/// `trust.files` installs them.
pub const CA_STAGE_DIR: &str = "/var/lib/vnfkeeper/trust";

/// The hosts file whose vnfkeeper block holds the `hosts_string` lines.
pub const HOSTS_FILE: &str = "/etc/hosts";

/// Docker's client configuration with the registry auths (root's, as the reference's
/// `sudo docker login` writes it).
pub const DOCKER_CONFIG: &str = "/root/.docker/config.json";

/// The `insecure-registries` key of `daemon.json` (dockerd(8), "Insecure registries").
const INSECURE: &str = "insecure-registries";

/// The servers of the HTTP (`connection_type` 0) entries, in request order, without repeats.
pub fn insecure_servers(entries: &[PrivateRegistryConnectionInfo]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    entries
        .iter()
        .filter(|e| e.connection_type == ConnectionType::Http)
        .filter(|e| seen.insert(e.server.clone()))
        .map(|e| e.server.clone())
        .collect()
}

/// `daemon.json` with every server of `insecure` in its `insecure-registries` array: `existing`
/// (what `trust.observe` reported, `{"insecure-registries": [...]}`, or any `daemon.json` text;
/// `None` when the node has no file, an empty or blank text counts as `{}`) parsed as a
/// JSON object, every other key and the servers already listed kept in their order, the missing
/// servers appended in the order given. Pretty-printed with a final newline.
///
/// Errors (a reason, never file content): `existing` is not a JSON object, or its
/// `insecure-registries` is not an array of strings.
pub fn merge_daemon_json(existing: Option<&str>, insecure: &[String]) -> Result<String, String> {
    let mut obj: Map<String, Value> = match existing.map(str::trim) {
        None | Some("") => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(format!("{DAEMON_JSON} is JSON but not an object")),
            Err(e) => {
                return Err(format!(
                    "{DAEMON_JSON} is not JSON (line {}, column {})",
                    e.line(),
                    e.column()
                ));
            }
        },
    };
    let mut list: Vec<Value> = match obj.get(INSECURE) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a.clone(),
        Some(_) => {
            return Err(format!(
                "{DAEMON_JSON}: `{INSECURE}` is not an array of strings"
            ));
        }
    };
    for s in insecure {
        if !list.iter().any(|v| v.as_str() == Some(s.as_str())) {
            list.push(Value::String(s.clone()));
        }
    }
    obj.insert(INSECURE.to_owned(), Value::Array(list));
    let mut text = serde_json::to_string_pretty(&Value::Object(obj))
        .map_err(|e| format!("{DAEMON_JSON}: {e}"))?;
    text.push('\n');
    Ok(text)
}

/// What `trust.observe` reported of a node's `daemon.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `{"insecure-registries": [...]}` as the file has it (JSON text; no other key of the file);
    /// `None` when the node has no file.
    pub content: Option<String>,
    /// SHA-256 of the file (lowercase hex), or `absent`: what `trust.docker` compares before it
    /// replaces the file.
    pub sha256: String,
}

/// Parses the verdict line of `trust.observe`: `already done: <file> absent`,
/// `already done: <file> sha256=<hex> b64=<base64 of {"insecure-registries": [...]}>`, or
/// `… sha256=<hex> invalid=<why>`. Errors: the file is not what the merge can use (`invalid=`),
/// another shape, base64 or UTF-8 that does not decode, a digest that is not 64 hex digits.
pub fn parse_observed(line: &str) -> Result<Observed, String> {
    let rest = line
        .strip_prefix("already done: ")
        .and_then(|r| r.split_once(' ').map(|(_, tail)| tail))
        .ok_or_else(|| "not a trust.observe verdict".to_owned())?;
    if rest == "absent" {
        return Ok(Observed {
            content: None,
            sha256: "absent".into(),
        });
    }
    let (sum, part) = rest
        .strip_prefix("sha256=")
        .and_then(|r| r.split_once(' '))
        .ok_or_else(|| "no sha256=… in the trust.observe verdict".to_owned())?;
    if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the trust.observe verdict has no SHA-256 of 64 hex digits".into());
    }
    if let Some(why) = part.strip_prefix("invalid=") {
        return Err(format!(
            "{DAEMON_JSON} on the node cannot be merged: {}",
            why.replace('-', " ")
        ));
    }
    let b64 = part
        .strip_prefix("b64=")
        .ok_or_else(|| "no b64=… in the trust.observe verdict".to_owned())?;
    let bytes = STANDARD
        .decode(b64.trim())
        .map_err(|_| "the observed daemon.json is not valid base64".to_owned())?;
    let content = String::from_utf8(bytes)
        .map_err(|_| "the observed daemon.json is not UTF-8 text".to_owned())?;
    Ok(Observed {
        content: Some(content),
        sha256: sum.to_owned(),
    })
}

/// The lines of the vnfkeeper block of `/etc/hosts`: each entry's `hosts_string`, in request
/// order, without repeats, joined by `\n` (no final newline); empty when no entry has one.
pub fn hosts_block(entries: &[PrivateRegistryConnectionInfo]) -> String {
    let mut seen = BTreeSet::new();
    entries
        .iter()
        .filter_map(|e| e.hosts_string.as_deref())
        .map(str::trim)
        .filter(|l| seen.insert(l.to_owned()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Directory of containerd's per-registry configuration for `server`
/// (containerd `docs/hosts.md`, `config_path`).
pub fn containerd_dir(server: &str) -> String {
    format!("/etc/containerd/certs.d/{server}")
}

/// The containerd `hosts.toml` for `server` (containerd `docs/hosts.md`): HTTP → the `http://`
/// endpoint; HTTPS → the `https://` endpoint verified with `ca.crt` in the same directory (the CA
/// is always the package's when `certificate_path` is given; without one the system roots are
/// used and no `ca` is named). No final newline (the step writes one).
pub fn containerd_hosts_toml(server: &str, ct: ConnectionType, with_ca: bool) -> String {
    let scheme = match ct {
        ConnectionType::Http => "http",
        ConnectionType::Https => "https",
    };
    let mut out = format!(
        "# vnfkeeper: private registry {server}\nserver = \"{scheme}://{server}\"\n\n\
         [host.\"{scheme}://{server}\"]\n  capabilities = [\"pull\", \"resolve\"]"
    );
    if with_ca && ct == ConnectionType::Https {
        out.push_str(&format!("\n  ca = \"{}/ca.crt\"", containerd_dir(server)));
    }
    out
}

/// Docker's client `config.json` with an `auths` entry (`base64("user:password")`, the form
/// `docker login` writes) for every entry with a username and password, in request order; `None`
/// when no entry has credentials. A later entry for the same server replaces an earlier one.
pub fn docker_config_json(entries: &[PrivateRegistryConnectionInfo]) -> Option<Secret<String>> {
    let mut auths = Map::new();
    for e in entries {
        if let (Some(u), Some(p)) = (&e.username, &e.password) {
            let token = STANDARD.encode(format!("{}:{}", u.expose(), p.expose()));
            auths.insert(e.server.clone(), serde_json::json!({ "auth": token }));
        }
    }
    if auths.is_empty() {
        return None;
    }
    let doc = serde_json::json!({ "auths": Value::Object(auths) });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Some(Secret::new(text))
}

/// The servers with credentials (those [`docker_config_json`] writes an auth for), in request
/// order, without repeats.
pub fn auth_servers(entries: &[PrivateRegistryConnectionInfo]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    entries
        .iter()
        .filter(|e| e.username.is_some() && e.password.is_some())
        .filter(|e| seen.insert(e.server.clone()))
        .map(|e| e.server.clone())
        .collect()
}

/// Iterations of [`auth_digest`]'s PBKDF2 (what `trust_auth.sh` passes to Python's
/// `hashlib.pbkdf2_hmac`).
pub const AUTH_DIGEST_ITERATIONS: u32 = 10_000;

/// The digest by which `trust.auth` compares the `auth` token a node's `config.json` holds for
/// `server` with the one the request gives, without the token on a command line or in any
/// output: PBKDF2-HMAC-SHA256 (RFC 8018 §5.2, one 32-byte block; the `pbkdf2` crate) of `token`
/// with the salt `vnfkeeper trust.auth <owner> <server>` and [`AUTH_DIGEST_ITERATIONS`]
/// iterations, lowercase hex (64 digits). The node computes the same of its file's token; only
/// this digest is an argument of the step. Salted per VNF and server and iterated so that it is
/// no fast password hash; still, it is a function of the password, so it is a [`Secret`].
pub fn auth_digest(token: &str, owner: &str, server: &str) -> Secret<String> {
    let salt = format!("vnfkeeper trust.auth {owner} {server}");
    Secret::new(hex(&pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(
        token.as_bytes(),
        salt.as_bytes(),
        AUTH_DIGEST_ITERATIONS,
    )))
}

/// What `trust.auth` checks, per server with credentials (in the order of [`auth_servers`]):
/// the server and the [`auth_digest`] of the token [`docker_config_json`] writes for it (the
/// last entry of a server wins, as there).
pub fn auth_checks(
    entries: &[PrivateRegistryConnectionInfo],
    owner: &str,
) -> Vec<(String, Secret<String>)> {
    auth_servers(entries)
        .into_iter()
        .filter_map(|server| {
            let e = entries
                .iter()
                .rev()
                .find(|e| e.server == server && e.username.is_some() && e.password.is_some())?;
            let (u, p) = (e.username.as_ref()?, e.password.as_ref()?);
            let token = STANDARD.encode(format!("{}:{}", u.expose(), p.expose()));
            let digest = auth_digest(&token, owner, &server);
            Some((server, digest))
        })
        .collect()
}

/// Values that must be masked wherever a step's output is recorded: each registry password
/// and each `auth` token of [`docker_config_json`] (the password in base64).
pub fn secrets(entries: &[PrivateRegistryConnectionInfo]) -> Vec<Secret<String>> {
    let mut out = Vec::new();
    for e in entries {
        if let (Some(u), Some(p)) = (&e.username, &e.password) {
            out.push(p.clone());
            out.push(Secret::new(STANDARD.encode(format!(
                "{}:{}",
                u.expose(),
                p.expose()
            ))));
        }
    }
    out
}

/// A private registry the nodes of a VNF trust, as recorded in the store
/// (`migrations/V11__registry_trust.sql`, table `vnf_registry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryUse {
    /// `host[:port]`.
    pub server: String,
    /// HTTP (insecure) or HTTPS.
    pub connection_type: ConnectionType,
    /// SHA-256 (lowercase hex) of the package's CA certificate; `None` without one.
    pub ca_sha256: Option<String>,
}

/// The registries of `t`, one per server (the first entry of a server wins), with the
/// fingerprint of each CA the package files hold.
pub fn registry_uses(t: &TrustInputs<'_>) -> Vec<RegistryUse> {
    let mut out: Vec<RegistryUse> = Vec::new();
    for r in t.registries {
        if out.iter().any(|u| u.server == r.server) {
            continue;
        }
        let ca_sha256 = match (&r.certificate_path, r.connection_type) {
            (Some(p), ConnectionType::Https) => t.files.get(p).map(|b| sha256_hex(b)),
            _ => None,
        };
        out.push(RegistryUse {
            server: r.server.clone(),
            connection_type: r.connection_type,
            ca_sha256,
        });
    }
    out
}

/// A node's trust as recorded (`node_registry_trust`) with the registry it concerns; what
/// `vnfkeeper status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTrust {
    /// vnfInstanceId.
    pub vnf_instance_id: String,
    /// The registry.
    pub registry: RegistryUse,
    /// vnfcInstanceId of the node; `None` for a registry no node has recorded trust of yet.
    pub vnfc_instance_id: Option<String>,
    /// Last time a trust step changed the node; `None`: never needed (or no node yet).
    pub applied_at: Option<crate::model::Timestamp>,
    /// Last time a trust step found (or left) the node's trust in place.
    pub verified_at: Option<crate::model::Timestamp>,
}

/// What the node trust stages are decided from.
#[derive(Debug, Clone, Copy)]
pub struct TrustInputs<'a> {
    /// `private_registry_connection_info`.
    pub registries: &'a [PrivateRegistryConnectionInfo],
    /// The package files read for the flavour (package-relative path → content); holds every
    /// `certificate_path`.
    pub files: &'a BTreeMap<String, Vec<u8>>,
    /// Owner of the `/etc/hosts` block: the vnfInstanceId.
    pub owner: &'a str,
}

/// A node the trust stages run on.
#[derive(Debug, Clone, Copy)]
pub struct TrustNode<'a> {
    /// vnfcInstanceId (the stage subject and host).
    pub vnfc_id: &'a str,
    /// Its role (how it is reached).
    pub role: Role,
}

/// The registry files of every entry (one per server, the first entry of a server wins).
/// Errors: a `certificate_path` of an HTTPS entry the package files lack.
fn registry_files(t: &TrustInputs<'_>) -> Result<Vec<RegistryFiles>, FlavourError> {
    let mut out: Vec<RegistryFiles> = Vec::new();
    for r in t.registries {
        if out.iter().any(|f| f.server == r.server) {
            continue;
        }
        let ca = match (&r.certificate_path, r.connection_type) {
            (Some(path), ConnectionType::Https) => Some(
                t.files
                    .get(path)
                    .ok_or_else(|| {
                        FlavourError::new(
                            "trust.files",
                            format!("package file `{path}` was not read"),
                        )
                    })?
                    .clone(),
            ),
            _ => None,
        };
        out.push(RegistryFiles {
            server: r.server.clone(),
            hosts_toml: containerd_hosts_toml(&r.server, r.connection_type, ca.is_some()),
            ca,
        });
    }
    Ok(out)
}

/// The trust steps of `host` that need no observation: `trust.files`, `trust.hosts` (when an
/// entry has a `hosts_string`), `trust.auth` (when an entry has credentials); empty without
/// entries. `with_uploads` false: check-only copies (no CA uploads), for reconcile probes.
pub fn node_steps(
    t: &TrustInputs<'_>,
    host: &str,
    with_uploads: bool,
) -> Result<Vec<Step>, FlavourError> {
    if t.registries.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = vec![recipes::trust::files(
        host,
        CA_STAGE_DIR,
        &registry_files(t)?,
        with_uploads,
    )];
    let block = hosts_block(t.registries);
    if !block.is_empty() {
        out.push(recipes::trust::hosts(host, HOSTS_FILE, t.owner, &block));
    }
    let auth = auth_checks(t.registries, t.owner);
    if !auth.is_empty() {
        out.push(recipes::trust::auth(host, DOCKER_CONFIG, t.owner, &auth));
    }
    Ok(out)
}

/// The node trust of `nodes`, appended to `list`: one wave of [`node_steps`] on every node,
/// then (with HTTP registries) one wave of `trust.observe` and a
/// [`Hook::Configure`] placeholder, whose expansion is [`configure_stages`]. Nothing without
/// nodes or entries. Errors: as [`node_steps`].
pub fn node_stages(
    t: &TrustInputs<'_>,
    nodes: &[TrustNode<'_>],
    list: &mut StageList,
) -> Result<(), FlavourError> {
    if node_stages_without_configure(t, nodes, list)? {
        list.wave(|w| vec![Stage::expand(w, Hook::Configure)]);
    }
    Ok(())
}

/// [`node_stages`] without its [`Hook::Configure`] placeholder, for a flavour whose own
/// placeholder follows and whose `configure` also returns [`configure_stages`] (one placeholder
/// per operation decides everything observed before it). Returns whether `trust.observe` stages
/// were added (HTTP registries), i.e. whether `trust.docker` stages are to be decided. Errors: as
/// [`node_steps`].
pub fn node_stages_without_configure(
    t: &TrustInputs<'_>,
    nodes: &[TrustNode<'_>],
    list: &mut StageList,
) -> Result<bool, FlavourError> {
    if nodes.is_empty() || t.registries.is_empty() {
        return Ok(false);
    }
    let mut wave = Vec::new();
    for n in nodes {
        for step in node_steps(t, n.vnfc_id, true)? {
            wave.push(Stage::remote(0, n.vnfc_id, n.role, step));
        }
    }
    list.wave(|w| at(w, wave));
    if !insecure_servers(t.registries).is_empty() {
        let observe: Vec<Stage> = nodes
            .iter()
            .map(|n| {
                let step = recipes::trust::observe(n.vnfc_id, DAEMON_JSON);
                Stage::remote(0, n.vnfc_id, n.role, step)
            })
            .collect();
        list.wave(|w| at(w, observe));
        return Ok(true);
    }
    Ok(false)
}

/// The expansion of the placeholder of [`node_stages`]: one wave with a `trust.docker` stage for
/// each of `nodes` whose `trust.observe@<vnfc>` verdict is in `observed` — the observed
/// `insecure-registries` merged with the request's ([`merge_daemon_json`]), uploaded, set in the
/// node's file only while it is still the one observed. Errors: a verdict that does not
/// parse, a `daemon.json` that cannot be merged (both name the node).
pub fn configure_stages(
    registries: &[PrivateRegistryConnectionInfo],
    nodes: &[TrustNode<'_>],
    observed: &BTreeMap<StageKey, String>,
) -> Result<Vec<Stage>, FlavourError> {
    let insecure = insecure_servers(registries);
    let mut wave = Vec::new();
    for n in nodes {
        let Some(line) = observed.get(format!("trust.observe@{}", n.vnfc_id).as_str()) else {
            continue;
        };
        let seen = parse_observed(line).map_err(|reason| {
            FlavourError::new("trust.observe", format!("{}: {reason}", n.vnfc_id))
        })?;
        let merged = merge_daemon_json(seen.content.as_deref(), &insecure).map_err(|reason| {
            FlavourError::new("trust.docker", format!("{}: {reason}", n.vnfc_id))
        })?;
        let step = recipes::trust::docker(
            n.vnfc_id,
            DAEMON_JSON,
            DAEMON_JSON_STAGED,
            Some((merged.into_bytes(), seen.sha256)),
            &insecure,
        );
        wave.push(Stage::remote(0, n.vnfc_id, n.role, step));
    }
    let mut list = StageList::default();
    list.wave(|w| at(w, wave));
    Ok(list.into_stages())
}

/// Reconcile probes of a node's trust: the check-only [`node_steps`] and (with HTTP registries)
/// `trust.docker` checking `insecure-registries`. Empty without entries (or when a CA was not
/// read: the hooks report that).
pub fn probes(t: &TrustInputs<'_>, host: &str) -> Vec<Step> {
    let mut out = node_steps(t, host, false).unwrap_or_default();
    let insecure = insecure_servers(t.registries);
    if !insecure.is_empty() {
        out.push(recipes::trust::docker(
            host,
            DAEMON_JSON,
            DAEMON_JSON_STAGED,
            None,
            &insecure,
        ));
    }
    out
}

/// `stages` with every wave number set to `w`.
fn at(w: u32, stages: Vec<Stage>) -> Vec<Stage> {
    stages
        .into_iter()
        .map(|mut s| {
            s.wave = w;
            s
        })
        .collect()
}

#[cfg(test)]
mod tests;
