-- vnfkeeper state database: vnfkeeper as Tacker v2's MgmtDriver. Each hook request the driver
-- script sent from Tacker's conductor (`heal_start`, `heal_end`, `scale_start`, `scale_end`:
-- SOL001 v2.6.1 `tosca.interfaces.nfv.Vnflcm`) and the vnfkeeper operation that runs it (origin
-- `tacker`). A `*_end` hook's operation is also linked to Tacker's occurrence through
-- `vnf_lcm_op_occ.tacker_op_occ_id` (one per occurrence, shared with the notification path);
-- a `*_start` hook's is linked only here. A retried Tacker operation sends its hooks again: a
-- new row and operation per attempt after a failed one.
-- Never edit this file once released; add V22__*.sql instead.
CREATE TABLE tacker_hook (
    op_id             TEXT PRIMARY KEY REFERENCES vnf_lcm_op_occ (id),
    vnf_instance_id   TEXT NOT NULL,
    vnf_lcm_op_occ_id TEXT NOT NULL,          -- Tacker's, from the Grant request
    hook              TEXT NOT NULL
        CHECK (hook IN ('heal_start', 'heal_end', 'scale_start', 'scale_end')),
    targets           TEXT NOT NULL,          -- JSON array of vnfkeeper VNFC ids the hook runs on
    received_at       TEXT NOT NULL           -- RFC 3339
);
CREATE INDEX tacker_hook_by_occ ON tacker_hook (vnf_lcm_op_occ_id, hook);
