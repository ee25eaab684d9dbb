//! The service targets, on one node with real agent, CNI and pods:
//!
//! - pod-to-ClusterIP TCP throughput and connection rate, against the same
//!   pods talking to the backend's address directly;
//! - connection rate with 10, 1k and 5k services installed, against a
//!   kube-proxy-style iptables setup (one DNAT rule per service, the one
//!   used last) between two plain namespaces on the same machine;
//! - how long a `cilium service update` takes until every node of a
//!   3-node cluster balances to the new backend.

use crate::{goals, in_ns, interleaved, iperf, latency_line, plain_veth, scaled};
use anyhow::Context;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::node::Node;

const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
const SCALES: [usize; 4] = [10, 1000, 5000, goals::SERVICES_AT_SCALE];
/// Rounds of each connection-rate probe (the machine is noisy).
const ROUNDS: usize = 5;
/// Rounds of the throughput probe, which takes `secs` each.
const THROUGHPUT_ROUNDS: usize = 3;
/// The plain pods' gateway: an address of the node's namespace.
const PLAIN_GW: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);

/// Makes close() send a RST instead of leaving the socket in TIME_WAIT:
/// thousands of connections a second would otherwise use up the client's
/// ports and measure port search, not the path.
fn abort_on_close(s: &std::net::TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a linger struct of the right size.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Connections per second to ip:port for `secs`, one line each way,
/// closed with a RST so the client's ports do not run out. Runs in the
/// calling thread's namespaces and cgroup (the `conn-rate` subcommand).
pub fn conn_rate_here(ip: IpAddr, port: u16, secs: f64) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed().as_secs_f64() < secs {
        let mut s =
            std::net::TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(2))
                .with_context(|| format!("connecting to {ip}:{port}"))?;
        s.write_all(b"x\n")?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line)?;
        abort_on_close(&s);
        n += 1;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// `conn_rate_here` in a process of its own, in the netns at `client`
/// and, when given, in `cgroup` (where socket LB applies).
pub fn conn_rate(
    client: &Path,
    cgroup: Option<&Path>,
    ip: impl Into<IpAddr>,
    port: u16,
    secs: f64,
) -> anyhow::Result<f64> {
    let ip = ip.into();
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args([
        "conn-rate",
        &ip.to_string(),
        &port.to_string(),
        &secs.to_string(),
    ]);
    testsupport::node::in_netns(&mut cmd, client);
    if let Some(cg) = cgroup {
        testsupport::in_cgroup(&mut cmd, cg);
    }
    let out = cmd.output().context("running the conn-rate client")?;
    anyhow::ensure!(
        out.status.success(),
        "conn-rate client in {} (cgroup {cgroup:?}): {}",
        client.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .context("conn-rate output")
}

/// A server for the connection-rate client, which makes one connection at
/// a time: each is answered on the accepting thread (no thread per
/// connection), so a connection costs little besides the path measured.
/// The thread lives as long as the process.
fn serial_server(netns: &Path, port: u16) -> anyhow::Result<()> {
    let ns = netdev::NetNs::open(netns)?;
    let listener = std::thread::spawn(move || -> anyhow::Result<std::net::TcpListener> {
        ns.enter()?;
        Ok(std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))?)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("bind thread panicked"))??;
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut line = String::new();
            if BufReader::new(&conn).read_line(&mut line).is_ok() {
                let _ = conn.write_all(b"y\n");
            }
        }
    });
    Ok(())
}

pub(crate) fn service(
    node: &Node,
    id: u16,
    vip: Ipv4Addr,
    port: u16,
    backend: Ipv4Addr,
    bport: u16,
) -> anyhow::Result<()> {
    let spec = api::service::ServiceSpec {
        id: i64::from(id),
        frontend_address: api::service::FrontendAddress {
            ip: vip.to_string(),
            port,
            ..Default::default()
        },
        backend_addresses: vec![api::service::BackendAddress {
            ip: backend.to_string(),
            port: bport,
            ..Default::default()
        }],
        ..Default::default()
    };
    let body = serde_json::to_vec(&spec)?;
    api::Client::new(node.socket()).call("PUT", &format!("/service/{id}"), &[], Some(&body))?;
    Ok(())
}

/// A plain pod for the iptables baseline: a netns on a veth into `router`,
/// a namespace of its own (no agent, no BPF), routed both ways.
fn plain_pod(
    node: &Node,
    router: &Path,
    name: &str,
    ip: Ipv4Addr,
) -> anyhow::Result<std::path::PathBuf> {
    let ns = node.create_netns(name);
    let host = format!("plain{}", ip.octets()[3]);
    plain_veth(&ns, &host, &router.display().to_string(), ip, PLAIN_GW)?;
    in_ns(router, "ip", &["link", "set", &host, "up"])?;
    in_ns(
        router,
        "ip",
        &["route", "add", &format!("{ip}/32"), "dev", &host],
    )?;
    Ok(ns)
}

/// Loads `n` DNAT rules (kube-proxy's shape: match VIP and port, DNAT to
/// the backend) with the measured service's last.
fn iptables_services(router: &Path, n: usize, backend: Ipv4Addr) -> anyhow::Result<()> {
    let mut rules = String::from(
        "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\n",
    );
    for i in 1..n {
        rules.push_str(&format!(
            "-A KUBE-SERVICES -d 10.98.{}.{}/32 -p tcp --dport 80 -j DNAT --to-destination 10.250.0.9:8080\n",
            i / 250,
            i % 250 + 1
        ));
    }
    rules.push_str(&format!(
        "-A KUBE-SERVICES -d {VIP}/32 -p tcp --dport 80 -j DNAT --to-destination {backend}:8080\nCOMMIT\n"
    ));
    let mut child = Command::new("nsenter")
        .arg(format!("--net={}", router.display()))
        .arg("iptables-restore")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("running iptables-restore (apt install iptables)")?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(rules.as_bytes())?;
    anyhow::ensure!(child.wait()?.success(), "iptables-restore failed");
    Ok(())
}

pub fn run_bench(secs: u32) -> anyhow::Result<()> {
    let mut node = Node::new("10.5.0.0/24");
    node.quiet = true;
    // Thousands of connections a second need Cilium's CT size, not the
    // tests' small one: closed entries linger for the close timeout.
    node.agent_args = vec![
        "--bpf-lb-sock=true".into(),
        "--bpf-ct-global-tcp-max=524288".into(),
    ];
    node.start_agent();
    let client = node.add_pod("client");
    let server = node.add_pod("server");
    serial_server(&node.netns("server"), 8080)?;
    service(&node, 1, VIP, 5201, server, 5201)?;
    service(&node, 2, VIP, 80, server, 8080)?;
    let (cns, sns) = (node.netns("client"), node.netns("server"));
    let cgroup = node.cgroup.clone();
    let _ = client;

    let [via_vip, direct] = interleaved(
        THROUGHPUT_ROUNDS,
        [&mut || iperf(&sns, &cns, VIP, secs), &mut || {
            iperf(&sns, &cns, server, secs)
        }],
    )?;
    println!(
        "pod-to-ClusterIP TCP throughput (iperf3, {secs} s, per-packet path in bpf_lxc; median of {THROUGHPUT_ROUNDS}):"
    );
    println!(
        "  to the ClusterIP             {:7.2} Gbit/s",
        via_vip / 1e9
    );
    println!("  baseline: to the backend IP  {:7.2} Gbit/s", direct / 1e9);
    println!(
        "  ratio {:.2}x   {}",
        via_vip / direct,
        goals::at_least(
            "pod to ClusterIP vs to the backend IP, throughput",
            via_vip / direct,
            goals::CLUSTER_IP_THROUGHPUT
        )
    );
    let rate_secs = 1.0;
    let [tc_rate, sock_rate, direct_rate] = interleaved(
        ROUNDS,
        [
            &mut || conn_rate(&cns, None, VIP, 80, rate_secs),
            &mut || conn_rate(&cns, Some(&cgroup), VIP, 80, rate_secs),
            &mut || conn_rate(&cns, None, server, 8080, rate_secs),
        ],
    )?;
    println!("pod-to-ClusterIP connection rate (connect, one line each way, close; median of 5):");
    println!("  ClusterIP, per-packet (bpf_lxc)   {tc_rate:9.0} conn/s");
    println!("  ClusterIP, socket LB (bpf_sock)   {sock_rate:9.0} conn/s");
    println!("  baseline: to the backend IP       {direct_rate:9.0} conn/s");
    for (what, rate) in [("per-packet", tc_rate), ("socket LB", sock_rate)] {
        println!(
            "  {what:<10} ratio {:.2}x   {}",
            rate / direct_rate,
            goals::at_least(
                &format!("pod to ClusterIP vs to the backend IP, connection rate ({what})"),
                rate / direct_rate,
                goals::CLUSTER_IP_CONN_RATE
            )
        );
    }

    // The iptables baseline: two plain pods, kube-proxy-style DNAT rules.
    let (pc, ps) = (Ipv4Addr::new(10, 250, 0, 2), Ipv4Addr::new(10, 250, 0, 3));
    let router = node.create_netns("plain-router");
    in_ns(
        &router,
        "ip",
        &["addr", "add", &format!("{PLAIN_GW}/32"), "dev", "lo"],
    )?;
    in_ns(&router, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    let plain_client = plain_pod(&node, &router, "plain-client", pc)?;
    let plain_server = plain_pod(&node, &router, "plain-server", ps)?;
    serial_server(&plain_server, 8080)?;
    println!("connection rate with N services installed (ours: BPF maps; baseline: iptables DNAT rules; median of 5):");
    let mut installed = 2u16;
    let mut first = None;
    let scales = scaled(&SCALES[..], &SCALES[..1]);
    let largest = *scales.last().expect("scales");
    for &n in scales {
        while usize::from(installed) < n {
            installed += 1;
            let i = usize::from(installed);
            let vip = Ipv4Addr::new(10, 100, (i / 250) as u8, (i % 250 + 1) as u8);
            service(&node, installed, vip, 80, server, 8080)?;
        }
        iptables_services(&router, n, ps)?;
        let [tc, sock, theirs] = interleaved(
            ROUNDS,
            [
                &mut || conn_rate(&cns, None, VIP, 80, rate_secs),
                &mut || conn_rate(&cns, Some(&cgroup), VIP, 80, rate_secs),
                &mut || conn_rate(&plain_client, None, VIP, 80, rate_secs),
            ],
        )?;
        let base = *first.get_or_insert(tc);
        println!(
            "  {n:>5} services   per-packet {tc:7.0} conn/s ({:.2}x of itself at {})   socket LB {sock:7.0}   iptables {theirs:7.0}   ratios {:.2}x / {:.2}x{}",
            tc / base,
            SCALES[0],
            tc / theirs,
            sock / theirs,
            if n == largest {
                format!(
                    "   per-packet {}; socket LB {}",
                    goals::at_least(
                        &format!("connection rate at {n} services vs iptables DNAT (per-packet)"),
                        tc / theirs,
                        goals::SERVICES_SCALE_CONN_RATE
                    ),
                    goals::at_least(
                        &format!("connection rate at {n} services vs iptables DNAT (socket LB)"),
                        sock / theirs,
                        goals::SERVICES_SCALE_CONN_RATE
                    )
                )
            } else {
                String::new()
            }
        );
    }
    drop(node);
    propagation()
}

/// `cilium service update` on node1 until each node's LB map names the new
/// backend.
fn propagation() -> anyhow::Result<()> {
    let mut cluster = Cluster::new(3, &[]);
    for node in &mut cluster.nodes {
        node.quiet = true;
        node.start_agent();
    }
    let mut samples = Vec::new();
    for round in 0..scaled(20u8, 2) {
        let backend = Ipv4Addr::new(10, 9, 0, round + 1);
        let t = Instant::now();
        service(&cluster.nodes[0], 7, VIP, 80, backend, 80)?;
        for node in &cluster.nodes {
            let map = datapath::PinnedMap::open_global(&node.bpffs(), abi::maps::LB4_BACKENDS)?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while !map
                .entries::<u32, abi::lb::Lb4Backend>()?
                .iter()
                .any(|(_, b)| b.address.ip() == backend && b.flags == abi::lb::BE_STATE_ACTIVE)
            {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "{} never got {backend}",
                    node.name
                );
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!("service update propagation (REST update on node1 until all 3 nodes' LB maps have the new backend, 20 updates):");
    latency_line("all 3 nodes updated", &mut samples);
    Ok(())
}
