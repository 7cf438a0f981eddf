//! Row types: one struct per table, with the column list it is read from.

use rusqlite::Row;

use super::{Result, StoreError, parse_instantiation_state};
use crate::model::{InstantiationState, LcmOperationType, OperationState};

/// A `vnf_lcm_op_occ` row (SOL003 VnfLcmOpOcc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRow {
    /// Arrival order.
    pub seq: i64,
    /// vnfLcmOpOccId.
    pub id: String,
    /// vnfInstanceId.
    pub vnf_instance_id: String,
    /// Operation type.
    pub operation: LcmOperationType,
    /// operationState.
    pub operation_state: OperationState,
    /// stateEnteredTime (RFC 3339).
    pub state_entered_time: String,
    /// startTime (RFC 3339).
    pub start_time: String,
    /// isAutomaticInvocation.
    pub is_automatic_invocation: bool,
    /// Idempotency key.
    pub request_id: Option<String>,
    /// RETRY/ROLLBACK waiting for the engine.
    pub pending_task: Option<String>,
    /// Why it waits / what it does.
    pub status_detail: Option<String>,
    /// ProblemDetails JSON.
    pub error: Option<String>,
}

impl OperationRow {
    pub(super) const COLUMNS: &'static str = "seq, id, vnf_instance_id, operation, operation_state, \
        state_entered_time, start_time, is_automatic_invocation, request_id, pending_task, \
        status_detail, error";

    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<Self>> {
        let operation: String = r.get(3)?;
        let state: String = r.get(4)?;
        let Some(operation) = LcmOperationType::parse(&operation) else {
            return Ok(Err(StoreError::Corrupt {
                column: "vnf_lcm_op_occ.operation",
                value: operation,
            }));
        };
        let Some(operation_state) = OperationState::parse(&state) else {
            return Ok(Err(StoreError::Corrupt {
                column: "vnf_lcm_op_occ.operation_state",
                value: state,
            }));
        };
        Ok(Ok(Self {
            seq: r.get(0)?,
            id: r.get(1)?,
            vnf_instance_id: r.get(2)?,
            operation,
            operation_state,
            state_entered_time: r.get(5)?,
            start_time: r.get(6)?,
            is_automatic_invocation: r.get(7)?,
            request_id: r.get(8)?,
            pending_task: r.get(9)?,
            status_detail: r.get(10)?,
            error: r.get(11)?,
        }))
    }
}

/// A `vnf_instance` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRow {
    /// vnfInstanceId.
    pub id: String,
    /// instantiationState.
    pub instantiation_state: InstantiationState,
    /// flavourId of the accepted instantiate.
    pub flavour_id: Option<String>,
    /// Absolute path of the VNF package.
    pub vnf_package: Option<String>,
    /// Heat stack name.
    pub stack_name: Option<String>,
    /// Heat stack id.
    pub stack_id: Option<String>,
    /// Creation time (RFC 3339).
    pub created_at: String,
    /// Last change (RFC 3339).
    pub updated_at: String,
    /// Scale level per aspect (`scaleStatus`, SOL003 §5.5.3.3), `{aspectId: level}`; empty when
    /// NOT_INSTANTIATED.
    pub scale_status: std::collections::BTreeMap<String, u32>,
}

impl InstanceRow {
    pub(super) const COLUMNS: &'static str = "id, instantiation_state, flavour_id, vnf_package, stack_name, stack_id, created_at, updated_at, scale_status";

    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<Self>> {
        let state = match parse_instantiation_state(r.get(1)?) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(Self {
            id: r.get(0)?,
            instantiation_state: state,
            flavour_id: r.get(2)?,
            vnf_package: r.get(3)?,
            stack_name: r.get(4)?,
            stack_id: r.get(5)?,
            created_at: r.get(6)?,
            updated_at: r.get(7)?,
            scale_status: r
                .get::<_, Option<String>>(8)?
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default(),
        }))
    }
}

/// A `vnfc` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VnfcRow {
    /// vnfcInstanceId.
    pub id: String,
    /// vnfInstanceId.
    pub vnf_instance_id: String,
    /// VDU the VNFC belongs to.
    pub vdu_id: String,
    /// Index in `<VDU>-<index>`.
    pub vnfc_index: Option<i64>,
    /// Name of the Heat stack owning the server resource.
    pub stack_name: String,
    /// Id of that stack.
    pub stack_id: String,
    /// The server resource's name.
    pub resource_name: String,
    /// Nova server id.
    pub server_id: Option<String>,
    /// Nova status when last observed.
    pub server_status: Option<String>,
    /// Address used for SSH.
    pub ip_address: Option<String>,
    /// JSON `{cp: address}`.
    pub cp_addresses: Option<String>,
    /// JSON `[{resource, volumeId, device}]`.
    pub volumes: Option<String>,
    /// Pinned SSH host key.
    pub host_key: Option<String>,
    /// When the row was created (RFC 3339): the VNFC's first server came up then.
    pub created_at: String,
    /// JSON: the VNFC's slice of the stack's `nfv` parameter (`{"VDU": {"<VDU>-<i>": {…}},
    /// "CP": {"<CP>-<i>": {…}}}`) when its VDU is managed individually (adjusted HOT).
    pub parameters: Option<String>,
}

impl VnfcRow {
    pub(super) const COLUMNS: &'static str = "id, vnf_instance_id, vdu_id, vnfc_index, stack_name, stack_id, \
        resource_name, server_id, server_status, ip_address, cp_addresses, volumes, host_key, created_at, parameters";

    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            vnf_instance_id: r.get(1)?,
            vdu_id: r.get(2)?,
            vnfc_index: r.get(3)?,
            stack_name: r.get(4)?,
            stack_id: r.get(5)?,
            resource_name: r.get(6)?,
            server_id: r.get(7)?,
            server_status: r.get(8)?,
            ip_address: r.get(9)?,
            cp_addresses: r.get(10)?,
            volumes: r.get(11)?,
            host_key: r.get(12)?,
            created_at: r.get(13)?,
            parameters: r.get(14)?,
        })
    }
}

/// An `intake` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntakeRow {
    /// Row id.
    pub id: i64,
    /// File name in `new/`.
    pub file_name: Option<String>,
    /// Hex SHA-256 of the content.
    pub content_sha256: String,
    /// Idempotency key.
    pub request_id: Option<String>,
    /// `ACCEPTED`, `DUPLICATE` or `REJECTED`.
    pub outcome: String,
    /// Instance named by the request.
    pub vnf_instance_id: Option<String>,
    /// Operation created or matched.
    pub vnf_lcm_op_occ_id: Option<String>,
    /// ProblemDetails JSON.
    pub problem: Option<String>,
    /// Commit time (RFC 3339).
    pub committed_at: String,
}

impl IntakeRow {
    pub(super) const COLUMNS: &'static str = "id, file_name, content_sha256, request_id, outcome, \
        vnf_instance_id, vnf_lcm_op_occ_id, problem, committed_at";

    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            file_name: r.get(1)?,
            content_sha256: r.get(2)?,
            request_id: r.get(3)?,
            outcome: r.get(4)?,
            vnf_instance_id: r.get(5)?,
            vnf_lcm_op_occ_id: r.get(6)?,
            problem: r.get(7)?,
            committed_at: r.get(8)?,
        })
    }
}
