//! Row types: one struct per table, with the column list it is read from, decoded once into
//! types (a value that does not decode is [`StoreError::Corrupt`](super::StoreError::Corrupt)).

use std::collections::BTreeMap;

use rusqlite::Row;

use super::Result;
use super::decode::{Cells, OPERATION_STATES};
use vnfkeeper_core::model::{
    InstantiationState, IntakeOutcome, LcmOperationType, OpOccId, OperationState, PendingTask,
    ProblemDetails, Timestamp, VnfInstanceId, VnfcRow,
};
use vnfkeeper_core::tacker::Origin;

/// The spellings of `origin` columns, for decode errors.
const ORIGINS: &str = "spool or tacker";

/// Shape of `problem`/`error` columns, for decode errors.
const PROBLEM_DETAILS: &str = "a ProblemDetails JSON object";

/// A `vnf_lcm_op_occ` row (SOL003 VnfLcmOpOcc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRow {
    /// Arrival order.
    pub seq: i64,
    /// vnfLcmOpOccId.
    pub id: OpOccId,
    /// vnfInstanceId.
    pub vnf_instance_id: VnfInstanceId,
    /// Operation type.
    pub operation: LcmOperationType,
    /// operationState.
    pub operation_state: OperationState,
    /// stateEnteredTime.
    pub state_entered_time: Timestamp,
    /// startTime (when intake accepted the request).
    pub start_time: Timestamp,
    /// isAutomaticInvocation.
    pub is_automatic_invocation: bool,
    /// Idempotency key.
    pub request_id: Option<String>,
    /// RETRY/ROLLBACK waiting for the engine.
    pub pending_task: Option<PendingTask>,
    /// Why it waits / what it does.
    pub status_detail: Option<String>,
    /// Why it failed (`FAILED_TEMP`, `FAILED`).
    pub error: Option<ProblemDetails>,
    /// Where it came from: a spool request, or Tacker (the management steps after a Tacker
    /// operation COMPLETED; migration V15).
    pub origin: Origin,
    /// Tacker's `vnfLcmOpOccId` it follows (origin `tacker`).
    pub tacker_op_occ_id: Option<String>,
}

impl OperationRow {
    pub(super) const COLUMNS: &'static str = "seq, id, vnf_instance_id, operation, operation_state, \
        state_entered_time, start_time, is_automatic_invocation, request_id, pending_task, \
        status_detail, error, origin, tacker_op_occ_id";

    /// Decodes one row read with [`Self::COLUMNS`]; the outer error is SQLite's, the inner one
    /// [`StoreError::Corrupt`](super::StoreError::Corrupt).
    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<Self>> {
        Ok(Self::decode(r))
    }

    fn decode(r: &Row<'_>) -> Result<Self> {
        let id: String = r.get(1)?;
        let c = Cells::new("vnf_lcm_op_occ", &id);
        let operation = c.spelling(
            "operation",
            &r.get::<_, String>(3)?,
            LcmOperationType::parse,
            "INSTANTIATE, SCALE, HEAL or TERMINATE",
        )?;
        let operation_state = c.spelling(
            "operation_state",
            &r.get::<_, String>(4)?,
            OperationState::parse,
            OPERATION_STATES,
        )?;
        let pending_task = r
            .get::<_, Option<String>>(9)?
            .map(|t| c.spelling("pending_task", &t, PendingTask::parse, "RETRY or ROLLBACK"))
            .transpose()?;
        Ok(Self {
            seq: r.get(0)?,
            vnf_instance_id: r.get::<_, String>(2)?.into(),
            operation,
            operation_state,
            state_entered_time: c.time("state_entered_time", &r.get::<_, String>(5)?)?,
            start_time: c.time("start_time", &r.get::<_, String>(6)?)?,
            is_automatic_invocation: r.get(7)?,
            request_id: r.get(8)?,
            pending_task,
            status_detail: r.get(10)?,
            error: c.json("error", r.get(11)?, PROBLEM_DETAILS)?,
            origin: c.spelling("origin", &r.get::<_, String>(12)?, Origin::parse, ORIGINS)?,
            tacker_op_occ_id: r.get(13)?,
            id: id.into(),
        })
    }
}

/// A `vnf_instance` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRow {
    /// vnfInstanceId.
    pub id: VnfInstanceId,
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
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Scale level per aspect (`scaleStatus`, SOL003 §5.5.3.3), `{aspectId: level}`; empty when
    /// NOT_INSTANTIATED (stored `NULL`).
    pub scale_status: BTreeMap<String, u32>,
    /// Where it came from: `spool`, or `tacker` for a Tacker-owned VNF (migration V15).
    pub origin: Origin,
}

impl InstanceRow {
    pub(super) const COLUMNS: &'static str = "id, instantiation_state, flavour_id, vnf_package, stack_name, stack_id, created_at, updated_at, scale_status, origin";

    /// Decodes one row read with [`Self::COLUMNS`]; the outer error is SQLite's, the inner one
    /// [`StoreError::Corrupt`](super::StoreError::Corrupt).
    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<Self>> {
        Ok(Self::decode(r))
    }

    fn decode(r: &Row<'_>) -> Result<Self> {
        let id: String = r.get(0)?;
        let c = Cells::new("vnf_instance", &id);
        Ok(Self {
            instantiation_state: c.spelling(
                "instantiation_state",
                &r.get::<_, String>(1)?,
                InstantiationState::parse,
                "NOT_INSTANTIATED or INSTANTIATED",
            )?,
            flavour_id: r.get(2)?,
            vnf_package: r.get(3)?,
            stack_name: r.get(4)?,
            stack_id: r.get(5)?,
            created_at: c.time("created_at", &r.get::<_, String>(6)?)?,
            updated_at: c.time("updated_at", &r.get::<_, String>(7)?)?,
            scale_status: c
                .json(
                    "scale_status",
                    r.get(8)?,
                    "a JSON object of aspect ids to scale levels",
                )?
                .unwrap_or_default(),
            origin: c.spelling("origin", &r.get::<_, String>(9)?, Origin::parse, ORIGINS)?,
            id: id.into(),
        })
    }
}

/// Reading `vnfc` rows ([`VnfcRow`] is a core type: the pure planning reads it).
pub(super) struct VnfcColumns;

impl VnfcColumns {
    pub(super) const COLUMNS: &'static str = "id, vnf_instance_id, vdu_id, vnfc_index, stack_name, stack_id, \
        resource_name, server_id, server_status, ip_address, cp_addresses, volumes, host_key, created_at, parameters";

    /// Decodes one row read with [`Self::COLUMNS`]; the outer error is SQLite's, the inner one
    /// [`StoreError::Corrupt`](super::StoreError::Corrupt).
    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<VnfcRow>> {
        Ok(Self::decode(r))
    }

    fn decode(r: &Row<'_>) -> Result<VnfcRow> {
        let id: String = r.get(0)?;
        let c = Cells::new("vnfc", &id);
        Ok(VnfcRow {
            vnf_instance_id: r.get::<_, String>(1)?.into(),
            vdu_id: r.get(2)?,
            vnfc_index: r.get(3)?,
            stack_name: r.get(4)?,
            stack_id: r.get(5)?,
            resource_name: r.get(6)?,
            server_id: r.get(7)?,
            server_status: r.get(8)?,
            ip_address: r.get(9)?,
            cp_addresses: c
                .json("cp_addresses", r.get(10)?, "a JSON object of strings")?
                .unwrap_or_default(),
            volumes: c
                .json(
                    "volumes",
                    r.get(11)?,
                    "a JSON array of {resource, volumeId, device}",
                )?
                .unwrap_or_default(),
            host_key: r.get(12)?,
            created_at: c.time("created_at", &r.get::<_, String>(13)?)?,
            parameters: c.json("parameters", r.get(14)?, "JSON")?,
            id: id.into(),
        })
    }
}

/// An `intake` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntakeRow {
    /// Row id.
    pub id: i64,
    /// File name in `new/` (`accepted/<copy>` or `rejected/<copy>` for a row recorded again from
    /// the spool by `--recover-spool`).
    pub file_name: Option<String>,
    /// Keyed digest of the content, `hmac-sha256:<hex>` (see `SecretsKey::digest`).
    pub content_sha256: String,
    /// Idempotency key.
    pub request_id: Option<String>,
    /// What intake decided.
    pub outcome: IntakeOutcome,
    /// Instance named by the request.
    pub vnf_instance_id: Option<VnfInstanceId>,
    /// Operation created or matched.
    pub vnf_lcm_op_occ_id: Option<OpOccId>,
    /// Why it was rejected.
    pub problem: Option<ProblemDetails>,
    /// Commit time.
    pub committed_at: Timestamp,
    /// Who submitted the spool file; `None` before V19 or not from the spool.
    pub submitter: Option<super::Submitter>,
}

impl IntakeRow {
    pub(super) const COLUMNS: &'static str = "id, file_name, content_sha256, request_id, outcome, \
        vnf_instance_id, vnf_lcm_op_occ_id, problem, committed_at, submitter_uid, submitter_name, \
        submitter_sudo_user, submitted_file";

    /// Decodes one row read with [`Self::COLUMNS`]; the outer error is SQLite's, the inner one
    /// [`StoreError::Corrupt`](super::StoreError::Corrupt).
    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<Self>> {
        Ok(Self::decode(r))
    }

    fn decode(r: &Row<'_>) -> Result<Self> {
        let id: i64 = r.get(0)?;
        let key = id.to_string();
        let c = Cells::new("intake", &key);
        Ok(Self {
            id,
            file_name: r.get(1)?,
            content_sha256: r.get(2)?,
            request_id: r.get(3)?,
            outcome: c.spelling(
                "outcome",
                &r.get::<_, String>(4)?,
                IntakeOutcome::parse,
                "ACCEPTED, DUPLICATE or REJECTED",
            )?,
            vnf_instance_id: r.get::<_, Option<String>>(5)?.map(VnfInstanceId::from),
            vnf_lcm_op_occ_id: r.get::<_, Option<String>>(6)?.map(OpOccId::from),
            problem: c.json("problem", r.get(7)?, PROBLEM_DETAILS)?,
            committed_at: c.time("committed_at", &r.get::<_, String>(8)?)?,
            submitter: match r.get::<_, Option<u32>>(9)? {
                Some(uid) => Some(super::Submitter {
                    uid,
                    name: r.get(10)?,
                    sudo_user: r.get(11)?,
                    file: r.get(12)?,
                }),
                None => None,
            },
        })
    }
}
