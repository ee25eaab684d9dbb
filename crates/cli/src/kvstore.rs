//! `cilium kvstore get|set|delete`: the kvstore the agent uses, with the
//! agent's own kvstore configuration unless told another. The client takes
//! no lease: `get` leaves nothing behind, `set` writes a plain key.

use crate::table::{print_json, Output};
use crate::Ctx;
use base64::Engine;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    store: StoreFlags,
}

/// Which kvstore, when not the agent's.
#[derive(clap::Args)]
pub struct StoreFlags {
    /// Key-Value Store type
    #[arg(long, global = true, default_value = "")]
    kvstore: String,
    /// Key-Value Store options (k=v, repeat for more)
    #[arg(long = "kvstore-opt", global = true, value_parser = parse_opt)]
    kvstore_opt: Vec<(String, String)>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Retrieve a key
    Get {
        key: Option<String>,
        /// Recursive lookup
        #[arg(long)]
        recursive: bool,
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<Output>,
    },
    /// Set a key and value
    Set {
        /// Key
        #[arg(long, default_value = "")]
        key: String,
        /// Value
        #[arg(long, default_value = "")]
        value: String,
        /// Ignored, as 1.16 ignores them (the key is --key)
        ignored: Vec<String>,
    },
    /// Delete a key
    Delete {
        key: Option<String>,
        /// Recursive lookup
        #[arg(long)]
        recursive: bool,
    },
}

fn parse_opt(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{s:?} is not key=value"))
}

/// Cilium's `kvstore.Value` in `-o json`.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct Value {
    data: String,
    mod_revision: i64,
    #[serde(rename = "LeaseID")]
    lease_id: i64,
    #[serde(rename = "SessionID")]
    session_id: String,
}

/// The store's type and options: the flags', completed from the agent's.
fn configuration(
    ctx: &Ctx,
    flags: &StoreFlags,
) -> anyhow::Result<(String, BTreeMap<String, String>)> {
    let mut kind = flags.kvstore.clone();
    let mut opts: BTreeMap<String, String> = flags.kvstore_opt.iter().cloned().collect();
    if kind.is_empty() || opts.is_empty() {
        let cfg: api::models::DaemonConfiguration = ctx
            .client()?
            .get_json("/config", &[])
            .map_err(|e| anyhow::anyhow!("Unable to retrieve cilium configuration: {e}"))?;
        let agent = cfg.status.kvstore_configuration;
        if kind.is_empty() {
            kind = agent.kind;
        }
        if opts.is_empty() {
            opts = agent.options;
        }
    }
    Ok((kind, opts))
}

/// etcd's client URLs from `etcd.address` or the `endpoints` of the file
/// `etcd.config` names.
fn endpoints(opts: &BTreeMap<String, String>) -> anyhow::Result<Vec<String>> {
    if let Some(addr) = opts.get("etcd.address") {
        return Ok(addr.split(',').map(str::trim).map(str::to_owned).collect());
    }
    if let Some(path) = opts.get("etcd.config") {
        #[derive(serde::Deserialize)]
        struct File {
            endpoints: Vec<String>,
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("Unable to setup kvstore: reading {path}: {e}"))?;
        let f: File = serde_yaml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("Unable to setup kvstore: {path}: {e}"))?;
        return Ok(f.endpoints);
    }
    anyhow::bail!("Unable to setup kvstore: invalid kvstore configuration, see log for details")
}

/// The store the configuration names, connected without a session.
pub async fn connect(ctx: &Ctx, flags: &StoreFlags) -> anyhow::Result<kvstore::Etcd> {
    let (kind, opts) = configuration(ctx, flags)?;
    if kind != "etcd" {
        anyhow::bail!(
            "Unable to setup kvstore: unknown key-value store type {kind:?}. See cilium.link/err-kvstore for details"
        );
    }
    Ok(kvstore::Etcd::connect_reader(&endpoints(&opts)?).await?)
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    let (key, recursive, output) = match &args.command {
        Command::Get {
            key,
            recursive,
            output,
        } => (key.clone().unwrap_or_default(), *recursive, *output),
        Command::Set { key, value, .. } => {
            if key.is_empty() {
                anyhow::bail!("--key attribute reqiured");
            }
            return crate::block_on(async {
                let etcd = connect(ctx, &args.store).await?;
                etcd.put(key, value.as_bytes())
                    .await
                    .map_err(|e| anyhow::anyhow!("Unable to set key: {e}"))?;
                Ok(ExitCode::SUCCESS)
            });
        }
        Command::Delete { key, recursive } => {
            let Some(key) = key else {
                anyhow::bail!("Please specify a key or key prefix to delete");
            };
            return crate::block_on(async {
                let etcd = connect(ctx, &args.store).await?;
                if *recursive {
                    etcd.delete_prefix(key)
                        .await
                        .map_err(|e| anyhow::anyhow!("Unable to delete keys: {e}"))?;
                } else {
                    etcd.delete(key)
                        .await
                        .map_err(|e| anyhow::anyhow!("Unable to delete key: {e}"))?;
                }
                Ok(ExitCode::SUCCESS)
            });
        }
    };
    crate::block_on(async move {
        let etcd = connect(ctx, &args.store).await?;
        if recursive {
            let entries = etcd
                .entries(&key)
                .await
                .map_err(|e| anyhow::anyhow!("Unable to list keys: {e}"))?;
            if output.is_some() {
                let map: BTreeMap<String, Value> = entries
                    .into_iter()
                    .map(|e| {
                        let v = Value {
                            data: base64::engine::general_purpose::STANDARD.encode(&e.value),
                            mod_revision: e.mod_revision,
                            lease_id: e.lease,
                            session_id: String::new(),
                        };
                        (e.key, v)
                    })
                    .collect();
                print_json(&map)?;
            } else {
                for e in entries {
                    println!("{} => {}", e.key, String::from_utf8_lossy(&e.value));
                }
            }
        } else {
            let value = etcd
                .get(&key)
                .await
                .map_err(|e| anyhow::anyhow!("Unable to retrieve key {key}: {e}"))?
                .ok_or_else(|| anyhow::anyhow!("key {key} is not found"))?;
            let value = String::from_utf8_lossy(&value);
            if output.is_some() {
                print_json(&value)?;
            } else {
                println!("{key} => {value}");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
