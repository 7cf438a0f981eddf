//! The Tacker stand-in (`/tacker/vnflcm/v2`): subscriptions with the callback test, the
//! instance lifecycle against the testbed's Heat, notifications and their fault switches.

use crate::cloud_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxStatus};
use axum::routing::get;
use cloud_common::{Client, pv_body, start};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testbed::cloud::tacker::{NotifyFaults, StandInPackage};

const VNFD: &str = "b1bb0ce7-ebca-4fa7-95ed-4840d70a1177";
/// `Basic base64("vnfkeeper:cb-secret")`.
const AUTH: &str = "Basic dm5ma2VlcGVyOmNiLXNlY3JldA==";

/// A callback endpoint: GET → 204, POST with the right Basic credentials → 204 and kept.
#[derive(Clone, Default)]
struct Sink {
    got: Arc<Mutex<Vec<Value>>>,
    refuse_get: bool,
}

async fn cb_get(State(s): State<Sink>, h: HeaderMap) -> AxStatus {
    if s.refuse_get || h.get("authorization").is_none_or(|v| v != AUTH) {
        AxStatus::UNAUTHORIZED
    } else {
        AxStatus::NO_CONTENT
    }
}

async fn cb_post(State(s): State<Sink>, h: HeaderMap, b: Bytes) -> AxStatus {
    if h.get("authorization").is_none_or(|v| v != AUTH) {
        return AxStatus::UNAUTHORIZED;
    }
    s.got
        .lock()
        .unwrap()
        .push(serde_json::from_slice(&b).unwrap());
    AxStatus::NO_CONTENT
}

async fn sink(refuse_get: bool) -> (Sink, String) {
    let s = Sink {
        refuse_get,
        ..Sink::default()
    };
    let app = axum::Router::new()
        .route("/cb", get(cb_get).post(cb_post))
        .with_state(s.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/cb", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (s, url)
}

async fn tk(c: &Client, m: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let r = c
        .http
        .request(m, format!("{}/tacker/vnflcm/v2{path}", c.base))
        .header("x-auth-token", &c.token)
        .header("version", "2.0.0");
    send(r, body).await
}

/// Sends `r` with `body` as JSON (if any); the status and the answer's JSON (`Null` if none).
async fn send(mut r: reqwest::RequestBuilder, body: Option<Value>) -> (StatusCode, Value) {
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let st = resp.status();
    let text = resp.text().await.unwrap();
    (st, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn register(tb: &testbed::cloud::Testbed) {
    let b = pv_body("unused", 2);
    tb.cloud()
        .tacker_register_package(StandInPackage {
            vnfd_id: VNFD.into(),
            template: b["template"].clone(),
            files: serde_json::from_value(b["files"].clone()).unwrap(),
            parameters: serde_json::from_value(b["parameters"].clone()).unwrap(),
            aspects: [(
                "workerNode_scale".to_string(),
                [("workerNode".to_string(), 1)].into_iter().collect(),
            )]
            .into_iter()
            .collect(),
            mgmt_driver: None,
        })
        .unwrap();
}

fn subscription(url: &str) -> Value {
    json!({
        "filter": {"vnfInstanceSubscriptionFilter": {"vnfdIds": [VNFD]}},
        "callbackUri": url,
        "authentication": {"authType": ["BASIC"], "paramsBasic": {"userName": "vnfkeeper", "password": "cb-secret"}},
    })
}

async fn wait_occ(c: &Client, id: &str) -> Value {
    for _ in 0..3000 {
        let (st, v) = tk(c, Method::GET, &format!("/vnf_lcm_op_occs/{id}"), None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        if matches!(
            v["operationState"].as_str(),
            Some("COMPLETED" | "FAILED_TEMP")
        ) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("op occ {id} never ended");
}

async fn lcm(c: &Client, inst: &str, action: &str, body: Value) -> String {
    let r = c
        .http
        .post(format!(
            "{}/tacker/vnflcm/v2/vnf_instances/{inst}/{action}",
            c.base
        ))
        .header("x-auth-token", &c.token)
        .header("version", "2.0.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED, "{action}");
    let loc = r.headers()["location"].to_str().unwrap().to_string();
    loc.rsplit('/').next().unwrap().to_string()
}

/// (notificationType, operation, operationState) of what the sink got, sorted.
fn seen(s: &Sink) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = s
        .got
        .lock()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["notificationType"].as_str().unwrap().to_string(),
                n["operation"].as_str().unwrap_or("").to_string(),
                n["operationState"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

async fn settle(tb: &testbed::cloud::Testbed) {
    // Deliveries run on their own tasks: wait until every generated one is accounted for.
    for _ in 0..500 {
        if tb.cloud().tacker_notify_counters().pending == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn keystone_token_and_version_header_are_required() {
    let (tb, _d) = start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/tacker/vnflcm/v2/subscriptions", tb.base_url());
    let r = http
        .get(&url)
        .header("version", "2.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let c = Client::login(&tb).await;
    let r = http
        .get(&url)
        .header("x-auth-token", &c.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let (st, v) = tk(&c, Method::GET, "/subscriptions", None).await;
    assert_eq!((st, v), (StatusCode::OK, json!([])));
}

#[tokio::test]
async fn subscription_needs_a_callback_answering_the_test_with_204() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let (_refusing, bad_url) = sink(true).await;
    let (st, v) = tk(
        &c,
        Method::POST,
        "/subscriptions",
        Some(subscription(&bad_url)),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("401"), "{v}");
    assert!(tb.cloud().tacker_subscription_ids().is_empty());

    let (_ok, url) = sink(false).await;
    let (st, v) = tk(&c, Method::POST, "/subscriptions", Some(subscription(&url))).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert!(v.get("authentication").is_none(), "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let (st, list) = tk(&c, Method::GET, "/subscriptions", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(list[0]["callbackUri"], json!(url));
    assert_eq!(
        list[0]["filter"]["vnfInstanceSubscriptionFilter"]["vnfdIds"],
        json!([VNFD])
    );
    let (st, _) = tk(&c, Method::DELETE, &format!("/subscriptions/{id}"), None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, _) = tk(&c, Method::GET, &format!("/subscriptions/{id}"), None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn instantiate_heal_scale_terminate_delete_notify_each_state() {
    let (tb, _d) = start().await;
    register(&tb);
    let c = Client::login(&tb).await;
    let (s, url) = sink(false).await;
    let (st, v) = tk(&c, Method::POST, "/subscriptions", Some(subscription(&url))).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let sub_id = v["id"].as_str().unwrap().to_string();

    let (st, v) = tk(
        &c,
        Method::POST,
        "/vnf_instances",
        Some(json!({"vnfdId": VNFD, "vnfInstanceName": "pv"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["instantiationState"], "NOT_INSTANTIATED");
    let inst = v["id"].as_str().unwrap().to_string();

    let occ = lcm(
        &c,
        &inst,
        "instantiate",
        json!({"flavourId": "simple", "additionalParams": {"k": "v"}}),
    )
    .await;
    // A second operation while the first runs is refused.
    let r = c
        .http
        .post(format!(
            "{}/tacker/vnflcm/v2/vnf_instances/{inst}/terminate",
            c.base
        ))
        .header("x-auth-token", &c.token)
        .header("version", "2.0.0")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let o = wait_occ(&c, &occ).await;
    assert_eq!(o["operationState"], "COMPLETED", "{o}");
    assert_eq!(o["operationParams"]["additionalParams"]["k"], "v");

    let (st, v) = tk(&c, Method::GET, &format!("/vnf_instances/{inst}"), None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["instantiationState"], "INSTANTIATED", "{v}");
    let rinfo = v["instantiatedVnfInfo"]["vnfcResourceInfo"]
        .as_array()
        .unwrap()
        .clone();
    // 1 master, 2 workers, 1 storage server in the pv_k8s BaseHOT.
    assert_eq!(rinfo.len(), 4, "{v}");
    let (vnfcs, servers) = {
        let inner: Vec<Value> = v["instantiatedVnfInfo"]["vnfcInfo"]
            .as_array()
            .unwrap()
            .clone();
        (inner, tb.cloud().hosts())
    };
    assert_eq!(servers.len(), 4);
    let worker = vnfcs
        .iter()
        .find(|x| x["vduId"] == "workerNode")
        .unwrap()
        .clone();
    let old_server = worker["vnfcResourceInfoId"].as_str().unwrap().to_string();

    let occ = lcm(&c, &inst, "heal", json!({"vnfcInstanceId": [worker["id"]]})).await;
    let o = wait_occ(&c, &occ).await;
    assert_eq!(o["operationState"], "COMPLETED", "{o}");
    let (_, v) = tk(&c, Method::GET, &format!("/vnf_instances/{inst}"), None).await;
    let ids: Vec<&str> = v["instantiatedVnfInfo"]["vnfcResourceInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["computeResource"]["resourceId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 4);
    assert!(
        !ids.contains(&old_server.as_str()),
        "the worker was rebuilt: {ids:?}"
    );

    // SCALE_OUT by 2 steps: two workers more; SCALE_IN by one: one fewer; below 0 refused.
    let occ = lcm(
        &c,
        &inst,
        "scale",
        json!({"type": "SCALE_OUT", "aspectId": "workerNode_scale", "numberOfSteps": 2}),
    )
    .await;
    assert_eq!(wait_occ(&c, &occ).await["operationState"], "COMPLETED");
    let (_, v) = tk(&c, Method::GET, &format!("/vnf_instances/{inst}"), None).await;
    assert_eq!(
        v["instantiatedVnfInfo"]["vnfcResourceInfo"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        v["instantiatedVnfInfo"]["scaleStatus"],
        json!([{"aspectId": "workerNode_scale", "scaleLevel": 2}])
    );
    let occ = lcm(
        &c,
        &inst,
        "scale",
        json!({"type": "SCALE_IN", "aspectId": "workerNode_scale"}),
    )
    .await;
    assert_eq!(wait_occ(&c, &occ).await["operationState"], "COMPLETED");
    assert_eq!(tb.cloud().hosts().len(), 5);
    let (st, v) = tk(
        &c,
        Method::POST,
        &format!("/vnf_instances/{inst}/scale"),
        Some(json!({"type": "SCALE_IN", "aspectId": "workerNode_scale", "numberOfSteps": 2})),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");

    let occ = lcm(
        &c,
        &inst,
        "terminate",
        json!({"terminationType": "FORCEFUL"}),
    )
    .await;
    let o = wait_occ(&c, &occ).await;
    assert_eq!(o["operationState"], "COMPLETED", "{o}");
    assert_eq!(tb.cloud().hosts().len(), 0);
    let (st, _) = tk(&c, Method::DELETE, &format!("/vnf_instances/{inst}"), None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);

    let (st, all) = tk(
        &c,
        Method::GET,
        &format!("/vnf_lcm_op_occs?filter=(eq,vnfInstanceId,{inst})"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(all.as_array().unwrap().len(), 5);
    let (_, none) = tk(
        &c,
        Method::GET,
        "/vnf_lcm_op_occs?filter=(eq,vnfInstanceId,other)",
        None,
    )
    .await;
    assert_eq!(none, json!([]));

    settle(&tb).await;
    let got = seen(&s);
    let lcm_n = "VnfLcmOperationOccurrenceNotification".to_string();
    let mut want = vec![
        (
            "VnfIdentifierCreationNotification".to_string(),
            String::new(),
            String::new(),
        ),
        (
            "VnfIdentifierDeletionNotification".to_string(),
            String::new(),
            String::new(),
        ),
    ];
    for op in ["HEAL", "INSTANTIATE", "SCALE", "SCALE", "TERMINATE"] {
        for st in ["COMPLETED", "PROCESSING", "STARTING"] {
            want.push((lcm_n.clone(), op.to_string(), st.to_string()));
        }
    }
    want.sort();
    assert_eq!(got, want);
    for n in s.got.lock().unwrap().iter() {
        assert_eq!(n["subscriptionId"], json!(sub_id));
        assert_eq!(n["vnfInstanceId"], json!(inst));
    }
    tb.shutdown().await;
}

#[tokio::test]
async fn notification_faults_drop_duplicate_and_filter() {
    let (tb, _d) = start().await;
    register(&tb);
    let c = Client::login(&tb).await;
    let (s, url) = sink(false).await;
    let (st, _) = tk(&c, Method::POST, "/subscriptions", Some(subscription(&url))).await;
    assert_eq!(st, StatusCode::CREATED);
    // A subscription whose filter never matches gets nothing.
    let (other, other_url) = sink(false).await;
    let mut f = subscription(&other_url);
    f["filter"]["vnfInstanceSubscriptionFilter"]["vnfdIds"] = json!(["another-vnfd"]);
    let (st, _) = tk(&c, Method::POST, "/subscriptions", Some(f)).await;
    assert_eq!(st, StatusCode::CREATED);

    // Over HTTP, as a test script would switch it.
    let r = reqwest::Client::new()
        .post(format!("{}/testbed/tacker/notifications", tb.base_url()))
        .json(&json!({"drop": 1.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (_, v) = tk(
        &c,
        Method::POST,
        "/vnf_instances",
        Some(json!({"vnfdId": VNFD})),
    )
    .await;
    assert_eq!(v["instantiationState"], "NOT_INSTANTIATED");
    settle(&tb).await;
    assert!(seen(&s).is_empty());
    assert_eq!(tb.cloud().tacker_notify_counters().dropped, 1);

    tb.cloud().tacker_set_notify_faults(NotifyFaults {
        duplicate: 1.0,
        reorder_ms: 100,
        ..NotifyFaults::default()
    });
    for _ in 0..5 {
        let (st, _) = tk(
            &c,
            Method::POST,
            "/vnf_instances",
            Some(json!({"vnfdId": VNFD})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED);
    }
    settle(&tb).await;
    let got = s.got.lock().unwrap().clone();
    assert_eq!(got.len(), 10);
    let mut ids: Vec<&str> = got.iter().map(|n| n["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "each notification twice with the same id");
    assert!(other.got.lock().unwrap().is_empty());
    let n = tb.cloud().tacker_notify_counters();
    assert_eq!(
        (n.generated, n.dropped, n.sent, n.answered_204),
        (6, 1, 10, 10)
    );
    tb.shutdown().await;
}

/// A cluster API in front of the Tacker stand-in's VIM driver: `GET /api/` and
/// `/api/v1/namespaces` answer a request carrying `Bearer good-token` and refuse any other
/// with kube-apiserver's 401 `Status`. Its URL.
async fn kube_api() -> String {
    async fn answer(uri: axum::http::Uri, h: HeaderMap) -> (AxStatus, axum::Json<Value>) {
        if h.get("authorization")
            .is_none_or(|v| v != "Bearer good-token")
        {
            return (
                AxStatus::UNAUTHORIZED,
                axum::Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized",
                    "code": 401})),
            );
        }
        match uri.path() {
            "/api/" => (
                AxStatus::OK,
                axum::Json(json!({"kind": "APIVersions", "versions": ["v1"]})),
            ),
            "/api/v1/namespaces" => (
                AxStatus::OK,
                axum::Json(json!({"kind": "NamespaceList", "items": [
                    {"metadata": {"name": "default"}}, {"metadata": {"name": "kube-system"}}]})),
            ),
            _ => (AxStatus::NOT_FOUND, axum::Json(json!({}))),
        }
    }
    let app = axum::Router::new().fallback(answer);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    url
}

async fn v1(c: &Client, m: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let r = c
        .http
        .request(m, format!("{}/tacker/v1.0/vims{path}", c.base))
        .header("x-auth-token", &c.token);
    send(r, body).await
}

/// Tacker v1's VIM resource as Tacker 16.0.0 answers it: the cluster asked with the bearer
/// token first (refused: 500 `VimUnauthorizedException`), 201 `{"vim"}` with the token masked,
/// 409 `DuplicateEntity` for the same name, the list filtered by name, 500
/// `VimNotFoundException` for an unknown id (show and delete), 204 on delete, 400 for a body
/// Tacker's attribute map refuses.
#[tokio::test]
async fn vims_are_registered_as_tacker_v1_answers() {
    let (tb, _d) = start().await;
    let c = Client::login(&tb).await;
    let api = kube_api().await;
    let body = |token: &str| {
        json!({"vim": {"name": "kubernetes_vim", "auth_url": api, "vim_project": {"name": ""},
                       "auth_cred": {"bearer_token": token}, "type": "kubernetes"}})
    };
    let (st, v) = v1(&c, Method::POST, "", Some(body("wrong-token"))).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_eq!(v["TackerError"]["type"], "VimUnauthorizedException", "{v}");
    assert!(!v.to_string().contains("wrong-token"), "{v}");
    assert!(tb.cloud().tacker_vims().is_empty());

    let (st, v) = v1(&c, Method::POST, "", Some(body("good-token"))).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let vim = &v["vim"];
    assert_eq!(vim["type"], "kubernetes");
    assert_eq!(vim["auth_url"], api.as_str());
    assert_eq!(vim["status"], "ACTIVE");
    assert_eq!(vim["auth_cred"]["bearer_token"], "***");
    assert_eq!(
        vim["placement_attr"]["regions"],
        json!(["default", "kube-system"])
    );
    assert!(!v.to_string().contains("good-token"), "{v}");
    let id = vim["id"].as_str().unwrap().to_string();

    let (st, v) = v1(&c, Method::POST, "", Some(body("good-token"))).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["TackerError"]["type"], "DuplicateEntity");

    let (st, v) = v1(&c, Method::GET, "?name=kubernetes_vim", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["vims"].as_array().unwrap().len(), 1, "{v}");
    let (_, v) = v1(&c, Method::GET, "?name=other", None).await;
    assert_eq!(v, json!({"vims": []}));
    let (st, v) = v1(&c, Method::GET, &format!("/{id}"), None).await;
    assert_eq!((st, v["vim"]["id"].clone()), (StatusCode::OK, json!(id)));

    let unknown = "0b7c1d0e-0000-4000-8000-000000000000";
    for m in [Method::GET, Method::DELETE] {
        let (st, v) = v1(&c, m, &format!("/{unknown}"), None).await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
        assert_eq!(v["TackerError"]["type"], "VimNotFoundException", "{v}");
    }
    let (st, _) = v1(&c, Method::DELETE, &format!("/{id}"), None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (_, v) = v1(&c, Method::GET, "", None).await;
    assert_eq!(v, json!({"vims": []}));

    let mut missing = body("good-token");
    missing["vim"]
        .as_object_mut()
        .unwrap()
        .remove("vim_project");
    let (st, v) = v1(&c, Method::POST, "", Some(missing)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(
        v["TackerError"]["message"],
        "Failed to parse request. Required attribute 'vim_project' not specified"
    );
    let mut extra = body("good-token");
    extra["vim"]["status"] = json!("ACTIVE");
    let (st, v) = v1(&c, Method::POST, "", Some(extra)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(
        v["TackerError"]["message"],
        "Attribute 'status' not allowed in POST"
    );
    tb.shutdown().await;
}
