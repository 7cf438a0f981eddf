-- The daemon epoch: a fencing token for the daemon's own writes. Every daemon start raises it
-- (one row, `epoch + 1`, in one write transaction) and the daemon keeps the value it got; each of
-- its write transactions first reads this row and, when another daemon has raised it since,
-- rolls back and the daemon exits (status 79). `node` and `started_at` say who raised it last.
-- Never edit this file once released; add V21__*.sql instead.
CREATE TABLE daemon_epoch (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    epoch      INTEGER NOT NULL CHECK (epoch >= 0),
    node       TEXT NOT NULL,                 -- host name of the daemon that raised it
    started_at TEXT NOT NULL                  -- RFC 3339, when it raised it
);
INSERT INTO daemon_epoch (id, epoch, node, started_at) VALUES (1, 0, '', '1970-01-01T00:00:00Z');

-- The epoch of the daemon that wrote the row last (a stage's journal row, an operation) or
-- appended it (an event). NULL: no daemon has written the row since this version (a command's
-- writes, `vnfkeeper pause` or `host-key forget`, stamp nothing).
ALTER TABLE step_journal ADD COLUMN epoch INTEGER;
ALTER TABLE vnf_lcm_op_occ ADD COLUMN epoch INTEGER;
ALTER TABLE event ADD COLUMN epoch INTEGER;

-- Audit view: each daemon start, oldest first, from its DAEMON_STARTED event.
--   SELECT * FROM daemon_runs;
CREATE VIEW daemon_runs AS
SELECT e.epoch, json_extract(e.evidence, '$.node') AS node, e.at AS started_at
FROM event e WHERE e.kind = 'DAEMON_STARTED'
ORDER BY e.id;
