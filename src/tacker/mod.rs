//! Companion mode with OpenStack Tacker, the I/O: keeping exactly one subscription of
//! vnfkeeper's in Tacker (SOL003 v3.3.1 §5.4.18, SOL013 §8 for its authentication), and polling
//! Tacker's API — the truth; notifications are only hints — into the store. Decisions are the
//! core's (`tacker::plan_subscriptions`, `decide_occ`, `followup`); the daemon runs
//! [`Companion::sync`] at start, on each notification and every `tacker.poll_interval_secs`
//! (`daemon/tacker.rs`).

mod client;
pub mod credentials;
pub mod hooks;
pub mod notifications;
pub mod oauth;
pub mod vim;
use serde_json::{Value, json};

use std::path::PathBuf;

use crate::cloud::{Cloud as _, CloudError, ErrorKind, OpenStackCloud};
use crate::config::tacker::{TackerAuth, TackerSettings};
use crate::store::{
    Db, HealAdoption, PendingFollowup, PollRecord, Retired, StoreError, WaitingHeal,
};
use vnfkeeper_core::model::{OpOccId, OperationState, ProblemDetails, Timestamp, VnfInstanceId};
use vnfkeeper_core::tacker::{
    Adoption, Followup, InstanceSeen, OpOccSeen, adoption, filter_in, heal_sent_before,
    instantiate_envelope, plan_subscriptions, tacker_heal_request, tacker_vnfc_instance_ids,
};
use vnfkeeper_core::wire::Secret;
use vnfkeeper_core::wire::notification::NotificationType;

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

/// What acting on the pending follow-ups did (one [`Companion::follow_up`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowupOutcome {
    /// vnfkeeper operations created (origin `tacker`), by id.
    pub adopted: Vec<String>,
    /// Follow-ups refused, with the reason recorded.
    pub refused: usize,
    /// VNFs retired.
    pub retired: usize,
    /// Retirements and heals waiting for an unfinished operation of the VNF.
    pub waiting: usize,
    /// Heals vnfkeeper asked Tacker for now (`POST …/heal`, or found sent before a crash).
    pub heals_sent: usize,
    /// vnfkeeper HEALs Tacker's heal COMPLETED for: their post-steps are queued.
    pub heals_released: usize,
    /// vnfkeeper HEALs ended FAILED_TEMP (Tacker's heal failed, or could not be asked for).
    pub heals_failed: usize,
    /// vnfkeeper HEALs not sent yet because a target server in `ERROR` is still being stopped
    /// ([`Companion::stop_errored_targets`]): the daemon syncs again soon.
    pub heals_deferred: usize,
}

/// The `vnfcInstanceId`s (vnfkeeper's VNFC ids) of a waiting HEAL's stored request `params`;
/// empty for the whole VNF.
fn heal_targets(params: &Value) -> Vec<String> {
    params["vnfcInstanceId"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the target servers of a heal through Tacker are ready for Heat to replace
/// ([`Companion::stop_errored_targets`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetsStopped {
    /// None is in `ERROR` (any stopped is `SHUTOFF`), or the wait is over: send the heal.
    Ready,
    /// A server in `ERROR` was asked to stop and is not `SHUTOFF` yet: send it later.
    NotYet,
}

/// How long one sync waits for a server in `ERROR` it stopped to become `SHUTOFF`.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How often it looks meanwhile.
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(500);
/// How long after a heal started it is sent to Tacker although a target is still in `ERROR`.
const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Where intake's package handling reads and writes, for a Tacker INSTANTIATE's package.
#[derive(Debug, Clone)]
pub struct PackagePaths {
    /// `packages_dir`: relative `[tacker.packages]` paths are resolved against it.
    pub packages_dir: PathBuf,
    /// The package store (`<state>/package-store`): the snapshot is taken there.
    pub package_store: PathBuf,
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
    /// What was done about the follow-ups.
    pub followups: FollowupOutcome,
}

/// Companion mode's client: Tacker through Keystone, the store, `[tacker]`.
pub struct Companion {
    cloud: OpenStackCloud,
    db: Db,
    settings: TackerSettings,
    password: Secret<String>,
    packages: PackagePaths,
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
    /// A client over a connected cloud session (the `tacker.cloud` entry), the Basic
    /// password Tacker must present (from `tacker.password_file`), and intake's package paths.
    pub fn new(
        cloud: OpenStackCloud,
        db: Db,
        settings: TackerSettings,
        password: Secret<String>,
        packages: PackagePaths,
    ) -> Self {
        Self {
            cloud,
            db,
            settings,
            password,
            packages,
        }
    }

    /// The `LccnSubscriptionRequest` (SOL003 §5.5.2.15): the managed `vnfdIds` and the three
    /// notification types, `callbackUri`, and the `authentication` (SOL013 §8.3.4) of
    /// `tacker.auth_type`: BASIC with the endpoint's credentials, or OAUTH2_CLIENT_CREDENTIALS
    /// with the client credentials and vnfkeeper's token endpoint
    /// ([`TackerSettings::token_endpoint`]). It holds the password: never log it.
    fn subscription_request(&self, callback_uri: &str) -> Value {
        let authentication = match self.settings.auth_type {
            TackerAuth::Basic => json!({
                "authType": ["BASIC"],
                "paramsBasic": {
                    "userName": self.settings.username,
                    "password": self.password.expose(),
                },
            }),
            TackerAuth::Oauth2ClientCredentials => json!({
                "authType": ["OAUTH2_CLIENT_CREDENTIALS"],
                "paramsOauth2ClientCredentials": {
                    "clientId": self.settings.username,
                    "clientPassword": self.password.expose(),
                    "tokenEndpoint": self.settings.token_endpoint(),
                },
            }),
        };
        json!({
            "filter": {
                "vnfInstanceSubscriptionFilter": {"vnfdIds": self.settings.vnfd_ids},
                "notificationTypes": NotificationType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            },
            "callbackUri": callback_uri,
            "authentication": authentication,
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

    /// Acts on every recorded follow-up not acted on yet (each keyed by Tacker's
    /// `vnfLcmOpOccId`, so a duplicate notification, a re-poll or a restart acts once):
    /// `RETIRE` retires the VNF ([`crate::store::Tx::retire_tacker_vnf`]); `MANAGE` of an
    /// INSTANTIATE reads the op occ's `operationParams`, has intake examine it as a spool
    /// request of the package `[tacker.packages]` maps the `vnfdId` to, and creates the
    /// vnfkeeper INSTANTIATE of origin `tacker` — or records why not (a refused body, no
    /// package); `MANAGE` of a HEAL or SCALE creates the vnfkeeper HEAL or SCALE of origin
    /// `tacker` (or releases the HEAL vnfkeeper asked Tacker for). Errors: Tacker's, the store's (what was done
    /// before stays done).
    pub async fn follow_up(&self) -> Result<FollowupOutcome, SyncError> {
        let mut out = FollowupOutcome::default();
        self.send_heals(&mut out).await?;
        let pending = self.db.with(|s| s.reader().tacker_followups_pending())?;
        for p in pending {
            match p.followup {
                Followup::None => {}
                Followup::Retire => {
                    // The VIM first; while Tacker's VIM API fails the retire waits (the other
                    // follow-ups go on) and is tried again at the next pass.
                    let vim = match self.remove_vim(&p.occ).await {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::warn!(vnf_instance_id = %p.occ.vnf_instance_id, tacker_op_occ_id = %p.occ.id, error = %e, "cannot remove the Kubernetes VIM from Tacker; the retirement waits");
                            out.waiting += 1;
                            continue;
                        }
                    };
                    let now = Timestamp(chrono::Utc::now());
                    match self.db.write(|tx| tx.retire_tacker_vnf(&p.occ, now))? {
                        Retired::Now => {
                            self.vim_removed_or_skipped(&p.occ, vim)?;
                            tracing::info!(vnf_instance_id = %p.occ.vnf_instance_id, tacker_op_occ_id = %p.occ.id, "Tacker terminated the VNF: retired");
                            out.retired += 1;
                        }
                        Retired::Waiting => out.waiting += 1,
                        Retired::NotAdopted => {}
                    }
                }
                Followup::Manage if adoption(&p.occ.operation) == Adoption::Heal => {
                    match self.adopt_heal(&p.occ).await? {
                        HealAdoption::Created(id) => out.adopted.push(id),
                        HealAdoption::Released(id) => {
                            tracing::info!(vnf_instance_id = %p.occ.vnf_instance_id, tacker_op_occ_id = %p.occ.id, vnf_lcm_op_occ_id = %id, "Tacker's HEAL asked by vnfkeeper COMPLETED: post-steps queued");
                            out.heals_released += 1;
                        }
                        HealAdoption::Before => {}
                        HealAdoption::Waiting => out.waiting += 1,
                        HealAdoption::Refused(problem) => {
                            tracing::warn!(vnf_instance_id = %p.occ.vnf_instance_id, tacker_op_occ_id = %p.occ.id, reason = %problem.detail, "Tacker operation not followed by management steps");
                            out.refused += 1;
                        }
                    }
                }
                Followup::Manage if adoption(&p.occ.operation) == Adoption::Scale => {
                    match self.adopt_scale(&p.occ).await? {
                        HealAdoption::Created(id) => out.adopted.push(id),
                        HealAdoption::Before | HealAdoption::Released(_) => {}
                        HealAdoption::Waiting => out.waiting += 1,
                        HealAdoption::Refused(problem) => {
                            tracing::warn!(vnf_instance_id = %p.occ.vnf_instance_id, tacker_op_occ_id = %p.occ.id, reason = %problem.detail, "Tacker operation not followed by management steps");
                            out.refused += 1;
                        }
                    }
                }
                Followup::Manage => match self.adopt(&p).await? {
                    Ok(op_id) => out.adopted.extend(op_id),
                    Err(problem) => {
                        tracing::warn!(vnf_instance_id = %p.occ.vnf_instance_id, tacker_op_occ_id = %p.occ.id, reason = %problem.detail, "Tacker operation not followed by management steps");
                        let now = Timestamp(chrono::Utc::now());
                        self.db
                            .write(|tx| tx.refuse_tacker_followup(&p.occ, &problem, now))?;
                        out.refused += 1;
                    }
                },
            }
        }
        Ok(out)
    }

    /// Healing through Tacker: for each vnfkeeper HEAL waiting for Tacker —
    /// not sent: looks in Tacker's op occs of the instance for a HEAL started after ours that no
    /// operation is linked to (sent before a crash: `tacker::heal_sent_before`), else sends
    /// `POST /vnflcm/v2/vnf_instances/{id}/heal` (`vnfcInstanceId` in Tacker's ids,
    /// `tacker::tacker_vnfc_instance_ids`); Tacker's op occ id is stored in the transaction
    /// that marks it sent. Sent, and Tacker's occurrence recorded FAILED or ROLLED_BACK: ends
    /// FAILED_TEMP with Tacker's `error`. A request Tacker refuses (4xx) ends it FAILED_TEMP
    /// too, but a 409 (another operation of the instance in progress) leaves it for a later
    /// sync. Errors: Tacker's (other than a 4xx), the store's.
    async fn send_heals(&self, out: &mut FollowupOutcome) -> Result<(), SyncError> {
        let waiting = self.db.with(|s| s.reader().tacker_heals_waiting())?;
        for w in waiting {
            let now = || Timestamp(chrono::Utc::now());
            if let Some(occ_id) = &w.tacker_op_occ_id {
                if matches!(
                    w.tacker_state,
                    Some(OperationState::Failed | OperationState::RolledBack)
                ) {
                    let error = self.cloud.tacker_op_occ_error(occ_id).await?;
                    let detail = format!(
                        "Tacker's HEAL {occ_id} ended {}: {}",
                        w.tacker_state.map_or("", |s| s.as_str()),
                        error
                            .as_ref()
                            .and_then(|e| e["detail"].as_str())
                            .unwrap_or("no error given")
                    );
                    let problem = ProblemDetails::new(500, detail, vec![]);
                    self.db.write(|tx| {
                        tx.fail_tacker_heal(&OpOccId::from(&w.op_id), &problem, now())
                    })?;
                    tracing::warn!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, tacker_op_occ_id = %occ_id, reason = %problem.detail, "heal through Tacker failed");
                    out.heals_failed += 1;
                }
                continue;
            }
            let started = self.cloud.tacker_occs_started(&w.vnf_instance_id).await?;
            let linked = self.db.with(|s| s.reader().linked_tacker_op_occs())?;
            let occ_id = match heal_sent_before(w.start_time, &started, &linked) {
                Some(id) => {
                    tracing::info!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, tacker_op_occ_id = %id, "heal sent to Tacker before a restart: not sent again");
                    id
                }
                None if self.stop_errored_targets(&w).await? == TargetsStopped::NotYet => {
                    out.heals_deferred += 1;
                    continue;
                }
                None => match self.request_heal(&w).await? {
                    Ok(id) => id,
                    Err(problem) if problem.status == 409 => {
                        // Another operation of the instance is in progress in Tacker: later.
                        tracing::info!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, "Tacker is busy with the VNF (409): the heal is sent at a later sync");
                        continue;
                    }
                    Err(problem) => {
                        self.db.write(|tx| {
                            tx.fail_tacker_heal(&OpOccId::from(&w.op_id), &problem, now())
                        })?;
                        tracing::warn!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, reason = %problem.detail, "heal through Tacker not sent");
                        out.heals_failed += 1;
                        continue;
                    }
                },
            };
            let occ = OpOccSeen {
                id: occ_id.clone(),
                vnf_instance_id: w.vnf_instance_id.clone(),
                operation: "HEAL".into(),
                state: OperationState::Starting,
                is_automatic_invocation: true,
            };
            self.db
                .write(|tx| tx.mark_tacker_heal_sent(&OpOccId::from(&w.op_id), &occ, now()))?;
            tracing::info!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, tacker_op_occ_id = %occ_id, "heal sent to Tacker");
            out.heals_sent += 1;
        }
        Ok(())
    }

    /// Before vnfkeeper asks Tacker for heal `w`: stops (`os-stop`) each target server Nova
    /// reports in `ERROR`, and says whether every such server is `SHUTOFF` now.
    ///
    /// Tacker heals a VNFC by marking its server unhealthy and updating the stack (Tacker
    /// 16.0.0 `openstack.py` `heal`); Heat creates the replacement before it deletes the old
    /// server and detaches the old server's ports for it (`OS::Nova::Server`
    /// `prepare_for_replace`) — except from a server in `ERROR`, whose port then stays bound,
    /// and Nova refuses a port bound to another server (Compute API "Create Server": 409, "Port
    /// … is still in use"). Nova stops a server in `ERROR`, and a stopped server's ports are
    /// detached: the same pre-step as a heal vnfkeeper runs itself (`engine::heal`, 2c).
    ///
    /// Waits up to [`STOP_WAIT`] for `SHUTOFF`; [`TargetsStopped::NotYet`] leaves the heal for
    /// a sync soon after. Once the heal has waited [`STOP_LIMIT`] since it started, it is sent
    /// anyway (logged): Tacker then reports Heat's outcome. Errors: Nova's, the store's.
    async fn stop_errored_targets(&self, w: &WaitingHeal) -> Result<TargetsStopped, SyncError> {
        let op_id = OpOccId::from(&w.op_id);
        let (params, vnfcs) = self.db.with(|s| {
            let r = s.reader();
            Ok::<_, StoreError>((
                r.operation_params(&op_id)?,
                r.vnfcs(&VnfInstanceId::from(&w.vnf_instance_id))?,
            ))
        })?;
        let params: Value = params
            .and_then(|(p, _)| serde_json::from_str(&p).ok())
            .unwrap_or(Value::Null);
        let targets = heal_targets(&params);
        let servers: Vec<&str> = vnfcs
            .iter()
            .filter(|v| targets.is_empty() || targets.iter().any(|t| t == v.id.as_str()))
            .filter_map(|v| v.server_id.as_deref())
            .collect();
        let started = std::time::Instant::now();
        let mut stopping = Vec::new();
        loop {
            stopping.clear();
            for &id in &servers {
                let Some(server) = self.cloud.server(id).await? else {
                    continue;
                };
                if server.status != "ERROR" {
                    continue;
                }
                match self.cloud.stop_server(id).await {
                    Ok(()) => {
                        tracing::info!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, server_id = %id, "server in ERROR stopped before the heal through Tacker, so that Heat detaches its ports");
                    }
                    // Already being stopped (or otherwise busy): wait for it.
                    Err(e) if matches!(e.kind(), ErrorKind::Conflict) => {}
                    Err(e) => return Err(e.into()),
                }
                stopping.push(id);
            }
            if stopping.is_empty() {
                return Ok(TargetsStopped::Ready);
            }
            if started.elapsed() >= STOP_WAIT {
                break;
            }
            tokio::time::sleep(STOP_POLL).await;
        }
        let waited = (chrono::Utc::now() - w.start_time.0)
            .to_std()
            .unwrap_or_default();
        if waited >= STOP_LIMIT {
            tracing::warn!(vnf_instance_id = %w.vnf_instance_id, vnf_lcm_op_occ_id = %w.op_id, servers = ?stopping, "servers still in ERROR after the stop asked for them; the heal is sent to Tacker anyway");
            return Ok(TargetsStopped::Ready);
        }
        Ok(TargetsStopped::NotYet)
    }

    /// Sends Tacker the heal of vnfkeeper's waiting HEAL `w`: `Ok(Ok(occ id))`, or
    /// `Ok(Err(problem))` when it cannot be asked for now (a VNFC without a Tacker id, a 4xx
    /// with its status).
    /// Errors: Tacker's other errors, the store's.
    async fn request_heal(
        &self,
        w: &WaitingHeal,
    ) -> Result<Result<String, ProblemDetails>, SyncError> {
        let (params, vnfcs) = self.db.with(|s| {
            let r = s.reader();
            Ok::<_, StoreError>((
                r.operation_params(&OpOccId::from(&w.op_id))?,
                r.vnfcs(&VnfInstanceId::from(&w.vnf_instance_id))?,
            ))
        })?;
        let params: Value = params
            .and_then(|(p, _)| serde_json::from_str(&p).ok())
            .unwrap_or(Value::Null);
        let targets = heal_targets(&params);
        let ids = match tacker_vnfc_instance_ids(&targets, &vnfcs) {
            Ok(ids) => ids,
            Err(why) => return Ok(Err(ProblemDetails::new(422, why, vec![]))),
        };
        let body = tacker_heal_request(
            &ids,
            &format!("vnfkeeper reconcile (VnfLcmOpOcc {})", w.op_id),
            params.get("additionalParams"),
        );
        match self.cloud.tacker_heal(&w.vnf_instance_id, &body).await {
            Ok(id) => Ok(Ok(id)),
            Err(CloudError::Api { status, .. }) if (400..500).contains(&status) => {
                Ok(Err(ProblemDetails::new(
                    status,
                    format!(
                        "Tacker refused the heal of {} ({status})",
                        w.vnf_instance_id
                    ),
                    vec![],
                )))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The vnfkeeper HEAL for a Tacker HEAL COMPLETED: Tacker's `operationParams.vnfcInstanceId`
    /// (absent: the whole VNF) mapped to vnfkeeper's VNFCs in the store's transaction. Errors:
    /// Tacker's, the store's.
    async fn adopt_heal(&self, occ: &OpOccSeen) -> Result<HealAdoption, SyncError> {
        let now = Timestamp(chrono::Utc::now());
        let Some(params) = self.cloud.tacker_op_occ_params(&occ.id).await? else {
            let problem = ProblemDetails::new(
                404,
                format!("Tacker no longer knows op occ {}", occ.id),
                vec![],
            );
            self.db
                .write(|tx| tx.refuse_tacker_followup(occ, &problem, now))?;
            return Ok(HealAdoption::Refused(problem));
        };
        let ids = match &params["vnfcInstanceId"] {
            Value::Null => Vec::new(),
            Value::Array(a) if a.iter().all(Value::is_string) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => {
                let problem = ProblemDetails::new(
                    400,
                    "operationParams.vnfcInstanceId must be an array of strings",
                    vec![],
                );
                self.db
                    .write(|tx| tx.refuse_tacker_followup(occ, &problem, now))?;
                return Ok(HealAdoption::Refused(problem));
            }
        };
        let out = self.db.write(|tx| tx.adopt_tacker_heal(occ, &ids, now))?;
        if let HealAdoption::Created(id) = &out {
            tracing::info!(vnf_instance_id = %occ.vnf_instance_id, tacker_op_occ_id = %occ.id, vnf_lcm_op_occ_id = %id, "Tacker HEAL COMPLETED: heal_end queued");
        }
        Ok(out)
    }

    /// The vnfkeeper SCALE for a Tacker SCALE COMPLETED: Tacker's `operationParams` must be a
    /// `ScaleVnfRequest` (SOL003 §5.5.2.5); the store's transaction creates the operation once.
    /// Errors: Tacker's, the store's.
    async fn adopt_scale(&self, occ: &OpOccSeen) -> Result<HealAdoption, SyncError> {
        let now = Timestamp(chrono::Utc::now());
        let refuse = |status: u16, why: String| -> Result<HealAdoption, SyncError> {
            let problem = ProblemDetails::new(status, why, vec![]);
            self.db
                .write(|tx| tx.refuse_tacker_followup(occ, &problem, now))?;
            Ok(HealAdoption::Refused(problem))
        };
        let Some(params) = self.cloud.tacker_op_occ_params(&occ.id).await? else {
            return refuse(404, format!("Tacker no longer knows op occ {}", occ.id));
        };
        let request: vnfkeeper_core::wire::sol003::ScaleVnfRequest =
            match serde_json::from_value(params) {
                Ok(r) => r,
                Err(e) => {
                    return refuse(
                        400,
                        format!("operationParams is not a ScaleVnfRequest: {e}"),
                    );
                }
            };
        let out = self
            .db
            .write(|tx| tx.adopt_tacker_scale(occ, &request, now))?;
        if let HealAdoption::Created(id) = &out {
            tracing::info!(vnf_instance_id = %occ.vnf_instance_id, tacker_op_occ_id = %occ.id, vnf_lcm_op_occ_id = %id, "Tacker SCALE COMPLETED: management steps queued");
        }
        Ok(out)
    }

    /// The vnfkeeper operation for a `MANAGE` follow-up (`Ok(Some(id))`; `Ok(None)`: made
    /// before), or the problem that refuses it. Errors: Tacker's, the store's.
    async fn adopt(
        &self,
        p: &PendingFollowup,
    ) -> Result<Result<Option<String>, ProblemDetails>, SyncError> {
        let occ: &OpOccSeen = &p.occ;
        if let Adoption::Unsupported(why) = adoption(&occ.operation) {
            return Ok(Err(ProblemDetails::new(501, why, vec![])));
        }
        let Some(package) = p
            .vnfd_id
            .as_ref()
            .and_then(|v| self.settings.packages.get(v))
        else {
            return Ok(Err(ProblemDetails::new(
                422,
                format!(
                    "vnfdId {} has no entry in [tacker.packages]: no flavour to run",
                    p.vnfd_id.as_deref().unwrap_or("(unknown)")
                ),
                vec![],
            )));
        };
        let Some(params) = self.cloud.tacker_op_occ_params(&occ.id).await? else {
            return Ok(Err(ProblemDetails::new(
                404,
                format!("Tacker no longer knows op occ {}", occ.id),
                vec![],
            )));
        };
        let envelope = instantiate_envelope(
            &occ.vnf_instance_id,
            &package.display().to_string(),
            &params,
        );
        let bytes = serde_json::to_vec(&envelope).unwrap_or_default();
        let paths = self.packages.clone();
        let name = format!("tacker:{}", occ.id);
        let examined = tokio::task::spawn_blocking(move || {
            let ctx = crate::intake::spool::IntakeContext {
                packages_dir: &paths.packages_dir,
                package_store: &paths.package_store,
                cloud_configured: true,
            };
            crate::intake::examine_external(&name, &bytes, &ctx)
        })
        .await
        .unwrap_or_else(|e| {
            Err(ProblemDetails::new(
                500,
                format!("examining the request failed: {e}"),
                vec![],
            ))
        });
        let (body, snapshot) = match examined {
            Ok(x) => x,
            Err(problem) => return Ok(Err(problem)),
        };
        let now = Timestamp(chrono::Utc::now());
        let created = self
            .db
            .write(|tx| tx.adopt_tacker_instantiate(occ, &body, snapshot.as_ref(), now))?;
        if let Some(id) = &created {
            tracing::info!(vnf_instance_id = %occ.vnf_instance_id, tacker_op_occ_id = %occ.id, vnf_lcm_op_occ_id = %id, "Tacker INSTANTIATE COMPLETED: management steps queued");
        }
        Ok(Ok(created))
    }

    /// [`Companion::ensure_subscription`], [`Companion::poll`], then
    /// [`Companion::follow_up`].
    pub async fn sync(&self) -> Result<SyncOutcome, SyncError> {
        let subscription = self.ensure_subscription().await?;
        let (instances, occs, recorded) = self.poll().await?;
        let followups = self.follow_up().await?;
        Ok(SyncOutcome {
            subscription,
            instances,
            occs,
            recorded,
            followups,
        })
    }
}
