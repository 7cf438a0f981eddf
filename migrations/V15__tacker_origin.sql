-- vnfkeeper state database: companion mode's management steps. A VNF instance and an operation
-- have an origin: `spool` (a request file vnfkeeper accepted) or `tacker` (a Tacker-owned VNF,
-- and the management steps vnfkeeper runs after a Tacker operation COMPLETED, linked to
-- Tacker's `vnfLcmOpOccId`, SOL003 v3.3.1 §5.5.2.13). What vnfkeeper did about each polled
-- Tacker operation occurrence is recorded on it (`handled_at`, or `problem` when refused).
-- Never edit this file once released; add a later V*__*.sql instead.

ALTER TABLE vnf_instance ADD COLUMN origin TEXT NOT NULL DEFAULT 'spool'
    CHECK (origin IN ('spool', 'tacker'));

ALTER TABLE vnf_lcm_op_occ ADD COLUMN origin TEXT NOT NULL DEFAULT 'spool'
    CHECK (origin IN ('spool', 'tacker'));
-- Tacker's vnfLcmOpOccId this operation follows (origin `tacker`); NULL for spool operations.
ALTER TABLE vnf_lcm_op_occ ADD COLUMN tacker_op_occ_id TEXT
    REFERENCES tacker_op_occ (vnf_lcm_op_occ_id);
-- At most one vnfkeeper operation per Tacker operation occurrence.
CREATE UNIQUE INDEX op_by_tacker_op_occ ON vnf_lcm_op_occ (tacker_op_occ_id)
    WHERE tacker_op_occ_id IS NOT NULL;

-- When vnfkeeper acted on the follow-up (created its operation, or retired the VNF); NULL: not
-- yet (or nothing to do).
ALTER TABLE tacker_op_occ ADD COLUMN handled_at TEXT;
-- Why vnfkeeper refused to act on it (ProblemDetails JSON: an operationParams that fails
-- intake validation, a vnfdId without a package); NULL otherwise.
ALTER TABLE tacker_op_occ ADD COLUMN problem TEXT;
