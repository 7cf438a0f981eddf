//! The cluster as a Kubernetes VIM in Tacker's NFVO, the I/O: Tacker's v1 API `/v1.0/vims`
//! (Tacker 16.0.0: `tacker/extensions/nfvo.py` the resource, `tacker/nfvo/nfvo_plugin.py`
//! `create_vim`/`delete_vim`, `tacker/db/nfvo/nfvo_db_plugin.py` the answers) over the
//! companion's Keystone session, and the two idempotent steps built on it: [`register`]
//! (list by name, create when absent, a 409 listed again) and [`remove`] (list by name,
//! delete ours, gone is done). What the answers mean is decided in
//! `vnfkeeper_core::tacker::vim`.
//!
//! The create body holds the cluster's bearer token: it travels only in the request body,
//! never in a log line, an error or a journal field; a refusal's message from Tacker is
//! passed on with the token masked.

use std::sync::{Arc, Mutex};

use reqwest::Method;
use serde_json::Value;

use crate::cloud::CloudError;
use crate::cloud::openstack::{NFV_ORCHESTRATION, OpenStackCloud};
use vnfkeeper_core::artifact::Artifact;
use vnfkeeper_core::model::EventKind;
use vnfkeeper_core::tacker::vim::{
    RegisterStep, VimRegistration, VimSeen, error_type, parse_vim, parse_vims, register_step,
    to_remove,
};
use vnfkeeper_core::wire::Secret;

/// The path of the VIM collection under Tacker's catalog URL.
const VIMS: [&str; 2] = ["v1.0", "vims"];

/// What `POST /v1.0/vims` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VimCreate {
    /// 201: the VIM Tacker stored.
    Created(VimSeen),
    /// 409 `DuplicateEntity`: a VIM of that name exists (e.g. ours, created by an attempt
    /// whose answer was lost).
    Duplicate,
    /// A refusal that will not change by asking again: any other 4xx, or 500
    /// `VimUnauthorizedException` (the cluster refused the bearer token when Tacker's
    /// Kubernetes VIM driver checked it). Tacker's error type and message.
    Refused {
        /// `TackerError.type`, e.g. `VimUnauthorizedException`.
        error_type: String,
        /// `TackerError.message` (or the start of the body).
        message: String,
    },
}

impl OpenStackCloud {
    /// `GET /v1.0/vims?name=<name>`: the VIMs of that name (Tacker's v1 list filters by any
    /// attribute). Errors: the cloud's; an answer not of the `{"vims": […]}` shape.
    pub async fn tacker_vims(&self, name: &str) -> Result<Vec<VimSeen>, CloudError> {
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::GET,
                &VIMS,
                &[("name", name.to_owned())],
                None,
            )
            .await?;
        let vims = parse_vims(r.body.as_bytes()).map_err(|e| r.invalid(e.to_string()))?;
        // A Tacker that ignored the filter answers every VIM: only that name counts.
        Ok(vims.into_iter().filter(|v| v.name == name).collect())
    }

    /// `POST /v1.0/vims` with `body` ([`VimRegistration::create_body`], a secret: never
    /// logged; its bearer token masked in any message of Tacker's passed on). Errors: the cloud's (a 5xx other than `VimUnauthorizedException` is one, and
    /// transient); a 201 not of the `{"vim": {…}}` shape.
    pub async fn tacker_create_vim(&self, body: &Secret<Vec<u8>>) -> Result<VimCreate, CloudError> {
        let value: Value =
            serde_json::from_slice(body.expose()).map_err(|e| CloudError::Other {
                context: "POST nfv-orchestration:/v1.0/vims".into(),
                message: format!("the VIM body is not JSON: {e}"),
            })?;
        let r = self
            .call_unchecked(NFV_ORCHESTRATION, Method::POST, &VIMS, &[], Some(&value))
            .await?;
        // Whatever Tacker's message holds, the token does not leave this function.
        let token = Secret::new(
            value["vim"]["auth_cred"]["bearer_token"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        drop(value);
        let kind = error_type(r.body.as_bytes());
        let message = || {
            let m = serde_json::from_str::<Value>(&r.body)
                .ok()
                .and_then(|v| v["TackerError"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| r.body.chars().take(300).collect());
            match token.expose().as_str() {
                "" => m,
                t => m.replace(t, "***"),
            }
        };
        match r.status {
            200 | 201 => parse_vim(r.body.as_bytes())
                .map(VimCreate::Created)
                .map_err(|e| r.invalid(e.to_string())),
            409 => Ok(VimCreate::Duplicate),
            400..=499 => Ok(VimCreate::Refused {
                error_type: kind.unwrap_or_else(|| format!("HTTP {}", r.status)),
                message: message(),
            }),
            _ if kind.as_deref() == Some("VimUnauthorizedException") => Ok(VimCreate::Refused {
                error_type: "VimUnauthorizedException".into(),
                message: message(),
            }),
            status => Err(CloudError::Api {
                method: r.method.to_string(),
                url: r.url.clone(),
                status,
                error_type: kind,
                message: message(),
            }),
        }
    }

    /// `DELETE /v1.0/vims/{id}`: `true` when deleted (204), `false` when Tacker knows no such
    /// VIM (its answer is 500 `VimNotFoundException`, not 404, or a 404). Errors: the cloud's.
    pub async fn tacker_delete_vim(&self, id: &str) -> Result<bool, CloudError> {
        let r = self
            .call_unchecked(
                NFV_ORCHESTRATION,
                Method::DELETE,
                &["v1.0", "vims", id],
                &[],
                None,
            )
            .await?;
        let kind = error_type(r.body.as_bytes());
        match r.status {
            200..=299 => Ok(true),
            404 => Ok(false),
            _ if kind.as_deref() == Some("VimNotFoundException") => Ok(false),
            status => Err(CloudError::Api {
                method: r.method.to_string(),
                url: r.url.clone(),
                status,
                error_type: kind,
                message: r.body.chars().take(300).collect(),
            }),
        }
    }
}

/// How [`register`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// Ours is in Tacker: its id, and whether this call created it.
    Done {
        /// Tacker's id of the VIM.
        id: String,
        /// Created now (else found).
        created: bool,
    },
    /// Not registered, with the reason (another VIM holds the name; Tacker refused the body
    /// or the cluster the token). The bearer token is masked in it.
    Refused(String),
}

/// Registers `reg` with Tacker unless it is there: lists by name ([`register_step`]); creates
/// it when absent; a 409 (a create whose answer was lost, or a race) is listed again. Errors:
/// the cloud's (transient ones are retried by the caller's journaled step).
pub async fn register(
    cloud: &OpenStackCloud,
    reg: &VimRegistration,
    bearer_token: &Secret<String>,
) -> Result<Registered, CloudError> {
    let taken = |id: String, what: String| {
        Registered::Refused(format!(
            "Tacker has another VIM named {:?} ({what}, id {id}); it is not replaced",
            reg.name
        ))
    };
    match register_step(reg, &cloud.tacker_vims(&reg.name).await?) {
        RegisterStep::Registered(id) => return Ok(Registered::Done { id, created: false }),
        RegisterStep::NameTaken { id, what } => return Ok(taken(id, what)),
        RegisterStep::Create => {}
    }
    match cloud
        .tacker_create_vim(&reg.create_body(bearer_token))
        .await?
    {
        VimCreate::Created(v) => Ok(Registered::Done {
            id: v.id,
            created: true,
        }),
        VimCreate::Duplicate => match register_step(reg, &cloud.tacker_vims(&reg.name).await?) {
            RegisterStep::Registered(id) => Ok(Registered::Done { id, created: false }),
            RegisterStep::NameTaken { id, what } => Ok(taken(id, what)),
            RegisterStep::Create => Err(CloudError::Other {
                context: "GET nfv-orchestration:/v1.0/vims".into(),
                message: format!(
                    "Tacker answered 409 to the VIM {:?} but lists none of that name",
                    reg.name
                ),
            }),
        },
        VimCreate::Refused {
            error_type,
            message,
        } => {
            let token = bearer_token.expose();
            let message = if token.is_empty() {
                message
            } else {
                message.replace(token.as_str(), "***")
            };
            Ok(Registered::Refused(format!(
                "Tacker refused the Kubernetes VIM {:?}: {error_type}: {message}",
                reg.name
            )))
        }
    }
}

/// Removes ours (the VIM of `reg`'s name, type and endpoint) from Tacker: lists by name
/// ([`to_remove`]) and deletes it. Returns the id deleted, `None` when none of ours is listed
/// or Tacker no longer knows it (gone is done). Errors: the cloud's.
pub async fn remove(
    cloud: &OpenStackCloud,
    reg: &VimRegistration,
) -> Result<Option<String>, CloudError> {
    let Some(id) = to_remove(reg, &cloud.tacker_vims(&reg.name).await?) else {
        return Ok(None);
    };
    Ok(cloud.tacker_delete_vim(&id).await?.then_some(id))
}

/// The companion's Tacker connection, shared with the engine once it is made (the engine's
/// `tacker.register_vim` stage talks to Tacker through the `tacker.cloud` entry, not the
/// main cloud's). Empty until companion mode connects, and outside companion mode. Also
/// carries `tacker.register_vim = false` ([`TackerLink::skip_vim`]).
#[derive(Clone, Default)]
pub struct TackerLink(
    Arc<Mutex<Option<OpenStackCloud>>>,
    Arc<std::sync::atomic::AtomicBool>,
);

impl std::fmt::Debug for TackerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TackerLink")
            .field(&self.get().map(|_| "connected"))
            .finish()
    }
}

impl TackerLink {
    /// A link already holding `cloud`.
    pub fn connected(cloud: OpenStackCloud) -> Self {
        let link = Self::default();
        link.set(cloud);
        link
    }

    /// Holds `cloud` from now on (a reconnect replaces the earlier one).
    pub fn set(&self, cloud: OpenStackCloud) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(cloud);
    }

    /// The connection, when companion mode has one.
    pub fn get(&self) -> Option<OpenStackCloud> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// From now on the `tacker.register_vim` stage registers nothing (`tacker.register_vim =
    /// false`): it is done with event `TACKER_VIM_SKIPPED`.
    pub fn skip_vim(&self) {
        self.1.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`TackerLink::skip_vim`] was called.
    pub fn skips_vim(&self) -> bool {
        self.1.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a Tacker TERMINATE's follow-up did about the VNF's Kubernetes VIM (before its retire).
#[derive(Debug)]
pub(super) enum VimAtRetire {
    /// The VNF is not one vnfkeeper adopted: nothing of its is registered.
    NotOurs,
    /// vnfkeeper registered no VIM for the VNF (no `TACKER_VIM_REGISTERED`: `tacker.register_vim
    /// = false` at its INSTANTIATE, or the registration never ran): a VIM of the same name and
    /// endpoint in Tacker is someone else's and stays.
    NotRegistered,
    /// Ours was deleted from Tacker now (its id), or was gone already (`None`).
    Removed(Option<String>, VimRegistration),
    /// Nothing to remove: no VIM facts are kept for the VNF (the reason).
    Skipped(String),
}

impl super::Companion {
    /// Before a Tacker-terminated VNF is retired: the Kubernetes VIM vnfkeeper registered for
    /// it (a `TACKER_VIM_REGISTERED` event; none: nothing is removed) removed from Tacker
    /// ([`remove`]: listed by name, ours deleted, gone is done), from the facts kept under the
    /// state directory. Runs again on every follow-up pass until the retire is committed, so
    /// a crash or a failed call is retried. Errors: Tacker's (the retire then waits for the
    /// next pass), a kept file that cannot be read.
    pub(super) async fn remove_vim(
        &self,
        occ: &vnfkeeper_core::tacker::OpOccSeen,
    ) -> Result<VimAtRetire, super::SyncError> {
        let vnf = vnfkeeper_core::model::VnfInstanceId::from(&occ.vnf_instance_id);
        let ours = self
            .db
            .with(|s| s.reader().instances())?
            .iter()
            .any(|i| i.id == vnf && i.origin == vnfkeeper_core::tacker::Origin::Tacker);
        if !ours {
            return Ok(VimAtRetire::NotOurs);
        }
        let registered = self.db.with(|s| {
            s.reader()
                .has_event_of(&vnf, EventKind::TackerVimRegistered)
        })?;
        if !registered {
            return Ok(VimAtRetire::NotRegistered);
        }
        let Some(dir) = self.db.with(|s| s.state_dir()) else {
            return Ok(VimAtRetire::Skipped(
                "the store has no state directory".into(),
            ));
        };
        let read = |a: Artifact| -> Result<Option<Secret<String>>, super::SyncError> {
            match std::fs::read_to_string(a.path(&dir, vnf.as_str())) {
                Ok(t) => Ok(Some(Secret::new(t))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(super::SyncError::Cloud(CloudError::Other {
                    context: format!("reading the kept {}", a.label()),
                    message: e.to_string(),
                })),
            }
        };
        let kubeconfig = read(Artifact::AdminKubeconfig)?;
        let vim = read(Artifact::KubernetesVim)?;
        let facts = VimRegistration::from_kept(
            kubeconfig.as_ref().map(|s| s.expose().as_str()),
            vim.as_ref().map(|s| s.expose().as_str()),
        );
        let reg = match facts {
            Ok((reg, _token)) => reg,
            Err(why) => return Ok(VimAtRetire::Skipped(why.to_string())),
        };
        let removed = remove(&self.cloud, &reg).await?;
        Ok(VimAtRetire::Removed(removed, reg))
    }

    /// After the retire is committed: the `TACKER_VIM_REMOVED` or `TACKER_VIM_SKIPPED` event
    /// (with a WARN saying why; no event when vnfkeeper registered none), and the VNF's kept
    /// artifacts removed (the cluster is gone).
    /// Errors: the store's.
    pub(super) fn vim_removed_or_skipped(
        &self,
        occ: &vnfkeeper_core::tacker::OpOccSeen,
        vim: VimAtRetire,
    ) -> Result<(), crate::store::StoreError> {
        let vnf = vnfkeeper_core::model::VnfInstanceId::from(&occ.vnf_instance_id);
        let event = match &vim {
            VimAtRetire::NotOurs => return Ok(()),
            VimAtRetire::NotRegistered => None,
            VimAtRetire::Removed(id, reg) => Some((
                EventKind::TackerVimRemoved,
                match id {
                    Some(id) => format!(
                        "Kubernetes VIM {:?} ({}) removed from Tacker ({id}) after Tacker's TERMINATE {}",
                        reg.name, reg.auth_url, occ.id
                    ),
                    None => format!(
                        "Kubernetes VIM {:?} ({}) not in Tacker any more at Tacker's TERMINATE {}",
                        reg.name, reg.auth_url, occ.id
                    ),
                },
                Some(
                    serde_json::json!({"vimId": id, "name": reg.name, "authUrl": reg.auth_url,
                                       "tackerOpOccId": occ.id})
                    .to_string(),
                ),
            )),
            VimAtRetire::Skipped(why) => {
                tracing::warn!(vnf_instance_id = %vnf, reason = %why, "Kubernetes VIM not removed from Tacker");
                Some((
                    EventKind::TackerVimSkipped,
                    format!("no Kubernetes VIM removed from Tacker: {why}"),
                    None,
                ))
            }
        };
        if let Some((kind, message, evidence)) = event {
            let now = vnfkeeper_core::model::Timestamp(chrono::Utc::now());
            self.db.write(|tx| {
                tx.append_event(
                    &crate::store::NewEvent {
                        kind,
                        vnf_instance_id: Some(&vnf),
                        vnf_lcm_op_occ_id: None,
                        vnfc_id: None,
                        message: &message,
                        evidence: evidence.as_deref(),
                    },
                    now,
                )
            })?;
        }
        if let Some(dir) = self.db.with(|s| s.state_dir()) {
            for a in Artifact::ALL {
                let path = a.path(&dir, vnf.as_str());
                match std::fs::remove_file(&path) {
                    Ok(()) => tracing::info!(path = %path.display(), "{} removed", a.label()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot remove the {}", a.label())
                    }
                }
            }
        }
        Ok(())
    }
}
