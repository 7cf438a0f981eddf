-- vnfkeeper state database: companion mode with Tacker — the subscription vnfkeeper keeps in
-- Tacker, and what polling Tacker's `/vnflcm/v2` learned (SOL003 v3.3.1 §5.5.2.13 VnfLcmOpOcc,
-- §5.5.2.2 VnfInstance). Notifications are hints (V12); these rows are what Tacker's API said.
-- Never edit this file once released; add a later V*__*.sql instead.

-- The one subscription of vnfkeeper's in Tacker (at most one row).
CREATE TABLE tacker_subscription (
    singleton       INTEGER PRIMARY KEY CHECK (singleton = 1),
    subscription_id TEXT NOT NULL,     -- Tacker's LccnSubscription `id`
    callback_uri    TEXT NOT NULL,     -- the `callbackUri` it was created with
    created_at      TEXT NOT NULL,     -- RFC 3339 UTC: when vnfkeeper created or adopted it
    verified_at     TEXT NOT NULL      -- RFC 3339 UTC: when Tacker last listed it
);

-- One row per Tacker operation occurrence on a managed VNF instance: its latest known state.
CREATE TABLE tacker_op_occ (
    vnf_lcm_op_occ_id       TEXT PRIMARY KEY,
    vnf_instance_id         TEXT NOT NULL,
    operation               TEXT NOT NULL,   -- SOL003 LcmOperationType spelling
    operation_state         TEXT NOT NULL CHECK (operation_state IN
        ('STARTING','PROCESSING','COMPLETED','FAILED_TEMP','FAILED','ROLLING_BACK','ROLLED_BACK')),
    is_automatic_invocation INTEGER NOT NULL, -- 0/1
    first_seen_at           TEXT NOT NULL,   -- RFC 3339 UTC, vnfkeeper's clock
    updated_at              TEXT NOT NULL,   -- when operation_state was last recorded
    followup                TEXT CHECK (followup IN ('MANAGE','RETIRE'))  -- what vnfkeeper must do; NULL: nothing
);
CREATE INDEX tacker_op_occ_by_instance ON tacker_op_occ (vnf_instance_id);

-- Each state an occurrence was seen in, once (append-only).
CREATE TABLE tacker_op_occ_state (
    vnf_lcm_op_occ_id TEXT NOT NULL REFERENCES tacker_op_occ (vnf_lcm_op_occ_id),
    operation_state   TEXT NOT NULL,
    seen_at           TEXT NOT NULL,   -- RFC 3339 UTC, vnfkeeper's clock
    PRIMARY KEY (vnf_lcm_op_occ_id, operation_state)
);
CREATE TRIGGER tacker_op_occ_state_append_only_u BEFORE UPDATE ON tacker_op_occ_state
BEGIN SELECT RAISE(ABORT, 'tacker_op_occ_state is append-only'); END;
CREATE TRIGGER tacker_op_occ_state_append_only_d BEFORE DELETE ON tacker_op_occ_state
BEGIN SELECT RAISE(ABORT, 'tacker_op_occ_state is append-only'); END;

-- The managed VNF instances as Tacker last showed them (`GET /vnf_instances/{id}`).
CREATE TABLE tacker_vnf_instance (
    vnf_instance_id     TEXT PRIMARY KEY,
    vnfd_id             TEXT NOT NULL,
    instantiation_state TEXT NOT NULL CHECK (instantiation_state IN ('NOT_INSTANTIATED','INSTANTIATED')),
    vnfc_count          INTEGER NOT NULL,  -- entries of instantiatedVnfInfo.vnfcResourceInfo
    deleted_at          TEXT,              -- RFC 3339 UTC: when Tacker no longer listed it
    updated_at          TEXT NOT NULL
);
