//! `peer.Peer`: how Hubble Relay finds the nodes. `Notify` streams every
//! node of the cluster (this one too) as `PEER_ADDED`, with the address
//! its Hubble server listens on and the name its TLS certificate carries,
//! then each change: a node that comes, goes, or moves to another address.

use controlplane::node::Node;
use controlplane::nodes::Nodes;
use controlplane::tasks::Tasks;
use hubble::peer::{self as pb, peer_server, ChangeNotificationType};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// What Relay is told of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub address: String,
    pub tls_server_name: Option<String>,
}

/// How this cluster's Hubble servers are reached.
#[derive(Clone, Debug)]
pub struct Reach {
    /// `hubble-listen-address`'s port, added to each address.
    pub port: Option<u16>,
    /// Unless `hubble-disable-tls`: server names go with the addresses.
    pub tls: bool,
}

/// A node's name as Hubble shows it: `cluster/node` outside the
/// `default` cluster.
fn full_name(n: &Node) -> String {
    super::absolute_node_name(&n.cluster, &n.name)
}

/// The name in a node's Hubble server certificate:
/// `<node>.<cluster>.hubble-grpc.cilium.io`, dots within either made
/// dashes.
pub fn tls_server_name(node: &str, cluster: &str) -> String {
    let cluster = if cluster.is_empty() {
        "default"
    } else {
        cluster
    };
    format!(
        "{}.{}.hubble-grpc.cilium.io",
        node.replace('.', "-"),
        cluster.replace('.', "-")
    )
}

/// The node's InternalIP, else its ExternalIP, IPv4 first; with the port
/// when the servers listen on TCP.
fn address(n: &Node, port: Option<u16>) -> String {
    let pick = |kind: &str| {
        n.addresses
            .iter()
            .filter(|a| a.kind == kind)
            .filter_map(|a| a.ip.parse::<IpAddr>().ok())
            .min_by_key(|ip| ip.is_ipv6())
    };
    let Some(ip) = pick("InternalIP").or_else(|| pick("ExternalIP")) else {
        return String::new();
    };
    match (port, ip) {
        (None, ip) => ip.to_string(),
        (Some(p), IpAddr::V4(v4)) => format!("{v4}:{p}"),
        (Some(p), IpAddr::V6(v6)) => format!("[{v6}]:{p}"),
    }
}

/// Every node as Relay is to see it, by full name.
pub fn peers(nodes: &[Node], reach: &Reach) -> BTreeMap<String, Peer> {
    nodes
        .iter()
        .map(|n| {
            (
                full_name(n),
                Peer {
                    address: address(n, reach.port),
                    tls_server_name: reach.tls.then(|| tls_server_name(&n.name, &n.cluster)),
                },
            )
        })
        .collect()
}

fn notification(name: &str, peer: &Peer, kind: ChangeNotificationType) -> pb::ChangeNotification {
    pb::ChangeNotification {
        name: name.to_owned(),
        address: peer.address.clone(),
        r#type: kind as i32,
        tls: peer.tls_server_name.as_ref().map(|n| pb::Tls {
            server_name: n.clone(),
        }),
    }
}

/// What changed between two views of the cluster, as Cilium tells it:
/// gone nodes deleted, new ones added, moved ones updated.
pub fn changes(
    old: &BTreeMap<String, Peer>,
    new: &BTreeMap<String, Peer>,
) -> Vec<pb::ChangeNotification> {
    let mut out = Vec::new();
    for (name, peer) in old {
        if !new.contains_key(name) {
            out.push(notification(
                name,
                peer,
                ChangeNotificationType::PeerDeleted,
            ));
        }
    }
    for (name, peer) in new {
        match old.get(name) {
            None => out.push(notification(name, peer, ChangeNotificationType::PeerAdded)),
            Some(was) if was != peer => out.push(notification(
                name,
                peer,
                ChangeNotificationType::PeerUpdated,
            )),
            Some(_) => {}
        }
    }
    out
}

/// Where the cluster's nodes come from: the node manager.
pub trait NodeSource: Send + Sync {
    /// Every node, this one included.
    fn all(&self) -> Vec<Node>;
    /// Wakes when a node came, changed or went.
    fn subscribe(&self) -> watch::Receiver<u64>;
}

impl NodeSource for Nodes {
    fn all(&self) -> Vec<Node> {
        let mut all = self.list();
        all.push(self.local().clone());
        all
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        Nodes::subscribe(self)
    }
}

#[derive(Clone)]
pub struct PeerService {
    nodes: Arc<dyn NodeSource>,
    reach: Reach,
    tasks: Tasks,
}

impl PeerService {
    pub fn new(nodes: Arc<dyn NodeSource>, reach: Reach, tasks: Tasks) -> Self {
        Self {
            nodes,
            reach,
            tasks,
        }
    }

    fn view(&self) -> BTreeMap<String, Peer> {
        peers(&self.nodes.all(), &self.reach)
    }
}

type Stream<T> = Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

/// Notifications a slow Relay may have waiting before its stream is
/// ended (Cilium's limit).
const SEND_BUFFER: usize = 65_536;

#[tonic::async_trait]
impl peer_server::Peer for PeerService {
    type NotifyStream = Stream<pb::ChangeNotification>;

    async fn notify(
        &self,
        _: Request<pb::NotifyRequest>,
    ) -> Result<Response<Self::NotifyStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(SEND_BUFFER);
        let this = self.clone();
        self.tasks.spawn("hubble-peer", async move {
            let mut changed = this.nodes.subscribe();
            let mut known = BTreeMap::new();
            let stopping = this.tasks.stopping();
            tokio::pin!(stopping);
            loop {
                let now = this.view();
                for n in changes(&known, &now) {
                    if tx.try_send(Ok(n)).is_err() {
                        let _ = tx.try_send(Err(Status::resource_exhausted(
                            "server stream send was blocked for too long",
                        )));
                        return;
                    }
                }
                known = now;
                tokio::select! {
                    c = changed.changed() => if c.is_err() { return },
                    _ = tx.closed() => return,
                    _ = &mut stopping => return,
                }
            }
        });
        Ok(Response::new(Box::pin(futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|item| (item, rx)) },
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use controlplane::node::NodeAddress;

    fn node(name: &str, cluster: &str, ip: &str) -> Node {
        Node {
            name: name.into(),
            cluster: cluster.into(),
            addresses: vec![
                NodeAddress {
                    kind: "CiliumInternalIP".into(),
                    ip: "10.0.1.1".into(),
                },
                NodeAddress {
                    kind: "InternalIP".into(),
                    ip: ip.into(),
                },
            ],
            ipv4_alloc_cidr: None,
            ipv6_alloc_cidr: None,
            health_ipv4: None,
            health_ipv6: None,
            cluster_id: 0,
            source: String::new(),
        }
    }

    #[test]
    fn peers_carry_the_listen_port_and_certificate_names() {
        let reach = Reach {
            port: Some(4244),
            tls: true,
        };
        let p = peers(
            &[
                node("kind-worker", "default", "198.18.0.11"),
                node("n.2", "east.1", "198.18.0.12"),
            ],
            &reach,
        );
        let w = &p["kind-worker"];
        assert_eq!(w.address, "198.18.0.11:4244");
        assert_eq!(
            w.tls_server_name.as_deref(),
            Some("kind-worker.default.hubble-grpc.cilium.io")
        );
        assert_eq!(
            p["east.1/n.2"].tls_server_name.as_deref(),
            Some("n-2.east-1.hubble-grpc.cilium.io")
        );
        let plain = peers(
            &[node("a", "", "198.18.0.11")],
            &Reach {
                port: None,
                tls: false,
            },
        );
        assert_eq!(plain["a"].address, "198.18.0.11");
        assert_eq!(plain["a"].tls_server_name, None);
    }

    #[test]
    fn changes_say_who_came_went_and_moved() {
        let reach = Reach {
            port: None,
            tls: false,
        };
        let before = peers(
            &[node("a", "", "198.18.0.11"), node("b", "", "198.18.0.12")],
            &reach,
        );
        let after = peers(
            &[node("b", "", "198.18.0.22"), node("c", "", "198.18.0.13")],
            &reach,
        );
        let got: Vec<(String, i32)> = changes(&before, &after)
            .into_iter()
            .map(|n| (n.name, n.r#type))
            .collect();
        assert_eq!(
            got,
            [
                ("a".into(), ChangeNotificationType::PeerDeleted as i32),
                ("b".into(), ChangeNotificationType::PeerUpdated as i32),
                ("c".into(), ChangeNotificationType::PeerAdded as i32),
            ]
        );
        assert!(changes(&after, &after).is_empty());
    }
}
