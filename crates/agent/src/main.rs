//! cilium-agent entry point.

use agent::option::{self, keys, DaemonConfig, Source};
use std::process::ExitCode;

fn usage() -> String {
    let mut s = String::from("Usage: cilium-agent [--config-dir DIR] [--<key>=<value> ...]\n\nConfiguration keys (also CILIUM_<KEY> env vars and files in --config-dir):\n");
    for key in keys::KEYS {
        let note = match key.implemented {
            keys::Implemented::Yes => "",
            keys::Implemented::No => " (accepted, not implemented yet)",
            keys::Implemented::Operator => " (cilium-operator's; the agent ignores it)",
        };
        s.push_str(&format!(
            "  --{:<40} default {:?}{note}\n",
            key.name, key.default
        ));
    }
    s
}

fn fatal(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("level=fatal msg={:?} subsys=daemon", msg.to_string());
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    // One malloc arena for every thread. The agent's few threads (the
    // runtime, its blocking pool, the ring and Hubble readers) rarely
    // allocate at once, and each arena of its own kept the pages its
    // thread had freed: about 0.3 MB of an idle agent.
    // SAFETY: mallopt only sets an allocator parameter; no thread runs yet.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--version") {
        println!("cilium-agent {}", api::version_string());
        return ExitCode::SUCCESS;
    }
    let loaded = match option::load(&args, |k| std::env::var(k).ok()) {
        Ok(l) => l,
        Err(e) => return fatal(e),
    };
    let config = match DaemonConfig::from_loaded(&loaded) {
        Ok(c) => c,
        Err(e) => return fatal(e),
    };
    agent::logging::init(config.debug);
    for key in keys::KEYS
        .iter()
        .filter(|k| k.implemented == keys::Implemented::No)
    {
        if loaded.source(key.name) != Some(Source::Default) && loaded.get(key.name) != key.default {
            tracing::warn!(
                subsys = "config",
                key = key.name,
                value = loaded.get(key.name),
                "Configuration key is not implemented yet; ignored"
            );
        }
    }
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

/// How long shutdown waits for the agent's tasks to end.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

async fn run(config: DaemonConfig) -> anyhow::Result<()> {
    let socket = config.socket_path.clone();
    let socket_for_cni = socket.clone();
    let port = config.health_port;
    let prometheus = config.prometheus_addr;
    let bpf_root = config.bpf_root.clone();
    let monitor_socket = agent::monitor::socket_path(&socket);
    let tasks = controlplane::tasks::Tasks::default();
    let agent = agent::daemon::start(config, tasks.clone()).await?;
    // The two servers whose failure ends the agent report it here; every
    // other task logs its own.
    let (failed_tx, mut failed) = tokio::sync::mpsc::channel::<anyhow::Error>(2);
    {
        let (api, failed_tx) = (agent.api.clone(), failed_tx.clone());
        tasks.spawn_graceful("api-server", |stop| async move {
            let served = agent::api::server::serve(api, &socket, stop).await;
            report_end(&failed_tx, "API server", served).await;
        });
    }
    {
        let status = agent.status.clone();
        agent::start_pages::release_when_started(&tasks, move || status.healthy());
    }
    agent::cni_config::write_when_ready(
        agent.config.cni.clone(),
        socket_for_cni,
        &tasks,
        agent.controllers.clone(),
    );
    if let Some(addr) = prometheus {
        let sources = agent.metrics.clone();
        tasks.spawn_graceful("metrics-server", |stop| async move {
            if let Err(e) = agent::metrics::serve(sources, addr, stop).await {
                tracing::error!(subsys = "metrics", error = %e, "Metrics endpoint failed");
            }
        });
    }
    {
        let (hub, t) = (agent.monitor.clone(), tasks.clone());
        tasks.spawn_graceful("monitor", |_stop| async move {
            let served = agent::monitor::serve(hub, bpf_root, monitor_socket, t).await;
            if let Err(e) = served {
                tracing::error!(subsys = "monitor", error = %e, "Monitor failed");
            }
        });
    }
    if let (Some(services), Some(h)) = (agent.hubble.clone(), agent.config.hubble.clone()) {
        let (s, t) = (services.clone(), tasks.clone());
        tasks.spawn_graceful("hubble", |_stop| async move {
            if let Err(e) = agent::hubble::serve_unix(s, h.socket_path, t).await {
                tracing::error!(subsys = "hubble", error = %e, "Hubble server failed");
            }
        });
        if let Some((addr, metrics)) = h.metrics.clone() {
            let t = tasks.clone();
            tasks.spawn_graceful("hubble-metrics", move |_stop| async move {
                if let Err(e) = agent::hubble::serve_metrics(metrics, addr, t).await {
                    tracing::error!(subsys = "hubble", error = %e, "Hubble metrics server failed");
                }
            });
        }
        if let Some(addr) = h.listen {
            let t = tasks.clone();
            tasks.spawn_graceful("hubble-tcp", move |_stop| async move {
                if let Err(e) = agent::hubble::serve_tcp(services, addr, h.tls, t).await {
                    tracing::error!(subsys = "hubble", error = %e, "Hubble server failed");
                }
            });
        }
    }
    if let Some(health) = agent.cluster_health.clone() {
        let (status, socket) = (agent.status.clone(), agent.config.health_socket());
        tasks.spawn_graceful("cilium-health-api", |stop| async move {
            if let Err(e) = agent::api::cilium_health::serve(health, status, socket, stop).await {
                tracing::error!(subsys = "health-server", error = %e, "cilium-health API failed");
            }
        });
    }
    {
        let status = agent.status.clone();
        tasks.spawn_graceful("health-server", |stop| async move {
            let served = agent::api::healthz::serve(status, port, stop).await;
            report_end(&failed_tx, "health server", served).await;
        });
    }

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let failure = tokio::select! {
        _ = term.recv() => { tracing::info!(subsys = "daemon", signal = "SIGTERM", "Shutting down"); None }
        _ = tokio::signal::ctrl_c() => { tracing::info!(subsys = "daemon", signal = "SIGINT", "Shutting down"); None }
        Some(e) = failed.recv() => Some(e),
    };
    // Every task stops and is waited for, so the sockets are removed and
    // no map is written after this.
    let left = tasks.shutdown(SHUTDOWN_GRACE).await;
    if !left.is_empty() {
        tracing::warn!(subsys = "daemon", tasks = ?left, grace = ?SHUTDOWN_GRACE, "Tasks still running after the grace period");
    }
    if let Some(e) = failure {
        return Err(e);
    }
    agent.config.cni.remove();
    drop(agent);
    tracing::info!(
        subsys = "daemon",
        "Agent stopped; pinned maps and programs left in place"
    );
    Ok(())
}

/// Tells `run` how a server whose end ends the agent ended: its error, or
/// that it stopped (which it does by itself only on error).
async fn report_end(
    failed: &tokio::sync::mpsc::Sender<anyhow::Error>,
    what: &str,
    served: anyhow::Result<()>,
) {
    let e = served
        .err()
        .unwrap_or_else(|| anyhow::anyhow!("{what} stopped unexpectedly"));
    let _ = failed.send(e).await;
}
