//! `/cluster/nodes`: this node and the others it knows.

use axum::extract::State;
use axum::{Json, Router};
use controlplane::nodes::Nodes;
use std::sync::Arc;

async fn cluster_nodes(State(nodes): State<Arc<Nodes>>) -> Json<api::models::ClusterNodeStatus> {
    let local = nodes.local();
    let mut all = vec![local.to_api("local")];
    // where each was learned: a CiliumNode, else the kvstore
    all.extend(nodes.list().iter().map(|n| {
        let source = if n.source == "custom-resource" {
            "custom-resource"
        } else {
            "kvstore"
        };
        n.to_api(source)
    }));
    Json(api::models::ClusterNodeStatus {
        self_: local.name.clone(),
        nodes_added: all,
    })
}

/// `GET /v1/cluster/nodes`.
pub fn routes(nodes: Arc<Nodes>) -> Router {
    Router::new()
        .route("/v1/cluster/nodes", axum::routing::get(cluster_nodes))
        .with_state(nodes)
}
