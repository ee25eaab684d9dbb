//! Relay's `observer.Observer`: each request forwarded (with its
//! metadata) to every connected node, the answers merged. Flows come
//! back in time order through a sort buffer; which nodes answer, which
//! could not and which failed is said in `node_status` responses, as
//! Cilium 1.16's Relay says it.

use crate::peers::{self, Peer, Pool};
use crate::sort::SortBuffer;
use hubble::observer::{
    self as pb, get_flows_response::ResponseTypes, observer_client::ObserverClient,
};
use hubble::relay::{NodeState, NodeStatusEvent};
use std::collections::{BTreeSet, HashSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

/// How often a followed request looks for nodes that became available.
const PEER_UPDATE_INTERVAL: Duration = Duration::from_secs(2);
/// Errors with one message within this window are said once, for all
/// their nodes.
const ERROR_AGGREGATION_WINDOW: Duration = Duration::from_secs(10);
/// Unavailable nodes named in ServerStatus, at most.
const UNAVAILABLE_NODES_REPORT_MAX: usize = 10;

/// The sort buffer's bounds (`sort-buffer-len-max`,
/// `sort-buffer-drain-timeout`).
#[derive(Clone, Copy, Debug)]
pub struct SortOptions {
    pub len_max: usize,
    pub drain_timeout: Duration,
}

pub struct RelayObserver {
    pool: Arc<Pool>,
    sort: SortOptions,
    /// Relay's own name, on the responses it makes
    node_name: String,
}

impl RelayObserver {
    pub fn new(pool: Arc<Pool>, sort: SortOptions, node_name: String) -> Self {
        Self {
            pool,
            sort,
            node_name,
        }
    }
}

/// What this build of Relay says it is.
pub fn version() -> String {
    format!("hubble-relay v{}+g{}", api::VERSION, api::GIT_REVISION)
}

/// `msg` to a node, carrying the client's metadata as Relay forwards it.
fn forwarded<T>(md: &MetadataMap, msg: T) -> Request<T> {
    Request::from_parts(md.clone(), Default::default(), msg)
}

/// A failed call as grpc-go words it, as Cilium's Relay passes it on.
fn error_message(s: &Status) -> String {
    if s.code() == tonic::Code::Unknown {
        return s.message().to_owned();
    }
    format!("rpc error: code = {:?} desc = {}", s.code(), s.message())
}

fn node_status(
    node_name: &str,
    state: NodeState,
    names: Vec<String>,
    message: String,
) -> pb::GetFlowsResponse {
    pb::GetFlowsResponse {
        node_name: node_name.to_owned(),
        time: Some(SystemTime::now().into()),
        response_types: Some(ResponseTypes::NodeStatus(NodeStatusEvent {
            state_change: state as i32,
            node_names: names,
            message,
        })),
    }
}

fn node_error(r: &pb::GetFlowsResponse) -> Option<&NodeStatusEvent> {
    match &r.response_types {
        Some(ResponseTypes::NodeStatus(s)) if s.state_change == NodeState::NodeError as i32 => {
            Some(s)
        }
        _ => None,
    }
}

/// Starts reading the nodes of a GetFlows request, and remembers whom it
/// reads so a followed request adds only the nodes it lacks.
struct Collector {
    req: pb::GetFlowsRequest,
    md: MetadataMap,
    relay_name: String,
    reading: Arc<Mutex<HashSet<String>>>,
    tasks: JoinSet<()>,
}

impl Collector {
    /// Reads every node of `peers` not read yet; the names of those read
    /// and of those that could not be.
    fn collect(
        &mut self,
        peers: &[Peer],
        tx: &mpsc::Sender<pb::GetFlowsResponse>,
    ) -> (Vec<String>, Vec<String>) {
        let (mut connected, mut unavailable) = (Vec::new(), Vec::new());
        let mut reading = self.reading.lock().expect("reading lock");
        for p in peers {
            if reading.contains(&p.name) {
                connected.push(p.name.clone());
                continue;
            }
            let Some(channel) = p.channel.clone() else {
                tracing::info!(subsys = "hubble-relay", address = %p.address, "No connection to peer {}, skipping", p.name);
                unavailable.push(p.name.clone());
                continue;
            };
            connected.push(p.name.clone());
            reading.insert(p.name.clone());
            let (name, req, md, tx) = (
                p.name.clone(),
                self.req.clone(),
                self.md.clone(),
                tx.clone(),
            );
            let (relay, reading) = (self.relay_name.clone(), Arc::clone(&self.reading));
            self.tasks.spawn(async move {
                if let Err(e) = flows_of(channel, forwarded(&md, req), &tx).await {
                    tracing::warn!(subsys = "hubble-relay", peer = %name, error = %e, "Failed to retrieve flows from peer");
                    reading.lock().expect("reading lock").remove(&name);
                    let _ = tx
                        .send(node_status(&relay, NodeState::NodeError, vec![name], error_message(&e)))
                        .await;
                }
            });
        }
        (connected, unavailable)
    }
}

/// A node's answer to `req`, every response sent to `tx`; its end (or
/// the request's cancellation) is no error.
async fn flows_of(
    channel: tonic::transport::Channel,
    req: Request<pb::GetFlowsRequest>,
    tx: &mpsc::Sender<pb::GetFlowsResponse>,
) -> Result<(), Status> {
    let mut stream = ObserverClient::new(channel)
        .get_flows(req)
        .await?
        .into_inner();
    loop {
        match stream.message().await {
            Ok(Some(r)) => {
                if tx.send(r).await.is_err() {
                    return Ok(());
                }
            }
            Ok(None) => return Ok(()),
            Err(e) if e.code() == tonic::Code::Cancelled => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// The merge of one request: nodes' responses in, time-ordered responses
/// out through the sort buffer; node errors of one message gathered
/// within the aggregation window.
struct Merge {
    buffer: SortBuffer,
    qlen: usize,
    out: mpsc::Sender<Result<pb::GetFlowsResponse, Status>>,
    pending_error: Option<(pb::GetFlowsResponse, Instant)>,
}

impl Merge {
    /// Sends `r`; false once the client is gone.
    async fn send(&self, r: pb::GetFlowsResponse) -> bool {
        self.out.send(Ok(r)).await.is_ok()
    }

    async fn sort(&mut self, r: pb::GetFlowsResponse) -> bool {
        if self.buffer.len() >= self.qlen {
            if let Some(oldest) = self.buffer.pop() {
                if !self.send(oldest).await {
                    return false;
                }
            }
        }
        self.buffer.push(r);
        true
    }

    async fn take(&mut self, r: pb::GetFlowsResponse) -> bool {
        let Some(err) = node_error(&r) else {
            return self.sort(r).await;
        };
        if let Some((pending, _)) = &mut self.pending_error {
            if let Some(ResponseTypes::NodeStatus(p)) = &mut pending.response_types {
                if p.message == err.message {
                    p.node_names.extend(err.node_names.iter().cloned());
                    return true;
                }
            }
        }
        let previous = self
            .pending_error
            .replace((r, Instant::now() + ERROR_AGGREGATION_WINDOW));
        match previous {
            Some((p, _)) => self.sort(p).await,
            None => true,
        }
    }

    async fn flush_error(&mut self) -> bool {
        match self.pending_error.take() {
            Some((p, _)) => self.sort(p).await,
            None => true,
        }
    }

    async fn drain_older(&mut self, drain: Duration) -> bool {
        let cutoff = SystemTime::now() - drain;
        for r in self.buffer.pop_older_than(cutoff) {
            if !self.send(r).await {
                return false;
            }
        }
        true
    }

    async fn drain_all(&mut self) {
        while let Some(r) = self.buffer.pop() {
            if !self.send(r).await {
                return;
            }
        }
    }
}

type FlowStream = Pin<Box<dyn futures::Stream<Item = Result<pb::GetFlowsResponse, Status>> + Send>>;

fn unimplemented<T>(what: &str) -> Result<T, Status> {
    Err(Status::unimplemented(format!("{what} not yet implemented")))
}

/// Calls `call` on every connected node at once; each node with its
/// answer, or None when it has no connection.
async fn on_each<T, F, Fut>(peers: Vec<Peer>, call: F) -> Vec<(Peer, Option<Result<T, Status>>)>
where
    F: Fn(ObserverClient<tonic::transport::Channel>) -> Fut,
    Fut: std::future::Future<Output = Result<Response<T>, Status>>,
{
    let calls = peers.into_iter().map(|p| {
        let call = p.channel.clone().map(|c| call(ObserverClient::new(c)));
        async move {
            let answer = match call {
                Some(fut) => Some(fut.await.map(Response::into_inner)),
                None => None,
            };
            (p, answer)
        }
    });
    futures::future::join_all(calls).await
}

#[tonic::async_trait]
impl pb::observer_server::Observer for RelayObserver {
    type GetFlowsStream = FlowStream;
    type GetAgentEventsStream =
        Pin<Box<dyn futures::Stream<Item = Result<pb::GetAgentEventsResponse, Status>> + Send>>;
    type GetDebugEventsStream =
        Pin<Box<dyn futures::Stream<Item = Result<pb::GetDebugEventsResponse, Status>> + Send>>;

    async fn get_flows(
        &self,
        request: Request<pb::GetFlowsRequest>,
    ) -> Result<Response<FlowStream>, Status> {
        let (md, _, req) = request.into_parts();
        let peers = self.pool.list();
        let product = req.number.saturating_mul(peers.len() as u64);
        let qlen = match usize::try_from(product) {
            Ok(n) if n > 0 && n < self.sort.len_max => n,
            _ => self.sort.len_max,
        };
        let follow = req.follow;
        let (tx, mut rx) = mpsc::channel(qlen);
        let mut collector = Collector {
            req,
            md,
            relay_name: self.node_name.clone(),
            reading: Default::default(),
            tasks: JoinSet::new(),
        };
        let (connected, unavailable) = collector.collect(&peers, &tx);
        // the followed request keeps a sender for the nodes it adds; the
        // other ends when its nodes have answered
        let tx = follow.then_some(tx);
        let (out, out_rx) = mpsc::channel(qlen);
        let (pool, drain, relay) = (
            Arc::clone(&self.pool),
            self.sort.drain_timeout,
            self.node_name.clone(),
        );
        tokio::spawn(async move {
            let mut merge = Merge {
                buffer: SortBuffer::default(),
                qlen,
                out,
                pending_error: None,
            };
            for (state, names) in [
                (NodeState::NodeConnected, connected),
                (NodeState::NodeUnavailable, unavailable),
            ] {
                if !names.is_empty()
                    && !merge
                        .send(node_status(&relay, state, names, String::new()))
                        .await
                {
                    return;
                }
            }
            let mut drain_tick =
                tokio::time::interval_at(tokio::time::Instant::now() + drain, drain);
            let mut peer_tick = tokio::time::interval_at(
                tokio::time::Instant::now() + PEER_UPDATE_INTERVAL,
                PEER_UPDATE_INTERVAL,
            );
            loop {
                let error_due = merge.pending_error.as_ref().map(|(_, at)| *at);
                let going = tokio::select! {
                    r = rx.recv() => match r {
                        Some(r) => merge.take(r).await,
                        None => break,
                    },
                    _ = drain_tick.tick() => merge.drain_older(drain).await,
                    _ = peer_tick.tick(), if tx.is_some() => {
                        if let Some(tx) = &tx {
                            collector.collect(&pool.list(), tx);
                        }
                        true
                    }
                    _ = tokio::time::sleep_until(error_due.unwrap_or_else(Instant::now).into()), if error_due.is_some() => {
                        merge.flush_error().await
                    }
                    _ = merge.out.closed() => false,
                };
                if !going {
                    // the client left: the nodes' reads end with the collector
                    return;
                }
            }
            if merge.flush_error().await {
                merge.drain_all().await;
            }
        });
        let stream =
            futures::stream::unfold(
                out_rx,
                |mut rx| async move { rx.recv().await.map(|r| (r, rx)) },
            );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_agent_events(
        &self,
        _: Request<pb::GetAgentEventsRequest>,
    ) -> Result<Response<Self::GetAgentEventsStream>, Status> {
        unimplemented("GetAgentEvents")
    }

    async fn get_debug_events(
        &self,
        _: Request<pb::GetDebugEventsRequest>,
    ) -> Result<Response<Self::GetDebugEventsStream>, Status> {
        unimplemented("GetDebugEvents")
    }

    async fn get_nodes(
        &self,
        request: Request<pb::GetNodesRequest>,
    ) -> Result<Response<pb::GetNodesResponse>, Status> {
        let md = request.metadata().clone();
        let answers = on_each(self.pool.list(), |mut c| {
            let req = forwarded(&md, pb::ServerStatusRequest {});
            async move { c.server_status(req).await }
        })
        .await;
        let nodes = answers
            .into_iter()
            .map(|(p, answer)| {
                let mut n = pb::Node {
                    name: p.name.clone(),
                    address: address_of(&p.address),
                    tls: Some(pb::Tls {
                        enabled: p.tls_server_name.is_some(),
                        server_name: p.tls_server_name.clone().unwrap_or_default(),
                    }),
                    ..Default::default()
                };
                n.state = match answer {
                    None => NodeState::NodeUnavailable,
                    Some(Err(e)) => {
                        tracing::warn!(subsys = "hubble-relay", peer = %p.name, error = %e.message(), "Failed to retrieve server status");
                        NodeState::NodeError
                    }
                    Some(Ok(st)) => {
                        n.version = st.version;
                        n.uptime_ns = st.uptime_ns;
                        n.max_flows = st.max_flows;
                        n.num_flows = st.num_flows;
                        n.seen_flows = st.seen_flows;
                        NodeState::NodeConnected
                    }
                } as i32;
                n
            })
            .collect();
        Ok(Response::new(pb::GetNodesResponse { nodes }))
    }

    async fn get_namespaces(
        &self,
        request: Request<pb::GetNamespacesRequest>,
    ) -> Result<Response<pb::GetNamespacesResponse>, Status> {
        let md = request.metadata().clone();
        let answers = on_each(self.pool.list(), |mut c| {
            let req = forwarded(&md, pb::GetNamespacesRequest {});
            async move { c.get_namespaces(req).await }
        })
        .await;
        let mut all = BTreeSet::new();
        for (p, answer) in answers {
            match answer {
                Some(Ok(r)) => {
                    all.extend(r.namespaces.into_iter().map(|n| (n.cluster, n.namespace)))
                }
                Some(Err(e)) => {
                    tracing::warn!(subsys = "hubble-relay", peer = %p.name, error = %e.message(), "Failed to retrieve namespaces")
                }
                None => {}
            }
        }
        let namespaces = all
            .into_iter()
            .map(|(cluster, namespace)| pb::Namespace { cluster, namespace })
            .collect();
        Ok(Response::new(pb::GetNamespacesResponse { namespaces }))
    }

    async fn server_status(
        &self,
        request: Request<pb::ServerStatusRequest>,
    ) -> Result<Response<pb::ServerStatusResponse>, Status> {
        let md = request.metadata().clone();
        let peers = self.pool.list();
        let total = peers.len();
        let answers = on_each(peers, |mut c| {
            let req = forwarded(&md, pb::ServerStatusRequest {});
            async move { c.server_status(req).await }
        })
        .await;
        let mut sum = pb::ServerStatusResponse {
            version: version(),
            ..Default::default()
        };
        let mut unavailable = Vec::new();
        for (p, answer) in answers {
            match answer {
                Some(Ok(st)) => {
                    sum.max_flows += st.max_flows;
                    sum.num_flows += st.num_flows;
                    sum.seen_flows += st.seen_flows;
                    sum.flows_rate += st.flows_rate;
                    sum.uptime_ns = sum.uptime_ns.max(st.uptime_ns);
                }
                failed => {
                    if let Some(Err(e)) = failed {
                        tracing::warn!(subsys = "hubble-relay", peer = %p.name, error = %e.message(), "Failed to retrieve server status");
                    }
                    unavailable.push(p.name);
                }
            }
        }
        let count = |n: usize| Some(u32::try_from(n).unwrap_or(u32::MAX));
        sum.num_connected_nodes = count(total - unavailable.len());
        sum.num_unavailable_nodes = count(unavailable.len());
        unavailable.truncate(UNAVAILABLE_NODES_REPORT_MAX);
        sum.unavailable_nodes = unavailable;
        Ok(Response::new(sum))
    }
}

/// A node's address as Relay shows it: with its port.
fn address_of(address: &str) -> String {
    if address.starts_with("unix://") || address.starts_with('/') {
        return address.to_owned();
    }
    peers::with_port(address)
}
