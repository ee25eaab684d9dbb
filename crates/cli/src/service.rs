//! `cilium service update|list|get|delete`.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use anyhow::{bail, Context};
use api::service::{BackendAddress, FrontendAddress, Service, ServiceSpec, ServiceSpecFlags};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct UpdateArgs {
    /// Identifier
    #[arg(long)]
    id: u64,
    /// Frontend address (IP:PORT)
    #[arg(long)]
    frontend: String,
    /// Backend address or addresses (IP:PORT,...)
    #[arg(long, value_delimiter = ',')]
    backends: Vec<String>,
    /// Backend states (active, terminating, quarantined, maintenance), one per backend or one for all
    #[arg(long, value_delimiter = ',')]
    states: Vec<String>,
    /// Set service as a k8s ClusterIP (the default)
    #[arg(long = "k8s-cluster-ip")]
    cluster_ip: bool,
    /// Set service as a k8s NodePort
    #[arg(long = "k8s-node-port")]
    node_port: bool,
    /// Set service as a k8s ExternalIPs
    #[arg(long = "k8s-external")]
    external: bool,
    /// Set service as a k8s LoadBalancer
    #[arg(long = "k8s-load-balancer")]
    load_balancer: bool,
    /// Set service as a k8s HostPort
    #[arg(long = "k8s-host-port")]
    host_port: bool,
    /// Set service as Local Redirect
    #[arg(long = "local-redirect")]
    local_redirect: bool,
    /// Session affinity timeout in seconds (0: none)
    #[arg(long = "session-affinity-timeout", default_value_t = 0)]
    affinity_timeout: u32,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// Update a service
    Update(UpdateArgs),
    /// List services
    #[command(alias = "ls")]
    List(ListArgs),
    /// Display service information
    Get {
        id: u64,
        #[command(flatten)]
        args: ListArgs,
    },
    /// Delete a service
    Delete {
        /// Service ID
        id: Option<u64>,
        /// Delete all services
        #[arg(long)]
        all: bool,
    },
}

/// `IP:PORT` (`[IP]:PORT` for IPv6) into its parts; the agent checks the
/// address itself.
fn ip_port(s: &str, what: &str) -> anyhow::Result<(String, u16)> {
    let (ip, port) = s
        .rsplit_once(':')
        .with_context(|| format!("{what} {s:?}: expected IP:PORT"))?;
    let port = port
        .parse()
        .with_context(|| format!("{what} {s:?}: invalid port {port:?}"))?;
    let ip = ip
        .strip_prefix('[')
        .and_then(|ip| ip.strip_suffix(']'))
        .unwrap_or(ip);
    Ok((ip.to_owned(), port))
}

/// `IP:port` as Cilium prints an address, bracketed when it is IPv6.
fn address(ip: &str, port: u16) -> String {
    match ip.parse() {
        Ok(ip) => lb::host_port(ip, port),
        Err(_) => format!("{ip}:{port}"),
    }
}

fn service_type(a: &UpdateArgs) -> anyhow::Result<&'static str> {
    let chosen: Vec<&'static str> = [
        (a.cluster_ip, "ClusterIP"),
        (a.node_port, "NodePort"),
        (a.external, "ExternalIPs"),
        (a.load_balancer, "LoadBalancer"),
        (a.host_port, "HostPort"),
        (a.local_redirect, "LocalRedirect"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    match chosen.as_slice() {
        [] => Ok("ClusterIP"),
        [one] => Ok(one),
        many => bail!(
            "only one service type may be given, got {}",
            many.join(", ")
        ),
    }
}

fn update(ctx: &Ctx, a: &UpdateArgs) -> anyhow::Result<ExitCode> {
    let id = u16::try_from(a.id)
        .ok()
        .filter(|i| *i != 0)
        .with_context(|| format!("invalid --id {}: expected 1..65535", a.id))?;
    let (ip, port) = ip_port(&a.frontend, "frontend")?;
    if !a.states.is_empty() && a.states.len() != 1 && a.states.len() != a.backends.len() {
        bail!(
            "--states has {} entries for {} backends: give one per backend or one for all",
            a.states.len(),
            a.backends.len()
        );
    }
    let mut backends = Vec::new();
    for (i, b) in a.backends.iter().filter(|b| !b.is_empty()).enumerate() {
        let (ip, port) = ip_port(b, "backend")?;
        let state = a
            .states
            .get(i)
            .or(a.states.first())
            .cloned()
            .unwrap_or_default();
        backends.push(BackendAddress {
            ip,
            port,
            state,
            ..Default::default()
        });
    }
    let spec = ServiceSpec {
        id: i64::from(id),
        frontend_address: FrontendAddress {
            ip,
            port,
            ..Default::default()
        },
        backend_addresses: backends,
        flags: Some(ServiceSpecFlags {
            kind: service_type(a)?.into(),
            ..Default::default()
        }),
        session_affinity_timeout: a.affinity_timeout,
        ..Default::default()
    };
    let client = ctx.client()?;
    let body = serde_json::to_vec(&spec)?;
    let resp = client.raw("PUT", &format!("/service/{id}"), &[], Some(&body))?;
    match resp.status {
        201 => println!("Creating new service with id '{id}'"),
        200 => println!("Updating existing service with id '{id}'"),
        status => {
            let msg = serde_json::from_slice::<String>(&resp.body)
                .unwrap_or_else(|_| String::from_utf8_lossy(&resp.body).into_owned());
            bail!("Cannot add/update service: [{status}] {msg}");
        }
    }
    println!("Added {} backends", spec.backend_addresses.len());
    Ok(ExitCode::SUCCESS)
}

/// A frontend as Cilium prints it: `IP:port`, `/TCP` (`/UDP`, `/SCTP`)
/// for a frontend of one protocol, `/i` for the internal scope.
pub fn frontend_name(f: &api::service::FrontendAddress) -> String {
    let proto = if f.protocol.is_any() {
        String::new()
    } else {
        format!("/{}", lb::proto_name(f.protocol.number()))
    };
    let scope = if f.scope == "internal" { "/i" } else { "" };
    format!("{}{proto}{scope}", address(&f.ip, f.port))
}

/// `ID  Frontend  Service Type  Backend`, one backend per row (also a
/// section of `debuginfo`).
pub fn list_rows(services: &[Service]) -> Vec<Vec<String>> {
    let mut rows = vec![row!["ID", "Frontend", "Service Type", "Backend"]];
    for svc in services {
        let s = &svc.status.realized;
        let f = &s.frontend_address;
        let frontend = frontend_name(f);
        let kind = s.flags.as_ref().map(|f| f.kind.clone()).unwrap_or_default();
        if s.backend_addresses.is_empty() {
            rows.push(row![s.id, frontend, kind, ""]);
        }
        for (i, b) in s.backend_addresses.iter().enumerate() {
            let preferred = if b.preferred { " (preferred)" } else { "" };
            let backend = format!(
                "{} => {} ({}){preferred}",
                i + 1,
                address(&b.ip, b.port),
                b.state
            );
            if i == 0 {
                rows.push(row![s.id, frontend, kind, backend]);
            } else {
                rows.push(row!["", "", "", backend]);
            }
        }
    }
    rows
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Update(a) => update(ctx, a),
        Command::List(args) => {
            let mut services: Vec<Service> = ctx.client()?.get_json("/service", &[])?;
            services.sort_by_key(|s| s.spec.id);
            if args.output.is_some() {
                print_json(&services)?;
            } else {
                print(&list_rows(&services));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { id, args } => {
            let svc: Service = ctx.client()?.get_json(&format!("/service/{id}"), &[])?;
            if args.output.is_some() {
                print_json(&svc)?;
            } else {
                print(&list_rows(&[svc]));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Delete { id, all } => {
            let client = ctx.client()?;
            let ids: Vec<i64> = match (id, all) {
                (Some(id), false) => vec![*id as i64],
                (None, true) => client
                    .get_json::<Vec<Service>>("/service", &[])?
                    .iter()
                    .map(|s| s.spec.id)
                    .collect(),
                _ => bail!("give a service ID or --all"),
            };
            for id in ids {
                client.call("DELETE", &format!("/service/{id}"), &[], None)?;
                println!("Service {id} deleted successfully");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
