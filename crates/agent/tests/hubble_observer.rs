//! The agent's Hubble server on a Unix socket of its own, read by a client
//! generated from our .proto files: every Observer RPC, the peer service
//! and gRPC health, GetFlows' number, first, follow, since and until, its
//! filters (whitelist and blacklist, OR across filters, AND within one),
//! and the ring's capacity; then the TCP server with mutual TLS refusing
//! clients without a certificate of its CA. Records are made as the
//! datapath writes them; no kernel is needed (the TCP test runs in a
//! network namespace of its own).

use agent::hubble::{
    serve_unix, Capacity, NodeSource, Observer, PeerService, Reach, Resolve, Services,
};
use controlplane::node::{Node, NodeAddress};
use hubble::flow::{self, Flow, FlowFilter};
use hubble::observer::{get_flows_response::ResponseTypes, observer_client::ObserverClient};
use hubble::observer::{GetFlowsRequest, GetFlowsResponse};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

/// Pods 10.0.1.x are in `default`, 10.0.2.x in `prod`; 10.96.0.10:53 is
/// kube-dns.
struct Lab;

impl Resolve for Lab {
    fn endpoint(&self, ip: IpAddr, identity: u32) -> flow::Endpoint {
        let IpAddr::V4(v4) = ip else {
            return flow::Endpoint::default();
        };
        let [_, _, subnet, host] = v4.octets();
        let namespace = match subnet {
            1 => "default",
            2 => "prod",
            _ => {
                return flow::Endpoint {
                    identity,
                    ..Default::default()
                }
            }
        };
        flow::Endpoint {
            id: if subnet == 1 { u32::from(host) } else { 0 },
            identity: if identity != 0 {
                identity
            } else {
                1000 + u32::from(host)
            },
            namespace: namespace.into(),
            pod_name: format!("pod-{host}"),
            labels: vec![format!("k8s:app=app-{host}")],
            ..Default::default()
        }
    }

    fn service(&self, ip: IpAddr, port: u16) -> Option<flow::Service> {
        (ip.to_string() == "10.96.0.10" && port == 53).then(|| flow::Service {
            name: "kube-dns".into(),
            namespace: "kube-system".into(),
        })
    }

    fn cgroup_pod(&self, _: u64) -> Option<IpAddr> {
        None
    }
}

fn frame(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, tcp_flags: u8) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 0x08;
    f[14] = 0x45;
    f[14 + 9] = proto;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[34 + 12] = 0x50;
    f[34 + 13] = tcp_flags;
    f
}

/// A trace record (`trace_notify` v1) at `point` with CT `reason`.
fn trace(point: u8, reason: u8, source_ep: u16, frame: &[u8]) -> Vec<u8> {
    let mut rec = vec![0u8; 48];
    rec[0] = 4;
    rec[1] = point;
    rec[2..4].copy_from_slice(&source_ep.to_ne_bytes());
    rec[12..14].copy_from_slice(&(frame.len() as u16).to_ne_bytes());
    rec[14..16].copy_from_slice(&1u16.to_ne_bytes());
    rec[26] = reason;
    rec.extend_from_slice(frame);
    rec
}

/// A drop record (`drop_notify`) with `code`.
fn drop(code: u8, source_ep: u16, frame: &[u8]) -> Vec<u8> {
    let mut rec = vec![0u8; 36];
    rec[0] = 1;
    rec[1] = code;
    rec[2..4].copy_from_slice(&source_ep.to_ne_bytes());
    rec[12..14].copy_from_slice(&(frame.len() as u16).to_ne_bytes());
    rec.extend_from_slice(frame);
    rec
}

/// The cluster's nodes, changed by the test.
struct Cluster {
    nodes: std::sync::Mutex<Vec<Node>>,
    changed: tokio::sync::watch::Sender<u64>,
}

fn node(name: &str, ip: &str) -> Node {
    Node {
        name: name.into(),
        cluster: "default".into(),
        addresses: vec![NodeAddress {
            kind: "InternalIP".into(),
            ip: ip.into(),
        }],
        ipv4_alloc_cidr: None,
        ipv6_alloc_cidr: None,
        health_ipv4: None,
        health_ipv6: None,
        cluster_id: 0,
        source: String::new(),
    }
}

impl Cluster {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            nodes: std::sync::Mutex::new(vec![
                node("node-a", "198.18.0.11"),
                node("node-b", "198.18.0.12"),
            ]),
            changed: tokio::sync::watch::Sender::new(0),
        })
    }

    fn set(&self, nodes: Vec<Node>) {
        *self.nodes.lock().unwrap() = nodes;
        self.changed.send_modify(|n| *n += 1);
    }
}

impl NodeSource for Cluster {
    fn all(&self) -> Vec<Node> {
        self.nodes.lock().unwrap().clone()
    }
    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

struct Server {
    observer: Arc<Observer>,
    services: Services,
    cluster: Arc<Cluster>,
    tasks: controlplane::tasks::Tasks,
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(capacity: i64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("hubble.sock");
        let observer = Arc::new(Observer::new(
            Capacity::new(capacity).unwrap(),
            "default",
            "node-a",
            Arc::new(Lab),
        ));
        let tasks = controlplane::tasks::Tasks::default();
        let cluster = Cluster::new();
        let reach = Reach {
            port: Some(4244),
            tls: true,
        };
        let services = Services {
            observer: Arc::clone(&observer),
            peer: PeerService::new(cluster.clone(), reach, tasks.clone()),
        };
        tokio::spawn(serve_unix(services.clone(), socket.clone(), tasks.clone()));
        for _ in 0..200 {
            if socket.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Self {
            observer,
            services,
            cluster,
            tasks,
            socket,
            _dir: dir,
        }
    }

    fn client(&self) -> ObserverClient<Channel> {
        ObserverClient::new(hubble::client::unix_channel(&self.socket))
    }

    /// The flows: client-1 -> server (prod) TCP SYN to 80, its reply, a
    /// policy drop of client-2 -> pod-7 port 5432, a UDP query to kube-dns.
    fn traffic(&self) {
        let o = &self.observer;
        o.sample(&trace(
            3,
            0,
            1,
            &frame([10, 0, 1, 1], [10, 0, 2, 9], 6, 40001, 80, 0x02),
        ));
        o.sample(&trace(
            0,
            2,
            1,
            &frame([10, 0, 2, 9], [10, 0, 1, 1], 6, 80, 40001, 0x12),
        ));
        o.sample(&drop(
            133,
            2,
            &frame([10, 0, 1, 2], [10, 0, 2, 7], 6, 40002, 5432, 0x02),
        ));
        o.sample(&trace(
            3,
            0,
            2,
            &frame([10, 0, 1, 2], [10, 96, 0, 10], 17, 40003, 53, 0),
        ));
    }

    fn stop(self) {
        self.tasks.stop();
    }
}

async fn collect(
    client: &mut ObserverClient<Channel>,
    req: GetFlowsRequest,
) -> Vec<GetFlowsResponse> {
    let mut stream = client.get_flows(req).await.expect("GetFlows").into_inner();
    let mut out = Vec::new();
    while let Some(r) = stream.message().await.expect("stream") {
        out.push(r);
    }
    out
}

fn flows(rs: &[GetFlowsResponse]) -> Vec<&Flow> {
    rs.iter()
        .filter_map(|r| match &r.response_types {
            Some(ResponseTypes::Flow(f)) => Some(f),
            _ => None,
        })
        .collect()
}

fn ends(f: &Flow) -> (String, String) {
    let name = |e: &Option<flow::Endpoint>| {
        e.as_ref()
            .map(|e| format!("{}/{}", e.namespace, e.pod_name))
            .unwrap_or_default()
    };
    (name(&f.source), name(&f.destination))
}

async fn filtered(
    client: &mut ObserverClient<Channel>,
    whitelist: Vec<FlowFilter>,
    blacklist: Vec<FlowFilter>,
) -> Vec<(String, String)> {
    let rs = collect(
        client,
        GetFlowsRequest {
            whitelist,
            blacklist,
            ..Default::default()
        },
    )
    .await;
    flows(&rs).into_iter().map(ends).collect()
}

fn pair(s: &str, d: &str) -> (String, String) {
    (s.to_owned(), d.to_owned())
}

#[tokio::test]
async fn get_flows_reads_the_ring_as_cilium_does() {
    let server = Server::start(4095).await;
    server.traffic();
    let mut c = server.client();

    // everything kept, oldest first, each flow as Cilium fills it
    let all = collect(&mut c, GetFlowsRequest::default()).await;
    let all_flows = flows(&all);
    assert_eq!(all_flows.len(), 4);
    assert!(all
        .iter()
        .all(|r| r.node_name == "node-a" && r.time.is_some()));
    let (syn, reply, denied, dns) = (all_flows[0], all_flows[1], all_flows[2], all_flows[3]);
    assert_eq!(ends(syn), pair("default/pod-1", "prod/pod-9"));
    assert_eq!(syn.is_reply, Some(false));
    assert_eq!(reply.is_reply, Some(true));
    assert_eq!(
        reply.trace_observation_point,
        flow::TraceObservationPoint::ToEndpoint as i32
    );
    assert_eq!(denied.verdict, flow::Verdict::Dropped as i32);
    assert_eq!(
        denied.drop_reason_desc,
        flow::DropReason::PolicyDenied as i32
    );
    assert_eq!(ends(denied), pair("default/pod-2", "prod/pod-7"));
    assert_eq!(
        dns.destination_service,
        Some(flow::Service {
            name: "kube-dns".into(),
            namespace: "kube-system".into()
        })
    );
    assert!(syn.uuid.len() == 36 && syn.uuid != reply.uuid);

    // number: the last ones; first: the oldest ones
    let last = collect(
        &mut c,
        GetFlowsRequest {
            number: 2,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(flows(&last)[0].uuid, denied.uuid);
    let first = collect(
        &mut c,
        GetFlowsRequest {
            number: 1,
            first: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(flows(&first).len(), 1);
    assert_eq!(flows(&first)[0].uuid, syn.uuid);

    // since/until: after the last flow there is nothing; before the first, nothing
    let t_last = all.last().unwrap().time.unwrap();
    let none_after = collect(
        &mut c,
        GetFlowsRequest {
            since: Some(prost_types::Timestamp {
                seconds: t_last.seconds + 1,
                nanos: 0,
            }),
            ..Default::default()
        },
    )
    .await;
    assert!(flows(&none_after).is_empty());
    let t_first = all[0].time.unwrap();
    let none_before = collect(
        &mut c,
        GetFlowsRequest {
            until: Some(prost_types::Timestamp {
                seconds: t_first.seconds - 1,
                nanos: 0,
            }),
            ..Default::default()
        },
    )
    .await;
    assert!(flows(&none_before).is_empty());

    // first with follow is refused
    let err = c
        .get_flows(GetFlowsRequest {
            first: true,
            follow: true,
            ..Default::default()
        })
        .await
        .expect_err("first and follow");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    server.stop();
}

#[tokio::test]
async fn filters_combine_as_cilium_s() {
    let server = Server::start(4095).await;
    server.traffic();
    let mut c = server.client();
    let ff = FlowFilter::default;

    // AND within a filter
    let got = filtered(
        &mut c,
        vec![FlowFilter {
            source_pod: vec!["default/pod-2".into()],
            verdict: vec![flow::Verdict::Dropped as i32],
            ..ff()
        }],
        vec![],
    )
    .await;
    assert_eq!(got, [pair("default/pod-2", "prod/pod-7")]);
    // OR across filters
    let got = filtered(
        &mut c,
        vec![
            FlowFilter {
                destination_port: vec!["5432".into()],
                ..ff()
            },
            FlowFilter {
                destination_service: vec!["kube-system/kube-dns".into()],
                ..ff()
            },
        ],
        vec![],
    )
    .await;
    assert_eq!(got.len(), 2);
    // whitelist and blacklist together
    let got = filtered(
        &mut c,
        vec![FlowFilter {
            source_ip: vec!["10.0.1.0/24".into()],
            ..ff()
        }],
        vec![FlowFilter {
            protocol: vec!["udp".into()],
            ..ff()
        }],
    )
    .await;
    assert_eq!(got.len(), 2, "pod-1's SYN and pod-2's drop: {got:?}");

    // each field on its own
    let cases: Vec<(FlowFilter, usize)> = vec![
        (
            FlowFilter {
                destination_ip: vec!["10.0.2.9".into()],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                destination_pod: vec!["prod/".into()],
                ..ff()
            },
            2,
        ),
        (
            FlowFilter {
                source_label: vec!["app=app-9".into()],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                destination_identity: vec![1009],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                source_identity: vec![1009],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                verdict: vec![flow::Verdict::Forwarded as i32],
                ..ff()
            },
            3,
        ),
        (
            FlowFilter {
                drop_reason_desc: vec![flow::DropReason::PolicyDenied as i32],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                event_type: vec![flow::EventTypeFilter {
                    r#type: 4,
                    ..Default::default()
                }],
                ..ff()
            },
            3,
        ),
        (
            FlowFilter {
                protocol: vec!["tcp".into()],
                ..ff()
            },
            3,
        ),
        (
            FlowFilter {
                source_port: vec!["80".into()],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                tcp_flags: vec![flow::TcpFlags {
                    syn: true,
                    ack: true,
                    ..Default::default()
                }],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                reply: vec![true],
                ..ff()
            },
            1,
        ),
        (
            FlowFilter {
                reply: vec![false],
                ..ff()
            },
            3,
        ),
        (
            FlowFilter {
                node_name: vec!["node-*".into()],
                ..ff()
            },
            4,
        ),
        (
            FlowFilter {
                node_name: vec!["other".into()],
                ..ff()
            },
            0,
        ),
        (
            FlowFilter {
                traffic_direction: vec![flow::TrafficDirection::Egress as i32],
                ..ff()
            },
            4,
        ),
        (
            FlowFilter {
                ip_version: vec![flow::IpVersion::IPv4 as i32],
                ..ff()
            },
            4,
        ),
        (
            FlowFilter {
                source_fqdn: vec!["*.example.com".into()],
                ..ff()
            },
            0,
        ),
        (
            FlowFilter {
                http_method: vec!["GET".into()],
                ..ff()
            },
            0,
        ),
    ];
    for (filter, want) in cases {
        let got = filtered(&mut c, vec![filter.clone()], vec![]).await;
        assert_eq!(got.len(), want, "{filter:?}: {got:?}");
    }
    // a value that cannot be read is refused, naming the field
    let err = c
        .get_flows(GetFlowsRequest {
            whitelist: vec![FlowFilter {
                source_ip: vec!["not-an-ip".into()],
                ..ff()
            }],
            ..Default::default()
        })
        .await
        .expect_err("bad filter");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("source_ip"), "{}", err.message());
    server.stop();
}

#[tokio::test]
async fn follow_streams_new_flows_and_the_ring_keeps_its_capacity() {
    let server = Server::start(7).await;
    let mut c = server.client();
    let mut stream = c
        .get_flows(GetFlowsRequest {
            follow: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    server.traffic();
    for _ in 0..4 {
        let r = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .expect("a followed flow in time")
            .unwrap()
            .unwrap();
        assert!(matches!(r.response_types, Some(ResponseTypes::Flow(_))));
    }

    // 20 flows into a ring of 7: the oldest 13 are gone
    for _ in 0..5 {
        server.traffic();
    }
    let st = c
        .server_status(hubble::observer::ServerStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!((st.num_flows, st.max_flows, st.seen_flows), (7, 7, 24));
    assert!(st.version.starts_with("cilium v"));
    let all = collect(&mut c, GetFlowsRequest::default()).await;
    assert_eq!(flows(&all).len(), 7);
    server.stop();
}

#[tokio::test]
async fn nodes_namespaces_agent_debug_events_and_health_answer() {
    let server = Server::start(4095).await;
    server.traffic();
    server.observer.agent(
        controlplane::AgentNotify::PolicyUpdated,
        &serde_json::json!({"revision": 3, "labels": ["k8s:a=b"], "rule_count": 1}),
    );
    let mut c = server.client();
    let nodes = c
        .get_nodes(hubble::observer::GetNodesRequest {})
        .await
        .unwrap()
        .into_inner()
        .nodes;
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].name, "node-a");
    assert_eq!(
        nodes[0].state,
        hubble::relay::NodeState::NodeConnected as i32
    );
    assert_eq!(nodes[0].seen_flows, 4);

    let ns: Vec<String> = c
        .get_namespaces(hubble::observer::GetNamespacesRequest {})
        .await
        .unwrap()
        .into_inner()
        .namespaces
        .into_iter()
        .map(|n| n.namespace)
        .collect();
    assert_eq!(ns, ["default", "prod"]);

    let mut agent = c
        .get_agent_events(hubble::observer::GetAgentEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ev = agent.message().await.unwrap().expect("one agent event");
    let ev = ev.agent_event.unwrap();
    assert_eq!(ev.r#type, flow::AgentEventType::PolicyUpdated as i32);
    assert!(agent.message().await.unwrap().is_none());

    let mut debug = c
        .get_debug_events(hubble::observer::GetDebugEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(debug.message().await.unwrap().is_none(), "no debug events");

    let mut health = hubble::health::health_client::HealthClient::new(
        hubble::client::unix_channel(&server.socket),
    );
    let st = health
        .check(hubble::health::HealthCheckRequest {
            service: hubble::OBSERVER_HEALTH_NAME.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        st.status,
        hubble::health::health_check_response::ServingStatus::Serving as i32
    );
    server.stop();
}

#[tokio::test]
async fn peers_are_every_node_then_their_changes() {
    use hubble::peer::{peer_client::PeerClient, ChangeNotificationType as T, NotifyRequest};
    let server = Server::start(4095).await;
    let mut peers = PeerClient::new(hubble::client::unix_channel(&server.socket))
        .notify(NotifyRequest {})
        .await
        .unwrap()
        .into_inner();
    type Seen = (String, String, i32, Option<String>);
    async fn next(peers: &mut tonic::Streaming<hubble::peer::ChangeNotification>) -> Seen {
        let n = tokio::time::timeout(Duration::from_secs(5), peers.message())
            .await
            .expect("a notification in time")
            .unwrap()
            .unwrap();
        (n.name, n.address, n.r#type, n.tls.map(|t| t.server_name))
    }
    assert_eq!(
        next(&mut peers).await,
        (
            "node-a".into(),
            "198.18.0.11:4244".into(),
            T::PeerAdded as i32,
            Some("node-a.default.hubble-grpc.cilium.io".into())
        )
    );
    assert_eq!(next(&mut peers).await.0, "node-b");
    server.cluster.set(vec![
        node("node-a", "198.18.0.11"),
        node("node-c", "198.18.0.13"),
    ]);
    assert_eq!(next(&mut peers).await.0.as_str(), "node-b");
    let added = next(&mut peers).await;
    assert_eq!((added.0.as_str(), added.2), ("node-c", T::PeerAdded as i32));
    server.stop();
}

/// A CA, its server certificate for node-a's Hubble name, a client
/// certificate it signed, and one another CA signed.
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Self {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, cert: &rcgen::Certificate, key: &KeyPair| {
            std::fs::write(dir.path().join(format!("{name}.crt")), cert.pem()).unwrap();
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem()).unwrap();
        };
        let ca = |name: &str| {
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name.push(DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let cert = p.clone().self_signed(&key).unwrap();
            write(name, &cert, &key);
            Issuer::new(p, key)
        };
        let leaf = |name: &str, sans: Vec<String>, issuer: &Issuer<'_, KeyPair>| {
            let mut p = CertificateParams::new(sans).unwrap();
            p.distinguished_name.push(DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, issuer).unwrap();
            write(name, &cert, &key);
        };
        let hubble_ca = ca("hubble-ca");
        let other_ca = ca("other-ca");
        leaf(
            "server",
            vec!["*.default.hubble-grpc.cilium.io".into()],
            &hubble_ca,
        );
        leaf("relay", vec!["*.hubble-relay.cilium.io".into()], &hubble_ca);
        leaf(
            "stranger",
            vec!["*.hubble-relay.cilium.io".into()],
            &other_ca,
        );
        Self { dir }
    }

    fn path(&self, file: &str) -> std::path::PathBuf {
        self.dir.path().join(file)
    }

    /// A channel to `addr` trusting the Hubble CA, as `client` (none: no
    /// certificate).
    fn channel(&self, addr: std::net::SocketAddr, client: Option<&str>) -> Channel {
        let (cert, key) = client
            .map(|c| {
                (
                    self.path(&format!("{c}.crt")),
                    self.path(&format!("{c}.key")),
                )
            })
            .unzip();
        let config = hubble::tls::client_config(
            &[self.path("hubble-ca.crt")],
            cert.as_deref().zip(key.as_deref()),
        )
        .unwrap();
        hubble::client::Target::tls(
            addr.to_string(),
            "node-a.default.hubble-grpc.cilium.io",
            config,
        )
        .unwrap()
        .lazy()
    }
}

async fn status_over(
    channel: Channel,
) -> Result<hubble::observer::ServerStatusResponse, tonic::Status> {
    ObserverClient::new(channel)
        .server_status(hubble::observer::ServerStatusRequest {})
        .await
        .map(|r| r.into_inner())
}

#[tokio::test]
async fn the_tcp_server_takes_only_clients_its_ca_signed() {
    let _netns = testsupport::Sandbox::enter();
    let server = Server::start(4095).await;
    let certs = Certs::new();
    let addr: std::net::SocketAddr = "127.0.0.1:4244".parse().unwrap();
    let tls = agent::hubble::TlsFiles {
        cert: certs.path("server.crt"),
        key: certs.path("server.key"),
        client_cas: vec![certs.path("hubble-ca.crt")],
    };
    tokio::spawn(agent::hubble::serve_tcp(
        server.services.clone(),
        addr,
        Some(tls),
        server.tasks.clone(),
    ));
    server.traffic();
    let mut answered = None;
    for _ in 0..100 {
        match status_over(certs.channel(addr, Some("relay"))).await {
            Ok(st) => {
                answered = Some(st);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let st = answered.expect("a client with the CA's certificate is served");
    assert_eq!(st.seen_flows, 4);
    for refused in [None, Some("stranger")] {
        let err = status_over(certs.channel(addr, refused))
            .await
            .expect_err("refused");
        // the server's TLS alert, seen by the client at its first call
        let why = format!("{err:?}");
        assert!(why.contains("received fatal alert"), "{refused:?}: {why}");
    }
    server.stop();
}
