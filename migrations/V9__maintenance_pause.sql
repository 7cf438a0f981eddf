-- vnfkeeper state database: maintenance pauses.
--
-- An operator's "I am working on this VNF, do not heal it": while a pause is in force, the
-- reconcile loop keeps observing and recording the VNF but starts no automatic operation
-- (its decision is recorded as RECONCILE_PAUSED); operations an operator submits still run.
-- Set by `vnfkeeper pause`, or at INSTANTIATE by additionalParams.maintenance_pause; removed by
-- `vnfkeeper resume`, or by the loop once `until` has passed. Every change is an event row:
-- MAINTENANCE_PAUSED, MAINTENANCE_RESUMED (evidence: the pause, who resumed, `expired`).
-- Never edit this file once released; add a later V*__*.sql instead.
CREATE TABLE maintenance_pause (
    scope      TEXT PRIMARY KEY,                -- vnfInstanceId, or '*' for every VNF instance
    paused_by  TEXT NOT NULL,                   -- `uid N (name)`, or `INSTANTIATE request <op id>`
    reason     TEXT,                            -- free text, one line
    since      TEXT NOT NULL,                   -- RFC 3339 UTC
    until      TEXT                             -- RFC 3339 UTC; NULL: until `vnfkeeper resume`
);
