//! Nodes in Kubernetes: this node's CiliumNode (its addresses, pod CIDR,
//! an owner reference to its Node), and every CiliumNode as the node
//! manager's source, so other nodes are routed to as they appear.

use crate::k8s::connection::Kubernetes;
use crate::option::Families;
use controlplane::endpoint::{EndpointError, Endpoints};
use controlplane::node::{IpNet, Node, NodeAddress};
use controlplane::nodes::Nodes;
use controlplane::tasks::Tasks;
use k8s::k8s_openapi::api::core::v1::Node as K8sNode;
use k8s::kube::api::{ApiResource, DynamicObject, PostParams};
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::sync::Arc;
use std::time::Duration;
use watch::{Change, Source};

fn resource() -> ApiResource {
    k8s::cilium::nodes()
}

/// The CiliumNode's spec for `node` (Cilium's field names).
fn spec(node: &Node) -> serde_json::Value {
    let addresses: Vec<serde_json::Value> = node
        .addresses
        .iter()
        .map(|a| serde_json::json!({ "type": a.kind, "ip": a.ip }))
        .collect();
    let pod_cidrs: Vec<String> = node
        .ipv4_alloc_cidr
        .iter()
        .chain(&node.ipv6_alloc_cidr)
        .map(IpNet::cidr)
        .collect();
    let mut health = serde_json::json!({});
    if let Some(ip) = node.health_ipv4 {
        health["ipv4"] = ip.to_string().into();
    }
    if let Some(ip) = node.health_ipv6 {
        health["ipv6"] = ip.to_string().into();
    }
    serde_json::json!({
        "addresses": addresses,
        "ipam": { "podCIDRs": pod_cidrs },
        "health": health,
        "encryption": {},
    })
}

#[derive(Debug, thiserror::Error)]
pub enum CiliumNodeError {
    #[error("CiliumNode has no spec.addresses")]
    NoAddresses,
    #[error("CiliumNode pod CIDR {0:?} is not a CIDR")]
    PodCidr(String),
}

/// A CiliumNode's (or Node's) first pod CIDR of each family, as written.
fn first_cidrs<'a>(cidrs: impl IntoIterator<Item = &'a str>) -> (Option<&'a str>, Option<&'a str>) {
    let mut v4 = None;
    let mut v6 = None;
    for c in cidrs {
        let slot = if c.contains(':') { &mut v6 } else { &mut v4 };
        slot.get_or_insert(c);
    }
    (v4, v6)
}

/// `addr/len` of the family `A`, with at most `max_len` bits of prefix.
fn parse_net<A: std::str::FromStr>(c: &str, max_len: u8) -> Option<(A, u8)> {
    let (n, l) = c.split_once('/')?;
    let len: u8 = l.parse().ok().filter(|l| *l <= max_len)?;
    Some((n.parse().ok()?, len))
}

/// Another node as the node manager takes it.
fn decode(obj: &DynamicObject) -> Result<Node, CiliumNodeError> {
    let spec = &obj.data["spec"];
    let addresses: Vec<NodeAddress> = spec["addresses"]
        .as_array()
        .ok_or(CiliumNodeError::NoAddresses)?
        .iter()
        .filter_map(|a| {
            Some(NodeAddress {
                kind: a["type"].as_str()?.to_owned(),
                ip: a["ip"].as_str()?.to_owned(),
            })
        })
        .collect();
    let (v4, v6) = first_cidrs(
        spec["ipam"]["podCIDRs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str()),
    );
    let bad = |c: &str| CiliumNodeError::PodCidr(c.to_owned());
    let ipv4_alloc_cidr = v4
        .map(|c| {
            parse_net(c, 32)
                .map(|(n, l)| IpNet::v4(n, l))
                .ok_or_else(|| bad(c))
        })
        .transpose()?;
    let ipv6_alloc_cidr = v6
        .map(|c| {
            parse_net(c, 128)
                .map(|(n, l)| IpNet::v6(n, l))
                .ok_or_else(|| bad(c))
        })
        .transpose()?;
    Ok(Node {
        name: obj.name_any(),
        cluster: String::new(),
        addresses,
        ipv4_alloc_cidr,
        ipv6_alloc_cidr,
        // a malformed health address only costs that node its endpoint probe
        health_ipv4: spec["health"]["ipv4"].as_str().and_then(|s| s.parse().ok()),
        health_ipv6: spec["health"]["ipv6"].as_str().and_then(|s| s.parse().ok()),
        cluster_id: 0,
        source: "custom-resource".into(),
    })
}

/// Creates or updates this node's CiliumNode, trying again every 10 s
/// until it is written. Its owner is the Node of the same name, when
/// there is one, so it goes with it.
pub fn register(kubernetes: &Kubernetes, node: Node, tasks: &Tasks) {
    let client = kubernetes.client();
    tasks.spawn("k8s-ciliumnode-registration", async move {
        loop {
            match write(&client, &node).await {
                Ok(()) => {
                    tracing::info!(subsys = "nodediscovery", node = %node.name, "CiliumNode written");
                    return;
                }
                Err(e) => {
                    tracing::warn!(subsys = "nodediscovery", node = %node.name, error = %e, "Unable to write the CiliumNode, retrying");
                    tokio::time::sleep(Duration::from_secs(10)).await;
                }
            }
        }
    });
}

/// The owner reference to the Node named `name`, when there is one.
async fn node_owner(
    client: &k8s::kube::Client,
    name: &str,
) -> Result<
    Option<k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
    k8s::kube::Error,
> {
    let nodes: Api<K8sNode> = Api::all(client.clone());
    // The API server's watch cache answers at once; a quorum read waits on
    // etcd (tens of ms on a busy control plane) and delays the CiliumNode
    // the operator allocates from. Cilium reads Nodes from its informer,
    // which is no fresher. The quorum read stays for a Node the cache has
    // not seen yet.
    let cached = nodes
        .get_metadata_opt_with(name, &k8s::kube::api::GetParams::any())
        .await?;
    let meta = match cached {
        Some(m) => m.metadata,
        None => match nodes.get_opt(name).await? {
            Some(n) => n.metadata,
            None => return Ok(None),
        },
    };
    Ok(meta.uid.map(
        |uid| k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: meta.name.unwrap_or_else(|| name.to_owned()),
            uid,
            ..Default::default()
        },
    ))
}

async fn write(client: &k8s::kube::Client, node: &Node) -> Result<(), k8s::kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    let mut obj = owned_object(
        client,
        &node.name,
        serde_json::json!({ "spec": spec(node) }),
    )
    .await?;
    if create_new(&api, &obj).await? {
        return Ok(());
    }
    // one from an earlier run: replaced (the agent may update, not patch)
    let current = api.get(&node.name).await?;
    obj.metadata.resource_version = current.resource_version();
    api.replace(&node.name, &PostParams::default(), &obj)
        .await?;
    Ok(())
}

/// The CiliumNode `name` holding `data`, owned by the Node of that name
/// (so it goes when the Node does).
async fn owned_object(
    client: &k8s::kube::Client,
    name: &str,
    data: serde_json::Value,
) -> Result<DynamicObject, k8s::kube::Error> {
    let mut obj = DynamicObject::new(name, &resource());
    obj.metadata.owner_references = node_owner(client, name).await?.map(|o| vec![o]);
    obj.data = data;
    Ok(obj)
}

/// Creates `obj`; false when a CiliumNode of its name exists already.
async fn create_new(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
) -> Result<bool, k8s::kube::Error> {
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(true),
        Err(k8s::kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PodCidrError {
    #[error("reading Node {node}: {source}")]
    Read {
        node: String,
        source: k8s::kube::Error,
    },
    #[error("Node {node} has no {family} pod CIDR after {waited:?} (is node IPAM on in the controller manager, for each family?)")]
    None {
        node: String,
        family: &'static str,
        waited: Duration,
    },
    #[error(
        "node {node}'s pod CIDR {cidr:?} is not an {family} CIDR with room for a router and pods"
    )]
    Bad {
        node: String,
        family: &'static str,
        cidr: String,
    },
}

/// This node's pod CIDRs, one of each family it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodCidrs {
    pub v4: Option<(std::net::Ipv4Addr, u8)>,
    pub v6: Option<(std::net::Ipv6Addr, u8)>,
}

/// The pod CIDRs of a node's list when it has one of every family wanted;
/// an error when one of them is malformed.
fn pod_cidrs_of<'a>(
    node: &str,
    cidrs: impl IntoIterator<Item = &'a str>,
    want: Families,
) -> Result<Option<PodCidrs>, PodCidrError> {
    let (v4, v6) = first_cidrs(cidrs);
    let bad = |family, cidr: &str| PodCidrError::Bad {
        node: node.to_owned(),
        family,
        cidr: cidr.to_owned(),
    };
    let v6 = match (want.ipv6, v6) {
        (false, _) => None,
        (true, None) => return Ok(None),
        (true, Some(c)) => Some(parse_net(c, 126).ok_or_else(|| bad("IPv6", c))?),
    };
    let v4 = match (want.ipv4, v4) {
        (false, _) => None,
        (true, None) => return Ok(None),
        (true, Some(c)) => Some(parse_net(c, 30).ok_or_else(|| bad("IPv4", c))?),
    };
    Ok(Some(PodCidrs { v4, v6 }))
}

/// This node's pod CIDRs from cluster-pool IPAM: the CiliumNode is created
/// (without IPAM data, owned by its Node) unless it exists, then read
/// until the operator has written `spec.ipam.podCIDRs`, one of each
/// family on. Cilium waits as long as that takes; so does this, saying so
/// every few seconds.
pub async fn wait_cluster_pool_cidr(
    kubernetes: &Kubernetes,
    node: &str,
    want: Families,
) -> Result<PodCidrs, PodCidrError> {
    use futures::StreamExt;
    use k8s::kube::runtime::WatchStreamExt;
    let client = kubernetes.client();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    let read = |source| PodCidrError::Read {
        node: node.to_owned(),
        source,
    };
    let started = std::time::Instant::now();
    let mut still = tokio::time::interval(Duration::from_secs(10));
    still.tick().await;
    // Created before the watch's first list: a new node has none, and the
    // operator allocates only once it exists. One that does exists costs
    // a refused create.
    create_for_pool(&client, &api, node).await.map_err(read)?;
    // the object itself is watched: the CIDR is taken the moment the
    // operator writes it, at the cost of one watch, not a poll
    let mut updates = watcher::watch_object(api.clone(), node)
        .default_backoff()
        .boxed();
    loop {
        let update = tokio::select! {
            u = updates.next() => u,
            _ = still.tick() => {
                tracing::info!(subsys = "ipam", node, waited = ?started.elapsed(), "Still waiting for the operator to give this node a pod CIDR (cluster-pool IPAM)");
                continue;
            }
        };
        match update {
            None => {
                // the stream ended: watch again
                updates = watcher::watch_object(api.clone(), node)
                    .default_backoff()
                    .boxed();
            }
            Some(Err(e)) => {
                tracing::debug!(subsys = "ipam", node, error = %e, "Watching this node's CiliumNode, retrying");
            }
            Some(Ok(None)) => create_for_pool(&client, &api, node).await.map_err(read)?,
            Some(Ok(Some(obj))) => {
                let cidrs = obj.data["spec"]["ipam"]["podCIDRs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str());
                if let Some(found) = pod_cidrs_of(node, cidrs, want)? {
                    return Ok(found);
                }
            }
        }
    }
}

/// An empty CiliumNode for the operator to give a pod CIDR, unless there
/// is one already.
async fn create_for_pool(
    client: &k8s::kube::Client,
    api: &Api<DynamicObject>,
    node: &str,
) -> Result<(), k8s::kube::Error> {
    let empty = serde_json::json!({ "spec": { "addresses": [], "ipam": {} } });
    if create_new(api, &owned_object(client, node, empty).await?).await? {
        tracing::info!(
            subsys = "ipam",
            node,
            "CiliumNode created; waiting for the operator to give it a pod CIDR"
        );
    }
    Ok(())
}

/// How long a start waits for the Node's pod CIDR (Cilium waits as long).
const POD_CIDR_WAIT: Duration = Duration::from_secs(300);

/// The Node's pod CIDRs (`spec.podCIDRs`, as kube-controller-manager
/// allocates them), waiting until there is one of each family on
/// (`ipam=kubernetes`).
pub async fn wait_pod_cidr(
    kubernetes: &Kubernetes,
    node: &str,
    want: Families,
) -> Result<PodCidrs, PodCidrError> {
    let nodes: Api<K8sNode> = Api::all(kubernetes.client());
    let started = std::time::Instant::now();
    loop {
        let found = nodes
            .get_opt(node)
            .await
            .map_err(|source| PodCidrError::Read {
                node: node.to_owned(),
                source,
            })?;
        let cidrs: Vec<String> = found
            .and_then(|n| n.spec)
            .map(|s| {
                s.pod_cidrs
                    .unwrap_or_default()
                    .into_iter()
                    .chain(s.pod_cidr)
                    .collect()
            })
            .unwrap_or_default();
        let (v4, _) = first_cidrs(cidrs.iter().map(String::as_str));
        if let Some(found) = pod_cidrs_of(node, cidrs.iter().map(String::as_str), want)? {
            return Ok(found);
        }
        if started.elapsed() > POD_CIDR_WAIT {
            return Err(PodCidrError::None {
                node: node.to_owned(),
                family: if want.ipv4 && v4.is_none() {
                    "IPv4"
                } else {
                    "IPv6"
                },
                waited: POD_CIDR_WAIT,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Follows every CiliumNode into the node manager (which skips this one).
pub fn follow(nodes: Arc<Nodes>, kubernetes: &Kubernetes, tasks: &Tasks) {
    let api: Api<DynamicObject> = Api::all_with(kubernetes.client(), &resource());
    let source = ResourceSource::new("CiliumNodes", api, watcher::Config::default());
    let source = kubernetes
        .watched("cilium/v2::CiliumNode", source)
        .decode(|_, obj: &DynamicObject| decode(obj));
    nodes.follow(source, tasks);
}

/// Follows this node's Node object into the host endpoint's labels
/// (1.16 lists the host endpoint with its node's labels). Not one of the
/// APIs status lists: 1.16 does not name it there either.
pub fn follow_own_labels(
    endpoints: Arc<Endpoints>,
    kubernetes: &Kubernetes,
    node: &str,
    tasks: &Tasks,
) {
    let this_node = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let source = ResourceSource::new("Node", Api::<K8sNode>::all(kubernetes.client()), this_node)
        .decode(|_, n: &K8sNode| Ok::<_, std::convert::Infallible>(n.labels().clone()));
    let handler = move |change: Change<String, std::collections::BTreeMap<String, String>>| {
        let endpoints = Arc::clone(&endpoints);
        async move {
            let Change::Upsert { new, .. } = change else {
                return Ok(());
            };
            let labels = controlplane::labels::host_endpoint_labels(&new);
            match endpoints.set_host_labels(labels) {
                Ok(_) | Err(EndpointError::NotFound) => Ok(()),
                Err(e) => Err(e),
            }
        }
    };
    tasks.spawn(
        "k8s-node-labels",
        watch::Store::new("node").run(source, handler),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_round_trips_through_its_cilium_node() {
        let node = Node {
            name: "node2".into(),
            cluster: String::new(),
            addresses: vec![
                NodeAddress {
                    kind: "InternalIP".into(),
                    ip: "198.18.0.12".into(),
                },
                NodeAddress {
                    kind: "CiliumInternalIP".into(),
                    ip: "10.2.0.1".into(),
                },
            ],
            ipv4_alloc_cidr: Some(IpNet::v4("10.2.0.0".parse().unwrap(), 24)),
            ipv6_alloc_cidr: None,
            health_ipv4: Some("10.2.0.7".parse().unwrap()),
            health_ipv6: Some("fd00::107".parse().unwrap()),
            cluster_id: 0,
            source: "custom-resource".into(),
        };
        let mut obj = DynamicObject::new("node2", &resource());
        obj.data = serde_json::json!({ "spec": spec(&node) });
        assert_eq!(obj.data["spec"]["ipam"]["podCIDRs"][0], "10.2.0.0/24");
        assert_eq!(obj.data["spec"]["health"]["ipv4"], "10.2.0.7");
        assert_eq!(obj.data["spec"]["health"]["ipv6"], "fd00::107");
        assert_eq!(decode(&obj).unwrap(), node);

        obj.data["spec"]["ipam"]["podCIDRs"] = serde_json::json!(["10.2.0.0/99"]);
        assert!(decode(&obj).is_err());

        // dual stack: the IPv6 CIDR after the IPv4 one, and back
        let node = Node {
            ipv6_alloc_cidr: Some(IpNet::v6("fd00::200".parse().unwrap(), 120)),
            ..node
        };
        obj.data = serde_json::json!({ "spec": spec(&node) });
        assert_eq!(
            obj.data["spec"]["ipam"]["podCIDRs"],
            serde_json::json!(["10.2.0.0/24", "fd00::200/120"])
        );
        assert_eq!(decode(&obj).unwrap(), node);
        obj.data["spec"]["ipam"]["podCIDRs"] = serde_json::json!(["10.2.0.0/24", "fd00::/999"]);
        assert!(decode(&obj).is_err());
    }

    #[test]
    fn a_start_waits_for_a_pod_cidr_of_each_family_on() {
        let (v4_only, dual, v6_only) = (
            Families {
                ipv4: true,
                ipv6: false,
            },
            Families {
                ipv4: true,
                ipv6: true,
            },
            Families {
                ipv4: false,
                ipv6: true,
            },
        );
        let cidrs = |list: &[&'static str], want| pod_cidrs_of("n", list.iter().copied(), want);
        let v4 = Some(("10.2.0.0".parse().unwrap(), 24));
        let v6 = Some(("fd00::100".parse().unwrap(), 120));
        assert_eq!(
            cidrs(&["10.2.0.0/24"], v4_only).unwrap(),
            Some(PodCidrs { v4, v6: None })
        );
        assert_eq!(
            cidrs(&["10.2.0.0/24"], dual).unwrap(),
            None,
            "waits for IPv6"
        );
        assert_eq!(cidrs(&["fd00::/120"], dual).unwrap(), None, "and for IPv4");
        assert_eq!(
            cidrs(&["fd00::100/120", "10.2.0.0/24"], dual).unwrap(),
            Some(PodCidrs { v4, v6 })
        );
        assert_eq!(
            cidrs(&["fd00::100/120"], v6_only).unwrap(),
            Some(PodCidrs { v4: None, v6 }),
            "an IPv6-only node needs no IPv4 CIDR"
        );
        let e = cidrs(&["10.2.0.0/24", "fd00::/127"], dual).unwrap_err();
        assert!(
            e.to_string().contains("\"fd00::/127\" is not an IPv6 CIDR"),
            "{e}"
        );
        assert!(cidrs(&["10.2.0.0/31"], v4_only).is_err());
    }
}
