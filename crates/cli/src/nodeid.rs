//! `cilium nodeid list`: the IDs the agent gave other nodes, and
//! `cilium bpf nodeid list` / `cilium bpf auth list|flush`: the maps that
//! hold them and the authentications keyed by them, as 1.16 prints them.

use crate::table::{print_json, tabwrite, ListArgs};
use crate::Ctx;
use api::models::NodeId;
use datapath::maps::{AuthMap, NodeMapV2};
use datapath::GlobalMap;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List node IDs and the associated IP addresses
    #[command(alias = "ls")]
    List(ListArgs),
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List(args) = cmd;
    let mut ids: Vec<NodeId> = ctx.client()?.get_json("/node/ids", &[])?;
    if args.output.is_some() {
        print_json(&ids)?;
        return Ok(ExitCode::SUCCESS);
    }
    ids.sort_by_key(|n| n.id);
    // 1.16's header names an SPI column its rows do not fill
    let mut text = String::from("NODE ID\tIP ADDRESSES\tSPI\n");
    for n in &ids {
        for (i, ip) in n.ips.iter().enumerate() {
            if i == 0 {
                text.push_str(&format!("0x{:x}\t{ip}\n", n.id));
            } else {
                text.push_str(&format!("\t{ip}\n"));
            }
        }
    }
    print!("{}", tabwrite(&text, 5, 3));
    Ok(ExitCode::SUCCESS)
}

/// Opens a map 1.16 may not have created yet: None (with 1.16's note)
/// when it is not pinned.
fn open_or_note<M: GlobalMap>(ctx: &Ctx, what: &str) -> anyhow::Result<Option<M>> {
    if !M::pin_path(&ctx.bpf_root).exists() {
        eprintln!("Cannot find {what} bpf map");
        return Ok(None);
    }
    M::open(&ctx.bpf_root)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("Cannot load {what} bpf map: {e}"))
}

/// `bpf nodeid list`.
pub fn bpf_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let Some(map) = open_or_note::<NodeMapV2>(ctx, "node")? else {
        return Ok(ExitCode::SUCCESS);
    };
    let entries: Vec<(String, u16, u8)> = map
        .entries()?
        .into_iter()
        .filter_map(|(k, v)| Some((k.addr()?.to_string(), v.id, v.spi)))
        .collect();
    if args.output.is_some() {
        let json: Vec<_> = entries
            .iter()
            .map(|(ip, id, spi)| serde_json::json!({"ID": id, "Address": ip, "SPI": spi}))
            .collect();
        print_json(&json)?;
    } else if entries.is_empty() {
        eprintln!("No entries found.");
    } else {
        let mut text = String::from("NODE ID\tIP ADDRESSES\tSPI\n");
        for (ip, id, spi) in &entries {
            text.push_str(&format!("0x{id:x}\t{ip}\t{spi}\n"));
        }
        print!("{}", tabwrite(&text, 5, 3));
    }
    Ok(ExitCode::SUCCESS)
}

/// 1.16's names of `auth_type` (pkg/policy AuthType).
fn auth_type(t: u8) -> String {
    match t {
        0 => "disabled".into(),
        1 => "spire".into(),
        2 => "test-always-fail".into(),
        n => format!("Unknown-auth-type-{n}"),
    }
}

/// `bpf auth flush`: every authentication forgotten (there are none
/// here: no policy asks for mutual authentication).
pub fn bpf_auth_flush(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let Some(map) = open_or_note::<AuthMap>(ctx, "auth")? else {
        return Ok(ExitCode::SUCCESS);
    };
    println!("Flushed {} entries", map.clear()?);
    Ok(ExitCode::SUCCESS)
}

/// `bpf auth list`.
pub fn bpf_auth_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let Some(map) = open_or_note::<AuthMap>(ctx, "auth")? else {
        return Ok(ExitCode::SUCCESS);
    };
    let entries = map.entries()?;
    // utime units are nanoseconds >> 9
    let expiry = |utime: u64| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(utime << 9);
        api::timefmt::rfc3339(t)
    };
    if args.output.is_some() {
        let json: Vec<_> = entries
            .iter()
            .map(|(k, v)| {
                serde_json::json!({
                    "LocalIdentity": k.local_identity,
                    "RemoteIdentity": k.remote_identity,
                    "RemoteNodeID": k.remote_node_id,
                    "AuthType": k.auth_type,
                    "Expiration": expiry(v.expiration),
                })
            })
            .collect();
        print_json(&json)?;
    } else if entries.is_empty() {
        eprintln!("No entries found.");
    } else {
        let mut text =
            String::from("SRC IDENTITY\tDST IDENTITY\tREMOTE NODE ID\tAUTH TYPE\tEXPIRATION\n");
        for (k, v) in &entries {
            let (local, remote, node) = (k.local_identity, k.remote_identity, k.remote_node_id);
            text.push_str(&format!(
                "{local}\t{remote}\t{node}\t{}\t{}\n",
                auth_type(k.auth_type),
                expiry(v.expiration)
            ));
        }
        print!("{}", tabwrite(&text, 5, 3));
    }
    Ok(ExitCode::SUCCESS)
}
