//! The reconcile commands of the CLI: `vnfkeeper reconcile --now [--vnf ID]` (asks the daemon for a
//! full pass now) and `vnfkeeper plan [--vnf ID] [--json]` (what a full pass would do now, and
//! why, doing nothing).

use std::sync::Arc;

use anyhow::Context as _;

use super::{PassKind, Reconciler, probe::ProbeSettings};
use crate::cloud::OpenStackCloud;
use crate::config::Settings;
use crate::remote::{SshConfig, SshRemote};
use crate::store::Store;
use vnfkeeper_core::model::{Timestamp, VnfInstanceId};

/// Prefix of trigger files in `new/`.
pub const TRIGGER_PREFIX: &str = ".reconcile-now.";

/// Drops a trigger file `<spool>/new/.reconcile-now.<unique>` (content: the VNF id or nothing),
/// written to `tmp/` and renamed into `new/` like a request. The daemon (the only database
/// writer) notices it within a second, deletes it and runs a full pass, logging it.
/// Errors: the spool is not writable (members of group `vnfkeeper` may write `new/`).
pub fn request_now(settings: &Settings, vnf: Option<&str>) -> anyhow::Result<std::path::PathBuf> {
    let tmp = settings.spool_dir.join("tmp");
    let new = settings.spool_dir.join("new");
    let unique = format!(
        "{}{}.{}",
        TRIGGER_PREFIX,
        chrono::Utc::now().timestamp_micros(),
        std::process::id()
    );
    let t = tmp.join(&unique);
    std::fs::write(&t, vnf.unwrap_or("")).with_context(|| format!("writing {}", t.display()))?;
    let to = new.join(&unique);
    std::fs::rename(&t, &to).with_context(|| format!("moving into {}", new.display()))?;
    Ok(to)
}

/// Runs observation, probes and policy read-only (database opened read-only, the cloud from
/// the configuration, probes in check mode) and prints what a full pass would do now.
/// Errors: no `[cloud]`, database missing, cloud unreachable.
pub fn plan(
    settings: &Settings,
    vnf: Option<&str>,
    out: &crate::describe::Output,
) -> anyhow::Result<()> {
    let cloud = settings
        .cloud
        .clone()
        .context("no [cloud] section in the configuration: nothing to observe")?;
    let db = Store::open_read_only(&settings.database)?;
    let vnf = vnf.map(VnfInstanceId::from);
    let snap = super::snapshot(db.queries(), vnf.as_ref())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        let c = OpenStackCloud::connect(&cloud.clouds_yaml, &cloud.cloud, cloud.api_timeout)
            .await
            .context("connecting to the cloud")?;
        let remote = Arc::new(SshRemote::new(SshConfig {
            connect_timeout: settings.limits.ssh_connect_timeout,
            ..SshConfig::default()
        }));
        let rec = Reconciler::new(
            Arc::new(c),
            remote,
            settings.reconcile.policy.clone(),
            ProbeSettings {
                timeout: settings.reconcile.probe_timeout,
                max_parallel_hosts: settings.limits.max_parallel_hosts as usize,
            },
        );
        anyhow::Ok(
            rec.evaluate(&snap, PassKind::Full, Timestamp(chrono::Utc::now()))
                .await,
        )
    })?;
    if !out.is_table() {
        return crate::describe::emit(&super::report_json(&report), out);
    }
    outln!(
        "plan (nothing done): {} VNF instances, {} VNFCs, {} hosts probed, {} API requests{}",
        report.vnfs,
        report.vnfcs,
        report.probed_hosts,
        report.api_requests,
        report
            .cloud_error
            .as_deref()
            .map(|e| format!("; cloud listing failed: {e}"))
            .unwrap_or_default()
    );
    for o in &report.outcomes {
        if let Some(h) = &o.heal {
            outln!("{}: would start HEAL {}", o.vnf_instance_id, h.request());
        }
        for d in &o.decisions {
            outln!(
                "{} {} {}: {}",
                o.vnf_instance_id,
                d.vnfc_id
                    .as_ref()
                    .map(vnfkeeper_core::model::VnfcId::as_str)
                    .unwrap_or("-"),
                d.kind
                    .event_kind()
                    .as_str()
                    .trim_start_matches("RECONCILE_"),
                d.reason
            );
        }
        if o.decisions.is_empty() {
            outln!("{}: healthy, nothing to do", o.vnf_instance_id);
        }
    }
    Ok(())
}
