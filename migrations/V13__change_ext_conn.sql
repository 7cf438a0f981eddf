-- vnfkeeper state database: the operation type CHANGE_EXT_CONN (SOL003 §5.4.11
-- ChangeExtVnfConnectivityRequest). Never edit this file once released; add a new V<n>__*.sql.
--
-- vnf_lcm_op_occ.operation has a CHECK listing the operation types, and SQLite cannot change a
-- CHECK in place, so the table is made again with the new list. step_journal and intake refer to
-- it by foreign key and are made again with it (new tables referring to the new one, the old
-- ones dropped children first, then renamed: no row ever refers to a missing operation, so this
-- runs with foreign keys on). Views over these tables are dropped and created again unchanged;
-- indexes keep their names (queries name some of them with INDEXED BY); AUTOINCREMENT counters
-- are carried over.

DROP VIEW vnf_history;
DROP VIEW failed_operations;
DROP VIEW rejected_requests;

CREATE TABLE vnf_lcm_op_occ_v13 (
    seq                     INTEGER PRIMARY KEY AUTOINCREMENT,
    id                      TEXT NOT NULL UNIQUE,    -- vnfLcmOpOccId
    vnf_instance_id         TEXT NOT NULL REFERENCES vnf_instance (id),
    operation               TEXT NOT NULL
                            CHECK (operation IN ('INSTANTIATE', 'SCALE', 'HEAL', 'TERMINATE',
                                                 'CHANGE_EXT_CONN')),
    operation_state         TEXT NOT NULL
                            CHECK (operation_state IN ('STARTING', 'PROCESSING', 'COMPLETED',
                                   'FAILED_TEMP', 'FAILED', 'ROLLING_BACK', 'ROLLED_BACK')),
    state_entered_time      TEXT NOT NULL,
    start_time              TEXT NOT NULL,
    is_automatic_invocation INTEGER NOT NULL DEFAULT 0 CHECK (is_automatic_invocation IN (0, 1)),
    operation_params        TEXT NOT NULL,           -- the SOL003 request body, JSON, redacted
    vnf_package             TEXT,                    -- package snapshot path (INSTANTIATE only)
    request_id              TEXT UNIQUE,             -- idempotency key from the envelope, if any
    pending_task            TEXT CHECK (pending_task IN ('RETRY', 'ROLLBACK')),
    status_detail           TEXT,                    -- why it waits, or what it is doing now
    steps_total             INTEGER,                 -- N: stages of the plan, once planned
    error                   TEXT,                    -- ProblemDetails JSON when FAILED_TEMP/FAILED
    plan                    TEXT,                    -- the stored plan (V2)
    operation_secrets       BLOB,                    -- sealed secrets of the request (V5)
    package_sha256          TEXT                     -- package snapshot digest (V7)
        CHECK (package_sha256 IS NULL OR (length(package_sha256) = 64 AND package_sha256 NOT GLOB '*[^0-9a-f]*')),
    package_source          TEXT                     -- the operator's package path (V7)
);
INSERT INTO vnf_lcm_op_occ_v13 (seq, id, vnf_instance_id, operation, operation_state,
    state_entered_time, start_time, is_automatic_invocation, operation_params, vnf_package,
    request_id, pending_task, status_detail, steps_total, error, plan, operation_secrets,
    package_sha256, package_source)
SELECT seq, id, vnf_instance_id, operation, operation_state, state_entered_time, start_time,
       is_automatic_invocation, operation_params, vnf_package, request_id, pending_task,
       status_detail, steps_total, error, plan, operation_secrets, package_sha256, package_source
FROM vnf_lcm_op_occ;

CREATE TABLE step_journal_v13 (
    vnf_lcm_op_occ_id TEXT NOT NULL REFERENCES vnf_lcm_op_occ_v13 (id),
    stage_key         TEXT NOT NULL,                 -- stable key of the stage in the plan
    step_no           INTEGER NOT NULL,              -- 1-based position of the stage in the plan
    name              TEXT NOT NULL,                 -- step name, e.g. storage.filesystem
    host              TEXT NOT NULL DEFAULT '',      -- VNFC id the step ran on; '' for cloud steps
    state             TEXT NOT NULL CHECK (state IN ('PENDING', 'STARTED', 'DONE', 'SKIPPED', 'FAILED')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    started_at        TEXT,
    finished_at       TEXT,
    exit_status       INTEGER,
    detail            TEXT,                          -- check result or masked stderr tail
    PRIMARY KEY (vnf_lcm_op_occ_id, stage_key)
);
INSERT INTO step_journal_v13 (vnf_lcm_op_occ_id, stage_key, step_no, name, host, state, attempts,
                              started_at, finished_at, exit_status, detail)
SELECT vnf_lcm_op_occ_id, stage_key, step_no, name, host, state, attempts, started_at,
       finished_at, exit_status, detail
FROM step_journal;

CREATE TABLE intake_v13 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    source            TEXT NOT NULL CHECK (source IN ('SPOOL', 'NOTIFICATION')),
    file_name         TEXT,                          -- name in spool/new/
    content_sha256    TEXT NOT NULL,                 -- hex digest of the file as received
    request_id        TEXT,
    outcome           TEXT NOT NULL CHECK (outcome IN ('ACCEPTED', 'DUPLICATE', 'REJECTED')),
    vnf_instance_id   TEXT,                          -- as named in the request (may be unknown)
    vnf_lcm_op_occ_id TEXT REFERENCES vnf_lcm_op_occ_v13 (id), -- created (ACCEPTED) or matched (DUPLICATE)
    problem           TEXT,                          -- ProblemDetails JSON for REJECTED
    warnings          TEXT,                          -- JSON array of {pointer, reason}
    committed_at      TEXT NOT NULL
);
INSERT INTO intake_v13 (id, source, file_name, content_sha256, request_id, outcome,
                        vnf_instance_id, vnf_lcm_op_occ_id, problem, warnings, committed_at)
SELECT id, source, file_name, content_sha256, request_id, outcome, vnf_instance_id,
       vnf_lcm_op_occ_id, problem, warnings, committed_at
FROM intake;

-- The AUTOINCREMENT counters (ids are never reused, even of rows no longer there).
DELETE FROM sqlite_sequence WHERE name IN ('vnf_lcm_op_occ_v13', 'intake_v13');
INSERT INTO sqlite_sequence (name, seq)
SELECT name || '_v13', seq FROM sqlite_sequence WHERE name IN ('vnf_lcm_op_occ', 'intake');

DROP TABLE step_journal;
DROP TABLE intake;
DROP TABLE vnf_lcm_op_occ;
ALTER TABLE vnf_lcm_op_occ_v13 RENAME TO vnf_lcm_op_occ;
ALTER TABLE step_journal_v13 RENAME TO step_journal;
ALTER TABLE intake_v13 RENAME TO intake;

CREATE INDEX op_by_instance ON vnf_lcm_op_occ (vnf_instance_id, seq);
CREATE INDEX op_unfinished ON vnf_lcm_op_occ (vnf_instance_id, seq)
WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK');
CREATE INDEX op_runnable ON vnf_lcm_op_occ (seq)
WHERE operation_state IN ('STARTING', 'PROCESSING', 'ROLLING_BACK')
   OR (operation_state = 'FAILED_TEMP' AND pending_task IS NOT NULL);
CREATE INDEX op_terminate_waiting ON vnf_lcm_op_occ (seq)
WHERE operation = 'TERMINATE' AND operation_state = 'STARTING';
CREATE INDEX op_by_package ON vnf_lcm_op_occ (package_sha256) WHERE package_sha256 IS NOT NULL;
CREATE INDEX step_journal_by_position ON step_journal (vnf_lcm_op_occ_id, step_no);
CREATE INDEX intake_by_sha ON intake (content_sha256);
CREATE INDEX intake_by_file ON intake (file_name);
CREATE INDEX intake_by_instance ON intake (vnf_instance_id, id);

-- Audit views, as V1 made them.
CREATE VIEW vnf_history AS
SELECT e.at, e.vnf_instance_id, e.kind, e.vnf_lcm_op_occ_id, o.operation, e.vnfc_id, e.message, e.evidence
FROM event e LEFT JOIN vnf_lcm_op_occ o ON o.id = e.vnf_lcm_op_occ_id
ORDER BY e.id;

CREATE VIEW failed_operations AS
SELECT id AS vnf_lcm_op_occ_id, vnf_instance_id, operation, operation_state, state_entered_time,
       json_extract(error, '$.title') AS title, json_extract(error, '$.detail') AS detail
FROM vnf_lcm_op_occ
WHERE operation_state IN ('FAILED_TEMP', 'FAILED')
ORDER BY state_entered_time;

CREATE VIEW rejected_requests AS
SELECT committed_at, file_name, vnf_instance_id, json_extract(problem, '$.status') AS status,
       json_extract(problem, '$.detail') AS detail, problem
FROM intake WHERE outcome = 'REJECTED'
ORDER BY id;
