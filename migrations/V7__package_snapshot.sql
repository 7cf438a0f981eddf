-- VNF package snapshots (issue 12). At acceptance intake copies the files of the package an
-- INSTANTIATE names into the state directory, content-addressed:
--   <state>/package-store/sha256/<package_sha256>/...
-- and `vnf_package` then holds that snapshot's path: the engine and reconcile read only the copy,
-- never the operator's directory, so a package changed or swapped after acceptance is not used.
-- package_sha256: SHA-256 (64 lowercase hex digits) of the package's file list in `sha256sum`
--                 format, one "<sha256 of content>  <path>\n" per file in path byte order.
-- package_source: the operator's package path (directory or CSAR .zip) as resolved at intake,
--                 for the audit trail only; nothing reads it again.
ALTER TABLE vnf_lcm_op_occ ADD COLUMN package_sha256 TEXT
    CHECK (package_sha256 IS NULL OR (length(package_sha256) = 64 AND package_sha256 NOT GLOB '*[^0-9a-f]*'));
ALTER TABLE vnf_lcm_op_occ ADD COLUMN package_source TEXT;
CREATE INDEX op_by_package ON vnf_lcm_op_occ (package_sha256) WHERE package_sha256 IS NOT NULL;
