//! `cilium endpoint list|get|health|log|config|labels`.

use crate::table::{print, print_json, ListArgs, Output};
use crate::{row, Ctx};
use api::endpoint::Endpoint;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List all endpoints
    #[command(alias = "ls")]
    List(ListArgs),
    /// Display endpoint information
    Get {
        /// Endpoint ID ([prefix:]value, e.g. 42, pod-name:default/web)
        id: String,
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<Output>,
    },
    /// View endpoint health
    Health {
        /// Endpoint ID
        id: String,
        #[command(flatten)]
        args: ListArgs,
    },
    /// View endpoint status log
    Log {
        /// Endpoint ID
        id: String,
        #[command(flatten)]
        args: ListArgs,
    },
    /// View endpoint configuration
    Config {
        /// Endpoint ID
        id: String,
        #[command(flatten)]
        args: ListArgs,
    },
    /// Show the labels of an endpoint
    Labels {
        /// Endpoint ID
        id: String,
    },
    /// Disconnect an endpoint from the network
    Disconnect {
        /// Endpoint ID
        id: Option<String>,
    },
}

/// The reserved identity names an endpoint ID may be (1.16's
/// `requireEndpointID`), and the prefixes of an `<prefix>:<value>` ID.
const RESERVED_NAMES: &[&str] = &[
    "host",
    "world",
    "world-ipv4",
    "world-ipv6",
    "unmanaged",
    "health",
    "init",
    "remote-node",
    "kube-apiserver",
    "ingress",
    "overlay-to-encrypt",
];
const ID_PREFIXES: &[&str] = &[
    "cilium-local",
    "cilium-global",
    "cni-attachment-id",
    "container-id",
    "docker-endpoint",
    "container-name",
    "cep-name",
    "pod-name",
    "ipv4",
    "ipv6",
];

/// `endpoint disconnect <id>`: the endpoint is deleted by the agent, as
/// the CNI plugin's DEL would.
fn disconnect(client: &api::client::Client, id: Option<&str>) -> anyhow::Result<ExitCode> {
    let Some(id) = id else {
        return Ok(crate::usage_error(
            &["endpoint", "disconnect"],
            "Missing endpoint id argument",
        ));
    };
    if !RESERVED_NAMES.contains(&id) {
        if let Some((prefix, _)) = id.split_once(':') {
            if !ID_PREFIXES.contains(&prefix) {
                anyhow::bail!(
                    "Cannot parse endpoint id \"{id}\": unknown endpoint ID prefix \"{prefix}\""
                );
            }
        }
    }
    let path = format!("/endpoint/{}", api::client::escape(id));
    match client.call("DELETE", &path, &[], None) {
        Ok(_) => {
            println!("Endpoint {id} successfully disconnected");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let swagger = |code: u16, op: &str| {
                format!("[DELETE /endpoint/{{id}}][{code}] deleteEndpointId{op} ")
            };
            let why = match &e {
                api::ClientError::Api {
                    status: 400,
                    message,
                } => {
                    format!("{} {message}", swagger(400, "Invalid"))
                }
                api::ClientError::Api { status: 403, .. } => swagger(403, "Forbidden"),
                api::ClientError::Api { status: 404, .. } => swagger(404, "NotFound"),
                api::ClientError::Api { status: 429, .. } => swagger(429, "TooManyRequests"),
                api::ClientError::Api { status, .. } => {
                    format!("[DELETE /endpoint/{{id}}] DeleteEndpointID (status {status}): {{}}")
                }
                other => other.to_string(),
            };
            anyhow::bail!("Cannot disconnect endpoint {id}: {why}\n")
        }
    }
}

/// `GET /endpoint/{id}/<what>` as JSON.
fn sub(client: &api::client::Client, id: &str, what: &str) -> anyhow::Result<serde_json::Value> {
    Ok(client.get_json(
        &format!("/endpoint/{}/{what}", api::client::escape(id)),
        &[],
    )?)
}

/// Cilium's `Key : Value` lines of an options map, sorted.
fn dump_options(opts: &serde_json::Value) {
    let Some(map) = opts.as_object() else {
        return;
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let v = map[k]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| map[k].to_string());
        println!("{k:<34}: {v}");
    }
}

fn endpoint_detail(ctx: &Ctx, cmd: &Command) -> anyhow::Result<()> {
    let client = ctx.client()?;
    match cmd {
        Command::Health { id, args } => {
            let h = sub(&client, id, "healthz")?;
            if args.output.is_some() {
                return print_json(&h);
            }
            let field = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            println!("Overall Health:   {}", field("overallHealth"));
            println!("BPF Health:       {}", field("bpf"));
            println!("Policy Health:    {}", field("policy"));
            let connected = if h["connected"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            };
            println!("Connected:        {connected}");
        }
        Command::Log { id, args } => {
            let log = sub(&client, id, "log")?;
            if args.output.is_some() {
                return print_json(&log);
            }
            let mut rows = vec![row!["Timestamp", "Status", "State", "Message"]];
            for e in log.as_array().into_iter().flatten() {
                let f = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
                rows.push(row![f("timestamp"), f("code"), f("state"), f("message")]);
            }
            print(&rows);
        }
        Command::Config { id, args } => {
            let cfg = sub(&client, id, "config")?;
            if args.output.is_some() {
                return print_json(&cfg);
            }
            dump_options(&cfg["immutable"]);
            dump_options(&cfg["realized"]["options"]);
        }
        Command::Labels { id } => {
            let l = sub(&client, id, "labels")?;
            let status = &l["status"];
            let mut rows = Vec::new();
            for v in status["security-relevant"].as_array().into_iter().flatten() {
                rows.push(row![v.as_str().unwrap_or_default(), "Enabled"]);
            }
            for v in status["disabled"].as_array().into_iter().flatten() {
                rows.push(row![v.as_str().unwrap_or_default(), "Disabled"]);
            }
            print(&rows);
        }
        Command::List(_) | Command::Get { .. } | Command::Disconnect { .. } => {
            unreachable!("handled by run")
        }
    }
    Ok(())
}

fn enforcement(policy_enabled: &str, dir: &str) -> &'static str {
    if policy_enabled == "both" || policy_enabled == dir {
        "Enabled"
    } else {
        "Disabled"
    }
}

/// `endpoint list`'s table (also a section of `debuginfo`).
pub fn list_rows(eps: &[Endpoint]) -> Vec<Vec<String>> {
    let mut rows = vec![
        row![
            "ENDPOINT",
            "POLICY (ingress)",
            "POLICY (egress)",
            "IDENTITY",
            "LABELS (source:key[=value])",
            "IPv6",
            "IPv4",
            "STATUS"
        ],
        row!["", "ENFORCEMENT", "ENFORCEMENT", "", "", "", "", ""],
    ];
    for ep in eps {
        let st = &ep.status;
        let policy = &st.policy.realized.policy_enabled;
        let identity = st
            .identity
            .as_ref()
            .map_or(String::new(), |i| i.id.to_string());
        let labels = st
            .identity
            .as_ref()
            .map(|i| i.labels.clone())
            .unwrap_or_default();
        let net = st.networking.clone().unwrap_or_default();
        let addr = net.addressing.first().cloned().unwrap_or_default();
        rows.push(row![
            ep.id,
            enforcement(policy, "ingress"),
            enforcement(policy, "egress"),
            identity,
            labels.first().cloned().unwrap_or_default(),
            addr.ipv6,
            addr.ipv4,
            st.state
        ]);
        for extra in labels.iter().skip(1) {
            rows.push(row!["", "", "", "", extra, "", "", ""]);
        }
    }
    rows
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::List(ListArgs { output }) => {
            let mut eps: Vec<Endpoint> = client.get_json("/endpoint", &[])?;
            eps.sort_by_key(|e| e.id);
            if output.is_some() {
                print_json(&eps)?;
                return Ok(ExitCode::SUCCESS);
            }
            print(&list_rows(&eps));
        }
        Command::Get { id, output: _ } => {
            let ep: Endpoint =
                client.get_json(&format!("/endpoint/{}", api::client::escape(id)), &[])?;
            print_json(&vec![ep])?;
        }
        Command::Disconnect { id } => return disconnect(&client, id.as_deref()),
        other => endpoint_detail(ctx, other)?,
    }
    Ok(ExitCode::SUCCESS)
}
