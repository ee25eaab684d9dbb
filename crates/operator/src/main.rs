//! cilium-operator entry point: configuration, the API server connection,
//! the health and metrics servers (every replica), then leader election;
//! the leader runs the controllers until it stops leading or is asked to
//! stop. A replica that loses the lease exits, as Cilium's does, to come
//! back as a follower.

use anyhow::Context;
use operator::clusterpool::ClusterPool;
use operator::config::{Config, Flags, IdentityGc, IdentityMode};
use operator::leader::{self, Elector};
use operator::metrics::{IdentityGcRun, Metrics};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the operator waits for the API server at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

fn fatal(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!(
        "level=fatal msg={:?} subsys=cilium-operator",
        msg.to_string()
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    let config = match Config::load(&flags) {
        Ok(c) => c,
        Err(e) => return fatal(e),
    };
    agent::logging::init(config.debug);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fatal(format!("starting runtime: {e}")),
    };
    match rt.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(format!("{e:#}")),
    }
}

async fn connect(opts: &k8s::ClientOptions) -> anyhow::Result<k8s::kube::Client> {
    let client = k8s::connect(opts)
        .await
        .context("connecting to Kubernetes")?;
    let started = Instant::now();
    loop {
        match k8s::version_line(&client).await {
            Ok(v) => {
                tracing::info!(subsys = "cilium-operator", version = %v, "Connected to the Kubernetes API server");
                return Ok(client);
            }
            Err(e) if started.elapsed() >= CONNECT_TIMEOUT => {
                return Err(e).context(format!(
                    "the Kubernetes API server did not answer within {CONNECT_TIMEOUT:?}"
                ))
            }
            Err(e) => {
                tracing::info!(subsys = "cilium-operator", error = %e, "Waiting for the Kubernetes API server");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    // checked before anything starts, so a bad pool fails the start
    let pool = match config.ipam.as_str() {
        "cluster-pool" => Some(
            config
                .cluster_pools
                .iter()
                .map(|p| ClusterPool::new(p.family, &p.cidrs, p.mask_size))
                .collect::<Result<Vec<_>, _>>()
                .context("cluster-pool IPAM")?,
        ),
        other => {
            tracing::info!(
                subsys = "cilium-operator",
                ipam = other,
                "IPAM mode has no operator allocator here; pod CIDRs are not handed out"
            );
            None
        }
    };
    let client = connect(&config.k8s).await?;
    let metrics = Arc::new(Metrics::default());

    let health = tokio::spawn(operator::api::serve_health(config.api_addr, client.clone()));
    tracing::info!(subsys = "cilium-operator", address = %config.api_addr, "Serving the health API");
    let metrics_server = config
        .metrics_addr
        .map(|addr| tokio::spawn(operator::api::serve_metrics(addr, Arc::clone(&metrics))));

    let mut elector = Elector::new(
        client.clone(),
        &config.namespace,
        leader::holder_identity(),
        config.timing.clone(),
    );
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("handling SIGTERM")?;
    tokio::select! {
        () = elector.acquire() => {}
        _ = sigterm.recv() => return Ok(()),
        _ = tokio::signal::ctrl_c() => return Ok(()),
        r = health => return Err(server_ended("health API", r)),
    }

    let ipam = async {
        if let Some(pools) = pool {
            operator::nodes::run(client.clone(), pools, Arc::clone(&metrics)).await;
        }
        std::future::pending::<()>().await
    };
    let taints = operator::taints::run(client.clone(), config.taints.clone());
    let identity_gc = collect_identities(
        client.clone(),
        config.identity_gc.clone(),
        config.kvstore.clone(),
        Arc::clone(&metrics),
    );
    let endpoint_gc = operator::endpointgc::run(
        client.clone(),
        config.endpoint_gc_interval,
        Arc::clone(&metrics),
    );
    let node_gc = operator::nodegc::run(client.clone(), config.nodes_gc_interval);
    let controllers = async {
        tokio::join!(ipam, taints, identity_gc, endpoint_gc, node_gc);
    };
    let lost = tokio::select! {
        lost = elector.hold() => Some(lost),
        () = controllers => None,
        _ = sigterm.recv() => None,
        _ = tokio::signal::ctrl_c() => None,
    };
    if let Some(lost) = lost {
        return Err(lost.into());
    }
    elector.release().await;
    drop(metrics_server);
    Ok(())
}

/// Identity garbage collection where the identities are: CiliumIdentities,
/// or the kvstore's master keys (connected to here, retrying until etcd
/// answers, as the leader needs it only for this).
async fn collect_identities(
    client: k8s::kube::Client,
    gc: IdentityGc,
    kvstore: Option<agent::option::kvstore::KvstoreConfig>,
    metrics: Arc<Metrics>,
) {
    let (IdentityMode::Kvstore, Some(interval), Some(kc)) = (gc.mode, gc.interval, kvstore) else {
        return operator::identitygc::run(client, gc, metrics).await;
    };
    let kv = loop {
        match kvstore::Kvstore::connect(&kc.endpoints, kc.lease_ttl).await {
            Ok(kv) => {
                tracing::info!(subsys = "kvstore", endpoints = ?kc.endpoints, "Connected to etcd");
                break kv;
            }
            Err(e) => {
                tracing::info!(subsys = "kvstore", error = %e, "Waiting for etcd");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    operator::kvstoregc::run(kv, interval, |round| {
        metrics.identity_gc(match round {
            Ok(r) => IdentityGcRun {
                alive: r.alive,
                deleted: r.deleted,
                failed: false,
            },
            Err(_) => IdentityGcRun {
                failed: true,
                ..IdentityGcRun::default()
            },
        })
    })
    .await
}

fn server_ended(
    what: &str,
    r: Result<std::io::Result<()>, tokio::task::JoinError>,
) -> anyhow::Error {
    match r {
        Ok(Ok(())) => anyhow::anyhow!("the {what} server ended"),
        Ok(Err(e)) => anyhow::Error::new(e).context(format!("serving the {what}")),
        Err(e) => anyhow::Error::new(e).context(format!("the {what} server")),
    }
}
