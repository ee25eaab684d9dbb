//! `/identity` handlers: the identities this node knows, and those its
//! endpoints use.

use crate::api::server::error;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::endpoint::Endpoints;
use controlplane::identity::Identities;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What `/identity` reads.
pub struct IdentityApi {
    pub identities: Arc<Identities>,
    pub endpoints: Arc<Endpoints>,
}

type Shared = State<Arc<IdentityApi>>;

async fn list(State(d): Shared) -> Response {
    let all: Vec<_> = d
        .identities
        .list()
        .into_iter()
        .map(|(id, labels)| controlplane::identity::to_api(id, labels))
        .collect();
    Json(all).into_response()
}

async fn get(State(d): Shared, Path(raw): Path<String>) -> Response {
    let Ok(id) = raw.parse::<u32>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("invalid identity {raw:?}: expected a number"),
        );
    };
    // 0 is no identity: Cilium answers it as reserved:unknown (policy
    // map entries for any peer carry it)
    let known = if id == 0 {
        Some(vec!["reserved:unknown".to_owned()])
    } else {
        d.identities.get(id)
    };
    match known {
        Some(labels) => Json(controlplane::identity::to_api(id, labels)).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("identity {id} not found")),
    }
}

/// `GET /identity/endpoints`: each identity this node's endpoints have,
/// with how many have it.
async fn endpoints(State(d): Shared) -> Response {
    let mut used: BTreeMap<u32, (Vec<String>, u32)> = BTreeMap::new();
    for ep in d.endpoints.list() {
        used.entry(ep.identity)
            .or_insert_with(|| (ep.identity_labels(), 0))
            .1 += 1;
    }
    let list: Vec<_> = used
        .into_iter()
        .map(|(id, (labels, refs))| {
            serde_json::json!({
                "identity": controlplane::identity::to_api(id, labels),
                "refCount": refs,
            })
        })
        .collect();
    Json(list).into_response()
}

/// `/v1/identity`, `/v1/identity/{id}` and `/v1/identity/endpoints`.
pub fn routes(api: Arc<IdentityApi>) -> axum::Router {
    axum::Router::new()
        .route("/v1/identity", axum::routing::get(list))
        .route("/v1/identity/endpoints", axum::routing::get(endpoints))
        .route("/v1/identity/{id}", axum::routing::get(get))
        .with_state(api)
}
