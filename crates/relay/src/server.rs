//! `hubble-relay serve`: the node pool following the peer service, the
//! Observer and health on `listen-address` (TLS unless disabled), and
//! health alone in plaintext on `health-listen-address`, until stopped.

use crate::config::{Config, TlsFiles};
use crate::health::RelayHealth;
use crate::observer::{RelayObserver, SortOptions};
use crate::peers::{Dialer, Pool};
use anyhow::Context;
use hubble::health::health_server::HealthServer;
use hubble::observer::observer_server::ObserverServer;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tonic::transport::Server;

/// Relay's own name on the responses it makes: its node's (or host's)
/// name, with the cluster's unless that is `default`.
pub fn node_name(cluster: &str) -> String {
    let node = std::env::var("K8S_NODE_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "localhost".into());
    agent::hubble::absolute_node_name(cluster, &node)
}

/// What `build` makes of certificate files once they are there, saying
/// what it waits for meanwhile.
async fn when_ready<T>(what: &str, build: impl Fn() -> Result<T, hubble::tls::TlsError>) -> T {
    hubble::tls::when_ready(
        build,
        |e| tracing::warn!(subsys = "hubble-relay", error = %e, "Waiting for {what}"),
    )
    .await
}

fn client_tls(files: &TlsFiles) -> Result<rustls::ClientConfig, hubble::tls::TlsError> {
    hubble::tls::client_config(&files.cas, Some((&files.cert, &files.key)))
}

fn server_tls(files: &TlsFiles) -> Result<rustls::ServerConfig, hubble::tls::TlsError> {
    hubble::tls::server_config(&files.cert, &files.key, &files.cas)
}

fn address(key: &str, value: &str) -> anyhow::Result<SocketAddr> {
    agent::option::validate::listen_addr(value).with_context(|| key.to_string())
}

pub async fn run(
    config: Config,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listen = address("listen-address", &config.listen_address)?;
    let health_listen = address("health-listen-address", &config.health_listen_address)?;
    let tls = match &config.client_tls {
        Some(files) => Some(Arc::new(
            when_ready("the client certificate to the Hubble servers", || {
                client_tls(files)
            })
            .await,
        )),
        None => None,
    };
    let pool = Pool::new(Dialer {
        tls,
        timeout: config.dial_timeout,
    });
    tokio::spawn(Arc::clone(&pool).follow_peer_service(
        config.peer_service.clone(),
        config.cluster_name.clone(),
        config.retry_timeout,
    ));
    let health = RelayHealth::start(Arc::clone(&pool));
    let observer = RelayObserver::new(
        Arc::clone(&pool),
        SortOptions {
            len_max: config.sort_buffer_len_max,
            drain_timeout: config.sort_buffer_drain_timeout,
        },
        node_name(&config.cluster_name),
    );

    let (stopping, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = stopping.send(true);
    });
    let until_stopped = move || {
        let mut rx = stopped.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    let health_server = Server::builder()
        .add_service(HealthServer::new(health.clone()))
        .serve_with_shutdown(health_listen, until_stopped());
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let router = Server::builder()
        .add_service(ObserverServer::new(observer))
        .add_service(HealthServer::new(health));
    tracing::info!(subsys = "hubble-relay", address = %listen, tls = config.server_tls.is_some(), peer_service = %config.peer_service, "Starting gRPC server");
    let main_server = async {
        match &config.server_tls {
            None => {
                router
                    .serve_with_incoming_shutdown(hubble::listen::tcp(listener), until_stopped())
                    .await
            }
            Some(files) => {
                let tls = when_ready("the server certificate", || server_tls(files)).await;
                let incoming = hubble::tls::incoming(listener, tls, |peer, e| {
                    tracing::debug!(subsys = "hubble-relay", peer = %peer, error = %e, "TLS handshake refused");
                });
                router
                    .serve_with_incoming_shutdown(incoming, until_stopped())
                    .await
            }
        }
    };
    let (main, health) = tokio::join!(main_server, health_server);
    main.with_context(|| format!("serving {listen}"))?;
    health.with_context(|| format!("serving health on {health_listen}"))?;
    Ok(())
}
