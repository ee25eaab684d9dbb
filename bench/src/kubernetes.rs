//! The Kubernetes targets, each against the same change through the REST
//! API, measured in turns in the same run on the same machine.
//!
//! One sandbox holds four nodes on one underlay, one etcd and a
//! kube-apiserver (no controller manager or scheduler: pods name their
//! node, and slices are written by the bench). node1 and node2 run in
//! kvstore mode and are driven through the REST API, as the other
//! sections drive them; node3 and node4 run in Kubernetes mode with the
//! DaemonSet's ServiceAccount and follow the API server. Changes to the
//! API server are made twice: in-process (server-side apply, one request
//! per object, as a controller writes), which is what compares with the
//! REST baseline, and with `kubectl apply`, as a user makes them (whose
//! own process start and requests are printed on their own). Measured:
//!
//! - Service apply to every node's LB maps: a new Service and its
//!   EndpointSlice until node3's and node4's LB backend maps hold the
//!   backend, against a new service through REST `PUT /service` on node1
//!   until node1's and node2's do (the REST baseline of `services`);
//! - pod creation to a ready CiliumEndpoint: the Pod (on node3) applied,
//!   then CNI ADD as the kubelet runs it (no labels: the agent takes them
//!   from the Pod), until a CEP watch sees the CEP `ready`, against CNI
//!   ADD on node1 until its REST API says the endpoint is `ready`;
//! - NetworkPolicy apply to enforcement on every node: a NetworkPolicy's
//!   port changed until the policy maps of the selected pods on node3 and
//!   node4 let the peer in on it, against `cilium policy import` of the
//!   same rule on node1 until node1's and node2's do (as `policy`);
//! - agent RSS with N pods and N services in the cluster (default 1000:
//!   Pods and CiliumEndpoints on another node, Services with
//!   EndpointSlices), node3 against node1 given the same services through
//!   REST and the same remote pods through the kvstore.

use crate::{goals, latency_line, rss_mb};
use anyhow::{bail, Context};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::kube;
use testsupport::node::Node;
use testsupport::topology;

/// Nodes in kvstore mode (REST) and in Kubernetes mode.
const REST: [usize; 2] = [0, 1];
const K8S: [usize; 2] = [2, 3];
/// Where the remote pods of the scale phase live.
const FAR_NODE: &str = "node9";
const FAR_IP: &str = "198.18.0.99";

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// A command with `text` on stdin, insisting on success.
fn piped(mut cmd: Command, text: &str) -> anyhow::Result<()> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {cmd:?}"))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(text.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// `kubectl <verb> -f -` with `text`, insisting on success.
pub(crate) fn kubectl(cp: &kubeplane::ControlPlane, verb: &str, text: &str) -> anyhow::Result<()> {
    let mut cmd = cp.kubectl();
    cmd.args([verb, "-f", "-"]);
    piped(cmd, text)
}

/// Polls `f` every 200 µs until it holds, for at most `secs`.
fn until(what: &str, secs: u64, mut f: impl FnMut() -> anyhow::Result<bool>) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f()? {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Whether `node`'s LB backend map holds `backend` as active.
fn has_backend(node: &Node, backend: Ipv4Addr) -> anyhow::Result<bool> {
    let map = datapath::PinnedMap::open_global(&node.bpffs(), abi::maps::LB4_BACKENDS)?;
    Ok(map
        .entries::<u32, abi::lb::Lb4Backend>()?
        .iter()
        .any(|(_, b)| b.address.ip() == backend && b.flags == abi::lb::BE_STATE_ACTIVE))
}

/// The pid of `node`'s agent: the cilium-agent whose command line names
/// the node's socket.
fn agent_pid(node: &Node) -> anyhow::Result<u32> {
    let socket = node.socket().display().to_string();
    for e in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("cilium-agent") && cmdline.contains(&socket) {
            return Ok(pid);
        }
    }
    bail!("no cilium-agent for {}", node.name)
}

/// The Service `name` at `vip`:80 and its slice with `backend`:8080, as
/// JSON objects.
fn service_items(name: &str, vip: Ipv4Addr, backend: Ipv4Addr) -> [String; 2] {
    [
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}","namespace":"default"}},
  "spec":{{"clusterIP":"{vip}","ports":[{{"name":"http","port":80,"targetPort":8080}}]}}}}"#
        ),
        format!(
            r#"{{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
  "metadata":{{"name":"{name}-1","namespace":"default","labels":{{"kubernetes.io/service-name":"{name}"}}}},
  "addressType":"IPv4","ports":[{{"name":"http","port":8080,"protocol":"TCP"}}],
  "endpoints":[{{"addresses":["{backend}"],"conditions":{{"ready":true}}}}]}}"#
        ),
    ]
}

/// An in-process client of the API server as the cluster admin: the
/// same writes kubectl makes, without its process start.
struct Kube {
    rt: tokio::runtime::Runtime,
    client: k8s::kube::Client,
}

impl Kube {
    fn connect(cp: &kubeplane::ControlPlane) -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let opts = k8s::ClientOptions {
            kubeconfig: Some(cp.admin_kubeconfig()),
            // the load generator, not an agent: no client-side limit to speak of
            qps: 10_000.0,
            burst: 10_000,
            ..Default::default()
        };
        let client = rt.block_on(k8s::connect(&opts))?;
        // the connection (its TLS handshake) is made here, not in the
        // first round's requests
        rt.block_on(k8s::version_line(&client))?;
        Ok(Self { rt, client })
    }

    /// Server-side apply of each of `objects` (JSON, in `default`), in
    /// order, one request each.
    fn apply(&self, objects: &[String]) -> anyhow::Result<()> {
        use k8s::kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
        self.rt.block_on(async {
            for text in objects {
                let obj: DynamicObject = serde_json::from_str(text)?;
                let types = obj.types.clone().context("apiVersion and kind")?;
                let (group, version) = types
                    .api_version
                    .split_once('/')
                    .unwrap_or(("", types.api_version.as_str()));
                let plural = match types.kind.as_str() {
                    "Service" => "services",
                    "EndpointSlice" => "endpointslices",
                    "Pod" => "pods",
                    "NetworkPolicy" => "networkpolicies",
                    other => bail!("no plural known for {other}"),
                };
                let gvk = k8s::kube::core::GroupVersionKind::gvk(group, version, &types.kind);
                let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), "default", &ar);
                let name = obj.metadata.name.clone().context("metadata.name")?;
                api.patch(
                    &name,
                    &PatchParams::apply("cilium-bench").force(),
                    &Patch::Apply(&obj),
                )
                .await?;
            }
            Ok(())
        })
    }
}

fn list(items: &[String]) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        items.join(",")
    )
}

fn pod_item(name: &str, node: &str, app: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default","labels":{{"app":"{app}"}}}},
  "spec":{{"nodeName":"{node}","containers":[{{"name":"c","image":"c"}}]}}}}"#
    )
}

/// CNI ADD of `pod` on `node` as the kubelet runs it (no labels: the
/// agent takes them from the Pod).
fn kubelet_add(node: &Node, pod: &str) -> anyhow::Result<()> {
    let ns = node.create_netns(pod);
    let args =
        format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID=c-{pod}");
    let out = node.cni(
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", &format!("c-{pod}")),
            ("CNI_NETNS", ns.to_str().context("netns path")?),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", &args),
        ],
        testsupport::node::NETCONF,
    );
    if out.code != 0 {
        bail!("ADD {pod} on {}: {}", node.name, out.json);
    }
    Ok(())
}

/// Whether `node`'s REST API lists `pod`'s endpoint as ready.
fn endpoint_ready(node: &Node, pod: &str) -> anyhow::Result<bool> {
    let list: serde_json::Value = api::Client::new(node.socket()).get_json("/endpoint", &[])?;
    Ok(list.as_array().into_iter().flatten().any(|e| {
        e["status"]["external-identifiers"]["k8s-pod-name"] == pod
            && e["status"]["state"] == "ready"
    }))
}

/// A watch of the CiliumEndpoints of `default`: the first time each was
/// seen `ready`, as its events arrive.
struct CepWatch {
    rx: mpsc::Receiver<(String, Instant)>,
    ready: HashMap<String, Instant>,
}

impl CepWatch {
    fn start(cluster: &mut Cluster, cp: &kubeplane::ControlPlane) -> anyhow::Result<Self> {
        let mut child = cp
            .kubectl()
            .args([
                "get",
                "ciliumendpoints",
                "-n",
                "default",
                "--watch",
                "-o",
                r#"jsonpath={.metadata.name}{" "}{.status.state}{"\n"}"#,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("kubectl get --watch")?;
        let stdout = child.stdout.take().context("stdout")?;
        cluster.sb.adopt(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let now = Instant::now();
                if let Some(name) = line.strip_suffix(" ready") {
                    if tx.send((name.to_owned(), now)).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Self {
            rx,
            ready: HashMap::new(),
        })
    }

    /// When `name` was first seen ready.
    fn wait(&mut self, name: &str) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(t) = self.ready.get(name) {
                return Ok(*t);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((n, t)) => {
                    self.ready.entry(n).or_insert(t);
                }
                Err(_) => bail!("CiliumEndpoint {name} never ready"),
            }
        }
    }
}

/// The control plane on the underlay's address (where the nodes reach
/// it) with the cluster's etcd, the CRDs, the agents' ServiceAccount,
/// and the Node objects of the Kubernetes-mode nodes; the agents'
/// kubeconfig.
fn control_plane(
    cluster: &mut Cluster,
) -> anyhow::Result<(kubeplane::ControlPlane, std::path::PathBuf)> {
    let bins = kubeplane::Binaries::find()?;
    let cp = kubeplane::ControlPlane::create(
        bins,
        &cluster.sb.path().join("k8s"),
        topology::UNDERLAY_IP.into(),
        kube::PORT,
        testsupport::ETCD_URL,
        kubeplane::components::Ranges::default(),
    )?;
    kube::start_apiserver(&mut cluster.sb, &cp);
    kube::apply_crds(&cp);
    let kubeconfig = kube::agent_kubeconfig(&cp);
    // No controller manager makes it: pods need it to be admitted.
    let _ = cp
        .kubectl()
        .args(["create", "serviceaccount", "default"])
        .output();
    let nodes: Vec<String> = K8S
        .iter()
        .map(|&i| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{}"}}}}"#,
                cluster.nodes[i].name
            )
        })
        .collect();
    kubectl(&cp, "apply", &list(&nodes))?;
    // cluster-pool IPAM without an operator: each node's own range
    for &i in &K8S {
        let node = &cluster.nodes[i];
        kube::give_pod_cidr(&cp, &node.name, &node.range);
    }
    Ok((cp, kubeconfig))
}

pub fn available() -> Result<(), String> {
    kubeplane::Binaries::find()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

pub fn run_bench(rounds: usize, scale: usize) -> anyhow::Result<()> {
    anyhow::ensure!((2..=200).contains(&rounds), "rounds must be in 2..200");
    anyhow::ensure!((1..=10_000).contains(&scale), "scale must be in 1..10000");
    let mut cluster = Cluster::new(4, &[]);
    let (cp, kubeconfig) = control_plane(&mut cluster)?;
    for &i in &K8S {
        let node = &mut cluster.nodes[i];
        node.agent_args = vec![
            format!("--k8s-kubeconfig-path={}", kubeconfig.display()),
            format!("--ipv4-node={}", topology::node_ip(i + 1)),
        ];
    }
    for node in &mut cluster.nodes {
        node.quiet = true;
        node.start_agent();
    }
    println!(
        "Kubernetes mode against the REST API (node1+node2 in kvstore mode driven through REST; node3+node4 in Kubernetes mode driven through kube-apiserver; {rounds} rounds each, in turns):"
    );
    let kube = Kube::connect(&cp)?;
    services(&cluster, &cp, &kube, rounds)?;
    pods(&mut cluster, &cp, &kube, rounds)?;
    policies(&cluster, &cp, &kube, rounds)?;
    rss(&cluster, &cp, scale)?;
    Ok(())
}

fn ratio_line(what: &str, (p50, p99): (f64, f64), (bp50, bp99): (f64, f64)) {
    println!(
        "  ratio {what}: p50 {:.2}x  p99 {:.2}x",
        p50 / bp50,
        p99 / bp99
    );
}

fn services(
    cluster: &Cluster,
    cp: &kubeplane::ControlPlane,
    kube: &Kube,
    rounds: usize,
) -> anyhow::Result<()> {
    let (mut api, mut api_only, mut cli, mut cli_only, mut rest) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let k8s_has = |backend| -> anyhow::Result<()> {
        for &i in &K8S {
            until("the Kubernetes Service", 30, || {
                has_backend(&cluster.nodes[i], backend)
            })?;
        }
        Ok(())
    };
    for r in 0..rounds {
        let host = (r + 1) as u8;
        // REST: a new service on node1, until both REST nodes have it.
        let backend = Ipv4Addr::new(10, 9, 0, host);
        let t = Instant::now();
        crate::services::service(
            &cluster.nodes[REST[0]],
            100 + r as u16,
            Ipv4Addr::new(10, 96, 2, host),
            80,
            backend,
            8080,
        )?;
        for &i in &REST {
            until("the REST service", 10, || {
                has_backend(&cluster.nodes[i], backend)
            })?;
        }
        rest.push(ms(t));

        // Kubernetes, written in-process: a new Service, then its slice.
        let backend = Ipv4Addr::new(10, 9, 1, host);
        let objects = service_items(&format!("api-{r}"), Ipv4Addr::new(10, 96, 1, host), backend);
        let t = Instant::now();
        kube.apply(&objects)?;
        api_only.push(ms(t));
        k8s_has(backend)?;
        api.push(ms(t));

        // The same with kubectl, as a user makes the change.
        let backend = Ipv4Addr::new(10, 9, 3, host);
        let objects = service_items(&format!("cli-{r}"), Ipv4Addr::new(10, 96, 3, host), backend);
        let t = Instant::now();
        kubectl(cp, "apply", &list(&objects))?;
        cli_only.push(ms(t));
        k8s_has(backend)?;
        cli.push(ms(t));
    }
    println!("Service apply to every node's LB maps (a new Service with one backend until both nodes' LB backend maps hold it):");
    let ours = latency_line("API server apply Svc+slice", &mut api);
    println!(
        "  {}",
        goals::under(
            "Kubernetes Service apply to every node's LB maps, p99",
            ours.1,
            goals::K8S_SERVICE_P99_MS,
            "ms"
        )
    );
    latency_line("  ...the 2 requests", &mut api_only);
    let by_cli = latency_line("kubectl apply Svc+slice", &mut cli);
    latency_line("  ...kubectl itself", &mut cli_only);
    let base = latency_line("baseline: REST PUT /service", &mut rest);
    ratio_line("API server/REST", ours, base);
    ratio_line("kubectl/REST", by_cli, base);
    Ok(())
}

fn pods(
    cluster: &mut Cluster,
    cp: &kubeplane::ControlPlane,
    kube: &Kube,
    rounds: usize,
) -> anyhow::Result<()> {
    let mut watch = CepWatch::start(cluster, cp)?;
    let (mut k8s, mut k8s_req, mut k8s_add, mut rest, mut rest_add) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        // REST: CNI ADD until the agent's API says ready.
        let node = &cluster.nodes[REST[0]];
        let pod = format!("rpod{r}");
        let ns = node.create_netns(&pod);
        let t = Instant::now();
        let out = node.cni_pod_labeled("ADD", &pod, ns.to_str().context("netns")?, "app=bench");
        anyhow::ensure!(out.code == 0, "ADD {pod}: {}", out.json);
        rest_add.push(ms(t));
        until("the endpoint to be ready", 30, || {
            endpoint_ready(node, &pod)
        })?;
        rest.push(ms(t));

        // Kubernetes: the Pod, CNI ADD, until its CEP is ready.
        let node = &cluster.nodes[K8S[0]];
        let pod = format!("kpod{r}");
        let t = Instant::now();
        kube.apply(&[pod_item(&pod, &node.name, "bench")])?;
        k8s_req.push(ms(t));
        kubelet_add(node, &pod)?;
        k8s_add.push(ms(t));
        let ready = watch.wait(&pod)?;
        k8s.push(ready.duration_since(t).as_secs_f64() * 1000.0);
    }
    println!("pod creation to a ready endpoint (Kubernetes: the Pod applied to the API server, CNI ADD as the kubelet runs it, until a CEP watch sees it ready; REST: CNI ADD until GET /endpoint says ready):");
    let ours = latency_line("Pod to ready CEP", &mut k8s);
    println!(
        "  {}",
        goals::under(
            "Pod applied to ready CiliumEndpoint, p50",
            ours.0,
            goals::K8S_POD_CEP_P50_MS,
            "ms"
        )
    );
    latency_line("  ...Pod applied", &mut k8s_req);
    latency_line("  ...Pod applied + ADD done", &mut k8s_add);
    let base = latency_line("baseline: REST ADD to ready", &mut rest);
    latency_line("  ...ADD done", &mut rest_add);
    ratio_line("Kubernetes/REST", ours, base);
    Ok(())
}

/// db takes `port` from web pods.
fn network_policy(port: u16) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "db"}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                "ports": [{"port": port, "protocol": "TCP"}],
            }],
        },
    })
}

const CNP: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: bench}
specs:
- endpointSelector: {matchLabels: {app: db}}
  ingress:
  - fromEndpoints: [{matchLabels: {app: web}}]
    toPorts: [{ports: [{port: "PORT", protocol: TCP}]}]
"#;

fn policies(
    cluster: &Cluster,
    cp: &kubeplane::ControlPlane,
    kube: &Kube,
    rounds: usize,
) -> anyhow::Result<()> {
    // A db pod on each node, a web pod on the first of each pair.
    let [r1, r2] = REST.map(|i| &cluster.nodes[i]);
    let [k1, k2] = K8S.map(|i| &cluster.nodes[i]);
    r1.add_pod_labeled("rweb", "app=web");
    r1.add_pod_labeled("rdb1", "app=db");
    r2.add_pod_labeled("rdb2", "app=db");
    kube.apply(&[
        pod_item("kweb", &k1.name, "web"),
        pod_item("kdb3", &k1.name, "db"),
        pod_item("kdb4", &k2.name, "db"),
    ])?;
    kubelet_add(k1, "kweb")?;
    kubelet_add(k1, "kdb3")?;
    kubelet_add(k2, "kdb4")?;
    let (_, rweb) = crate::policy::endpoint(r1, "rweb")?;
    let (rdb1, _) = crate::policy::endpoint(r1, "rdb1")?;
    let (rdb2, _) = crate::policy::endpoint(r2, "rdb2")?;
    let (_, kweb) = crate::policy::endpoint(k1, "kweb")?;
    let (kdb3, _) = crate::policy::endpoint(k1, "kdb3")?;
    let (kdb4, _) = crate::policy::endpoint(k2, "kdb4")?;
    let allowed = |node: &Node, ep: u16, peer: u32, port: u16| {
        crate::policy::has_port(node, ep, peer, false, port)
    };

    let k8s_has = |port| {
        until("the NetworkPolicy on both nodes", 30, || {
            Ok(allowed(k1, kdb3, kweb, port)? && allowed(k2, kdb4, kweb, port)?)
        })
    };
    let (mut api, mut api_only, mut cli, mut cli_only, mut rest) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let port = 30000 + r as u16;
        let text = CNP.replace("PORT", &port.to_string());
        let t = Instant::now();
        let out = r1.import_policy(&text);
        anyhow::ensure!(
            out.status.success(),
            "import: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        until("the imported policy on both nodes", 30, || {
            Ok(allowed(r1, rdb1, rweb, port)? && allowed(r2, rdb2, rweb, port)?)
        })?;
        rest.push(ms(t));

        let port = 31000 + r as u16;
        let json = serde_json::to_string(&network_policy(port))?;
        let t = Instant::now();
        kube.apply(&[json])?;
        api_only.push(ms(t));
        k8s_has(port)?;
        api.push(ms(t));

        let port = 32000 + r as u16;
        let json = serde_json::to_string(&network_policy(port))?;
        let t = Instant::now();
        kubectl(cp, "apply", &json)?;
        cli_only.push(ms(t));
        k8s_has(port)?;
        cli.push(ms(t));
    }
    println!("NetworkPolicy apply to enforcement on every node (the policy's port changed until the db pods' policy maps on both nodes let web in on it):");
    let ours = latency_line("API server apply NetPol", &mut api);
    latency_line("  ...the request", &mut api_only);
    let by_cli = latency_line("kubectl apply NetPol", &mut cli);
    latency_line("  ...kubectl itself", &mut cli_only);
    let base = latency_line("baseline: policy import", &mut rest);
    ratio_line("API server/REST", ours, base);
    ratio_line("kubectl/REST", by_cli, base);
    Ok(())
}

/// The address of remote pod `i` of the scale phase.
fn far_pod(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 60, (i / 250) as u8, (i % 250 + 1) as u8)
}

fn far_vip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 97, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// The number of services `node`'s REST API lists.
fn service_count(node: &Node) -> anyhow::Result<usize> {
    let list: serde_json::Value = api::Client::new(node.socket()).get_json("/service", &[])?;
    Ok(list.as_array().map_or(0, Vec::len))
}

/// `kubectl create` of `items` as one List, on a thread of its own.
fn create_list(
    cp: &kubeplane::ControlPlane,
    items: &[String],
) -> std::thread::JoinHandle<anyhow::Result<()>> {
    let text = list(items);
    let mut cmd = cp.kubectl();
    cmd.args(["create", "-f", "-"]);
    std::thread::spawn(move || piped(cmd, &text))
}

fn join_all(threads: Vec<std::thread::JoinHandle<anyhow::Result<()>>>) -> anyhow::Result<()> {
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("kubectl create thread panicked"))??;
    }
    Ok(())
}

/// Polls `done` every 250 ms until it holds, for at most 5 minutes (the
/// 1000 services take 1.5 minutes to load on a quiet machine).
fn until_slow(what: &str, mut done: impl FnMut() -> anyhow::Result<bool>) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done()? {
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(())
}

/// Both agents' RSS once the last load's allocations settled: the median
/// of 5, taken in turns.
fn settled_rss(rest_pid: u32, k8s_pid: u32) -> anyhow::Result<[f64; 2]> {
    std::thread::sleep(Duration::from_secs(2));
    crate::interleaved(5, [&mut || rss_mb(rest_pid), &mut || rss_mb(k8s_pid)])
}

fn rss(cluster: &Cluster, cp: &kubeplane::ControlPlane, scale: usize) -> anyhow::Result<()> {
    let (rest_node, k8s_node) = (&cluster.nodes[REST[0]], &cluster.nodes[K8S[0]]);
    let nodes = [rest_node, k8s_node];
    let (rest_pid, k8s_pid) = (agent_pid(rest_node)?, agent_pid(k8s_node)?);
    let [rest0, k8s0] = settled_rss(rest_pid, k8s_pid)?;
    let before = [service_count(rest_node)?, service_count(k8s_node)?];

    // 1. Services. Kubernetes: Services with slices, one List; REST: the
    // same services through PUT /service on node1.
    let t = Instant::now();
    let svcs: Vec<String> = (0..scale)
        .flat_map(|i| service_items(&format!("s{i}"), far_vip(i), far_pod(i)))
        .collect();
    let creator = create_list(cp, &svcs);
    for i in 0..scale {
        crate::services::service(rest_node, 1000 + i as u16, far_vip(i), 80, far_pod(i), 8080)?;
    }
    join_all(vec![creator])?;
    for (node, before) in nodes.into_iter().zip(before) {
        until_slow(&format!("{}'s {scale} services", node.name), || {
            Ok(service_count(node)? >= before + scale)
        })?;
    }
    let services_secs = t.elapsed().as_secs_f64();
    let [rest1, k8s1] = settled_rss(rest_pid, k8s_pid)?;

    // 2. Remote pods. Kubernetes: Pods on another node and their
    // CiliumEndpoints, two Lists side by side; kvstore: the same pods'
    // ipcache entries, as their agent would publish them.
    let t = Instant::now();
    let pods: Vec<String> = (0..scale)
        .map(|i| pod_item(&format!("p{i}"), FAR_NODE, &format!("a{}", i % 10)))
        .collect();
    let ceps: Vec<String> = (0..scale)
        .map(|i| {
            format!(
                r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumEndpoint","metadata":{{"name":"p{i}","namespace":"default"}},
  "status":{{"id":{},"identity":{{"id":{}}},"state":"ready",
  "networking":{{"addressing":[{{"ipv4":"{}"}}],"node":"{FAR_IP}"}}}}}}"#,
                i + 1,
                300 + i % 10,
                far_pod(i)
            )
        })
        .collect();
    let creators = vec![create_list(cp, &pods), create_list(cp, &ceps)];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let endpoints = vec![testsupport::ETCD_URL.to_owned()];
        let kv = kvstore::Kvstore::connect(&endpoints, Duration::from_secs(15)).await?;
        for i in 0..scale {
            let ip = far_pod(i).to_string();
            let pair = serde_json::json!({
                "IP": ip, "HostIP": FAR_IP, "ID": 300 + i % 10, "Key": 0,
                "Metadata": format!("cilium-global:default:{FAR_NODE}:{}", i + 1),
                "K8sNamespace": "default", "K8sPodName": format!("p{i}"),
            });
            kv.put(&kvstore::keys::ip(&ip), &serde_json::to_vec(&pair)?)
                .await?;
        }
        anyhow::Ok(())
    })?;
    join_all(creators)?;
    let last = format!("{}/32", far_pod(scale - 1));
    for node in nodes {
        until_slow(&format!("{}'s {scale} remote pods", node.name), || {
            Ok(node.cilium_ok(&["ip", "list"]).contains(&last))
        })?;
    }
    let pods_secs = t.elapsed().as_secs_f64();
    let [rest2, k8s2] = settled_rss(rest_pid, k8s_pid)?;

    println!(
        "agent RSS with {scale} services, then {scale} pods too, in the cluster (on other nodes; loaded in {services_secs:.0} s and {pods_secs:.0} s; median of 5):"
    );
    println!(
        "  {:<30} {:>9} {:>13} {:>13} {:>9}",
        "",
        "empty",
        format!("+{scale} svcs"),
        format!("+{scale} pods"),
        "growth"
    );
    for (what, [a, b, c]) in [
        ("Kubernetes mode (node3)", [k8s0, k8s1, k8s2]),
        ("baseline: REST+kvstore (node1)", [rest0, rest1, rest2]),
    ] {
        println!(
            "  {what:<30} {a:6.1} MB {b:10.1} MB {c:10.1} MB {:+6.1} MB",
            c - a
        );
    }
    println!(
        "  {:<30} {:8.2}x {:12.2}x {:12.2}x {:8.2}x",
        "ratio Kubernetes/REST",
        k8s0 / rest0,
        k8s1 / rest1,
        k8s2 / rest2,
        (k8s2 - k8s0) / (rest2 - rest0).max(0.1)
    );
    // Most of an idle agent's RSS is its binary's pages, not its heap.
    let [rest_file, k8s_file] = [rest_pid, k8s_pid].map(|p| crate::status_mb(p, "RssFile"));
    println!(
        "  of the loaded RSS, pages of the binary and libraries (RssFile): Kubernetes mode {:.1} MB, REST {:.1} MB",
        k8s_file?, rest_file?
    );
    println!(
        "  Kubernetes mode: idle {}; loaded {}",
        goals::under(
            "agent RSS idle, Kubernetes mode",
            k8s0,
            goals::RSS_IDLE_MB,
            "MB"
        ),
        goals::under(
            &format!("agent RSS with {scale} Services and {scale} pods, Kubernetes mode"),
            k8s2,
            goals::RSS_LOADED_MB,
            "MB"
        )
    );
    Ok(())
}
