//! `/service` handlers. In kvstore mode a change is realized here first and
//! then published, so every other node applies the same service.

use crate::api::server::error;
use api::service::ServiceSpec;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::services::{parse_id, ServiceError, Services};
use std::sync::Arc;

fn service_error(e: ServiceError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error(status, e.to_string())
}

fn path_id(raw: &str) -> Result<u16, Response> {
    raw.parse::<i64>()
        .map_err(|_| ServiceError::Invalid(format!("invalid service ID {raw:?}")))
        .and_then(parse_id)
        .map_err(service_error)
}

async fn list(State(services): State<Arc<Services>>) -> Response {
    Json(services.list()).into_response()
}

async fn get(State(services): State<Arc<Services>>, Path(raw): Path<String>) -> Response {
    let id = match path_id(&raw) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    match services.get(id) {
        Some(svc) => Json(svc).into_response(),
        None => service_error(ServiceError::NotFound(id)),
    }
}

async fn put(
    State(services): State<Arc<Services>>,
    Path(raw): Path<String>,
    body: Bytes,
) -> Response {
    let id = match path_id(&raw) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    let mut spec: ServiceSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid ServiceSpec: {e}")),
    };
    if spec.id != 0 && spec.id != i64::from(id) {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "service ID {} in the body does not match {id} in the path",
                spec.id
            ),
        );
    }
    spec.id = i64::from(id);
    match services.put(&spec).await {
        Ok(true) => StatusCode::CREATED.into_response(),
        Ok(false) => StatusCode::OK.into_response(),
        Err(e) => service_error(e),
    }
}

async fn delete(State(services): State<Arc<Services>>, Path(raw): Path<String>) -> Response {
    let id = match path_id(&raw) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    match services.delete(id).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => service_error(e),
    }
}

/// `/v1/service` and `/v1/service/{id}`.
pub fn routes(services: Arc<Services>) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/v1/service", get(list))
        .route("/v1/service/{id}", get(self::get).put(put).delete(delete))
        .with_state(services)
}
