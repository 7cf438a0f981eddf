//! What vnfkeeper keeps of a VNF's configuration under its state directory, so that the
//! operator's read-back (`vnfkeeper status`) and TERMINATE find it without knowing the flavour
//! that produced it.
//!
//! A flavour produces an artifact from a step's output (`MgmtDriver::keep`); the engine writes it
//! (file 0600 in a 0700 directory, written to a temporary file and renamed) and TERMINATE removes
//! every artifact of the instance.

use std::path::{Path, PathBuf};

/// One kind of kept file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Artifact {
    /// The cluster's admin kubeconfig, its `server:` set to the endpoint vnfkeeper reaches the
    /// cluster at (Kubernetes: "Organizing Cluster Access Using kubeconfig Files").
    AdminKubeconfig,
    /// What a node needs to join the cluster (kubeadm reference, "kubeadm join"), as
    /// `NAME=value` lines: `TOKEN_NAME` (a bootstrap token), `TOKEN_HASH` (the CA public key's
    /// SHA-256, hex) and `CERT_KEY` (the control-plane certificate key), the variables Tacker's
    /// install script reads. Kept only while an operation joins nodes; every value but the hash
    /// is a secret.
    JoinMaterial,
    /// The cluster as a Kubernetes VIM (what Tacker's sample MgmtDriver registers with
    /// `_create_vim`), as `NAME=value` lines: `VIM_NAME` (the request's `vim_name`, else
    /// `kubernetes_vim_<vnfInstanceId>` as Tacker names it) and `BEARER_TOKEN` (the token of the
    /// cluster's admin ServiceAccount, a secret). Its endpoint and CA are the admin
    /// kubeconfig's. Kept until TERMINATE.
    KubernetesVim,
}

impl Artifact {
    /// Every kind, as TERMINATE removes them.
    pub const ALL: &'static [Artifact] = &[
        Artifact::AdminKubeconfig,
        Artifact::JoinMaterial,
        Artifact::KubernetesVim,
    ];

    /// Whether the artifact is kept after the operation that produced it ends (COMPLETED,
    /// ROLLED_BACK or FAILED): the admin kubeconfig is, until TERMINATE; the join material is
    /// not (its token and certificate key are credentials to join the cluster).
    pub fn outlives_operation(self) -> bool {
        match self {
            Artifact::AdminKubeconfig | Artifact::KubernetesVim => true,
            Artifact::JoinMaterial => false,
        }
    }

    /// What the artifact is, for the journal (`admin kubeconfig`).
    pub fn label(self) -> &'static str {
        match self {
            Artifact::AdminKubeconfig => "admin kubeconfig",
            Artifact::JoinMaterial => "join material",
            Artifact::KubernetesVim => "Kubernetes VIM bearer token",
        }
    }

    /// Where the artifact of `vnf_instance_id` is kept:
    /// `<state_dir>/kubeconfig/<vnfInstanceId>.conf` for the admin kubeconfig,
    /// `<state_dir>/join/<vnfInstanceId>.env` for the join material,
    /// `<state_dir>/vim/<vnfInstanceId>.env` for the Kubernetes VIM.
    /// `vnf_instance_id` is an identifier intake validated (no `/`).
    pub fn path(self, state_dir: &Path, vnf_instance_id: &str) -> PathBuf {
        match self {
            Artifact::KubernetesVim => state_dir.join("vim").join(format!("{vnf_instance_id}.env")),
            Artifact::AdminKubeconfig => state_dir
                .join("kubeconfig")
                .join(format!("{vnf_instance_id}.conf")),
            Artifact::JoinMaterial => state_dir
                .join("join")
                .join(format!("{vnf_instance_id}.env")),
        }
    }

    /// The values of `text` (this artifact's content) that must be masked wherever a step is
    /// recorded: the join material's token and certificate key, the VIM's bearer token; none
    /// of a kubeconfig's lines (its content never reaches a step's output).
    pub fn secrets(self, text: &str) -> Vec<String> {
        match self {
            Artifact::AdminKubeconfig => Vec::new(),
            Artifact::KubernetesVim => KubernetesVim::parse(text)
                .map(|v| vec![v.bearer_token])
                .unwrap_or_default(),
            Artifact::JoinMaterial => JoinMaterial::parse(text)
                .map(|j| vec![j.token, j.certificate_key])
                .unwrap_or_default(),
        }
    }
}

/// The join material of a cluster (see [`Artifact::JoinMaterial`]), checked.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinMaterial {
    /// Bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}` (kubeadm reference, "kubeadm token").
    pub token: String,
    /// SHA-256 of the cluster CA's public key, 64 lowercase hex digits (without `sha256:`).
    pub ca_hash: String,
    /// Certificate key of `kubeadm init phase upload-certs`, 64 lowercase hex digits.
    pub certificate_key: String,
}

impl std::fmt::Debug for JoinMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinMaterial")
            .field("ca_hash", &self.ca_hash)
            .finish_non_exhaustive()
    }
}

/// Join material that is not of its form; the message names the variable, never a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadJoinMaterial {
    /// `TOKEN_NAME` missing or not a bootstrap token.
    #[error("TOKEN_NAME is not a bootstrap token ([a-z0-9]{{6}}.[a-z0-9]{{16}})")]
    Token,
    /// `TOKEN_HASH` or `CERT_KEY` (named) missing or not 64 lowercase hex digits.
    #[error("{0} is not 64 hex digits")]
    Hex(&'static str),
}

impl JoinMaterial {
    /// Reads `TOKEN_NAME=…`, `TOKEN_HASH=…` and `CERT_KEY=…` lines (others ignored). Errors:
    /// [`BadJoinMaterial`], a value missing or not of its form.
    pub fn parse(text: &str) -> Result<Self, BadJoinMaterial> {
        let value = |name: &str| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix(name)?.strip_prefix('='))
                .next_back()
                .map(str::trim)
                .unwrap_or_default()
                .to_owned()
        };
        let hex64 = |s: &str| {
            s.len() == 64
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let token = value("TOKEN_NAME");
        let token_ok = token.split_once('.').is_some_and(|(id, secret)| {
            let ok = |s: &str, n: usize| {
                s.len() == n
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            };
            ok(id, 6) && ok(secret, 16)
        });
        if !token_ok {
            return Err(BadJoinMaterial::Token);
        }
        let ca_hash = value("TOKEN_HASH");
        if !hex64(&ca_hash) {
            return Err(BadJoinMaterial::Hex("TOKEN_HASH"));
        }
        let certificate_key = value("CERT_KEY");
        if !hex64(&certificate_key) {
            return Err(BadJoinMaterial::Hex("CERT_KEY"));
        }
        Ok(Self {
            token,
            ca_hash,
            certificate_key,
        })
    }

    /// The `NAME=value` lines of the kept artifact.
    pub fn to_env(&self) -> String {
        format!(
            "TOKEN_NAME={}\nTOKEN_HASH={}\nCERT_KEY={}\n",
            self.token, self.ca_hash, self.certificate_key
        )
    }
}

/// The cluster as a Kubernetes VIM (see [`Artifact::KubernetesVim`]), checked.
#[derive(Clone, PartialEq, Eq)]
pub struct KubernetesVim {
    /// The VIM's name.
    pub name: String,
    /// The admin ServiceAccount's token, a JWT (RFC 7519: base64url parts joined by `.`).
    pub bearer_token: String,
}

impl std::fmt::Debug for KubernetesVim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesVim")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A bearer token that is not of its form; the message never holds the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("BEARER_TOKEN is missing or not a token (base64url characters and dots, 16 to 8192 bytes)")]
pub struct BadBearerToken;

impl KubernetesVim {
    /// The bearer token of a `BEARER_TOKEN=…` line of `text` (as `k8s.vim_token` prints it).
    /// Errors: [`BadBearerToken`], none or one with other characters (a token reaches an HTTP
    /// header and a kept file only as checked text).
    pub fn token_of(text: &str) -> Result<String, BadBearerToken> {
        let token = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("BEARER_TOKEN="))
            .next_back()
            .map(str::trim)
            .unwrap_or_default();
        let ok = (16..=8192).contains(&token.len())
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if ok {
            Ok(token.to_owned())
        } else {
            Err(BadBearerToken)
        }
    }

    /// Reads the kept artifact's `VIM_NAME=` and `BEARER_TOKEN=` lines. Errors: as
    /// [`KubernetesVim::token_of`].
    pub fn parse(text: &str) -> Result<Self, BadBearerToken> {
        let name = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("VIM_NAME="))
            .next_back()
            .unwrap_or_default()
            .trim()
            .to_owned();
        Ok(Self {
            name,
            bearer_token: Self::token_of(text)?,
        })
    }

    /// The `NAME=value` lines of the kept artifact.
    pub fn to_env(&self) -> String {
        format!(
            "VIM_NAME={}\nBEARER_TOKEN={}\n",
            self.name, self.bearer_token
        )
    }
}

/// `text` (an admin kubeconfig as `k8s.kubeconfig` printed it: the file, then its verdict line)
/// with every cluster's `server:` set to `endpoint`; `None` without a `server:` line (not a
/// kubeconfig).
pub fn kubeconfig_with_server(text: &str, endpoint: &str) -> Option<String> {
    let mut found = false;
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.starts_with("already done: ")) {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("server:")
            && !rest.trim().is_empty()
        {
            let indent = &line[..line.len() - t.len()];
            out.push_str(&format!("{indent}server: {endpoint}\n"));
            found = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    found.then_some(out)
}

/// `text` (a kubeconfig) with `tls-server-name: name` after each cluster's `server:` line
/// (kubeconfig `Cluster.tls-server-name`, client-go: the name the server certificate is checked
/// against, e.g. the cluster IP when `server:` is a floating address the certificate does not
/// name); an existing `tls-server-name:` line is replaced.
pub fn kubeconfig_with_tls_server_name(text: &str, name: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("tls-server-name:") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if t.starts_with("server:") {
            let indent = &line[..line.len() - t.len()];
            out.push_str(&format!("{indent}tls-server-name: {name}\n"));
        }
    }
    out
}

/// The SHA-256 (hex) of a kubeconfig's first `certificate-authority-data` (the cluster CA as
/// PEM, base64), `None` without one or when it is not base64.
pub fn kubeconfig_ca_sha256(text: &str) -> Option<String> {
    use base64::Engine as _;
    let b64 = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("certificate-authority-data:"))?
        .trim();
    let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    Some(crate::digest::sha256_hex(&pem))
}

/// A kubeconfig's first `certificate-authority-data` decoded (the cluster CA, PEM text),
/// `None` without one or when it is not base64 of UTF-8 text.
pub fn kubeconfig_ca_pem(text: &str) -> Option<String> {
    use base64::Engine as _;
    let b64 = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("certificate-authority-data:"))?
        .trim();
    let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(pem).ok()
}

/// Whether a kubeconfig names a `tls-server-name:` (its `server:` is an address the API
/// server's certificate does not name, e.g. a floating IP).
pub fn kubeconfig_has_tls_server_name(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("tls-server-name:"))
}

/// The endpoint a kubeconfig's cluster is reached at: its first `server:` value.
pub fn kubeconfig_server(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix("server:"))
        .map(|s| s.trim().to_owned())
}
