-- Keyed digests of request files.
--
-- `intake.content_sha256` and the spool's `<copy>.sha256` sidecars held the plain SHA-256 of the
-- file as received, secrets included: with the redacted copy beside it, a reader could test
-- guesses of the passwords offline. From this version both hold `hmac-sha256:<hex>`, the
-- HMAC-SHA256 of the file's SHA-256 under a key derived from `secrets.key` (readable by the
-- daemon's user only). The daemon converts the plain values of `intake` (and the sidecars) at
-- start, with the key this SQL cannot see; rows written from now on are keyed.
--
-- The events of accepted and duplicate requests repeated the plain digest in their evidence
-- (`$.sha256`); it is removed here, as the evidence's `intakeId` names the intake row that
-- keeps the keyed digest. `event` is append-only: its triggers are dropped for this one
-- update and made again exactly as V1 made them.
DROP TRIGGER event_append_only_update;
DROP TRIGGER event_append_only_delete;

UPDATE event SET evidence = json_remove(evidence, '$.sha256')
WHERE json_valid(evidence)
  AND json_type(evidence, '$.sha256') = 'text'
  AND json_type(evidence, '$.intakeId') IS NOT NULL;

CREATE TRIGGER event_append_only_update BEFORE UPDATE ON event
BEGIN SELECT RAISE(ABORT, 'event is append-only'); END;
CREATE TRIGGER event_append_only_delete BEFORE DELETE ON event
BEGIN SELECT RAISE(ABORT, 'event is append-only'); END;
