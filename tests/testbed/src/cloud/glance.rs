//! Glance (Image API v2): images list/show (read-only). A few images exist from the start; any
//! image name or id a template or server asks for is recorded as an image too. Additional
//! properties (`Cloud::set_image_properties`, e.g. `os_distro`, `os_version`) are top-level keys.
//! `GET /v2/schemas/image` answers the image schema (python-glanceclient, as real Heat uses it,
//! validates every image it reads against it).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::state::{ImageRec, ts};
use super::{ApiResult, Cloud, enc, nova_err, nova_err_fn, paginate, qget, qlimit};

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/image", get(versions))
        .route("/image/", get(versions))
        .route("/image/v2", get(versions))
        .route("/image/v2/", get(versions))
        .route("/image/v2/images", get(list))
        .route("/image/v2/images/{id}", get(show))
        .route("/image/v2/schemas/image", get(schema))
}

async fn versions(State(c): State<Arc<Cloud>>) -> Response {
    (
        StatusCode::MULTIPLE_CHOICES,
        axum::Json(json!({"versions": [{"id": "v2.16", "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{}/image/v2/", c.base)}]}]})),
    )
        .into_response()
}

fn image_json(i: &ImageRec) -> Value {
    let mut v = json!({
        "id": i.id, "name": i.name, "status": "active", "visibility": "public", "protected": false,
        "disk_format": "qcow2", "container_format": "bare", "size": 1_073_741_824u64, "min_disk": 0, "min_ram": 0,
        "checksum": null, "os_hidden": false, "tags": [], "created_at": ts(&i.created), "updated_at": ts(&i.created),
        "self": format!("/v2/images/{}", i.id), "file": format!("/v2/images/{}/file", i.id), "schema": "/v2/schemas/image",
    });
    // additional properties are top-level keys of the image (Image API v2), never replacing a
    // core one
    if let Some(obj) = v.as_object_mut() {
        for (k, val) in &i.properties {
            obj.entry(k.clone()).or_insert_with(|| json!(val));
        }
    }
    v
}

async fn list(State(c): State<Arc<Cloud>>, Query(q): Query<Vec<(String, String)>>) -> ApiResult {
    let items: Vec<Value> = {
        let inner = c.lock();
        let mut v: Vec<&ImageRec> = inner
            .images
            .values()
            .filter(|i| qget(&q, "name").is_none_or(|n| i.name == n))
            .collect();
        v.sort_by(|a, b| b.created.cmp(&a.created).then(a.id.cmp(&b.id)));
        v.into_iter().map(image_json).collect()
    };
    let limit = qlimit(&q, nova_err_fn)?;
    let (page, full) = paginate(items, limit, qget(&q, "marker"), 1000, nova_err_fn)?;
    let mut body = json!({"images": page, "first": "/v2/images", "schema": "/v2/schemas/images"});
    if full && let Some(last) = super::nova::page_last(&body["images"]) {
        body["next"] = json!(format!(
            "/v2/images?marker={}&limit={}",
            enc(&last),
            limit.unwrap_or(1000)
        ));
    }
    Ok(axum::Json(body).into_response())
}

async fn show(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    let inner = c.lock();
    let i = inner
        .images
        .get(&id)
        .ok_or_else(|| nova_err(404, "itemNotFound", format!("No image found with ID {id}")))?;
    Ok(axum::Json(image_json(i)).into_response())
}

/// `GET /v2/schemas/image`: the JSON schema of an image (Image API v2 "Show image schema"): the
/// core properties the testbed answers, additional properties strings.
async fn schema() -> Response {
    let s = |d: &str| json!({"type": "string", "description": d});
    let ns = |d: &str| json!({"type": ["null", "string"], "description": d});
    let ni = |d: &str| json!({"type": ["null", "integer"], "description": d});
    axum::Json(json!({
        "name": "image",
        "properties": {
            "id": {"type": "string", "pattern": "^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$", "description": "An identifier for the image"},
            "name": {"type": ["null", "string"], "maxLength": 255, "description": "Descriptive name for the image"},
            "status": {"type": "string", "readOnly": true, "enum": ["queued", "saving", "active", "killed", "deleted", "uploading", "importing", "pending_delete", "deactivated"], "description": "Status of the image"},
            "visibility": {"type": "string", "enum": ["community", "public", "private", "shared"], "description": "Scope of image accessibility"},
            "protected": {"type": "boolean", "description": "If true, image will not be deletable."},
            "os_hidden": {"type": "boolean", "description": "If true, image will not appear in default image list response."},
            "checksum": {"type": ["null", "string"], "readOnly": true, "maxLength": 32, "description": "md5 hash of image contents."},
            "os_hash_algo": ns("Algorithm to calculate the os_hash_value"),
            "os_hash_value": ns("Hexdigest of the image contents"),
            "owner": ns("Owner of the image"),
            "size": ni("Size of image file in bytes"),
            "virtual_size": ni("Virtual size of image in bytes"),
            "container_format": {"type": ["null", "string"], "enum": [null, "ami", "ari", "aki", "bare", "ovf", "ova", "docker", "compressed"], "description": "Format of the container"},
            "disk_format": {"type": ["null", "string"], "enum": [null, "ami", "ari", "aki", "vhd", "vhdx", "vmdk", "raw", "qcow2", "vdi", "iso", "ploop"], "description": "Format of the disk"},
            "created_at": s("Date and time of image registration"),
            "updated_at": s("Date and time of the last image modification"),
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 255}, "description": "List of strings related to the image"},
            "direct_url": s("URL to access the image file kept in external store"),
            "min_ram": {"type": "integer", "description": "Amount of ram (in MB) required to boot image."},
            "min_disk": {"type": "integer", "description": "Amount of disk space (in GB) required to boot image."},
            "self": s("An image self url"),
            "file": s("An image file url"),
            "schema": s("An image schema url"),
            "locations": {"type": "array", "items": {"type": "object"}, "description": "A set of URLs to access the image file kept in external store"}
        },
        "additionalProperties": {"type": "string"},
        "links": [
            {"rel": "self", "href": "{self}"},
            {"rel": "enclosure", "href": "{file}"},
            {"rel": "describedby", "href": "{schema}"}
        ]
    }))
    .into_response()
}
