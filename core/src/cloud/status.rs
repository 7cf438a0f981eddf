//! Heat stack statuses as a type, so waits and checks name a status instead of comparing text.
//!
//! Heat shows `stack_status` as `<ACTION>_<STATE>` (Heat API v1 "Show stack details",
//! `stack_status`): actions `INIT`, `CREATE`, `DELETE`, `UPDATE`, `ROLLBACK`, `SUSPEND`,
//! `RESUME`, `ADOPT`, `SNAPSHOT`, `CHECK`; states `IN_PROGRESS`, `FAILED`, `COMPLETE` (the
//! `ACTIONS` and `STATUSES` of Heat's `heat.engine.status`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Defines [`StackStatus`] with one variant per spelling, and `as_str`/`parse` from the same list.
macro_rules! stack_statuses {
    ($($variant:ident = $text:literal,)*) => {
        /// A Heat `stack_status`. Build it with [`StackStatus::parse`] (or `From`), which maps
        /// every spelling listed here to its variant, so a known status is never [`Self::Other`].
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum StackStatus {
            $(
                #[doc = concat!("`", $text, "`.")]
                $variant,
            )*
            /// A status not listed above, as Heat spelled it (empty: Heat gave none).
            Other(String),
        }

        impl StackStatus {
            /// Heat's spelling, e.g. `CREATE_COMPLETE`.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Other(s) => s,
                }
            }

            /// The status spelled `s`; [`Self::Other`] for a spelling not listed.
            pub fn parse(s: &str) -> Self {
                match s {
                    $($text => Self::$variant,)*
                    other => Self::Other(other.to_owned()),
                }
            }
        }
    };
}

stack_statuses! {
    InitInProgress = "INIT_IN_PROGRESS",
    InitFailed = "INIT_FAILED",
    InitComplete = "INIT_COMPLETE",
    CreateInProgress = "CREATE_IN_PROGRESS",
    CreateFailed = "CREATE_FAILED",
    CreateComplete = "CREATE_COMPLETE",
    DeleteInProgress = "DELETE_IN_PROGRESS",
    DeleteFailed = "DELETE_FAILED",
    DeleteComplete = "DELETE_COMPLETE",
    UpdateInProgress = "UPDATE_IN_PROGRESS",
    UpdateFailed = "UPDATE_FAILED",
    UpdateComplete = "UPDATE_COMPLETE",
    RollbackInProgress = "ROLLBACK_IN_PROGRESS",
    RollbackFailed = "ROLLBACK_FAILED",
    RollbackComplete = "ROLLBACK_COMPLETE",
    SuspendInProgress = "SUSPEND_IN_PROGRESS",
    SuspendFailed = "SUSPEND_FAILED",
    SuspendComplete = "SUSPEND_COMPLETE",
    ResumeInProgress = "RESUME_IN_PROGRESS",
    ResumeFailed = "RESUME_FAILED",
    ResumeComplete = "RESUME_COMPLETE",
    AdoptInProgress = "ADOPT_IN_PROGRESS",
    AdoptFailed = "ADOPT_FAILED",
    AdoptComplete = "ADOPT_COMPLETE",
    SnapshotInProgress = "SNAPSHOT_IN_PROGRESS",
    SnapshotFailed = "SNAPSHOT_FAILED",
    SnapshotComplete = "SNAPSHOT_COMPLETE",
    CheckInProgress = "CHECK_IN_PROGRESS",
    CheckFailed = "CHECK_FAILED",
    CheckComplete = "CHECK_COMPLETE",
}

impl StackStatus {
    /// True while an action runs (`*_IN_PROGRESS`).
    pub fn is_in_progress(&self) -> bool {
        self.as_str().ends_with("_IN_PROGRESS")
    }

    /// True for `*_FAILED` and for `ROLLBACK_COMPLETE` (a rollback means the action failed).
    pub fn is_failed(&self) -> bool {
        self.as_str().ends_with("_FAILED") || *self == Self::RollbackComplete
    }
}

impl Default for StackStatus {
    /// `Other("")`: no status given.
    fn default() -> Self {
        Self::Other(String::new())
    }
}

impl From<String> for StackStatus {
    fn from(s: String) -> Self {
        Self::parse(&s)
    }
}

impl From<&str> for StackStatus {
    fn from(s: &str) -> Self {
        Self::parse(s)
    }
}

impl From<StackStatus> for String {
    fn from(s: StackStatus) -> Self {
        match s {
            StackStatus::Other(text) => text,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for StackStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::StackStatus;

    #[test]
    fn spellings_round_trip_and_unknown_ones_are_kept() {
        for s in [
            "CREATE_COMPLETE",
            "UPDATE_IN_PROGRESS",
            "CHECK_FAILED",
            "INIT_COMPLETE",
        ] {
            let st = StackStatus::parse(s);
            assert!(!matches!(st, StackStatus::Other(_)), "{s}");
            assert_eq!(st.as_str(), s);
        }
        assert_eq!(
            StackStatus::parse("DELETE_COMPLETE"),
            StackStatus::DeleteComplete
        );
        let odd = StackStatus::parse("RESTORE_COMPLETE");
        assert_eq!(odd, StackStatus::Other("RESTORE_COMPLETE".into()));
        assert_eq!(odd.to_string(), "RESTORE_COMPLETE");
        let json: StackStatus = serde_json::from_str("\"UPDATE_FAILED\"").unwrap();
        assert_eq!(json, StackStatus::UpdateFailed);
        assert_eq!(serde_json::to_string(&json).unwrap(), "\"UPDATE_FAILED\"");
    }

    #[test]
    fn failure_and_progress() {
        assert!(StackStatus::CreateFailed.is_failed());
        assert!(StackStatus::RollbackComplete.is_failed());
        assert!(StackStatus::parse("RESTORE_FAILED").is_failed());
        assert!(!StackStatus::UpdateComplete.is_failed());
        assert!(StackStatus::RollbackInProgress.is_in_progress());
        assert!(!StackStatus::default().is_in_progress());
    }
}
