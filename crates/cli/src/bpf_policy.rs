//! `cilium bpf policy get <endpoint>|--all`: an endpoint's policy map as
//! the datapath reads it, with each peer identity's labels.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use abi::policy::{PolicyEntry, PolicyKey, POLICY_FLAG_DENY};
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
    /// Add/update policy entry
    Add(ChangeArgs),
    /// Delete a policy entry
    Delete(ChangeArgs),
}

/// `<endpoint id> <traffic-direction> <identity> [port/proto]`.
#[derive(clap::Args)]
pub struct ChangeArgs {
    args: Vec<String>,
    /// Sets deny mode
    #[arg(long)]
    deny: bool,
}

/// 1.16's names of the protocols a policy key may carry.
fn proto_number(name: &str) -> Option<u8> {
    match name {
        "ANY" => Some(0),
        "ICMP" => Some(1),
        "TCP" => Some(6),
        "UDP" => Some(17),
        "ICMPV6" => Some(58),
        "SCTP" => Some(132),
        _ => None,
    }
}

/// An IANA service name (`http`, `dns-tcp`): a named port, which the key
/// cannot carry, so it stands for any port.
fn is_port_name(p: &str) -> bool {
    (1..=15).contains(&p.len())
        && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && p.bytes().any(|b| b.is_ascii_alphabetic())
        && !p.starts_with('-')
        && !p.ends_with('-')
}

/// The endpoint, and the keys and value `bpf policy add|delete` write, as
/// 1.16 derives them: a port with no protocol (or ANY) is a key per
/// protocol; no port is one wildcard key.
/// A key to write or delete, its value, and how errors name it.
type KeyChange = (PolicyKey, PolicyEntry, String);

fn change_keys(a: &ChangeArgs) -> anyhow::Result<(u16, Vec<KeyChange>)> {
    let [ep, dir, identity, rest @ ..] = &a.args[..] else {
        anyhow::bail!("<endpoint id>, <traffic-direction>, and <identity> required");
    };
    let egress = match dir.to_lowercase().as_str() {
        "ingress" => 0,
        "egress" => 1,
        _ => anyhow::bail!(
            "Failed to convert {dir} to a valid traffic direction: invalid direction {dir:?} provided"
        ),
    };
    let ep: u16 = ep
        .parse()
        .map_err(|_| anyhow::anyhow!("Failed to parse endpointID {ep:?}"))?;
    let identity: u32 = identity
        .parse()
        .map_err(|_| anyhow::anyhow!("Failed to convert {identity}"))?;
    let (port, proto) = match rest.first() {
        None => (0u16, None),
        Some(l4) => {
            let parts: Vec<&str> = l4.split('/').collect();
            if parts.len() > 2 {
                anyhow::bail!(
                    "Failed to parse L4: invalid format {l4:?}. Should be <port>[/<protocol>]"
                );
            }
            let proto = match parts.get(1) {
                Some(p) => Some(proto_number(&p.to_uppercase()).ok_or_else(|| {
                    anyhow::anyhow!(
                        "Failed to parse L4: invalid protocol {:?}",
                        p.to_uppercase()
                    )
                })?),
                None => None,
            };
            let port = if is_port_name(parts[0]) {
                0
            } else {
                parts[0].parse().map_err(|e: std::num::ParseIntError| {
                    let why = match e.kind() {
                        std::num::IntErrorKind::PosOverflow => "value out of range",
                        _ => "invalid syntax",
                    };
                    anyhow::anyhow!(
                        "Failed to parse L4: invalid port {:?}: strconv.ParseUint: parsing {:?}: {why}",
                        parts[0],
                        parts[0]
                    )
                })?
            };
            (port, proto)
        }
    };
    let protos: Vec<u8> = match (port, proto) {
        (0, _) => vec![0],
        (_, Some(p)) if p != 0 => vec![p],
        _ => vec![0, 1, 6, 17, 58, 132],
    };
    let keys = protos
        .into_iter()
        .map(|p| {
            let key = PolicyKey {
                prefixlen: if port == 0 { 40 } else { 64 },
                sec_label: identity,
                egress,
                protocol: p,
                dport: abi::Be16::new(port),
            };
            let mut flags = if a.deny { POLICY_FLAG_DENY } else { 0 };
            if p == 0 {
                flags |= abi::policy::POLICY_FLAG_WILDCARD_PROTOCOL;
            }
            if port == 0 {
                flags |= abi::policy::POLICY_FLAG_WILDCARD_DPORT;
            }
            let entry = PolicyEntry {
                flags,
                ..Default::default()
            };
            (key, entry, format!("{identity} {port}/{}", proto_name(p)))
        })
        .collect();
    Ok((ep, keys))
}

/// `bpf policy add|delete`: changes one endpoint's map by hand, as 1.16
/// does (no output on success).
fn change(ctx: &Ctx, a: &ChangeArgs, add: bool) -> anyhow::Result<ExitCode> {
    let verb = if add { "add" } else { "delete" };
    if a.args.len() < 3 {
        return Ok(crate::usage_error(
            &["bpf", "policy", verb],
            "<endpoint id>, <traffic-direction>, and <identity> required",
        ));
    }
    let (ep, keys) = change_keys(a)?;
    let path = datapath::policymap::pin_path(&ctx.bpf_root, ep);
    let map = PolicyMap::pinned(&ctx.bpf_root, ep).map_err(|e| {
        anyhow::anyhow!(
            "Cannot open policymap {:?} : {e}",
            path.display().to_string()
        )
    })?;
    let name = datapath::policymap::name(ep);
    for (key, entry, text) in keys {
        if add {
            map.put(&key, &entry)
                .map_err(|e| anyhow::anyhow!("Cannot add policy key '{text}': {e}\n"))?;
        } else if !map.remove(&key)? {
            let dir = if key.egress == 1 { "Egress" } else { "Ingress" };
            anyhow::bail!(
                "Cannot delete policy key '{text}': unable to delete element {dir}: {text} from map {name}: delete: key does not exist\n"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn proto_name(p: u8) -> String {
    match p {
        0 => "ANY".into(),
        6 => "TCP".into(),
        17 => "UDP".into(),
        132 => "SCTP".into(),
        1 => "ICMP".into(),
        58 => "ICMPv6".into(),
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
        Command::Add(a) => change(ctx, a, true),
        Command::Delete(a) => change(ctx, a, false),
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
