//! `cilium bpf ...`: read the pinned maps directly, decoded through crates/abi.

use crate::bpf_off::{Feature, GroupCommand, MulticastCommand, SubscriberCommand, VtepCommand};
use crate::table::{print, print_json};
use crate::{row, Ctx};
use abi::ct::{
    CtEntry, Ipv4CtTuple, Ipv6CtTuple, CT_FLAG_NAMES, TUPLE_F_IN, TUPLE_F_RELATED, TUPLE_F_SERVICE,
};
use abi::endpoint::format_mac;
use datapath::maps::{
    Ct4Global, Ct6Global, CtAny4Global, CtAny6Global, Ipcache, Ipv4FragDatagrams, Lb4Backends,
    Lb4Services, Lxc, Metrics, RuntimeConfig, Snat4External, Snat6External, Tunnel,
};
use datapath::GlobalMap;
use std::net::Ipv4Addr;
use std::process::ExitCode;

pub use crate::table::ListArgs;

#[derive(clap::Subcommand)]
pub enum ListOnly {
    /// List entries
    #[command(alias = "ls")]
    List(ListArgs),
}

#[derive(clap::Subcommand)]
pub enum AuthCommand {
    /// List all authenticated connections between identities
    #[command(alias = "ls")]
    List(ListArgs),
    /// Deletes all entries for authenticated connections between identities
    Flush(ListArgs),
}

#[derive(clap::Subcommand)]
pub enum IpcacheCommand {
    /// List endpoint IPs (local and remote) and their corresponding security identities
    #[command(alias = "ls")]
    List(ListArgs),
    /// Retrieve identity for an ip
    Get { ip: Option<String> },
}

#[derive(clap::Subcommand)]
pub enum FsCommand {
    /// Show details of the mounted BPF filesystem
    Show(ListArgs),
}

#[derive(clap::Subcommand)]
pub enum EndpointCommand {
    /// List local endpoint entries
    List(ListArgs),
    /// Delete local endpoint entries
    Delete {
        /// Endpoint addresses
        #[arg(required = true)]
        ips: Vec<String>,
    },
}

#[derive(clap::Subcommand)]
pub enum CtCommand {
    /// List connection tracking entries: `global`, or `endpoint <ID>` /
    /// `cluster <ID>` for per-endpoint and per-cluster tables (none exist
    /// here: every endpoint uses the global ones)
    List {
        kind: String,
        identifier: Option<String>,
        #[command(flatten)]
        args: ListArgs,
    },
    /// Flush all connection tracking entries (only `global` is supported)
    Flush {
        #[arg(value_parser = ["global"])]
        kind: String,
    },
}

#[derive(clap::Subcommand)]
pub enum LbCommand {
    /// List load-balancing configuration
    List(ListArgs),
    /// Maglev lookup tables
    #[command(subcommand)]
    Maglev(MaglevCommand),
}

#[derive(clap::Subcommand)]
pub enum MaglevCommand {
    /// List Maglev lookup tables
    List(ListArgs),
    /// Get Maglev lookup table for given service by ID
    Get {
        service_id: Option<String>,
        #[command(flatten)]
        args: ListArgs,
    },
}

#[derive(clap::Subcommand)]
pub enum NatCommand {
    /// List all NAT mapping entries
    List(ListArgs),
    /// Flush all NAT mapping entries
    Flush,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// Local endpoint map (cilium_lxc)
    #[command(subcommand)]
    Endpoint(EndpointCommand),
    /// IP cache (cilium_ipcache)
    #[command(subcommand)]
    Ipcache(IpcacheCommand),
    /// Connection tracking tables
    #[command(subcommand)]
    Ct(CtCommand),
    /// Datapath metrics (cilium_metrics)
    #[command(subcommand)]
    Metrics(ListOnly),
    /// Tunnel endpoint map (cilium_tunnel_map)
    #[command(subcommand)]
    Tunnel(ListOnly),
    /// Runtime config map (cilium_runtime_config)
    #[command(subcommand)]
    Config(ListOnly),
    /// Load-balancing maps (cilium_lb4_*)
    #[command(subcommand)]
    Lb(LbCommand),
    /// NAT mapping tables (cilium_snat_v4_external)
    #[command(subcommand)]
    Nat(NatCommand),
    /// Manage policy related BPF maps
    #[command(subcommand)]
    Policy(crate::bpf_policy::Command),
    /// IPv4 fragment tracking (cilium_ipv4_frag_datagrams)
    #[command(subcommand)]
    Frag(ListOnly),
    /// Manage the node IDs (cilium_node_map_v2)
    #[command(subcommand)]
    Nodeid(ListOnly),
    /// Manage authenticated connections between identities (cilium_auth_map)
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Manage the templates of compiled BPF programs
    #[command(subcommand, alias = "template")]
    Sha(crate::bpf_sha::Command),
    /// BPF filesystem mount
    #[command(subcommand)]
    Fs(FsCommand),
    /// ip-masq-agent CIDRs (cilium_ipmasq_v4)
    #[command(subcommand)]
    Ipmasq(ListOnly),
    /// BPF datapath bandwidth settings (cilium_throttle)
    #[command(subcommand)]
    Bandwidth(crate::bpf_off::ListCommand),
    /// Egress gateway policies (cilium_egress_gw_policy_v4)
    #[command(subcommand)]
    Egress(crate::bpf_off::ListCommand),
    /// VTEP mappings (cilium_vtep_map)
    #[command(subcommand)]
    Vtep(crate::bpf_off::VtepCommand),
    /// PCAP recorder (cilium_capture4_rules)
    #[command(subcommand)]
    Recorder(crate::bpf_off::ListCommand),
    /// Multicast groups and subscribers
    #[command(subcommand, alias = "mcast")]
    Multicast(crate::bpf_off::MulticastCommand),
    /// SRv6 routing
    #[command(subcommand)]
    Srv6(crate::bpf_off::Srv6Command),
}

fn open<M: GlobalMap>(ctx: &Ctx) -> anyhow::Result<M> {
    Ok(M::open(&ctx.bpf_root)?)
}

/// Empties the map, as Cilium's `bpf ct flush` and `bpf nat flush` do: a
/// map that is not there is skipped with a note.
fn flush<M: GlobalMap>(ctx: &Ctx) -> anyhow::Result<()> {
    let path = M::pin_path(&ctx.bpf_root);
    let map = match M::open(&ctx.bpf_root) {
        Ok(m) => m,
        Err(e) if !path.exists() => {
            eprintln!("Unable to open {}: {e}. Skipping.", path.display());
            return Ok(());
        }
        Err(e) => anyhow::bail!("Unable to open {}: {e}", path.display()),
    };
    println!("Flushed {} entries from {}", map.clear()?, path.display());
    Ok(())
}

fn v4(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

fn json_or_table(
    args: &ListArgs,
    json: serde_json::Value,
    header: Vec<String>,
    mut rows: Vec<Vec<String>>,
) -> anyhow::Result<ExitCode> {
    if args.output.is_some() {
        print_json(&json)?;
    } else {
        rows.sort();
        let mut all = vec![header];
        all.extend(rows);
        print(&all);
    }
    Ok(ExitCode::SUCCESS)
}

/// Key/value listings: JSON object or a two-column table.
fn kv_listing(
    args: &ListArgs,
    header: Vec<String>,
    pairs: Vec<(String, String)>,
) -> anyhow::Result<ExitCode> {
    let json: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let rows = pairs.into_iter().map(|(k, v)| vec![k, v]).collect();
    json_or_table(args, json.into(), header, rows)
}

/// Removes endpoints' entries from cilium_lxc (what `cilium bpf endpoint
/// delete` is for: taking an endpoint off the datapath by hand). Every
/// address is checked before any entry goes.
fn delete_endpoints(ctx: &Ctx, ips: &[String]) -> anyhow::Result<ExitCode> {
    let keys = ips
        .iter()
        .map(|s| {
            s.parse::<std::net::Ipv4Addr>()
                .map(abi::endpoint::EndpointKey::v4)
                .map_err(|_| anyhow::anyhow!("{s:?} is not an IPv4 address"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let map = open::<Lxc>(ctx)?;
    let mut code = ExitCode::SUCCESS;
    for (ip, key) in ips.iter().zip(&keys) {
        if !map.remove(key)? {
            eprintln!("Unable to delete endpoint entry {ip}: not found");
            code = ExitCode::FAILURE;
        }
    }
    Ok(code)
}

fn endpoints(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let entries = open::<Lxc>(ctx)?.entries()?;
    let mut rows = Vec::new();
    let mut json = serde_json::Map::new();
    for (k, v) in &entries {
        let ip = match (k.ipv4(), k.ipv6()) {
            (Some(ip), _) => ip.to_string(),
            (_, Some(ip)) => ip.to_string(),
            _ => "<unknown family>".into(),
        };
        let info = if v.is_host() {
            "(localhost)".to_owned()
        } else {
            format!(
                "id={:<5} sec_id={:<5} flags=0x{:04x} ifindex={:<3} mac={} nodemac={}",
                v.lxc_id,
                v.sec_id,
                v.flags,
                v.ifindex,
                format_mac(&v.mac),
                format_mac(&v.node_mac)
            )
        };
        json.insert(ip.clone(), serde_json::Value::String(info.clone()));
        rows.push(row![ip, info]);
    }
    json_or_table(
        args,
        json.into(),
        row!["IP ADDRESS", "LOCAL ENDPOINT INFO"],
        rows,
    )
}

fn ipcache(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let entries = open::<Ipcache>(ctx)?.entries()?;
    let mut pairs = Vec::new();
    for (k, v) in &entries {
        let Some((ip, len)) = k.prefix() else {
            continue;
        };
        pairs.push((format!("{ip}/{len}"), v.to_string()));
    }
    kv_listing(args, row!["IP PREFIX/ADDRESS", "IDENTITY"], pairs)
}

const IP_FORMS: &str =
    "IP address must be in dotted decimal (192.168.1.1) or IPv6 (feab::f02b) form";

/// `cilium bpf ipcache get <ip>`: the entry with the longest prefix that
/// holds the address, as 1.16's lookup answers (exit 1 when none does).
fn ipcache_get(ctx: &Ctx, ip: Option<&str>) -> anyhow::Result<ExitCode> {
    let path = ["bpf", "ipcache", "get"];
    let ip_text = match ip {
        None | Some("") => {
            return Ok(crate::usage_error(
                &path,
                &format!("No ip provided. {IP_FORMS}"),
            ))
        }
        Some(s) => s,
    };
    let Ok(addr) = ip_text.parse::<std::net::IpAddr>() else {
        return Ok(crate::usage_error(
            &path,
            &format!("Invalid ip address. {IP_FORMS}"),
        ));
    };
    let entries = open::<Ipcache>(ctx)
        .and_then(|m| Ok(m.entries()?))
        .map_err(|e| anyhow::anyhow!("unable to dump IPCache: {e}\n"))?;
    if entries.is_empty() {
        eprintln!("No entries found.");
        return Ok(ExitCode::FAILURE);
    }
    let std::net::IpAddr::V4(addr) = addr else {
        println!("{ip_text} does not map to any identity");
        return Ok(ExitCode::FAILURE);
    };
    let best = entries
        .iter()
        .filter_map(|(k, v)| Some((k.ipv4_prefix()?, v)))
        .filter(|((net, len), _)| {
            policy::rule::Cidr::new(*net, *len).contains(&policy::rule::Cidr::new(addr, 32))
        })
        .max_by_key(|((_, len), _)| *len);
    match best {
        Some((_, v)) => {
            println!("{ip_text} maps to identity {v}");
            Ok(ExitCode::SUCCESS)
        }
        None => {
            println!("{ip_text} does not map to any identity");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `cilium bpf lb maglev get <service id>`: one service's table.
fn maglev_get(ctx: &Ctx, id: Option<&str>, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let path = ["bpf", "lb", "maglev", "get"];
    let text = match id {
        None => return Ok(crate::usage_error(&path, "Missing service id argument")),
        Some("") => return Ok(crate::usage_error(&path, "Empty service id argument")),
        Some(t) => t,
    };
    let id: u16 = text.parse().map_err(|e: std::num::ParseIntError| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow => "value out of range",
            _ => "invalid syntax",
        };
        anyhow::anyhow!("Unable to parse {text}: strconv.ParseUint: parsing {text:?}: {why}")
    })?;
    let pins = ctx.bpf_root.join(abi::maps::GLOBALS_DIR);
    // a node without Maglev has no table map: no service has a table then
    let tables = if pins.join(abi::maps::LB4_MAGLEV).exists() {
        datapath::lbmap::maglev_tables(&pins)?
    } else {
        Vec::new()
    };
    let Some((_, lut)) = tables.into_iter().find(|(svc, _)| *svc == id) else {
        anyhow::bail!("No entry found for service {id}");
    };
    let slots: Vec<String> = lut.backend_ids.iter().map(u32::to_string).collect();
    let data = std::collections::BTreeMap::from([(
        format!("[{id}]/v4"),
        vec![format!("[{}]", slots.join(" "))],
    )]);
    if args.output.is_some() {
        print_json(&data)?;
    } else {
        crate::table::print_keyed("SVC ID", "LOOKUP TABLE", &data);
    }
    Ok(ExitCode::SUCCESS)
}

/// `cilium bpf ipmasq list`: the ip-masq-agent's CIDRs. This agent does
/// not run the ip-masq-agent, so cilium_ipmasq_v4 is never pinned; 1.16
/// skips a map that is not there.
fn ipmasq_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let pins = ctx.bpf_root.join(abi::maps::GLOBALS_DIR);
    for name in [abi::maps::IPMASQ_V4, abi::maps::IPMASQ_V6] {
        if pins.join(name).exists() {
            anyhow::bail!("{name} is pinned, but this agent never creates it");
        }
    }
    if args.output.is_some() {
        print_json(&Vec::<()>::new())?;
    } else {
        eprintln!("No entries found.");
    }
    Ok(ExitCode::SUCCESS)
}

/// `cilium bpf fs show`: the first BPF filesystem in this process's mount
/// table, as 1.16 describes it.
fn fs_show(args: &ListArgs) -> anyhow::Result<ExitCode> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| {
        anyhow::anyhow!("Unable to find the mount failed to open mount information at /proc/self/mountinfo: {e}")
    })?;
    let Some(m) = table
        .lines()
        .filter_map(crate::mountinfo::parse)
        .find(|m| m.filesystem_type == "bpf")
    else {
        anyhow::bail!("No BPF filesystems are mounted");
    };
    if args.output.is_some() {
        print_json(&m)?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = format!(
        "MountID:\t{}\nParentID:\t{}\nMounted State:\ttrue\nMountPoint:\t{}\nMountOptions:\t{}\nOptionFields:\t[{}]\nFilesystemType:\t{}\nMountSource:\t{}\nSuperOptions:\t{}\n",
        m.mount_id,
        m.parent_id,
        m.mount_point,
        m.mount_options,
        m.optional_fields.as_deref().unwrap_or_default().join(" "),
        m.filesystem_type,
        m.mount_source,
        m.super_options
    );
    print!("{}", crate::table::tabwrite(&text, 2, 3));
    Ok(ExitCode::SUCCESS)
}

/// Cilium's `bpf lb maglev list`: each service's table (keyed
/// `[<rev-NAT ID>]/v4`) as the backend ID in every slot.
fn maglev_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let pins = ctx.bpf_root.join(abi::maps::GLOBALS_DIR);
    let mut json = serde_json::Map::new();
    let mut rows = Vec::new();
    for (id, lut) in datapath::lbmap::maglev_tables(&pins)? {
        let slots: Vec<String> = lut.backend_ids.iter().map(u32::to_string).collect();
        let table = format!("[{}]", slots.join(" "));
        let key = format!("[{id}]/v4");
        json.insert(key.clone(), serde_json::json!([table]));
        rows.push(row![key, table]);
    }
    json_or_table(args, json.into(), row!["SVC ID", "LOOKUP TABLE"], rows)
}

/// `cilium bpf lb list`: per frontend, its service entry (`0.0.0.0:0
/// (<revnat>) (0) [<flags>]`, `[::]:0 ...` for IPv6) and each backend
/// slot; a dual-stack node's IPv6 services too.
fn lb_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    use abi::lb::Lb4Service;
    use std::net::IpAddr;
    // both families' slots: (frontend, slot, entry), and backends by ID
    let mut slots: Vec<(lb::Frontend, u16, Lb4Service)> = Vec::new();
    let frontend = |ip: IpAddr, port: abi::Be16, proto, scope| lb::Frontend {
        ip,
        port: port.get(),
        proto,
        scope,
    };
    for (k, v) in open::<Lb4Services>(ctx)?.entries()? {
        slots.push((
            frontend(k.address.ip().into(), k.dport, k.proto, k.scope),
            k.backend_slot,
            v,
        ));
    }
    let mut backends: std::collections::BTreeMap<u32, String> = open::<Lb4Backends>(ctx)?
        .entries()?
        .into_iter()
        .map(|(id, b)| (id, lb::host_port(b.address.ip().into(), b.port.get())))
        .collect();
    // a dual-stack node's IPv6 maps
    if let Ok(v6) = open::<datapath::maps::Lb6Services>(ctx) {
        for (k, v) in v6.entries()? {
            slots.push((
                frontend(k.address.ip().into(), k.dport, k.proto, k.scope),
                k.backend_slot,
                v,
            ));
        }
        backends.extend(
            open::<datapath::maps::Lb6Backends>(ctx)?
                .entries()?
                .into_iter()
                .map(|(id, b)| (id, lb::host_port(b.address.ip().into(), b.port.get()))),
        );
    }
    let mut by_frontend: std::collections::BTreeMap<lb::Frontend, Vec<(u16, String)>> =
        Default::default();
    for (frontend, slot, v) in &slots {
        let revnat = v.rev_nat_index.get();
        let line = if *slot == 0 {
            let any = if frontend.ip.is_ipv6() {
                "[::]:0"
            } else {
                "0.0.0.0:0"
            };
            format!(
                "{any} ({revnat}) (0) [{}]",
                lb::flags_string(v.flags, v.flags2)
            )
        } else {
            let id = v.backend_id;
            let addr = backends
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("<backend {id} missing>"));
            format!("{addr} ({revnat}) ({slot})")
        };
        by_frontend
            .entry(*frontend)
            .or_default()
            .push((*slot, line));
    }
    let mut json = serde_json::Map::new();
    let mut all = vec![row![
        "SERVICE ADDRESS",
        "BACKEND ADDRESS (REVNAT_ID) (SLOT)"
    ]];
    for (frontend, mut lines) in by_frontend {
        lines.sort();
        let name = frontend.to_string();
        json.insert(
            name.clone(),
            lines
                .iter()
                .map(|(_, l)| l.clone())
                .collect::<Vec<_>>()
                .into(),
        );
        for (i, (_, line)) in lines.into_iter().enumerate() {
            all.push(row![if i == 0 { name.as_str() } else { "" }, line]);
        }
    }
    if args.output.is_some() {
        print_json(&serde_json::Value::Object(json))?;
    } else {
        print(&all);
    }
    Ok(ExitCode::SUCCESS)
}

/// A conntrack key of either family, as the line prints it.
struct CtKey {
    nexthdr: u8,
    flags: u8,
    /// Addresses as the tuple stores them: for the reply direction.
    daddr: std::net::IpAddr,
    saddr: std::net::IpAddr,
    sport: u16,
    dport: u16,
}

impl From<&Ipv4CtTuple> for CtKey {
    fn from(k: &Ipv4CtTuple) -> Self {
        Self {
            nexthdr: k.nexthdr,
            flags: k.flags,
            daddr: k.daddr.ip().into(),
            saddr: k.saddr.ip().into(),
            sport: k.sport.get(),
            dport: k.dport.get(),
        }
    }
}

impl From<&Ipv6CtTuple> for CtKey {
    fn from(k: &Ipv6CtTuple) -> Self {
        Self {
            nexthdr: k.nexthdr,
            flags: k.flags,
            daddr: k.daddr.ip().into(),
            saddr: k.saddr.ip().into(),
            sport: k.sport.get(),
            dport: k.dport.get(),
        }
    }
}

/// An address and port as Cilium prints them: IPv6 in brackets.
fn host_port(ip: std::net::IpAddr, port: u16) -> String {
    match ip {
        std::net::IpAddr::V4(ip) => format!("{ip}:{port}"),
        std::net::IpAddr::V6(ip) => format!("[{ip}]:{port}"),
    }
}

/// One `cilium bpf ct list global` line, in the original direction.
fn ct_line(k: &CtKey, v: &CtEntry) -> String {
    let proto =
        proto_name(k.nexthdr).map_or_else(|| format!("NextHeader={}", k.nexthdr), str::to_owned);
    let dir = if k.flags & TUPLE_F_IN != 0 {
        "IN"
    } else {
        "OUT"
    };
    // Global maps store addresses for the reply direction: swap them back.
    let (src, dst) = (host_port(k.daddr, k.sport), host_port(k.saddr, k.dport));
    let mut tags = String::new();
    if k.flags & TUPLE_F_RELATED != 0 {
        tags.push_str("related ");
    }
    if k.flags & TUPLE_F_SERVICE != 0 {
        tags.push_str("service ");
    }
    let flags: Vec<&str> = CT_FLAG_NAMES
        .iter()
        .filter(|(bit, _)| v.flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    format!(
        "{proto} {dir} {src} -> {dst} {tags}expires={} Packets={} Bytes={} RxFlagsSeen=0x{:02x} LastRxReport={} TxFlagsSeen=0x{:02x} LastTxReport={} Flags=0x{:04x} [ {} ] RevNAT={} SourceSecurityID={} IfIndex={} BackendID={}",
        v.lifetime,
        v.packets,
        v.bytes,
        v.rx_flags_seen,
        v.last_rx_report,
        v.tx_flags_seen,
        v.last_tx_report,
        v.flags,
        flags.join(" "),
        v.rev_nat_index.get(),
        v.src_sec_id,
        v.ifindex,
        v.backend_id
    )
}

/// Seconds of CLOCK_MONOTONIC, the clock the datapath stamps entries with.
fn mono_secs() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64
}

/// `cilium bpf nat list`: `<PROTO> <OUT|IN> <src> -> <dst> XLATE_...`.
/// A masqueraded flow's OUT entry gives the pod's packets the node's
/// address and port (XLATE_SRC), its IN entry gives the replies the pod's
/// back (XLATE_DST), as Cilium prints them. A NodePort flow's OUT entry
/// turns the client's packets towards the backend (XLATE_DST) from the
/// node's port (XLATE_SRC); its IN entry turns the backend's replies back
/// to the client from the NodePort.
fn nat_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    use abi::lb::NAT_DIR_EGRESS;
    let now = mono_secs();
    let mut lines = Vec::new();
    let line = |k: &CtKey, xlate: String, created: u64, needs_ct: u64| {
        let proto = proto_name(k.nexthdr).map_or_else(|| k.nexthdr.to_string(), str::to_owned);
        let dir = if k.flags == NAT_DIR_EGRESS {
            "OUT"
        } else {
            "IN"
        };
        // NAT keys carry real ports, source first
        let (src, dst) = (host_port(k.saddr, k.sport), host_port(k.daddr, k.dport));
        format!(
            "{proto} {dir} {src} -> {dst} {xlate} Created={}sec ago NeedsCT={}",
            now.saturating_sub(created),
            needs_ct & 1
        )
    };
    for (k, v) in open::<Snat4External>(ctx)?.entries()? {
        let (to, to_port, rev) = (v.to_addr.ip(), v.to_port.get(), v.rev_port.get());
        let dst = k.daddr.ip();
        let xlate = match (v.from_addr.ip().is_unspecified(), k.flags == NAT_DIR_EGRESS) {
            (true, true) => format!("XLATE_SRC {to}:{to_port}"),
            (true, false) => format!("XLATE_DST {to}:{to_port}"),
            (false, _) => format!("XLATE_DST {to}:{to_port} XLATE_SRC {dst}:{rev}"),
        };
        lines.push(line(&(&k).into(), xlate, v.created, v.needs_ct));
    }
    // IPv6 masquerading's table exists on dual-stack nodes only
    if Snat6External::pin_path(&ctx.bpf_root).exists() {
        for (k, v) in open::<Snat6External>(ctx)?.entries()? {
            let to = host_port(v.to_addr.ip().into(), v.to_port.get());
            let xlate = if v.flags & abi::lb::NAT6_F_NODEPORT != 0 {
                let from = host_port(k.daddr.ip().into(), v.rev_port.get());
                format!("XLATE_DST {to} XLATE_SRC {from}")
            } else if k.flags == NAT_DIR_EGRESS {
                format!("XLATE_SRC {to}")
            } else {
                format!("XLATE_DST {to}")
            };
            lines.push(line(&(&k).into(), xlate, v.created, v.needs_ct));
        }
    }
    print_lines(args, lines)
}

fn proto_name(proto: u8) -> Option<&'static str> {
    match proto {
        1 => Some("ICMP"),
        58 => Some("ICMPv6"),
        6 => Some("TCP"),
        17 => Some("UDP"),
        132 => Some("SCTP"),
        _ => None,
    }
}

/// Cilium's `bpf frag list`: the datagrams whose first fragment was seen.
fn frag_list(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let mut json = Vec::new();
    let mut rows = Vec::new();
    for (k, v) in open::<Ipv4FragDatagrams>(ctx)?.entries()? {
        let proto = proto_name(k.proto).map_or_else(|| k.proto.to_string(), str::to_owned);
        let src = format!("{}:{}", k.saddr.ip(), v.sport.get());
        let dst = format!("{}:{}", k.daddr.ip(), v.dport.get());
        let id = k.id.get();
        json.push(serde_json::json!({
            "ID": id, "Proto": proto, "SourceAddress": src, "DestAddress": dst, "SipCallIdHash": 0,
        }));
        rows.push(row![id, proto, src, dst, 0]);
    }
    if args.output.is_none() && rows.is_empty() {
        eprintln!("No entries found.");
        return Ok(ExitCode::SUCCESS);
    }
    json_or_table(
        args,
        json.into(),
        row![
            "ID",
            "PROTO",
            "SOURCE ADDRESS:PORT",
            "DEST ADDRESS:PORT",
            "SIP CALL-ID HASH"
        ],
        rows,
    )
}

/// Line listings (`ct`, `nat`): sorted lines, or a JSON array of them.
fn print_lines(args: &ListArgs, mut lines: Vec<String>) -> anyhow::Result<ExitCode> {
    lines.sort();
    if args.output.is_some() {
        print_json(&lines)?;
    } else {
        for l in lines {
            println!("{l}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn ct(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let mut lines = Vec::new();
    let tcp = open::<Ct4Global>(ctx)?.into_map();
    let any = open::<CtAny4Global>(ctx)?.into_map();
    for map in [tcp, any] {
        for (k, v) in map.entries()? {
            lines.push(ct_line(&(&k).into(), &v));
        }
    }
    // the IPv6 tables exist on dual-stack nodes only
    if Ct6Global::pin_path(&ctx.bpf_root).exists() {
        let tcp = open::<Ct6Global>(ctx)?.into_map();
        let any = open::<CtAny6Global>(ctx)?.into_map();
        for map in [tcp, any] {
            for (k, v) in map.entries()? {
                lines.push(ct_line(&(&k).into(), &v));
            }
        }
    }
    print_lines(args, lines)
}

fn metrics(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let entries = open::<Metrics>(ctx)?.entries()?;
    let mut rows = Vec::new();
    let mut json = Vec::new();
    for (k, per_cpu) in &entries {
        let (packets, bytes) = per_cpu
            .iter()
            .fold((0u64, 0u64), |(p, b), v| (p + v.count, b + v.bytes));
        let reason = abi::metrics::reason_text(k.reason);
        let dir = abi::metrics::direction_name(k.dir);
        let file = abi::metrics::source_file_name(k.file);
        json.push(serde_json::json!({"reason": reason, "direction": dir, "packets": packets, "bytes": bytes, "line": k.line, "file": file}));
        rows.push(row![reason, dir, packets, bytes, k.line, file]);
    }
    json_or_table(
        args,
        json.into(),
        row!["REASON", "DIRECTION", "PACKETS", "BYTES", "LINE", "FILE"],
        rows,
    )
}

fn tunnel(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let entries = open::<Tunnel>(ctx)?.entries()?;
    let pairs = entries
        .iter()
        .map(|(k, v)| (v4(&k.ip).to_string(), format!("{}:{}", v4(&v.ip), v.key)))
        .collect();
    kv_listing(args, row!["TUNNEL", "VALUE"], pairs)
}

fn runtime_config(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let map = open::<RuntimeConfig>(ctx)?;
    let mut rows = Vec::new();
    let mut json = serde_json::Map::new();
    for (index, value) in [
        (abi::runtime_config::UTIME_OFFSET, map.utime_offset()?),
        (abi::runtime_config::AGENT_LIVENESS, map.agent_liveness()?),
    ] {
        let name = abi::runtime_config::index_name(index).unwrap_or("unknown");
        json.insert(name.into(), value.into());
        rows.push(row![name, value]);
    }
    json_or_table(args, json.into(), row!["KEY", "VALUE"], rows)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Endpoint(EndpointCommand::List(a)) => endpoints(ctx, a),
        Command::Endpoint(EndpointCommand::Delete { ips }) => delete_endpoints(ctx, ips),
        Command::Ipcache(IpcacheCommand::List(a)) => ipcache(ctx, a),
        Command::Ipcache(IpcacheCommand::Get { ip }) => ipcache_get(ctx, ip.as_deref()),
        Command::Ct(CtCommand::List { kind, args, .. }) if kind == "global" => ct(ctx, args),
        Command::Ct(CtCommand::List {
            kind, identifier, ..
        }) => {
            ct_elsewhere(ctx, kind, identifier.as_deref());
            Ok(ExitCode::SUCCESS)
        }
        Command::Ct(CtCommand::Flush { .. }) => {
            flush::<Ct4Global>(ctx)?;
            flush::<CtAny4Global>(ctx)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Metrics(ListOnly::List(a)) => metrics(ctx, a),
        Command::Tunnel(ListOnly::List(a)) => tunnel(ctx, a),
        Command::Config(ListOnly::List(a)) => runtime_config(ctx, a),
        Command::Lb(LbCommand::List(a)) => lb_list(ctx, a),
        Command::Lb(LbCommand::Maglev(MaglevCommand::List(a))) => maglev_list(ctx, a),
        Command::Lb(LbCommand::Maglev(MaglevCommand::Get { service_id, args })) => {
            maglev_get(ctx, service_id.as_deref(), args)
        }
        Command::Nat(NatCommand::List(a)) => nat_list(ctx, a),
        Command::Nat(NatCommand::Flush) => {
            flush::<Snat4External>(ctx)?;
            if Snat6External::pin_path(&ctx.bpf_root).exists() {
                flush::<Snat6External>(ctx)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy(cmd) => crate::bpf_policy::run(ctx, cmd),
        Command::Frag(ListOnly::List(a)) => frag_list(ctx, a),
        Command::Nodeid(ListOnly::List(a)) => crate::nodeid::bpf_list(ctx, a),
        Command::Auth(AuthCommand::List(a)) => crate::nodeid::bpf_auth_list(ctx, a),
        Command::Auth(AuthCommand::Flush(_)) => crate::nodeid::bpf_auth_flush(ctx),
        Command::Sha(cmd) => crate::bpf_sha::run(ctx, cmd),
        Command::Fs(FsCommand::Show(a)) => fs_show(a),
        Command::Ipmasq(ListOnly::List(a)) => ipmasq_list(ctx, a),
        Command::Bandwidth(_) => crate::bpf_off::run(ctx, Feature::Bandwidth),
        Command::Egress(_) => crate::bpf_off::run(ctx, Feature::Egress),
        Command::Vtep(VtepCommand::List(_)) => crate::bpf_off::run(ctx, Feature::Vtep),
        Command::Vtep(VtepCommand::Update { args }) => {
            crate::bpf_off::run(ctx, Feature::VtepUpdate(args.clone()))
        }
        Command::Vtep(VtepCommand::Delete { args }) => {
            crate::bpf_off::run(ctx, Feature::VtepDelete(args.clone()))
        }
        Command::Recorder(_) => crate::bpf_off::run(ctx, Feature::Recorder),
        Command::Multicast(MulticastCommand::Group(GroupCommand::List(_))) => {
            crate::bpf_off::run(ctx, Feature::Multicast)
        }
        Command::Multicast(MulticastCommand::Group(
            GroupCommand::Add { args } | GroupCommand::Delete { args },
        )) => crate::bpf_off::run(ctx, Feature::MulticastGroupChange(args.clone())),
        Command::Multicast(MulticastCommand::Subscriber(SubscriberCommand::Add { args })) => {
            crate::bpf_off::run(ctx, Feature::MulticastSubscriberAdd(args.clone()))
        }
        Command::Multicast(MulticastCommand::Subscriber(SubscriberCommand::Delete { args })) => {
            crate::bpf_off::run(ctx, Feature::MulticastSubscriberDelete(args.clone()))
        }
        Command::Multicast(MulticastCommand::Subscriber(SubscriberCommand::List {
            args, ..
        })) => crate::bpf_off::run(ctx, Feature::MulticastSubscribers(args.clone())),
        Command::Srv6(cmd) => crate::bpf_off::run(ctx, cmd.into()),
    }
}

/// `bpf ct list endpoint|cluster <ID>` as Cilium answers it when the
/// tables do not exist (here they never do: all connections are tracked
/// in the global tables): one line per table, skipped. A bad argument is
/// reported the way Cilium reports it, exit 0 included.
fn ct_elsewhere(ctx: &Ctx, kind: &str, identifier: Option<&str>) {
    let id = match (kind, identifier.map(str::parse::<u32>)) {
        ("endpoint" | "cluster", Some(Ok(id))) => id,
        ("endpoint", None) => return eprint!("Invalid argument: missing endpointID"),
        ("cluster", None) => return eprint!("Invalid argument: missing clusterID"),
        ("endpoint" | "cluster", Some(Err(e))) => {
            return eprint!("Invalid argument: invalid {kind}ID: {e}")
        }
        _ => return eprint!("Invalid argument: unknown type {kind}"),
    };
    let names = if kind == "endpoint" {
        [
            format!("cilium_ct4_{id:05}"),
            format!("cilium_ct_any4_{id:05}"),
        ]
    } else {
        [
            format!("cilium_per_cluster_ct_tcp4_{id}"),
            format!("cilium_per_cluster_ct_any4_{id}"),
        ]
    };
    for name in names {
        let path = ctx.bpf_root.join(abi::maps::GLOBALS_DIR).join(name);
        eprintln!(
            "Unable to open {}: no such file or directory: please try using \"cilium bpf ct list global\". Skipping.",
            path.display()
        );
    }
}
