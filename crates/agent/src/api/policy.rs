//! `/policy` handlers. An import is parsed whole before anything changes,
//! so a bad document leaves the policy in force as it was; with a kvstore
//! the documents are then shared, and every node enforces them.

use crate::api::json_indent;
use crate::api::server::error;
use api::models::Policy;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::endpoint::Endpoints;
use controlplane::identity::Identities;
use controlplane::ipcache::IpCache;
use controlplane::policies::{Policies, PolicyError, Stored};
use std::sync::Arc;

/// What the policy API (import, trace, explain) works with.
pub struct PolicyApi {
    pub bpf_root: std::path::PathBuf,
    pub policies: Arc<Policies>,
    pub endpoints: Arc<Endpoints>,
    pub identities: Arc<Identities>,
    pub ipcache: Arc<IpCache>,
    /// Where other nodes' pods are looked up, when there is a kvstore.
    pub kvstore: Option<kvstore::Kvstore>,
}

type Shared = State<Arc<PolicyApi>>;

/// `/v1/policy`, its `resolve` and `selectors`, and `/v1/explain`.
pub fn routes(api: Arc<PolicyApi>) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/v1/policy", get(self::get).put(put).delete(delete))
        .route("/v1/policy/resolve", get(trace))
        .route("/v1/policy/selectors", get(selectors))
        .route("/v1/explain", get(explain))
        .with_state(api)
}

fn policy_error(e: PolicyError) -> Response {
    error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// The documents as `cilium policy get` shows them: each pretty-printed
/// (they are stored as compact JSON, or as YAML by an older agent), as one
/// YAML stream that `policy import` takes back.
pub(crate) fn joined(docs: &[Stored]) -> String {
    docs.iter()
        .map(|d| match json_indent::indent(&d.text) {
            Some(pretty) => pretty + "\n",
            None => d.text.clone(),
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

async fn put(State(d): Shared, body: Bytes) -> Response {
    // A policy of a thousand rules takes tens of milliseconds to read:
    // off the runtime's threads.
    let parsed = tokio::task::spawn_blocking(move || {
        let text = std::str::from_utf8(&body).map_err(|_| "policy is not UTF-8 text".to_owned())?;
        policy::parse_documents(text).map_err(|e| format!("invalid policy: {e}"))
    })
    .await;
    let docs = match parsed {
        Ok(Ok(docs)) => docs,
        Ok(Err(e)) => return error(StatusCode::BAD_REQUEST, e),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    match d.policies.import(docs).await {
        Ok((stored, revision)) => Json(Policy {
            policy: joined(&stored),
            revision,
        })
        .into_response(),
        Err(e) => policy_error(e),
    }
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

async fn get(State(d): Shared, headers: HeaderMap) -> Response {
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
async fn delete(State(d): Shared, body: Bytes) -> Response {
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
    match d.policies.remove(&labels).await {
        Ok((removed, _)) if removed.is_empty() && !labels.is_empty() => {
            error(StatusCode::NOT_FOUND, "policy not found")
        }
        Ok((_, revision)) => Json(Policy {
            policy: String::new(),
            revision,
        })
        .into_response(),
        Err(e) => policy_error(e),
    }
}

/// A pod's identity and labels: a local endpoint's, else (with a kvstore)
/// the one another node published for it.
async fn pod_identity(d: &PolicyApi, pod: &str) -> Result<(u32, Vec<String>), String> {
    let (ns, name) = pod
        .split_once(':')
        .or_else(|| pod.split_once('/'))
        .unwrap_or(("default", pod));
    let local = d
        .endpoints
        .list()
        .into_iter()
        .find(|e| e.k8s_namespace == ns && e.k8s_pod_name == name);
    if let Some(ep) = local {
        return Ok((ep.identity, ep.identity_labels()));
    }
    if let Some(kv) = &d.kvstore {
        let (pairs, _) = kv
            .list_prefix(&format!("{}/", kvstore::keys::IPS))
            .await
            .map_err(|e| e.to_string())?;
        for (_, value) in pairs {
            let Ok(pair) = serde_json::from_slice::<controlplane::ipsync::IpIdentityPair>(&value)
            else {
                continue;
            };
            if pair.k8s_namespace == ns && pair.k8s_pod_name == name {
                let labels = d.identities.get(pair.id).unwrap_or_default();
                return Ok((pair.id, labels));
            }
        }
    }
    Err(format!("pod {ns}:{name} not found"))
}

/// `GET /policy/resolve`: traces a flow through the policy in force.
async fn trace(State(d): Shared, body: Bytes) -> Response {
    use crate::policy_trace::TraceRequest;
    let req: TraceRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("invalid trace request: {e}"),
            )
        }
    };
    let mut pods = Vec::new();
    for side in [&req.from, &req.to] {
        match &side.k8s_pod {
            Some(p) => match pod_identity(&d, p).await {
                Ok(found) => pods.push(Some(found)),
                Err(e) => return error(StatusCode::NOT_FOUND, e),
            },
            None => pods.push(None),
        }
    }
    let to_pod = pods.pop().flatten();
    let from_pod = pods.pop().flatten();
    match crate::policy_trace::trace(&d.policies, &req, from_pod, to_pod) {
        Ok(resp) => Json(resp).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// `GET /policy/selectors`: every peer the rules name and the identities
/// it selects now.
async fn selectors(State(d): Shared) -> Response {
    let (rules, _) = d.policies.rules();
    let ids = d.policies.identities();
    let list: Vec<serde_json::Value> = policy::selectors(&rules, &ids)
        .into_iter()
        .map(|s| {
            serde_json::json!({
                "selector": s.selector,
                "identities": s.identities,
                "users": s.users,
                "labels": s.labels.iter().map(|l| serde_json::json!({
                    "key": l.key, "value": l.value, "source": l.source,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(list).into_response()
}

/// Pods other nodes published (namespace, name, address).
async fn remote_pods(d: &PolicyApi) -> Vec<(String, String, std::net::Ipv4Addr)> {
    let Some(kv) = &d.kvstore else {
        return Vec::new();
    };
    let Ok((pairs, _)) = kv.list_prefix(&format!("{}/", kvstore::keys::IPS)).await else {
        return Vec::new();
    };
    pairs
        .iter()
        .filter_map(|(_, v)| serde_json::from_slice::<controlplane::ipsync::IpIdentityPair>(v).ok())
        .filter_map(|p| Some((p.k8s_namespace, p.k8s_pod_name, p.ip.parse().ok()?)))
        .collect()
}

/// `GET /explain`: what the datapath would do with a new flow, and why.
async fn explain(State(d): Shared, body: Bytes) -> Response {
    let req: crate::explain::ExplainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("invalid explain request: {e}"),
            )
        }
    };
    let pods = remote_pods(&d).await;
    let sources = crate::explain::Sources {
        bpf_root: &d.bpf_root,
        endpoints: &d.endpoints,
        identities: &d.identities,
        ipcache: &d.ipcache,
        policies: &d.policies,
    };
    match crate::explain::explain(&sources, &req, &pods) {
        Ok(resp) => Json(resp).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}
