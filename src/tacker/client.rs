//! Tacker's VNF LCM API v2 (`/vnflcm/v2`, SOL003 v3.3.1 as Tacker implements it) over the same
//! Keystone session as the other services: catalog type `nfv-orchestration`, the `Version`
//! header on every request (see `openstack.rs`). What companion mode reads and writes:
//! subscriptions (SOL003 §5.4.18–19), operation occurrences (§5.4.12–13) and VNF instances
//! (§5.4.2–3), decoded into the core's `companion` types at this boundary.
//!
//! Pagination: Tacker pages these lists when an operator sets its `*_page_size` options
//! (default 0: no paging), answering `Link: <URL>;rel="next"` (RFC 8288) where URL is the
//! request's with `nextpage_opaque_marker` (SOL013 §5.4.2.3). [`OpenStackCloud::tacker_list`]
//! follows it: only the marker is taken from the link, and the next page is asked of the same
//! endpoint through the same session (a link never sends the token elsewhere), at most
//! [`MAX_PAGES`] pages, a marker seen twice being an error.

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cloud::CloudError;
use crate::cloud::openstack::{NFV_ORCHESTRATION, OpenStackCloud, Reply};
use vnfkeeper_core::model::InstantiationState;
use vnfkeeper_core::model::OperationState;
use vnfkeeper_core::tacker::{InstanceSeen, OpOccSeen, SubscriptionSeen};

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

/// The most pages one list may have (with Tacker's page sizes, thousands of entries each).
pub const MAX_PAGES: usize = 1000;

/// The `nextpage_opaque_marker` of `reply`'s `Link: <…>;rel="next"`; `None` on the last page.
/// Errors: a `Link` header that does not parse, or a next link without the marker.
fn next_marker(reply: &Reply) -> Result<Option<String>, CloudError> {
    let Some(link) = &reply.link else {
        return Ok(None);
    };
    let base = url::Url::parse(&reply.url)
        .map_err(|e| reply.invalid(format!("request URL does not parse: {e}")))?;
    let links = http_link::parse_link_header(link, &base)
        .map_err(|e| reply.invalid(format!("Link header does not parse: {e:?}")))?;
    let Some(next) = links.iter().find(|l| l.rel.eq_ignore_ascii_case("next")) else {
        return Ok(None);
    };
    next.target
        .query_pairs()
        .find(|(k, _)| k == "nextpage_opaque_marker")
        .map(|(_, v)| Some(v.into_owned()))
        .ok_or_else(|| reply.invalid("the next page's link has no nextpage_opaque_marker".into()))
}

impl OpenStackCloud {
    /// `GET /vnflcm/v2/<path>` with `query`, every page: the entries of each page decoded as
    /// `T`, in order, and the first page's reply (for error messages). Errors: the cloud's; a
    /// page that is not a list of `T`; more than [`MAX_PAGES`] pages or a marker seen twice
    /// (a server that pages without end).
    pub(crate) async fn tacker_list<T: DeserializeOwned>(
        &self,
        path: &[&str],
        query: &[(&str, String)],
    ) -> Result<(Vec<T>, Reply), CloudError> {
        let mut out = Vec::new();
        let mut first = None;
        let mut seen: Vec<String> = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut q = query.to_vec();
            if let Some(m) = &marker {
                q.push(("nextpage_opaque_marker", m.clone()));
            }
            let r = self
                .call(NFV_ORCHESTRATION, Method::GET, path, &q, None)
                .await?;
            out.extend(r.json::<Vec<T>>()?);
            let next = next_marker(&r)?;
            let stop = match &next {
                None => true,
                Some(m) if seen.contains(m) || seen.len() + 1 >= MAX_PAGES => {
                    return Err(r.invalid(format!(
                        "paging does not end (marker {m} after {} pages)",
                        seen.len() + 1
                    )));
                }
                Some(_) => false,
            };
            if first.is_none() {
                first = Some(r);
            }
            if stop {
                break;
            }
            let m = next.unwrap_or_default();
            seen.push(m.clone());
            marker = Some(m);
        }
        Ok((out, first.expect("one page was read")))
    }

    /// `GET /vnflcm/v2/subscriptions`: every subscription (id and `callbackUri`). Errors: the
    /// cloud's ([`CloudError`]); an answer that is not a list of subscriptions.
    pub async fn tacker_subscriptions(&self) -> Result<Vec<SubscriptionSeen>, CloudError> {
        let (v, _): (Vec<SubscriptionWire>, _) = self
            .tacker_list(&["vnflcm", "v2", "subscriptions"], &[])
            .await?;
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
        let (v, r): (Vec<OpOccWire>, _) = self
            .tacker_list(&["vnflcm", "v2", "vnf_lcm_op_occs"], &query)
            .await?;
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
        let (v, r): (Vec<InstanceWire>, _) = self
            .tacker_list(&["vnflcm", "v2", "vnf_instances"], &[])
            .await?;
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
    ) -> Result<Vec<vnfkeeper_core::tacker::OccStarted>, CloudError> {
        let filter =
            vnfkeeper_core::tacker::filter_in("vnfInstanceId", &[vnf_instance_id.to_owned()])
                .unwrap_or_default();
        let (v, r): (Vec<OccStartedWire>, _) = self
            .tacker_list(&["vnflcm", "v2", "vnf_lcm_op_occs"], &[("filter", filter)])
            .await?;
        let mut out = Vec::new();
        for w in v {
            let start_time = vnfkeeper_core::tacker::parse_tacker_time(&w.start_time)
                .map_err(|e| r.invalid(format!("op occ {}: startTime: {e}", w.id)))?;
            out.push(vnfkeeper_core::tacker::OccStarted {
                id: w.id,
                operation: w.operation,
                start_time,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(link: Option<&str>) -> Reply {
        Reply {
            status: 200,
            method: Method::GET,
            url: "http://tacker/vnflcm/v2/vnf_instances".into(),
            body: "[]".into(),
            location: None,
            date: None,
            link: link.map(str::to_owned),
        }
    }

    #[test]
    fn next_marker_as_tacker_writes_the_link() {
        // Tacker's Pager: `<URL>;rel="next"`, no space, the marker last in the query.
        let r = reply(Some(
            "<http://192.0.2.5:9890/vnflcm/v2/vnf_lcm_op_occs?filter=(eq,operation,HEAL)&nextpage_opaque_marker=6f1c2a>;rel=\"next\"",
        ));
        assert_eq!(next_marker(&r).unwrap().as_deref(), Some("6f1c2a"));
        assert_eq!(next_marker(&reply(None)).unwrap(), None);
        let prev = reply(Some("<http://t/x?nextpage_opaque_marker=a>; rel=\"prev\""));
        assert_eq!(next_marker(&prev).unwrap(), None);
        assert!(next_marker(&reply(Some("<http://t/x?page=2>; rel=\"next\""))).is_err());
        assert!(next_marker(&reply(Some("not a link"))).is_err());
    }
}
