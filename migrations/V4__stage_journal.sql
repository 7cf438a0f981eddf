-- vnfkeeper state database, schema version 4: the step journal is keyed by the stage key of the
-- operation's stored plan instead of the stage's position. An operation's plan (column
-- vnf_lcm_op_occ.plan) holds its ordered stages, each with a stable key such as `heat.create`,
-- `k8s.install@<vnfcInstanceId>` or `storage.filesystem@<volumeId>`; resume and RETRY skip the
-- stages whose key is DONE here, so a package or VNFC row that changed after a crash cannot shift
-- which stages are skipped. Never edit this file once released; add V5__*.sql instead.

CREATE TABLE step_journal_v4 (
    vnf_lcm_op_occ_id TEXT NOT NULL REFERENCES vnf_lcm_op_occ (id),
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

-- Existing rows get the key `<name>@<host>` (`<name>` for cloud steps). Where one operation ran
-- the same step on the same host twice (one per volume or PersistentVolume), the position is
-- appended (`#<step_no>`): such a legacy stage is checked again by an operation that resumes
-- across the upgrade, which the check-then-apply steps make harmless.
INSERT INTO step_journal_v4 (vnf_lcm_op_occ_id, stage_key, step_no, name, host, state, attempts,
                             started_at, finished_at, exit_status, detail)
SELECT j.vnf_lcm_op_occ_id,
       j.name
         || CASE WHEN COALESCE(j.host, '') = '' THEN '' ELSE '@' || j.host END
         || CASE WHEN (SELECT COUNT(*) FROM step_journal d
                       WHERE d.vnf_lcm_op_occ_id = j.vnf_lcm_op_occ_id AND d.name = j.name
                         AND COALESCE(d.host, '') = COALESCE(j.host, '')) > 1
                 THEN '#' || j.step_no ELSE '' END,
       j.step_no, j.name, COALESCE(j.host, ''), j.state, j.attempts, j.started_at, j.finished_at,
       j.exit_status, j.detail
FROM step_journal j;

DROP TABLE step_journal;
ALTER TABLE step_journal_v4 RENAME TO step_journal;
CREATE INDEX step_journal_by_position ON step_journal (vnf_lcm_op_occ_id, step_no);
