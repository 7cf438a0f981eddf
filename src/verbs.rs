//! Task verbs: `vnfkeeper retry|fail|rollback OP_ID`, `heal VNF [VNFC…]`, `scale VNF ASPECT
//! out|in`, `terminate VNF`. Each builds the SOL003 envelope ([`Verb::envelope`]), submits it
//! through the spool exactly as `vnfkeeper submit` does (so intake's validation, admission and
//! audit apply), waits for intake's outcome to print the operation id, and with `--wait`
//! follows the operation to a state where it stops ([`follow`]); the exit status says how it
//! ended ([`exit_code`]).

use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};

use crate::config::Settings;
use crate::intake::spool::Spool;
use crate::store::{OperationRow, Store};

use vnfkeeper_core::model::{IntakeOutcome, OpOccId, OperationState, Timestamp};

/// Exit status when the operation stopped in `FAILED_TEMP` (an operator decides: `retry`,
/// `fail` or `rollback`).
pub const EXIT_FAILED_TEMP: u8 = 3;
/// Exit status when the operation ended `FAILED` (other than through `fail`).
pub const EXIT_FAILED: u8 = 4;
/// Exit status when the operation ended `ROLLED_BACK` (other than through `rollback`).
pub const EXIT_ROLLED_BACK: u8 = 5;
/// Exit status when intake rejected the request (the reason is printed).
pub const EXIT_REJECTED: u8 = 6;
/// Exit status when `--timeout` ran out before the operation stopped (it goes on; the last
/// state seen is printed).
pub const EXIT_TIMEOUT: u8 = 7;

/// How long to wait for intake to record the submitted file before giving up (the daemon
/// normally takes it within a second).
const INTAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long nobody may hold the daemon's state lock before the wait for intake gives up early:
/// no daemon runs on this state, so none will take the file (longer than systemd's
/// `RestartSec=5s` plus a start, so a daemon being restarted is waited for).
const NO_DAEMON_GRACE: Duration = Duration::from_secs(10);

/// `vnfkeeper retry|fail|rollback|heal|scale|terminate` arguments (the `--config` option comes
/// from `cli.rs`).
#[derive(Debug, clap::Subcommand)]
pub enum VerbCommand {
    /// RETRY an operation in FAILED_TEMP (SOL003 §5.4.14): resume at the failed step.
    Retry(TaskArgs),
    /// FAIL an operation in FAILED_TEMP (SOL003 §5.4.16): end it as FAILED.
    Fail(TaskArgs),
    /// ROLLBACK an operation in FAILED_TEMP (SOL003 §5.4.15): undo what it created.
    Rollback(TaskArgs),
    /// HEAL VNFCs of a VNF instance (all of it when no VNFC is named).
    Heal {
        /// vnfInstanceId.
        vnf_instance_id: String,
        /// vnfcInstanceId of each VNFC to heal (as `vnfkeeper status` lists them).
        vnfc_ids: Vec<String>,
        /// Why (HealVnfRequest `cause`).
        #[arg(long)]
        cause: Option<String>,
        /// Follow the operation.
        #[command(flatten)]
        wait: WaitArg,
        /// Configuration file (`spool_dir`, `database`).
        #[command(flatten)]
        config: crate::config::ConfigArg,
    },
    /// SCALE a VNF instance's aspect out or in.
    Scale {
        /// vnfInstanceId.
        vnf_instance_id: String,
        /// aspectId (from the VNFD).
        aspect_id: String,
        /// `out` or `in`.
        direction: Direction,
        /// numberOfSteps.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        steps: u32,
        /// Follow the operation.
        #[command(flatten)]
        wait: WaitArg,
        /// Configuration file (`spool_dir`, `database`).
        #[command(flatten)]
        config: crate::config::ConfigArg,
    },
    /// TERMINATE a VNF instance (FORCEFUL, or GRACEFUL with --graceful).
    Terminate {
        /// vnfInstanceId.
        vnf_instance_id: String,
        /// GRACEFUL with this gracefulTerminationTimeout, in seconds.
        #[arg(long)]
        graceful: Option<u32>,
        /// Follow the operation.
        #[command(flatten)]
        wait: WaitArg,
        /// Configuration file (`spool_dir`, `database`).
        #[command(flatten)]
        config: crate::config::ConfigArg,
    },
}

/// SCALE direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// SCALE_OUT.
    Out,
    /// SCALE_IN.
    In,
}

/// A task verb's arguments.
#[derive(Debug, clap::Args)]
pub struct TaskArgs {
    /// vnfLcmOpOccId (as `vnfkeeper ops` lists it).
    pub vnf_lcm_op_occ_id: String,
    /// Follow the operation.
    #[command(flatten)]
    pub wait: WaitArg,
    /// Configuration file (`spool_dir`, `database`).
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

/// `--wait [--timeout SECONDS]`.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct WaitArg {
    /// Follow the operation until it ends or stops in FAILED_TEMP; the exit status says how:
    /// 0 as asked, 3 FAILED_TEMP, 4 FAILED, 5 ROLLED_BACK, 6 request rejected, 7 timed out.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: stop following after this many seconds and exit 7 (the operation itself
    /// goes on). Without it, --wait follows for as long as the operation runs.
    #[arg(long, value_name = "SECONDS", requires = "wait",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
}

impl WaitArg {
    /// How long to follow: `None` when not following, `Some(None)` without a limit.
    pub fn follow_for(self) -> Option<Option<Duration>> {
        self.wait.then(|| self.timeout.map(Duration::from_secs))
    }
}

impl VerbCommand {
    /// The request, whether and how long to follow it, and the configuration file.
    pub fn verb(self) -> (Verb, WaitArg, std::path::PathBuf) {
        match self {
            VerbCommand::Retry(t) => (
                Verb::Task("RETRY", t.vnf_lcm_op_occ_id),
                t.wait,
                t.config.config,
            ),
            VerbCommand::Fail(t) => (
                Verb::Task("FAIL", t.vnf_lcm_op_occ_id),
                t.wait,
                t.config.config,
            ),
            VerbCommand::Rollback(t) => (
                Verb::Task("ROLLBACK", t.vnf_lcm_op_occ_id),
                t.wait,
                t.config.config,
            ),
            VerbCommand::Heal {
                vnf_instance_id,
                vnfc_ids,
                cause,
                wait,
                config,
            } => (
                Verb::Heal(vnf_instance_id, vnfc_ids, cause),
                wait,
                config.config,
            ),
            VerbCommand::Scale {
                vnf_instance_id,
                aspect_id,
                direction,
                steps,
                wait,
                config,
            } => (
                Verb::Scale(
                    vnf_instance_id,
                    aspect_id,
                    direction == Direction::Out,
                    steps,
                ),
                wait,
                config.config,
            ),
            VerbCommand::Terminate {
                vnf_instance_id,
                graceful,
                wait,
                config,
            } => (
                Verb::Terminate(vnf_instance_id, graceful),
                wait,
                config.config,
            ),
        }
    }
}

/// A request the CLI builds.
#[derive(Debug, Clone, PartialEq)]
pub enum Verb {
    /// SOL003 §5.4.14 RETRY / §5.4.15 ROLLBACK / §5.4.16 FAIL of an occurrence in FAILED_TEMP:
    /// `"RETRY"`, `"ROLLBACK"` or `"FAIL"`, and the vnfLcmOpOccId.
    Task(&'static str, String),
    /// HealVnfRequest (SOL003 §5.5.2.9; `vnfcInstanceId` as SOL002): VNF, VNFCs (empty: the
    /// whole VNF as the flavour heals it), cause.
    Heal(String, Vec<String>, Option<String>),
    /// ScaleVnfRequest (SOL003 §5.5.2.5): VNF, aspectId, out (true) or in, numberOfSteps.
    Scale(String, String, bool, u32),
    /// TerminateVnfRequest (SOL003 §5.5.2.8): VNF, `None` FORCEFUL, or GRACEFUL with
    /// `gracefulTerminationTimeout` in seconds.
    Terminate(String, Option<u32>),
}

impl Verb {
    /// The spool envelope: `{"operation", "vnfInstanceId", "requestId", "request"}` or, for a
    /// task, `{"operation", "vnfLcmOpOccId", "requestId"}`. `request_id` makes each command a
    /// request of its own: the same command typed twice is two requests, where two identical
    /// files would be one (intake's duplicate detection by content).
    pub fn envelope(&self, request_id: &str) -> Value {
        let mut env = match self {
            Verb::Task(op, id) => json!({"operation": op, "vnfLcmOpOccId": id}),
            Verb::Heal(vnf, vnfcs, cause) => {
                let mut r = json!({});
                if !vnfcs.is_empty() {
                    r["vnfcInstanceId"] = json!(vnfcs);
                }
                if let Some(c) = cause {
                    r["cause"] = json!(c);
                }
                json!({"operation": "HEAL", "vnfInstanceId": vnf, "request": r})
            }
            Verb::Scale(vnf, aspect, out, steps) => json!({
                "operation": "SCALE", "vnfInstanceId": vnf,
                "request": {"type": if *out { "SCALE_OUT" } else { "SCALE_IN" },
                            "aspectId": aspect, "numberOfSteps": steps},
            }),
            Verb::Terminate(vnf, graceful) => {
                let r = match graceful {
                    None => json!({"terminationType": "FORCEFUL"}),
                    Some(s) => json!({"terminationType": "GRACEFUL",
                                      "gracefulTerminationTimeout": s}),
                };
                json!({"operation": "TERMINATE", "vnfInstanceId": vnf, "request": r})
            }
        };
        env["requestId"] = json!(request_id);
        env
    }

    /// The state that counts as success: FAILED for `fail`, ROLLED_BACK for `rollback`,
    /// COMPLETED otherwise.
    fn goal(&self) -> OperationState {
        match self {
            Verb::Task("FAIL", _) => OperationState::Failed,
            Verb::Task("ROLLBACK", _) => OperationState::RolledBack,
            _ => OperationState::Completed,
        }
    }
}

/// Exit status for an operation that stopped in `state` when `goal` was wanted: 0 for the
/// goal, else [`EXIT_FAILED_TEMP`], [`EXIT_FAILED`], [`EXIT_ROLLED_BACK`] (1 for any other).
pub fn exit_code(state: OperationState, goal: OperationState) -> u8 {
    match state {
        s if s == goal => 0,
        OperationState::FailedTemp => EXIT_FAILED_TEMP,
        OperationState::Failed => EXIT_FAILED,
        OperationState::RolledBack => EXIT_ROLLED_BACK,
        _ => 1,
    }
}

/// Submits `verb` and prints the operation id; with `wait.wait`, follows it (progress lines on
/// stderr when it is a terminal) for at most `wait.timeout` seconds and returns its exit
/// status. Errors: the spool cannot be written, intake did not record the file within 60 s
/// (is the daemon running?), the database cannot be read. A rejection is not an error: its
/// reason is printed and the status is [`EXIT_REJECTED`]; neither is a timeout
/// ([`EXIT_TIMEOUT`]).
pub fn run(settings: &Settings, verb: &Verb, wait: WaitArg) -> anyhow::Result<u8> {
    let spool = open_spool(settings)?;
    let request_id = format!("cli-{}", uuid::Uuid::new_v4());
    let bytes = serde_json::to_vec(&verb.envelope(&request_id))?;
    let path = put(&spool, &bytes, None)?;
    let goal = Goal {
        task: matches!(verb, Verb::Task(..)),
        state: verb.goal(),
    };
    outcome(settings, &path, goal, Some(wait))
}

/// How a submitted request is followed: `task` (a RETRY, FAIL or ROLLBACK envelope: its
/// occurrence is followed past the state it was in when the task was accepted) and the state
/// that counts as success (exit 0).
#[derive(Debug, Clone, Copy)]
pub struct Goal {
    /// The request is a task envelope.
    pub task: bool,
    /// The state that counts as success.
    pub state: OperationState,
}

impl Goal {
    /// The goal of a validated envelope: FAILED for a FAIL task, ROLLED_BACK for a ROLLBACK
    /// task, COMPLETED otherwise.
    pub fn of(envelope: &vnfkeeper_core::wire::Envelope) -> Self {
        use vnfkeeper_core::wire::{Envelope, TaskOperation};
        match envelope {
            Envelope::Task(t) => Goal {
                task: true,
                state: match t.operation {
                    TaskOperation::Fail => OperationState::Failed,
                    TaskOperation::Rollback => OperationState::RolledBack,
                    TaskOperation::Retry => OperationState::Completed,
                },
            },
            Envelope::Lcm(_) => Goal {
                task: false,
                state: OperationState::Completed,
            },
        }
    }
}

/// The configured spool. Errors: its directories cannot be opened.
pub fn open_spool(settings: &Settings) -> anyhow::Result<Spool> {
    Spool::open(&settings.spool_dir)
        .map_err(|e| anyhow!("spool {}: {e}", settings.spool_dir.display()))
}

/// Writes `bytes` into the spool (`tmp/`, then renamed into `new/`), labelled with what the
/// caller says about it (the operator's file name `file`, `SUDO_USER`: see
/// `maildir::SubmitLabel`); returns the path in `new/`. Errors: the write or rename failed.
pub fn put(
    spool: &Spool,
    bytes: &[u8],
    file: Option<&std::path::Path>,
) -> anyhow::Result<std::path::PathBuf> {
    let label = crate::intake::SubmitLabel::of_caller(file);
    spool
        .submit_labelled(bytes, Some(&label))
        .map_err(|e| anyhow!("cannot submit into {}: {e}", spool.new_dir().display()))
}

/// Waits for intake's outcome of the spool file `path`, prints the operation id and, when
/// `wait` asks, follows the operation (see [`run`] for the exit status and errors).
pub fn outcome(
    settings: &Settings,
    path: &std::path::Path,
    goal: Goal,
    wait: Option<WaitArg>,
) -> anyhow::Result<u8> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let started = Instant::now();
    let state_dir = crate::daemon::lock::state_dir_of(&settings.database);
    // Since when the state lock was seen free on every look (no daemon running).
    let mut unheld_since: Option<Instant> = None;
    let intake = loop {
        if settings.database.exists() {
            let db = Store::open_read_only(&settings.database)?;
            if let Some(row) = db.queries().intake_of_file(&name)? {
                break row;
            }
        }
        unheld_since = match crate::daemon::lock::is_held(&state_dir) {
            Some(false) => unheld_since.or(Some(Instant::now())),
            Some(true) | None => None,
        };
        let no_daemon = unheld_since.is_some_and(|t| t.elapsed() >= NO_DAEMON_GRACE);
        if no_daemon || started.elapsed() > INTAKE_TIMEOUT {
            // Not left behind to run at the daemon's next start, long after this command said
            // it failed: taken back, unless the daemon took it in the meantime.
            match withdraw(&settings.spool_dir, path) {
                Ok(true) if no_daemon => bail!(
                    "no daemon runs on {} (nobody has held its lock {} for {} s; \
                     `systemctl status vnfkeeper`); the request was withdrawn and will not run",
                    state_dir.display(),
                    crate::daemon::lock::LOCK_FILE,
                    NO_DAEMON_GRACE.as_secs()
                ),
                Ok(true) => bail!(
                    "no daemon took {} within {} s (is it running? `systemctl status vnfkeeper`); \
                     the request was withdrawn and will not run",
                    path.display(),
                    INTAKE_TIMEOUT.as_secs()
                ),
                Ok(false) if started.elapsed() <= 2 * INTAKE_TIMEOUT => {}
                Ok(false) => bail!(
                    "the daemon took {} but recorded no outcome after {} s",
                    path.display(),
                    2 * INTAKE_TIMEOUT.as_secs()
                ),
                Err(e) => bail!(
                    "no daemon took {} within {} s (is it running?), and it could not be \
                     withdrawn ({e}): it runs when the daemon starts unless you remove it",
                    path.display(),
                    INTAKE_TIMEOUT.as_secs()
                ),
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if intake.outcome == IntakeOutcome::Rejected {
        let why = intake
            .problem
            .as_ref()
            .map(|p| serde_json::to_string(p).unwrap_or_default())
            .unwrap_or_default();
        eprintln!("vnfkeeper: request rejected: {why}");
        return Ok(EXIT_REJECTED);
    }
    let op = intake
        .vnf_lcm_op_occ_id
        .clone()
        .context("intake recorded no operation for an accepted request")?;
    outln!("{op}");
    if intake.outcome == IntakeOutcome::Duplicate {
        eprintln!("vnfkeeper: the same request was accepted before as operation {op}");
    }
    let Some(limit) = wait.and_then(WaitArg::follow_for) else {
        return Ok(0);
    };
    // A task is followed past the state its occurrence was in when the task was accepted.
    let since = match (goal.task, intake.outcome) {
        (true, IntakeOutcome::Accepted) => Some(intake.committed_at),
        _ => None,
    };
    let (end, stopped) = follow(settings, op.as_str(), since, limit)?;
    outln!("{} {}", end.operation_state, op);
    if !stopped {
        eprintln!(
            "vnfkeeper: gave up waiting after {} s; {op} goes on ({})",
            limit.unwrap_or_default().as_secs(),
            end.operation_state
        );
        return Ok(EXIT_TIMEOUT);
    }
    if let Some(e) = &end.error {
        eprintln!("vnfkeeper: {}: {}", e.title, e.detail);
    }
    Ok(exit_code(end.operation_state, goal.state))
}

/// Takes a submitted request back from `new/` (`path`) before any daemon took it: renamed into
/// the spool's `tmp/` (the daemon never reads there), then removed. `Ok(false)`: it is no longer
/// in `new/` — the daemon took it. Errors: the rename or removal failed.
fn withdraw(spool_dir: &std::path::Path, path: &std::path::Path) -> std::io::Result<bool> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let hidden = spool_dir.join("tmp").join(format!(".withdrawn-{name}"));
    match std::fs::rename(path, &hidden) {
        Ok(()) => std::fs::remove_file(&hidden).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Polls operation `op` until it is in a final state or `FAILED_TEMP` without a pending task,
/// entered at or after `since` when given (so a RETRY of a FAILED_TEMP occurrence is followed
/// past its old state), or until `limit` has passed. Returns the last row read and whether
/// the operation stopped (`false`: the limit ran out). Progress (state and status detail,
/// when they change) goes to stderr if it is a terminal.
pub fn follow(
    settings: &Settings,
    op: &str,
    since: Option<Timestamp>,
    limit: Option<Duration>,
) -> anyhow::Result<(OperationRow, bool)> {
    use std::io::IsTerminal as _;
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = None;
    loop {
        let db = Store::open_read_only(&settings.database)?;
        let row = db
            .queries()
            .operation(&OpOccId::from(op))?
            .with_context(|| format!("operation {op} vanished from the database"))?;
        drop(db);
        let shown = (row.operation_state, row.status_detail.clone());
        if tty && last.as_ref() != Some(&shown) {
            eprintln!(
                "{} {}",
                row.operation_state,
                row.status_detail.as_deref().unwrap_or("")
            );
        }
        last = Some(shown);
        let stop =
            row.operation_state.is_final() || row.operation_state == OperationState::FailedTemp;
        if stop && since.is_none_or(|t| row.state_entered_time >= t) && row.pending_task.is_none() {
            return Ok((row, true));
        }
        if limit.is_some_and(|l| started.elapsed() >= l) {
            return Ok((row, false));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnfkeeper_core::wire::{Envelope, parse_envelope};

    #[test]
    fn every_verb_builds_an_envelope_intake_accepts_as_valid() {
        for v in [
            Verb::Task("RETRY", "op-1".into()),
            Verb::Task("FAIL", "op-1".into()),
            Verb::Task("ROLLBACK", "op-1".into()),
            Verb::Heal("vnf-1".into(), vec!["vnfc-a".into()], Some("disk".into())),
            Verb::Heal("vnf-1".into(), vec![], None),
            Verb::Scale("vnf-1".into(), "worker_instance".into(), true, 2),
            Verb::Scale("vnf-1".into(), "worker_instance".into(), false, 1),
            Verb::Terminate("vnf-1".into(), None),
            Verb::Terminate("vnf-1".into(), Some(120)),
        ] {
            let env = v.envelope("cli-1");
            let parsed = parse_envelope(env.to_string().as_bytes())
                .unwrap_or_else(|e| panic!("{v:?}: {e:?}"));
            match (&v, parsed.envelope) {
                (Verb::Task(..), Envelope::Task(_)) => {}
                (_, Envelope::Lcm(l)) => assert!(l.typed_request().is_ok(), "{v:?}"),
                (v, e) => panic!("{v:?} parsed as {e:?}"),
            }
        }
    }

    #[test]
    fn the_exit_status_names_how_the_operation_ended() {
        use OperationState::*;
        assert_eq!(exit_code(Completed, Completed), 0);
        assert_eq!(exit_code(FailedTemp, Completed), EXIT_FAILED_TEMP);
        assert_eq!(exit_code(Failed, Completed), EXIT_FAILED);
        assert_eq!(exit_code(Failed, Failed), 0);
        assert_eq!(exit_code(RolledBack, RolledBack), 0);
        assert_eq!(exit_code(RolledBack, Completed), EXIT_ROLLED_BACK);
    }
}
