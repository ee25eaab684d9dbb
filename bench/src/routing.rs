//! Issue 20's native-routing target: cross-node pod-to-pod TCP throughput
//! with `routing-mode=native` and `auto-direct-node-routes` (pods on two
//! nodes, `<pod CIDR> via <node IP>` routes, no encapsulation), against
//! the same two nodes and pods in tunnel mode (cilium_vxlan), and against
//! plain routing between the same kind of namespaces: two machines on the
//! same underlay, each with a pod behind a plain veth and a kernel route to
//! the other's pods via its address, no BPF. Cilium runs as the lab runs
//! it (kube-proxy replacement, BPF masquerading), so with BPF host routing;
//! native routing is measured again with legacy host routing, the rest
//! alike. The agents are restarted with the other mode between
//! measurements, so the four take turns (median of three rounds each) and
//! the machine's noise hits them alike.

use crate::{goals, in_ns, iperf, plain_veth};
use anyhow::Context;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use testsupport::cluster::Cluster;

const NATIVE: [&str; 3] = [
    "--routing-mode=native",
    "--ipv4-native-routing-cidr=10.0.0.0/8",
    "--auto-direct-node-routes=true",
];
const TUNNEL: [&str; 1] = ["--routing-mode=tunnel"];
/// What BPF host routing needs (Cilium chooses it then).
const HOST_ROUTING: [&str; 2] = [
    "--kube-proxy-replacement=true",
    "--enable-bpf-masquerade=true",
];
const LEGACY: &str = "--enable-host-legacy-routing=true";

/// Restarts both agents with `mode` (on top of the cluster's own flags),
/// then gives the mode's own client (node1) and server (node2) pods, made
/// under that mode the first time: a pod's routes carry its mode's MTU
/// (1450 under the overlay), as after a real change of mode, where pods
/// are restarted. Returns the server's address once the client reaches it.
fn switch_mode(
    cluster: &mut Cluster,
    base: &[String],
    mode: &[&str],
    (client, server): (&str, &str),
) -> anyhow::Result<Ipv4Addr> {
    for node in &mut cluster.nodes {
        node.kill_agent();
        node.agent_args = base
            .iter()
            .cloned()
            .chain(mode.iter().map(|s| s.to_string()))
            .collect();
        node.start_agent();
    }
    cluster.nodes[0].add_pod_if_missing(client);
    let server_ip = cluster.nodes[1].add_pod_if_missing(server);
    let t = std::time::Instant::now();
    while !cluster.nodes[0].ping(client, server_ip) {
        anyhow::ensure!(
            t.elapsed().as_secs() < 30,
            "{client} cannot reach {server_ip} after switching to {mode:?}"
        );
    }
    Ok(server_ip)
}

/// Machine `n` (1 or 2) at 198.18.0.4n with a pod at 10.21n.0.2 behind a
/// plain veth, and the other machine's pods routed via its address.
fn plain_routed_node(cluster: &Cluster, n: u8) -> anyhow::Result<(PathBuf, Ipv4Addr)> {
    let other = 3 - n;
    let machine = cluster.machine(&format!("routed{n}"), Ipv4Addr::new(198, 18, 0, 40 + n));
    let pod = cluster.sb.path().join(format!("routed{n}-pod"));
    netdev::netns::create(&pod)?;
    let (pod_ip, gw) = (
        Ipv4Addr::new(10, 210 + n, 0, 2),
        Ipv4Addr::new(10, 210 + n, 0, 1),
    );
    plain_veth(&pod, "veth0", &machine.display().to_string(), pod_ip, gw)?;
    let m = |args: &[&str]| in_ns(&machine, "ip", args);
    m(&["addr", "add", &format!("{gw}/32"), "dev", "veth0"])?;
    m(&["link", "set", "veth0", "up"])?;
    m(&["route", "add", &format!("{pod_ip}/32"), "dev", "veth0"])?;
    m(&[
        "route",
        "add",
        &format!("10.{}.0.0/24", 210 + other),
        "via",
        &format!("198.18.0.{}", 40 + other),
        "dev",
        "eth0",
    ])?;
    in_ns(&machine, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    Ok((pod, pod_ip))
}

pub fn run_bench(secs: u32) -> anyhow::Result<()> {
    let mut cluster = Cluster::new(2, &NATIVE);
    let base: Vec<String> = cluster.nodes[0]
        .agent_args
        .iter()
        .filter(|a| !NATIVE.contains(&a.as_str()))
        .cloned()
        .collect();
    for node in &mut cluster.nodes {
        node.quiet = true;
        node.start_agent();
    }
    let (plain_client, _) = plain_routed_node(&cluster, 1)?;
    let (plain_server, plain_ip) = plain_routed_node(&cluster, 2)?;

    let cluster = std::cell::RefCell::new(cluster);
    let under = |mode: &[&str], pods: (&str, &str)| -> anyhow::Result<f64> {
        let mut c = cluster.borrow_mut();
        let server = switch_mode(&mut c, &base, mode, pods)?;
        let (client_ns, server_ns) = (c.nodes[0].netns(pods.0), c.nodes[1].netns(pods.1));
        iperf(&server_ns, &client_ns, server, secs)
    };
    let native_bpf: Vec<&str> = NATIVE.iter().chain(&HOST_ROUTING).copied().collect();
    let native_legacy: Vec<&str> = native_bpf.iter().copied().chain([LEGACY]).collect();
    let tunnel_bpf: Vec<&str> = TUNNEL.iter().chain(&HOST_ROUTING).copied().collect();
    let [native, legacy, tunnel, plain] = crate::interleaved(
        3,
        [
            &mut || under(&native_bpf, ("native-client", "native-server")),
            &mut || under(&native_legacy, ("legacy-client", "legacy-server")),
            &mut || under(&tunnel_bpf, ("tunnel-client", "tunnel-server")),
            &mut || iperf(&plain_server, &plain_client, plain_ip, secs),
        ],
    )
    .context("measuring cross-node throughput")?;
    println!(
        "cross-node pod-to-pod TCP throughput by routing mode (iperf3, {secs} s, median of 3):"
    );
    println!(
        "  native routing, BPF host routing      {:7.2} Gbit/s",
        native / 1e9
    );
    println!(
        "  native routing, legacy host routing   {:7.2} Gbit/s   BPF/legacy {:.2}x",
        legacy / 1e9,
        native / legacy
    );
    println!(
        "  tunnel mode, BPF host routing         {:7.2} Gbit/s",
        tunnel / 1e9
    );
    println!(
        "  baseline: veths + kernel routes       {:7.2} Gbit/s",
        plain / 1e9
    );
    println!(
        "native-vs-tunnel: ours={:.2}Gbit/s baseline={:.2}Gbit/s ratio={:.2}",
        native / 1e9,
        tunnel / 1e9,
        native / tunnel
    );
    let ratio = native / plain;
    println!(
        "native-vs-plain-routing: ours={:.2}Gbit/s baseline={:.2}Gbit/s ratio={ratio:.2} {}",
        native / 1e9,
        plain / 1e9,
        goals::at_least(
            "cross-node, native routing vs plain kernel routing",
            ratio,
            goals::NATIVE_THROUGHPUT
        )
    );
    Ok(())
}
