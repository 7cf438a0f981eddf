//! Companion mode with OpenStack Tacker, the I/O: keeping exactly one subscription of
//! vnfkeeper's in Tacker (SOL003 v3.3.1 §5.4.18, SOL013 §8 for its authentication), and polling
//! Tacker's API — the truth; notifications are only hints — into the store. Decisions are the
//! core's (`companion::plan_subscriptions`, `decide_occ`, `followup`); the daemon runs
//! [`Companion::sync`] at start, on each notification and every `tacker.poll_interval_secs`
//! (`daemon/companion.rs`).

use serde_json::{Value, json};

use crate::cloud::{CloudError, OpenStackCloud};
use crate::companion::{InstanceSeen, filter_in, plan_subscriptions};
use crate::config::TackerSettings;
use crate::intake::wire::Secret;
use crate::intake::wire::notification::NotificationType;
use crate::model::Timestamp;
use crate::store::{Db, PollRecord, StoreError};

/// Why a sync did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Tacker (or Keystone) answered with an error or not at all.
    #[error("Tacker: {0}")]
    Cloud(#[from] CloudError),
    /// The store refused a read or write.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// `[tacker]` has no `callback_uri`: nothing to subscribe with.
    #[error("tacker.callback_uri is not set")]
    NoCallbackUri,
}

/// What keeping the subscription did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionOutcome {
    /// The subscription kept (and stored).
    pub id: String,
    /// Whether it was created now (none of ours existed).
    pub created: bool,
    /// Extra copies of ours deleted.
    pub deleted: Vec<String>,
}

/// One sync's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    /// The subscription step.
    pub subscription: SubscriptionOutcome,
    /// Managed instances Tacker showed.
    pub instances: usize,
    /// Operation occurrences of those Tacker listed.
    pub occs: usize,
    /// What the poll recorded.
    pub recorded: PollRecord,
}

/// Companion mode's client: Tacker through Keystone, the store, `[tacker]`.
pub struct Companion {
    cloud: OpenStackCloud,
    db: Db,
    settings: TackerSettings,
    password: Secret<String>,
}

impl std::fmt::Debug for Companion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Companion")
            .field("callback_uri", &self.settings.callback_uri)
            .field("vnfd_ids", &self.settings.vnfd_ids)
            .finish_non_exhaustive()
    }
}

impl Companion {
    /// A client over a connected cloud session (the `tacker.cloud` entry) and the Basic
    /// password Tacker must present (from `tacker.password_file`).
    pub fn new(
        cloud: OpenStackCloud,
        db: Db,
        settings: TackerSettings,
        password: Secret<String>,
    ) -> Self {
        Self {
            cloud,
            db,
            settings,
            password,
        }
    }

    /// The `LccnSubscriptionRequest` (SOL003 §5.5.2.15): the managed `vnfdIds` and the three
    /// notification types, `callbackUri`, BASIC authentication with the endpoint's credentials.
    /// It holds the password: never log it.
    fn subscription_request(&self, callback_uri: &str) -> Value {
        json!({
            "filter": {
                "vnfInstanceSubscriptionFilter": {"vnfdIds": self.settings.vnfd_ids},
                "notificationTypes": NotificationType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            },
            "callbackUri": callback_uri,
            "authentication": {
                "authType": ["BASIC"],
                "paramsBasic": {
                    "userName": self.settings.username,
                    "password": self.password.expose(),
                },
            },
        })
    }

    /// Makes sure exactly one subscription of ours (by `callbackUri`) exists: keeps the stored
    /// one (or the first of ours), deletes extra copies, creates one when none exists (Tacker
    /// tests the callback first), and stores its id. Errors: Tacker's, the store's; no
    /// `callback_uri`.
    pub async fn ensure_subscription(&self) -> Result<SubscriptionOutcome, SyncError> {
        let uri = self
            .settings
            .callback_uri
            .clone()
            .ok_or(SyncError::NoCallbackUri)?;
        let seen = self.cloud.tacker_subscriptions().await?;
        let stored = self
            .db
            .with(|s| s.reader().tacker_subscription())?
            .map(|s| s.subscription_id);
        let plan = plan_subscriptions(&seen, &uri, stored.as_deref());
        for id in &plan.delete {
            tracing::info!(subscription_id = %id, "deleting an extra Tacker subscription of ours");
            self.cloud.tacker_delete_subscription(id).await?;
        }
        let (id, created) = match plan.keep {
            Some(id) => (id, false),
            None => {
                let id = self
                    .cloud
                    .tacker_create_subscription(&self.subscription_request(&uri))
                    .await?;
                tracing::info!(subscription_id = %id, callback_uri = %uri, "Tacker subscription created");
                (id, true)
            }
        };
        let now = Timestamp(chrono::Utc::now());
        self.db
            .write(|tx| tx.set_tacker_subscription(&id, &uri, now))?;
        Ok(SubscriptionOutcome {
            id,
            created,
            deleted: plan.delete,
        })
    }

    /// Reads Tacker's truth about the managed instances — the instance list, `GET
    /// /vnf_instances/{id}` of each whose `vnfdId` is managed, their op occs filtered by
    /// `vnfInstanceId` — and records it in one transaction. Errors: Tacker's, the store's.
    pub async fn poll(&self) -> Result<(usize, usize, PollRecord), SyncError> {
        let listed = self.cloud.tacker_instances().await?;
        let mut instances: Vec<InstanceSeen> = Vec::new();
        for i in listed
            .iter()
            .filter(|i| self.settings.vnfd_ids.contains(&i.vnfd_id))
        {
            if let Some(full) = self.cloud.tacker_instance(&i.id).await? {
                instances.push(full);
            }
        }
        let ids: Vec<String> = instances.iter().map(|i| i.id.clone()).collect();
        let occs = match filter_in("vnfInstanceId", &ids) {
            Some(f) => self.cloud.tacker_op_occs(Some(&f)).await?,
            None => Vec::new(),
        };
        // Tacker may ignore an unknown filter: keep only the managed instances' occurrences.
        let occs: Vec<_> = occs
            .into_iter()
            .filter(|o| ids.contains(&o.vnf_instance_id))
            .collect();
        let now = Timestamp(chrono::Utc::now());
        let recorded = self
            .db
            .write(|tx| tx.record_tacker_poll(&occs, &instances, now))?;
        Ok((instances.len(), occs.len(), recorded))
    }

    /// [`Companion::ensure_subscription`], then [`Companion::poll`].
    pub async fn sync(&self) -> Result<SyncOutcome, SyncError> {
        let subscription = self.ensure_subscription().await?;
        let (instances, occs, recorded) = self.poll().await?;
        Ok(SyncOutcome {
            subscription,
            instances,
            occs,
            recorded,
        })
    }
}
