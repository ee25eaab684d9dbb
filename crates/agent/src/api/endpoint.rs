//! `/endpoint` handlers.

use crate::api::server::error;
use api::endpoint::{EndpointBatchDeleteRequest, EndpointChangeRequest};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::endpoint::{parse_id, EndpointError, EndpointRef, Endpoints};
use std::sync::Arc;

fn endpoint_error(e: EndpointError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error(status, e.to_string())
}

fn parse_ref(raw: &str) -> Result<EndpointRef, Response> {
    parse_id(raw).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
}

type Shared = State<Arc<Endpoints>>;

async fn list(State(d): Shared) -> Response {
    let eps = d.list();
    Json(eps.iter().map(|e| e.to_api()).collect::<Vec<_>>()).into_response()
}

/// The first endpoint an ID names, as the API shows it; the API's 400 or
/// 404 answer when there is none.
pub(crate) fn lookup(d: &Endpoints, raw: &str) -> Result<api::endpoint::Endpoint, Response> {
    let r = parse_ref(raw)?;
    d.find(&r)
        .first()
        .map(|ep| ep.to_api())
        .ok_or_else(|| endpoint_error(EndpointError::NotFound))
}

async fn get(State(d): Shared, Path(raw): Path<String>) -> Response {
    match lookup(&d, &raw) {
        Ok(ep) => Json(ep).into_response(),
        Err(resp) => resp,
    }
}

async fn healthz(State(d): Shared, Path(raw): Path<String>) -> Response {
    match lookup(&d, &raw) {
        Ok(ep) => Json(ep.status.health).into_response(),
        Err(resp) => resp,
    }
}

/// `GET /endpoint/{id}/log`: its status log, newest first.
async fn log(State(d): Shared, Path(raw): Path<String>) -> Response {
    match lookup(&d, &raw) {
        Ok(ep) => Json(ep.status.log).into_response(),
        Err(resp) => resp,
    }
}

/// `GET /endpoint/{id}/labels`: its LabelConfiguration (the labels it was
/// given, and those its identity is made of).
async fn labels(State(d): Shared, Path(raw): Path<String>) -> Response {
    match lookup(&d, &raw) {
        Ok(ep) => Json(serde_json::json!({
            "spec": ep.status.labels.realized,
            "status": ep.status.labels,
        }))
        .into_response(),
        Err(resp) => resp,
    }
}

/// `GET /cgroup-dump-metadata`: the pods of this node's endpoints with
/// their addresses. Their containers' cgroups are the runtime's and not
/// tracked here, so each pod lists none.
async fn cgroup_metadata(State(d): Shared) -> Response {
    let pods: Vec<_> = d
        .list()
        .iter()
        .filter(|ep| !ep.k8s_pod_name.is_empty())
        .map(|ep| {
            serde_json::json!({
                "name": ep.k8s_pod_name,
                "namespace": ep.k8s_namespace,
                "ips": ep.addresses().map(|(ip, _)| ip.to_string()).collect::<Vec<_>>(),
                "containers": [],
            })
        })
        .collect();
    Json(serde_json::json!({ "pod-metadatas": pods })).into_response()
}

async fn put(State(d): Shared, Path(raw): Path<String>, body: Bytes) -> Response {
    let id = match parse_ref(&raw) {
        Ok(EndpointRef::Local(id)) => id,
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("endpoint ID {raw:?}: creating an endpoint needs a cilium-local ID"),
            )
        }
        Err(resp) => return resp,
    };
    let mut req: EndpointChangeRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("invalid EndpointChangeRequest: {e}"),
            )
        }
    };
    if req.id != 0 && req.id != i64::from(id) {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "endpoint ID {} in the body does not match {id} in the path",
                req.id
            ),
        );
    }
    req.id = i64::from(id);
    match d.create(&req).await {
        Ok(ep) => (StatusCode::CREATED, Json(ep.to_api())).into_response(),
        Err(e) => endpoint_error(e),
    }
}

async fn delete(State(d): Shared, Path(raw): Path<String>) -> Response {
    let r = match parse_ref(&raw) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    match d.delete(&r) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => endpoint_error(e),
    }
}

/// `DELETE /endpoint` with `{"container-id": ...}`.
async fn delete_batch(State(d): Shared, body: Bytes) -> Response {
    let req: EndpointBatchDeleteRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("invalid EndpointBatchDeleteRequest: {e}"),
            )
        }
    };
    if req.container_id.is_empty() {
        return error(StatusCode::BAD_REQUEST, "container-id is required");
    }
    match d.delete(&EndpointRef::ContainerId(req.container_id)) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => endpoint_error(e),
    }
}

/// `/v1/endpoint`, `/v1/endpoint/{id}` and its `healthz`, `log` and
/// `labels`; the pods' cgroup metadata.
pub fn routes(endpoints: Arc<Endpoints>) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/v1/endpoint", get(list).delete(delete_batch))
        .route("/v1/endpoint/{id}", get(self::get).put(put).delete(delete))
        .route("/v1/endpoint/{id}/healthz", get(healthz))
        .route("/v1/endpoint/{id}/log", get(log))
        .route("/v1/endpoint/{id}/labels", get(labels))
        .route("/v1/cgroup-dump-metadata", get(cgroup_metadata))
        .with_state(endpoints)
}
