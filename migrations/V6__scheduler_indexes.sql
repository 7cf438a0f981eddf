-- vnfkeeper state database, schema version 6: partial indexes that keep the scheduler's tick
-- and the service status line independent of how many operations are finished or stuck.
-- Never edit this file once released; add a new V<n>__*.sql instead.
--
-- The queries that use them repeat each index's WHERE term verbatim (SQLite uses a partial index
-- only when a term of the query's WHERE clause is the index's WHERE term).

-- Unfinished operations of each VNF instance in arrival order: the queue; its first entry is the
-- head, the only operation of the instance that may run.
CREATE INDEX op_unfinished ON vnf_lcm_op_occ (vnf_instance_id, seq)
WHERE operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK');

-- Operations the engine can run or resume now (`Engine::is_runnable`): a FAILED_TEMP operation
-- waiting for an operator's RETRY/ROLLBACK is not in it, so such operations cost the tick nothing.
CREATE INDEX op_runnable ON vnf_lcm_op_occ (seq)
WHERE operation_state IN ('STARTING', 'PROCESSING', 'ROLLING_BACK')
   OR (operation_state = 'FAILED_TEMP' AND pending_task IS NOT NULL);

-- TERMINATEs not started yet: the ones that may supersede the operations queued ahead of them.
CREATE INDEX op_terminate_waiting ON vnf_lcm_op_occ (seq)
WHERE operation = 'TERMINATE' AND operation_state = 'STARTING';
