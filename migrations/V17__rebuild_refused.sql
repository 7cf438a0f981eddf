-- vnfkeeper state database: a new reconcile alert. RECONCILE_REBUILD_REFUSED: a server rebuild
-- reconcile would start is one the VNF's flavour refuses (a kubespray master alone: kubespray has
-- no playbook to rebuild one master), so an operator must act; `reconcile_decisions.alert` is 1
-- for it, as for the other alerts.
-- Never edit this file once released; add a later V*__*.sql instead.

DROP VIEW reconcile_decisions;
CREATE VIEW reconcile_decisions AS
SELECT e.id, e.at, e.vnf_instance_id, e.vnfc_id, e.vnf_lcm_op_occ_id,
       substr(e.kind, 11) AS decision, e.message AS reason,
       json_extract(e.evidence, '$.pass') AS pass,
       CASE WHEN e.kind IN ('RECONCILE_SHORT_CIRCUIT', 'RECONCILE_BUDGET_EXHAUSTED',
                            'RECONCILE_PV_BOUND_BLOCK', 'RECONCILE_REBUILD_REFUSED')
            THEN 1 ELSE 0 END AS alert,
       e.evidence
FROM event e
WHERE e.kind LIKE 'RECONCILE\_%' ESCAPE '\'
ORDER BY e.id;
