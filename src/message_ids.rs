//! The journald `MESSAGE_ID`s of the records an operator alerts on or searches for (systemd
//! catalog style: 128-bit hex, stable across versions). Any module may log with them; the daemon
//! maps the `message_id` field to `MESSAGE_ID`.

/// `MESSAGE_ID` of "request accepted".
pub const MSG_REQUEST_ACCEPTED: &str = "f1f516ae42f74597a8845965bfc74e9d";
/// `MESSAGE_ID` of "request rejected".
pub const MSG_REQUEST_REJECTED: &str = "6051f019d8e14722813e7bb1d60bcd7c";
/// `MESSAGE_ID` of "operation failed".
pub const MSG_OPERATION_FAILED: &str = "b76179fd677b445c9fa2f4b25f1b29c0";
/// `MESSAGE_ID` of "heal started".
pub const MSG_HEAL_STARTED: &str = "88cb856f6c00480f9482cc903f16e290";
/// `MESSAGE_ID` of "heal deferred".
pub const MSG_HEAL_DEFERRED: &str = "33b310679f694452aa170f8f7d921441";
/// `MESSAGE_ID` of "drift detected".
pub const MSG_DRIFT_DETECTED: &str = "640577c813d74a96a81514a1d8c5a8d7";
/// `MESSAGE_ID` of "reconcile alert" (max_unhealthy short-circuit, retry budget used up, storage
/// heal blocked by a Bound PV): an operator must look.
pub const MSG_RECONCILE_ALERT: &str = "c3d1f0a4b7e94f5c9a2e6d8b1f4a7c30";
/// `MESSAGE_ID` of "database refused" (missing while an earlier one left signs, 0 bytes, failing
/// `PRAGMA quick_check`): the daemon exited 78 and an operator must restore a backup.
pub const MSG_DATABASE_REFUSED: &str = "79200eb5844b4909b818b82954dadd8b";
/// `MESSAGE_ID` of "database file removed or replaced while the daemon ran": the daemon stops
/// (exit 1), since what it would write goes to a file nobody will open again.
pub const MSG_DATABASE_LOST: &str = "4a885547d5084fc0848057a8bcd6530b";
/// `MESSAGE_ID` of "maintenance pause ended" (`vnfkeeper resume`, or its `until` reached).
pub const MSG_MAINTENANCE_RESUMED: &str = "1c6d07bb13d3406c9275e74f3ea360b6";
/// `MESSAGE_ID` of "daemon fenced": another daemon raised the daemon epoch of this database (a
/// split brain past the lock and the cluster's fencing); this one exited 79 without writing.
pub const MSG_DAEMON_FENCED: &str = "0d5b6f3e2a9c4b7e8f1d2c3b4a596877";
