//! Heat orchestration calls (Orchestration API v1, `{catalog}/stacks/…`), used by the
//! [`Cloud`](super::Cloud) implementation of [`OpenStackCloud`].
//!
//! Statuses are `<ACTION>_<STATE>` (Heat API v1 `stack_status`/`resource_status`: ACTION
//! `INIT`, `CREATE`, `UPDATE`, `DELETE`, `ROLLBACK`, `CHECK`, …; STATE `IN_PROGRESS`,
//! `COMPLETE`, `FAILED`). Heal = `mark_unhealthy` on the resource in the stack that owns it (a
//! nested stack for ASG members) + a PATCH update; scale = PATCH with a new `desired_capacity` in
//! the `nfv` parameter.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openstack::{ORCHESTRATION, OpenStackCloud};
use super::types::{RawResource, Stack, StackCreate, StackRef, StackResource};
use super::{CloudError, StackStatus};

/// `{"stack": {...}}`.
#[derive(Deserialize)]
struct StackRoot {
    stack: Stack,
}

/// `{"stack": {"id": ..., "links": [...]}}` answer of a create.
#[derive(Deserialize)]
struct CreatedRoot {
    stack: Created,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

/// `{"resources": [...]}`.
#[derive(Deserialize)]
struct ResourcesRoot {
    #[serde(default)]
    resources: Vec<RawResource>,
}

impl OpenStackCloud {
    /// `POST /stacks` → the new stack's reference (201).
    pub(crate) async fn heat_create(&self, req: &StackCreate) -> Result<StackRef, CloudError> {
        let body = req.body(true);
        let reply = self
            .call(ORCHESTRATION, Method::POST, &["stacks"], &[], Some(&body))
            .await?;
        let created: CreatedRoot = reply.json()?;
        tracing::info!(stack = %req.stack_name, id = %created.stack.id, "heat stack create accepted");
        Ok(StackRef::new(req.stack_name.clone(), created.stack.id))
    }

    /// `GET /stacks/{name}/{id}`.
    pub(crate) async fn heat_show(&self, s: &StackRef) -> Result<Stack, CloudError> {
        let reply = self
            .call(
                ORCHESTRATION,
                Method::GET,
                &["stacks", &s.name, &s.id],
                &[],
                None,
            )
            .await?;
        Ok(reply.json::<StackRoot>()?.stack)
    }

    /// Polls until one of `done`, a failure, or the deadline (see [`super::Cloud::wait_stack`]).
    pub(crate) async fn heat_wait(
        &self,
        s: &StackRef,
        done: &[StackStatus],
        deadline: Duration,
    ) -> Result<Stack, CloudError> {
        let started = tokio::time::Instant::now();
        let end = started + deadline;
        let wanted = done
            .iter()
            .map(StackStatus::as_str)
            .collect::<Vec<_>>()
            .join(",");
        let mut last_status = None;
        let mut n = 0u32;
        loop {
            match self.heat_show(s).await {
                Ok(st) => {
                    if done.contains(&st.stack_status) {
                        tracing::debug!(stack = %s, status = %st.stack_status, "stack wait done");
                        return Ok(st);
                    }
                    if st.is_failed() {
                        return Err(CloudError::StackFailed {
                            stack: s.to_string(),
                            status: st.stack_status,
                            reason: st.stack_status_reason,
                        });
                    }
                    last_status = Some(st.stack_status);
                }
                Err(e) if e.is_not_found() && done.contains(&StackStatus::DeleteComplete) => {
                    return Ok(Stack {
                        id: s.id.clone(),
                        stack_name: s.name.clone(),
                        stack_status: StackStatus::DeleteComplete,
                        stack_status_reason: "stack not found (deleted)".into(),
                        ..Stack::default()
                    });
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(stack = %s, error = %e, "polling the stack failed; will retry");
                }
                Err(e) => return Err(e),
            }
            let now = tokio::time::Instant::now();
            if now >= end {
                return Err(CloudError::WaitTimeout {
                    stack: s.to_string(),
                    status: last_status,
                    waited: now - started,
                    wanted,
                });
            }
            let sleep = self.poll_policy().delay(n).min(end - now);
            n = n.saturating_add(1);
            tokio::time::sleep(sleep).await;
        }
    }

    /// `GET /stacks/{name}/{id}/resources?nested_depth=N`.
    pub(crate) async fn heat_resources(
        &self,
        s: &StackRef,
        depth: u32,
    ) -> Result<Vec<StackResource>, CloudError> {
        let q = [("nested_depth", depth.to_string())];
        let reply = self
            .call(
                ORCHESTRATION,
                Method::GET,
                &["stacks", &s.name, &s.id, "resources"],
                &q,
                None,
            )
            .await?;
        let root: ResourcesRoot = reply.json()?;
        Ok(root
            .resources
            .into_iter()
            .map(|r| r.into_resource(s))
            .collect())
    }

    /// `PATCH /stacks/{name}/{id}` with `{"parameters": …}` (202).
    pub(crate) async fn heat_patch(
        &self,
        s: &StackRef,
        parameters: Value,
    ) -> Result<(), CloudError> {
        if !parameters.is_object() {
            return Err(CloudError::Other {
                context: format!("PATCH stack {s}"),
                message: "parameters must be a JSON object".into(),
            });
        }
        let body = json!({ "parameters": parameters });
        self.call(
            ORCHESTRATION,
            Method::PATCH,
            &["stacks", &s.name, &s.id],
            &[],
            Some(&body),
        )
        .await?;
        tracing::info!(stack = %s, "heat stack update (PATCH) accepted");
        Ok(())
    }

    /// `PUT /stacks/{name}/{id}` with template, files, parameters (202).
    pub(crate) async fn heat_put(&self, s: &StackRef, req: &StackCreate) -> Result<(), CloudError> {
        let body = req.body(false);
        self.call(
            ORCHESTRATION,
            Method::PUT,
            &["stacks", &s.name, &s.id],
            &[],
            Some(&body),
        )
        .await?;
        tracing::info!(stack = %s, "heat stack update (PUT) accepted");
        Ok(())
    }

    /// `PATCH /stacks/{name}/{id}/resources/{res}` with `mark_unhealthy: true` (200).
    pub(crate) async fn heat_mark_unhealthy(
        &self,
        owner: &StackRef,
        res: &str,
        reason: &str,
    ) -> Result<(), CloudError> {
        let body = json!({ "mark_unhealthy": true, "resource_status_reason": reason });
        let path = [
            "stacks",
            owner.name.as_str(),
            owner.id.as_str(),
            "resources",
            res,
        ];
        self.call(ORCHESTRATION, Method::PATCH, &path, &[], Some(&body))
            .await?;
        tracing::info!(stack = %owner, resource = res, reason, "heat resource marked unhealthy");
        Ok(())
    }

    /// `DELETE /stacks/{name}/{id}` (204); 404 = already gone.
    pub(crate) async fn heat_delete(&self, s: &StackRef) -> Result<(), CloudError> {
        match self
            .call(
                ORCHESTRATION,
                Method::DELETE,
                &["stacks", &s.name, &s.id],
                &[],
                None,
            )
            .await
        {
            Ok(_) => {
                tracing::info!(stack = %s, "heat stack delete accepted");
                Ok(())
            }
            Err(e) if e.is_not_found() => {
                tracing::debug!(stack = %s, "heat stack already gone");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// `GET /stacks/{name}` (302 → `/stacks/{name}/{id}`, followed by the HTTP client).
    pub(crate) async fn heat_find(&self, name: &str) -> Result<Option<StackRef>, CloudError> {
        let reply = self
            .call_unchecked(ORCHESTRATION, Method::GET, &["stacks", name], &[], None)
            .await?;
        if reply.status == 404 {
            return Ok(None);
        }
        if reply.status >= 400 {
            let (error_type, message) = super::error::error_message(&reply.body);
            return Err(CloudError::Api {
                method: "GET".into(),
                url: reply.url,
                status: reply.status,
                error_type,
                message,
            });
        }
        if (300..400).contains(&reply.status) {
            // A redirect to another origin is not followed (the token stays home); Heat's
            // Location names the stack: `…/stacks/{name}/{id}`. Heat finds only live stacks by
            // name, so no status check is needed.
            return match reply.location.as_deref().and_then(StackRef::from_href) {
                Some(r) => Ok(Some(r)),
                None => Err(reply.invalid(format!(
                    "redirect {} without a stack Location",
                    reply.status
                ))),
            };
        }
        let st = reply.json::<StackRoot>()?.stack;
        if st.stack_status == StackStatus::DeleteComplete {
            return Ok(None);
        }
        let name = if st.stack_name.is_empty() {
            name.to_string()
        } else {
            st.stack_name
        };
        Ok(Some(StackRef::new(name, st.id)))
    }
}
