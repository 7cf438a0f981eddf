//! Where one stage of an operation's plan is, as the step journal records it.

/// State of a journaled stage (the `step_journal.state` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepState {
    /// Planned, not started (reserved by the schema).
    Pending,
    /// Started; a crash here means the stage runs again (check, then apply).
    Started,
    /// Finished; resume and RETRY never run it again.
    Done,
    /// Not needed (reserved by the schema).
    Skipped,
    /// Failed; RETRY runs it again.
    Failed,
}

impl StepState {
    /// The stored text, e.g. `DONE`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Pending => "PENDING",
            StepState::Started => "STARTED",
            StepState::Done => "DONE",
            StepState::Skipped => "SKIPPED",
            StepState::Failed => "FAILED",
        }
    }

    /// Parses the stored text; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [
            StepState::Pending,
            StepState::Started,
            StepState::Done,
            StepState::Skipped,
            StepState::Failed,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for StepState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
