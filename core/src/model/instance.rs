//! VNF instance state (SOL003 §5.5.2.2 `instantiationState`).

/// Whether a VNF instance currently has resources (SOL003 `InstantiationState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstantiationState {
    /// Known (created by an INSTANTIATE request or left by TERMINATE) but without resources.
    NotInstantiated,
    /// Instantiated: its stack and VNFCs exist.
    Instantiated,
}

impl InstantiationState {
    /// The SOL003 spelling, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotInstantiated => "NOT_INSTANTIATED",
            Self::Instantiated => "INSTANTIATED",
        }
    }

    /// Parses the SOL003 spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NOT_INSTANTIATED" => Some(Self::NotInstantiated),
            "INSTANTIATED" => Some(Self::Instantiated),
            _ => None,
        }
    }
}

use super::LcmOperationType;

impl InstantiationState {
    /// The state the instance will be in once `queued` (its unfinished operations, in arrival
    /// order) have all completed: INSTANTIATE leaves it `INSTANTIATED`, TERMINATE
    /// `NOT_INSTANTIATED`, SCALE and HEAL do not change it. Intake validates a new request
    /// against this state, so that "instantiate, then scale" can be submitted back to back.
    pub fn after(self, queued: impl IntoIterator<Item = LcmOperationType>) -> Self {
        queued.into_iter().fold(self, |state, op| match op {
            LcmOperationType::Instantiate => Self::Instantiated,
            LcmOperationType::Terminate => Self::NotInstantiated,
            LcmOperationType::Scale | LcmOperationType::Heal | LcmOperationType::ChangeExtConn => {
                state
            }
        })
    }

    /// Which operations may be requested of an instance in this state: INSTANTIATE only when
    /// `NOT_INSTANTIATED`, SCALE/HEAL/TERMINATE/CHANGE_EXT_CONN only when `INSTANTIATED` (SOL003
    /// §5.4.4–5.4.8, §5.4.11).
    pub fn allows(self, op: LcmOperationType) -> bool {
        match op {
            LcmOperationType::Instantiate => self == Self::NotInstantiated,
            _ => self == Self::Instantiated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InstantiationState::*;
    use super::LcmOperationType::*;

    #[test]
    fn queued_operations_decide_what_may_follow() {
        assert_eq!(NotInstantiated.after([Instantiate, Scale]), Instantiated);
        assert_eq!(Instantiated.after([Heal, Terminate]), NotInstantiated);
        assert_eq!(Instantiated.after([]), Instantiated);
        assert!(NotInstantiated.after([Instantiate]).allows(Scale));
        assert!(!NotInstantiated.allows(Heal));
        assert!(!Instantiated.allows(Instantiate));
        assert!(Instantiated.after([Terminate]).allows(Instantiate));
    }
}
