//! `tacker.register_vim`: after a Tacker INSTANTIATE's management steps, the cluster registered
//! with Tacker's NFVO as a Kubernetes VIM, as Tacker's sample MgmtDriver does (`_create_vim`).
//! One journaled cloud step, check then apply ([`crate::tacker::vim::register`]: listed by name
//! first, so a resumed or retried stage finds what an earlier attempt created). Its facts come
//! from the artifacts kept by the flavour's steps (`vnfkeeper_core::artifact`), read when the
//! stage runs: the bearer token is never in the stored plan, the journal or a log line.

use super::executor::At;
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, CloudError};
use crate::store::NewEvent;
use crate::tacker::vim::{Registered, register};
use vnfkeeper_core::artifact::Artifact;
use vnfkeeper_core::model::EventKind;
use vnfkeeper_core::tacker::vim::VimRegistration;

impl<C: Cloud> Engine<C> {
    /// The `tacker.register_vim` stage `at`: registered (or found registered) → an event
    /// `TACKER_VIM_REGISTERED`; no VIM facts kept for the VNF → done with a
    /// `TACKER_VIM_SKIPPED` event and a WARN saying why; refused by Tacker (another VIM holds
    /// the name, the cluster refused the token) → the stage fails with the reason. Companion
    /// mode not connected to Tacker yet is a transient failure, retried.
    pub(super) async fn register_vim(&self, at: &At<'_>) -> Result<(), EngineError> {
        let vnf = at.op.vnf_instance_id.as_str();
        let kept = self.kept_artifacts(vnf)?;
        let text = |a: Artifact| kept.get(&a).map(|s| s.expose().as_str());
        let facts = if self.tacker.skips_vim() {
            Err("tacker.register_vim is false".to_string())
        } else {
            VimRegistration::from_kept(
                text(Artifact::AdminKubeconfig),
                text(Artifact::KubernetesVim),
            )
            .map_err(|why| why.to_string())
        };
        let (reg, token) = match facts {
            Ok(f) => f,
            Err(why) => {
                let message = format!("the cluster is not registered with Tacker as a VIM: {why}");
                return self
                    .cloud_step(
                        at.op,
                        at.key,
                        at.step_no,
                        at.name,
                        || async { Ok::<_, CloudError>(()) },
                        |()| {
                            tracing::warn!(vnf_instance_id = %vnf, reason = %why, "Kubernetes VIM not registered with Tacker");
                            self.vim_event(at, EventKind::TackerVimSkipped, &message, None)
                        },
                    )
                    .await;
            }
        };
        let link = &self.tacker;
        let (reg, token) = (&reg, &token);
        let outcome = self
            .cloud_step(
                at.op,
                at.key,
                at.step_no,
                at.name,
                || async move {
                    let Some(cloud) = link.get() else {
                        return Err(CloudError::Connection {
                            method: "GET".into(),
                            url: "nfv-orchestration:/v1.0/vims".into(),
                            message: "companion mode is not connected to Tacker (yet)".into(),
                        });
                    };
                    register(&cloud, reg, token).await
                },
                |r: &Registered| match r {
                    Registered::Done { id, created } => {
                        let message = format!(
                            "Kubernetes VIM {:?} ({}) {} Tacker as {id}",
                            reg.name,
                            reg.auth_url,
                            if *created {
                                "registered with"
                            } else {
                                "already in"
                            }
                        );
                        let evidence = serde_json::json!({
                            "vimId": id, "name": reg.name, "authUrl": reg.auth_url,
                            "created": created, "sslCaCert": reg.ssl_ca_cert.is_some(),
                        })
                        .to_string();
                        tracing::info!(vnf_instance_id = %vnf, vim_id = %id, vim_name = %reg.name, created, "Kubernetes VIM registered with Tacker");
                        self.vim_event(at, EventKind::TackerVimRegistered, &message, Some(&evidence))
                    }
                    Registered::Refused(_) => Ok(()),
                },
            )
            .await?;
        match outcome {
            Registered::Done { .. } => Ok(()),
            Registered::Refused(why) => Err(StepFailure::input(at.name, why).into()),
        }
    }

    fn vim_event(
        &self,
        at: &At<'_>,
        kind: EventKind,
        message: &str,
        evidence: Option<&str>,
    ) -> Result<(), EngineError> {
        self.db.write(|tx| {
            tx.append_event(
                &NewEvent {
                    kind,
                    vnf_instance_id: Some(&at.op.vnf_instance_id),
                    vnf_lcm_op_occ_id: Some(&at.op.id),
                    vnfc_id: None,
                    message,
                    evidence,
                },
                now(),
            )
        })?;
        Ok(())
    }
}
