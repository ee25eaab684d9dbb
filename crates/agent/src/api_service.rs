//! `/service` handlers. In kvstore mode a change is realized here first and
//! then published, so every other node applies the same service.

use crate::api_server::{error, Shared};
use crate::services::{parse_id, ServiceError};
use api::service::ServiceSpec;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

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

pub async fn list(State(d): Shared) -> Response {
    Json(d.services.list()).into_response()
}

pub async fn get(State(d): Shared, Path(raw): Path<String>) -> Response {
    let id = match path_id(&raw) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    match d.services.get(id) {
        Some(svc) => Json(svc).into_response(),
        None => service_error(ServiceError::NotFound(id)),
    }
}

pub async fn put(State(d): Shared, Path(raw): Path<String>, body: Bytes) -> Response {
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
    let created = match d.services.apply(&spec) {
        Ok(c) => c,
        Err(e) => return service_error(e),
    };
    if let Some(kv) = &d.kvstore {
        let key = kvstore::keys::service(&d.config.cluster_name, id);
        let body = serde_json::to_vec(&spec).expect("spec serializes");
        if let Err(e) = kv.put(&key, &body).await {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("service {id} is realized here but not shared with the cluster: {e}"),
            );
        }
    }
    if created {
        StatusCode::CREATED.into_response()
    } else {
        StatusCode::OK.into_response()
    }
}

pub async fn delete(State(d): Shared, Path(raw): Path<String>) -> Response {
    let id = match path_id(&raw) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    if let Err(e) = d.services.remove(id) {
        return service_error(e);
    }
    if let Some(kv) = &d.kvstore {
        if let Err(e) = kv
            .delete(&kvstore::keys::service(&d.config.cluster_name, id))
            .await
        {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("service {id} is deleted here but not from the cluster: {e}"),
            );
        }
    }
    StatusCode::OK.into_response()
}
