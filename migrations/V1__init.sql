-- vnfkeeper state database, schema version 1.
--
-- Opened by the daemon in WAL mode with foreign keys on. Operators may read it at any time
-- (`sqlite3 -readonly /var/lib/vnfkeeper/state.db`); only the daemon writes. Times are UTC text in
-- RFC 3339 with microseconds (`2026-11-21T06:00:00.123456Z`), so they sort as text.
-- Request bodies are stored verbatim and may hold secrets (SSH passwords): the file is mode 0600.
-- Never edit this file once released; add V2__*.sql instead.

-- One row per VNF instance vnfkeeper knows (SOL003 VnfInstance).
CREATE TABLE vnf_instance (
    id                  TEXT PRIMARY KEY,            -- vnfInstanceId
    instantiation_state TEXT NOT NULL DEFAULT 'NOT_INSTANTIATED'
                        CHECK (instantiation_state IN ('NOT_INSTANTIATED', 'INSTANTIATED')),
    flavour_id          TEXT,                        -- from the accepted InstantiateVnfRequest
    vnf_package         TEXT,                        -- absolute path of the VNF package (dir or .zip)
    stack_name          TEXT,                        -- Heat stack name (vnf-<id>)
    stack_id            TEXT,                        -- Heat stack id once created
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);

-- One row per VNFC (one VM of a VDU) of an instance. A VNFC keeps its id when its server is
-- replaced by a heal: it is identified by the Heat resource that holds the server.
CREATE TABLE vnfc (
    id              TEXT PRIMARY KEY,                -- vnfcInstanceId (SOL002)
    vnf_instance_id TEXT NOT NULL REFERENCES vnf_instance (id),
    vdu_id          TEXT NOT NULL,
    vnfc_index      INTEGER,                         -- index in <VDU>-<index> (individual VNFC mode)
    stack_name      TEXT NOT NULL,                   -- Heat stack that owns the server resource
    stack_id        TEXT NOT NULL,                   --   (a nested stack for AutoScalingGroup members)
    resource_name   TEXT NOT NULL,                   -- the OS::Nova::Server resource in that stack
    server_id       TEXT,                            -- Nova server id (changes on heal)
    server_status   TEXT,                            -- Nova status when last observed
    ip_address      TEXT,                            -- address of the CP used for SSH
    cp_addresses    TEXT,                            -- JSON {cp name: address}
    volumes         TEXT,                            -- JSON [{resource, volumeId, device}]
    host_key        TEXT,                            -- pinned SSH host key (OpenSSH public key line)
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (vnf_instance_id, stack_id, resource_name)
);
CREATE INDEX vnfc_by_instance ON vnfc (vnf_instance_id);

-- LCM operation occurrences (SOL003 VnfLcmOpOcc). `seq` is the arrival order; operations of one
-- VNF instance run one at a time in `seq` order.
CREATE TABLE vnf_lcm_op_occ (
    seq                     INTEGER PRIMARY KEY AUTOINCREMENT,
    id                      TEXT NOT NULL UNIQUE,    -- vnfLcmOpOccId
    vnf_instance_id         TEXT NOT NULL REFERENCES vnf_instance (id),
    operation               TEXT NOT NULL
                            CHECK (operation IN ('INSTANTIATE', 'SCALE', 'HEAL', 'TERMINATE')),
    operation_state         TEXT NOT NULL
                            CHECK (operation_state IN ('STARTING', 'PROCESSING', 'COMPLETED',
                                   'FAILED_TEMP', 'FAILED', 'ROLLING_BACK', 'ROLLED_BACK')),
    state_entered_time      TEXT NOT NULL,
    start_time              TEXT NOT NULL,
    is_automatic_invocation INTEGER NOT NULL DEFAULT 0 CHECK (is_automatic_invocation IN (0, 1)),
    operation_params        TEXT NOT NULL,           -- the SOL003 request body, JSON, verbatim
    vnf_package             TEXT,                    -- absolute package path (INSTANTIATE only)
    request_id              TEXT UNIQUE,             -- idempotency key from the envelope, if any
    pending_task            TEXT CHECK (pending_task IN ('RETRY', 'ROLLBACK')),
    status_detail           TEXT,                    -- why it waits, or what it is doing now ("step k/N: …")
    steps_total             INTEGER,                 -- N: steps of the plan, once planned
    error                   TEXT                     -- ProblemDetails JSON when FAILED_TEMP/FAILED
);
CREATE INDEX op_by_instance ON vnf_lcm_op_occ (vnf_instance_id, seq);

-- Step journal: each step of an operation, written before (STARTED) and after (DONE/FAILED) it runs.
CREATE TABLE step_journal (
    vnf_lcm_op_occ_id TEXT NOT NULL REFERENCES vnf_lcm_op_occ (id),
    step_no           INTEGER NOT NULL,              -- 1-based position in the plan
    name              TEXT NOT NULL,                 -- e.g. storage.mkfs
    host              TEXT,                          -- VNFC id or address the step ran on
    state             TEXT NOT NULL CHECK (state IN ('PENDING', 'STARTED', 'DONE', 'SKIPPED', 'FAILED')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    started_at        TEXT,
    finished_at       TEXT,
    exit_status       INTEGER,
    detail            TEXT,                          -- check result or masked stderr tail
    PRIMARY KEY (vnf_lcm_op_occ_id, step_no, host)
);

-- Every file or notification that reached intake, accepted or not.
CREATE TABLE intake (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    source            TEXT NOT NULL CHECK (source IN ('SPOOL', 'NOTIFICATION')),
    file_name         TEXT,                          -- name in spool/new/
    content_sha256    TEXT NOT NULL,                 -- hex digest of the file as received
    request_id        TEXT,
    outcome           TEXT NOT NULL CHECK (outcome IN ('ACCEPTED', 'DUPLICATE', 'REJECTED')),
    vnf_instance_id   TEXT,                          -- as named in the request (may be unknown)
    vnf_lcm_op_occ_id TEXT REFERENCES vnf_lcm_op_occ (id), -- created (ACCEPTED) or matched (DUPLICATE)
    problem           TEXT,                          -- ProblemDetails JSON for REJECTED
    warnings          TEXT,                          -- JSON array of {pointer, reason}
    committed_at      TEXT NOT NULL
);
CREATE INDEX intake_by_sha ON intake (content_sha256);

-- Append-only audit trail. Rows are never updated or deleted (enforced by triggers).
CREATE TABLE event (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    at                TEXT NOT NULL,
    kind              TEXT NOT NULL,                 -- e.g. REQUEST_ACCEPTED, REQUEST_REJECTED, STATE_CHANGED
    vnf_instance_id   TEXT,
    vnf_lcm_op_occ_id TEXT,
    vnfc_id           TEXT,
    message           TEXT NOT NULL,                 -- one line for humans
    evidence          TEXT                           -- JSON with the facts behind the event
);
CREATE INDEX event_by_instance ON event (vnf_instance_id, id);
CREATE TRIGGER event_append_only_update BEFORE UPDATE ON event
BEGIN SELECT RAISE(ABORT, 'event is append-only'); END;
CREATE TRIGGER event_append_only_delete BEFORE DELETE ON event
BEGIN SELECT RAISE(ABORT, 'event is append-only'); END;

-- Audit view: everything that happened to each VNF instance, oldest first.
--   SELECT at, kind, vnf_lcm_op_occ_id, message FROM vnf_history WHERE vnf_instance_id = 'X';
CREATE VIEW vnf_history AS
SELECT e.at, e.vnf_instance_id, e.kind, e.vnf_lcm_op_occ_id, o.operation, e.vnfc_id, e.message, e.evidence
FROM event e LEFT JOIN vnf_lcm_op_occ o ON o.id = e.vnf_lcm_op_occ_id
ORDER BY e.id;

-- Audit view: operations that failed, and why.
--   SELECT * FROM failed_operations;
CREATE VIEW failed_operations AS
SELECT id AS vnf_lcm_op_occ_id, vnf_instance_id, operation, operation_state, state_entered_time,
       json_extract(error, '$.title') AS title, json_extract(error, '$.detail') AS detail
FROM vnf_lcm_op_occ
WHERE operation_state IN ('FAILED_TEMP', 'FAILED')
ORDER BY state_entered_time;

-- Audit view: request files that were refused, and why.
CREATE VIEW rejected_requests AS
SELECT committed_at, file_name, vnf_instance_id, json_extract(problem, '$.status') AS status,
       json_extract(problem, '$.detail') AS detail, problem
FROM intake WHERE outcome = 'REJECTED'
ORDER BY id;
