//! `cilium statedb dump|<table>`: the agent's StateDB tables through its
//! `/statedb` API, printed as 1.16's cilium-dbg prints them (each table's
//! header and row cells, tab-aligned), with `--watch` printing what
//! changed since the last revision seen.

use crate::Ctx;
use base64::Engine;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Dump StateDB contents as JSON
    Dump,
    #[command(flatten)]
    Table(TableCommand),
}

#[derive(clap::Subcommand)]
pub enum TableCommand {
    /// Show contents of table "devices"
    Devices(WatchArgs),
    /// Show contents of table "routes"
    Routes(WatchArgs),
    /// Show contents of table "l2-announce"
    #[command(name = "l2-announce")]
    L2Announce(WatchArgs),
    /// Show contents of table "bandwidth-qdiscs"
    #[command(name = "bandwidth-qdiscs")]
    BandwidthQdiscs(WatchArgs),
    /// Show contents of table "node-addresses"
    #[command(name = "node-addresses")]
    NodeAddresses(WatchArgs),
    /// Show contents of table "sysctl"
    Sysctl(WatchArgs),
    /// Show contents of table "health"
    Health(WatchArgs),
    /// Show contents of table "ipsets"
    Ipsets(WatchArgs),
    /// Show contents of table "bandwidth-edts"
    #[command(name = "bandwidth-edts")]
    BandwidthEdts(WatchArgs),
    /// Show contents of table "nat-stats"
    #[command(name = "nat-stats")]
    NatStats(WatchArgs),
}

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Watch for new changes with the given interval (e.g. --watch=100ms)
    #[arg(short = 'w', long, default_value = "0s", value_parser = parse_duration)]
    watch: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    api::duration::parse_go_duration(s).ok_or_else(|| format!("invalid duration {s:?}"))
}

impl TableCommand {
    fn name_and_args(&self) -> (&'static str, &WatchArgs) {
        match self {
            Self::Devices(a) => ("devices", a),
            Self::Routes(a) => ("routes", a),
            Self::L2Announce(a) => ("l2-announce", a),
            Self::BandwidthQdiscs(a) => ("bandwidth-qdiscs", a),
            Self::NodeAddresses(a) => ("node-addresses", a),
            Self::Sysctl(a) => ("sysctl", a),
            Self::Health(a) => ("health", a),
            Self::Ipsets(a) => ("ipsets", a),
            Self::BandwidthEdts(a) => ("bandwidth-edts", a),
            Self::NatStats(a) => ("nat-stats", a),
        }
    }
}

/// 1.16's `TableHeader()` of each table.
fn header(table: &str) -> &'static [&'static str] {
    match table {
        "devices" => &[
            "Name",
            "Index",
            "Selected",
            "Type",
            "MTU",
            "HWAddr",
            "Flags",
            "Addresses",
        ],
        "routes" => &[
            "Destination",
            "Source",
            "Gateway",
            "LinkIndex",
            "Table",
            "Scope",
        ],
        "l2-announce" => &["IP", "NetworkInterface"],
        "bandwidth-qdiscs" => &["LinkIndex", "LinkName", "FqHorizon", "FqBuckets", "Status"],
        "node-addresses" => &["Address", "NodePort", "Primary", "DeviceName"],
        "sysctl" => &["Name", "Value", "Status"],
        "health" => &[
            "Module",
            "Component",
            "Level",
            "Message",
            "Error",
            "LastOK",
            "UpdatedAt",
            "Count",
        ],
        "ipsets" => &["Name", "Family", "Addr", "Status"],
        "bandwidth-edts" => &["EndpointID", "BitsPerSecond", "TimeHorizonDrop", "Status"],
        "nat-stats" => &["IPFamily", "Proto", "EgressIP", "RemoteAddr", "Count"],
        _ => &[],
    }
}

pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Go's `net.Flags.String()` of the bits.
fn net_flags(bits: u64) -> String {
    let names = [
        "up",
        "broadcast",
        "loopback",
        "pointtopoint",
        "multicast",
        "running",
    ];
    let set: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect();
    if set.is_empty() {
        "0".into()
    } else {
        set.join("|")
    }
}

/// `time.Time.Format(time.RFC3339)` of a marshalled time: whole seconds.
fn rfc3339_seconds(t: &Value) -> String {
    let s = text(t);
    match (s.find('.'), s.rfind(['Z', '+', '-'])) {
        (Some(dot), Some(zone)) if zone > dot => format!("{}{}", &s[..dot], &s[zone..]),
        _ => s,
    }
}

/// statedb's reconciler status: `Done (1.2s ago)`, `Error: <e> (3m ago)`.
fn reconciler_status(s: &Value) -> String {
    let ago = api::timefmt::parse_rfc3339(&text(&s["UpdatedAt"]))
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    let ms = ago.as_secs_f64() * 1000.0;
    let ago = if ms < 1000.0 {
        format!("{ms:.1}ms")
    } else if ms / 1000.0 < 60.0 {
        format!("{:.1}s", ms / 1000.0)
    } else if ms / 60000.0 < 60.0 {
        format!("{:.1}m", ms / 60000.0)
    } else {
        format!("{:.1}h", ms / 3_600_000.0)
    };
    let kind = text(&s["Kind"]);
    if kind == "Error" {
        format!("Error: {} ({ago} ago)", text(&s["Error"]))
    } else {
        format!("{kind} ({ago} ago)")
    }
}

/// Kubernetes' `resource.Quantity` in DecimalSI: `1500k`, `1M`.
fn decimal_si(mut n: u64) -> String {
    let suffixes = ["", "k", "M", "G", "T", "P", "E"];
    let mut i = 0;
    while n != 0 && n.is_multiple_of(1000) && i + 1 < suffixes.len() {
        n /= 1000;
        i += 1;
    }
    format!("{n}{}", suffixes[i])
}

pub fn joined(v: &Value) -> String {
    v.as_array()
        .map(|a| a.iter().map(text).collect::<Vec<_>>().join("."))
        .unwrap_or_else(|| text(v))
}

/// 1.16's `TableRow()` of one object.
fn row(table: &str, o: &Value) -> Vec<String> {
    let t = |k: &str| text(&o[k]);
    match table {
        "devices" => {
            let addrs: Vec<String> = o["Addrs"]
                .as_array()
                .map(|a| a.iter().map(|x| text(&x["Addr"])).collect())
                .unwrap_or_default();
            vec![
                t("Name"),
                t("Index"),
                t("Selected"),
                t("Type"),
                t("MTU"),
                t("HardwareAddr"),
                net_flags(o["Flags"].as_u64().unwrap_or(0)),
                addrs.join(", "),
            ]
        }
        "routes" => vec![
            t("Dst"),
            t("Src"),
            t("Gw"),
            t("LinkIndex"),
            t("Table"),
            t("Scope"),
        ],
        "l2-announce" => vec![t("IP"), t("NetworkInterface")],
        "bandwidth-qdiscs" => vec![
            t("LinkIndex"),
            t("LinkName"),
            t("FqHorizon"),
            t("FqBuckets"),
            reconciler_status(&o["Status"]),
        ],
        "node-addresses" => vec![t("Addr"), t("NodePort"), t("Primary"), t("DeviceName")],
        "sysctl" => vec![t("Name"), t("Val"), reconciler_status(&o["Status"])],
        "health" => vec![
            joined(&o["ID"]["Module"]),
            joined(&o["ID"]["Component"]),
            t("Level"),
            t("Message"),
            t("Error"),
            rfc3339_seconds(&o["LastOK"]),
            rfc3339_seconds(&o["Updated"]),
            t("Count"),
        ],
        "ipsets" => vec![
            t("Name"),
            t("Family"),
            t("Addr"),
            reconciler_status(&o["Status"]),
        ],
        "bandwidth-edts" => vec![
            t("EndpointID"),
            decimal_si(o["BytesPerSecond"].as_u64().unwrap_or(0) * 8),
            t("TimeHorizonDrop"),
            reconciler_status(&o["Status"]),
        ],
        "nat-stats" => {
            let v6 = t("Type") == "ipv6";
            let wrap = |s: String| if v6 { format!("[{s}]") } else { s };
            let (eip, rip) = (wrap(t("EgressIP")), wrap(t("EndpointIP")));
            let port = o["RemotePort"].as_u64().unwrap_or(0);
            let raddr = if port == 0 {
                rip
            } else {
                format!("{rip}:{port}")
            };
            vec![t("Type"), t("Proto"), eip, raddr, t("Count")]
        }
        _ => Vec::new(),
    }
}

/// A query's objects with their revisions, and the error that ended it
/// early (the server's, or one decoding its answer), as statedb's remote
/// table reads them.
pub type Answer = (Vec<(u64, Value)>, Option<String>);

/// The objects of `table` whose key on `index` is at or above `key`.
pub fn lower_bound(ctx: &Ctx, table: &str, index: &str, key: &[u8]) -> anyhow::Result<Answer> {
    let key = base64::engine::general_purpose::STANDARD.encode(key);
    let body = serde_json::json!({
        "key": key, "table": table, "index": index, "lowerbound": true,
    });
    let resp = ctx
        .client()?
        .raw(
            "GET",
            "/statedb/query",
            &[("Accept", "application/json")],
            Some(body.to_string().as_bytes()),
        )
        .map_err(|e| anyhow::anyhow!("LowerBound: {e}"))?;
    let mut objs = Vec::new();
    for doc in serde_json::Deserializer::from_slice(&resp.body).into_iter::<Value>() {
        let doc = match doc {
            Ok(d) => d,
            Err(e) => return Ok((objs, Some(format!("Decode error: {e}")))),
        };
        if let Some(err) = doc
            .get("err")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        {
            return Ok((objs, Some(err.to_owned())));
        }
        objs.push((doc["rev"].as_u64().unwrap_or(0), doc["obj"].clone()));
    }
    Ok((objs, None))
}

fn show(ctx: &Ctx, table: &str, watch: Duration) -> anyhow::Result<ExitCode> {
    let head = format!("# {}", header(table).join("\t"));
    // one tabwriter over the whole run, widths remembered across flushes
    // (liggitt/tabwriter's RememberWidths), so watched rows stay aligned
    let mut widths = Vec::new();
    let mut pending = vec![head.clone()];
    let mut revision: u64 = 0;
    let mut since_header = 0;
    loop {
        let (objs, err) = lower_bound(ctx, table, "__revision__", &revision.to_be_bytes())?;
        for (rev, obj) in objs {
            revision = rev + 1;
            pending.push(row(table, &obj).join("\t"));
            since_header += 1;
        }
        print!(
            "{}",
            crate::table::tabwrite_remembering(&pending, 6, 3, &mut widths)
        );
        pending.clear();
        if let Some(err) = err {
            anyhow::bail!("LowerBound: {err}");
        }
        if watch.is_zero() {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(watch);
        if since_header > 100 {
            since_header = 0;
            pending.push(head.clone());
        }
    }
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Dump => {
            let resp = ctx
                .client()?
                .raw("GET", "/statedb/dump", &[], None)
                .map_err(|e| anyhow::anyhow!("Get(dump): {e}"))?;
            use std::io::Write;
            std::io::stdout().write_all(&resp.body)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Table(t) => {
            let (name, args) = t.name_and_args();
            show(ctx, name, args.watch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_read_as_1_16_prints_them() {
        let dev = json!({"Name": "eth0", "Index": 2, "Selected": true, "Type": "veth", "MTU": 1500,
            "HardwareAddr": "aa:bb:cc:dd:ee:ff", "Flags": 19, "Addrs": [{"Addr": "198.18.0.1"}, {"Addr": "fe80::1"}]});
        assert_eq!(
            row("devices", &dev),
            [
                "eth0",
                "2",
                "true",
                "veth",
                "1500",
                "aa:bb:cc:dd:ee:ff",
                "up|broadcast|multicast",
                "198.18.0.1, fe80::1"
            ]
        );
        let h = json!({"ID": {"Module": ["agent", "datapath"], "Component": ["job"]}, "Level": "OK",
            "Message": "ok", "Error": "", "LastOK": "2026-11-26T12:00:01.5Z", "Updated": "0001-01-01T00:00:00Z", "Count": 3});
        assert_eq!(
            row("health", &h),
            [
                "agent.datapath",
                "job",
                "OK",
                "ok",
                "",
                "2026-11-26T12:00:01Z",
                "0001-01-01T00:00:00Z",
                "3"
            ]
        );
        assert_eq!(decimal_si(1_500_000), "1500k");
        assert_eq!(decimal_si(8_000_000), "8M");
        assert_eq!(decimal_si(0), "0");
        assert_eq!(net_flags(0), "0");
    }
}
