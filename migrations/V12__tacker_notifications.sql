-- vnfkeeper state database: LCM notifications received from Tacker (companion mode).
--
-- One row per notification Tacker's `/vnflcm/v2` sent to the `[tacker]` endpoint, committed
-- before the endpoint answers 204 (SOL013 §8: the 204 tells Tacker it was delivered). Only the
-- checked fields are kept, never the body (an operation's `changedInfo` may carry
-- `vimConnectionInfo` with credentials). A duplicate — the same `id`, or for an operation
-- occurrence the same `vnf_lcm_op_occ_id` and `operation_state` — is recorded once.
-- Never edit this file once released; add a later V*__*.sql instead.
CREATE TABLE tacker_notification (
    id                      TEXT PRIMARY KEY,  -- the notification's `id`
    received_at             TEXT NOT NULL,     -- RFC 3339 UTC, vnfkeeper's clock
    notification_type       TEXT NOT NULL,     -- VnfLcmOperationOccurrenceNotification, VnfIdentifier{Creation,Deletion}Notification
    subscription_id         TEXT NOT NULL,
    time_stamp              TEXT NOT NULL,     -- RFC 3339 UTC, Tacker's `timeStamp`
    vnf_instance_id         TEXT NOT NULL,     -- Tacker's vnfInstanceId
    vnf_lcm_op_occ_id       TEXT,              -- operation occurrences only
    operation               TEXT,
    operation_state         TEXT,
    notification_status     TEXT,              -- START, RESULT
    is_automatic_invocation INTEGER            -- 0/1
);
CREATE UNIQUE INDEX tacker_notification_by_occurrence_state
    ON tacker_notification (vnf_lcm_op_occ_id, operation_state)
    WHERE vnf_lcm_op_occ_id IS NOT NULL;
CREATE INDEX tacker_notification_by_instance ON tacker_notification (vnf_instance_id);
