//! `/identity` handlers: the identities this node knows.

use crate::api_server::{error, Shared};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

pub async fn list(State(d): Shared) -> Response {
    let all: Vec<_> = d
        .identities
        .list()
        .into_iter()
        .map(|(id, labels)| crate::identity::to_api(id, labels))
        .collect();
    Json(all).into_response()
}

pub async fn get(State(d): Shared, Path(raw): Path<String>) -> Response {
    let Ok(id) = raw.parse::<u32>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("invalid identity {raw:?}: expected a number"),
        );
    };
    match d.identities.get(id) {
        Some(labels) => Json(crate::identity::to_api(id, labels)).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("identity {id} not found")),
    }
}
