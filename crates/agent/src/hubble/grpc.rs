//! The `observer.Observer` and `grpc.health.v1.Health` services over the
//! local observer: reads of the ring by number, first, follow, since and
//! until, as Cilium 1.16's local observer answers them.

use super::filter::Filters;
use super::observer::{Event, Observer, Stored};
use super::ring::Slot;
use controlplane::tasks::Tasks;
use hubble::flow;
use hubble::observer::{self as pb, observer_server};
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;
use tonic::{Request, Response, Status};

/// Responses waiting for a slow client; past them the reader falls behind
/// the ring and learns what it lost (Cilium's follow buffer).
const CLIENT_BUFFER: usize = 1000;

type Stream<T> = Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

#[derive(Clone)]
pub struct ObserverService {
    observer: Arc<Observer>,
    tasks: Tasks,
}

impl ObserverService {
    pub fn new(observer: Arc<Observer>, tasks: Tasks) -> Self {
        Self { observer, tasks }
    }
}

/// Where and how long a read goes.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub number: u64,
    pub first: bool,
    pub follow: bool,
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
}

fn time(t: Option<&prost_types::Timestamp>, name: &str) -> Result<Option<SystemTime>, Status> {
    t.map(|t| {
        SystemTime::try_from(*t)
            .map_err(|e| Status::invalid_argument(format!("invalid {name} timestamp: {e}")))
    })
    .transpose()
}

impl Window {
    fn new(
        number: u64,
        first: bool,
        follow: bool,
        since: Option<&prost_types::Timestamp>,
        until: Option<&prost_types::Timestamp>,
    ) -> Result<Self, Status> {
        if first && follow {
            return Err(Status::invalid_argument(
                "first cannot be specified with follow",
            ));
        }
        Ok(Self {
            number,
            first,
            follow,
            since: time(since, "since")?,
            until: time(until, "until")?,
        })
    }
}

/// The requests that read the ring, each with its window.
trait Windowed {
    fn window(&self) -> Result<Window, Status>;
}

macro_rules! windowed {
    ($($request:ty),*) => {$(
        impl Windowed for $request {
            fn window(&self) -> Result<Window, Status> {
                Window::new(self.number, self.first, self.follow, self.since.as_ref(), self.until.as_ref())
            }
        }
    )*};
}
windowed!(
    pb::GetFlowsRequest,
    pb::GetAgentEventsRequest,
    pb::GetDebugEventsRequest
);

/// What one kind of read wants of an event: None to pass over it, else
/// its response and whether it counts towards `number`.
type Pick<T> = Box<dyn Fn(&Stored) -> Option<(T, bool)> + Send + Sync>;

/// What a read sends when the ring overtook it by this many events.
type Lost<T> = Box<dyn Fn(u64) -> Option<T> + Send + Sync>;

/// The first sequence number a read starts at: the oldest kept (first),
/// the next written (follow without number or since), or as far back as
/// `number` counted events or `since` reach.
fn start<T>(observer: &Observer, w: &Window, pick: &Pick<T>) -> u64 {
    let ring = observer.ring();
    let (oldest, next) = ring.bounds();
    if w.first && w.since.is_none() {
        return oldest;
    }
    if w.follow && w.number == 0 && w.since.is_none() {
        return next;
    }
    let (mut at, mut counted) = (next, 0u64);
    while at > oldest {
        let Slot::Event(e) = ring.get(at - 1) else {
            break;
        };
        if w.since.is_some_and(|since| e.time < since) {
            break;
        }
        at -= 1;
        if pick(&e).is_some_and(|(_, counts)| counts) {
            counted += 1;
            if w.number > 0 && w.since.is_none() && counted == w.number {
                break;
            }
        }
    }
    at
}

/// Streams the ring from `start` on into `tx` until the window ends, the
/// client goes, or the agent stops.
async fn read<T: Send + 'static>(
    observer: Arc<Observer>,
    w: Window,
    pick: Pick<T>,
    lost: Lost<T>,
    tx: tokio::sync::mpsc::Sender<Result<T, Status>>,
    tasks: Tasks,
) {
    let ring = observer.ring();
    let mut written = ring.subscribe();
    let mut seq = start(&observer, &w, &pick);
    let mut sent = 0u64;
    let stopping = tasks.stopping();
    tokio::pin!(stopping);
    loop {
        match ring.get(seq) {
            Slot::Event(e) => {
                seq += 1;
                if w.until.is_some_and(|until| e.time > until) {
                    return;
                }
                let is_lost = matches!(e.event, Event::Lost(_));
                if !is_lost && w.since.is_some_and(|since| e.time < since) {
                    continue;
                }
                let Some((resp, counts)) = pick(&e) else {
                    continue;
                };
                if tx.send(Ok(resp)).await.is_err() {
                    return;
                }
                if counts {
                    sent += 1;
                    if !w.follow && w.number > 0 && sent >= w.number {
                        return;
                    }
                }
            }
            Slot::Lost { missed, next } => {
                seq = next;
                if let Some(resp) = lost(missed) {
                    if tx.send(Ok(resp)).await.is_err() {
                        return;
                    }
                }
            }
            Slot::Empty if !w.follow => return,
            Slot::Empty => {
                tokio::select! {
                    changed = written.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                    _ = &mut stopping => return,
                }
            }
        }
    }
}

impl ObserverService {
    fn stream<T: Send + 'static>(&self, w: Window, pick: Pick<T>, lost: Lost<T>) -> Stream<T> {
        let (tx, rx) = tokio::sync::mpsc::channel(CLIENT_BUFFER);
        let observer = Arc::clone(&self.observer);
        self.tasks.spawn(
            "hubble-reader",
            read(observer, w, pick, lost, tx, self.tasks.clone()),
        );
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }))
    }
}

fn lost_flows(node: String) -> Lost<pb::GetFlowsResponse> {
    Box::new(move |missed| {
        Some(pb::GetFlowsResponse {
            node_name: node.clone(),
            time: Some(prost_types::Timestamp::from(SystemTime::now())),
            response_types: Some(pb::get_flows_response::ResponseTypes::LostEvents(
                flow::LostEvent {
                    source: flow::LostEventSource::HubbleRingBuffer as i32,
                    num_events_lost: missed,
                    cpu: None,
                },
            )),
        })
    })
}

#[tonic::async_trait]
impl observer_server::Observer for ObserverService {
    type GetFlowsStream = Stream<pb::GetFlowsResponse>;
    type GetAgentEventsStream = Stream<pb::GetAgentEventsResponse>;
    type GetDebugEventsStream = Stream<pb::GetDebugEventsResponse>;

    async fn get_flows(
        &self,
        req: Request<pb::GetFlowsRequest>,
    ) -> Result<Response<Self::GetFlowsStream>, Status> {
        let r = req.into_inner();
        let w = r.window()?;
        let filters = Filters::new(&r.whitelist, &r.blacklist)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let node = self.observer.node_name().to_owned();
        let pick: Pick<pb::GetFlowsResponse> = Box::new(move |e: &Stored| {
            let (response, counts) = match &e.event {
                Event::Flow(f) if filters.pass(f) => (
                    pb::get_flows_response::ResponseTypes::Flow((**f).clone()),
                    true,
                ),
                Event::Lost(l) => (pb::get_flows_response::ResponseTypes::LostEvents(*l), false),
                _ => return None,
            };
            Some((
                pb::GetFlowsResponse {
                    node_name: node.clone(),
                    time: Some(e.timestamp()),
                    response_types: Some(response),
                },
                counts,
            ))
        });
        let lost = lost_flows(self.observer.node_name().to_owned());
        Ok(Response::new(self.stream(w, pick, lost)))
    }

    async fn get_agent_events(
        &self,
        req: Request<pb::GetAgentEventsRequest>,
    ) -> Result<Response<Self::GetAgentEventsStream>, Status> {
        let r = req.into_inner();
        let w = r.window()?;
        let node = self.observer.node_name().to_owned();
        let pick: Pick<pb::GetAgentEventsResponse> = Box::new(move |e: &Stored| match &e.event {
            Event::Agent(a) => Some((
                pb::GetAgentEventsResponse {
                    agent_event: Some(a.clone()),
                    node_name: node.clone(),
                    time: Some(e.timestamp()),
                },
                true,
            )),
            _ => None,
        });
        Ok(Response::new(self.stream(w, pick, Box::new(|_| None))))
    }

    async fn get_debug_events(
        &self,
        req: Request<pb::GetDebugEventsRequest>,
    ) -> Result<Response<Self::GetDebugEventsStream>, Status> {
        let r = req.into_inner();
        // the datapath sends no debug messages: nothing is kept, and a
        // follower waits for what never comes, as on a quiet Cilium node
        let w = r.window()?;
        Ok(Response::new(self.stream(
            w,
            Box::new(|_| None),
            Box::new(|_| None),
        )))
    }

    async fn get_nodes(
        &self,
        _: Request<pb::GetNodesRequest>,
    ) -> Result<Response<pb::GetNodesResponse>, Status> {
        // Cilium's agent leaves this to Relay; ours names itself
        let st = self.observer.status();
        Ok(Response::new(pb::GetNodesResponse {
            nodes: vec![pb::Node {
                name: self.observer.node_name().to_owned(),
                version: st.version,
                address: String::new(),
                state: hubble::relay::NodeState::NodeConnected as i32,
                tls: Some(pb::Tls::default()),
                uptime_ns: st.uptime_ns,
                num_flows: st.num_flows,
                max_flows: st.max_flows,
                seen_flows: st.seen_flows,
            }],
        }))
    }

    async fn get_namespaces(
        &self,
        _: Request<pb::GetNamespacesRequest>,
    ) -> Result<Response<pb::GetNamespacesResponse>, Status> {
        Ok(Response::new(pb::GetNamespacesResponse {
            namespaces: self.observer.namespaces(),
        }))
    }

    async fn server_status(
        &self,
        _: Request<pb::ServerStatusRequest>,
    ) -> Result<Response<pb::ServerStatusResponse>, Status> {
        Ok(Response::new(self.observer.status()))
    }
}

/// gRPC health: the observer serves as long as the agent runs; a watch
/// ends when the agent stops, so no watcher (Relay keeps one per node)
/// holds up its shutdown.
#[derive(Clone)]
pub struct HealthService {
    tasks: Tasks,
}

impl HealthService {
    pub fn new(tasks: Tasks) -> Self {
        Self { tasks }
    }
}

#[tonic::async_trait]
impl hubble::health::health_server::Health for HealthService {
    type WatchStream = Stream<hubble::health::HealthCheckResponse>;

    async fn check(
        &self,
        req: Request<hubble::health::HealthCheckRequest>,
    ) -> Result<Response<hubble::health::HealthCheckResponse>, Status> {
        use hubble::health::health_check_response::ServingStatus;
        hubble::health_service_known(&req.into_inner().service)?;
        Ok(Response::new(hubble::health::HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }

    async fn watch(
        &self,
        req: Request<hubble::health::HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let now = self.check(req).await?.into_inner();
        // one answer, then the stream stays open until the agent stops:
        // the status never changes
        let once = futures::stream::once(async move { Ok(now) });
        let stopping = self.tasks.stopping();
        let end = futures::StreamExt::filter_map(futures::stream::once(stopping), |()| {
            futures::future::ready(None)
        });
        Ok(Response::new(Box::pin(futures::StreamExt::chain(
            once, end,
        ))))
    }
}
