-- Secrets at rest: request bodies are stored with every secret value replaced by "***"; the
-- secrets themselves are kept here, encrypted with AES-256-GCM under the key in the state
-- directory (`secrets.key`, or the systemd credential `secrets.key`):
--   12-byte random nonce || ciphertext and 16-byte tag of the JSON object {pointer: value}
-- (RFC 6901 pointers into `operation_params`); associated data: the row's `id`.
-- NULL: the body holds no secret. X'' (only rows written before this migration): the body is
-- still plaintext; the daemon converts such rows once at start-up.
ALTER TABLE vnf_lcm_op_occ ADD COLUMN operation_secrets BLOB;
UPDATE vnf_lcm_op_occ SET operation_secrets = X'';
