-- vnfkeeper state database, schema version 2: scale levels for SCALE (SOL003 VnfInstance
-- instantiatedVnfInfo.scaleStatus), operation plans, per-VNFC parameters of individually managed
-- VNFCs. Never edit this file once released; add V3__*.sql instead.

-- JSON object {aspectId: scaleLevel} of an INSTANTIATED instance, e.g. {"worker_instance": 1};
-- NULL when NOT_INSTANTIATED. Written when INSTANTIATE or SCALE completes; intake checks a SCALE
-- against it (plus the SCALEs still queued) and the aspect's max_scale_level.
ALTER TABLE vnf_instance ADD COLUMN scale_status TEXT;

-- The decisions an operation made once and must keep across a crash or RETRY, JSON, e.g. the
-- VNFCs a SCALE_IN removes ({"victims": [...]}) or the VNFCs a HEAL replaces ({"targets": [...]}).
ALTER TABLE vnf_lcm_op_occ ADD COLUMN plan TEXT;

-- The VNFC's slice of the stack's `nfv` parameter when its VDU is managed individually (C4,
-- adjusted HOT), JSON, e.g. {"VDU": {"VDU1-0": {"computeName": "VDU1-0", "vcImageId": "…",
-- "locationConstraints": "zone-x"}}, "CP": {"VDU1_CP1-0": {"network": "…"}}}; NULL for VNFCs of
-- AutoScalingGroup or single-resource VDUs. Written with the VNFC rows after each stack change;
-- the next SCALE or HEAL rebuilds the current adjusted HOT from these and vnfc_index.
ALTER TABLE vnfc ADD COLUMN parameters TEXT;
