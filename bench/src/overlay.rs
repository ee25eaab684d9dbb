//! The multi-node targets, on a two-node cluster (real etcd, real agents):
//!
//! - time from a pod's ADD on node1 until node2's datapath can reach it
//!   (its address in node2's cilium_ipcache, confirmed by pings), against
//!   the ADD itself;
//! - cross-node pod-to-pod TCP throughput through cilium_vxlan, against two
//!   other machines on the same underlay joined by a plain kernel VXLAN
//!   device and routes.

use crate::{goals, in_ns, iperf, latency_line};
use abi::ipcache::{IpcacheKey, RemoteEndpointInfo};
use anyhow::{bail, Context};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::node::Node;

/// Waits until `ip` is in the node's cilium_ipcache.
pub(crate) fn until_in_ipcache(node: &Node, ip: IpAddr) -> anyhow::Result<()> {
    let map = datapath::PinnedMap::open_global(&node.bpffs(), abi::maps::IPCACHE)?;
    let key = IpcacheKey::new(ip, abi::ipcache::host_prefix_len(ip));
    let deadline = Instant::now() + Duration::from_secs(10);
    while map.get::<_, RemoteEndpointInfo>(&key)?.is_none() {
        if Instant::now() > deadline {
            bail!("{ip} never reached {}'s ipcache", node.name);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

/// A machine with a kernel VXLAN device towards `peer`, and a pod behind it
/// at 10.20<n>.0.2 reached through a plain veth; the other side's pods are
/// routed over the VXLAN with the same route MTU Cilium's pods use.
fn plain_vxlan_node(
    cluster: &Cluster,
    n: u8,
    me: Ipv4Addr,
    peer: Ipv4Addr,
) -> anyhow::Result<(std::path::PathBuf, Ipv4Addr)> {
    let machine = cluster.machine(&format!("plain{n}"), me);
    let pod = cluster.sb.path().join(format!("plain{n}-pod"));
    netdev::netns::create(&pod)?;
    let (transit, other) = (format!("10.200.0.{n}/24"), 3 - n);
    let pod_ip = Ipv4Addr::new(10, 200 + n, 0, 2);
    let m = |args: &[&str]| in_ns(&machine, "ip", args);
    m(&[
        "link",
        "add",
        "vx0",
        "type",
        "vxlan",
        "id",
        "100",
        "dstport",
        "4789",
        "local",
        &me.to_string(),
        "remote",
        &peer.to_string(),
        "dev",
        "eth0",
    ])?;
    m(&["addr", "add", &transit, "dev", "vx0"])?;
    m(&["link", "set", "vx0", "up"])?;
    m(&[
        "route",
        "add",
        &format!("10.{}.0.0/24", 200 + other),
        "via",
        &format!("10.200.0.{other}"),
        "dev",
        "vx0",
        "mtu",
        "1450",
    ])?;
    in_ns(&machine, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    m(&[
        "link",
        "add",
        "veth0",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &pod.display().to_string(),
    ])?;
    m(&[
        "addr",
        "add",
        &format!("10.{}.0.1/24", 200 + n),
        "dev",
        "veth0",
    ])?;
    m(&["link", "set", "veth0", "up"])?;
    let p = |args: &[&str]| in_ns(&pod, "ip", args);
    p(&["addr", "add", &format!("{pod_ip}/24"), "dev", "eth0"])?;
    p(&["link", "set", "eth0", "up"])?;
    p(&[
        "route",
        "add",
        "default",
        "via",
        &format!("10.{}.0.1", 200 + n),
        "mtu",
        "1450",
    ])?;
    Ok((pod, pod_ip))
}

pub fn run_bench(pods: usize, secs: u32) -> anyhow::Result<()> {
    let mut cluster = Cluster::new(2, &[]);
    for node in &mut cluster.nodes {
        node.quiet = true;
        node.start_agent();
    }
    let (node1, node2) = (&cluster.nodes[0], &cluster.nodes[1]);
    node2.add_pod("probe");

    let (mut adds, mut reach) = (Vec::new(), Vec::new());
    let mut first = None;
    for i in 0..pods {
        let name = format!("p{i}");
        let ns = node1.create_netns(&name);
        let t = Instant::now();
        let out = node1.cni_pod("ADD", &name, ns.to_str().context("netns path")?);
        adds.push(t.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(out.code == 0, "ADD {name}: {}", out.json);
        let ip: Ipv4Addr = out.json["ips"][0]["address"]
            .as_str()
            .and_then(|a| a.split('/').next()?.parse().ok())
            .context("address in the CNI result")?;
        until_in_ipcache(node2, ip.into())?;
        reach.push(t.elapsed().as_secs_f64() * 1000.0);
        first.get_or_insert(ip);
        if i == 0 || i + 1 == pods {
            anyhow::ensure!(node2.ping("probe", ip), "probe cannot ping {ip}");
        }
    }
    println!("cross-node reachability over {pods} pods (cilium-cni ADD on node1 start to node2's ipcache):");
    let (p50, p99) = latency_line("reachable from node2", &mut reach);
    let (ap50, ap99) = latency_line("baseline: the ADD on node1", &mut adds);
    println!(
        "  ratio reachable/ADD: p50 {:.2}x  p99 {:.2}x",
        p50 / ap50,
        p99 / ap99
    );

    let server = first.context("no pod")?;
    let (a, b) = (Ipv4Addr::new(198, 18, 0, 31), Ipv4Addr::new(198, 18, 0, 32));
    let (pod_a, _) = plain_vxlan_node(&cluster, 1, a, b)?;
    let (pod_b, ip_b) = plain_vxlan_node(&cluster, 2, b, a)?;
    let [ours, base] = crate::interleaved(
        3,
        [
            &mut || iperf(&node1.netns("p0"), &node2.netns("probe"), server, secs),
            &mut || iperf(&pod_b, &pod_a, ip_b, secs),
        ],
    )?;
    let ratio = ours / base;
    println!("cross-node pod-to-pod TCP throughput (iperf3, {secs} s, median of 3):");
    println!(
        "  through cilium_vxlan + BPF        {:7.2} Gbit/s",
        ours / 1e9
    );
    println!(
        "  baseline: kernel VXLAN + routes   {:7.2} Gbit/s",
        base / 1e9
    );
    println!(
        "  ratio {ratio:.2}x   {}",
        goals::at_least(
            "cross-node, tunnel vs kernel VXLAN + routes",
            ratio,
            goals::TUNNEL_THROUGHPUT
        )
    );
    Ok(())
}
