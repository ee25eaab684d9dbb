//! `cilium troubleshoot kvstore|clustermesh`: check, step by step, that
//! the etcd a configuration file names can be reached (name, TCP, etcd
//! itself), in 1.16's report shape. In CRD mode there is no etcd
//! configuration, and the report says so as 1.16's does.

use crate::Ctx;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Troubleshoot connectivity towards the etcd kvstore
    Kvstore {
        /// Path to the etcd configuration
        #[arg(
            long = "etcd-config",
            default_value = "/var/lib/etcd-config/etcd.config"
        )]
        etcd_config: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Troubleshoot connectivity towards remote clusters
    Clustermesh {
        /// Only these clusters
        clusters: Vec<String>,
        /// Path to the ClusterMesh configuration directory
        #[arg(
            long = "clustermesh-config",
            default_value = "/var/lib/cilium/clustermesh/"
        )]
        clustermesh_config: PathBuf,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(clap::Args)]
pub struct Common {
    /// Timeout when checking connectivity to a given etcd endpoint
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Do not resolve service names (accepted; names are always resolved
    /// through the system's resolver here)
    #[arg(long = "without-service-resolution")]
    without_service_resolution: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    api::duration::parse_go_duration(s).ok_or_else(|| format!("invalid duration {s:?}"))
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Kvstore {
            etcd_config,
            common,
        } => {
            if !etcd_config.exists() {
                println!(
                    "Unable to read etcd configuration: {}",
                    etcd_config.display()
                );
                println!("This is expected when Cilium is running in CRD mode");
                return Ok(ExitCode::SUCCESS);
            }
            etcd_report(etcd_config, common.timeout);
            Ok(ExitCode::SUCCESS)
        }
        Command::Clustermesh {
            clusters,
            clustermesh_config,
            common,
        } => clustermesh(ctx, clusters, clustermesh_config, common.timeout),
    }
}

fn clustermesh(
    ctx: &Ctx,
    only: &[String],
    dir: &Path,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let local = ctx
        .client()
        .ok()
        .and_then(|c| {
            c.get_json::<api::models::DaemonConfiguration>("/config", &[])
                .ok()
        })
        .map(|cfg| {
            let name = cfg.status.daemon_configuration_map.get("ClusterName");
            name.and_then(|v| v.as_str()).unwrap_or_default().to_owned()
        });
    if local.is_none() {
        eprintln!("⚠️ Could not connect to the Cilium's API and retrieve the local cluster name");
    }
    let local = local.unwrap_or_default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            let e = crate::gofmt::path_error("open", dir, &e);
            println!("Unable to retrieve cluster configurations: {e}");
            println!(
                "Is {:?} the correct configuration directory?",
                dir.display().to_string()
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut found: Vec<String> = entries
        .flatten()
        .filter(|e| !e.path().is_dir())
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("endpoints:")))
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    println!("Found {} cluster configurations", found.len());
    let mut wanted = if only.is_empty() {
        found.clone()
    } else {
        println!(
            "Troubleshooting filtered subset of clusters: {}",
            only.join(", ")
        );
        only.to_vec()
    };
    wanted.sort();
    found.sort();
    for name in wanted {
        println!("\nCluster {name:?}:");
        if name == local {
            println!("ℹ️  This entry corresponds to the local cluster");
        }
        if found.binary_search(&name).is_err() {
            println!("❌ Configuration not found");
            continue;
        }
        etcd_report(&dir.join(&name), timeout);
    }
    Ok(ExitCode::SUCCESS)
}

/// The parts of an etcd client configuration the report reads.
#[derive(serde::Deserialize, Default)]
struct EtcdConfig {
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(rename = "trusted-ca-file", alias = "ca-file", default)]
    ca_file: Option<String>,
    #[serde(rename = "cert-file", default)]
    cert_file: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// 1.16's `EtcdDbg` report for the configuration at `path`.
fn etcd_report(path: &Path, timeout: Duration) {
    println!("📄 Configuration path: {}", path.display());
    let cfg: EtcdConfig = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_yaml::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => return println!("❌ Cannot parse etcd configuration: {e}"),
    };
    println!();
    if cfg.endpoints.is_empty() {
        println!("🔌 Endpoints: ❌ No available endpoints");
    } else {
        println!("🔌 Endpoints:");
    }
    for endpoint in &cfg.endpoints {
        println!("   - {endpoint}");
        endpoint_report(endpoint, timeout);
    }
    println!();
    println!("🔑 Digital certificates:");
    match &cfg.ca_file {
        None => println!("   ⚠️ Root CA unset: using system pool"),
        Some(ca) => println!("   ✅ TLS Root CA certificates: {ca}"),
    }
    match &cfg.cert_file {
        None => println!("   ⚠️ No available TLS client certificates"),
        Some(cert) => println!("   ✅ TLS client certificates: {cert}"),
    }
    if let Some(user) = &cfg.username {
        let set = if cfg.password.is_some() {
            "set"
        } else {
            "unset"
        };
        println!("   ✅ Username set to {user}, password is {set}");
    }
    println!();
    println!("⚙️ Etcd client:");
    let endpoints = cfg.endpoints.clone();
    let result = crate::block_on(async move {
        let read = async {
            let etcd = kvstore::Etcd::connect_reader(&endpoints).await?;
            etcd.cluster_id("cilium/.heartbeat").await
        };
        Ok(tokio::time::timeout(timeout, read).await)
    });
    match result {
        Ok(Ok(Ok(id))) => {
            println!("   ✅ Etcd connection successfully established");
            println!("   ℹ️  Etcd cluster ID: {id:x}");
        }
        Ok(Ok(Err(e))) => println!("   ❌ Failed to establish connection: {e}"),
        Ok(Err(_)) => println!("   ❌ Failed to establish connection: context deadline exceeded"),
        Err(e) => println!("   ❌ Failed to establish connection: {e}"),
    }
}

/// Name resolution (for a name) and a TCP connection to one endpoint.
fn endpoint_report(endpoint: &str, timeout: Duration) {
    let hostport = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .trim_end_matches('/');
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "2379"));
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<std::net::SocketAddr> = if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        vec![std::net::SocketAddr::new(ip, port.parse().unwrap_or(2379))]
    } else {
        use std::net::ToSocketAddrs;
        match (host, port.parse::<u16>().unwrap_or(2379)).to_socket_addrs() {
            Ok(a) => {
                let a: Vec<_> = a.collect();
                let ips: Vec<String> = a.iter().map(|s| s.ip().to_string()).collect();
                println!("     ✅ Hostname resolved to: {}", ips.join(", "));
                a
            }
            Err(e) => return println!("     ❌ Cannot resolve hostname: {e}"),
        }
    };
    let mut last = None;
    for addr in &addrs {
        match std::net::TcpStream::connect_timeout(addr, timeout) {
            Ok(_) => return println!("     ✅ TCP connection successfully established to {addr}"),
            Err(e) => {
                last = Some(format!(
                    "dial tcp {addr}: connect: {}",
                    crate::gofmt::errno_text(&e)
                ))
            }
        }
    }
    let why = last.unwrap_or_else(|| "no address".to_owned());
    println!("     ❌ Cannot establish TCP connection to {hostport}: {why}");
}
