//! cilium-lab: Cilium nodes as namespaces on this machine.
//!
//! `up` starts an underlay (a bridge in its own namespace, with etcd), a
//! Kubernetes control plane beside etcd, N nodes plugged into the
//! underlay (each with its own network and mount namespaces, bpffs, /run,
//! a kubelet stand-in and the agent as the DaemonSet's pod would run it),
//! and pods as Pod objects the scheduler places, then shows them talking
//! across nodes; the cluster stays up until `down`. With
//! `--without-kubernetes` the agents run in kvstore mode alone and pods
//! are made through cilium-cni directly.
//! `exec` runs a command in a pod or in a node, `connect` talks to a
//! server from a pod.

mod boot;
mod cni;
mod connect;
mod coredns;
mod demo;
mod holder;
mod images;
mod install;
mod kube;
mod kubelet;
mod layout;
mod node;
mod outside;
mod pods;
mod real;
mod stack;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use layout::Holder;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use topology::NodeDir;

#[derive(Parser)]
#[command(
    name = "cilium-lab",
    about = "Run a Cilium cluster as namespaces on this machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start etcd, the nodes, their agents and pods, and show them talking
    Up {
        /// Nodes in the cluster
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=topology::MAX_NODES as i64))]
        nodes: u16,
        /// Pods to create, spread over the nodes (default: pod-a, pod-b)
        #[arg(long = "pod")]
        pods: Vec<String>,
        /// A cilium-config key for every node (key=value), e.g.
        /// clean-cilium-bpf-state=true
        #[arg(long = "set", value_parser = parse_setting)]
        settings: Vec<(String, String)>,
        /// No Kubernetes control plane: the agents in kvstore mode alone,
        /// pods made with `add-pod` (identities, nodes, endpoints,
        /// services and policies through etcd)
        #[arg(long)]
        without_kubernetes: bool,
        /// Nodes without containerd and kubelet: a stand-in registers
        /// each Node and runs its pods as bare namespaces with built-in
        /// servers (light nodes for labs of many nodes, as kubemark's
        /// hollow nodes); the agent boots as the DaemonSet would boot it
        #[arg(long, conflicts_with = "without_kubernetes")]
        hollow_nodes: bool,
        /// The pods' network on real nodes
        #[arg(long, value_enum, default_value_t = real::PodNetwork::Cilium, conflicts_with_all = ["without_kubernetes", "hollow_nodes"])]
        cni: real::PodNetwork,
    },
    /// Build the images the nodes run (OCI archives for `ctr -n k8s.io
    /// images import`), rewriting only what changed; prints each archive
    Images {
        /// Where to write them
        #[arg(long, default_value_os_t = images::cache_dir())]
        out: std::path::PathBuf,
        /// Build Kubernetes' conformance tests' images instead, from the
        /// `test-images` directory scripts/build-e2e.sh fills
        #[arg(long, value_name = "TEST_IMAGES_DIR")]
        e2e: Option<std::path::PathBuf>,
        /// Import what was built into every running real node
        #[arg(long)]
        import: bool,
    },
    /// kubectl as the cluster admin
    Kubectl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a command as the cluster admin where the API server is (the
    /// underlay's network, KUBECONFIG the admin's): Kubernetes' e2e.test,
    /// a client of one's own
    Admin {
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Stop a node's agent and keep it stopped (as when its pod is deleted)
    StopAgent { node: String },
    /// Stop a real node's kubelet and containerd, leaving its pods running
    /// (`systemctl stop kubelet containerd`), until `start-runtime`
    StopRuntime { node: String },
    /// Start a real node's kubelet and containerd again after
    /// `stop-runtime` (a node restart without a reboot)
    StartRuntime { node: String },
    /// Delete the pods and stop the nodes and etcd
    Down,
    /// Run a command in a pod's network namespace (or in a node: node1,
    /// ..., or on the host outside the cluster: outside); a pod outside
    /// `default` is `<namespace>/<name>`
    Exec {
        pod: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Send a message from a pod to a server and print its reply (pods'
    /// built-in servers answer `<pod>: <message>`, and `GET /clientip`
    /// with the address they see the client at)
    Connect {
        /// The pod to send from (`<namespace>/<name>` outside `default`),
        /// or `underlay` (the switch) or `outside` (the outside host) for a
        /// client outside the cluster
        pod: String,
        /// Where to: `<ip>:<port>`
        target: std::net::SocketAddr,
        #[arg(long)]
        udp: bool,
        #[arg(long, default_value = "hello")]
        message: String,
        /// Exchanges over one TCP connection, each reply printed as it
        /// comes (to watch an established connection through a change)
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
        /// Pause between exchanges, in milliseconds
        #[arg(long, default_value_t = 100)]
        interval_ms: u64,
    },
    /// Add a pod to a running node
    AddPod {
        pod: String,
        /// The node to run it on
        #[arg(long, default_value = "node1")]
        node: String,
        /// Pod labels, e.g. app=web,tier=db
        #[arg(long, default_value = "")]
        labels: String,
    },
    /// Delete a pod
    DelPod { pod: String },
    #[command(hide = true)]
    NodeHolder { index: usize },
    #[command(hide = true)]
    Kubelet { index: usize },
    #[command(hide = true)]
    NodeInit { index: usize, underlay: i32 },
    #[command(hide = true)]
    UnderlayHolder,
    #[command(hide = true)]
    OutsideHolder { underlay: i32 },
    #[command(hide = true)]
    OutsideServer,
    #[command(hide = true)]
    ControlPlaneHolder { underlay: i32 },
    #[command(hide = true)]
    OperatorHolder { underlay: i32 },
}

fn not_up() -> anyhow::Error {
    anyhow::anyhow!(
        "the lab is not up ({} has no running node); run `cilium-lab up`",
        layout::root().display()
    )
}

/// Starts a holder (`args` of cilium-lab) detached from our terminal and
/// waits for its ready file.
fn start_holder(l: &NodeDir, args: &[String], what: &str, daemon_log: &str) -> anyhow::Result<i32> {
    let pid = spawn_holder(l, args, what)?;
    wait_holder_ready(l, pid, what, daemon_log)?;
    Ok(pid)
}

/// Starts a holder (`args` of cilium-lab) detached from our terminal; its
/// pid.
fn spawn_holder(l: &NodeDir, args: &[String], what: &str) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&l.dir).with_context(|| format!("creating {}", l.dir.display()))?;
    let _ = std::fs::remove_file(l.ready_file());
    let log = std::fs::File::create(l.log("holder"))?;
    let mut cmd = Command::new(layout::sibling("cilium-lab")?);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it detaches the holder from our terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    // The child is the holder; it outlives us on purpose.
    let pid = child.id() as i32;
    std::mem::forget(child);
    Ok(pid)
}

/// Waits for the ready file of the holder `pid`; stops it and says why
/// (its log and the tail of `daemon_log`'s) when it dies or a minute
/// passes first.
fn wait_holder_ready(l: &NodeDir, pid: i32, what: &str, daemon_log: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !l.ready_file().exists() {
        if !layout::alive(pid) || Instant::now() > deadline {
            let log = std::fs::read_to_string(l.log("holder")).unwrap_or_default();
            let daemon = std::fs::read_to_string(l.log(daemon_log)).unwrap_or_default();
            let tail: Vec<&str> = daemon.lines().rev().take(10).collect();
            // SAFETY: ending the holder we started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            bail!(
                "{what} did not come up:\n{log}\n{daemon_log} log (last lines):\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A `--set` value without a key before its `=`, as written.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not key=value")]
struct NotKeyValue(String);

fn parse_setting(s: &str) -> Result<(String, String), NotKeyValue> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(NotKeyValue(s.to_owned())),
    }
}

/// `cilium-lab kubectl ...`: kubectl as the admin where the API server is.
fn kubectl(args: &[String]) -> anyhow::Result<()> {
    let err = kube::kubectl(args)?.exec();
    Err(err).context("running kubectl")
}

/// `cilium-lab admin -- <command>`.
fn admin(command: &[String]) -> anyhow::Result<()> {
    let err = kube::admin(command)?.exec();
    Err(err).with_context(|| format!("running {}", command[0]))
}

fn up(
    nodes: usize,
    pod_names: &[String],
    settings: &[(String, String)],
    kubernetes: bool,
) -> anyhow::Result<()> {
    let underlay = layout::machine_dir(layout::UNDERLAY);
    if underlay.running_holder().is_some() || !layout::running_nodes().is_empty() {
        bail!("the lab is already up; run `cilium-lab down` first");
    }
    let stack = stack::Stack::of_settings(settings);
    if stack == stack::Stack::Ipv6 {
        bail!("an IPv6-only lab (enable-ipv4=false) runs on real nodes: drop --hollow-nodes");
    }
    stack.write()?;
    if kubernetes {
        // before anything starts: a missing build is said at once
        kube::control_plane(true)?;
    }
    boot::write_config_map(settings, kubernetes)?;
    let switch = start_underlay()?;
    if kubernetes {
        let t = Instant::now();
        let cp = start_control_plane(switch)?;
        let kubeconfig = kube::prepare(nodes)?;
        layout::write_atomic(
            &boot::config_map_dir().join("k8s-kubeconfig-path"),
            kubeconfig.display().to_string().as_bytes(),
        )?;
        // what the nodes' build-config reads
        kube::publish_config_map()?;
        let operators = start_holder(
            &layout::machine_dir(kube::OPERATOR_MACHINE),
            &["operator-holder".into(), switch.to_string()],
            "cilium-operator",
            "cilium-operator-1",
        )?;
        println!(
            "==> Kubernetes {}: kube-apiserver at https://{}:{}, controller manager and scheduler up in {:?} (pid {cp}); deploy/kubernetes applied; `cilium-lab kubectl get pods -A`",
            kubeplane::bins::version(),
            topology::UNDERLAY_IP,
            kube::API_PORT,
            t.elapsed()
        );
        println!(
            "==> cilium-operator: {} replicas electing a leader on the Lease kube-system/cilium-operator-resource-lock (pid {operators})",
            kube::OPERATOR_REPLICAS
        );
        let admin = kube::control_plane(false)?;
        println!(
            "    admin kubeconfig: {} (the API server is on the underlay: `nsenter --net=/proc/{switch}/ns/net {} --kubeconfig={} get nodes`)",
            admin.admin_kubeconfig().display(),
            admin.bins.kubectl.display(),
            admin.admin_kubeconfig().display(),
        );
    }
    let mut holders = Vec::new();
    for index in 1..=nodes {
        let t = Instant::now();
        let l = layout::machine_dir(&topology::node_name(index));
        let node_config = boot::write_node_config(&l, index)?;
        if kubernetes {
            kube::apply("applying the node's CiliumNodeConfig", &node_config)?;
        }
        let args = ["node-holder".to_string(), index.to_string()];
        let holder = start_holder(&l, &args, &topology::node_name(index), "agent")?;
        let pod_cidr = if kubernetes {
            kube::pod_cidr(&topology::node_name(index))?
        } else {
            topology::pod_cidr(index)
        };
        println!(
            "==> {}: {} pods {pod_cidr}, booted as the DaemonSet does ({}), cilium-agent up in {:?} (pid {holder})",
            topology::node_name(index),
            topology::node_ip(index),
            boot::STEPS.join(", "),
            t.elapsed()
        );
        if index == 1 {
            let log = std::fs::read_to_string(l.log("boot")).unwrap_or_default();
            print!("{log}");
        }
        holders.push((l, holder));
    }
    let names: Vec<String> = if pod_names.is_empty() {
        vec!["pod-a".into(), "pod-b".into()]
    } else {
        pod_names.to_vec()
    };
    let mut placed = Vec::new();
    if kubernetes {
        placed = kube_pods(&names, holders.len())?;
    }
    for (i, pod) in names.iter().enumerate().filter(|_| !kubernetes) {
        let (l, holder) = &holders[i % holders.len()];
        layout::enter_node(*holder)?;
        let t = Instant::now();
        let ip = pods::add(l, pod, "app=demo")?;
        println!(
            "==> pod {pod} on {}: {ip} (CNI ADD {:?})",
            l.name(),
            t.elapsed()
        );
        placed.push((i % holders.len(), pod.clone(), ip));
    }
    let mut ok = true;
    if placed.len() >= 2 {
        let (a, b) = (&placed[0], &placed[1]);
        let (la, ha) = &holders[a.0];
        let (lb, hb) = &holders[b.0];
        // The second pod's server, from the first pod: the demo's own
        // listener in kvstore mode, the pod's built-in one with Kubernetes.
        let tcp = |ip: std::net::Ipv4Addr, port: u16| -> anyhow::Result<()> {
            if kubernetes {
                let client = demo::open_pod(*ha, la, &a.1)?;
                return demo::talk(client, &a.1, &b.1, ip, port);
            }
            let server = demo::open_pod(*hb, lb, &b.1)?;
            let client = demo::open_pod(*ha, la, &a.1)?;
            demo::tcp(client, &a.1, server, &b.1, ip, port)
        };
        // Remote pods become reachable once their node's agents learned them.
        demo::wait_reachable(*ha, la, &a.1, b.2)?;
        layout::enter_node(*ha)?;
        ok &= demo::ping(la, &a.1, b.2)?;
        layout::enter_node(*hb)?;
        ok &= demo::ping(lb, &b.1, a.2)?;
        tcp(b.2, 8080)?;
        // Beyond the cluster: only masquerading gets the answer back (the
        // outside host has no route to pod CIDRs), so without it this says
        // why instead of failing the lab.
        let client = demo::open_pod(*ha, la, &a.1)?;
        match demo::outside(client, &a.1, topology::node_ip(a.0 + 1)) {
            Ok(true) => {}
            Ok(false) => println!("    warning: not masqueraded"),
            Err(e) => println!("    warning: no answer ({e:#}); is enable-ipv4-masquerade off?"),
        }

        // A ClusterIP in front of the second pod, reached from the first.
        layout::enter_node(holders[0].1)?;
        if kubernetes {
            println!("\n==> a Service selecting the second pod (role=server), through the API server; the endpointslice controller fills it from the pod's Ready status");
            print!(
                "{}",
                kube::apply(
                    "creating the demo Service",
                    &demo_service(stack::Stack::Ipv4)
                )?
            );
        } else {
            demo::cilium(&[
                "service",
                "update",
                "--id",
                "1",
                "--frontend",
                &format!("{}:80", layout::DEMO_SERVICE_IP),
                "--backends",
                &format!("{}:80", b.2),
                "--k8s-cluster-ip",
            ])?;
        }
        demo::wait_service(*ha, layout::DEMO_SERVICE_IP, b.2)?;
        tcp(layout::DEMO_SERVICE_IP, 80)?;
        // Again as a process of the node (in its cgroup): now connect()
        // itself is balanced by socket LB, and no packet needs DNAT.
        layout::enter_node(*ha)?;
        layout::join_node_cgroup()?;
        println!(
            "\n==> the same from {}'s cgroup: socket LB (bpf_sock) picks the backend at connect()",
            la.name()
        );
        tcp(layout::DEMO_SERVICE_IP, 80)?;

        // A policy, imported on node1 and enforced where pod-b runs: TCP
        // from app=demo pods on the service's ports, nothing else.
        layout::enter_node(holders[0].1)?;
        if kubernetes {
            println!("\n==> the policy, through the API server");
            print!("{}", kube::apply("creating the demo policy", DEMO_POLICY)?);
        } else {
            let file = layout::root().join("demo-policy.yaml");
            layout::write_atomic(&file, DEMO_POLICY.as_bytes())?;
            demo::cilium(&["policy", "import", &file.display().to_string()])?;
        }
        ok &= demo::wait_blocked(*ha, la, &a.1, b.2)?;
        tcp(b.2, 8080)?;
        layout::enter_node(*hb)?;
        demo::cilium(&["endpoint", "list"])?;
        demo::cilium(&["bpf", "metrics", "list"])?;
    }
    layout::enter_node(holders[0].1)?;
    for args in [
        &["policy", "get"][..],
        &["service", "list"][..],
        &["bpf", "lb", "list"],
        &["status"],
        &["node", "list"],
        &["endpoint", "list"],
        &["identity", "list"],
        &["bpf", "ipcache", "list"],
        &["bpf", "tunnel", "list"],
        &["bpf", "ct", "list", "global"],
        &["bpf", "metrics", "list"],
    ] {
        demo::cilium(args)?;
    }
    if kubernetes {
        for args in [
            &["get", "ciliumnodes"][..],
            &["get", "ciliumendpoints", "-A"],
        ] {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            println!("\n$ kubectl {}", args.join(" "));
            let out = kube::kubectl(&args)?.output().context("running kubectl")?;
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
    }
    println!("\n==> the lab stays up: `cilium-lab exec {} -- ping {}`, `cilium-lab exec node1 -- cilium status`, `cilium-lab down`", names[0], placed.last().expect("a pod").2);
    if !ok {
        bail!("pods could not reach each other");
    }
    Ok(())
}

/// The lab's switch (the underlay with etcd) and the outside host; the
/// switch's holder pid.
fn start_underlay() -> anyhow::Result<i32> {
    let underlay = layout::machine_dir(layout::UNDERLAY);
    let t0 = Instant::now();
    let switch = start_holder(
        &underlay,
        &["underlay-holder".into()],
        "the underlay",
        "etcd",
    )?;
    println!(
        "==> underlay: bridge {} at {}/{} and etcd up in {:?} (pid {switch})",
        topology::BRIDGE,
        topology::UNDERLAY_IP,
        topology::UNDERLAY_PREFIX,
        t0.elapsed()
    );
    let outside = start_holder(
        &layout::machine_dir(layout::OUTSIDE),
        &["outside-holder".into(), switch.to_string()],
        "the outside host",
        "server",
    )?;
    println!(
        "==> outside host: {} on the underlay, no node, answering on port {} (TCP and UDP) with the address it sees (pid {outside})",
        topology::OUTSIDE_IP,
        outside::PORT
    );
    Ok(switch)
}

/// `images`: builds the lab's images or the conformance tests', prints
/// each archive, and imports them into the nodes if asked.
fn build_images(
    out: &std::path::Path,
    test_images: Option<&std::path::Path>,
    import: bool,
) -> anyhow::Result<()> {
    let built = match test_images {
        Some(dir) => images::build_test_images_into(dir, out)?,
        None => images::build_into(out)?,
    };
    // a reader that stops early (`| head`) must not stop the import
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for b in &built {
        let _ = writeln!(
            out,
            "{}\t{}\t{}{}",
            b.reference,
            b.manifest_digest,
            b.path.display(),
            if b.rebuilt { "" } else { "\t(up to date)" }
        );
    }
    drop(out);
    if import {
        let archives: Vec<_> = built.into_iter().map(|b| b.path).collect();
        images::import_into_nodes(&archives)?;
    }
    Ok(())
}

/// kube-apiserver, the controller manager and the scheduler on the
/// underlay; the holder's pid.
fn start_control_plane(switch: i32) -> anyhow::Result<i32> {
    start_holder(
        &layout::machine_dir(kube::MACHINE),
        &["control-plane-holder".into(), switch.to_string()],
        "the Kubernetes control plane",
        "holder",
    )
}

/// The labels of the demo's pod `i`: all `app=demo`, the second (the
/// Service's backend) `role=server` too.
pub(crate) fn demo_labels(i: usize) -> serde_json::Value {
    let mut labels = serde_json::json!({"app": "demo"});
    if i == 1 {
        labels["role"] = "server".into();
    }
    labels
}

/// The demo's Service: a ClusterIP selecting the second pod
/// (`role=server`), port 80 to the pod's 80, at the lab's fixed demo
/// address; a dual-stack lab asks the API server for an IPv6 ClusterIP
/// beside it.
pub(crate) fn demo_service(stack: stack::Stack) -> String {
    let policy = if stack == stack::Stack::Dual {
        r#""ipFamilyPolicy":"PreferDualStack","#
    } else {
        ""
    };
    format!(
        r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"demo","namespace":"default"}},
  "spec":{{{policy}"clusterIP":"{ip}","selector":{{"role":"server"}},"ports":[{{"name":"http","port":80,"targetPort":80}}]}}}}"#,
        ip = stack.demo_service_ip()
    )
}

/// The demo's pods as Pod objects, pod `i` pinned to node `i % nodes` by
/// a nodeSelector the scheduler honours, all `app=demo` and the second
/// `role=server` too; waits until the kubelets run them. Returns (node
/// slot, pod, IP) as the demo uses them.
fn kube_pods(
    names: &[String],
    nodes: usize,
) -> anyhow::Result<Vec<(usize, String, std::net::Ipv4Addr)>> {
    let pods: Vec<serde_json::Value> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let labels = demo_labels(i);
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": topology::node_name(i % nodes + 1)},
                    "containers": [{
                        "name": "main",
                        "image": "cilium-lab/builtin",
                        "ports": [{"containerPort": 80}, {"containerPort": 8080}],
                    }],
                },
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": pods});
    let t = Instant::now();
    print!(
        "{}",
        kube::apply("creating the demo pods", &list.to_string())?
    );
    let mut placed = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let ip = kube::wait_running(name, Duration::from_secs(120))?;
        println!(
            "==> pod {name} on {}: {ip} (scheduled, sandbox made by its kubelet through CNI ADD, Running after {:?})",
            topology::node_name(i % nodes + 1),
            t.elapsed()
        );
        placed.push((i % nodes, name.clone(), ip));
    }
    Ok(placed)
}

/// Cilium's not-ready taint (`agent-not-ready-taint-key`), which nodes
/// register with and the operator removes once their agent runs.
pub(crate) const AGENT_NOT_READY_TAINT: &str = "node.cilium.io/agent-not-ready";

/// The demo's policy: pod-b (app=demo on node2 too) takes TCP 80 and 8080
/// from app=demo pods; ping is no longer let in.
pub(crate) const DEMO_POLICY: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: demo-tcp-only
spec:
  endpointSelector:
    matchLabels: {app: demo}
  ingress:
  - fromEndpoints:
    - matchLabels: {app: demo}
    toPorts:
    - ports:
      - {port: "80", protocol: TCP}
      - {port: "8080", protocol: TCP}
"#;

/// SIGTERM, then SIGKILL if the holder is still there after 15 s.
fn stop_holder(pid: i32) {
    stop_holder_within(pid, Duration::from_secs(15))
}

/// SIGTERM, then SIGKILL if the holder is still there after `grace`.
fn stop_holder_within(pid: i32, grace: Duration) {
    // SAFETY: signalling a holder the lab started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while layout::alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if layout::alive(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn down() -> anyhow::Result<()> {
    let nodes = layout::running_nodes();
    let underlay = layout::machine_dir(layout::UNDERLAY).running_holder();
    if nodes.is_empty() && underlay.is_none() {
        println!("==> the lab is not up");
        let _ = std::fs::remove_dir_all(layout::root());
        return Ok(());
    }
    for (_, l, holder) in &nodes {
        if real::running() {
            // its init stops kubelet, removes the pods (CNI DEL for each)
            // and stops containerd; the kernel ends what is left
            stop_holder_within(*holder, Duration::from_secs(60));
            println!(
                "==> {} stopped; its pods, namespaces, devices and maps are gone",
                l.name()
            );
            continue;
        }
        layout::enter_node(*holder)?;
        if kube::node_kubeconfig(&l.name()).exists() {
            // the kubelet's sandboxes, by the ids their ADD used
            for sb in kubelet::sandbox::Sandbox::all(l) {
                match sb.destroy(l) {
                    Ok(()) => println!("==> deleted pod {} (sandbox {})", sb.pod(), sb.id),
                    Err(e) => eprintln!("warning: {e:#}"),
                }
            }
        }
        for pod in l.pods() {
            match pods::delete(l, &pod) {
                Ok(()) => println!("==> deleted pod {pod}"),
                Err(e) => eprintln!("warning: {e:#}"),
            }
        }
        stop_holder(*holder);
        // the agent pins its health endpoint's namespace to outlive itself
        for e in netdev::netns::remove_all_in(&l.run_dir().join("netns")) {
            eprintln!("warning: {e:#}");
        }
        println!(
            "==> {} stopped; its namespaces, devices and maps are gone",
            l.name()
        );
    }
    if let Some(pid) = layout::machine_dir(kube::OPERATOR_MACHINE).running_holder() {
        stop_holder(pid);
        println!("==> cilium-operator stopped");
    }
    if let Some(pid) = layout::machine_dir(kube::MACHINE).running_holder() {
        stop_holder(pid);
        println!("==> Kubernetes control plane stopped");
    }
    if let Some(pid) = layout::machine_dir(layout::OUTSIDE).running_holder() {
        stop_holder(pid);
        println!("==> outside host stopped");
    }
    if let Some(pid) = underlay {
        stop_holder(pid);
        println!("==> underlay and etcd stopped");
    }
    let root = layout::root();
    std::fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    Ok(())
}

/// The netns name of `pod`: `name` or `namespace/name`.
fn netns_of(pod: &str) -> String {
    match pod.split_once('/') {
        Some((ns, name)) => kubelet::sandbox::netns_name(ns, name),
        None => pod.to_owned(),
    }
}

/// The running node that has `pod`, with its holder and the pod's netns
/// name there.
fn node_of(pod: &str) -> anyhow::Result<(NodeDir, i32, String)> {
    let nodes = layout::running_nodes();
    if nodes.is_empty() {
        return Err(not_up());
    }
    let netns = netns_of(pod);
    let all: Vec<String> = nodes.iter().flat_map(|(_, l, _)| l.pods()).collect();
    nodes
        .into_iter()
        .find(|(_, l, _)| l.netns(&netns).exists())
        .map(|(_, l, h)| (l, h, netns))
        .with_context(|| format!("no pod named {pod:?}; pods: {}", all.join(", ")))
}

/// Moves this process into `pod`'s network namespace (on its node, in the
/// node's cgroup), as a process of the pod.
fn enter_pod(pod: &str) -> anyhow::Result<()> {
    let (l, holder, netns) = node_of(pod)?;
    layout::enter_node(holder)?;
    netdev::NetNs::open(&l.netns(&netns))?.enter()?;
    layout::join_node_cgroup()
}

fn running_node(name: &str) -> anyhow::Result<(NodeDir, i32)> {
    let l = layout::machine_dir(name);
    let holder = l.running_holder().ok_or_else(|| {
        if layout::running_nodes().is_empty() {
            not_up()
        } else {
            anyhow::anyhow!("no running node named {name:?}")
        }
    })?;
    Ok((l, holder))
}

/// Moves this process onto the host outside the cluster (its network).
fn enter_outside() -> anyhow::Result<()> {
    let holder = layout::machine_dir(layout::OUTSIDE)
        .running_holder()
        .ok_or_else(not_up)?;
    netdev::NetNs::open(std::path::Path::new(&format!("/proc/{holder}/ns/net")))?.enter()?;
    Ok(())
}

fn exec(target: &str, command: &[String]) -> anyhow::Result<()> {
    // before entering: a real node's /proc does not show this process;
    // on a real node, its own tools (crictl, ctr) too
    let mut path = format!(
        "{}:{}",
        layout::bin_dir()?.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let real = real::running();
    let node = topology::node_index(target).is_some();
    if real {
        path = format!("{}:{path}", kubeplane::bins::node_bin_dir().display());
    }
    if node && real {
        // a process of the node: its PID namespace takes children only
        let (_, holder) = running_node(target)?;
        layout::enter_real_node(holder)?;
        let status = Command::new(&command[0])
            .args(&command[1..])
            .env("PATH", path)
            .status()
            .with_context(|| format!("running {}", command[0]))?;
        std::process::exit(exit_code(status));
    } else if node {
        let (_, holder) = running_node(target)?;
        layout::enter_node(holder)?;
    } else if target == layout::OUTSIDE {
        enter_outside()?;
    } else if real {
        // a pod of a real node is a container: kubectl exec into it
        let (namespace, name) = target.split_once('/').unwrap_or(("default", target));
        let mut args: Vec<String> = ["exec", "-n", namespace, name, "--"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        args.extend(command.iter().cloned());
        return kubectl(&args);
    } else {
        enter_pod(target)?;
    }
    let err = Command::new(&command[0])
        .args(&command[1..])
        .env("PATH", path)
        .exec();
    Err(err).with_context(|| format!("running {}", command[0]))
}

/// The exit code a shell gives for `status`: its own, or 128 + the signal
/// that ended it.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn stop_agent(node: &str) -> anyhow::Result<()> {
    if real::running() {
        bail!("on real nodes the agent is the DaemonSet's pod: `cilium-lab kubectl -n kube-system delete pod -l k8s-app=cilium --field-selector spec.nodeName={node}` (the DaemonSet makes it again)");
    }
    let (l, holder) = running_node(node)?;
    // SAFETY: signalling a holder the lab started.
    unsafe { libc::kill(holder, libc::SIGUSR1) };
    let pid = l.run_dir().join("cilium.pid");
    let deadline = Instant::now() + Duration::from_secs(15);
    while pid.exists() {
        if Instant::now() > deadline {
            bail!("the agent of {node} did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("==> the agent of {node} is stopped; its programs keep forwarding");
    Ok(())
}

/// Stops (`stop`) or starts again a real node's kubelet and containerd:
/// its init stops them on SIGUSR1 and starts them on SIGUSR2, and says so
/// with its paused file.
fn pause_runtime(node: &str, stop: bool) -> anyhow::Result<()> {
    let (l, holder) = running_node(node)?;
    if !real::running() {
        bail!("only a real node runs kubelet and containerd (this lab's nodes are hollow or run no Kubernetes)");
    }
    let (signal, what) = if stop {
        (libc::SIGUSR1, "stopped")
    } else {
        (libc::SIGUSR2, "started")
    };
    // SAFETY: signalling the node's init, which the lab started.
    unsafe { libc::kill(holder, signal) };
    let paused = holder::paused_file(&l);
    let deadline = Instant::now() + Duration::from_secs(30);
    while paused.exists() != stop {
        if Instant::now() > deadline {
            bail!(
                "kubelet and containerd of {node} were not {what} within 30 s (see {})",
                l.log("holder").display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("==> kubelet and containerd of {node} {what}; its pods keep running");
    Ok(())
}

fn connect(
    pod: &str,
    target: std::net::SocketAddr,
    udp: bool,
    message: &str,
    count: u32,
    interval: Duration,
) -> anyhow::Result<()> {
    if pod == layout::UNDERLAY {
        // the lab's switch: outside every node and its cgroup
        let (_, holder) = running_node(layout::UNDERLAY)?;
        layout::enter_node(holder)?;
    } else if pod == layout::OUTSIDE {
        enter_outside()?;
    } else if real::running() {
        bail!("pods of real nodes are containers: `cilium-lab exec {pod} -- curl http://{target}/` (agnhost) or `-- nc`");
    } else {
        enter_pod(pod)?;
    }
    let print = |reply: &[u8]| {
        let reply = String::from_utf8_lossy(reply);
        println!("{}", reply.trim_end_matches('\n'));
    };
    if count > 1 {
        if udp {
            bail!("--count keeps one TCP connection; it does not go with --udp");
        }
        return connect::stream(target, message.as_bytes(), count, interval, |reply| {
            print(reply);
            // a reader waiting on a pipe sees each reply as it comes
            std::io::Write::flush(&mut std::io::stdout())
        })
        .with_context(|| format!("from pod {pod}"));
    }
    let reply = connect::exchange(target, udp, message.as_bytes())
        .with_context(|| format!("from pod {pod}"))?;
    print(&reply);
    Ok(())
}

/// In a lab with Kubernetes pods are the API server's, made by kubelets.
fn not_with_kubernetes(what: &str) -> anyhow::Result<()> {
    if kube::running() {
        bail!("the lab runs Kubernetes: pods are Pod objects there; {what}");
    }
    Ok(())
}

fn add_pod(pod: &str, node: &str, labels: &str) -> anyhow::Result<()> {
    let labels_flag = if labels.is_empty() {
        String::new()
    } else {
        format!(" --labels={labels}")
    };
    not_with_kubernetes(&format!(
        "use `cilium-lab kubectl run {pod} --image=cilium-lab/builtin --port=8080{labels_flag}` (the scheduler picks the node; a nodeSelector pins it)"
    ))?;
    if node_of(pod).is_ok() {
        bail!("pod {pod} already exists");
    }
    let (l, holder) = running_node(node)?;
    layout::enter_node(holder)?;
    println!("{pod}: {}", pods::add(&l, pod, labels)?);
    Ok(())
}

fn del_pod(pod: &str) -> anyhow::Result<()> {
    not_with_kubernetes(&format!("use `cilium-lab kubectl delete pod {pod}`"))?;
    let (l, holder, _) = node_of(pod)?;
    layout::enter_node(holder)?;
    pods::delete(&l, pod)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::Up {
            nodes,
            pods,
            settings,
            without_kubernetes,
            hollow_nodes,
            cni,
        } => {
            if *without_kubernetes || *hollow_nodes {
                up(usize::from(*nodes), pods, settings, !*without_kubernetes)
            } else {
                real::up(usize::from(*nodes), pods, settings, *cni)
            }
        }
        Cmd::Images { out, e2e, import } => build_images(out, e2e.as_deref(), *import),
        Cmd::Kubectl { args } => kubectl(args),
        Cmd::Admin { command } => admin(command),
        Cmd::StopAgent { node } => stop_agent(node),
        Cmd::StopRuntime { node } => pause_runtime(node, true),
        Cmd::StartRuntime { node } => pause_runtime(node, false),
        Cmd::Down => down(),
        Cmd::Exec { pod, command } => exec(pod, command),
        Cmd::Connect {
            pod,
            target,
            udp,
            message,
            count,
            interval_ms,
        } => connect(
            pod,
            *target,
            *udp,
            message,
            *count,
            Duration::from_millis(*interval_ms),
        ),
        Cmd::Kubelet { index } => kubelet::run(*index),
        Cmd::AddPod { pod, node, labels } => add_pod(pod, node, labels),
        Cmd::DelPod { pod } => del_pod(pod),
        Cmd::NodeHolder { index } => layout::machine_dir(layout::UNDERLAY)
            .running_holder()
            .context("the underlay is not running")
            .and_then(|underlay| {
                let l = layout::machine_dir(&topology::node_name(*index));
                if real::running() {
                    node::run_holder(&l, *index, underlay)
                } else {
                    holder::run_node(&l, *index, underlay)
                }
            }),
        Cmd::NodeInit { index, underlay } => node::run_init(
            &layout::machine_dir(&topology::node_name(*index)),
            *index,
            *underlay,
        ),
        Cmd::UnderlayHolder => holder::run_underlay(&layout::machine_dir(layout::UNDERLAY)),
        Cmd::OutsideHolder { underlay } => {
            holder::run_outside(&layout::machine_dir(layout::OUTSIDE), *underlay)
        }
        Cmd::OutsideServer => outside::serve(),
        Cmd::ControlPlaneHolder { underlay } => {
            holder::run_control_plane(&layout::machine_dir(kube::MACHINE), *underlay)
        }
        Cmd::OperatorHolder { underlay } => {
            holder::run_operators(&layout::machine_dir(kube::OPERATOR_MACHINE), *underlay)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
