//! The liveness/readiness endpoint on 127.0.0.1:<agent-health-port>/healthz.
//! Like Cilium's, it ignores request headers (the probes' `brief: true`
//! included) and answers 200 iff the brief status is Ok or Disabled.

use crate::status::AgentStatus;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::future::Future;
use std::sync::Arc;

async fn healthz(State(status): State<Arc<AgentStatus>>) -> StatusCode {
    if status.healthy() {
        StatusCode::OK
    } else {
        tracing::warn!(subsys = "daemon", "/healthz returning unhealthy");
        StatusCode::SERVICE_UNAVAILABLE
    }
}

pub async fn serve(
    status: Arc<AgentStatus>,
    port: u16,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let app = Router::new()
        .route("/healthz", get(healthz))
        .with_state(status);
    serve_http(addr, app, shutdown, "healthz status API server").await
}

/// Serves `app` on TCP `addr` until `shutdown`.
pub async fn serve_http(
    addr: std::net::SocketAddr,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    what: &str,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding the {what} on {addr}: {e}"))?;
    tracing::info!(subsys = "daemon", address = %addr, "Started {what}");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(Into::into)
}
