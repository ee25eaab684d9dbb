//! The cilium-health API (`/v1beta` on `health.sock`): the agent's
//! health with uptime and load, the last probe round, and a probe on
//! demand. Apart from `cluster_health` because it reads the agent's
//! status, which reads cluster health.

use crate::cluster_health::ClusterHealth;
use crate::status::AgentStatus;
use axum::extract::State;
use axum::routing::{get, put};
use axum::{Json, Router};
use std::sync::Arc;

struct HealthApi {
    health: Arc<ClusterHealth>,
    status: Arc<AgentStatus>,
}

async fn healthz(State(api): State<Arc<HealthApi>>) -> Json<api::health::HealthResponse> {
    Json(api::health::HealthResponse {
        cilium: api.status.collect(false),
        uptime: api::duration::go_duration(api.health.uptime()),
        system_load: load_average(),
    })
}

async fn health_status(
    State(api): State<Arc<HealthApi>>,
) -> Json<api::health::HealthStatusResponse> {
    Json(api.health.prober.last())
}

async fn probe(State(api): State<Arc<HealthApi>>) -> Json<api::health::HealthStatusResponse> {
    Json(api.health.prober.probe().await)
}

/// `/proc/loadavg` as `system-load`.
fn load_average() -> Option<api::health::LoadResponse> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut f = text.split_whitespace().map(str::to_owned);
    Some(api::health::LoadResponse {
        last1min: f.next()?,
        last5min: f.next()?,
        last15min: f.next()?,
    })
}

/// Serves the health API on `socket` until `shutdown`.
pub async fn serve(
    health: Arc<ClusterHealth>,
    status: Arc<AgentStatus>,
    socket: std::path::PathBuf,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = Arc::new(HealthApi {
        health: Arc::clone(&health),
        status,
    });
    let app = crate::api::server::router([Router::new()
        .route("/v1beta/healthz", get(healthz))
        .route("/v1beta/status", get(health_status))
        .route("/v1beta/status/probe", put(probe))
        .with_state(state)]);
    health.set_serving(true);
    let served = crate::api::server::serve(app, &socket, shutdown).await;
    health.set_serving(false);
    served
}
