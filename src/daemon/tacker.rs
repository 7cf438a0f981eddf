//! The companion-mode task (`[tacker]` with `callback_uri`): connects to Tacker through the
//! `tacker.cloud` clouds.yaml entry (retried every [`RETRY`] while it fails), then runs
//! [`crate::tacker::Companion::sync`] — the subscription checked, Tacker polled — at start, after
//! each newly recorded notification (the endpoint's wake-up), and every
//! `tacker.poll_interval_secs`. Its own task: nothing here touches the main loop.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::cloud::OpenStackCloud;
use crate::config::CloudSettings;
use crate::config::tacker::TackerSettings;
use crate::store::Db;
use crate::tacker::{Companion, PackagePaths};
use vnfkeeper_core::wire::Secret;

/// How soon a failed connection or sync is tried again (at most the poll interval).
const RETRY: Duration = Duration::from_secs(10);

/// Starts the task; abort the handle to stop it.
pub(super) fn spawn(
    settings: TackerSettings,
    cloud: CloudSettings,
    password: Secret<String>,
    db: Db,
    wake: Arc<Notify>,
    link: crate::tacker::vim::TackerLink,
    packages: PackagePaths,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let retry = RETRY.min(settings.poll_interval);
        let companion = loop {
            match OpenStackCloud::connect(&cloud.clouds_yaml, &cloud.cloud, cloud.api_timeout).await
            {
                Ok(c) => {
                    link.set(c.clone());
                    break Companion::new(
                        c,
                        db.clone(),
                        settings.clone(),
                        password.clone(),
                        packages.clone(),
                    );
                }
                Err(e) => {
                    tracing::warn!(cloud = %cloud.cloud, error = %e, "cannot reach Keystone for Tacker; trying again");
                    tokio::time::sleep(retry).await;
                }
            }
        };
        loop {
            let next = match companion.sync().await {
                Ok(o) => {
                    tracing::info!(
                        subscription_id = %o.subscription.id,
                        subscription_created = o.subscription.created,
                        subscriptions_deleted = o.subscription.deleted.len(),
                        instances = o.instances,
                        op_occs = o.occs,
                        new_op_occs = o.recorded.new_occs,
                        new_states = o.recorded.new_states,
                        adopted = o.followups.adopted.len(),
                        refused = o.followups.refused,
                        retired = o.followups.retired,
                        retire_waiting = o.followups.waiting,
                        heals_deferred = o.followups.heals_deferred,
                        "Tacker synced"
                    );
                    // A heal waits for a server to stop: look again soon.
                    if o.followups.heals_deferred > 0 {
                        retry
                    } else {
                        settings.poll_interval
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Tacker sync failed; trying again");
                    retry
                }
            };
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(next) => {}
            }
        }
    })
}
