-- vnfkeeper state database, schema version 3: memory of the reconcile loop (issue 5, C5).
--
-- The reconcile loop observes every INSTANTIATED VNF instance (Nova/Neutron/Cinder list calls on
-- every pass, SSH probes on full passes) and decides per VNFC whether to heal, wait, or alert
-- (DESIGN.md §5). What it must remember between passes lives here: consecutive failed
-- observations (a failed observation acts only after a second one at least `grace_secs` later),
-- the server it last saw (a new server restarts the startup grace), and the per-VNFC retry budget
-- (automatic heals so far, the last one's time, how long the VNFC has been healthy since).
-- Only the daemon writes this table; `vnfkeeper plan` reads it. Decisions themselves are
-- append-only rows of `event` (kinds RECONCILE_*), shown by the view `reconcile_decisions`.
-- Never edit this file once released; add V4__*.sql instead.

-- One row per VNFC the loop has observed, plus one row per VNF instance with vnfc_id = ''
-- (VNF-level memory: last VNF-level decision, PersistentVolume phases from the last full pass).
-- No foreign key: VNFC rows are deleted by terminate/rollback; stale rows here are harmless
-- and are removed by the loop when their VNFC is gone.
CREATE TABLE reconcile_state (
    vnf_instance_id        TEXT NOT NULL,
    vnfc_id                TEXT NOT NULL,          -- vnfcInstanceId, or '' for the VNF itself
    server_id              TEXT,                   -- Nova server id when last observed
    server_since           TEXT,                   -- when that server appeared (start of startup grace)
    cloud_failures         INTEGER NOT NULL DEFAULT 0, -- consecutive failed cloud observations (SHUTOFF, …)
    cloud_first_failure_at TEXT,                   -- first of them
    probe_failures         INTEGER NOT NULL DEFAULT 0, -- consecutive failed probes (node NotReady, …)
    probe_first_failure_at TEXT,                   -- first of them
    healthy_since          TEXT,                   -- start of the current healthy stretch (budget comes back after min_healthy_secs)
    heal_attempts          INTEGER NOT NULL DEFAULT 0, -- automatic heals since the budget was last reset
    last_heal_at           TEXT,                   -- the last automatic heal of this VNFC (backoff base)
    last_decision          TEXT,                   -- kind + reason of the last decision recorded (no duplicate audit rows)
    pv_bound               TEXT,                   -- VNF row: JSON array of Bound PersistentVolume names
    pv_observed_at         TEXT,                   -- VNF row: when pv_bound was read (NULL: never)
    updated_at             TEXT NOT NULL,
    PRIMARY KEY (vnf_instance_id, vnfc_id)
);

-- Audit view: every decision of the reconcile loop, oldest first, with its evidence.
--   SELECT at, vnf_instance_id, vnfc_id, decision, reason FROM reconcile_decisions;
--   kinds: RECONCILE_HEAL_STARTED, RECONCILE_DRIFT_DETECTED, RECONCILE_DEFERRED_UNKNOWN,
--   RECONCILE_DEFERRED_GRACE, RECONCILE_DEFERRED_BACKOFF, RECONCILE_IN_FLIGHT,
--   RECONCILE_SHORT_CIRCUIT, RECONCILE_BUDGET_EXHAUSTED, RECONCILE_PV_BOUND_BLOCK.
--   `alert` is 1 for decisions that need an operator (short-circuit, budget, PV Bound).
CREATE VIEW reconcile_decisions AS
SELECT e.id, e.at, e.vnf_instance_id, e.vnfc_id, e.vnf_lcm_op_occ_id,
       substr(e.kind, 11) AS decision, e.message AS reason,
       json_extract(e.evidence, '$.pass') AS pass,
       CASE WHEN e.kind IN ('RECONCILE_SHORT_CIRCUIT', 'RECONCILE_BUDGET_EXHAUSTED',
                            'RECONCILE_PV_BOUND_BLOCK') THEN 1 ELSE 0 END AS alert,
       e.evidence
FROM event e
WHERE e.kind LIKE 'RECONCILE\_%' ESCAPE '\'
ORDER BY e.id;
