//! What vnfkeeper keeps of a VNF's configuration under its state directory, so that the
//! operator's read-back (`vnfkeeper status`) and TERMINATE find it without knowing the flavour
//! that produced it.
//!
//! A flavour produces an artifact from a step's output (`MgmtDriver::keep`); the engine writes it
//! (file 0600 in a 0700 directory, written to a temporary file and renamed) and TERMINATE removes
//! every artifact of the instance.

use std::path::{Path, PathBuf};

/// One kind of kept file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Artifact {
    /// The cluster's admin kubeconfig, its `server:` set to the endpoint vnfkeeper reaches the
    /// cluster at (Kubernetes: "Organizing Cluster Access Using kubeconfig Files").
    AdminKubeconfig,
}

impl Artifact {
    /// Every kind, as TERMINATE removes them.
    pub const ALL: &'static [Artifact] = &[Artifact::AdminKubeconfig];

    /// What the artifact is, for the journal (`admin kubeconfig`).
    pub fn label(self) -> &'static str {
        match self {
            Artifact::AdminKubeconfig => "admin kubeconfig",
        }
    }

    /// Where the artifact of `vnf_instance_id` is kept:
    /// `<state_dir>/kubeconfig/<vnfInstanceId>.conf` for the admin kubeconfig.
    /// `vnf_instance_id` is an identifier intake validated (no `/`).
    pub fn path(self, state_dir: &Path, vnf_instance_id: &str) -> PathBuf {
        match self {
            Artifact::AdminKubeconfig => state_dir
                .join("kubeconfig")
                .join(format!("{vnf_instance_id}.conf")),
        }
    }
}

/// The endpoint a kubeconfig's cluster is reached at: its first `server:` value.
pub fn kubeconfig_server(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix("server:"))
        .map(|s| s.trim().to_owned())
}
