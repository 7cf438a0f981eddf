//! Command line: `daemon`, `submit`, `ops`, `status`, `reconcile --now`, `plan`, `config check`,
//! `hot adjust`, `backup`, `db init`, `host-key forget`, `pause`, `resume`, `events`.
//!
//! Human output is an aligned table; `--json` output is stable for scripts (SOL003 field names).
//! Exit status: 0 success, 1 failure, 78 invalid configuration or a refused database.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vnfkeeper_core::artifact::Artifact;
use vnfkeeper_core::model::{VnfInstanceId, VnfcId};

use clap::{Parser, Subcommand};
use comfy_table::{Table, presets::NOTHING};
use serde_json::{Value, json};

use crate::config::{ConfigArg, EXIT_CONFIG, Settings};
use crate::describe::{Output, OutputArgs};
use crate::store::{OperationRow, Store};

/// vnfkeeper keeps Kubernetes-cluster VNFs on OpenStack in their intended state.
#[derive(Debug, Parser)]
#[command(name = "vnfkeeper", version, about)]
pub struct Cli {
    /// The shard to use: its configuration is /etc/vnfkeeper/NAME.toml (a `--config` or
    /// VNFKEEPER_CONFIG file wins). Without it: /etc/vnfkeeper/vnfkeeper.toml, a single
    /// machine's one shard. NAME: 1 to 32 of a-z, 0-9 and '-', not starting with '-'.
    #[arg(long, global = true, env = "VNFKEEPER_SHARD", value_name = "NAME")]
    pub shard: Option<crate::config::Shard>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service in the foreground (systemd runs this).
    ///
    /// With `[metrics] listen = "ADDR:PORT"` in the configuration it also serves Prometheus
    /// metrics at `GET http://ADDR:PORT/metrics` (OpenMetrics text when asked for, else the
    /// Prometheus text format); a port it cannot bind stops it at start. The families are listed
    /// in the README, section "Metrics (Prometheus)".
    ///
    /// One daemon per state directory: a second one on the same database exits 78 naming the
    /// first one's pid. At start the spool's accepted/ and rejected/ copies are compared with the
    /// database; copies without their record end it with 78 (see `--recover-spool`).
    Daemon(DaemonArgs),
    /// Submit a request envelope to the spool (written to tmp/, then renamed into new/).
    ///
    /// The file is first checked as intake checks it on its own (size, envelope and body with
    /// every defect): a file intake would reject for that is not submitted; its ProblemDetails
    /// is printed and the exit status is 6. Otherwise it prints the spool file and the
    /// requestId and exits 0; with `--wait` it then follows the operation as the task verbs
    /// do (same exit statuses).
    Submit {
        /// Configuration file (for `spool_dir`; `database` with --wait).
        #[command(flatten)]
        config: ConfigArg,
        /// The envelope: {"operation", "vnfInstanceId", "vnfPackage"?, "requestId"?, "request"}.
        request: PathBuf,
        /// Follow the operation.
        #[command(flatten)]
        wait: crate::verbs::WaitArg,
    },
    /// List LCM operation occurrences (SOL003 VnfLcmOpOcc); `ops show ID`: one in detail.
    #[command(args_conflicts_with_subcommands = true)]
    Ops {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// Only operations of this VNF instance.
        #[arg(long = "vnf")]
        vnf_instance_id: Option<String>,
        /// Output format and columns.
        #[command(flatten)]
        out: OutputArgs,
        /// `--watch`.
        #[command(flatten)]
        watch: WatchArgs,
        /// `show ID`.
        #[command(subcommand)]
        command: Option<OpsCommand>,
    },
    /// List VNF instances and their VNFCs; with a VNF instance id, that instance in detail
    /// (each VNFC's Nova status, probe verdict, unhealthy since, reconcile's last decision).
    Status {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// One VNF instance in detail (vnfInstanceId).
        vnf_instance_id: Option<String>,
        /// Output format and columns.
        #[command(flatten)]
        out: OutputArgs,
        /// `--watch`.
        #[command(flatten)]
        watch: WatchArgs,
    },
    /// Ask the running daemon for a full reconcile pass now (cloud + SSH probes).
    Reconcile {
        /// Configuration file (for `spool_dir`).
        #[command(flatten)]
        config: ConfigArg,
        /// Run the pass now (required; the daemon logs it).
        #[arg(long, required = true)]
        now: bool,
        /// Only this VNF instance.
        #[arg(long = "vnf")]
        vnf_instance_id: Option<String>,
    },
    /// Show what a reconcile pass would do now, and why, doing nothing.
    Plan {
        /// Configuration file (`database`, `[cloud]`, `[reconcile]`).
        #[command(flatten)]
        config: ConfigArg,
        /// Only this VNF instance.
        #[arg(long = "vnf")]
        vnf_instance_id: Option<String>,
        /// Output format (`table`: the text report) and columns.
        #[command(flatten)]
        out: OutputArgs,
    },
    /// What happened to a VNF instance: its timeline, oldest first.
    ///
    /// Requests accepted or rejected, operations and their steps, reconcile decisions with their
    /// evidence, maintenance pauses; read-only, like `ops`.
    Events {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// The VNF instance (vnfInstanceId, as `vnfkeeper status` lists it or a request named it).
        vnf_instance_id: String,
        /// Only entries at or after this time: an RFC 3339 time or a span back from now (`90m`,
        /// `2h`, `1d`).
        #[arg(long)]
        since: Option<String>,
        /// Output format and columns (field names are stable, see the README).
        #[command(flatten)]
        out: OutputArgs,
        /// `--watch`.
        #[command(flatten)]
        watch: WatchArgs,
    },
    /// Heat templates: `hot adjust` (individual VNFC management).
    Hot {
        /// What to do.
        #[command(subcommand)]
        command: crate::hot_adjust::HotCommand,
    },
    /// Copy the database while the daemon runs (SQLite online backup), checked with
    /// `PRAGMA quick_check`, written atomically with mode 0640.
    Backup {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// Keep only this many `state-*.db` copies in a destination directory (oldest deleted).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        keep: Option<u32>,
        /// A file, or a directory (existing, or ending in `/`) that receives
        /// `state-<UTC time>.db`.
        destination: PathBuf,
    },
    /// Database commands.
    Db {
        /// What to do with the database.
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Pinned SSH host keys of VNFCs: `host-key forget`.
    HostKey {
        /// What to do.
        #[command(subcommand)]
        command: HostKeyCommand,
    },
    /// Maintenance pause: reconcile keeps observing and recording the VNF (`plan` shows what it
    /// would do) but starts no automatic heal; operations you submit still run. Recorded as a
    /// MAINTENANCE_PAUSED event naming who asked.
    Pause {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// What to pause.
        #[command(flatten)]
        target: crate::operator::PauseTarget,
        /// Why (one line, shown by `status` and in the audit trail).
        #[arg(long)]
        reason: Option<String>,
        /// When the pause ends by itself: an RFC 3339 time or a span from now (`90m`, `2h`, `1d`).
        #[arg(long)]
        until: Option<String>,
    },
    /// End a maintenance pause (MAINTENANCE_RESUMED event); the next pass heals what it finds.
    Resume {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// What to resume.
        #[command(flatten)]
        target: crate::operator::PauseTarget,
    },
    /// Task verbs (retry, fail, rollback, heal, scale, terminate): build the SOL003 request,
    /// submit it through the spool as `submit` does, print the operation id.
    #[command(flatten)]
    Verb(crate::verbs::VerbCommand),
    /// Configuration commands.
    Config {
        /// What to do with the configuration.
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

/// `vnfkeeper daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// Configuration file.
    #[command(flatten)]
    pub config: ConfigArg,
    /// Record again the copies in the spool's accepted/ and rejected/ that the database has no
    /// record of (after a crash that lost the WAL, or a restored backup older than the spool),
    /// instead of refusing to start: accepted requests become FAILED operations (never run,
    /// their secrets were not kept) so that their requestIds stay used. See README "Restore from
    /// backup".
    #[arg(long)]
    pub recover_spool: bool,
}

/// `vnfkeeper ops …`.
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// One operation occurrence in SOL003 VnfLcmOpOcc shape (ETSI GS NFV-SOL 003 §5.5.2.13):
    /// operationParams with secrets masked, error, resourceChanges.affectedVnfcs, and its
    /// stages with their times.
    Show {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// The operation (vnfLcmOpOccId, as `vnfkeeper ops` lists it).
        id: String,
        /// Output format and columns.
        #[command(flatten)]
        out: OutputArgs,
    },
}

/// `vnfkeeper config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the file and print the effective settings (exit 78 if invalid).
    Check(ConfigArg),
}

/// `vnfkeeper db …`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Create a new empty database on purpose (the daemon refuses to when an earlier one left
    /// signs). Refuses if a non-empty database exists; moves a 0-byte file and stale
    /// -wal/-shm/-journal files aside. Run it as the service user (or root).
    Init(ConfigArg),
}

/// `vnfkeeper host-key …`.
#[derive(Debug, Subcommand)]
pub enum HostKeyCommand {
    /// Remove the pinned host key of a VNFC (after its server was rebuilt outside vnfkeeper):
    /// the next connection verifies the server against its console output again (else trust on
    /// first use). Recorded as a HOST_KEY_FORGOTTEN event naming who asked.
    Forget {
        /// Configuration file (for `database`).
        #[command(flatten)]
        config: ConfigArg,
        /// The VNFC (vnfcInstanceId, as `vnfkeeper status` lists it).
        vnfc_id: String,
    },
}

/// Writes one line of command output to stdout (see `outln!`). A closed pipe ends the process
/// with status 141 (128 + SIGPIPE), silently; another write error is reported on stderr.
/// The line is formatted first and written at once: stdout is line-buffered, and a table of
/// thousands of lines written piecewise costs a system call per line.
pub(crate) fn write_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut line = std::fmt::format(args);
    line.push('\n');
    let captured = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(buf) => {
            buf.push_str(&line);
            true
        }
        None => false,
    });
    if captured {
        return;
    }
    if let Err(e) = std::io::stdout().lock().write_all(line.as_bytes()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("vnfkeeper: cannot write the output: {e}");
    }
}

thread_local! {
    /// While [`captured`] runs: the lines `outln!` writes, instead of stdout.
    static CAPTURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with what it prints through `outln!` collected rather than written; returns the text
/// and `f`'s result.
fn captured<T>(f: impl FnOnce() -> T) -> (String, T) {
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    let r = f();
    let text = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (text, r)
}

/// `--watch` of `ops`, `status` and `events`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Keep running: read again every `--interval` seconds and print again when what is shown
    /// changed (a table's relative ages do not count). A terminal is cleared first; otherwise
    /// `-o json` prints one compact document per line, `-o yaml` a `---` separated stream, and
    /// a table or values a blank line between two prints. Ends with Ctrl-C (or an error).
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Seconds between two reads with `--watch`.
    #[arg(long, default_value_t = 2, requires = "watch",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval: u64,
}

impl WatchArgs {
    /// Runs `render` once, or with `--watch` again every interval, printing what it prints
    /// whenever that changed. Errors: the first of `render`'s (a watch ends with it).
    fn run(
        &self,
        out: &Output,
        mut render: impl FnMut() -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        if !self.watch {
            return render();
        }
        use std::io::IsTerminal as _;
        let terminal = std::io::stdout().is_terminal();
        let mut last: Option<String> = None;
        loop {
            let (text, r) = captured(&mut render);
            r?;
            let key = if out.format == crate::describe::OutputFormat::Table {
                without_ages(&text)
            } else {
                text.clone()
            };
            if last.as_deref() != Some(key.as_str()) {
                let text = match out.format {
                    crate::describe::OutputFormat::Json => {
                        let doc: Value = serde_json::from_str(&text)?;
                        format!("{doc}\n")
                    }
                    crate::describe::OutputFormat::Yaml => format!("---\n{text}"),
                    _ => text,
                };
                let text = text.trim_end();
                if terminal {
                    // ANSI "cursor home" and "erase display" (ECMA-48 CUP, ED).
                    outln!("\x1b[H\x1b[2J{text}");
                } else if last.is_some() && out.format != crate::describe::OutputFormat::Json {
                    outln!("\n{text}");
                } else {
                    outln!("{text}");
                }
                last = Some(key);
            }
            std::thread::sleep(std::time::Duration::from_secs(self.interval));
        }
    }
}

/// `text` without the relative ages tables add to times (`(5m ago)`, `(in 2h)`), so that a
/// watch prints again only when something else changed.
fn without_ages(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(" (") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let age = tail.find(')').map(|j| &tail[..j]).filter(|inner| {
            let n = inner
                .strip_prefix("in ")
                .or_else(|| inner.strip_suffix(" ago"));
            n.is_some_and(|n| {
                n.len() >= 2
                    && n[..n.len() - 1].bytes().all(|b| b.is_ascii_digit())
                    && matches!(n.as_bytes()[n.len() - 1], b's' | b'm' | b'h' | b'd')
            })
        });
        match age {
            Some(inner) => rest = &tail[inner.len() + 1..],
            None => {
                out.push_str(" (");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses the command line. With `--shard NAME` (or `VNFKEEPER_SHARD`) the `--config` default
/// of every command becomes `/etc/vnfkeeper/NAME.toml` and the line is parsed again, so that a
/// `--config` given (or `VNFKEEPER_CONFIG`) still wins and every command reads the file as it
/// does without a shard. Errors: clap's usage errors (exit 2), e.g. an invalid shard name.
pub fn parse() -> Cli {
    parse_from(std::env::args_os())
}

/// [`parse`] of the given arguments (the first is the program name).
pub fn parse_from<I, T>(args: I) -> Cli
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory as _, FromArgMatches as _};
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cli = Cli::parse_from(&args);
    let Some(shard) = &cli.shard else {
        return cli;
    };
    let default = shard.config_path().display().to_string();
    let matches = with_config_default(Cli::command(), &default).get_matches_from(&args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// `cmd` with the default of its `--config` (and of every subcommand's) set to `default`.
fn with_config_default(cmd: clap::Command, default: &str) -> clap::Command {
    let mut cmd = if cmd.get_arguments().any(|a| a.get_id() == "config") {
        cmd.mut_arg("config", |a| a.default_value(default.to_owned()))
    } else {
        cmd
    };
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |s| with_config_default(s, default));
    }
    cmd
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = parse();
    if let Command::Daemon(c) = &cli.command {
        return crate::daemon::main(&c.config.config, c.recover_spool);
    }
    crate::daemon::logging::init(crate::daemon::logging::LogTarget::Stderr, "warn");
    match cli.command {
        Command::Verb(v) => verb(v),
        Command::Submit {
            config,
            request,
            wait,
        } => submit(&config.config, &request, wait),
        command => exit_status(run(command)),
    }
}

/// Runs a command other than `daemon`, a task verb and `submit`.
fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Daemon(_) | Command::Verb(_) | Command::Submit { .. } => {
            unreachable!("handled above")
        }
        Command::Ops {
            command: Some(OpsCommand::Show { config, id, out }),
            ..
        } => load(&config.config)
            .and_then(|s| Ok(crate::describe::ops_show(&s, &id, &out.output(), now())?)),
        Command::Ops {
            config,
            vnf_instance_id,
            out,
            watch,
            command: None,
        } => {
            let settings = load(&config.config)?;
            let out = out.output();
            watch.run(&out, || ops(&settings, vnf_instance_id.as_deref(), &out))
        }
        Command::Status {
            config,
            vnf_instance_id: Some(vnf),
            out,
            watch,
        } => {
            let settings = load(&config.config)?;
            let out = out.output();
            watch.run(&out, || {
                Ok(crate::describe::status_vnf(&settings, &vnf, &out, now())?)
            })
        }
        Command::Status {
            config,
            vnf_instance_id: None,
            out,
            watch,
        } => {
            let settings = load(&config.config)?;
            let out = out.output();
            watch.run(&out, || status(&settings, &out))
        }
        Command::Config {
            command: ConfigCommand::Check(c),
        } => config_check(&c.config),
        Command::Reconcile {
            config,
            now: _,
            vnf_instance_id,
        } => reconcile_now(&config.config, vnf_instance_id.as_deref()),
        Command::Plan {
            config,
            vnf_instance_id,
            out,
        } => load(&config.config).and_then(|s| {
            Ok(crate::reconcile::cmd::plan(
                &s,
                vnf_instance_id.as_deref(),
                &out.output(),
            )?)
        }),
        Command::Events {
            config,
            vnf_instance_id,
            since,
            out,
            watch,
        } => {
            let settings = load(&config.config)?;
            let out = out.output();
            watch.run(&out, || {
                Ok(crate::events::run(
                    &settings,
                    &vnf_instance_id,
                    since.as_deref(),
                    &out,
                    now(),
                )?)
            })
        }
        Command::Hot {
            command: crate::hot_adjust::HotCommand::Adjust(a),
        } => hot_adjust(&a),
        Command::Backup {
            config,
            keep,
            destination,
        } => backup(&config.config, &destination, keep),
        Command::Db {
            command: DbCommand::Init(c),
        } => db_init(&c.config),
        Command::HostKey {
            command: HostKeyCommand::Forget { config, vnfc_id },
        } => host_key_forget(&config.config, &vnfc_id),
        Command::Pause {
            config,
            target,
            reason,
            until,
        } => load(&config.config).and_then(|s| {
            let (r, u) = (reason.as_deref(), until.as_deref());
            Ok(crate::operator::pause(&s, &target, r, u, &caller(), now())?)
        }),
        Command::Resume { config, target } => load(&config.config)
            .and_then(|s| Ok(crate::operator::resume(&s, &target, &caller(), now())?)),
    }
}

/// The exit status of a command's result: 0, 78 for an invalid configuration or a refused
/// database, 1 for another error (printed to stderr).
fn exit_status(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Config(e)) => {
            eprintln!("vnfkeeper: invalid configuration: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
        Err(Failure::Other(e))
            if matches!(
                e.downcast_ref::<crate::store::StoreError>(),
                Some(crate::store::StoreError::Refused(_))
            ) =>
        {
            eprintln!("vnfkeeper: {e:#}");
            ExitCode::from(EXIT_CONFIG)
        }
        Err(Failure::Other(e)) => {
            eprintln!("vnfkeeper: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `reconcile --now`: asks the running daemon for a full pass. Errors: no `[cloud]` (78: the
/// daemon runs no pass without one, a trigger would wait forever), the spool's.
fn reconcile_now(config: &Path, vnf_instance_id: Option<&str>) -> Result<(), Failure> {
    let s = load(config)?;
    if s.cloud.is_none() {
        return Err(Failure::Config(crate::config::ConfigError::Invalid {
            path: config.to_path_buf(),
            key: "cloud".into(),
            reason: "`reconcile --now` needs a [cloud] section (without a cloud there \
                     is nothing to observe); nothing was requested"
                .into(),
        }));
    }
    let p = crate::reconcile::cmd::request_now(&s, vnf_instance_id)?;
    outln!(
        "full reconcile pass requested ({}); see `journalctl -u vnfkeeper`",
        p.display()
    );
    Ok(())
}

/// A task verb: its exit status (see `verbs::exit_code`), 78 for an invalid configuration, 1
/// for another error.
fn verb(v: crate::verbs::VerbCommand) -> ExitCode {
    let (verb, wait, config) = v.verb();
    let settings = match Settings::load(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vnfkeeper: invalid configuration: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match crate::verbs::run(&settings, &verb, wait) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vnfkeeper: {e:#}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Config(crate::config::ConfigError),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Other(e.into())
    }
}

fn load(config: &Path) -> Result<Settings, Failure> {
    Settings::load(config).map_err(Failure::Config)
}

fn config_check(config: &Path) -> Result<(), Failure> {
    let settings = load(config)?;
    crate::daemon::reload::check_outside(&settings, config).map_err(Failure::Config)?;
    outln!("# {}: valid; effective settings:", config.display());
    outln!("{}", settings.to_toml().trim_end());
    Ok(())
}

/// `submit`: checks the file as intake would on its own, then submits it; its exit status (see
/// [`Command::Submit`]): 0 submitted (or, with `--wait`, the operation ended as asked), 6 the
/// file would be rejected (or was, with `--wait`), the verbs' statuses with `--wait`, 78 an
/// invalid configuration, 1 another error (the file cannot be read, the spool written).
fn submit(config: &Path, request: &Path, wait: crate::verbs::WaitArg) -> ExitCode {
    let settings = match Settings::load(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vnfkeeper: invalid configuration: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let run = || -> anyhow::Result<u8> {
        let bytes = std::fs::read(request)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", request.display()))?;
        let parsed = match crate::intake::precheck(&bytes) {
            Ok(p) => p,
            Err(problem) => {
                eprintln!(
                    "vnfkeeper: {} would be rejected, not submitted: {}",
                    request.display(),
                    serde_json::to_string(&problem)?
                );
                return Ok(crate::verbs::EXIT_REJECTED);
            }
        };
        let request_id = match &parsed.envelope {
            vnfkeeper_core::wire::Envelope::Lcm(l) => l.request_id.clone(),
            vnfkeeper_core::wire::Envelope::Task(t) => t.request_id.clone(),
        };
        let spool = crate::verbs::open_spool(&settings)?;
        let path = crate::verbs::put(&spool, &bytes, Some(request))?;
        outln!(
            "submitted {} as {} (requestId {})",
            request.display(),
            path.display(),
            request_id.as_deref().unwrap_or("none")
        );
        if !wait.wait {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            outln!(
                "follow it with `vnfkeeper ops` (or submit with --wait); if it is rejected, the reason will be in {}",
                spool
                    .rejected_dir()
                    .join(format!("{name}.error.json"))
                    .display()
            );
            return Ok(0);
        }
        let goal = crate::verbs::Goal::of(&parsed.envelope);
        crate::verbs::outcome(&settings, &path, goal, Some(wait))
    };
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vnfkeeper: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the database read-only: never creates, never migrates (group members may run this).
fn open_db(settings: &Settings) -> Result<crate::store::Reader, Failure> {
    Ok(Store::open_read_only(&settings.database)?)
}

fn now() -> vnfkeeper_core::model::Timestamp {
    vnfkeeper_core::model::Timestamp(chrono::Utc::now())
}

/// `backup`: one consistent copy, then what was written.
fn backup(config: &Path, destination: &Path, keep: Option<u32>) -> Result<(), Failure> {
    let settings = load(config)?;
    let r = crate::store::backup(
        &settings.database,
        destination,
        keep.map(|k| k as usize),
        now(),
    )?;
    outln!(
        "backup {}: {} bytes, {} operations, {} events, PRAGMA quick_check ok",
        r.path.display(),
        r.bytes,
        r.operations,
        r.events
    );
    for old in &r.removed {
        outln!("removed old backup {} (--keep)", old.display());
    }
    Ok(())
}

/// `db init`: a new empty database on purpose.
fn db_init(config: &Path) -> Result<(), Failure> {
    let settings = load(config)?;
    let r = crate::store::init(&settings.database, now())?;
    for (from, to) in &r.moved {
        outln!("moved {} aside to {}", from.display(), to.display());
    }
    outln!(
        "created a new empty database {} (mode 0640); the daemon will use it at its next start",
        settings.database.display()
    );
    Ok(())
}

/// SOL003 VnfLcmOpOcc JSON of a row, plus `statusDetail` (vnfkeeper: why it waits / what it
/// does), `origin` (`spool` or `tacker`) and `tackerOpOccId` (the Tacker `vnfLcmOpOccId` a
/// `tacker` operation follows; null otherwise).
pub fn operation_json(op: &OperationRow) -> Value {
    json!({
        "origin": op.origin.as_str(),
        "tackerOpOccId": op.tacker_op_occ_id,
        "id": op.id,
        "operationState": op.operation_state.as_str(),
        "stateEnteredTime": op.state_entered_time.to_rfc3339(),
        "startTime": op.start_time.to_rfc3339(),
        "vnfInstanceId": op.vnf_instance_id,
        "operation": op.operation.as_str(),
        "isAutomaticInvocation": op.is_automatic_invocation,
        "isCancelPending": false,
        "error": op.error,
        "statusDetail": op.status_detail,
    })
}

fn ops(settings: &Settings, vnf: Option<&str>, out: &Output) -> Result<(), Failure> {
    let db = open_db(settings)?;
    let rows = db.queries().operations(vnf)?;
    if !out.is_table() {
        let list: Vec<Value> = rows.iter().map(operation_json).collect();
        crate::describe::emit(&Value::Array(list), out)?;
        return Ok(());
    }
    let now = now();
    let mut t = table([
        "ID",
        "OPERATION",
        "STATE",
        "VNF INSTANCE",
        "STARTED",
        "AUTO",
        "ORIGIN",
        "DETAIL",
    ]);
    for op in &rows {
        t.add_row([
            op.id.to_string(),
            op.operation.as_str().into(),
            op.operation_state.as_str().into(),
            op.vnf_instance_id.to_string(),
            crate::describe::table_time(op.start_time, now),
            if op.is_automatic_invocation {
                "yes"
            } else {
                "no"
            }
            .into(),
            match &op.tacker_op_occ_id {
                Some(occ) => format!("{} ({occ})", op.origin),
                None => op.origin.to_string(),
            },
            op.status_detail.clone().unwrap_or_default(),
        ]);
    }
    outln!("{t}");
    Ok(())
}

/// What `vnfkeeper status` shows, read with one query per kind (per-instance queries made
/// `status` grow with the fleet by a statement per VNF).
struct Fleet {
    instances: Vec<crate::store::InstanceRow>,
    summaries: std::collections::BTreeMap<String, crate::store::OperationSummary>,
    vnfcs: std::collections::BTreeMap<String, Vec<crate::store::VnfcRow>>,
    trust: std::collections::BTreeMap<String, Vec<vnfkeeper_core::flavour::trust::NodeTrust>>,
    pauses: Vec<vnfkeeper_core::model::MaintenancePause>,
    /// The directory of the database, where the engine keeps artifacts.
    state_dir: Option<std::path::PathBuf>,
    now: vnfkeeper_core::model::Timestamp,
}

impl Fleet {
    /// The cluster endpoint: the server of the admin kubeconfig the engine kept (0600) next to
    /// the database; unreadable or absent: none.
    fn endpoint(&self, id: &str) -> Option<String> {
        let path = Artifact::AdminKubeconfig.path(self.state_dir.as_deref()?, id);
        vnfkeeper_core::artifact::kubeconfig_server(&std::fs::read_to_string(path).ok()?)
    }

    fn paused(&self, id: &str) -> Option<&vnfkeeper_core::model::MaintenancePause> {
        vnfkeeper_core::model::pause::in_force(&self.pauses, &VnfInstanceId::from(id), self.now)
    }
}

fn status(settings: &Settings, out: &Output) -> Result<(), Failure> {
    let db = open_db(settings)?;
    let q = db.queries();
    let fleet = Fleet {
        instances: q.instances()?,
        summaries: q.operation_summaries()?,
        vnfcs: q.vnfcs_all()?,
        trust: q.registry_trust_all()?,
        pauses: q.maintenance_pauses()?,
        state_dir: settings.database.parent().map(Path::to_path_buf),
        now: now(),
    };
    if out.is_table() {
        status_tables(fleet)
    } else {
        status_json(fleet, out)
    }
}

/// `status -o json|yaml`: one object per instance with its VNFCs and registries.
fn status_json(mut fleet: Fleet, out: &Output) -> Result<(), Failure> {
    let mut list = Vec::new();
    for i in &fleet.instances {
        let vnfcs: Vec<Value> = fleet
            .vnfcs
            .remove(i.id.as_str())
            .unwrap_or_default()
            .iter()
            .map(|c| {
                json!({"id": c.id, "vduId": c.vdu_id, "index": c.vnfc_index,
                       "serverId": c.server_id, "ipAddress": c.ip_address})
            })
            .collect();
        let unfinished = fleet
            .summaries
            .get(i.id.as_str())
            .map_or(0, |o| o.unfinished);
        let registries = registries_json(&fleet.trust.remove(i.id.as_str()).unwrap_or_default());
        list.push(json!({
            "id": i.id,
            "origin": i.origin.as_str(),
            "instantiationState": i.instantiation_state.as_str(),
            "flavourId": i.flavour_id,
            "vnfPackage": i.vnf_package,
            "stackId": i.stack_id,
            "createdAt": i.created_at.to_rfc3339(),
            "updatedAt": i.updated_at.to_rfc3339(),
            "unfinishedOperations": unfinished,
            "clusterEndpoint": fleet.endpoint(i.id.as_str()),
            "maintenancePause": fleet.paused(i.id.as_str()).map(vnfkeeper_core::policy::pause_json),
            "vnfcs": vnfcs,
            "registries": registries,
        }));
    }
    crate::describe::emit(&Value::Array(list), out)?;
    Ok(())
}

/// `status`: the instances, then their VNFCs and their nodes' registry trust when there are any.
fn status_tables(mut fleet: Fleet) -> Result<(), Failure> {
    let mut t = table([
        "VNF INSTANCE",
        "STATE",
        "FLAVOUR",
        "VNFCS",
        "UNFINISHED OPS",
        "LAST OPERATION",
        "ENDPOINT",
        "MAINTENANCE PAUSE",
        "ORIGIN",
    ]);
    let mut vnfc_table = table(["VNF INSTANCE", "VNFC", "VDU", "INDEX", "SERVER", "IP"]);
    let mut trust_table = table([
        "VNF INSTANCE",
        "REGISTRY",
        "TYPE",
        "CA SHA-256",
        "NODE (VNFC)",
        "APPLIED",
        "VERIFIED",
    ]);
    for i in &fleet.instances {
        let summary = fleet.summaries.get(i.id.as_str());
        let vnfcs = fleet.vnfcs.remove(i.id.as_str()).unwrap_or_default();
        let last = summary
            .map(|o| {
                let o = &o.last;
                format!("{} {} ({})", o.operation, o.operation_state, o.id)
            })
            .unwrap_or_default();
        t.add_row([
            i.id.to_string(),
            i.instantiation_state.as_str().into(),
            i.flavour_id.clone().unwrap_or_default(),
            vnfcs.len().to_string(),
            summary.map_or(0, |o| o.unfinished).to_string(),
            last,
            fleet.endpoint(i.id.as_str()).unwrap_or_default(),
            fleet
                .paused(i.id.as_str())
                .map(|p| p.describe())
                .unwrap_or_default(),
            i.origin.to_string(),
        ]);
        for n in fleet.trust.remove(i.id.as_str()).unwrap_or_default() {
            trust_table.add_row(trust_row(i.id.as_str(), &n));
        }
        for c in &vnfcs {
            vnfc_table.add_row([
                i.id.to_string(),
                c.id.to_string(),
                c.vdu_id.clone(),
                c.vnfc_index.map(|n| n.to_string()).unwrap_or_default(),
                c.server_id.clone().unwrap_or_default(),
                c.ip_address.clone().unwrap_or_default(),
            ]);
        }
    }
    if let Some(all) = fleet
        .pauses
        .iter()
        .find(|p| p.scope == vnfkeeper_core::model::PauseScope::All && p.active_at(fleet.now))
    {
        outln!("every VNF instance: maintenance {}\n", all.describe());
    }
    outln!("{t}");
    if vnfc_table.row_count() > 0 {
        outln!("\n{vnfc_table}");
    }
    if trust_table.row_count() > 0 {
        outln!("\n{trust_table}");
    }
    Ok(())
}

/// One row of `status`'s registry trust table: a node's trust of one registry.
fn trust_row(vnf_instance_id: &str, n: &vnfkeeper_core::flavour::trust::NodeTrust) -> [String; 7] {
    let time = |t: Option<vnfkeeper_core::model::Timestamp>| {
        t.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into())
    };
    [
        vnf_instance_id.to_owned(),
        n.registry.server.clone(),
        connection_type_name(n.registry.connection_type).into(),
        n.registry
            .ca_sha256
            .as_deref()
            .map(|h| h.get(..16).unwrap_or(h).to_owned())
            .unwrap_or_else(|| "-".into()),
        n.vnfc_instance_id.clone().unwrap_or_else(|| "-".into()),
        time(n.applied_at),
        time(n.verified_at),
    ]
}

/// `HTTP` or `HTTPS`.
fn connection_type_name(t: vnfkeeper_core::wire::params::ConnectionType) -> &'static str {
    match t {
        vnfkeeper_core::wire::params::ConnectionType::Http => "HTTP",
        vnfkeeper_core::wire::params::ConnectionType::Https => "HTTPS",
    }
}

/// `status --json`'s `registries` of one instance: per registry its type, CA fingerprint and
/// the nodes that recorded trust of it, with when it was last applied and verified.
fn registries_json(rows: &[vnfkeeper_core::flavour::trust::NodeTrust]) -> Value {
    let mut out: Vec<Value> = Vec::new();
    for n in rows {
        let node = n.vnfc_instance_id.as_ref().map(|id| {
            json!({"vnfcId": id,
                   "appliedAt": n.applied_at.map(|t| t.to_rfc3339()),
                   "verifiedAt": n.verified_at.map(|t| t.to_rfc3339())})
        });
        if let Some(last) = out
            .last_mut()
            .filter(|v| v["server"] == n.registry.server.as_str())
        {
            if let (Some(node), Some(nodes)) = (node, last["nodes"].as_array_mut()) {
                nodes.push(node);
            }
            continue;
        }
        out.push(json!({
            "server": n.registry.server,
            "connectionType": connection_type_name(n.registry.connection_type),
            "caSha256": n.registry.ca_sha256,
            "nodes": node.into_iter().collect::<Vec<_>>(),
        }));
    }
    Value::Array(out)
}

/// `host-key forget`: one store write (the key cleared, a HOST_KEY_FORGOTTEN event naming the
/// caller), then what was removed.
fn host_key_forget(config: &Path, vnfc_id: &str) -> Result<(), Failure> {
    let settings = load(config)?;
    if !settings.database.exists() {
        return Err(anyhow::anyhow!(
            "database {} does not exist (has the daemon run?)",
            settings.database.display()
        )
        .into());
    }
    let mut store = Store::open(&settings.database)?;
    let who = caller();
    let now = vnfkeeper_core::model::Timestamp(chrono::Utc::now());
    let Some(gone) = store.write(|tx| tx.forget_host_key(&VnfcId::from(vnfc_id), &who, now))?
    else {
        return Err(anyhow::anyhow!(
            "no VNFC {vnfc_id:?} in {} (`vnfkeeper status` lists the VNFCs)",
            settings.database.display()
        )
        .into());
    };
    let server = gone.server_id.as_deref().unwrap_or("unknown");
    match &gone.host_key {
        Some(key) => {
            let fp = crate::remote::fingerprint(key).unwrap_or_else(|e| format!("unparsable: {e}"));
            outln!(
                "removed the pinned host key of VNFC {} (VNF instance {}, server {server}): {fp}",
                gone.vnfc_id,
                gone.vnf_instance_id
            );
            outln!("  {key}");
        }
        None => outln!(
            "VNFC {} (VNF instance {}, server {server}) had no pinned host key; nothing removed",
            gone.vnfc_id,
            gone.vnf_instance_id
        ),
    }
    outln!(
        "the next connection verifies the server's key against its console output (trust on first use if it lists none)"
    );
    Ok(())
}

/// Who runs this command, for the audit event: `uid N (name)`, plus `via sudo from USER` when
/// root was reached through sudo. The uid is the process's own (owner of `/proc/self`); the
/// name comes from `/etc/passwd`.
fn caller() -> String {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
        return "unknown user".into();
    };
    let name = crate::intake::user_name(uid).unwrap_or_else(|| "?".into());
    let mut who = format!("uid {uid} ({name})");
    if uid == 0
        && let Ok(s) = std::env::var("SUDO_USER")
        && !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        who.push_str(&format!(" via sudo from {s}"));
    }
    who
}

/// `hot adjust`: reads the files, lets `hot_adjust::run` do the rest.
fn hot_adjust(a: &crate::hot_adjust::AdjustArgs) -> Result<(), Failure> {
    let read = |p: &Path, opt: &str| {
        std::fs::read(p).map_err(|e| anyhow::anyhow!("{opt} {}: cannot read: {e}", p.display()))
    };
    let pkg = vnfkeeper_core::package::VnfPackage::load(&a.package)?;
    let base = pkg.base_hot(&a.flavour)?;
    let request = read(&a.request, "--request")?;
    let grant = a.grant.as_deref().map(|p| read(p, "--grant")).transpose()?;
    let vnfcs = a.vnfcs.as_deref().map(|p| read(p, "--vnfcs")).transpose()?;
    let files = crate::hot_adjust::AdjustFiles {
        vnfd: &pkg.vnfd,
        base: &base,
        request: &request,
        grant: grant.as_deref(),
        vnfcs: vnfcs.as_deref(),
    };
    let out = crate::hot_adjust::run(a, &files)?;
    for w in &out.warnings {
        eprintln!("vnfkeeper: warning: {w}");
    }
    outln!("{}", out.stdout.trim_end());
    Ok(())
}

fn table<const N: usize>(header: [&str; N]) -> Table {
    let mut t = Table::new();
    t.load_preset(NOTHING).set_header(header);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration file `config check` would read for `args`.
    fn config_of(args: &[&str]) -> PathBuf {
        match parse_from(args).command {
            Command::Config {
                command: ConfigCommand::Check(c),
            } => c.config,
            other => panic!("not config check: {other:?}"),
        }
    }

    #[test]
    fn shard_selects_its_file_unless_config_is_given() {
        // The environment would choose instead (tests/cli/shard_cli.rs covers it).
        if std::env::var_os("VNFKEEPER_CONFIG").is_some()
            || std::env::var_os("VNFKEEPER_SHARD").is_some()
        {
            panic!("run without VNFKEEPER_CONFIG and VNFKEEPER_SHARD in the environment");
        }
        let check = ["vnfkeeper", "config", "check"];
        assert_eq!(
            config_of(&check),
            PathBuf::from(crate::config::DEFAULT_CONFIG_PATH)
        );
        // Before or after the subcommand: a global option.
        let before = ["vnfkeeper", "--shard", "edge-1", "config", "check"];
        assert_eq!(
            config_of(&before),
            PathBuf::from("/etc/vnfkeeper/edge-1.toml")
        );
        let after = ["vnfkeeper", "config", "check", "--shard", "edge-1"];
        assert_eq!(
            config_of(&after),
            PathBuf::from("/etc/vnfkeeper/edge-1.toml")
        );
        let given = [
            "vnfkeeper",
            "--shard",
            "edge-1",
            "config",
            "check",
            "--config",
            "/x.toml",
        ];
        assert_eq!(config_of(&given), PathBuf::from("/x.toml"));
        // Every command that reads a configuration takes the shard's file.
        let daemon = parse_from(["vnfkeeper", "--shard", "b2", "daemon"]);
        match daemon.command {
            Command::Daemon(d) => {
                assert_eq!(d.config.config, PathBuf::from("/etc/vnfkeeper/b2.toml"))
            }
            other => panic!("{other:?}"),
        }
        for bad in ["../etc/passwd", "A", "-x", ""] {
            let flag = format!("--shard={bad}");
            let e = Cli::try_parse_from(["vnfkeeper", flag.as_str(), "config", "check"])
                .expect_err(bad);
            assert!(e.to_string().contains("shard name"), "{bad}: {e}");
        }
    }

    #[test]
    fn relative_ages_do_not_count_as_a_change() {
        assert_eq!(
            without_ages("x 2026-11-27T06:24:33Z (5s ago) y (in 2h) z (note) (12m ago)\n"),
            "x 2026-11-27T06:24:33Z y z (note)\n"
        );
        assert_eq!(without_ages("a (ago) (s ago) ("), "a (ago) (s ago) (");
    }

    #[test]
    fn columns_select_fields_in_their_order_and_unknown_ones_are_named() {
        let doc = json!([{"id": "a", "state": "X", "n": 1}, {"id": "b", "state": null, "n": 2}]);
        let out = |format, columns: &[&str]| Output {
            format,
            columns: columns.iter().map(|c| c.to_string()).collect(),
        };
        let (text, r) = captured(|| {
            crate::describe::emit(
                &doc,
                &out(crate::describe::OutputFormat::Value, &["n", "id"]),
            )
        });
        r.unwrap();
        assert_eq!(text, "1 a\n2 b\n");
        let (text, r) = captured(|| {
            crate::describe::emit(&doc, &out(crate::describe::OutputFormat::Value, &["state"]))
        });
        r.unwrap();
        assert_eq!(text, "X\n\n");
        let (text, r) = captured(|| {
            crate::describe::emit(&doc[0], &out(crate::describe::OutputFormat::Value, &[]))
        });
        r.unwrap();
        assert_eq!(text, "a\nX\n1\n");
        let e = crate::describe::emit(&doc, &out(crate::describe::OutputFormat::Json, &["x"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no column \"x\"") && e.contains("id, state, n"),
            "{e}"
        );
    }
}
