//! `/endpoint` handlers.

use crate::api_server::{error, Shared};
use crate::endpoint::{parse_id, EndpointError, EndpointRef};
use api::endpoint::{EndpointBatchDeleteRequest, EndpointChangeRequest};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

fn endpoint_error(e: EndpointError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error(status, e.to_string())
}

fn parse_ref(raw: &str) -> Result<EndpointRef, Response> {
    parse_id(raw).map_err(|m| error(StatusCode::BAD_REQUEST, m))
}

pub async fn list(State(d): Shared) -> Response {
    let eps = d.endpoints.lock().expect("endpoints lock").list();
    Json(eps.iter().map(|e| e.to_api()).collect::<Vec<_>>()).into_response()
}

/// The first endpoint an ID names, as the API shows it.
fn lookup(d: &crate::daemon::Daemon, raw: &str) -> Result<api::endpoint::Endpoint, Response> {
    let r = parse_ref(raw)?;
    let eps = d.endpoints.lock().expect("endpoints lock");
    eps.find(&r)
        .first()
        .map(|ep| ep.to_api())
        .ok_or_else(|| endpoint_error(EndpointError::NotFound))
}

pub async fn get(State(d): Shared, Path(raw): Path<String>) -> Response {
    match lookup(&d, &raw) {
        Ok(ep) => Json(ep).into_response(),
        Err(resp) => resp,
    }
}

pub async fn healthz(State(d): Shared, Path(raw): Path<String>) -> Response {
    match lookup(&d, &raw) {
        Ok(ep) => Json(ep.status.health).into_response(),
        Err(resp) => resp,
    }
}

pub async fn put(State(d): Shared, Path(raw): Path<String>, body: Bytes) -> Response {
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
    if let Err(e) = d.endpoints.lock().expect("endpoints lock").check(&req) {
        return endpoint_error(e);
    }
    // The identity may take a kvstore round trip: not under the endpoints lock.
    let labels = crate::endpoint::labels_of(&req);
    let identity = match d.identities.allocate(&labels).await {
        Ok(id) => id,
        Err(e) => return endpoint_error(EndpointError::Failed(e.to_string())),
    };
    let created = d
        .endpoints
        .lock()
        .expect("endpoints lock")
        .create(&d, &req, identity);
    if created.is_err() {
        d.identities.release(&labels);
    }
    match created {
        Ok(ep) => {
            if d.attach_mode == datapath::attach::AttachMode::Tcx {
                let (d, id, ifname) = (d.clone(), ep.id, ep.ifname.clone());
                tokio::task::spawn_blocking(move || {
                    crate::endpoint::upgrade_to_tcx(&d, id, &ifname)
                });
            }
            let dd = d.clone();
            tokio::task::spawn_blocking(move || crate::policies::prepare_next(&dd));
            (StatusCode::CREATED, Json(ep.to_api())).into_response()
        }
        Err(e) => endpoint_error(e),
    }
}

pub async fn delete(State(d): Shared, Path(raw): Path<String>) -> Response {
    let r = match parse_ref(&raw) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let mut eps = d.endpoints.lock().expect("endpoints lock");
    match eps.delete(&d, &r) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => endpoint_error(e),
    }
}

/// `DELETE /endpoint` with `{"container-id": ...}`.
pub async fn delete_batch(State(d): Shared, body: Bytes) -> Response {
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
    let mut eps = d.endpoints.lock().expect("endpoints lock");
    match eps.delete(&d, &EndpointRef::ContainerId(req.container_id)) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => endpoint_error(e),
    }
}
