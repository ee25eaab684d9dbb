//! Hubble on the agent (`enable-hubble`): the monitor's events become
//! flows in a ring of `hubble-event-buffer-capacity`, served as Cilium
//! 1.16's `observer.Observer` gRPC API (with gRPC health) on
//! `hubble-socket-path`, where the Hubble CLI, Hubble Relay and
//! `cilium observe` read them.

mod cgroups;
mod filter;
mod grpc;
mod observer;
mod packet;
mod parse;
mod resolve;
mod ring;

pub use observer::{absolute_node_name, Observer};
pub use parse::Resolve;
pub use resolve::{ControlPlaneResolver, PodNames};
pub use ring::{Capacity, CapacityError};

use controlplane::tasks::Tasks;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
            state: State::Disabled,
        }),
    }
}

/// Serves the observer on the Unix socket `socket` (plaintext, as in
/// Cilium) until the agent stops.
pub async fn serve_unix(
    observer: Arc<Observer>,
    socket: PathBuf,
    tasks: Tasks,
) -> anyhow::Result<()> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    }
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)
        .map_err(|e| anyhow::anyhow!("binding {}: {e}", socket.display()))?;
    tracing::info!(subsys = "hubble", address = %format!("unix://{}", socket.display()), "Starting local Hubble server");
    let incoming = futures::stream::unfold(listener, |l| async move {
        let conn = l.accept().await.map(|(c, _)| c);
        Some((conn, l))
    });
    let service = grpc::ObserverService::new(observer, tasks.clone());
    let served = tonic::transport::Server::builder()
        .add_service(hubble::observer::observer_server::ObserverServer::new(
            service,
        ))
        .add_service(hubble::health::health_server::HealthServer::new(
            grpc::HealthService,
        ))
        .serve_with_incoming_shutdown(incoming, tasks.stopping())
        .await;
    let _ = std::fs::remove_file(&socket);
    served.map_err(|e| anyhow::anyhow!("serving {}: {e}", socket.display()))
}
