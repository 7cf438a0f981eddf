//! Cinder (Block Storage API v3): volumes list/detail/show, with `limit`/`marker` pagination
//! (`volumes_links`), and create/delete (what a real Heat's `OS::Cinder::Volume` calls; the
//! simulated Heat creates its volumes in-process). Paths work with and without the project
//! segment.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::state::{Inner, VolumeRec, ts_micro};
use super::{ApiResult, Cloud, next_link, nova_err, nova_err_fn, paginate, qget, qlimit};

const MAX_LIMIT: usize = 1000;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/volume", get(versions))
        .route("/volume/", get(versions))
        .route("/volume/v3", get(versions))
        .route("/volume/v3/", get(versions))
        .route("/volume/v3/{project}", get(version_here))
        .route("/volume/v3/{project}/", get(version_here))
        .route("/volume/v3/{project}/volumes", get(list_p).post(create_p))
        .route("/volume/v3/{project}/volumes/detail", get(detail_p))
        .route(
            "/volume/v3/{project}/volumes/{id}",
            get(show_p).delete(delete_p),
        )
        .route("/volume/v3/volumes", get(list))
        .route("/volume/v3/volumes/detail", get(detail))
        .route("/volume/v3/volumes/{id}", get(show))
}

fn v3(c: &Cloud, href: String) -> Value {
    let _ = c;
    json!({"id": "v3.0", "status": "CURRENT", "version": "3.70", "min_version": "3.0",
           "updated": "2023-08-31T00:00:00Z", "links": [{"rel": "self", "href": href}],
           "media-types": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}]})
}

async fn versions(State(c): State<Arc<Cloud>>) -> Response {
    let href = format!("{}/volume/v3/", c.base);
    (
        StatusCode::MULTIPLE_CHOICES,
        axum::Json(json!({"versions": [v3(&c, href)]})),
    )
        .into_response()
}

/// The catalog URL itself answers with the version document whose self link keeps the project,
/// so that clients doing discovery keep project-scoped paths.
async fn version_here(State(c): State<Arc<Cloud>>, Path(p): Path<String>) -> ApiResult {
    // with a real control plane the catalog's project is the real Keystone's
    if p != c.project_id && c.token_check.get().is_none() {
        return Err(nova_err(
            404,
            "itemNotFound",
            format!("project {p} not found"),
        ));
    }
    let href = format!("{}/volume/v3/{p}/", c.base);
    Ok(axum::Json(json!({"version": v3(&c, href)})).into_response())
}

/// A volume's body (Block Storage API v3; `detail` = the show/detail form).
pub(crate) fn volume_json(c: &Cloud, v: &VolumeRec, detail: bool) -> Value {
    let link = json!([{"rel": "self", "href": format!("{}/volume/v3/{}/volumes/{}", c.base, c.project_id, v.id)}]);
    if !detail {
        return json!({"id": v.id, "name": v.name, "links": link});
    }
    let atts: Vec<Value> = v
        .attachments
        .iter()
        .map(|(s, d, a)| {
            json!({"id": v.id, "attachment_id": a, "volume_id": v.id, "server_id": s, "device": d,
                   "host_name": null, "attached_at": ts_micro(&v.created)})
        })
        .collect();
    json!({
        "id": v.id, "name": v.name, "size": v.size, "status": v.status, "volume_type": v.volume_type,
        "user_id": c.user_id, "os-vol-tenant-attr:tenant_id": c.project_id,
        "attachments": atts, "links": link, "availability_zone": v.az,
        "os-vol-host-attr:host": "testbed@loop#loop", "encrypted": false,
        "created_at": ts_micro(&v.created), "updated_at": ts_micro(&v.created),
        "replication_status": null, "snapshot_id": null, "metadata": {},
        "volume_image_metadata": v.image_id.as_ref().map(|i| json!({"image_id": i})),
        "description": null, "multiattach": false, "source_volid": null, "consistencygroup_id": null,
        "os-vol-mig-status-attr:migstat": null, "os-vol-mig-status-attr:name_id": null,
        "bootable": if v.image_id.is_some() { "true" } else { "false" },
        "migration_status": null, "group_id": null, "provider_id": null, "service_uuid": null,
        "shared_targets": false, "cluster_name": null, "consumes_quota": true,
    })
}

fn listing(c: &Cloud, q: &[(String, String)], detail: bool, with_project: bool) -> ApiResult {
    let items: Vec<Value> = {
        let inner: std::sync::MutexGuard<'_, Inner> = c.lock();
        let mut v: Vec<&VolumeRec> = inner
            .volumes
            .values()
            .filter(|v| qget(q, "name").is_none_or(|n| v.name == n))
            .filter(|v| qget(q, "status").is_none_or(|s| v.status == s))
            .collect();
        v.sort_by_key(|v| std::cmp::Reverse(v.seq));
        v.into_iter().map(|v| volume_json(c, v, detail)).collect()
    };
    let limit = qlimit(q, nova_err_fn)?;
    let (page, full) = paginate(items, limit, qget(q, "marker"), MAX_LIMIT, nova_err_fn)?;
    let mut body = json!({"volumes": page});
    if full && let Some(last) = super::nova::page_last(&body["volumes"]) {
        let p = if with_project {
            format!("/{}", c.project_id)
        } else {
            String::new()
        };
        let url = format!(
            "{}/volume/v3{p}/volumes{}",
            c.base,
            if detail { "/detail" } else { "" }
        );
        body["volumes_links"] = json!([next_link(
            &url,
            q,
            limit.unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
            &last
        )]);
    }
    Ok(axum::Json(body).into_response())
}

fn show_one(c: &Cloud, id: &str) -> ApiResult {
    let inner = c.lock();
    let v = inner
        .volumes
        .get(id)
        .or_else(|| inner.volumes.values().find(|v| v.name == id))
        .ok_or_else(|| {
            nova_err(
                404,
                "itemNotFound",
                format!("Volume {id} could not be found."),
            )
        })?;
    Ok(axum::Json(json!({"volume": volume_json(c, v, true)})).into_response())
}

type Q = Query<Vec<(String, String)>>;

async fn list_p(State(c): State<Arc<Cloud>>, Path(_p): Path<String>, Query(q): Q) -> ApiResult {
    listing(&c, &q, false, true)
}
async fn detail_p(State(c): State<Arc<Cloud>>, Path(_p): Path<String>, Query(q): Q) -> ApiResult {
    listing(&c, &q, true, true)
}
async fn show_p(State(c): State<Arc<Cloud>>, Path((_p, id)): Path<(String, String)>) -> ApiResult {
    show_one(&c, &id)
}
async fn list(State(c): State<Arc<Cloud>>, Query(q): Q) -> ApiResult {
    listing(&c, &q, false, false)
}
async fn detail(State(c): State<Arc<Cloud>>, Query(q): Q) -> ApiResult {
    listing(&c, &q, true, false)
}
async fn show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    show_one(&c, &id)
}

/// `POST /volumes` → 202 with the new volume, `available` at once (no backing store is made
/// before a server attaches it): `size` (GiB, a positive integer, required unless `imageRef`
/// gives one), `name`, `volume_type`, `imageRef`, `availability_zone`.
async fn create_p(
    State(c): State<Arc<Cloud>>,
    Path(_p): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> ApiResult {
    let v = body
        .get("volume")
        .filter(|v| v.is_object())
        .ok_or_else(|| {
            nova_err(
                400,
                "badRequest",
                "Missing required element 'volume' in request body.",
            )
        })?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|x| !x.is_empty());
    let size = match v.get("size") {
        None | Some(Value::Null) if s("imageRef").is_some() => 1,
        Some(Value::Number(n)) => {
            n.as_u64()
                .filter(|n| (1..=16384).contains(n))
                .ok_or_else(|| {
                    nova_err(
                        400,
                        "badRequest",
                        format!("Invalid input for field/attribute size. Value: {n}."),
                    )
                })? as u32
        }
        Some(Value::String(t)) => t
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=16384).contains(n))
            .ok_or_else(|| {
                nova_err(
                    400,
                    "badRequest",
                    format!("Invalid input for field/attribute size. Value: {t}."),
                )
            })?,
        _ => {
            return Err(nova_err(
                400,
                "badRequest",
                "Invalid input for field/attribute size.",
            ));
        }
    };
    let mut inner = c.lock();
    let id = c.volume_create(
        &mut inner,
        s("name").unwrap_or(""),
        size,
        s("volume_type"),
        s("imageRef"),
        s("availability_zone"),
    );
    let j = volume_json(&c, &inner.volumes[&id], true);
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"volume": j}))).into_response())
}

/// `DELETE /volumes/{id}` → 202; 400 while attached, 404 when unknown. The backing store goes
/// with it.
async fn delete_p(
    State(c): State<Arc<Cloud>>,
    Path((_p, id)): Path<(String, String)>,
) -> ApiResult {
    if !c.lock().volumes.contains_key(&id) {
        return Err(nova_err(
            404,
            "itemNotFound",
            format!("Volume {id} could not be found."),
        ));
    }
    c.volume_delete(&id)
        .await
        .map_err(|e| nova_err(400, "badRequest", format!("Invalid volume: {e}")))?;
    Ok(StatusCode::ACCEPTED.into_response())
}
