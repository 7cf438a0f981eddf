//! Domain types and their invariants: operation states and legal transitions, pending tasks,
//! instances, intake outcomes, times.
//! No I/O, not async, never reads the clock (the caller passes `now`).

mod event;
mod ids;
mod instance;
mod intake;
mod operation;
pub mod pause;
mod problem;
mod role;
mod step;
mod time;
mod vnfc;

pub use event::EventKind;
pub use ids::{OpOccId, StageKey, VnfInstanceId, VnfcId};
pub use instance::InstantiationState;
pub use intake::IntakeOutcome;
pub use operation::{IllegalTransition, LcmOperationType, OperationState, PendingTask};
pub use pause::{MaintenancePause, PauseScope};
pub use problem::{FieldProblem, ProblemDetails};
pub use role::Role;
pub use step::StepState;
pub use time::Timestamp;
pub use vnfc::{AttachedVolume, VnfcRow};
