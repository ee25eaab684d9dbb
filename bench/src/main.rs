//! cilium-bench: the pod-networking targets, each measured against a
//! baseline taken in the same run on the same machine (which is noisy):
//!
//! - pod ADD latency over N pods: `cilium-cni ADD` against the same veth,
//!   address and routes made with plain `ip` commands;
//! - agent RSS with 0 and N endpoints, against the 30 MB target;
//! - pod-to-pod TCP throughput (iperf3) through our programs, against two
//!   namespaces joined by plain veths and host routes, no BPF;
//! - the multi-node targets (see `overlay`);
//! - native routing against tunnel mode and plain routing (see `routing`);
//! - the service targets (see `services`);
//! - the policy targets (see `policy`);
//! - the observability targets (see `events`);
//! - the node-lifecycle targets (see `lifecycle`);
//! - pods to the outside host, BPF against iptables masquerading (see
//!   `masquerade`);
//! - the Kubernetes targets against the REST API (see `kubernetes`);
//! - real kubelet and containerd nodes, Cilium against Debian's bridge
//!   plugin (see `real_node`), and Kubernetes' own endpoints latency test
//!   against that plugin with kube-proxy (see `endpoints_latency`).
//!
//! Everything runs in private network + mount namespaces.

mod endpoints_latency;
mod events;
mod goals;
mod ipv6;
mod kubernetes;
mod lifecycle;
mod masquerade;
mod operator;
mod overlay;
mod policy;
mod real_node;
mod routing;
mod services;

use anyhow::{bail, Context};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use testsupport::Sandbox;

const POD_CIDR: &str = "10.3.0.0/24";
const BASE_GW: Ipv4Addr = Ipv4Addr::new(10, 4, 0, 1);
const NETCONF: &str = r#"{"cniVersion":"1.0.0","name":"cilium","type":"cilium-cni"}"#;

/// The sections' default sizes, in a measuring run and in a smoke run
/// (each is also the size a section run on its own takes).
fn default_pods() -> usize {
    scaled(100, 2)
}

fn default_secs() -> u32 {
    scaled(5, 1)
}

/// The Kubernetes section's rounds per measure and cluster scale.
fn k8s_rounds_and_scale() -> (usize, usize) {
    scaled((20, 1000), (2, 10))
}

/// Nodes joining at once in the operator's rounds (issue 19: 1 and 50).
fn operator_sizes() -> Vec<usize> {
    scaled(vec![1, 50], vec![1])
}

/// Pods made one after another on a real node (issue 30: 50).
fn real_node_pods() -> usize {
    scaled(50, 2)
}

pub(crate) fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn rss_mb(pid: u32) -> anyhow::Result<f64> {
    status_mb(pid, "VmRSS")
}

/// A size line of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `RssFile`), in MB.
fn status_mb(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{field} of process {pid}"))?;
    Ok(kb / 1024.0)
}

struct Bench {
    sb: Sandbox,
    socket: PathBuf,
}

impl Bench {
    fn netns(&self, name: &str) -> PathBuf {
        self.sb.netns_dir().join(name)
    }

    fn start_agent(&mut self) -> anyhow::Result<u32> {
        let child = Command::new(testsupport::bin("cilium-agent"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .arg(format!("--bpf-root={}", self.sb.bpffs().display()))
            .arg(format!(
                "--state-dir={}",
                self.sb.run_dir().join("state").display()
            ))
            .arg(format!("--socket-path={}", self.socket.display()))
            .arg(format!("--ipv4-range={POD_CIDR}"))
            .args(
                std::env::var("CILIUM_BENCH_AGENT_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting cilium-agent")?;
        let pid = child.id();
        self.sb.adopt(child);
        let client = api::Client::new(&self.socket);
        let deadline = Instant::now() + Duration::from_secs(30);
        while client
            .get_json::<serde_json::Value>("/healthz", &[("brief", "true")])
            .is_err()
        {
            if Instant::now() > deadline {
                bail!("agent did not become ready");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let start-up allocations settle before measuring memory.
        std::thread::sleep(Duration::from_millis(500));
        Ok(pid)
    }

    /// One CNI ADD, timed as the runtime sees it (process start to exit).
    fn cni_add(&self, i: usize) -> anyhow::Result<Duration> {
        let ns = self.netns(&format!("pod{i}"));
        let t = Instant::now();
        let mut child = Command::new(testsupport::bin("cilium-cni"))
            .env("CILIUM_SOCK", &self.socket)
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", format!("bench-{i}"))
            .env("CNI_NETNS", &ns)
            .env("CNI_IFNAME", "eth0")
            .env(
                "CNI_ARGS",
                format!("K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod{i}"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(NETCONF.as_bytes())?;
        let out = child.wait_with_output()?;
        let took = t.elapsed();
        if !out.status.success() {
            bail!("ADD pod{i}: {}", String::from_utf8_lossy(&out.stdout));
        }
        Ok(took)
    }

    /// Waits until pod `i`'s endpoint sits on its pinned tcx link.
    fn wait_tcx(&self, i: usize) -> anyhow::Result<()> {
        // IDs are the agent's to give (its host endpoint takes one too)
        let ep: serde_json::Value = api::Client::new(&self.socket)
            .get_json(&format!("/endpoint/container-id:bench-{i}"), &[])?;
        let id = ep["id"].as_u64().context("the endpoint's id")?;
        let pin = self
            .sb
            .bpffs()
            .join(format!("cilium/endpoints/{id}/links/cil_from_container"));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !pin.exists() {
            if Instant::now() > deadline {
                bail!("endpoint {id} never moved to tcx ({})", pin.display());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    /// The same wiring with plain ip commands (no agent, no BPF).
    fn ip_add(&self, i: usize) -> anyhow::Result<Duration> {
        let ns = self.netns(&format!("base{i}"));
        let host = format!("lxcb{i}");
        let ip = Ipv4Addr::new(10, 4, (i / 200) as u8, (i % 200 + 2) as u8);
        let me = std::process::id().to_string();
        let t = Instant::now();
        plain_veth(&ns, &host, &me, ip, BASE_GW)?;
        run(Command::new("ip").args(["link", "set", &host, "up"]))?;
        let took = t.elapsed();
        // Host route so the baseline pods reach each other (not timed).
        run(Command::new("ip").args(["route", "add", &format!("{ip}/32"), "dev", &host]))?;
        Ok(took)
    }
}

/// Runs `program` inside the netns at `ns`.
pub(crate) fn in_ns(ns: &Path, program: &str, args: &[&str]) -> anyhow::Result<String> {
    run(Command::new("nsenter")
        .arg(format!("--net={}", ns.display()))
        .arg(program)
        .args(args))
}

/// The baselines' pod wiring, no agent and no BPF: `eth0` with `ip`/32 in
/// the netns at `pod`, its peer `host` moved into `host_ns` (a pid or a
/// netns path, as iproute2 takes them), and a default route via `gw`.
pub(crate) fn plain_veth(
    pod: &Path,
    host: &str,
    host_ns: &str,
    ip: Ipv4Addr,
    gw: Ipv4Addr,
) -> anyhow::Result<()> {
    let ip_cmd = |args: &[&str]| in_ns(pod, "ip", args);
    ip_cmd(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", host, "netns", host_ns,
    ])?;
    ip_cmd(&["addr", "add", &format!("{ip}/32"), "dev", "eth0"])?;
    ip_cmd(&["link", "set", "eth0", "up"])?;
    ip_cmd(&[
        "route",
        "add",
        &format!("{gw}/32"),
        "dev",
        "eth0",
        "scope",
        "link",
    ])?;
    ip_cmd(&[
        "route",
        "add",
        "default",
        "via",
        &gw.to_string(),
        "dev",
        "eth0",
    ])?;
    Ok(())
}

pub(crate) fn latency_line(name: &str, samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99) = (percentile(samples, 0.5), percentile(samples, 0.99));
    println!("  {name:<28} p50 {p50:7.2} ms   p99 {p99:7.2} ms");
    (p50, p99)
}

/// The median of `rounds` measurements of each of `probes`, taken in
/// turns so a noisy moment of the machine hits all of them alike.
pub(crate) fn interleaved<const N: usize>(
    rounds: usize,
    mut probes: [&mut dyn FnMut() -> anyhow::Result<f64>; N],
) -> anyhow::Result<[f64; N]> {
    let mut samples = vec![Vec::new(); N];
    for _ in 0..scaled(rounds, 1) {
        for (i, probe) in probes.iter_mut().enumerate() {
            samples[i].push(probe()?);
        }
    }
    Ok(std::array::from_fn(|i| {
        let s = &mut samples[i];
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }))
}

/// iperf3 throughput under each of two `cilium config` settings of `node`
/// (median of 3 rounds, taken in turns).
pub(crate) fn iperf_per_setting(
    node: &testsupport::node::Node,
    settings: [&str; 2],
    (server_ns, client_ns, server_ip, secs): (&Path, &Path, Ipv4Addr, u32),
) -> anyhow::Result<[f64; 2]> {
    let under = |setting: &str| {
        node.cilium_ok(&["config", setting]);
        iperf(server_ns, client_ns, server_ip, secs)
    };
    interleaved(3, [&mut || under(settings[0]), &mut || under(settings[1])])
}

pub(crate) fn iperf(
    server_ns: &Path,
    client_ns: &Path,
    server_ip: impl Into<std::net::IpAddr>,
    secs: u32,
) -> anyhow::Result<f64> {
    let mut server = Command::new("nsenter")
        .arg(format!("--net={}", server_ns.display()))
        .args(["iperf3", "-s", "-1", "-p", "5201"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting iperf3 (apt install iperf3)")?;
    std::thread::sleep(Duration::from_millis(300));
    let out = run(Command::new("nsenter")
        .arg(format!("--net={}", client_ns.display()))
        .args([
            "iperf3",
            "-c",
            &server_ip.into().to_string(),
            "-p",
            "5201",
            "-J",
            "-t",
            &secs.to_string(),
        ]));
    let _ = server.kill();
    let _ = server.wait();
    iperf_bits_per_second(&out?)
}

/// What an iperf3 client's JSON report says was received.
pub(crate) fn iperf_bits_per_second(json: &str) -> anyhow::Result<f64> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .context("iperf3 JSON without end.sum_received")
}

/// Set once by `--smoke`: every section runs at its smallest size, to
/// show it still runs (CI), not to measure.
static SMOKE: AtomicBool = AtomicBool::new(false);

pub(crate) fn smoke() -> bool {
    SMOKE.load(Ordering::Relaxed)
}

/// `full` in a measuring run, `small` in a smoke run.
pub(crate) fn scaled<T>(full: T, small: T) -> T {
    if smoke() {
        small
    } else {
        full
    }
}

/// The positional argument `i` parsed, or `default`.
fn arg<T: std::str::FromStr>(
    args: &[String],
    i: usize,
    default: T,
    usage: &str,
) -> anyhow::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    args.get(i)
        .map_or(Ok(default), |s| s.parse())
        .with_context(|| format!("usage: cilium-bench {usage}"))
}

/// The network namespace the bench started in. A section's sandbox moves
/// the main thread into a namespace of its own for good, so what needs
/// the machine's network later (the Go proxy, for a first e2e build)
/// runs here instead.
static START_NETNS: std::sync::OnceLock<netdev::NetNs> = std::sync::OnceLock::new();

/// Runs `f` on a thread in the namespace the bench started in.
pub fn in_start_netns<T: Send>(f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
    let ns = START_NETNS.get().context("the start netns was not kept")?;
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter()?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("a thread in the start netns panicked"))?
    })
}

fn main() -> anyhow::Result<()> {
    let start_netns = netdev::NetNs::open(Path::new("/proc/thread-self/ns/net"))?;
    let _ = START_NETNS.set(start_netns);
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--smoke") {
        args.remove(at);
        SMOKE.store(true, Ordering::Relaxed);
    }
    // The connection-rate client runs as a process of its own, so it can
    // be placed in a cgroup (socket LB) or left out of it.
    let secs_default = default_secs();
    match args.get(1).map(String::as_str) {
        Some("conn-rate") => {
            let usage = "conn-rate <ip> <port> <secs>";
            anyhow::ensure!(args.len() == 5, "usage: cilium-bench {usage}");
            let ip = arg(
                &args,
                2,
                std::net::IpAddr::from(Ipv4Addr::UNSPECIFIED),
                usage,
            )?;
            let port = arg(&args, 3, 0u16, usage)?;
            let secs = arg(&args, 4, 1.0f64, usage)?;
            println!("{}", services::conn_rate_here(ip, port, secs)?);
            Ok(())
        }
        Some("services") => services::run_bench(arg(&args, 2, secs_default, "services [secs]")?),
        Some("real-node") => {
            real_node::run_bench(arg(&args, 2, real_node_pods(), "real-node [pods]")?)
        }
        Some("endpoints-latency") => endpoints_latency::run_bench(),
        Some("lifecycle") => lifecycle::run_bench(),
        Some("events") => events::run_bench(arg(&args, 2, secs_default, "events [secs]")?),
        Some("kubernetes") => {
            let usage = "kubernetes [rounds] [scale]";
            let (rounds, scale) = k8s_rounds_and_scale();
            let rounds = arg(&args, 2, rounds, usage)?;
            let scale = arg(&args, 3, scale, usage)?;
            kubernetes::run_bench(rounds, scale)
        }
        Some("operator") => {
            let usage = "usage: cilium-bench operator [nodes,nodes,...]";
            let sizes = match args.get(2) {
                Some(s) => s
                    .split(',')
                    .map(|n| n.parse::<usize>().context(usage))
                    .collect::<anyhow::Result<Vec<_>>>()?,
                None => operator_sizes(),
            };
            anyhow::ensure!(sizes.iter().all(|n| *n >= 1), "{usage}: sizes from 1");
            operator::run_bench(&sizes)
        }
        Some("one-node") => {
            let usage = "one-node [pods] [secs]";
            let pods = arg(&args, 2, default_pods(), usage)?;
            anyhow::ensure!((2..=200).contains(&pods), "pods must be in 2..200");
            one_node(pods, arg(&args, 3, secs_default, usage)?)
        }
        Some("masquerade") => {
            masquerade::run_bench(arg(&args, 2, secs_default, "masquerade [secs]")?)
        }
        Some("overlay") => {
            let usage = "overlay [pods] [secs]";
            let pods = arg(&args, 2, default_pods().min(50), usage)?;
            anyhow::ensure!((1..=200).contains(&pods), "pods must be in 1..200");
            overlay::run_bench(pods, arg(&args, 3, secs_default, usage)?)
        }
        Some("routing") => routing::run_bench(arg(&args, 2, secs_default, "routing [secs]")?),
        Some("ipv6") => ipv6::run_bench(arg(&args, 2, secs_default, "ipv6 [secs]")?),
        Some("policy") => policy::run_bench(arg(&args, 2, secs_default, "policy [secs]")?),
        _ => {
            let usage = "[--smoke] [pods] [iperf-seconds]";
            let pods = arg(&args, 1, default_pods(), usage)?;
            let secs = arg(&args, 2, secs_default, usage)?;
            anyhow::ensure!((2..=200).contains(&pods), "pods must be in 2..200");
            every_section(pods, secs)
        }
    }
}

/// Runs one section, saying how long it took (a smoke run in CI must stay
/// short). A smoke run stops at a section that fails (CI must see it); a
/// measuring run records the failure as a missed row of its table and
/// goes on, so one section's trouble costs none of the others' figures.
fn section(name: &str, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let t = Instant::now();
    // A panic (a testsupport assertion) is a failed section too: a whole
    // run goes on past it. Its sandboxes are dropped while unwinding.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(anyhow::anyhow!("panicked: {}", panic_message(&*panic))))
        .with_context(|| format!("bench section {name}"));
    println!("  (section {name} took {:.0} s)", t.elapsed().as_secs_f64());
    match outcome {
        Err(e) if !smoke() => {
            println!("  section {name} FAILED: {e:#}");
            goals::failed(name, &e);
            Ok(())
        }
        other => other,
    }
}

/// The message a panic carried, when it is text.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// A whole run: every section in turn, then the table of verdicts.
fn every_section(pods: usize, secs: u32) -> anyhow::Result<()> {
    let started = Instant::now();
    section("one-node", || one_node(pods, secs))?;
    // Issue 5 asks for reachability over 50 pods.
    section("overlay", || overlay::run_bench(pods.min(50), secs))?;
    section("routing", || routing::run_bench(secs))?;
    section("services", || services::run_bench(secs))?;
    section("policy", || policy::run_bench(secs))?;
    section("events", || events::run_bench(secs))?;
    section("lifecycle", lifecycle::run_bench)?;
    section("masquerade", || masquerade::run_bench(secs))?;
    section("ipv6", || ipv6::run_bench(secs))?;
    match kubernetes::available() {
        Ok(()) => {
            let (rounds, scale) = k8s_rounds_and_scale();
            section("kubernetes", || kubernetes::run_bench(rounds, scale))?;
            section("operator", || operator::run_bench(&operator_sizes()))?;
            section("real-node", || real_node::run_bench(real_node_pods()))?;
            section("endpoints-latency", endpoints_latency::run_bench)?;
        }
        Err(e) if smoke() => anyhow::bail!("Kubernetes sections cannot run: {e}"),
        Err(e) => println!("Kubernetes targets: skipped ({e})"),
    }
    let (table, missed) = goals::table();
    println!(
        "\n== Goals ({}; the whole run took {:.0} s) ==",
        if smoke() {
            "smoke run: sizes too small for the verdicts to mean anything"
        } else {
            "issue 34's table"
        },
        started.elapsed().as_secs_f64()
    );
    print!("{table}");
    println!("{missed} goal(s) missed");
    Ok(())
}

/// The single-node targets, in a sandbox of their own.
fn one_node(pods: usize, secs: u32) -> anyhow::Result<()> {
    let sb = Sandbox::try_enter().context("creating the bench namespaces (run as root)")?;
    // the agent's state dir, as on a node (see run_dir_on_tmpfs)
    sb.run_dir_on_tmpfs()
        .context("mounting a tmpfs for the agent's state")?;
    let socket = sb.run_dir().join("cilium.sock");
    let mut b = Bench { sb, socket };
    let agent = b.start_agent()?;
    let rss0 = rss_mb(agent)?;

    // Namespaces are made up front: both paths start from an existing netns.
    for i in 0..pods {
        netdev::netns::create(&b.netns(&format!("pod{i}")))?;
        netdev::netns::create(&b.netns(&format!("base{i}")))?;
    }
    run(Command::new("ip").args(["addr", "add", &format!("{BASE_GW}/32"), "dev", "lo"]))?;
    let (mut ours, mut settled, mut base) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so machine noise hits both series alike. The agent moves
    // each new endpoint from its tc filter onto a tcx link after answering;
    // that is waited for (and reported) before the baseline's turn, so the
    // baseline does not pay for it.
    for i in 0..pods {
        let t = Instant::now();
        ours.push(b.cni_add(i)?.as_secs_f64() * 1000.0);
        b.wait_tcx(i)?;
        settled.push(t.elapsed().as_secs_f64() * 1000.0);
        base.push(b.ip_add(i)?.as_secs_f64() * 1000.0);
    }
    println!("pod ADD latency over {pods} pods (process start to exit):");
    let (p50, p99) = latency_line("cilium-cni ADD", &mut ours);
    latency_line("  ...until on its tcx link", &mut settled);
    let (bp50, bp99) = latency_line("baseline: ip commands", &mut base);
    println!(
        "  ratio cilium-cni/baseline: p50 {:.2}x  p99 {:.2}x   {}",
        p50 / bp50,
        p99 / bp99,
        goals::under(
            "pod ADD p50 (cilium-cni process)",
            p50,
            goals::POD_ADD_P50_MS,
            "ms"
        )
    );

    let rss_n = rss_mb(agent)?;
    // The goals are the Kubernetes mode's (see `kubernetes`); this is the
    // REST mode's, for comparison.
    println!("agent RSS (REST mode):");
    println!("  0 endpoints   {rss0:6.1} MB");
    println!("  {pods} endpoints {rss_n:6.1} MB");

    let ip_of = |ns: &Path| testsupport::node::eth0_ipv4(ns).context("pod address");
    let (ours_ip, base_ip) = (ip_of(&b.netns("pod1"))?, ip_of(&b.netns("base1"))?);
    let [ours_bps, base_bps] = interleaved(
        3,
        [
            &mut || iperf(&b.netns("pod1"), &b.netns("pod0"), ours_ip, secs),
            &mut || iperf(&b.netns("base1"), &b.netns("base0"), base_ip, secs),
        ],
    )?;
    let ratio = ours_bps / base_bps;
    println!("pod-to-pod TCP throughput (iperf3, {secs} s, median of 3):");
    println!(
        "  through bpf_lxc (peer redirect)  {:7.2} Gbit/s",
        ours_bps / 1e9
    );
    println!(
        "  baseline: veth + host routes     {:7.2} Gbit/s",
        base_bps / 1e9
    );
    println!(
        "  ratio {ratio:.2}x   {}",
        goals::at_least(
            "same-node pod to pod vs veth + host routes",
            ratio,
            goals::SAME_NODE_THROUGHPUT
        )
    );
    Ok(())
}
