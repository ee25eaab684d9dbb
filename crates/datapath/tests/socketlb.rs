//! Socket LB (bpf_sock) on a cgroup of the sandbox, driven by real socket
//! calls of a client process: connect() and sendmsg() to a frontend reach a
//! backend, getpeername() and recvfrom() still show the frontend, NodePort
//! is found through any node address, a service without backends fails
//! fast, processes outside the cgroup are left alone, a NodePort with
//! externalTrafficPolicy Local gives them its internal scope's backends,
//! HostPorts of one number but two protocols reach their own backends (and
//! one for hostIP 127.0.0.1 only through loopback, from the node's own
//! namespace), a second agent swaps its programs into the pinned links,
//! and each translation is written to cilium_events for Hubble.

mod common;

use abi::metrics::{DIR_EGRESS, REASON_LB_NO_BACKEND_SLOT};
use datapath::socketlb::{self, SocketLb};
use lb::{BackendState, Frontend, LoadBalancer, ServiceSpec, ServiceType};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::path::{Path, PathBuf};
use testsupport::client::{self, Placement, Proto};
use testsupport::node::LineServer;
use testsupport::Sandbox;

const VIP: Ipv4Addr = Ipv4Addr::new(172, 16, 16, 87);
const EMPTY_VIP: Ipv4Addr = Ipv4Addr::new(172, 16, 16, 88);
const NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 10);
const BACKEND: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn spec(id: u16, ip: Ipv4Addr, port: u16, kind: ServiceType, ports: &[u16]) -> ServiceSpec {
    spec_to(id, ip.into(), port, kind, BACKEND.into(), ports)
}

/// A service whose backends are `ports` of `backend`.
fn spec_to(
    id: u16,
    ip: IpAddr,
    port: u16,
    kind: ServiceType,
    backend: IpAddr,
    ports: &[u16],
) -> ServiceSpec {
    ServiceSpec {
        id,
        frontend: Frontend {
            ip,
            port,
            proto: abi::lb::PROTO_ANY,
            scope: abi::lb::LB_LOOKUP_SCOPE_EXT,
        },
        kind,
        backends: ports
            .iter()
            .map(|p| (backend, *p, BackendState::Active))
            .collect(),
        affinity_timeout: 0,
        ext_local: false,
        loopback: false,
    }
}

fn globals(sb: &Sandbox) -> PathBuf {
    sb.bpffs().join(abi::maps::GLOBALS_DIR)
}

fn attach(sb: &Sandbox) {
    let mut sock =
        SocketLb::load(&globals(sb), &datapath::MapSizes::default()).expect("load bpf_sock");
    sock.attach(&sb.bpffs(), &sb.cgroup())
        .expect("attach to the cgroup");
}

fn services(globals: &Path) {
    let mut lb = LoadBalancer::new();
    for s in [
        spec(1, VIP, 80, ServiceType::ClusterIP, &[8081, 8082]),
        spec(2, VIP, 53, ServiceType::ClusterIP, &[5353]),
        spec(
            3,
            Ipv4Addr::UNSPECIFIED,
            30080,
            ServiceType::NodePort,
            &[8082],
        ),
        spec(4, EMPTY_VIP, 80, ServiceType::ClusterIP, &[]),
    ] {
        let (up, _) = lb.upsert(&s).unwrap();
        datapath::lbmap::apply(globals, &up).unwrap();
    }
    datapath::PinnedMap::open(&globals.join(abi::maps::IPCACHE), abi::maps::IPCACHE)
        .unwrap()
        .put(
            &abi::ipcache::IpcacheKey::v4(NODE, 32),
            &abi::ipcache::RemoteEndpointInfo {
                sec_identity: abi::identity::HOST,
                ..Default::default()
            },
        )
        .unwrap();
}

fn udp_echo(name: &'static str) -> u16 {
    udp_echo_on(BACKEND.into(), 5353, name)
}

fn udp_echo_on(ip: IpAddr, port: u16, name: &'static str) -> u16 {
    let sock = UdpSocket::bind((ip, port)).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((_, from)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(format!("{name}\n").as_bytes(), from);
        }
    });
    port
}

fn in_cgroup(sb: &Sandbox, proto: Proto, ip: impl Into<IpAddr>, port: u16, n: u32) -> Vec<String> {
    let cg = sb.cgroup();
    client::run(
        Placement {
            netns: None,
            cgroup: Some(&cg),
        },
        proto,
        ip,
        port,
        n,
    )
}

/// A sandbox with bpf_sock attached, the services, and their backends:
/// TCP "a" on 8081, "b" on 8082, UDP "u" on 5353.
fn with_backends() -> (Sandbox, [LineServer; 2]) {
    let sb = Sandbox::enter();
    let here = Path::new("/proc/thread-self/ns/net");
    let a = LineServer::start(here, 8081, "a").unwrap();
    let b = LineServer::start(here, 8082, "b").unwrap();
    udp_echo("u");
    attach(&sb);
    services(&globals(&sb));
    (sb, [a, b])
}

#[test]
fn socket_calls_to_frontends_reach_backends_and_still_see_the_frontend() {
    let (sb, _servers) = with_backends();

    let lines = in_cgroup(&sb, Proto::Tcp, VIP, 80, 24);
    let mut seen = BTreeSet::new();
    for line in &lines {
        let rest = line
            .strip_prefix(&format!("peer={VIP}:80 reply="))
            .unwrap_or_else(|| panic!("getpeername must show the frontend: {line}"));
        seen.insert(rest.split(':').next().unwrap().to_owned());
    }
    assert_eq!(seen, BTreeSet::from(["a".into(), "b".into()]), "{lines:?}");

    assert_eq!(
        in_cgroup(&sb, Proto::Udp, VIP, 53, 2),
        vec![format!("peer={VIP}:53 reply=u"); 2],
        "recvfrom must show the frontend"
    );
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, NODE, 30080, 2),
        vec![format!("peer={NODE}:30080 reply=b: hello"); 2],
        "NodePort through a node address"
    );
    let rev = datapath::PinnedMap::open(
        &globals(&sb).join(abi::maps::LB4_REVERSE_SK),
        abi::maps::LB4_REVERSE_SK,
    )
    .unwrap();
    let entries = rev
        .entries::<abi::lb::Ipv4RevnatTuple, abi::lb::Ipv4RevnatEntry>()
        .unwrap();
    assert!(
        entries
            .iter()
            .any(|(k, v)| k.port.get() == 8081 && v.address == VIP.into() && v.port.get() == 80),
        "reverse entries: {entries:?}"
    );
}

/// The trace_sock_notify records of `cilium_events` after `f` ran.
fn sock_traces(sb: &Sandbox, f: impl FnOnce()) -> Vec<abi::events::TraceSockNotify> {
    use abi::Plain;
    let mut reader = datapath::events::EventReader::open(&sb.bpffs()).expect("cilium_events");
    f();
    let mut out = Vec::new();
    reader.poll(200, &mut |_, rec| {
        if let datapath::events::Record::Sample(raw) = rec {
            if raw.first() == Some(&abi::events::NOTIFY_TRACE_SOCK) {
                out.extend(abi::events::TraceSockNotify::from_bytes(raw));
            }
        }
    });
    out
}

#[test]
fn balanced_sockets_are_traced_before_and_after_translation() {
    use std::os::unix::fs::MetadataExt;
    let (sb, _servers) = with_backends();
    let traces = sock_traces(&sb, || {
        in_cgroup(&sb, Proto::Tcp, VIP, 80, 1);
    });
    let cgroup = std::fs::metadata(sb.cgroup()).unwrap().ino();
    let point = |p: u8| {
        traces
            .iter()
            .find(|t| t.xlate_point == p)
            .unwrap_or_else(|| panic!("xlate point {p} in {traces:?}"))
    };
    let pre = point(abi::events::XLATE_PRE_DIRECTION_FWD);
    assert_eq!(pre.dst_ip[..4], VIP.octets());
    assert_eq!({ pre.dst_port }, 80);
    assert_eq!(pre.l4_proto, abi::events::TRACE_SOCK_L4_TCP);
    assert_ne!({ pre.sock_cookie }, 0);
    assert_eq!({ pre.cgroup_id }, cgroup, "the client's cgroup");
    let post = point(abi::events::XLATE_POST_DIRECTION_FWD);
    assert_eq!(post.dst_ip[..4], BACKEND.octets());
    assert!([8081, 8082].contains(&{ post.dst_port }), "{post:?}");
    assert_eq!({ post.sock_cookie }, { pre.sock_cookie });
    // getpeername shows the frontend again: the reverse translation
    let rev = point(abi::events::XLATE_POST_DIRECTION_REV);
    assert_eq!(rev.dst_ip[..4], VIP.octets());
}

#[test]
fn a_local_nodeport_gives_the_clusters_clients_its_internal_backends() {
    let (sb, _servers) = with_backends();
    // 30090: only 8081 for outside clients, 8082 for the cluster's own
    let mut external = spec(
        5,
        Ipv4Addr::UNSPECIFIED,
        30090,
        ServiceType::NodePort,
        &[8081],
    );
    external.ext_local = true;
    let mut internal = spec(
        6,
        Ipv4Addr::UNSPECIFIED,
        30090,
        ServiceType::NodePort,
        &[8082],
    );
    internal.frontend.scope = abi::lb::LB_LOOKUP_SCOPE_INT;
    let mut lb = LoadBalancer::new();
    let (up, _) = lb.upsert(&external).unwrap();
    assert_eq!(
        up.put_services.last().unwrap().1.flags2 & abi::lb::SVC_FLAG_TWO_SCOPES,
        abi::lb::SVC_FLAG_TWO_SCOPES
    );
    datapath::lbmap::apply(&globals(&sb), &up).unwrap();
    let (up, _) = lb.upsert(&internal).unwrap();
    datapath::lbmap::apply(&globals(&sb), &up).unwrap();
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, NODE, 30090, 3),
        vec![format!("peer={NODE}:30090 reply=b: hello"); 3]
    );
}

#[test]
fn host_ports_are_told_apart_by_protocol_and_loopback_ones_by_address() {
    let (sb, _servers) = with_backends();
    // this namespace is the node's own, as the agent writes it
    let cookie = socketlb::own_netns_cookie().unwrap();
    datapath::maps::RuntimeConfig::open(&sb.bpffs())
        .unwrap()
        .set_host_netns_cookie(cookie)
        .unwrap();
    let mut tcp = spec(7, NODE, 5432, ServiceType::HostPort, &[8081]);
    tcp.frontend.proto = 6;
    let mut udp = spec(8, NODE, 5432, ServiceType::HostPort, &[5353]);
    udp.frontend.proto = 17;
    let mut lo = spec(
        9,
        Ipv4Addr::UNSPECIFIED,
        5433,
        ServiceType::HostPort,
        &[8082],
    );
    lo.frontend.proto = 6;
    lo.loopback = true;
    let mut lb = LoadBalancer::new();
    for s in [&tcp, &udp, &lo] {
        let (up, _) = lb.upsert(s).unwrap();
        datapath::lbmap::apply(&globals(&sb), &up).unwrap();
    }
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, NODE, 5432, 2),
        vec![format!("peer={NODE}:5432 reply=a: hello"); 2]
    );
    assert_eq!(
        in_cgroup(&sb, Proto::Udp, NODE, 5432, 2),
        vec![format!("peer={NODE}:5432 reply=u"); 2]
    );
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, Ipv4Addr::LOCALHOST, 5433, 2),
        vec!["peer=127.0.0.1:5433 reply=b: hello"; 2]
    );
    // hostIP 127.0.0.1 is not reachable through the node's address
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, NODE, 5433, 1),
        vec!["error=ENETUNREACH"]
    );
}

#[test]
fn a_service_without_backends_fails_fast() {
    let sb = Sandbox::enter();
    attach(&sb);
    services(&globals(&sb));
    let t = std::time::Instant::now();
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, EMPTY_VIP, 80, 1),
        vec!["error=EHOSTUNREACH"]
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(2));
    let metrics =
        datapath::PinnedMap::open(&globals(&sb).join(abi::maps::METRICS), abi::maps::METRICS)
            .unwrap();
    let counted: u64 = metrics
        .percpu_entries::<abi::metrics::MetricsKey, abi::metrics::MetricsValue>()
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.reason == REASON_LB_NO_BACKEND_SLOT && k.dir == DIR_EGRESS)
        .flat_map(|(_, v)| v)
        .map(|v| v.count)
        .sum();
    assert_eq!(counted, 1);
}

#[test]
fn processes_outside_the_cgroup_are_not_balanced() {
    let sb = Sandbox::enter();
    let here = Path::new("/proc/thread-self/ns/net");
    let _a = LineServer::start(here, 8081, "a").unwrap();
    attach(&sb);
    services(&globals(&sb));
    // No route to the VIP in the sandbox: untranslated, connect() fails.
    assert_eq!(
        client::run(Placement::default(), Proto::Tcp, VIP, 80, 1),
        vec!["error=ENETUNREACH"]
    );
}

#[test]
fn a_new_agent_swaps_its_programs_into_the_pinned_links() {
    let sb = Sandbox::enter();
    let here = Path::new("/proc/thread-self/ns/net");
    let _a = LineServer::start(here, 8081, "a").unwrap();
    let _b = LineServer::start(here, 8082, "b").unwrap();
    attach(&sb);
    services(&globals(&sb));
    let links = socketlb::links_dir(&sb.bpffs());
    let before: Vec<_> = std::fs::read_dir(&links)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before.len(), socketlb::PROGRAMS.len());
    attach(&sb);
    let after: Vec<_> = std::fs::read_dir(&links)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before.len(), after.len());
    for line in in_cgroup(&sb, Proto::Tcp, VIP, 80, 4) {
        assert!(line.starts_with(&format!("peer={VIP}:80 reply=")), "{line}");
    }
    socketlb::detach(&sb.bpffs());
    assert!(!links.exists());
    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, VIP, 80, 1),
        vec!["error=ENETUNREACH"]
    );
}

#[test]
fn loading_bpf_sock_keeps_the_nodes_resized_maps() {
    let sb = Sandbox::enter();
    let sizes = datapath::MapSizes {
        ct_tcp: 4096,
        ct_any: 4096,
        ..Default::default()
    };
    let _dp = datapath::Datapath::init(&sb.bpffs(), &sizes).unwrap();
    let ct = || {
        datapath::PinnedMap::open(
            &globals(&sb).join(abi::maps::CT4_GLOBAL),
            abi::maps::CT4_GLOBAL,
        )
        .unwrap()
    };
    let key = abi::ct::Ipv4CtTuple {
        nexthdr: 6,
        ..Default::default()
    };
    ct().put(&key, &abi::ct::CtEntry::default()).unwrap();
    SocketLb::load(&globals(&sb), &sizes).unwrap();
    assert!(
        ct().get::<_, abi::ct::CtEntry>(&key).unwrap().is_some(),
        "the CT map was replaced"
    );
}

const VIP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 0x1);

#[test]
fn ipv6_sockets_reach_ipv6_frontends_and_ipv4_mapped_ones_the_ipv4_services() {
    let sb = Sandbox::enter();
    let here = Path::new("/proc/thread-self/ns/net");
    let _a = LineServer::start(here, 8081, "a").unwrap();
    let _b = LineServer::start(here, 8082, "b").unwrap();
    let _c = LineServer::start_on(here, Ipv6Addr::LOCALHOST.into(), 8083, "c").unwrap();
    udp_echo("u");
    udp_echo_on(Ipv6Addr::LOCALHOST.into(), 5354, "u6");
    let sizes = datapath::MapSizes {
        ipv6: true,
        ..Default::default()
    };
    let mut sock = SocketLb::load(&globals(&sb), &sizes).expect("load the dual-stack bpf_sock");
    sock.attach(&sb.bpffs(), &sb.cgroup()).expect("attach");
    services(&globals(&sb));
    let mut lb = LoadBalancer::new();
    let local6 = IpAddr::from(Ipv6Addr::LOCALHOST);
    for s in [
        spec_to(10, VIP6.into(), 80, ServiceType::ClusterIP, local6, &[8083]),
        spec_to(11, VIP6.into(), 53, ServiceType::ClusterIP, local6, &[5354]),
    ] {
        let (up, _) = lb.upsert(&s).unwrap();
        datapath::lbmap::apply(&globals(&sb), &up).unwrap();
    }

    assert_eq!(
        in_cgroup(&sb, Proto::Tcp, VIP6, 80, 3),
        vec![format!("peer={VIP6}:80 reply=c: hello"); 3],
        "connect6 balanced, getpeername6 shows the frontend"
    );
    assert_eq!(
        in_cgroup(&sb, Proto::Udp, VIP6, 53, 2),
        vec![format!("peer={VIP6}:53 reply=u6"); 2],
        "sendmsg6 balanced, recvmsg6 shows the frontend"
    );
    // a dual-stack socket reaching an IPv4 service keeps its mapped form
    let mapped = VIP.to_ipv6_mapped();
    let mut seen = BTreeSet::new();
    for line in in_cgroup(&sb, Proto::Tcp, mapped, 80, 16) {
        let rest = line
            .strip_prefix(&format!("peer={mapped}:80 reply="))
            .unwrap_or_else(|| panic!("{line}"));
        seen.insert(rest.split(':').next().unwrap().to_owned());
    }
    assert_eq!(seen, BTreeSet::from(["a".into(), "b".into()]));

    let rev = datapath::PinnedMap::open(
        &globals(&sb).join(abi::maps::LB6_REVERSE_SK),
        abi::maps::LB6_REVERSE_SK,
    )
    .unwrap();
    let entries = rev
        .entries::<abi::lb::Ipv6RevnatTuple, abi::lb::Ipv6RevnatEntry>()
        .unwrap();
    assert!(
        entries
            .iter()
            .any(|(k, v)| k.port.get() == 8083 && v.address == VIP6.into() && v.port.get() == 80),
        "reverse entries: {entries:?}"
    );

    // a node without IPv6 drops the IPv6 hooks' links
    let links = socketlb::links_dir(&sb.bpffs());
    let count = || std::fs::read_dir(&links).unwrap().count();
    assert_eq!(
        count(),
        socketlb::PROGRAMS.len() + socketlb::PROGRAMS_V6.len()
    );
    attach(&sb);
    assert_eq!(count(), socketlb::PROGRAMS.len());
}
