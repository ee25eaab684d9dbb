//! IPv6 against IPv4 on one dual-stack cluster (issue 35's bench): two
//! nodes with `enable-ipv6` (real etcd, real agents), TCP throughput from
//! a pod of node1 to another pod of node1, and to a pod of node2 across
//! the overlay, each over IPv6 against the same two pods over IPv4,
//! interleaved; and a pod's connection rate to a Service through its IPv6
//! ClusterIP against its IPv4 one, both balanced per packet by bpf_lxc to
//! the same backend pod.

use crate::overlay::until_in_ipcache;
use crate::services::conn_rate;
use crate::{goals, interleaved, iperf};
use anyhow::Context;
use std::net::{Ipv4Addr, Ipv6Addr};
use testsupport::cluster::Cluster;
use testsupport::node::Node;

/// A pod on `node` with both families; its addresses from the CNI result.
fn dual_stack_pod(node: &Node, name: &str) -> anyhow::Result<(Ipv4Addr, Ipv6Addr)> {
    let ns = node.create_netns(name);
    let out = node.cni_pod("ADD", name, ns.to_str().context("netns path")?);
    anyhow::ensure!(out.code == 0, "ADD {name}: {}", out.json);
    let address = |i: usize| {
        out.json["ips"][i]["address"]
            .as_str()
            .and_then(|a| a.split('/').next())
            .map(str::to_owned)
            .with_context(|| format!("ips[{i}] in the CNI result {}", out.json))
    };
    Ok((address(0)?.parse()?, address(1)?.parse()?))
}

pub fn run_bench(secs: u32) -> anyhow::Result<()> {
    let mut cluster = Cluster::new(2, &["--enable-ipv6=true"]);
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        node.quiet = true;
        node.agent_args
            .push(format!("--ipv6-range=fd00:10:0:{}::/112", i + 1));
        node.start_agent();
    }
    let (node1, node2) = (&cluster.nodes[0], &cluster.nodes[1]);
    dual_stack_pod(node1, "client")?;
    let same = dual_stack_pod(node1, "same")?;
    let cross = dual_stack_pod(node2, "cross")?;
    until_in_ipcache(node1, cross.0.into())?;
    until_in_ipcache(node1, cross.1.into())?;
    let client = node1.netns("client");
    println!("pod-to-pod TCP throughput, IPv6 against IPv4 (iperf3, {secs} s, median of 3):");
    for (what, node, pod, (v4, v6)) in [
        ("same-node", node1, "same", same),
        ("cross-node", node2, "cross", cross),
    ] {
        let server = node.netns(pod);
        let [six, four] = interleaved(
            3,
            [&mut || iperf(&server, &client, v6, secs), &mut || {
                iperf(&server, &client, v4, secs)
            }],
        )?;
        let ratio = six / four;
        let six_line = format!("{what} over IPv6");
        let four_line = format!("{what} baseline: over IPv4");
        println!("  {six_line:<32} {:7.2} Gbit/s", six / 1e9);
        println!("  {four_line:<32} {:7.2} Gbit/s", four / 1e9);
        println!(
            "  ratio {ratio:.2}x   {}",
            goals::at_least(
                &format!("{what}, IPv6 vs IPv4"),
                ratio,
                goals::IPV6_THROUGHPUT
            )
        );
    }
    clusterip_conn_rate(node1, &client, same, secs)
}

/// The connection rate from `client` through a ClusterIP of each family to
/// the pod `backend` (its two addresses) on node1.
fn clusterip_conn_rate(
    node1: &Node,
    client: &std::path::Path,
    (b4, b6): (Ipv4Addr, Ipv6Addr),
    secs: u32,
) -> anyhow::Result<()> {
    const PORT: u16 = 8080;
    let vip4 = Ipv4Addr::new(10, 96, 0, 40);
    let vip6: Ipv6Addr = "fd00:96::40".parse().expect("an IPv6 address");
    let _server = testsupport::node::LineServer::start_on(
        &node1.netns("same"),
        Ipv6Addr::UNSPECIFIED.into(),
        PORT,
        "same",
    )?;
    for (id, frontend, backend) in [
        ("40", format!("{vip4}:80"), format!("{b4}:{PORT}")),
        ("41", format!("[{vip6}]:80"), format!("[{b6}]:{PORT}")),
    ] {
        node1.cilium_ok(&[
            "service",
            "update",
            "--id",
            id,
            "--frontend",
            &frontend,
            "--backends",
            &backend,
            "--k8s-cluster-ip",
        ]);
    }
    let secs = f64::from(secs);
    println!("pod to ClusterIP connection rate, IPv6 against IPv4 ({secs} s, median of 3):");
    let [six, four] = interleaved(
        3,
        [&mut || conn_rate(client, None, vip6, 80, secs), &mut || {
            conn_rate(client, None, vip4, 80, secs)
        }],
    )?;
    let ratio = six / four;
    println!("  {:<32} {six:9.0} conn/s", "ClusterIP over IPv6");
    println!(
        "  {:<32} {four:9.0} conn/s",
        "baseline: ClusterIP over IPv4"
    );
    println!(
        "  ratio {ratio:.2}x   {}",
        goals::at_least(
            "ClusterIP connection rate, IPv6 vs IPv4",
            ratio,
            goals::IPV6_CONN_RATE
        )
    );
    Ok(())
}
