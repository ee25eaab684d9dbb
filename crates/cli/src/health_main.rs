//! `cilium-health`: what the agent's prober found between this node, the
//! other nodes and their health endpoints (Cilium's health API client).

mod health_report;
// shared with `cilium`, which uses the rest of it
#[allow(dead_code)]
mod table;

use api::health::{HealthResponse, HealthStatusResponse};
use clap::{Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "cilium-health",
    about = "Cilium Health Client",
    disable_version_flag = true
)]
struct Cli {
    /// URI to cilium-health server API
    #[arg(short = 'H', long = "host", global = true, env = "CILIUM_HEALTH_SOCK")]
    host: Option<String>,
    /// Enable debug messages
    #[arg(short = 'D', long = "debug", global = true)]
    debug: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Display cilium connectivity to other nodes
    #[command(visible_alias = "connectivity")]
    Status {
        /// Synchronously probe connectivity status
        #[arg(long)]
        probe: bool,
        /// Print one node per line
        #[arg(long)]
        succinct: bool,
        /// Print more information in results
        #[arg(long)]
        verbose: bool,
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<table::Output>,
    },
    /// Display local cilium agent status
    #[command(visible_aliases = ["inspect", "show"])]
    Get {
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<table::Output>,
    },
    /// Check whether the cilium-health API is up
    Ping,
}

fn client(host: Option<&str>) -> Result<api::Client, String> {
    let raw = host.unwrap_or(api::health::DEFAULT_SOCKET);
    let path = raw.strip_prefix("unix://").unwrap_or(raw);
    if !path.starts_with('/') {
        return Err(format!(
            "invalid host {raw:?}: expected unix:///path/to/health.sock"
        ));
    }
    // a synchronous probe waits out the HTTP timeout of unreachable nodes
    Ok(api::Client::health(path).with_timeout(Duration::from_secs(90)))
}

/// Cilium's `Fatalf`: `Error: <msg>` and exit 1.
fn fatal(msg: String) -> ExitCode {
    eprintln!("Error: {msg}");
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = cli.debug;
    let client = match client(cli.host.as_deref()) {
        Ok(c) => c,
        Err(e) => return fatal(e),
    };
    match cli.command {
        Command::Status {
            probe,
            succinct,
            verbose,
            output,
        } => {
            let got: Result<HealthStatusResponse, _> = if probe {
                client
                    .call("PUT", "/status/probe", &[], None)
                    .and_then(|b| {
                        serde_json::from_slice(&b)
                            .map_err(|e| api::ClientError::Malformed(e.to_string()))
                    })
            } else {
                client.get_json("/status", &[])
            };
            let r = match got {
                Ok(r) => r,
                Err(e) if probe => return fatal(format!("Cannot get status/probe: {e}")),
                Err(e) => return fatal(format!("Cannot get status: {e}")),
            };
            if output.is_some() {
                return json(&r);
            }
            let detail = health_report::Detail {
                all: true,
                succinct,
                verbose,
                max_lines: 0,
            };
            print!(
                "{}",
                table::tabwrite(&health_report::format(&r, detail), 2, 3)
            );
            ExitCode::SUCCESS
        }
        Command::Get { output } => {
            let h: HealthResponse = match client.get_json("/healthz", &[]) {
                Ok(h) => h,
                Err(e) => return fatal(format!("Cannot get health for local instance: {e}")),
            };
            if output.is_some() {
                return json(&h);
            }
            let load = h.system_load.unwrap_or_default();
            let mut text = format!(
                "Daemon uptime:\t{}\nNode load:\t{} {} {}\n",
                h.uptime, load.last1min, load.last5min, load.last15min
            );
            if let Some(c) = &h.cilium.cilium {
                text.push_str(&format!("Cilium:\t{}\t{}\n", c.state, c.msg));
            }
            if let Some(c) = h
                .cilium
                .cluster
                .as_ref()
                .and_then(|c| c.cilium_health.as_ref())
            {
                text.push_str(&format!("Cilium health daemon:\t{}\t{}\n", c.state, c.msg));
            }
            print!("{}", table::tabwrite(&text, 2, 3));
            ExitCode::SUCCESS
        }
        Command::Ping => match client.call("GET", "/healthz", &[], None) {
            Ok(_) => {
                println!("OK");
                ExitCode::SUCCESS
            }
            Err(e) => fatal(format!("Cannot ping: {e}")),
        },
    }
}

fn json<T: serde::Serialize>(value: &T) -> ExitCode {
    match table::print_json(value) {
        // Cilium prints an empty line after the document
        Ok(()) => {
            println!();
            ExitCode::SUCCESS
        }
        Err(e) => fatal(e.to_string()),
    }
}
