//! The kinds of audit events: one closed set, stored in `event.kind` as the upper-case names
//! operators query (`WHERE kind = 'REQUEST_ACCEPTED'`) and README's audit section lists.

use std::fmt;

/// The kind of one row of the append-only `event` table. Stored and shown as
/// [`EventKind::as_str`]; [`EventKind::parse`] reads the stored form back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A request file was accepted: an operation was queued (intake).
    RequestAccepted,
    /// A request file was refused with its ProblemDetails (intake).
    RequestRejected,
    /// A request file repeated an accepted `requestId` with the same body (intake).
    RequestDuplicate,
    /// A task envelope (RETRY, FAIL, ROLLBACK) was accepted (intake).
    TaskAccepted,
    /// An operation changed state (SOL003 §5.6.2.2 `LcmOperationStateType`).
    StateChanged,
    /// The adjusted HOT of individual VNFC management was computed and stored.
    HotAdjusted,
    /// A terminated VNF's rows were retired.
    VnfRetired,
    /// A server's SSH host key was pinned on first contact.
    HostKeyPinned,
    /// An operator cleared a VNFC's pinned host key (`vnfkeeper host-key forget`).
    HostKeyForgotten,
    /// A maintenance pause was set or replaced.
    MaintenancePaused,
    /// A maintenance pause was lifted or expired.
    MaintenanceResumed,
    /// Companion mode: a Tacker operation occurrence was adopted as an operation.
    TackerOperationAdopted,
    /// Companion mode: a Tacker operation occurrence was refused with its reason.
    TackerOperationRefused,
    /// Companion mode: reconcile's HEAL was sent to Tacker.
    TackerHealSent,
    /// Companion mode: Tacker did not start the HEAL it was sent.
    TackerHealNotStarted,
    /// Companion mode: Tacker's HEAL completed.
    TackerHealCompleted,
    /// Companion mode: vnfkeeper's MgmtDriver script sent a hook of a running Tacker operation
    /// (`heal_start`, …) and vnfkeeper queued the operation that runs it.
    TackerHookReceived,
    /// Companion mode: the cluster was registered with Tacker as a Kubernetes VIM (or found
    /// registered), after a Tacker INSTANTIATE.
    TackerVimRegistered,
    /// Companion mode: the Kubernetes VIM was not registered with, or not removed from, Tacker;
    /// the message says why (no VIM facts kept, …).
    TackerVimSkipped,
    /// Companion mode: the Kubernetes VIM was removed from Tacker (or found gone) after
    /// Tacker's TERMINATE.
    TackerVimRemoved,
    /// Reconcile queued a HEAL.
    ReconcileHealStarted,
    /// Reconcile found configuration drift and queued its repair.
    ReconcileDriftDetected,
    /// Reconcile could not tell a VNFC's health (API or SSH failure): nothing done.
    ReconcileDeferredUnknown,
    /// Reconcile saw a fault inside its grace period: nothing done yet.
    ReconcileDeferredGrace,
    /// Reconcile's back-off after a failed heal holds the next one.
    ReconcileDeferredBackoff,
    /// Reconcile found an operation of the VNF unfinished: nothing queued.
    ReconcileInFlight,
    /// Reconcile stopped healing a VNF whose heals keep failing (alert).
    ReconcileShortCircuit,
    /// Reconcile's heal budget is used up (alert).
    ReconcileBudgetExhausted,
    /// A storage-server heal is held while a PersistentVolume is Bound (alert).
    ReconcilePvBoundBlock,
    /// Reconcile is held by a maintenance pause.
    ReconcilePaused,
    /// A server rebuild reconcile would start is one the VNF's flavour refuses (alert).
    ReconcileRebuildRefused,
    /// A daemon started and raised the daemon epoch (its evidence: `epoch`, `node`); rows it
    /// writes carry that epoch.
    DaemonStarted,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 32] = [
        EventKind::RequestAccepted,
        EventKind::RequestRejected,
        EventKind::RequestDuplicate,
        EventKind::TaskAccepted,
        EventKind::StateChanged,
        EventKind::HotAdjusted,
        EventKind::VnfRetired,
        EventKind::HostKeyPinned,
        EventKind::HostKeyForgotten,
        EventKind::MaintenancePaused,
        EventKind::MaintenanceResumed,
        EventKind::TackerOperationAdopted,
        EventKind::TackerOperationRefused,
        EventKind::TackerHealSent,
        EventKind::TackerHealNotStarted,
        EventKind::TackerHealCompleted,
        EventKind::TackerHookReceived,
        EventKind::TackerVimRegistered,
        EventKind::TackerVimSkipped,
        EventKind::TackerVimRemoved,
        EventKind::ReconcileHealStarted,
        EventKind::ReconcileDriftDetected,
        EventKind::ReconcileDeferredUnknown,
        EventKind::ReconcileDeferredGrace,
        EventKind::ReconcileDeferredBackoff,
        EventKind::ReconcileInFlight,
        EventKind::ReconcileShortCircuit,
        EventKind::ReconcileBudgetExhausted,
        EventKind::ReconcilePvBoundBlock,
        EventKind::ReconcilePaused,
        EventKind::ReconcileRebuildRefused,
        EventKind::DaemonStarted,
    ];

    /// The stored form, e.g. `REQUEST_ACCEPTED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RequestAccepted => "REQUEST_ACCEPTED",
            EventKind::RequestRejected => "REQUEST_REJECTED",
            EventKind::RequestDuplicate => "REQUEST_DUPLICATE",
            EventKind::TaskAccepted => "TASK_ACCEPTED",
            EventKind::StateChanged => "STATE_CHANGED",
            EventKind::HotAdjusted => "HOT_ADJUSTED",
            EventKind::VnfRetired => "VNF_RETIRED",
            EventKind::HostKeyPinned => "HOST_KEY_PINNED",
            EventKind::HostKeyForgotten => "HOST_KEY_FORGOTTEN",
            EventKind::MaintenancePaused => "MAINTENANCE_PAUSED",
            EventKind::MaintenanceResumed => "MAINTENANCE_RESUMED",
            EventKind::TackerOperationAdopted => "TACKER_OPERATION_ADOPTED",
            EventKind::TackerOperationRefused => "TACKER_OPERATION_REFUSED",
            EventKind::TackerHealSent => "TACKER_HEAL_SENT",
            EventKind::TackerHealNotStarted => "TACKER_HEAL_NOT_STARTED",
            EventKind::TackerHealCompleted => "TACKER_HEAL_COMPLETED",
            EventKind::TackerHookReceived => "TACKER_HOOK_RECEIVED",
            EventKind::TackerVimRegistered => "TACKER_VIM_REGISTERED",
            EventKind::TackerVimSkipped => "TACKER_VIM_SKIPPED",
            EventKind::TackerVimRemoved => "TACKER_VIM_REMOVED",
            EventKind::ReconcileHealStarted => "RECONCILE_HEAL_STARTED",
            EventKind::ReconcileDriftDetected => "RECONCILE_DRIFT_DETECTED",
            EventKind::ReconcileDeferredUnknown => "RECONCILE_DEFERRED_UNKNOWN",
            EventKind::ReconcileDeferredGrace => "RECONCILE_DEFERRED_GRACE",
            EventKind::ReconcileDeferredBackoff => "RECONCILE_DEFERRED_BACKOFF",
            EventKind::ReconcileInFlight => "RECONCILE_IN_FLIGHT",
            EventKind::ReconcileShortCircuit => "RECONCILE_SHORT_CIRCUIT",
            EventKind::ReconcileBudgetExhausted => "RECONCILE_BUDGET_EXHAUSTED",
            EventKind::ReconcilePvBoundBlock => "RECONCILE_PV_BOUND_BLOCK",
            EventKind::ReconcilePaused => "RECONCILE_PAUSED",
            EventKind::ReconcileRebuildRefused => "RECONCILE_REBUILD_REFUSED",
            EventKind::DaemonStarted => "DAEMON_STARTED",
        }
    }

    /// Parses the stored form; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The kinds written in the same transaction as an intake row.
    pub fn is_request(self) -> bool {
        matches!(
            self,
            EventKind::RequestAccepted
                | EventKind::RequestDuplicate
                | EventKind::RequestRejected
                | EventKind::TaskAccepted
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_stored_form_and_the_forms_are_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            assert!(seen.insert(k.as_str()), "{k} twice");
        }
        assert_eq!(EventKind::parse("request_accepted"), None);
    }
}
