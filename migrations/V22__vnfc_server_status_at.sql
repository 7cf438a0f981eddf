-- vnfkeeper state database: when a VNFC's Nova status (`vnfc.server_status`) was last read.
-- The engine records it with the server; reconcile's passes (cloud-only passes included) store
-- a status that changed, for the server still recorded, without touching `updated_at` (which
-- stays the time the current server was recorded: reconcile's start-up grace counts from it).
-- NULL on rows written before this migration until the next read.
-- Never edit this file once released; add V23__*.sql instead.
ALTER TABLE vnfc ADD COLUMN server_status_at TEXT;
