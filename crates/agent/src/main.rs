//! cilium-agent entry point.

use agent::option::{self, keys, DaemonConfig, Source};
use std::process::ExitCode;

fn usage() -> String {
    let mut s = String::from("Usage: cilium-agent [--config-dir DIR] [--<key>=<value> ...]\n\nConfiguration keys (also CILIUM_<KEY> env vars and files in --config-dir):\n");
    for key in keys::KEYS {
        let note = if key.implemented == keys::Implemented::No {
            " (accepted, not implemented yet)"
        } else {
            ""
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

async fn run(config: DaemonConfig) -> anyhow::Result<()> {
    let socket = config.socket_path.clone();
    let socket_for_cni = socket.clone();
    let port = config.health_port;
    let prometheus = config.prometheus_addr;
    let bpf_root = config.bpf_root.clone();
    let monitor_socket = agent::monitor::socket_path(&socket);
    let observer_socket = agent::monitor::observer_socket_path(&socket);
    let running = agent::daemon::start(config).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let mut api = tokio::spawn({
        let (d, s) = (running.daemon.clone(), stopped(stop_rx.clone()));
        async move { agent::api_server::serve(d, &socket, s).await }
    });
    agent::cni_config::write_when_ready(&running.daemon, socket_for_cni);
    if let Some(addr) = prometheus {
        let (d, s) = (running.daemon.clone(), stopped(stop_rx.clone()));
        tokio::spawn(async move {
            if let Err(e) = agent::metrics::serve(d, addr, s).await {
                tracing::error!(subsys = "metrics", error = %e, "Metrics endpoint failed");
            }
        });
    }
    {
        let (hub, s) = (running.daemon.monitor.clone(), stopped(stop_rx.clone()));
        tokio::spawn(async move {
            let served =
                agent::monitor::serve(hub, bpf_root, monitor_socket, observer_socket, s).await;
            if let Err(e) = served {
                tracing::error!(subsys = "monitor", error = %e, "Monitor failed");
            }
        });
    }
    let mut health = tokio::spawn(agent::health::serve(
        running.daemon.clone(),
        port,
        stopped(stop_rx),
    ));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => tracing::info!(subsys = "daemon", signal = "SIGTERM", "Shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!(subsys = "daemon", signal = "SIGINT", "Shutting down"),
        r = first_to_fail(&mut api, &mut health) => return r,
    }
    let _ = stop_tx.send(true);
    // Let both servers finish so the API socket is removed before exit.
    let grace = std::time::Duration::from_secs(5);
    let _ = tokio::time::timeout(grace, async {
        let _ = api.await;
        let _ = health.await;
    })
    .await;
    running.daemon.config.cni.remove();
    drop(running);
    tracing::info!(
        subsys = "daemon",
        "Agent stopped; pinned maps and programs left in place"
    );
    Ok(())
}

/// Resolves when either server task ends (which only happens on error).
async fn first_to_fail(
    a: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
    b: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let r = tokio::select! { r = a => r, r = b => r };
    match r {
        Ok(Ok(())) => Err(anyhow::anyhow!("API server stopped unexpectedly")),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(anyhow::anyhow!("server task failed: {e}")),
    }
}
