//! `/policy` handlers. An import is parsed whole before anything changes,
//! so a bad document leaves the policy in force as it was; with a kvstore
//! the documents are then shared, and every node enforces them.

use crate::api_server::{error, Shared};
use crate::policies::Stored;
use api::models::Policy;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;

fn joined(docs: &[Stored]) -> String {
    docs.iter()
        .map(|d| d.text.as_str())
        .collect::<Vec<_>>()
        .join("---\n")
}

async fn regenerate(d: &Arc<crate::daemon::Daemon>, reason: &'static str) {
    let d = Arc::clone(d);
    let _ = tokio::task::spawn_blocking(move || crate::policies::regenerate(&d, reason)).await;
}

pub async fn put(State(d): Shared, body: Bytes) -> Response {
    let text = match std::str::from_utf8(&body) {
        Ok(t) => t,
        Err(_) => return error(StatusCode::BAD_REQUEST, "policy is not UTF-8 text"),
    };
    let docs = match policy::parse_documents(text) {
        Ok(docs) => docs,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid policy: {e}")),
    };
    let stored: Vec<Stored> = docs
        .iter()
        .map(|doc| Stored {
            labels: doc.labels().iter().map(|l| l.to_string()).collect(),
            text: doc.text.clone(),
        })
        .collect();
    let revision = match d.policies.import(docs) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    regenerate(&d, "policy imported").await;
    if let Some(kv) = &d.kvstore {
        for s in &stored {
            let body = serde_json::to_vec(s).expect("policy serializes");
            if let Err(e) = kv.put(&s.key(&d.config.cluster_name), &body).await {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("policy is in force here but not shared with the cluster: {e}"),
                );
            }
        }
    }
    tracing::info!(
        subsys = "policy",
        policies = stored.len(),
        revision,
        "Policy imported"
    );
    Json(Policy {
        policy: joined(&stored),
        revision,
    })
    .into_response()
}

/// The `labels` header: comma-separated `source:key=value` filters.
fn labels_of(headers: &HeaderMap) -> Vec<String> {
    headers
        .get("labels")
        .and_then(|v| v.to_str().ok())
        .map(|l| {
            l.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub async fn get(State(d): Shared, headers: HeaderMap) -> Response {
    let labels = labels_of(&headers);
    let (docs, revision) = d.policies.get(&labels);
    if docs.is_empty() && !labels.is_empty() {
        return error(StatusCode::NOT_FOUND, "policy not found");
    }
    Json(Policy {
        policy: joined(&docs),
        revision,
    })
    .into_response()
}

/// Deletes the policies whose labels include all of the body's (a JSON
/// list of `source:key=value`); an empty list deletes all.
pub async fn delete(State(d): Shared, body: Bytes) -> Response {
    let labels: Vec<String> = if body.is_empty() {
        Vec::new()
    } else {
        match serde_json::from_slice(&body) {
            Ok(l) => l,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("expected a JSON list of labels: {e}"),
                )
            }
        }
    };
    let (removed, revision) = match d.policies.delete(&labels) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    if removed.is_empty() && !labels.is_empty() {
        return error(StatusCode::NOT_FOUND, "policy not found");
    }
    regenerate(&d, "policy deleted").await;
    if let Some(kv) = &d.kvstore {
        for s in &removed {
            if let Err(e) = kv.delete(&s.key(&d.config.cluster_name)).await {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("policy is deleted here but not in the cluster: {e}"),
                );
            }
        }
    }
    Json(Policy {
        policy: String::new(),
        revision,
    })
    .into_response()
}
