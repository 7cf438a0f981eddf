//! LCM operation occurrences: operation types, the `operationState` machine of SOL003 §5.6.2.2,
//! and the task operations (RETRY, ROLLBACK) that wait for the engine.

use std::fmt;

/// The LCM operations vnfkeeper runs (SOL003 §5.5.4.5 `LcmOperationType`, subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LcmOperationType {
    /// Create the stack and configure the cluster.
    Instantiate,
    /// SCALE_OUT / SCALE_IN of an aspect.
    Scale,
    /// Replace VNFCs (one, several, or the whole VNF) and reconfigure them.
    Heal,
    /// Delete the stack; the instance becomes `NOT_INSTANTIATED`.
    Terminate,
    /// Move the external CPs of the VNFCs to other networks or addresses; the servers stay
    /// (SOL003 §5.4.11 ChangeExtVnfConnectivityRequest).
    ChangeExtConn,
}

impl LcmOperationType {
    /// The SOL003 spelling, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Instantiate => "INSTANTIATE",
            Self::Scale => "SCALE",
            Self::Heal => "HEAL",
            Self::Terminate => "TERMINATE",
            Self::ChangeExtConn => "CHANGE_EXT_CONN",
        }
    }

    /// Parses the SOL003 spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "INSTANTIATE" => Some(Self::Instantiate),
            "SCALE" => Some(Self::Scale),
            "HEAL" => Some(Self::Heal),
            "TERMINATE" => Some(Self::Terminate),
            "CHANGE_EXT_CONN" => Some(Self::ChangeExtConn),
            _ => None,
        }
    }
}

impl fmt::Display for LcmOperationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `operationState` of a VnfLcmOpOcc (SOL003 §5.5.4.3 `LcmOperationStateType`).
///
/// Legal transitions (SOL003 Figure 5.6.2.2-1):
/// `STARTING → PROCESSING → COMPLETED`, `PROCESSING → FAILED_TEMP`,
/// `FAILED_TEMP → PROCESSING` (retry), `FAILED_TEMP → FAILED` (fail),
/// `FAILED_TEMP → ROLLING_BACK → ROLLED_BACK`, `ROLLING_BACK → FAILED_TEMP`,
/// and `STARTING → FAILED_TEMP` when the operation cannot even start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationState {
    /// Accepted and waiting for its turn (or for a cloud).
    Starting,
    /// Steps are running.
    Processing,
    /// All steps done. Final.
    Completed,
    /// A step failed; waits for RETRY, FAIL or ROLLBACK.
    FailedTemp,
    /// Given up by FAIL. Final.
    Failed,
    /// Undoing what the operation created.
    RollingBack,
    /// Undone. Final.
    RolledBack,
}

/// An attempted transition that the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal operation state transition {from} -> {to}")]
pub struct IllegalTransition {
    /// State the occurrence is in.
    pub from: OperationState,
    /// State that was requested.
    pub to: OperationState,
}

impl OperationState {
    /// All states, in lifecycle order.
    pub const ALL: [Self; 7] = [
        Self::Starting,
        Self::Processing,
        Self::Completed,
        Self::FailedTemp,
        Self::Failed,
        Self::RollingBack,
        Self::RolledBack,
    ];

    /// The SOL003 spelling, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "STARTING",
            Self::Processing => "PROCESSING",
            Self::Completed => "COMPLETED",
            Self::FailedTemp => "FAILED_TEMP",
            Self::Failed => "FAILED",
            Self::RollingBack => "ROLLING_BACK",
            Self::RolledBack => "ROLLED_BACK",
        }
    }

    /// Parses the SOL003 spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Final states never change again; an operation in one no longer blocks its VNF instance.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::RolledBack)
    }

    /// Whether the machine allows `self → to`.
    pub fn can_become(self, to: Self) -> bool {
        use OperationState::*;
        matches!(
            (self, to),
            (Starting, Processing)
                | (Starting, FailedTemp)
                | (Processing, Completed)
                | (Processing, FailedTemp)
                | (FailedTemp, Processing)
                | (FailedTemp, Failed)
                | (FailedTemp, RollingBack)
                | (RollingBack, RolledBack)
                | (RollingBack, FailedTemp)
        )
    }

    /// Returns `to` if the transition is legal. Errors: [`IllegalTransition`].
    pub fn transition(self, to: Self) -> Result<Self, IllegalTransition> {
        if self.can_become(to) {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self, to })
        }
    }
}

impl fmt::Display for OperationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task operation waiting for the engine on an occurrence in `FAILED_TEMP` (stored in
/// `vnf_lcm_op_occ.pending_task`). FAIL is not one: it is a state change done at intake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PendingTask {
    /// Retry operation task (SOL003 §5.4.14): resume at the failed step (`FAILED_TEMP →
    /// PROCESSING`).
    Retry,
    /// Rollback operation task (SOL003 §5.4.15): undo what the operation created
    /// (`FAILED_TEMP → ROLLING_BACK`).
    Rollback,
}

impl PendingTask {
    /// The stored spelling: `RETRY` or `ROLLBACK`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "RETRY",
            Self::Rollback => "ROLLBACK",
        }
    }

    /// Parses the stored spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "RETRY" => Some(Self::Retry),
            "ROLLBACK" => Some(Self::Rollback),
            _ => None,
        }
    }
}

impl fmt::Display for PendingTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::OperationState::*;
    use super::*;

    #[test]
    fn spelling_round_trips() {
        for st in OperationState::ALL {
            assert_eq!(OperationState::parse(st.as_str()), Some(st));
        }
        assert_eq!(OperationState::parse("starting"), None);
        for op in ["INSTANTIATE", "SCALE", "HEAL", "TERMINATE"] {
            assert_eq!(LcmOperationType::parse(op).unwrap().as_str(), op);
        }
        for t in [PendingTask::Retry, PendingTask::Rollback] {
            assert_eq!(PendingTask::parse(t.as_str()), Some(t));
        }
        assert_eq!(PendingTask::parse("FAIL"), None);
    }

    #[test]
    fn final_states_have_no_way_out() {
        for from in OperationState::ALL.into_iter().filter(|s| s.is_final()) {
            for to in OperationState::ALL {
                assert!(from.transition(to).is_err(), "{from} -> {to}");
            }
        }
    }

    #[test]
    fn happy_path_retry_and_rollback_are_legal() {
        let path = [Starting, Processing, FailedTemp, Processing, Completed];
        for w in path.windows(2) {
            assert_eq!(w[0].transition(w[1]), Ok(w[1]));
        }
        assert!(FailedTemp.can_become(RollingBack) && RollingBack.can_become(RolledBack));
        assert!(FailedTemp.can_become(Failed));
        assert!(!Starting.can_become(Completed));
        assert!(!Processing.can_become(RolledBack));
        assert_eq!(
            Completed.transition(Processing),
            Err(IllegalTransition {
                from: Completed,
                to: Processing
            })
        );
    }
}
