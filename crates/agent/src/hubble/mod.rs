//! Hubble on the agent (`enable-hubble`): the monitor's events become
//! flows in a ring of `hubble-event-buffer-capacity`, served as Cilium
//! 1.16's `observer.Observer` gRPC API, with `peer.Peer` (the cluster's
//! nodes, for Relay) and gRPC health, on `hubble-socket-path` (plaintext)
//! and, with `hubble-listen-address`, on TCP with TLS, where the Hubble
//! CLI, Hubble Relay and `cilium observe` read them.

mod cgroups;
mod filter;
mod grpc;
pub mod metrics;
mod observer;
mod packet;
mod parse;
mod peer;
mod resolve;
mod ring;

pub use observer::{absolute_node_name, Observer};
pub use parse::Resolve;
pub use peer::{NodeSource, PeerService, Reach};
pub use resolve::{ControlPlaneResolver, PodNames, PodWorkloads};
pub use ring::{Capacity, CapacityError};

use controlplane::tasks::Tasks;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The TCP server's TLS files (`hubble-tls-*`); with client CAs, mutual
/// TLS.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_cas: Vec<PathBuf>,
}

/// What each of the servers serves.
#[derive(Clone)]
pub struct Services {
    pub observer: Arc<Observer>,
    pub peer: PeerService,
}

impl Services {
    fn router(&self, tasks: &Tasks) -> tonic::transport::server::Router {
        use hubble::{
            health::health_server::HealthServer, observer::observer_server::ObserverServer,
        };
        let observer = grpc::ObserverService::new(Arc::clone(&self.observer), tasks.clone());
        tonic::transport::Server::builder()
            .add_service(ObserverServer::new(observer))
            .add_service(hubble::peer::peer_server::PeerServer::new(
                self.peer.clone(),
            ))
            .add_service(HealthServer::new(grpc::HealthService::new(tasks.clone())))
    }
}

/// Where `hubble-socket-path` points when it is not set: beside the API
/// socket (`/var/run/cilium/hubble.sock` for the default one).
pub fn default_socket_path(api_socket: &Path) -> PathBuf {
    api_socket.with_file_name("hubble.sock")
}

/// Cilium's `HubbleStatus` for `cilium status`.
pub fn status(observer: Option<&Observer>) -> api::models::HubbleStatus {
    use api::models::{HubbleMetrics, HubbleObserver, HubbleStatus, State};
    let Some(o) = observer else {
        return HubbleStatus {
            state: State::Disabled,
            msg: String::new(),
            observer: None,
            metrics: None,
        };
    };
    let st = o.status();
    HubbleStatus {
        state: State::Ok,
        msg: String::new(),
        observer: Some(HubbleObserver {
            max_flows: st.max_flows,
            current_flows: st.num_flows,
            seen_flows: st.seen_flows,
            uptime: api::duration::go_duration(o.uptime()),
        }),
        metrics: Some(HubbleMetrics {
            state: if o.metrics().is_some() {
                State::Ok
            } else {
                State::Disabled
            },
        }),
    }
}

/// Serves on the Unix socket `socket` (plaintext, as in Cilium) until
/// the agent stops.
pub async fn serve_unix(services: Services, socket: PathBuf, tasks: Tasks) -> anyhow::Result<()> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    }
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)
        .map_err(|e| anyhow::anyhow!("binding {}: {e}", socket.display()))?;
    tracing::info!(subsys = "hubble", address = %format!("unix://{}", socket.display()), "Starting local Hubble server");
    let incoming = hubble::listen::unix(listener);
    let served = services
        .router(&tasks)
        .serve_with_incoming_shutdown(incoming, tasks.stopping())
        .await;
    let _ = std::fs::remove_file(&socket);
    served.map_err(|e| anyhow::anyhow!("serving {}: {e}", socket.display()))
}

/// Serves on TCP at `addr` until the agent stops: with `tls`, once its
/// files exist (a Secret mounted as optional may come later, as Cilium
/// waits for it), TLS 1.3 only and, with client CAs, mutual TLS.
pub async fn serve_tcp(
    services: Services,
    addr: std::net::SocketAddr,
    tls: Option<TlsFiles>,
    tasks: Tasks,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}"))?;
    let router = services.router(&tasks);
    let Some(files) = tls else {
        tracing::info!(subsys = "hubble", address = %addr, tls = false, "Starting Hubble server");
        return router
            .serve_with_incoming_shutdown(hubble::listen::tcp(listener), tasks.stopping())
            .await
            .map_err(|e| anyhow::anyhow!("serving {addr}: {e}"));
    };
    let ready = hubble::tls::when_ready(
        || hubble::tls::server_config(&files.cert, &files.key, &files.client_cas),
        |e| tracing::warn!(subsys = "hubble", error = %e, "Waiting for Hubble server TLS certificate and key files to be created"),
    );
    let config = tokio::select! {
        c = ready => c,
        _ = tasks.stopping() => return Ok(()),
    };
    tracing::info!(subsys = "hubble", address = %addr, tls = true, mutual = !files.client_cas.is_empty(), "Starting Hubble server");
    let incoming = hubble::tls::incoming(listener, config, |peer, e| {
        tracing::debug!(subsys = "hubble", peer = %peer, error = %e, "TLS handshake refused");
    });
    router
        .serve_with_incoming_shutdown(incoming, tasks.stopping())
        .await
        .map_err(|e| anyhow::anyhow!("serving {addr}: {e}"))
}

/// Serves Hubble's metrics as Prometheus text on `addr` (`/metrics`)
/// until the agent stops.
pub async fn serve_metrics(
    metrics: Arc<metrics::Metrics>,
    addr: std::net::SocketAddr,
    tasks: Tasks,
) -> anyhow::Result<()> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}"))?;
    tracing::info!(subsys = "hubble", address = %addr, metrics = ?metrics, "Starting Hubble metrics server");
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = Arc::clone(&metrics);
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    m.render(),
                )
            }
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(tasks.stopping())
        .await
        .map_err(|e| anyhow::anyhow!("serving {addr}: {e}"))
}
