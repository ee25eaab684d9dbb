//! `cilium fqdn cache list` and `cilium fqdn names`: the DNS proxy's view.
//! The agent runs no DNS proxy: its cache is empty (a 404, which 1.16
//! takes for an empty list) and it polls no names.

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
            let base = if endpoint.is_empty() {
                "/fqdn/cache".to_owned()
            } else {
                format!("/fqdn/cache/{}", api::client::escape(endpoint))
            };
            let query: Vec<(&str, &str)> = [("matchpattern", matchpattern), ("source", source)]
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k, v.as_str()))
                .collect();
            let path = api::client::with_query(&base, &query);
            let lookups: Vec<serde_json::Value> = match client.get_json(&path, &[]) {
                Ok(l) => l,
                Err(e) if e.status() == Some(404) => Vec::new(),
                Err(e) => anyhow::bail!("Error: {e}\n"),
            };
            if args.output.is_some() {
                print_json(&lookups)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut text = String::from("Endpoint\tSource\tFQDN\tTTL\tExpirationTime\tIPs\t\n");
            for l in &lookups {
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
            print!("{}", tabwrite(&text, 5, 3));
        }
    }
    Ok(ExitCode::SUCCESS)
}
