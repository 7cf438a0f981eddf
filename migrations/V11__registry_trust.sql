-- vnfkeeper state database: the private registries the nodes of a VNF trust
-- (`private_registry_connection_info` of a Kubernetes-cluster INSTANTIATE, cir spec) and, per
-- node, when its trust was last applied and verified by an operation's trust steps.
-- Never edit this file once released; add a new V<n>__*.sql instead.
--
-- Rows are written by the engine when a `trust.*` step of a node ends DONE (in the transaction
-- that journals it): the instance's registries are upserted, the node's `verified_at` set, and
-- its `applied_at` when the step changed something. A full reconcile pass whose `trust.*` probes
-- of a node all find it in place sets that node's `verified_at` too.
CREATE TABLE vnf_registry (
    vnf_instance_id TEXT NOT NULL REFERENCES vnf_instance (id),
    server          TEXT NOT NULL,                   -- host[:port] as in the request
    connection_type INTEGER NOT NULL CHECK (connection_type IN (0, 1)), -- 0 HTTP, 1 HTTPS
    ca_sha256       TEXT,                            -- SHA-256 (hex) of the package's CA; NULL: none
    updated_at      TEXT NOT NULL,                   -- RFC 3339
    PRIMARY KEY (vnf_instance_id, server)
);

CREATE TABLE node_registry_trust (
    vnfc_instance_id TEXT PRIMARY KEY REFERENCES vnfc (id) ON DELETE CASCADE,
    vnf_instance_id  TEXT NOT NULL REFERENCES vnf_instance (id),
    applied_at       TEXT,                           -- last change by a trust step; NULL: none was needed
    verified_at      TEXT NOT NULL                   -- last trust step or probe pass that found (or left) it in place
);

-- Audit: which nodes trust registry X (`SELECT * FROM registry_nodes WHERE server = 'X'`).
CREATE VIEW registry_nodes AS
SELECT r.server, r.connection_type, r.ca_sha256, r.vnf_instance_id,
       t.vnfc_instance_id, t.applied_at, t.verified_at
FROM vnf_registry r
JOIN node_registry_trust t ON t.vnf_instance_id = r.vnf_instance_id;
