//! Domain types and their invariants: operation states and legal transitions, instances, times.
//! No I/O, not async, never reads the clock (the caller passes `now`).

mod instance;
mod operation;
mod problem;
mod role;
mod step;
mod time;

pub use instance::InstantiationState;
pub use operation::{IllegalTransition, LcmOperationType, OperationState};
pub use problem::{FieldProblem, ProblemDetails};
pub use role::Role;
pub use step::StepState;
pub use time::Timestamp;
