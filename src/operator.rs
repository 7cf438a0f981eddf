//! Operator controls over the database: `vnfkeeper pause` and `vnfkeeper resume` (maintenance
//! pauses, see `model::pause`). `cli.rs` parses the arguments and loads the settings; these
//! functions check the values, write through [`Store::write`] (each change with its audit
//! event) and print what changed.

use anyhow::{Context as _, anyhow, bail};

use crate::config::Settings;
use crate::store::Store;
use vnfkeeper_core::model::{MaintenancePause, PauseScope, Timestamp, pause};

/// The longest `--reason` accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// `vnfkeeper pause` / `resume` target: one VNF instance or, with `--all`, every one.
#[derive(Debug, clap::Args)]
pub struct PauseTarget {
    /// The VNF instance (vnfInstanceId, as `vnfkeeper status` lists it).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub vnf_instance_id: Option<String>,
    /// Every VNF instance, also those instantiated later (a pause of its own, if any, applies
    /// to a VNF first).
    #[arg(long)]
    pub all: bool,
}

impl PauseTarget {
    fn scope(&self) -> anyhow::Result<PauseScope> {
        match (&self.vnf_instance_id, self.all) {
            (_, true) => Ok(PauseScope::All),
            (Some(id), false) => {
                vnfkeeper_core::wire::rules::identifier(id)
                    .map_err(|e| anyhow!("VNF instance id {id:?}: {e}"))?;
                Ok(PauseScope::Vnf(id.into()))
            }
            (None, false) => bail!("name a VNF instance or give --all"),
        }
    }
}

fn open(settings: &Settings) -> anyhow::Result<Store> {
    if !settings.database.exists() {
        bail!(
            "database {} does not exist (has the daemon run?)",
            settings.database.display()
        );
    }
    // The database is the service user's (0640, group vnfkeeper: members read it, only the
    // service and root write it). Say so plainly rather than fail on the first file refused.
    if rustix::fs::access(&settings.database, rustix::fs::Access::WRITE_OK).is_err() {
        bail!(
            "this command writes the database {}, which you may only read: run it as root or as the service's user",
            settings.database.display()
        );
    }
    Ok(Store::open(&settings.database)?)
}

/// `vnfkeeper pause VNF|--all [--reason TEXT] [--until TIME]`: stores the pause (replacing an
/// earlier one of the same scope) with a `MAINTENANCE_PAUSED` event naming `by`. Errors: an
/// unknown VNF instance, a reason with control characters or over [`MAX_REASON_BYTES`], an
/// `--until` that is neither an RFC 3339 time nor a span (`90m`, `2h`, `1d`) in the future.
pub fn pause(
    settings: &Settings,
    target: &PauseTarget,
    reason: Option<&str>,
    until: Option<&str>,
    by: &str,
    now: Timestamp,
) -> anyhow::Result<()> {
    let scope = target.scope()?;
    if let Some(r) = reason {
        vnfkeeper_core::wire::rules::plain_text(r).map_err(|e| anyhow!("--reason: {e}"))?;
        if r.len() > MAX_REASON_BYTES {
            bail!("--reason: longer than {MAX_REASON_BYTES} bytes");
        }
    }
    let until = until
        .map(|u| pause::parse_until(u, now).map_err(|e| anyhow!("--until {e}")))
        .transpose()?;
    let mut store = open(settings)?;
    if let PauseScope::Vnf(id) = &scope
        && !store.reader().instances()?.iter().any(|i| &i.id == id)
    {
        bail!(
            "no VNF instance {id:?} in {} (`vnfkeeper status` lists them)",
            settings.database.display()
        );
    }
    let p = MaintenancePause {
        scope,
        paused_by: by.to_owned(),
        reason: reason.map(str::to_owned),
        since: now,
        until,
    };
    let old = store
        .write(|tx| tx.set_maintenance_pause(&p, now))
        .context("cannot store the pause")?;
    let what = match &p.scope {
        PauseScope::All => "every VNF instance".to_owned(),
        PauseScope::Vnf(id) => format!("VNF instance {id}"),
    };
    outln!("{what}: {}", p.describe());
    if let Some(old) = old {
        outln!("  replaces: {}", old.describe());
    }
    outln!(
        "reconcile keeps observing and recording, but starts no automatic heal{}; operations you submit still run",
        if p.until.is_some() {
            " until then"
        } else {
            " until `vnfkeeper resume`"
        }
    );
    Ok(())
}

/// `vnfkeeper resume VNF|--all`: lifts the pause with a `MAINTENANCE_RESUMED` event naming
/// `by`; the next reconcile pass acts on what it observes. Errors: no such pause (naming the
/// pauses there are).
pub fn resume(
    settings: &Settings,
    target: &PauseTarget,
    by: &str,
    now: Timestamp,
) -> anyhow::Result<()> {
    let scope = target.scope()?;
    let mut store = open(settings)?;
    let Some(old) = store.write(|tx| tx.lift_maintenance_pause(&scope, by, now))? else {
        let there: Vec<String> = store
            .reader()
            .maintenance_pauses()?
            .iter()
            .map(|p| p.scope.as_key().to_owned())
            .collect();
        bail!(
            "no maintenance pause of {} (pauses stored: {})",
            match &scope {
                PauseScope::All => "--all".to_owned(),
                PauseScope::Vnf(id) => id.to_string(),
            },
            if there.is_empty() {
                "none".to_owned()
            } else {
                there.join(", ")
            }
        );
    };
    outln!("resumed {}: was {}", old.scope.as_key(), old.describe());
    if old.scope != PauseScope::All
        && let Some(all) = store
            .reader()
            .maintenance_pauses()?
            .into_iter()
            .find(|p| p.scope == PauseScope::All && p.active_at(now))
    {
        outln!(
            "note: every VNF instance is still paused ({}); `vnfkeeper resume --all` lifts that",
            all.describe()
        );
    } else {
        outln!("the next reconcile pass heals what it finds (`vnfkeeper plan` shows what)");
    }
    Ok(())
}
