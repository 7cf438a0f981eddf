-- vnfkeeper state database, schema version 2: scale levels for SCALE (SOL003 VnfInstance
-- instantiatedVnfInfo.scaleStatus). Never edit this file once released; add V3__*.sql instead.

-- JSON object {aspectId: scaleLevel} of an INSTANTIATED instance, e.g. {"worker_instance": 1};
-- NULL when NOT_INSTANTIATED. Written when INSTANTIATE or SCALE completes; intake checks a SCALE
-- against it (plus the SCALEs still queued) and the aspect's max_scale_level.
ALTER TABLE vnf_instance ADD COLUMN scale_status TEXT;

-- The decisions an operation made once and must keep across a crash or RETRY, JSON, e.g. the
-- VNFCs a SCALE_IN removes ({"victims": [...]}) or the VNFCs a HEAL replaces ({"targets": [...]}).
ALTER TABLE vnf_lcm_op_occ ADD COLUMN plan TEXT;
