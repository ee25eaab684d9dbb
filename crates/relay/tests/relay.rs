//! Relay against three Hubble servers of its own making (in the test's
//! network namespace, with the chart's mutual TLS): the peer service
//! names them, Relay merges their flows in time order, counts who is
//! connected, notices a node that goes away and takes it back when it
//! returns, and reaches no node whose certificate another CA signed.

use hubble::client::Target;
use hubble::observer::{
    self as pb, get_flows_response::ResponseTypes, observer_client::ObserverClient,
};
use hubble::peer::{ChangeNotification, ChangeNotificationType};
use hubble::relay::NodeState;
use hubble_relay::config::{Config, TlsFiles};
use kubeplane::pki::HubblePki;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

const RELAY: &str = "127.0.0.1:4245";
const FLOWS_PER_NODE: u64 = 5;

type Stream<T> = Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

/// A node's Hubble server with flows at times that interleave with the
/// other nodes' (node `i`'s flow `j` at second 3j+i).
#[derive(Clone)]
struct FakeNode {
    index: i64,
}

impl FakeNode {
    fn name(&self) -> String {
        format!("node{}", self.index)
    }

    fn flows(&self) -> Vec<pb::GetFlowsResponse> {
        (0..FLOWS_PER_NODE as i64)
            .map(|j| {
                let time = prost_types::Timestamp {
                    seconds: 1_700_000_000 + 3 * j + self.index,
                    nanos: 0,
                };
                pb::GetFlowsResponse {
                    node_name: self.name(),
                    time: Some(time),
                    response_types: Some(ResponseTypes::Flow(hubble::flow::Flow {
                        time: Some(time),
                        node_name: self.name(),
                        ..Default::default()
                    })),
                }
            })
            .collect()
    }
}

#[tonic::async_trait]
impl pb::observer_server::Observer for FakeNode {
    type GetFlowsStream = Stream<pb::GetFlowsResponse>;
    type GetAgentEventsStream = Stream<pb::GetAgentEventsResponse>;
    type GetDebugEventsStream = Stream<pb::GetDebugEventsResponse>;

    async fn get_flows(
        &self,
        req: Request<pb::GetFlowsRequest>,
    ) -> Result<Response<Self::GetFlowsStream>, Status> {
        let req = req.into_inner();
        let mut flows = self.flows();
        if req.number > 0 {
            flows.drain(..flows.len().saturating_sub(req.number as usize));
        }
        let sent = futures::stream::iter(flows.into_iter().map(Ok));
        if req.follow {
            return Ok(Response::new(Box::pin(futures::StreamExt::chain(
                sent,
                futures::stream::pending(),
            ))));
        }
        Ok(Response::new(Box::pin(sent)))
    }
    async fn get_agent_events(
        &self,
        _: Request<pb::GetAgentEventsRequest>,
    ) -> Result<Response<Self::GetAgentEventsStream>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn get_debug_events(
        &self,
        _: Request<pb::GetDebugEventsRequest>,
    ) -> Result<Response<Self::GetDebugEventsStream>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn get_nodes(
        &self,
        _: Request<pb::GetNodesRequest>,
    ) -> Result<Response<pb::GetNodesResponse>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn get_namespaces(
        &self,
        _: Request<pb::GetNamespacesRequest>,
    ) -> Result<Response<pb::GetNamespacesResponse>, Status> {
        let namespaces = ["default".to_owned(), format!("ns-{}", self.name())]
            .into_iter()
            .map(|namespace| pb::Namespace {
                cluster: "default".into(),
                namespace,
            })
            .collect();
        Ok(Response::new(pb::GetNamespacesResponse { namespaces }))
    }
    async fn server_status(
        &self,
        _: Request<pb::ServerStatusRequest>,
    ) -> Result<Response<pb::ServerStatusResponse>, Status> {
        Ok(Response::new(pb::ServerStatusResponse {
            num_flows: FLOWS_PER_NODE,
            max_flows: 4095,
            seen_flows: FLOWS_PER_NODE,
            uptime_ns: self.index as u64,
            version: "cilium fake".into(),
            ..Default::default()
        }))
    }
}

#[derive(Clone)]
struct Healthy;

#[tonic::async_trait]
impl hubble::health::health_server::Health for Healthy {
    type WatchStream = Stream<hubble::health::HealthCheckResponse>;
    async fn check(
        &self,
        _: Request<hubble::health::HealthCheckRequest>,
    ) -> Result<Response<hubble::health::HealthCheckResponse>, Status> {
        Ok(Response::new(hubble::health::HealthCheckResponse {
            status: 1,
        }))
    }
    async fn watch(
        &self,
        _: Request<hubble::health::HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let once =
            futures::stream::once(async { Ok(hubble::health::HealthCheckResponse { status: 1 }) });
        Ok(Response::new(Box::pin(futures::StreamExt::chain(
            once,
            futures::stream::pending(),
        ))))
    }
}

/// A node served on a thread and runtime of its own, so stopping it
/// closes every connection to it as a killed agent's do.
struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(node: FakeNode, addr: String, pki: &HubblePki, client_ca: std::path::PathBuf) -> Self {
        let files = pki.server();
        let tls = hubble::tls::server_config(&files.cert, &files.key, &[client_ca]).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
                ready.send(()).unwrap();
                let incoming = hubble::tls::incoming(listener, tls, |_, _| {});
                let server = tonic::transport::Server::builder()
                    .add_service(pb::observer_server::ObserverServer::new(node))
                    .add_service(hubble::health::health_server::HealthServer::new(Healthy))
                    .serve_with_incoming(incoming);
                tokio::select! {
                    _ = server => {}
                    _ = stopped => {}
                }
            });
            // the runtime's end drops every connection task
        });
        bound.recv().unwrap();
        Self {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The peer service: the nodes it is given, then the changes sent.
#[derive(Clone)]
struct Peers {
    nodes: Vec<ChangeNotification>,
    changes: tokio::sync::broadcast::Sender<ChangeNotification>,
}

#[tonic::async_trait]
impl hubble::peer::peer_server::Peer for Peers {
    type NotifyStream = Stream<ChangeNotification>;
    async fn notify(
        &self,
        _: Request<hubble::peer::NotifyRequest>,
    ) -> Result<Response<Self::NotifyStream>, Status> {
        let rx = self.changes.subscribe();
        let first = futures::stream::iter(self.nodes.clone().into_iter().map(Ok));
        let later = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.ok().map(|c| (Ok(c), rx))
        });
        Ok(Response::new(Box::pin(futures::StreamExt::chain(
            first, later,
        ))))
    }
}

fn added(name: &str, address: &str) -> ChangeNotification {
    ChangeNotification {
        name: name.into(),
        address: address.into(),
        r#type: ChangeNotificationType::PeerAdded as i32,
        tls: Some(hubble::peer::Tls {
            server_name: format!("{name}.default.hubble-grpc.cilium.io"),
        }),
    }
}

fn node_addr(i: i64) -> String {
    format!("127.0.0.{i}:4244")
}

async fn within<T>(what: &str, mut f: impl AsyncFnMut() -> Result<T, String>) -> T {
    let t = Instant::now();
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if t.elapsed() > Duration::from_secs(20) => panic!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn client() -> ObserverClient<tonic::transport::Channel> {
    ObserverClient::new(Target::Tcp(RELAY.into()).lazy())
}

async fn status() -> Result<pb::ServerStatusResponse, String> {
    client()
        .server_status(pb::ServerStatusRequest {})
        .await
        .map(Response::into_inner)
        .map_err(|e| e.to_string())
}

async fn all_flows(req: pb::GetFlowsRequest) -> Vec<pb::GetFlowsResponse> {
    let mut stream = client().get_flows(req).await.unwrap().into_inner();
    let mut out = Vec::new();
    while let Some(r) = stream.message().await.unwrap() {
        out.push(r);
    }
    out
}

fn connected(st: &pb::ServerStatusResponse) -> (u32, u32) {
    (
        st.num_connected_nodes.unwrap_or_default(),
        st.num_unavailable_nodes.unwrap_or_default(),
    )
}

#[test]
fn relay_merges_three_nodes_and_follows_them_coming_and_going() {
    let _netns = testsupport::Sandbox::enter();
    let dir = tempfile::tempdir().unwrap();
    let hubble = HubblePki::create(&dir.path().join("hubble"), "default").unwrap();
    let other = HubblePki::create(&dir.path().join("other"), "default").unwrap();
    let mut nodes: Vec<Option<Running>> = (1..=3)
        .map(|i| {
            Some(Running::start(
                FakeNode { index: i },
                node_addr(i),
                &hubble,
                hubble.ca_cert(),
            ))
        })
        .collect();
    // a fourth node, its certificate from another CA: never reached
    let _stranger = Running::start(
        FakeNode { index: 4 },
        node_addr(4),
        &other,
        hubble.ca_cert(),
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let socket = dir.path().join("peer.sock");
        let (changes, _) = tokio::sync::broadcast::channel(16);
        let peers = Peers {
            nodes: (1..=4)
                .map(|i| added(&format!("node{i}"), &node_addr(i)))
                .collect(),
            changes: changes.clone(),
        };
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let incoming = hubble::listen::unix(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(hubble::peer::peer_server::PeerServer::new(peers))
                .serve_with_incoming(incoming),
        );
        let relay_tls = hubble.relay_client();
        let config = Config {
            cluster_name: "default".into(),
            peer_service: format!("unix://{}", socket.display()),
            listen_address: RELAY.into(),
            health_listen_address: "127.0.0.1:4222".into(),
            dial_timeout: Duration::from_secs(2),
            retry_timeout: Duration::from_secs(1),
            sort_buffer_len_max: 100,
            sort_buffer_drain_timeout: Duration::from_secs(1),
            client_tls: Some(TlsFiles {
                cert: relay_tls.cert,
                key: relay_tls.key,
                cas: vec![hubble.ca_cert()],
            }),
            server_tls: None,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let relay = tokio::spawn(hubble_relay::server::run(config, async {
            let _ = stopped.await;
        }));

        // three of four nodes connected; the stranger's certificate refused
        let st = within("three nodes connected", async || {
            let st = status().await?;
            (connected(&st) == (3, 1))
                .then_some(st.clone())
                .ok_or(format!("{st:?}"))
        })
        .await;
        assert_eq!(st.unavailable_nodes, ["node4"]);
        assert_eq!(st.num_flows, 3 * FLOWS_PER_NODE);
        assert_eq!(st.max_flows, 3 * 4095);
        assert_eq!(st.uptime_ns, 3);
        assert!(st.version.starts_with("hubble-relay v"), "{st:?}");

        // health over plaintext on its own port, serving
        let mut health = hubble::health::health_client::HealthClient::new(
            Target::Tcp("127.0.0.1:4222".into()).lazy(),
        );
        within("health SERVING", async || {
            let h = health
                .check(hubble::health::HealthCheckRequest {
                    service: hubble::OBSERVER_HEALTH_NAME.into(),
                })
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            (h.status == 1).then_some(()).ok_or(format!("{h:?}"))
        })
        .await;

        // the last 4 flows of each node, merged in time order after the
        // node statuses
        let got = all_flows(pb::GetFlowsRequest {
            number: 4,
            ..Default::default()
        })
        .await;
        let status_of = |r: &pb::GetFlowsResponse| match &r.response_types {
            Some(ResponseTypes::NodeStatus(s)) => Some((s.state_change, s.node_names.clone())),
            _ => None,
        };
        assert_eq!(
            status_of(&got[0]),
            Some((
                NodeState::NodeConnected as i32,
                vec!["node1".into(), "node2".into(), "node3".into()]
            ))
        );
        assert_eq!(
            status_of(&got[1]),
            Some((NodeState::NodeUnavailable as i32, vec!["node4".into()]))
        );
        let flows: Vec<(i64, String)> = got[2..]
            .iter()
            .map(|r| (r.time.unwrap().seconds, r.node_name.clone()))
            .collect();
        assert_eq!(flows.len(), 12, "{flows:?}");
        assert!(
            flows.windows(2).all(|w| w[0].0 < w[1].0),
            "time order: {flows:?}"
        );
        for n in ["node1", "node2", "node3"] {
            assert_eq!(flows.iter().filter(|f| f.1 == n).count(), 4, "{flows:?}");
        }

        // nodes and namespaces of the whole cluster
        let listed = client()
            .get_nodes(pb::GetNodesRequest {})
            .await
            .unwrap()
            .into_inner()
            .nodes;
        let states: Vec<(String, i32)> = listed.iter().map(|n| (n.name.clone(), n.state)).collect();
        assert_eq!(
            states,
            [
                ("node1".into(), NodeState::NodeConnected as i32),
                ("node2".into(), NodeState::NodeConnected as i32),
                ("node3".into(), NodeState::NodeConnected as i32),
                ("node4".into(), NodeState::NodeUnavailable as i32),
            ]
        );
        assert_eq!(listed[0].address, "127.0.0.1:4244");
        assert_eq!(listed[0].version, "cilium fake");
        let tls = listed[0].tls.clone().unwrap();
        assert!(tls.enabled && tls.server_name == "node1.default.hubble-grpc.cilium.io");
        let ns = client()
            .get_namespaces(pb::GetNamespacesRequest {})
            .await
            .unwrap()
            .into_inner()
            .namespaces;
        let ns: Vec<&str> = ns.iter().map(|n| n.namespace.as_str()).collect();
        assert_eq!(ns, ["default", "ns-node1", "ns-node2", "ns-node3"]);
        let events = client()
            .get_agent_events(pb::GetAgentEventsRequest::default())
            .await
            .err()
            .unwrap();
        assert_eq!(events.code(), tonic::Code::Unimplemented);

        // node2 goes away, then comes back
        nodes[1] = None;
        within("node2 unavailable", async || {
            let st = status().await?;
            (connected(&st) == (2, 2) && st.unavailable_nodes.contains(&"node2".to_owned()))
                .then_some(())
                .ok_or(format!("{st:?}"))
        })
        .await;
        let got = all_flows(pb::GetFlowsRequest {
            number: 1,
            ..Default::default()
        })
        .await;
        let unavailable = got.iter().find_map(|r| match &r.response_types {
            Some(ResponseTypes::NodeStatus(s))
                if s.state_change == NodeState::NodeUnavailable as i32 =>
            {
                Some(s.node_names.clone())
            }
            _ => None,
        });
        assert_eq!(unavailable, Some(vec!["node2".into(), "node4".into()]));
        nodes[1] = Some(Running::start(
            FakeNode { index: 2 },
            node_addr(2),
            &hubble,
            hubble.ca_cert(),
        ));
        within("node2 connected again", async || {
            let st = status().await?;
            (connected(&st) == (3, 1))
                .then_some(())
                .ok_or(format!("{st:?}"))
        })
        .await;

        // a node the peer service says is gone is gone from Relay too
        changes
            .send(ChangeNotification {
                name: "node4".into(),
                r#type: ChangeNotificationType::PeerDeleted as i32,
                ..Default::default()
            })
            .unwrap();
        within("node4 deleted", async || {
            let st = status().await?;
            (connected(&st) == (3, 0))
                .then_some(())
                .ok_or(format!("{st:?}"))
        })
        .await;

        // a followed request: the nodes' flows, and it stays open
        let mut stream = client()
            .get_flows(pb::GetFlowsRequest {
                follow: true,
                number: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < 3 {
            let r = tokio::time::timeout(Duration::from_secs(10), stream.message())
                .await
                .expect("flows within the drain timeout")
                .unwrap()
                .unwrap();
            if let Some(ResponseTypes::Flow(f)) = r.response_types {
                seen.insert(f.node_name);
            }
        }
        drop(stream);

        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .expect("relay stops")
            .unwrap()
            .unwrap();
    });
}
