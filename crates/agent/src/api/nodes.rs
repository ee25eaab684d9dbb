//! `/cluster/nodes`: this node and the others it knows; `/node/ids`: the
//! IDs it gave the others.

use axum::extract::State;
use axum::{Json, Router};
use controlplane::node_ids::NodeIds;
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

async fn node_ids(State(ids): State<Arc<NodeIds>>) -> Json<Vec<api::models::NodeId>> {
    Json(
        ids.list()
            .into_iter()
            .map(|(id, ips)| api::models::NodeId {
                id: i64::from(id),
                ips: ips.iter().map(ToString::to_string).collect(),
            })
            .collect(),
    )
}

/// `GET /v1/cluster/nodes` and `GET /v1/node/ids`.
pub fn routes(nodes: Arc<Nodes>, ids: Arc<NodeIds>) -> Router {
    Router::new()
        .route("/v1/cluster/nodes", axum::routing::get(cluster_nodes))
        .with_state(nodes)
        .merge(
            Router::new()
                .route("/v1/node/ids", axum::routing::get(node_ids))
                .with_state(ids),
        )
}
