//! The operator's health API (`operator-api-serve-addr`, every replica):
//! `GET /healthz` (and `/v1/healthz`) answers 200 `ok` while the API server
//! answers a version request, 500 with the error otherwise; and the
//! metrics server (`operator-prometheus-serve-addr`) when metrics are on.

use crate::metrics::Metrics;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

async fn healthz(client: k8s::kube::Client) -> (StatusCode, String) {
    match k8s::version_line(&client).await {
        Ok(_) => (StatusCode::OK, "ok".into()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Serves the health API on `addr` until the process ends.
pub async fn serve_health(addr: SocketAddr, client: k8s::kube::Client) -> std::io::Result<()> {
    let c2 = client.clone();
    let app = Router::new()
        .route("/healthz", get(move || healthz(client.clone())))
        .route("/v1/healthz", get(move || healthz(c2.clone())));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await
}

/// Serves `/metrics` on `addr` until the process ends.
pub async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let app = Router::new().route("/metrics", get(move || async move { metrics.render() }));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await
}
