//! Nodes on one underlay with a real etcd, laid out by the `topology`
//! crate's plan as `cilium-lab` lays out its own: node `i` (from 1) has
//! `eth0` at `topology::node_ip(i)` and the pod CIDR
//! `topology::pod_cidr(i)`; etcd listens on the bridge's address. Agents
//! run in kvstore mode.

use crate::node::Node;
use crate::Sandbox;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub sb: Sandbox,
    etcd: Option<usize>,
}

impl Cluster {
    pub fn new(n: usize, agent_args: &[&str]) -> Self {
        let sb = Sandbox::enter();
        let mut nodes = Vec::new();
        for i in 1..=n {
            let name = topology::node_name(i);
            let node = Node::in_cluster(&sb, &name, &topology::pod_cidr(i));
            plug(
                node.netns.as_ref().expect("cluster node netns"),
                &name,
                topology::node_ip(i),
            );
            nodes.push(node);
        }
        let kvstore = format!("--kvstore-opt=etcd.address={}", topology::etcd_url());
        for node in &mut nodes {
            node.agent_args = ["--kvstore=etcd", kvstore.as_str()]
                .iter()
                .chain(agent_args)
                .map(|s| s.to_string())
                .collect();
        }
        let mut cluster = Self {
            nodes,
            sb,
            etcd: None,
        };
        cluster.start_etcd();
        cluster
    }

    /// A bare machine on the underlay: a netns at `<sandbox>/<name>` with
    /// `eth0` at `ip`.
    pub fn machine(&self, name: &str, ip: Ipv4Addr) -> PathBuf {
        let path = self.sb.path().join(name);
        netdev::netns::create(&path).expect("create machine netns");
        plug(&path, name, ip);
        path
    }

    /// Starts etcd on its data dir (again, after `stop_etcd`).
    pub fn start_etcd(&mut self) {
        let etcd = crate::start_etcd(&self.sb.path().join("etcd"));
        self.etcd = Some(self.sb.adopt(etcd));
    }

    pub fn stop_etcd(&mut self) {
        let child = self.sb.child(self.etcd.take().expect("etcd running"));
        child.kill().expect("kill etcd");
        child.wait().expect("reap etcd");
    }
}

/// Plugs the netns at `netns` into the sandbox's bridge (made on first use)
/// as `eth0` with `ip`; `port` names its end on the bridge.
fn plug(netns: &Path, port: &str, ip: Ipv4Addr) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let switch = netdev::Netlink::connect()?;
        let bridge = topology::underlay::bridge(&switch).await?;
        let ns = netdev::NetNs::open(netns)?;
        let nl = netdev::Netlink::connect_in(&ns)?;
        topology::underlay::plug(&switch, &bridge, &nl, &ns, port, ip).await
    })
    .expect("plug into the underlay bridge");
}
