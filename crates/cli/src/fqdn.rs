//! `cilium fqdn cache list|clean` and `cilium fqdn names`: the DNS proxy's
//! view. The agent runs no DNS proxy: its cache is empty (a 404, which
//! 1.16 takes for an empty list), clears at once, and it polls no names.

use crate::table::{print_json, tabwrite, ListArgs};
use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Manage fqdn proxy cache
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Show internal state Cilium has for DNS names / regexes
    Names,
}

#[derive(clap::Subcommand)]
pub enum CacheCommand {
    /// List fqdn cache contents
    List {
        /// List cache entries with FQDN that match matchpattern
        #[arg(short = 'p', long, default_value = "")]
        matchpattern: String,
        /// List cache entries for a specific endpoint id
        #[arg(short = 'e', long, default_value = "")]
        endpoint: String,
        /// List cache entries from a specific source (lookup, connection)
        #[arg(short = 's', long, default_value = "")]
        source: String,
        #[command(flatten)]
        args: ListArgs,
    },
    /// Clean fqdn cache
    Clean {
        /// Skip confirmation
        #[arg(short = 'f', long)]
        force: bool,
        /// Delete cache entries with FQDNs that match matchpattern
        #[arg(short = 'p', long, default_value = "")]
        matchpattern: String,
    },
}

/// The cache's entries (for one endpoint, matching a pattern, from one
/// source), none when the agent has none (its 404).
fn lookups(
    client: &api::Client,
    endpoint: &str,
    matchpattern: &str,
    source: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let base = if endpoint.is_empty() {
        "/fqdn/cache".to_owned()
    } else {
        format!("/fqdn/cache/{}", api::client::escape(endpoint))
    };
    let query: Vec<(&str, &str)> = [("matchpattern", matchpattern), ("source", source)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let path = api::client::with_query(&base, &query);
    match client.get_json(&path, &[]) {
        Ok(l) => Ok(l),
        Err(e) if e.status() == Some(404) => Ok(Vec::new()),
        Err(e) => anyhow::bail!("Error: {e}\n"),
    }
}

fn table(lookups: &[serde_json::Value]) -> String {
    let mut text = String::from("Endpoint\tSource\tFQDN\tTTL\tExpirationTime\tIPs\t\n");
    for l in lookups {
        let s = |k: &str| l[k].as_str().unwrap_or("").to_owned();
        let ips: Vec<&str> = l["ips"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t\n",
            l["endpoint-id"].as_i64().unwrap_or(0),
            s("source"),
            s("fqdn"),
            l["ttl"].as_i64().unwrap_or(0),
            s("expiration-time"),
            ips.join(",")
        ));
    }
    tabwrite(&text, 5, 3)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::Names => {
            let names: serde_json::Value = client
                .get_json("/fqdn/names", &[])
                .map_err(|e| anyhow::anyhow!("Error: {e}\n"))?;
            print_json(&names)?;
        }
        Command::Cache(CacheCommand::List {
            matchpattern,
            endpoint,
            source,
            args,
        }) => {
            let lookups = lookups(&client, endpoint, matchpattern, source)?;
            if args.output.is_some() {
                print_json(&lookups)?;
            } else {
                print!("{}", table(&lookups));
            }
        }
        Command::Cache(CacheCommand::Clean {
            force,
            matchpattern,
        }) => {
            if !force {
                println!("Following cache entries are going to be deleted:");
                print!("{}", table(&lookups(&client, "", matchpattern, "")?));
                if !crate::confirm(
                    "The command is non-revertible, do you want to continue [y/N]?\n",
                )? {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            let query: Vec<(&str, &str)> = if matchpattern.is_empty() {
                Vec::new()
            } else {
                vec![("matchpattern", matchpattern.as_str())]
            };
            let path = api::client::with_query("/fqdn/cache", &query);
            client
                .call("DELETE", &path, &[], None)
                .map_err(|e| anyhow::anyhow!("Error: {e}\n"))?;
            println!("FQDN proxy cache cleared");
        }
    }
    Ok(ExitCode::SUCCESS)
}
