//! Garbage collection of CiliumNodes whose Node is gone, as Cilium's
//! operator runs it (`nodes-gc-interval`). An agent's own CiliumNode is
//! owned by its Node, so Kubernetes collects it with the Node; this
//! catches CiliumNodes without owners (written by hand, or by an older
//! agent). Such a node is a candidate when its Node does not exist, and
//! is deleted when it is still one an interval later, so a CiliumNode
//! written just before its Node registers is not taken for an orphan.

use k8s::k8s_openapi::api::core::v1::Node;
use k8s::kube::api::DynamicObject;
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::time::Duration;
use watch::Mirror;
use watch::Source;

/// What the collector keeps of a CiliumNode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CiliumNode {
    uid: String,
    owned: bool,
}

fn cilium_node(obj: &DynamicObject) -> CiliumNode {
    CiliumNode {
        uid: obj.uid().unwrap_or_default(),
        owned: !obj.owner_references().is_empty(),
    }
}

/// This run's candidates, and those of the last run that are still
/// candidates (to delete).
pub fn candidates(
    cilium_nodes: &Mirror<CiliumNode>,
    nodes: &Mirror<()>,
    last: &BTreeSet<String>,
) -> (BTreeSet<String>, Vec<String>) {
    let now: BTreeSet<String> = cilium_nodes
        .iter()
        .filter(|(name, cn)| !cn.owned && !nodes.contains(name))
        .map(|(name, _)| name.clone())
        .collect();
    let delete = now.intersection(last).cloned().collect();
    (now, delete)
}

async fn delete(api: &Api<DynamicObject>, name: &str, cn: &CiliumNode) {
    match crate::judged::delete(api, name, Some(cn.uid.clone()), None).await {
        Ok(true) => {
            tracing::info!(
                subsys = "cilium-node-gc",
                nodeName = name,
                "Deleted a CiliumNode whose Node is gone"
            );
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(subsys = "cilium-node-gc", nodeName = name, error = %e, "Unable to delete CiliumNode, trying again next run");
        }
    }
}

/// Collects orphaned CiliumNodes every `interval` until the operator stops.
pub async fn run(client: k8s::kube::Client, interval: Option<Duration>) {
    let Some(interval) = interval else {
        return std::future::pending().await;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &k8s::cilium::nodes());
    let mut cilium_node_events =
        ResourceSource::new("CiliumNodes", api.clone(), watcher::Config::default())
            .decode(|_, obj: &DynamicObject| Ok::<_, Infallible>(cilium_node(obj)));
    let mut node_events = ResourceSource::new(
        "Nodes",
        Api::<Node>::all(client),
        watcher::Config::default(),
    )
    .decode(|_, _: &Node| Ok::<_, Infallible>(()));
    let mut cilium_nodes = Mirror::default();
    let mut nodes = Mirror::default();
    let mut last = BTreeSet::new();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            more = cilium_nodes.follow(&mut cilium_node_events) => if !more { return },
            more = nodes.follow(&mut node_events) => if !more { return },
            _ = tick.tick(), if cilium_nodes.listed() && nodes.listed() => {
                let (now, gone) = candidates(&cilium_nodes, &nodes, &last);
                for name in &gone {
                    if let Some(cn) = cilium_nodes.get(name) {
                        delete(&api, name, cn).await;
                    }
                }
                if !now.is_empty() {
                    tracing::debug!(subsys = "cilium-node-gc", candidates = ?now, "CiliumNodes without a Node");
                }
                last = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cn(owned: bool) -> CiliumNode {
        CiliumNode {
            uid: "u".into(),
            owned,
        }
    }

    #[test]
    fn an_unowned_cilium_node_without_its_node_goes_on_the_second_run() {
        let cns = Mirror::from_iter([("a", cn(false)), ("b", cn(true)), ("c", cn(false))]);
        let nodes = Mirror::from_iter([("c", ())]);
        let (first, gone) = candidates(&cns, &nodes, &BTreeSet::new());
        assert_eq!(first, BTreeSet::from(["a".to_owned()]));
        assert!(gone.is_empty());
        let (_, gone) = candidates(&cns, &nodes, &first);
        assert_eq!(gone, ["a"]);
        // its Node came meanwhile: no longer a candidate
        let nodes = Mirror::from_iter([("a", ()), ("c", ())]);
        let (now, gone) = candidates(&cns, &nodes, &first);
        assert!(now.is_empty() && gone.is_empty());
    }
}
