//! `vnfkeeper hot adjust`: the command's arguments and its logic over file *contents* (the
//! caller in `src/cli.rs` reads the files, so this module stays free of I/O).
//!
//! ```text
//! vnfkeeper hot adjust --package DIR --flavour ID
//!                      --operation instantiate|scale-out|scale-in|heal|change-ext-conn
//!                                  |scale-out-rollback
//!                      --request FILE [--grant FILE] [--vnfcs FILE] [--json]
//! ```
//! Output: the adjusted top-level HOT and a second YAML document `nfv: …`; with `--json` one
//! object `{"template": {…}, "files": {…}, "parameters": {"nfv": {…}}}`. Without `--grant` the
//! grant is [`Grant::derived`] (Tacker without an NFVO). The request file is a spool envelope
//! (`{"operation", "vnfInstanceId", "request"}`) or a bare SOL003 body; it is validated as intake
//! validates it. `--vnfcs` is a [`Current`] object or a bare list of [`Vnfc`].

use std::path::PathBuf;

use serde_json::{Value, json};

use vnfkeeper_core::heat::{Adjusted, Current, Grant, Input, Operation, Vnfc, adjust};
use vnfkeeper_core::package::{BaseHot, Vnfd};
use vnfkeeper_core::wire::{Envelope, LcmRequest, parse_envelope};

/// `vnfkeeper hot …`.
#[derive(Debug, clap::Subcommand)]
pub enum HotCommand {
    /// Print the adjusted HOT and `nfv` parameters that an LCM operation sends to Heat
    /// (individual VNFC management: one resource per VNFC, `VDU1-0`, `VDU1-1`, …).
    Adjust(AdjustArgs),
}

/// Arguments of `hot adjust`.
#[derive(Debug, clap::Args)]
pub struct AdjustArgs {
    /// VNF package directory (unpacked CSAR).
    #[arg(long)]
    pub package: PathBuf,
    /// Deployment flavour: selects `BaseHOT/<flavour>/`.
    #[arg(long)]
    pub flavour: String,
    /// The LCM operation.
    #[arg(long, value_enum)]
    pub operation: CliOperation,
    /// The request: a spool envelope or a bare SOL003 body (JSON).
    #[arg(long)]
    pub request: PathBuf,
    /// The SOL003 Grant (JSON); without it, every requested resource is granted.
    #[arg(long)]
    pub grant: Option<PathBuf>,
    /// The current VNFCs (JSON): `{"vnfcs": [{"vduId", "index", "parameters"?}], "nfv"?,
    /// "extVirtualLinks"?}` or a bare list; required for scale, heal and change-ext-conn.
    #[arg(long)]
    pub vnfcs: Option<PathBuf>,
    /// One JSON object `{"template", "files", "parameters": {"nfv"}}` instead of YAML.
    #[arg(long)]
    pub json: bool,
}

/// `--operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CliOperation {
    /// InstantiateVnfRequest.
    Instantiate,
    /// ScaleVnfRequest with `type: SCALE_OUT`.
    ScaleOut,
    /// ScaleVnfRequest with `type: SCALE_IN`.
    ScaleIn,
    /// ROLLBACK of a failed SCALE_OUT (the ScaleVnfRequest with `type: SCALE_OUT` that
    /// failed): the stack before it, from `--vnfcs` before the scale-out.
    ScaleOutRollback,
    /// HealVnfRequest.
    Heal,
    /// ChangeExtVnfConnectivityRequest (SOL003 §5.5.2.11).
    ChangeExtConn,
}

impl CliOperation {
    fn envelope_operation(self) -> &'static str {
        match self {
            Self::Instantiate => "INSTANTIATE",
            Self::ScaleOut | Self::ScaleIn | Self::ScaleOutRollback => "SCALE",
            Self::Heal => "HEAL",
            Self::ChangeExtConn => "CHANGE_EXT_CONN",
        }
    }
}

/// The files of one `hot adjust` call, read by the caller.
#[derive(Debug)]
pub struct AdjustFiles<'a> {
    /// The package's VNFD.
    pub vnfd: &'a Vnfd,
    /// The flavour's BaseHOT.
    pub base: &'a BaseHot,
    /// `--request` content.
    pub request: &'a [u8],
    /// `--grant` content.
    pub grant: Option<&'a [u8]>,
    /// `--vnfcs` content.
    pub vnfcs: Option<&'a [u8]>,
}

/// What the command prints: `stdout`, plus warnings for stderr.
#[derive(Debug)]
pub struct Rendered {
    /// The YAML or JSON text.
    pub stdout: String,
    /// Non-fatal findings.
    pub warnings: Vec<String>,
}

/// Runs `hot adjust` over the file contents. Errors name the file (by its option) and the
/// field or template path.
pub fn run(args: &AdjustArgs, files: &AdjustFiles<'_>) -> anyhow::Result<Rendered> {
    let req_name = args.request.display();
    let request = parse_request(args, files.request)
        .map_err(|e| anyhow::anyhow!("--request {req_name}: {e}"))?;
    let current: Current = match files.vnfcs {
        None => Current::default(),
        Some(bytes) => parse_current(bytes).map_err(|e| {
            anyhow::anyhow!(
                "--vnfcs {}: {e}",
                args.vnfcs
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )
        })?,
    };
    if args.operation != CliOperation::Instantiate && files.vnfcs.is_none() {
        anyhow::bail!(
            "--operation {:?} needs the instance's current VNFCs: give --vnfcs FILE",
            args.operation
        );
    }
    let input = Input {
        base: files.base,
        vnfd: files.vnfd,
        current: &current,
    };
    let op = match &request {
        LcmRequest::Instantiate(r) => Operation::Instantiate(r),
        LcmRequest::Scale(r) => Operation::Scale(r),
        LcmRequest::Heal(r) => Operation::Heal(r),
        LcmRequest::ChangeExtConn(r) => Operation::ChangeExtConn(r),
        LcmRequest::Terminate(_) => {
            anyhow::bail!("--request {req_name}: TERMINATE has no adjusted HOT")
        }
    };
    let shown = |p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let explain = |e: vnfkeeper_core::heat::HeatError| match &e {
        vnfkeeper_core::heat::HeatError::Request { .. } => {
            anyhow::anyhow!("--request {req_name}: {e}")
        }
        vnfkeeper_core::heat::HeatError::Grant { .. } => {
            anyhow::anyhow!("--grant {}: {e}", shown(&args.grant))
        }
        vnfkeeper_core::heat::HeatError::Current { .. } => {
            anyhow::anyhow!("--vnfcs {}: {e}", shown(&args.vnfcs))
        }
        _ => anyhow::anyhow!("--package {}: {e}", args.package.display()),
    };
    let grant = match files.grant {
        Some(bytes) => serde_json::from_slice::<Grant>(bytes).map_err(|e| {
            anyhow::anyhow!("--grant {}: not a SOL003 Grant: {e}", shown(&args.grant))
        })?,
        None => Grant::derived(&vnfkeeper_core::heat::grant_request(input, op).map_err(explain)?),
    };
    let mut adjusted = adjust(input, op, &grant).map_err(explain)?;
    if args.operation == CliOperation::ScaleOutRollback {
        adjusted = rolled_back(input, adjusted).map_err(explain)?;
    }
    Ok(Rendered {
        stdout: if args.json {
            serde_json::to_string_pretty(&json_output(&adjusted))? + "\n"
        } else {
            yaml_output(args, files.base, &adjusted)?
        },
        warnings: adjusted.warnings.clone(),
    })
}

/// The ROLLBACK of the scale-out `out` (`heat::rollback_scale_out`): the documents without the
/// VNFCs it created, patches from `out`'s, `removed` = what it created.
fn rolled_back(
    input: Input<'_>,
    out: Adjusted,
) -> Result<Adjusted, vnfkeeper_core::heat::HeatError> {
    let (template, nfv, vnfcs) =
        vnfkeeper_core::heat::rollback_scale_out(input, &out.vnfcs, &out.nfv, &out.created)?;
    Ok(Adjusted {
        template_patch: vnfkeeper_core::heat::merge::diff(&out.template, &template),
        nfv_patch: vnfkeeper_core::heat::merge::diff(&out.nfv, &nfv),
        template,
        nfv,
        vnfcs,
        removed: out.created,
        created: Vec::new(),
        healed: Vec::new(),
        image_changed: Vec::new(),
        files: out.files,
        grant_request: out.grant_request,
        warnings: out.warnings,
    })
}

/// `{"template", "files", "parameters": {"nfv"}}`: the body parts of a Heat stack create.
pub fn json_output(a: &Adjusted) -> Value {
    json!({
        "template": a.template,
        "files": a.files,
        "parameters": {"nfv": a.nfv},
    })
}

fn yaml_output(args: &AdjustArgs, base: &BaseHot, a: &Adjusted) -> anyhow::Result<String> {
    let mut out = String::new();
    out.push_str(&format!(
        "# Adjusted top-level HOT for {:?} (from {}); nested templates passed through unchanged: {}\n",
        args.operation,
        base.top_path,
        if a.files.is_empty() {
            "none".to_owned()
        } else {
            a.files.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    ));
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    out.push_str(&format!(
        "# VNFCs after the operation: {}; created: {}; removed: {}; healed: {}; image changed: {}\n",
        list(&a.vnfcs.iter().map(Vnfc::name).collect::<Vec<_>>()),
        list(&a.created),
        list(&a.removed),
        list(&a.healed),
        list(&a.image_changed),
    ));
    out.push_str(&serde_yaml_ng::to_string(&a.template)?);
    out.push_str("---\n# Stack parameters\n");
    out.push_str(&serde_yaml_ng::to_string(&json!({"nfv": a.nfv}))?);
    Ok(out)
}

fn parse_current(bytes: &[u8]) -> Result<Current, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if v.is_array() {
        let vnfcs: Vec<Vnfc> = serde_json::from_value(v).map_err(|e| e.to_string())?;
        return Ok(Current {
            vnfcs,
            ..Current::default()
        });
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn parse_request(args: &AdjustArgs, bytes: &[u8]) -> Result<LcmRequest, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let is_envelope = v.get("operation").is_some() && v.get("request").is_some();
    let op = args.operation.envelope_operation();
    let envelope = if is_envelope {
        if v["operation"] != op {
            return Err(format!(
                "/operation is {}, but --operation {:?} needs {op}",
                v["operation"], args.operation
            ));
        }
        v
    } else {
        let mut e = json!({"operation": op, "vnfInstanceId": "hot-adjust", "request": v});
        if op == "INSTANTIATE" {
            e["vnfPackage"] = args.package.display().to_string().into();
        }
        e
    };
    let bytes = serde_json::to_vec(&envelope).map_err(|e| e.to_string())?;
    let shown = |p: &str| {
        if is_envelope {
            p.to_owned()
        } else {
            p.strip_prefix("/request").unwrap_or(p).to_owned()
        }
    };
    let parsed = parse_envelope(&bytes).map_err(|errs| {
        errs.iter()
            .map(|e| format!("{}: {}", shown(&e.pointer), e.reason))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let Envelope::Lcm(env) = parsed.envelope else {
        return Err("not an LCM request".into());
    };
    let req = env.typed_request().map_err(|errs| {
        errs.iter()
            .map(|e| format!("{}: {}", shown(&e.pointer), e.reason))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    if let LcmRequest::Scale(s) = &req {
        use vnfkeeper_core::wire::ScaleType;
        let want = match args.operation {
            CliOperation::ScaleOut | CliOperation::ScaleOutRollback => ScaleType::ScaleOut,
            _ => ScaleType::ScaleIn,
        };
        if s.scale_type != want {
            return Err(format!(
                "{}: is {:?}, but --operation is {:?}",
                shown("/request/type"),
                s.scale_type,
                args.operation
            ));
        }
    }
    Ok(req)
}
