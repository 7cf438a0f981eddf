//! Roles of VNFCs: what a VNFC is to the flavour that configures it (a Kubernetes master or
//! worker, the NFS storage server, the external load balancer, the Ansible server), with the traits the engine and reconcile act on.

use serde::{Deserialize, Serialize};

/// What a VNFC is to its flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A Kubernetes control-plane node.
    Master,
    /// A Kubernetes worker node.
    Worker,
    /// The NFS storage server (holds the data volumes).
    StorageServer,
    /// The external load balancer in front of the cluster (HAProxy; kubespray flavour).
    LoadBalancer,
    /// The Ansible server that runs kubespray: a host outside the VNF, reached at the address
    /// the request gives (kubespray flavour).
    AnsibleServer,
    /// The private container registry VM (holds the registry's data volume).
    Registry,
    /// A VDU the flavour does not manage.
    Other,
}

impl Role {
    /// Holds data that a rebuild must keep (a heal keeps its volumes; PersistentVolumes in use
    /// block its heal).
    pub fn is_stateful(self) -> bool {
        matches!(self, Role::StorageServer | Role::Registry)
    }

    /// Can run `kubectl` for the cluster (drain, delete node, PersistentVolumes).
    pub fn runs_kubectl(self) -> bool {
        matches!(self, Role::Master)
    }

    /// A Kubernetes node (joins the cluster).
    pub fn is_node(self) -> bool {
        matches!(self, Role::Master | Role::Worker)
    }
}
