//! Planning: pure functions from intended state, observed state and the VNF package to what
//! must happen. No I/O, not async, never reads the clock.

pub mod individual;
pub mod nfv;
pub mod scale;
pub mod stages;
pub mod terminate;
pub mod vnfcs;

/// Why a plan cannot be made: names the request field (JSON pointer) or the VNFD node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", pointer.as_deref().or(vnfd_node.as_deref()).unwrap_or("plan"))]
pub struct PlanError {
    /// RFC 6901 pointer into the request envelope, when a request field is at fault.
    pub pointer: Option<String>,
    /// VNFD node template, when the package is at fault.
    pub vnfd_node: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl PlanError {
    /// A request field is at fault.
    pub fn at(pointer: &str, reason: String) -> Self {
        Self {
            pointer: Some(pointer.into()),
            vnfd_node: None,
            reason,
        }
    }

    /// The VNFD is at fault.
    pub fn vnfd(node: &str, reason: &str) -> Self {
        Self {
            pointer: None,
            vnfd_node: Some(node.into()),
            reason: reason.into(),
        }
    }
}
