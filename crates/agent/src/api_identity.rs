//! `/identity` handlers: the identities this node knows.

use crate::api_server::error;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::identity::Identities;
use std::sync::Arc;

async fn list(State(identities): State<Arc<Identities>>) -> Response {
    let all: Vec<_> = identities
        .list()
        .into_iter()
        .map(|(id, labels)| controlplane::identity::to_api(id, labels))
        .collect();
    Json(all).into_response()
}

async fn get(State(identities): State<Arc<Identities>>, Path(raw): Path<String>) -> Response {
    let Ok(id) = raw.parse::<u32>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("invalid identity {raw:?}: expected a number"),
        );
    };
    match identities.get(id) {
        Some(labels) => Json(controlplane::identity::to_api(id, labels)).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("identity {id} not found")),
    }
}

/// `/v1/identity` and `/v1/identity/{id}`.
pub fn routes(identities: Arc<Identities>) -> axum::Router {
    axum::Router::new()
        .route("/v1/identity", axum::routing::get(list))
        .route("/v1/identity/{id}", axum::routing::get(get))
        .with_state(identities)
}
