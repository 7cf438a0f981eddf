-- vnfkeeper state database: healing through Tacker (companion mode, `tacker.auto_heal`). A HEAL
-- reconcile decided for a Tacker-owned VNF waits for Tacker's heal (SOL003 v3.3.1 §5.4.9,
-- `POST /vnflcm/v2/vnf_instances/{id}/heal`): `TO_SEND` until vnfkeeper sent it, `SENT` once
-- Tacker's `vnfLcmOpOccId` (from the `Location` header) is stored in `tacker_op_occ_id`. The
-- engine does not run an operation while this is set; it is cleared when Tacker's HEAL
-- COMPLETED (then the post-steps run) or failed (then the operation is FAILED_TEMP).
-- Never edit this file once released; add a later V*__*.sql instead.

ALTER TABLE vnf_lcm_op_occ ADD COLUMN tacker_heal TEXT
    CHECK (tacker_heal IN ('TO_SEND', 'SENT'));
