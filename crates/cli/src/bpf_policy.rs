//! `cilium bpf policy get <endpoint>|--all`: an endpoint's policy map as
//! the datapath reads it, with each peer identity's labels.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use abi::policy::POLICY_FLAG_DENY;
use datapath::policymap::PolicyMap;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List contents of a policy BPF map
    Get {
        /// Endpoint ID
        endpoint: Option<u16>,
        /// Dump all policy maps
        #[arg(long)]
        all: bool,
        /// Do not resolve IDs
        #[arg(short = 'n', long)]
        numeric: bool,
        #[command(flatten)]
        args: ListArgs,
    },
    /// List contents of every policy BPF map
    #[command(alias = "ls")]
    List(ListArgs),
}

fn proto_name(p: u8) -> String {
    match p {
        0 => "ANY".into(),
        6 => "TCP".into(),
        17 => "UDP".into(),
        132 => "SCTP".into(),
        1 => "ICMP".into(),
        n => n.to_string(),
    }
}

/// The endpoint IDs that have a policy map pinned.
fn endpoints(ctx: &Ctx) -> anyhow::Result<Vec<u16>> {
    let dir = ctx.bpf_root.join(abi::maps::GLOBALS_DIR);
    let mut ids: Vec<u16> = std::fs::read_dir(&dir)?
        .flatten()
        .filter_map(|e| datapath::policymap::endpoint_of(e.file_name().to_str()?))
        .collect();
    ids.sort();
    Ok(ids)
}

/// Labels of each identity, from the agent when it answers.
fn identity_labels(ctx: &Ctx) -> BTreeMap<u32, Vec<String>> {
    let mut out = BTreeMap::from([(0, vec!["reserved:unknown".to_owned()])]);
    let listed = ctx.client().ok().and_then(|c| {
        c.get_json::<Vec<api::endpoint::Identity>>("/identity", &[])
            .ok()
    });
    for identity in listed.into_iter().flatten() {
        out.insert(identity.id, identity.labels);
    }
    out
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Get {
            endpoint,
            all,
            numeric,
            args,
        } => {
            let ids = match (endpoint, all) {
                (Some(id), false) => vec![*id],
                (None, true) => endpoints(ctx)?,
                _ => anyhow::bail!("give an endpoint ID or --all"),
            };
            dump(ctx, &ids, *numeric, args, *all)
        }
        Command::List(args) => {
            let ids = endpoints(ctx)?;
            if ids.is_empty() {
                println!("no maps found");
                return Ok(ExitCode::SUCCESS);
            }
            dump(ctx, &ids, false, args, true)
        }
    }
}

/// The maps of `ids`, each headed by its endpoint and path when `headed`
/// (`--all` and `list`).
fn dump(
    ctx: &Ctx,
    ids: &[u16],
    numeric: bool,
    args: &ListArgs,
    headed: bool,
) -> anyhow::Result<ExitCode> {
    let labels = if numeric {
        Default::default()
    } else {
        identity_labels(ctx)
    };
    let mut json = serde_json::Map::new();
    for &id in ids {
        let map = PolicyMap::pinned(&ctx.bpf_root, id)
            .map_err(|e| anyhow::anyhow!("endpoint {id} has no policy map: {e}"))?;
        let mut entries = map.entries()?;
        entries.sort_by_key(|(k, _)| (k.egress, k.sec_label, k.protocol, k.dport.get()));
        let mut rows = vec![row![
            "POLICY",
            "DIRECTION",
            if numeric {
                "IDENTITY"
            } else {
                "LABELS (source:key[=value])"
            },
            "PORT/PROTO",
            "PROXY PORT",
            "AUTH TYPE",
            "BYTES",
            "PACKETS",
            "PREFIX"
        ]];
        let mut list = Vec::new();
        for (k, v) in &entries {
            let verdict = if v.flags & POLICY_FLAG_DENY != 0 {
                "Deny"
            } else {
                "Allow"
            };
            let dir = if k.egress != 0 { "Egress" } else { "Ingress" };
            let port_prefix = k.prefixlen.saturating_sub(48);
            let port = if k.protocol == 0 {
                "ANY".to_owned()
            } else if port_prefix == 0 {
                format!("ANY/{}", proto_name(k.protocol))
            } else {
                format!("{}/{}", k.dport.get(), proto_name(k.protocol))
            };
            let ls = match labels.get(&k.sec_label) {
                Some(ls) => ls.clone(),
                None if numeric => vec![k.sec_label.to_string()],
                None => vec![format!("identity {}", k.sec_label)],
            };
            for (i, l) in ls.iter().enumerate() {
                if i == 0 {
                    rows.push(row![
                        verdict,
                        dir,
                        l,
                        port,
                        "NONE",
                        "disabled",
                        v.bytes,
                        v.packets,
                        port_prefix
                    ]);
                } else {
                    rows.push(row!["", "", l, "", "", "", "", "", ""]);
                }
            }
            list.push(serde_json::json!({
                "deny": v.flags & POLICY_FLAG_DENY != 0,
                "egress": k.egress != 0,
                "identity": k.sec_label,
                "protocol": k.protocol,
                "port": k.dport.get(),
                "prefix": port_prefix,
                "bytes": v.bytes,
                "packets": v.packets,
            }));
        }
        if args.output.is_some() {
            json.insert(id.to_string(), list.into());
        } else {
            if headed {
                println!("Endpoint ID: {id}");
                println!(
                    "Path: {}",
                    datapath::policymap::pin_path(&ctx.bpf_root, id).display()
                );
                println!();
            }
            print(&rows);
            if headed {
                println!();
            }
        }
    }
    if args.output.is_some() {
        print_json(&serde_json::Value::Object(json))?;
    }
    Ok(ExitCode::SUCCESS)
}
