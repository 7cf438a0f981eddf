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
}

impl Artifact {
    /// Every kind, as TERMINATE removes them.
    pub const ALL: &'static [Artifact] = &[Artifact::AdminKubeconfig, Artifact::JoinMaterial];

    /// Whether the artifact is kept after the operation that produced it ends (COMPLETED,
    /// ROLLED_BACK or FAILED): the admin kubeconfig is, until TERMINATE; the join material is
    /// not (its token and certificate key are credentials to join the cluster).
    pub fn outlives_operation(self) -> bool {
        match self {
            Artifact::AdminKubeconfig => true,
            Artifact::JoinMaterial => false,
        }
    }

    /// What the artifact is, for the journal (`admin kubeconfig`).
    pub fn label(self) -> &'static str {
        match self {
            Artifact::AdminKubeconfig => "admin kubeconfig",
            Artifact::JoinMaterial => "join material",
        }
    }

    /// Where the artifact of `vnf_instance_id` is kept:
    /// `<state_dir>/kubeconfig/<vnfInstanceId>.conf` for the admin kubeconfig,
    /// `<state_dir>/join/<vnfInstanceId>.env` for the join material.
    /// `vnf_instance_id` is an identifier intake validated (no `/`).
    pub fn path(self, state_dir: &Path, vnf_instance_id: &str) -> PathBuf {
        match self {
            Artifact::AdminKubeconfig => state_dir
                .join("kubeconfig")
                .join(format!("{vnf_instance_id}.conf")),
            Artifact::JoinMaterial => state_dir
                .join("join")
                .join(format!("{vnf_instance_id}.env")),
        }
    }

    /// The values of `text` (this artifact's content) that must be masked wherever a step is
    /// recorded: the join material's token and certificate key; none of a kubeconfig's lines
    /// (its content never reaches a step's output).
    pub fn secrets(self, text: &str) -> Vec<String> {
        match self {
            Artifact::AdminKubeconfig => Vec::new(),
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

/// The endpoint a kubeconfig's cluster is reached at: its first `server:` value.
pub fn kubeconfig_server(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix("server:"))
        .map(|s| s.trim().to_owned())
}
