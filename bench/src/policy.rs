//! The policy targets on a 2-node cluster with real agents and etcd:
//!
//! - import to enforcement: from `cilium policy import` of a policy with 1,
//!   100 or 1000 rules until the policy maps of the selected endpoints on
//!   both nodes hold its new entry, against the floor the kvstore itself
//!   sets (a put until a watcher sees it, on the same etcd);
//! - the per-packet cost of enforcement: pod-to-pod TCP throughput with a
//!   1000-rule policy in force against the same path with enforcement
//!   `never`.

use crate::{goals, latency_line};
use anyhow::Context;
use serde::Deserialize as _;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::node::Node;

const SCALES: [usize; 3] = [1, 100, 1000];
const ROUNDS: u16 = 10;

/// A policy of `n` rules: n-1 ingress rules to the server on ports of
/// their own, and one rule on both pods for `marker` and iperf's port.
fn policy(n: usize, marker: u16) -> String {
    let mut doc = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: bench-rules\nspecs:\n",
    );
    for i in 0..n.saturating_sub(1) {
        let _ = write!(
            doc,
            "- endpointSelector: {{matchLabels: {{app: server}}}}\n  ingress:\n  - fromEndpoints: [{{matchLabels: {{app: client}}}}]\n    toPorts: [{{ports: [{{port: \"{}\", protocol: TCP}}]}}]\n",
            10000 + i
        );
    }
    let both = "{matchExpressions: [{key: app, operator: In, values: [client, server]}]}";
    let _ = write!(
        doc,
        "- endpointSelector: {both}\n  ingress:\n  - fromEndpoints: [{both}]\n    toPorts: [{{ports: [{{port: \"{marker}\"}}, {{port: \"5201\"}}]}}]\n  egress:\n  - toEndpoints: [{both}]\n    toPorts: [{{ports: [{{port: \"{marker}\"}}, {{port: \"5201\"}}]}}]\n"
    );
    doc
}

/// The policy as Cilium's `policy import` takes it: a JSON list of rules,
/// each carrying the policy's labels.
fn as_rules_json(yaml: &str) -> anyhow::Result<String> {
    let mut tree: serde_json::Value = serde_yaml::from_str(yaml)?;
    let mut rules = tree["specs"].take();
    let labels = serde_json::json!([{"key": "name", "value": "bench-rules", "source": "unspec"}]);
    for rule in rules.as_array_mut().context("the policy has specs")? {
        rule["labels"] = labels.clone();
    }
    Ok(rules.to_string())
}

/// A pod's endpoint ID and security identity.
pub(crate) fn endpoint(node: &Node, pod: &str) -> anyhow::Result<(u16, u32)> {
    let list: serde_json::Value =
        serde_json::from_str(&node.cilium_ok(&["endpoint", "list", "-o", "json"]))?;
    list.as_array()
        .into_iter()
        .flatten()
        .find(|e| e["status"]["external-identifiers"]["k8s-pod-name"] == pod)
        .and_then(|e| Some((e["id"].as_u64()?, e["status"]["identity"]["id"].as_u64()?)))
        .map(|(id, identity)| (id as u16, identity as u32))
        .with_context(|| format!("no endpoint for {pod} on {}", node.name))
}

/// Whether endpoint `ep`'s policy map allows TCP `port` with `peer` in
/// the direction given: one lookup, so the probe costs the agents under
/// test next to nothing (reading the whole map of a 1000-rule policy
/// every few hundred microseconds took a core of this machine).
pub(crate) fn has_port(
    node: &Node,
    ep: u16,
    peer: u32,
    egress: bool,
    port: u16,
) -> anyhow::Result<bool> {
    let map = datapath::PinnedMap::open_global(&node.bpffs(), &datapath::policymap::name(ep))?;
    let key = abi::policy::PolicyKey {
        prefixlen: 64,
        sec_label: peer,
        egress: u8::from(egress),
        protocol: 6,
        dport: abi::Be16::new(port),
    };
    Ok(map
        .get::<_, abi::policy::PolicyEntry>(&key)?
        .is_some_and(|e| e.flags & abi::policy::POLICY_FLAG_DENY == 0))
}

/// A put until a watcher on the same etcd sees it: what any state shared
/// through the kvstore needs at least.
fn kvstore_floor() -> anyhow::Result<Vec<f64>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
        let kv = kvstore::Kvstore::connect(&endpoints, Duration::from_secs(15)).await?;
        let mut rx = kv.watch_prefix("bench/floor/");
        while let Some(ev) = rx.recv().await {
            if matches!(ev, kvstore::Event::ListDone) {
                break;
            }
        }
        let mut samples = Vec::new();
        for i in 0..20 {
            let t = Instant::now();
            kv.put(&format!("bench/floor/{i}"), b"x").await?;
            while let Some(ev) = rx.recv().await {
                if matches!(ev, kvstore::Event::Upsert { .. }) {
                    break;
                }
            }
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(samples)
    })
}

pub fn run_bench(secs: u32) -> anyhow::Result<()> {
    let mut cluster = Cluster::new(2, &[]);
    for node in &mut cluster.nodes {
        node.quiet = true;
        node.start_agent();
    }
    cluster.nodes[0].add_pod_labeled("client", "app=client");
    cluster.nodes[1].add_pod_labeled("server", "app=server");
    let client2 = cluster.nodes[1].add_pod_labeled("client2", "app=client");
    let server = cluster.nodes[1].add_pod_labeled("server2", "app=server");
    let (client_ep, client_id) = endpoint(&cluster.nodes[0], "client")?;
    let (server_ep, server_id) = endpoint(&cluster.nodes[1], "server")?;
    let _ = client2;

    let mut floor = kvstore_floor()?;
    println!("policy import to enforcement on both nodes (cilium policy import of JSON on node1 until the selected endpoints' policy maps on node1 and node2 hold the new rule, {ROUNDS} imports each):");
    let (floor_p50, _) = latency_line("baseline: etcd put to watch", &mut floor);
    let mut marker = 20000u16;
    let mut import = |n: usize, json: bool| -> anyhow::Result<Vec<f64>> {
        let mut samples = Vec::new();
        for _ in 0..crate::scaled(ROUNDS, 2) {
            marker += 1;
            let mut text = policy(n, marker);
            if json {
                text = as_rules_json(&text)?;
            }
            let t = Instant::now();
            let out = cluster.nodes[0].import_policy(&text);
            anyhow::ensure!(
                out.status.success(),
                "import: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let deadline = Instant::now() + Duration::from_secs(30);
            while !(has_port(&cluster.nodes[0], client_ep, server_id, true, marker)?
                && has_port(&cluster.nodes[1], server_ep, client_id, false, marker)?)
            {
                anyhow::ensure!(Instant::now() < deadline, "{n} rules never enforced");
                std::thread::sleep(Duration::from_micros(200));
            }
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(samples)
    };
    let scales = crate::scaled(&SCALES[..], &SCALES[..2]);
    for &n in scales {
        // as JSON, the only format Cilium's own `policy import` reads
        let (p50, _) = latency_line(&format!("{n} rules"), &mut import(n, true)?);
        let goal = if n == *scales.last().expect("scales") {
            goals::under(
                &format!("policy import to enforcement, {n} rules, p50"),
                p50,
                goals::POLICY_1000_P50_MS,
                "ms",
            )
        } else {
            String::new()
        };
        println!(
            "  {:<28} {:.1}x the etcd floor at p50   {goal}",
            "",
            p50 / floor_p50
        );
    }
    // Ours reads YAML too (Cilium's reads only JSON): the largest policy
    // as YAML, and what reading its YAML alone costs, nothing kept.
    let largest = *scales.last().expect("scales");
    latency_line(
        &format!("{largest} rules, as YAML"),
        &mut import(largest, false)?,
    );
    let text = policy(largest, 0);
    let mut read = (0..crate::scaled(ROUNDS, 2))
        .map(|_| {
            let t = Instant::now();
            serde::de::IgnoredAny::deserialize(serde_yaml::Deserializer::from_str(&text))?;
            Ok(t.elapsed().as_secs_f64() * 1000.0)
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    latency_line("  reading its YAML alone", &mut read);

    // Same-node pods on node2, a 1000-rule policy in force on both.
    let (sns, cns) = (
        cluster.nodes[1].netns("server2"),
        cluster.nodes[1].netns("client2"),
    );
    let [enforced, never] = crate::iperf_per_setting(
        &cluster.nodes[1],
        ["PolicyEnforcement=default", "PolicyEnforcement=never"],
        (&sns, &cns, server, secs),
    )?;
    println!(
        "per-packet cost of enforcement (iperf3 pod to pod on one node, {secs} s, median of 3):"
    );
    println!(
        "  1000-rule policy enforced       {:7.2} Gbit/s",
        enforced / 1e9
    );
    println!(
        "  baseline: enforcement never     {:7.2} Gbit/s",
        never / 1e9
    );
    println!(
        "  ratio {:.2}x   {}",
        enforced / never,
        goals::at_least(
            "1000-rule policy enforced vs enforcement never, throughput",
            enforced / never,
            goals::ENFORCEMENT_THROUGHPUT
        )
    );
    Ok(())
}
