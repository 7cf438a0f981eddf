//! Tacker's VNF LCM API v2 (`/vnflcm/v2`, SOL003 v3.3.1 as Tacker implements it) over the same
//! Keystone session as the other services: catalog type `nfv-orchestration`, the `Version`
//! header on every request (see `openstack.rs`). What companion mode reads and writes:
//! subscriptions (SOL003 §5.4.18–19), operation occurrences (§5.4.12–13) and VNF instances
//! (§5.4.2–3), decoded into the core's `companion` types at this boundary.
//!
//! Pagination: Tacker pages these lists only when an operator sets its `*_page_size` options
//! (default 0: no paging); a `Link: rel="next"` answer is not followed yet.

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use super::CloudError;
use super::openstack::{NFV_ORCHESTRATION, OpenStackCloud, Reply};
use crate::companion::{InstanceSeen, OpOccSeen, SubscriptionSeen};
use crate::model::InstantiationState;
use crate::model::OperationState;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubscriptionWire {
    id: String,
    callback_uri: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OpOccWire {
    id: String,
    vnf_instance_id: String,
    operation: String,
    operation_state: String,
    #[serde(default)]
    is_automatic_invocation: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstanceWire {
    id: String,
    vnfd_id: String,
    instantiation_state: String,
    #[serde(default)]
    instantiated_vnf_info: Option<InstantiatedWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstantiatedWire {
    #[serde(default)]
    vnfc_resource_info: Vec<Value>,
}

fn instance(reply: &Reply, w: InstanceWire) -> Result<InstanceSeen, CloudError> {
    Ok(InstanceSeen {
        state: InstantiationState::parse(&w.instantiation_state).ok_or_else(|| {
            reply.invalid(format!(
                "vnf instance {}: unknown instantiationState {:?}",
                w.id, w.instantiation_state
            ))
        })?,
        vnfc_count: w
            .instantiated_vnf_info
            .map_or(0, |i| i.vnfc_resource_info.len()),
        id: w.id,
        vnfd_id: w.vnfd_id,
    })
}

impl OpenStackCloud {
    /// `GET /vnflcm/v2/subscriptions`: every subscription (id and `callbackUri`). Errors: the
    /// cloud's ([`CloudError`]); an answer that is not a list of subscriptions.
    pub async fn tacker_subscriptions(&self) -> Result<Vec<SubscriptionSeen>, CloudError> {
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::GET,
                &["vnflcm", "v2", "subscriptions"],
                &[],
                None,
            )
            .await?;
        let v: Vec<SubscriptionWire> = r.json()?;
        Ok(v.into_iter()
            .map(|s| SubscriptionSeen {
                id: s.id,
                callback_uri: s.callback_uri,
            })
            .collect())
    }

    /// `POST /vnflcm/v2/subscriptions` with `body` (an `LccnSubscriptionRequest`; it carries
    /// the callback's credentials and is never logged). Tacker tests the callback URI first.
    /// Returns the new subscription's id. Errors: the cloud's (a 4xx when the callback test
    /// failed); an answer without `id`.
    pub async fn tacker_create_subscription(&self, body: &Value) -> Result<String, CloudError> {
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::POST,
                &["vnflcm", "v2", "subscriptions"],
                &[],
                Some(body),
            )
            .await?;
        let s: SubscriptionWire = r.json()?;
        Ok(s.id)
    }

    /// `DELETE /vnflcm/v2/subscriptions/{id}`; a 404 (gone already) is success. Errors: the
    /// cloud's.
    pub async fn tacker_delete_subscription(&self, id: &str) -> Result<(), CloudError> {
        match self
            .call(
                NFV_ORCHESTRATION,
                Method::DELETE,
                &["vnflcm", "v2", "subscriptions", id],
                &[],
                None,
            )
            .await
        {
            Err(CloudError::Api { status: 404, .. }) | Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET /vnflcm/v2/vnf_lcm_op_occs`, with a SOL013 attribute `filter` when given. Errors:
    /// the cloud's; an entry that does not decode (unknown `operationState`).
    pub async fn tacker_op_occs(&self, filter: Option<&str>) -> Result<Vec<OpOccSeen>, CloudError> {
        let query: Vec<(&str, String)> = filter
            .map(|f| ("filter", f.to_owned()))
            .into_iter()
            .collect();
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::GET,
                &["vnflcm", "v2", "vnf_lcm_op_occs"],
                &query,
                None,
            )
            .await?;
        let v: Vec<OpOccWire> = r.json()?;
        v.into_iter()
            .map(|o| {
                Ok(OpOccSeen {
                    state: OperationState::parse(&o.operation_state).ok_or_else(|| {
                        r.invalid(format!(
                            "op occ {}: unknown operationState {:?}",
                            o.id, o.operation_state
                        ))
                    })?,
                    id: o.id,
                    vnf_instance_id: o.vnf_instance_id,
                    operation: o.operation,
                    is_automatic_invocation: o.is_automatic_invocation,
                })
            })
            .collect()
    }

    /// `GET /vnflcm/v2/vnf_instances`: every instance. Errors: the cloud's; an entry that does
    /// not decode.
    pub async fn tacker_instances(&self) -> Result<Vec<InstanceSeen>, CloudError> {
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::GET,
                &["vnflcm", "v2", "vnf_instances"],
                &[],
                None,
            )
            .await?;
        let v: Vec<InstanceWire> = r.json()?;
        v.into_iter().map(|w| instance(&r, w)).collect()
    }

    /// `GET /vnflcm/v2/<path…>`: the reply, or `None` when Tacker answers 404 (the resource is
    /// gone or never existed). Errors: the cloud's other errors.
    async fn tacker_get_opt(&self, path: &[&str]) -> Result<Option<Reply>, CloudError> {
        let full: Vec<&str> = ["vnflcm", "v2"]
            .into_iter()
            .chain(path.iter().copied())
            .collect();
        match self
            .call(NFV_ORCHESTRATION, Method::GET, &full, &[], None)
            .await
        {
            Ok(r) => Ok(Some(r)),
            Err(CloudError::Api { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /vnflcm/v2/vnf_instances/{id}`; `None` when Tacker answers 404. Errors: the
    /// cloud's; an answer that does not decode.
    pub async fn tacker_instance(&self, id: &str) -> Result<Option<InstanceSeen>, CloudError> {
        match self.tacker_get_opt(&["vnf_instances", id]).await? {
            Some(r) => {
                let w: InstanceWire = r.json()?;
                instance(&r, w).map(Some)
            }
            None => Ok(None),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OpOccParamsWire {
    #[serde(default)]
    operation_params: Option<Value>,
}

impl OpenStackCloud {
    /// `GET /vnflcm/v2/vnf_lcm_op_occs/{id}` (every field; the list leaves `operationParams`
    /// out unless asked): the occurrence's `operationParams` (SOL003 §5.5.2.13), `Value::Null`
    /// when it has none; `None` when Tacker answers 404. It may hold Tacker's
    /// `vimConnectionInfo` credentials: never log it. Errors: the cloud's; an answer that is not
    /// an object.
    pub async fn tacker_op_occ_params(&self, id: &str) -> Result<Option<Value>, CloudError> {
        match self.tacker_get_opt(&["vnf_lcm_op_occs", id]).await? {
            Some(r) => {
                let w: OpOccParamsWire = r.json()?;
                Ok(Some(w.operation_params.unwrap_or(Value::Null)))
            }
            None => Ok(None),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OccStartedWire {
    id: String,
    operation: String,
    start_time: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OccErrorWire {
    #[serde(default)]
    error: Option<Value>,
}

impl OpenStackCloud {
    /// `POST /vnflcm/v2/vnf_instances/{id}/heal` with `body` (a `HealVnfRequest`, SOL003
    /// §5.5.2.9): Tacker answers 202 with the new op occ in `Location` (§5.4.9.3.1). Returns its
    /// id (the last path segment). Errors: the cloud's (409: another operation of the instance
    /// is in progress); an answer without `Location`.
    pub async fn tacker_heal(&self, id: &str, body: &Value) -> Result<String, CloudError> {
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::POST,
                &["vnflcm", "v2", "vnf_instances", id, "heal"],
                &[],
                Some(body),
            )
            .await?;
        r.location
            .as_deref()
            .and_then(|l| l.trim_end_matches('/').rsplit('/').next())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| r.invalid("heal answered without a Location header".into()))
    }

    /// `GET /vnflcm/v2/vnf_lcm_op_occs?filter=(eq,vnfInstanceId,<id>)`: each occurrence's id,
    /// operation and `startTime`. Errors: the cloud's; an answer that does not decode.
    pub async fn tacker_occs_started(
        &self,
        vnf_instance_id: &str,
    ) -> Result<Vec<crate::companion::OccStarted>, CloudError> {
        let filter = crate::companion::filter_in("vnfInstanceId", &[vnf_instance_id.to_owned()])
            .unwrap_or_default();
        let r = self
            .call(
                NFV_ORCHESTRATION,
                Method::GET,
                &["vnflcm", "v2", "vnf_lcm_op_occs"],
                &[("filter", filter)],
                None,
            )
            .await?;
        let v: Vec<Value> = r.json()?;
        let mut out = Vec::new();
        for o in v {
            let w: OccStartedWire =
                serde_json::from_value(o).map_err(|e| r.invalid(e.to_string()))?;
            let at = chrono::DateTime::parse_from_rfc3339(&w.start_time)
                .map_err(|e| r.invalid(format!("op occ {}: startTime: {e}", w.id)))?;
            out.push(crate::companion::OccStarted {
                id: w.id,
                operation: w.operation,
                start_time: crate::model::Timestamp(at.with_timezone(&chrono::Utc)),
            });
        }
        Ok(out)
    }

    /// `GET /vnflcm/v2/vnf_lcm_op_occs/{id}`: its `error` (a ProblemDetails) when it has one;
    /// `None` when it has none or Tacker answers 404. Errors: the cloud's.
    pub async fn tacker_op_occ_error(&self, id: &str) -> Result<Option<Value>, CloudError> {
        match self.tacker_get_opt(&["vnf_lcm_op_occs", id]).await? {
            Some(r) => Ok(r.json::<OccErrorWire>()?.error),
            None => Ok(None),
        }
    }
}
