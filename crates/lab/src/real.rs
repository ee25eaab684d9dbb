//! `cilium-lab up` with real nodes: the control plane on the underlay,
//! nodes running containerd and kubelet (`node`), the images built and
//! imported, then Cilium installed by applying deploy/kubernetes
//! (`install`), so kubelet runs the DaemonSet's init containers and the
//! agent, the operator's Deployment, and every pod through cilium-cni.

use crate::layout::{self, Holder};
use crate::stack::{url_host, Stack};
use crate::{boot, install, kube};
use anyhow::{bail, Context};
use std::time::{Duration, Instant};

/// Marks a lab of real nodes, for the commands that run after `up`; it
/// holds the pods' network.
fn marker() -> std::path::PathBuf {
    layout::root().join("real-nodes")
}

/// Whether the running lab's nodes are real ones.
pub fn running() -> bool {
    marker().exists()
}

/// What the pods of real nodes are wired with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PodNetwork {
    /// Cilium, installed from deploy/kubernetes
    Cilium,
    /// Debian's reference `bridge` plugin with host-local addresses and no
    /// Cilium: the baseline the benchmarks measure against (pods reach
    /// pods of their own node only; no Services, no policy)
    Bridge,
}

/// The running lab's pod network, as `up` wrote it by its `--cni` name
/// (Cilium unless it was made otherwise).
pub fn pod_network() -> PodNetwork {
    let written = std::fs::read_to_string(marker()).unwrap_or_default();
    clap::ValueEnum::from_str(written.trim(), false).unwrap_or(PodNetwork::Cilium)
}

pub fn up(
    nodes: usize,
    pods: &[String],
    settings: &[(String, String)],
    network: PodNetwork,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    if layout::machine_dir(layout::UNDERLAY)
        .running_holder()
        .is_some()
        || !layout::running_nodes().is_empty()
    {
        bail!("the lab is already up; run `cilium-lab down` first");
    }
    // before anything starts: a missing build is said at once
    kubeplane::bins::NodeBinaries::find()?;
    let stack = Stack::of_settings(settings);
    stack.write()?;
    kube::control_plane(true)?;
    let image = install::image()?;
    if image != images::agent_reference() {
        bail!(
            "deploy/kubernetes runs {image}, but this build makes {}",
            images::agent_reference()
        );
    }
    let t = Instant::now();
    let built = crate::images::build()?;
    println!("==> images: {} ({:?})", built.join(", "), t.elapsed());
    let name = clap::ValueEnum::to_possible_value(&network).expect("every network is named");
    layout::write_atomic(&marker(), name.get_name().as_bytes())?;
    boot::write_config_map(settings, true)?;
    let switch = crate::start_underlay()?;
    let t = Instant::now();
    let cp = crate::start_control_plane(switch)?;
    kube::prepare_nodes(nodes)?;
    if network == PodNetwork::Bridge {
        kube::kube_proxy_credentials()?;
    }
    println!(
        "==> Kubernetes {}: kube-apiserver at https://{}:{}, controller manager and scheduler up in {:?} (pid {cp})",
        kubeplane::bins::version(),
        url_host(stack.api_address()),
        kube::API_PORT,
        t.elapsed()
    );
    // the nodes start side by side (containerd, the image imports and
    // kubelet of each); their holders are spawned first, then waited for
    let t = Instant::now();
    let mut holders = Vec::new();
    for index in 1..=nodes {
        let name = topology::node_name(index);
        let l = layout::machine_dir(&name);
        let args = ["node-holder".to_string(), index.to_string()];
        holders.push((index, crate::spawn_holder(&l, &args, &name)?, l, name));
    }
    for (index, holder, l, name) in &holders {
        crate::wait_holder_ready(l, *holder, name, "kubelet")?;
        println!(
            "==> {name}: {}, containerd and kubelet up, images imported, {:?} after the nodes started (pid {holder})",
            stack.underlay_address(topology::node_ip(*index)),
            t.elapsed()
        );
    }
    let kubelets_started = Instant::now();
    let t = Instant::now();
    kube::wait_nodes_registered(nodes, Duration::from_secs(60))?;
    if network == PodNetwork::Bridge {
        println!("==> {nodes} node(s) registered ({:?})", t.elapsed());
        kube::wait_nodes_ready(nodes, Duration::from_secs(120))?;
        println!(
            "==> every node Ready {:?} after the last kubelet started",
            kubelets_started.elapsed()
        );
        println!("\n==> cluster up in {:?}: pods on Debian's bridge plugin, no Cilium (a baseline: pods reach their own node's pods only)", t0.elapsed());
        return Ok(());
    }
    println!(
        "==> {nodes} node(s) registered, tainted {} until their agent runs ({:?})",
        crate::AGENT_NOT_READY_TAINT,
        t.elapsed()
    );

    let t = Instant::now();
    let config = boot::config_map_keys()?;
    let missing = install::missing_capabilities();
    if !missing.is_empty() {
        println!(
            "    this machine cannot grant {}: taken out of the containers that ask for them",
            missing.join(", ")
        );
    }
    let api = std::net::SocketAddr::new(stack.api_address(), kube::API_PORT);
    let cluster = config
        .iter()
        .find(|(k, _)| k == "cluster-name")
        .map_or("default", |(_, v)| v.as_str());
    let hubble = kube::hubble_pki(cluster)?;
    let list = install::manifests(api, &config, &missing, &hubble)?;
    kube::apply("applying deploy/kubernetes", &list.to_string())?;
    kube::wait_rollout("daemonset/cilium", Duration::from_secs(180))?;
    println!(
        "==> DaemonSet cilium: every agent Ready {:?} after the apply",
        t.elapsed()
    );
    kube::wait_nodes_ready(nodes, Duration::from_secs(120))?;
    println!(
        "==> every node Ready and untainted {:?} after the last kubelet started",
        kubelets_started.elapsed()
    );
    kube::wait_available("deployment/cilium-operator", Duration::from_secs(120))?;
    println!(
        "==> Cilium installed from deploy/kubernetes: DaemonSet cilium and Deployment cilium-operator available, every node Ready ({:?})",
        t.elapsed()
    );
    let routes = kube::route_pod_cidrs(nodes)?;
    println!(
        "==> the control plane reaches pods through their nodes: {}",
        routes.join(", ")
    );
    let t = Instant::now();
    crate::coredns::install(Duration::from_secs(120))?;
    println!(
        "==> cluster DNS: CoreDNS ({}) answering at kube-dns {} for cluster.local ({:?})",
        crate::coredns::image(),
        stack.dns_service_ip(),
        t.elapsed()
    );
    kube::apply(
        "applying deploy/kubernetes/hubble-relay.yaml",
        &install::relay_manifests()?.to_string(),
    )?;
    println!("==> Hubble Relay applied: the cluster's flows at Service kube-system/hubble-relay (port 80), from every agent's port 4244 with mutual TLS");
    println!("\n$ kubectl get nodes,ds,deploy,pods -n kube-system -o wide");
    print!(
        "{}",
        kube::run_args(&[
            "get",
            "nodes,ds,deploy,pods",
            "-n",
            "kube-system",
            "-o",
            "wide"
        ])?
    );
    println!("\n==> cluster up in {:?}", t0.elapsed());
    demo(nodes, pods)
}

/// The demo's server: agnhost netexec answering HTTP on port 80
/// (`/hostname`, `/clientip`, ...).
const AGNHOST: &str = images::AGNHOST_REFERENCE;

/// Pod `name` on `node` running netexec, with `labels`.
fn netexec_pod(name: &str, node: &str, labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{
                "name": "netexec",
                "image": AGNHOST,
                "args": ["netexec", "--http-port=80"],
                "ports": [{"containerPort": 80}],
            }],
        },
    })
}

/// `kubectl exec <pod> -- curl <url>`: the answer, or why there is none.
fn curl(pod: &str, url: &str) -> anyhow::Result<String> {
    kube::run_args(&[
        "exec",
        pod,
        "--",
        "curl",
        "-sS",
        "-g",
        "--max-time",
        "2",
        url,
    ])
    .map(|body| body.trim().to_owned())
}

/// Retries `f` for up to `secs` (a new endpoint's or Service's state
/// reaches the other node within moments).
fn within<T>(secs: u64, mut f: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let t = Instant::now();
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if t.elapsed() > Duration::from_secs(secs) => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

/// `cilium <args>` on `node` (as `cilium-lab exec <node> -- cilium`); its
/// output.
fn node_cilium(node: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new(layout::sibling("cilium-lab")?)
        .args(["exec", node, "--", "cilium"])
        .args(args)
        .output()
        .context("running cilium-lab exec")?;
    if !out.status.success() {
        bail!(
            "cilium {} on {node}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Pods on two nodes talking directly and through a Service, then a
/// policy letting only `app=demo` in, shown from a pod it refuses; the
/// agents' view at the end.
fn demo(nodes: usize, names: &[String]) -> anyhow::Result<()> {
    let names: Vec<String> = if names.len() >= 2 {
        names.to_vec()
    } else {
        vec!["pod-a".into(), "pod-b".into()]
    };
    let node_of = |i: usize| topology::node_name(i % nodes + 1);
    let mut pods: Vec<serde_json::Value> = names
        .iter()
        .enumerate()
        .map(|(i, name)| netexec_pod(name, &node_of(i), crate::demo_labels(i)))
        .collect();
    let outsider = "outsider";
    pods.push(netexec_pod(
        outsider,
        &node_of(0),
        serde_json::json!({"app": "other"}),
    ));
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": pods});
    let t = Instant::now();
    print!(
        "\n{}",
        kube::apply("creating the demo pods", &list.to_string())?
    );
    let mut ips = Vec::new();
    for (i, name) in names.iter().chain([&outsider.to_owned()]).enumerate() {
        let ip = kube::wait_running(name, Duration::from_secs(120))?;
        println!(
            "==> pod {name} on {}: {ip} (sandbox and CNI ADD by containerd, Running after {:?})",
            node_of(if i < names.len() { i } else { 0 }),
            t.elapsed()
        );
        ips.push(ip);
    }
    let (a, b, server) = (&names[0], &names[1], ips[1]);
    let direct = format!("http://{}/hostname", url_host(server));
    println!("\n$ kubectl exec {a} -- curl -g {direct}");
    println!("{}", within(30, || curl(a, &direct))?);
    // a dual-stack cluster gave the pod a second address, of IPv6
    let stack = Stack::running();
    let ips_b = kube::run_args(&["get", "pod", b, "-o", "jsonpath={.status.podIPs[*].ip}"])?;
    let direct6 = ips_b
        .split_whitespace()
        .find(|ip| ip.contains(':'))
        .filter(|_| stack == Stack::Dual)
        .map(|ip| format!("http://[{ip}]/hostname"));
    if let Some(direct6) = &direct6 {
        println!("$ kubectl exec {a} -- curl -g {direct6}");
        println!("{}", within(30, || curl(a, direct6))?);
    }

    println!("\n==> a Service selecting {b} (role=server); the endpointslice controller fills it from the pod's Ready status");
    print!(
        "{}",
        kube::apply("creating the demo Service", &crate::demo_service(stack))?
    );
    let vip = format!("http://{}/hostname", url_host(stack.demo_service_ip()));
    println!("$ kubectl exec {a} -- curl -g {vip}");
    println!("{}", within(30, || curl(a, &vip))?);
    if direct6.is_some() {
        let vips = kube::run_args(&[
            "get",
            "service",
            "demo",
            "-o",
            "jsonpath={.spec.clusterIPs[*]}",
        ])?;
        if let Some(vip6) = vips.split_whitespace().find(|ip| ip.contains(':')) {
            let vip6 = format!("http://[{vip6}]/hostname");
            println!("$ kubectl exec {a} -- curl -g {vip6}");
            println!("{}", within(30, || curl(a, &vip6))?);
        }
    }

    println!("\n==> the policy: {b} takes TCP 80 and 8080 from app=demo pods only");
    print!(
        "{}",
        kube::apply("creating the demo policy", crate::DEMO_POLICY)?
    );
    within(30, || match curl(outsider, &direct) {
        Ok(body) => bail!("{outsider} still got {body:?}"),
        Err(_) => Ok(()),
    })?;
    println!("$ kubectl exec {outsider} -- curl -g {direct}\n(no answer: dropped by policy)");
    println!("$ kubectl exec {a} -- curl -g {direct}");
    println!("{}", curl(a, &direct)?);
    if let Some(direct6) = &direct6 {
        if curl(outsider, direct6).is_ok() {
            bail!("{outsider} reached {direct6} through the policy");
        }
        println!("$ kubectl exec {outsider} -- curl -g {direct6}\n(no answer: dropped by policy)");
    }

    for (what, args) in [
        ("cilium status", &["status"][..]),
        ("cilium endpoint list", &["endpoint", "list"]),
    ] {
        println!("\n$ cilium-lab exec node1 -- {what}");
        print!("{}", node_cilium("node1", args)?);
    }
    println!("\n$ kubectl get ciliumnodes,ciliumendpoints -A");
    print!(
        "{}",
        kube::run_args(&["get", "ciliumnodes,ciliumendpoints", "-A"])?
    );
    println!(
        "\n==> the lab stays up: `cilium-lab exec {a} -- curl {direct}`, `cilium-lab exec node1 -- cilium status`, `cilium-lab kubectl get pods -A -o wide`, `cilium-lab down`"
    );
    Ok(())
}
