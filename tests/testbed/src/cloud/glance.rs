//! Glance (Image API v2): images list (filters `name`, `tag`), show, create
//! (`POST /v2/images`, status `queued`), data upload (`PUT /v2/images/{id}/file`: only its size
//! and SHA-512 are kept; status `active`) and delete — what Tacker v2's local NFVO does with a
//! package's software images through openstacksdk. A few images exist from the start; any
//! image name or id a template or server asks for is recorded as an image too. Additional
//! properties (`Cloud::set_image_properties`, e.g. `os_distro`, `os_version`) are top-level keys.
//! `GET /v2/schemas/image` answers the image schema (python-glanceclient, as real Heat uses it,
//! validates every image it reads against it).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde_json::{Value, json};
use sha2::Digest as _;

use super::state::{ImageRec, new_id, ts};
use super::{ApiResult, Cloud, enc, nova_err, nova_err_fn, paginate, qget, qlimit};

/// Largest image data `PUT /v2/images/{id}/file` takes (the testbed keeps no image data, only
/// its size and hash; packages carry small stand-in images).
const MAX_IMAGE_BYTES: usize = 256 << 20;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/image", get(versions))
        .route("/image/", get(versions))
        .route("/image/v2", get(versions))
        .route("/image/v2/", get(versions))
        .route("/image/v2/images", get(list).post(create))
        .route("/image/v2/images/{id}", get(show).delete(delete))
        .route(
            "/image/v2/images/{id}/file",
            put(upload).layer(axum::extract::DefaultBodyLimit::max(MAX_IMAGE_BYTES)),
        )
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
    let (size, hash) = match (&i.data, i.status) {
        (Some((n, h)), _) => (json!(n), json!(h)),
        (None, "active") => (json!(1_073_741_824u64), Value::Null),
        (None, _) => (Value::Null, Value::Null),
    };
    let mut v = json!({
        "id": i.id, "name": i.name, "status": i.status, "visibility": i.visibility, "protected": false,
        "disk_format": i.formats.0, "container_format": i.formats.1, "size": size,
        "min_disk": i.min_disk_ram.0, "min_ram": i.min_disk_ram.1,
        "checksum": null, "os_hash_algo": if hash.is_null() { Value::Null } else { json!("sha512") },
        "os_hash_value": hash, "os_hidden": false, "tags": i.tags,
        "created_at": ts(&i.created), "updated_at": ts(&i.created),
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
            .filter(|i| qget(&q, "tag").is_none_or(|t| i.tags.iter().any(|x| x == t)))
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

/// A create request's string field `key` (absent: `None`); another type is a 400.
fn opt_str(b: &Value, key: &str) -> Result<Option<String>, super::ApiError> {
    match &b[key] {
        Value::Null => Ok(None),
        Value::String(s) if s.len() <= 255 => Ok(Some(s.clone())),
        _ => Err(nova_err(
            400,
            "badRequest",
            format!("{key}: not a string of at most 255 characters"),
        )),
    }
}

/// `POST /v2/images`: a new image record, status `queued` (Image API v2 "Create image"). Core
/// properties are checked as Glance's schema says; any other key is an additional property and
/// must be a string.
async fn create(State(c): State<Arc<Cloud>>, axum::Json(b): axum::Json<Value>) -> ApiResult {
    let obj = b
        .as_object()
        .ok_or_else(|| nova_err(400, "badRequest", "the body is not an object"))?;
    let id = match opt_str(&b, "id")? {
        Some(id) if uuid::Uuid::parse_str(&id).is_ok() => id,
        Some(_) => return Err(nova_err(400, "badRequest", "id: not a UUID")),
        None => new_id(),
    };
    let mut img = ImageRec::active(id.clone(), opt_str(&b, "name")?.unwrap_or_default());
    img.status = "queued";
    if let Some(v) = opt_str(&b, "visibility")? {
        if !["public", "private", "shared", "community"].contains(&v.as_str()) {
            return Err(nova_err(
                400,
                "badRequest",
                format!("visibility: {v:?} is not one of public, private, shared, community"),
            ));
        }
        img.visibility = v;
    } else {
        img.visibility = "shared".into();
    }
    let disk = opt_str(&b, "disk_format")?.map(|d| d.to_ascii_lowercase());
    let container = opt_str(&b, "container_format")?.map(|d| d.to_ascii_lowercase());
    img.formats = (disk.unwrap_or_default(), container.unwrap_or_default());
    let num = |key: &str| -> Result<u64, super::ApiError> {
        match &b[key] {
            Value::Null => Ok(0),
            v => v.as_u64().ok_or_else(|| {
                nova_err(
                    400,
                    "badRequest",
                    format!("{key}: not a non-negative integer"),
                )
            }),
        }
    };
    img.min_disk_ram = (num("min_disk")?, num("min_ram")?);
    if let Some(t) = b.get("tags") {
        img.tags = t
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|x| x.as_str().filter(|s| s.len() <= 255).map(String::from))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| nova_err(400, "badRequest", "tags: not a list of strings"))?;
    }
    const CORE: [&str; 9] = [
        "id",
        "name",
        "visibility",
        "disk_format",
        "container_format",
        "min_disk",
        "min_ram",
        "tags",
        "protected",
    ];
    for (k, v) in obj {
        if CORE.contains(&k.as_str()) {
            continue;
        }
        let v = v.as_str().ok_or_else(|| {
            nova_err(
                400,
                "badRequest",
                format!("{k}: an additional property must be a string"),
            )
        })?;
        img.properties.insert(k.clone(), v.to_string());
    }
    let mut inner = c.lock();
    if inner.images.contains_key(&id) {
        return Err(nova_err(
            409,
            "conflict",
            format!("Image with identifier {id} already exists!"),
        ));
    }
    let body = image_json(&img);
    inner.images.insert(id, img);
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// `PUT /v2/images/{id}/file`: the image data (Image API v2 "Upload binary image data"): only
/// its size and SHA-512 are kept; the image becomes `active`. 409 unless it is `queued`.
async fn upload(
    State(c): State<Arc<Cloud>>,
    Path(id): Path<String>,
    data: axum::body::Bytes,
) -> ApiResult {
    let hash: String = sha2::Sha512::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut inner = c.lock();
    let i = inner
        .images
        .get_mut(&id)
        .ok_or_else(|| nova_err(404, "itemNotFound", format!("No image found with ID {id}")))?;
    if i.status != "queued" {
        return Err(nova_err(
            409,
            "conflict",
            format!(
                "Image status transition from {} to saving is not allowed",
                i.status
            ),
        ));
    }
    i.data = Some((data.len() as u64, hash));
    i.status = "active";
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `DELETE /v2/images/{id}`: 204, 404 when there is none.
async fn delete(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> ApiResult {
    c.lock()
        .images
        .remove(&id)
        .ok_or_else(|| nova_err(404, "itemNotFound", format!("No image found with ID {id}")))?;
    Ok(StatusCode::NO_CONTENT.into_response())
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
