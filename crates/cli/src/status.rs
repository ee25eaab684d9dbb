//! `cilium status` in Cilium's line format.

use crate::table::{print_json, Output};
use crate::Ctx;
use api::models::{
    HubbleStatus, KubeProxyReplacement, Masquerading, MonitorStatus, State, StatusResponse,
};
use std::process::ExitCode;

/// What `cilium status` learned from cilium-health.
pub enum ClusterHealth {
    /// Endpoint health checking is off (no `cilium-health-ep` controller).
    Disabled,
    Unreachable,
    Report(api::health::HealthStatusResponse),
}

fn cluster_health(s: &StatusResponse, agent_socket: &std::path::Path) -> ClusterHealth {
    if !s
        .controllers
        .iter()
        .any(|c| c.name == api::health::ENDPOINT_CONTROLLER)
    {
        return ClusterHealth::Disabled;
    }
    let socket = api::health::socket_beside(agent_socket);
    match api::Client::health(socket).get_json("/status", &[]) {
        Ok(r) => ClusterHealth::Report(r),
        Err(_) => ClusterHealth::Unreachable,
    }
}

/// The `Cluster health:` lines, their first column as wide as the other
/// status lines' (one tabwriter writes all of them in Cilium).
fn cluster_health_lines(h: &ClusterHealth, verbose: bool, modules: &str) -> String {
    let section = match h {
        ClusterHealth::Disabled => "Cluster health:\t\tProbe disabled\n".to_owned(),
        ClusterHealth::Unreachable => {
            "Cluster health:\t\t\tWarning\tcilium-health daemon unreachable\n".to_owned()
        }
        ClusterHealth::Report(r) => crate::health_report::format(
            r,
            crate::health_report::Detail {
                all: verbose,
                succinct: true,
                verbose,
                max_lines: if verbose { 0 } else { 10 },
            },
        ),
    };
    // a line standing for the labels above, dropped after aligning
    let sentinel = format!("{}\t\n", "-".repeat(LABEL_WIDTH - 3));
    let aligned = crate::table::tabwrite(&format!("{sentinel}{section}{modules}"), 2, 3);
    aligned
        .split_once('\n')
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_default()
}

/// Width of the status lines' label column.
const LABEL_WIDTH: usize = 25;

#[derive(clap::Args)]
pub struct Args {
    /// Only print a one-line status message
    #[arg(long)]
    brief: bool,
    /// Equivalent to --all-addresses --all-controllers --all-nodes --all-redirects --all-clusters --all-health
    #[arg(long)]
    verbose: bool,
    /// Show all allocated addresses, not just count
    #[arg(long = "all-addresses")]
    all_addresses: bool,
    /// Show all controllers, not just failing
    #[arg(long = "all-controllers")]
    all_controllers: bool,
    /// Show all nodes, not just localhost (as in 1.16, no line depends on it)
    #[arg(long = "all-nodes")]
    all_nodes: bool,
    /// Show all redirects (there are none: this agent runs no L7 proxy)
    #[arg(long = "all-redirects")]
    all_redirects: bool,
    /// Show all clusters (there are none: this agent runs no ClusterMesh)
    #[arg(long = "all-clusters")]
    all_clusters: bool,
    /// Show all health status, not just failing
    #[arg(long = "all-health")]
    all_health: bool,
    /// Sets the timeout to use when querying for health
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    timeout: std::time::Duration,
    /// json
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
}

fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    api::duration::parse_go_duration(s).ok_or_else(|| format!("invalid duration {s:?}"))
}

/// Which details the status block shows (1.16's `StatusDetails`).
#[derive(Clone, Copy, Default)]
pub struct Details {
    pub all_addresses: bool,
    pub all_controllers: bool,
    /// BPF maps, clock source and Kubernetes API sync details
    pub verbose: bool,
}

impl Details {
    pub const ALL: Details = Details {
        all_addresses: true,
        all_controllers: true,
        verbose: true,
    };
}

fn ok_state(s: &StatusResponse) -> bool {
    matches!(
        s.cilium.as_ref().map(|c| c.state),
        Some(State::Ok | State::Disabled)
    )
}

/// `OK` or `error in <component>: <msg>`.
pub fn brief_line(s: &StatusResponse) -> (bool, String) {
    let failing_health = s
        .cluster
        .as_ref()
        .and_then(|c| c.cilium_health.as_ref())
        .filter(|h| !matches!(h.state, State::Ok | State::Disabled));
    match &s.cilium {
        Some(c) if !matches!(c.state, State::Ok | State::Disabled) => {
            (false, format!("error in cilium: {}", c.msg))
        }
        None => (false, "error in cilium: no status reported".into()),
        _ if failing_health.is_some() => (
            false,
            format!(
                "error in cilium-health: {}",
                failing_health.map_or("", |h| h.msg.as_str())
            ),
        ),
        _ => match s
            .controllers
            .iter()
            .find(|c| c.status.consecutive_failure_count > 0)
        {
            Some(c) => (
                false,
                format!(
                    "error in controller {}: {}",
                    c.name, c.status.last_failure_msg
                ),
            ),
            None => (true, "OK".into()),
        },
    }
}

fn state_line(state: State, msg: &str) -> String {
    if msg.is_empty() {
        state.to_string()
    } else {
        format!("{state}   {msg}")
    }
}

fn on_off(enabled: Option<bool>) -> &'static str {
    if enabled == Some(true) {
        "Enabled"
    } else {
        "Disabled"
    }
}

/// `Listening for events on N CPUs with PxS of shared memory`, and the
/// lost/unknown line when there are some.
fn node_monitor(m: Option<&MonitorStatus>) -> (String, Option<String>) {
    let Some(m) = m else {
        return ("Disabled".into(), None);
    };
    let line = format!(
        "Listening for events on {} CPUs with {}x{} of shared memory",
        m.cpus, m.npages, m.pagesize
    );
    let unknown = m.unknown.unwrap_or(0);
    let lost = (m.lost != 0 || unknown != 0)
        .then(|| format!("{} events lost, {unknown} unknown notifications", m.lost));
    (line, lost)
}

/// `Ok   Current/Max Flows: c/m (p%), Flows/s: r   Metrics: Disabled`.
fn hubble(h: &HubbleStatus) -> String {
    let mut fields = vec![state_line(h.state, &h.msg)];
    if let Some(o) = &h.observer {
        let mut observer = Vec::new();
        if o.max_flows > 0 {
            observer.push(format!(
                "Current/Max Flows: {}/{} ({:.2}%)",
                o.current_flows,
                o.max_flows,
                o.current_flows as f64 * 100.0 / o.max_flows as f64
            ));
        }
        if let Some(up) = api::duration::parse_go_duration(&o.uptime).filter(|d| !d.is_zero()) {
            observer.push(format!(
                "Flows/s: {:.2}",
                o.seen_flows as f64 / up.as_secs_f64()
            ));
        }
        fields.push(observer.join(", "));
    }
    if let Some(m) = &h.metrics {
        fields.push(format!("Metrics: {}", m.state));
    }
    fields.join("   ")
}

/// Cilium's masquerading summary: `Disabled`, or the mode and families;
/// BPF masquerading also names the devices it runs on (KubeProxyReplacement's)
/// and the destinations it leaves alone.
fn masquerading(m: &Masquerading, kpr: Option<&KubeProxyReplacement>) -> String {
    let on_off = |b: bool| if b { "Enabled" } else { "Disabled" };
    match &m.enabled_protocols {
        None => on_off(m.enabled).into(),
        Some(p) if !p.ipv4 && !p.ipv6 => "Disabled".into(),
        Some(p) => {
            let mut mode = match m.mode.as_str() {
                "BPF" if m.ip_masq_agent => "BPF (ip-masq-agent)",
                "BPF" => "BPF",
                "iptables" => "IPTables",
                _ => "",
            }
            .to_owned();
            if let Some(k) = kpr.filter(|_| m.mode == "BPF") {
                let devices: Vec<&str> = k.device_list.iter().map(|d| d.name.as_str()).collect();
                mode = format!(
                    "{mode}   [{}]   {}",
                    devices.join(", "),
                    m.snat_exclusion_cidr_v4
                );
            }
            format!(
                "{mode} [IPv4: {}, IPv6: {}]",
                on_off(p.ipv4),
                on_off(p.ipv6)
            )
        }
    }
}

/// The non-verbose block, one `Label:` per line, values aligned at column 25.
pub fn format(
    s: &StatusResponse,
    details: Details,
    health: Option<(&ClusterHealth, &str)>,
) -> String {
    let Details {
        all_addresses,
        all_controllers,
        verbose,
    } = details;
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| lines.push((format!("{k}:"), v));
    if let Some(k) = &s.kvstore {
        push("KVStore", state_line(k.state, &k.msg));
    }
    if let Some(k) = &s.kubernetes {
        push("Kubernetes", state_line(k.state, &k.msg));
        if k.state != State::Disabled {
            // Go's quoted join: an empty list still prints one "" inside
            push(
                "Kubernetes APIs",
                format!("[\"{}\"]", k.k8s_api_versions.join("\", \"")),
            );
            if verbose && !k.k8s_api_sync.is_empty() {
                let list: String = k
                    .k8s_api_sync
                    .iter()
                    .map(|(api, state)| format!("\n  {api}: {state}"))
                    .collect();
                push("Kubernetes APIs sync", list);
            }
        }
    }
    if let Some(k) = &s.kube_proxy_replacement {
        let devices: Vec<String> = k
            .device_list
            .iter()
            .map(|d| format!("{}   {}", d.name, d.ip.join(" ")))
            .collect();
        if devices.is_empty() || k.mode == "False" {
            push("KubeProxyReplacement", k.mode.clone());
        } else {
            push(
                "KubeProxyReplacement",
                format!("{}   [{}]", k.mode, devices.join(", ")),
            );
        }
    }
    if let Some(h) = &s.host_firewall {
        if h.mode == "Disabled" {
            push("Host firewall", h.mode.clone());
        } else {
            push(
                "Host firewall",
                format!("{}   [{}]", h.mode, h.devices.join(", ")),
            );
        }
    }
    if let Some(c) = &s.cni_chaining {
        push("CNI Chaining", c.mode.clone());
    }
    if let Some(c) = &s.cni_file {
        push("CNI Config file", c.msg.clone());
    }
    if let Some(c) = &s.cilium {
        push("Cilium", state_line(c.state, &c.msg));
    }
    let (monitor, lost) = node_monitor(s.node_monitor.as_ref());
    push("NodeMonitor", monitor);
    if let Some(lost) = lost {
        push("", lost);
    }
    if let Some(h) = s.cluster.as_ref().and_then(|c| c.cilium_health.as_ref()) {
        push("Cilium health daemon", state_line(h.state, &h.msg));
    }
    match &s.ipam {
        Some(ipam) => {
            push("IPAM", ipam.status.clone());
            if all_addresses {
                let list: String = ipam
                    .allocations
                    .iter()
                    .map(|(ip, owner)| format!("\n  {ip} ({owner})"))
                    .collect();
                push("Allocated addresses", list);
            }
        }
        None => push("IPAM", "Disabled".into()),
    }
    push(
        "IPv4 BIG TCP",
        on_off(s.ipv4_big_tcp.as_ref().map(|b| b.enabled)).into(),
    );
    push(
        "IPv6 BIG TCP",
        on_off(s.ipv6_big_tcp.as_ref().map(|b| b.enabled)).into(),
    );
    push(
        "BandwidthManager",
        on_off(s.bandwidth_manager.as_ref().map(|b| b.enabled)).into(),
    );
    if let Some(r) = &s.routing {
        let net = if r.tunnel_protocol.is_empty() {
            r.inter_host_routing_mode.clone()
        } else {
            format!("{} [{}]", r.inter_host_routing_mode, r.tunnel_protocol)
        };
        push(
            "Routing",
            format!("Network: {net}   Host: {}", r.intra_host_routing_mode),
        );
    }
    if !s.attach_mode.is_empty() {
        let mode = if s.attach_mode == "tcx" {
            "TCX"
        } else {
            "Legacy TC"
        };
        push("Attach Mode", mode.into());
    }
    if !s.datapath_mode.is_empty() {
        push("Device Mode", s.datapath_mode.clone());
    }
    if let Some(m) = &s.masquerading {
        push(
            "Masquerading",
            masquerading(m, s.kube_proxy_replacement.as_ref()),
        );
    }
    if verbose {
        if let Some(c) = &s.clock_source {
            let source = match c.hertz {
                Some(hz) if c.mode == "jiffies" => format!("{}   [{hz} Hz]", c.mode),
                _ => c.mode.clone(),
            };
            push("Clock Source for BPF", source);
        }
    }
    let healthy = s
        .controllers
        .iter()
        .filter(|c| c.status.consecutive_failure_count == 0)
        .count();
    push(
        "Controller Status",
        format!("{healthy}/{} healthy", s.controllers.len()),
    );
    let mut out: String = lines
        .drain(..)
        .map(|(k, v)| {
            if v.starts_with('\n') {
                format!("{k}{v}\n")
            } else {
                format!("{k:<25}{v}\n")
            }
        })
        .collect();
    if (verbose || all_controllers || healthy < s.controllers.len()) && !s.controllers.is_empty() {
        let mut rows = vec![crate::row![
            "  Name",
            "Last success",
            "Last error",
            "Count",
            "Message"
        ]];
        for c in &s.controllers {
            if !(verbose || all_controllers) && c.status.consecutive_failure_count == 0 {
                continue;
            }
            let msg = if c.status.last_failure_msg.is_empty() {
                "no error".into()
            } else {
                c.status.last_failure_msg.clone()
            };
            rows.push(crate::row![
                format!("  {}", c.name),
                c.status
                    .last_success_timestamp
                    .clone()
                    .unwrap_or_else(|| "never".into()),
                c.status
                    .last_failure_timestamp
                    .clone()
                    .unwrap_or_else(|| "never".into()),
                c.status.consecutive_failure_count,
                msg
            ]);
        }
        out.push_str(&crate::table::render(&rows));
    }
    let mut tail: Vec<(String, String)> = Vec::new();
    tail.push((
        "Proxy Status:".into(),
        s.proxy
            .as_ref()
            .map_or("No managed proxy redirect".into(), |p| {
                format!(
                    "OK, ip {}, {} redirects active on ports {}, Envoy: {}",
                    p.ip, p.total_redirects, p.port_range, p.envoy_deployment_mode
                )
            }),
    ));
    if let Some(r) = &s.identity_range {
        tail.push((
            "Global Identity Range:".into(),
            format!("min {}, max {}", r.min_identity, r.max_identity),
        ));
    }
    tail.push((
        "Hubble:".into(),
        s.hubble.as_ref().map_or("Disabled".into(), hubble),
    ));
    tail.push((
        "Encryption:".into(),
        s.encryption
            .as_ref()
            .map_or("Disabled".into(), |e| e.mode.clone()),
    ));
    for (k, v) in tail {
        out.push_str(&format!("{k:<LABEL_WIDTH$}{v}\n"));
    }
    if verbose {
        if let Some(m) = &s.bpf_maps {
            out.push_str(&format!(
                "BPF Maps:   dynamic sizing: {} (ratio: {:.6})\n",
                if m.dynamic_size_ratio > 0.0 {
                    "on"
                } else {
                    "off"
                },
                m.dynamic_size_ratio
            ));
            let mut rows = vec![crate::row!["  Name", "Size"]];
            rows.extend(
                m.maps
                    .iter()
                    .map(|p| crate::row![format!("  {}", p.name), p.size]),
            );
            out.push_str(&crate::table::render(&rows));
        }
    }
    if let Some((health, modules)) = health {
        out.push_str(&cluster_health_lines(health, verbose, modules));
    }
    out
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    if args.brief {
        return match client.get_json::<StatusResponse>("/healthz", &[("brief", "true")]) {
            Ok(s) => {
                let (ok, line) = brief_line(&s);
                println!("{line}");
                Ok(if ok {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            }
            Err(e) => {
                eprintln!("cilium: daemon unreachable: {e}");
                Ok(ExitCode::FAILURE)
            }
        };
    }
    let s: StatusResponse = match client.get_json("/healthz", &[]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("Error: cilium daemon unreachable: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if args.output.is_some() {
        print_json(&s)?;
    } else {
        let health = cluster_health(&s, client.socket());
        let details = Details {
            all_addresses: args.all_addresses || args.verbose,
            all_controllers: args.all_controllers || args.verbose,
            verbose: args.verbose,
        };
        let all_health = args.all_health || args.verbose;
        let modules = match &health {
            ClusterHealth::Disabled => String::new(),
            _ => match crate::modules_health::reports(ctx) {
                Ok(r) if all_health => {
                    let tree = crate::modules_health::tree(&r).replace('\n', "\n\t\t");
                    format!("Modules Health:\n\t\t{tree}\n")
                }
                Ok(r) => format!("Modules Health:\t{}\n", crate::modules_health::tally(&r)),
                Err(e) => {
                    print!("{}", format(&s, details, Some((&health, ""))));
                    return Err(e);
                }
            },
        };
        print!("{}", format(&s, details, Some((&health, &modules))));
    }
    Ok(if ok_state(&s) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::models::{KubeProxyReplacementDevice, MasqueradingProtocols};

    fn on(mode: &str) -> Masquerading {
        Masquerading {
            enabled: true,
            mode: mode.into(),
            enabled_protocols: Some(MasqueradingProtocols {
                ipv4: true,
                ipv6: false,
            }),
            snat_exclusion_cidr_v4: "10.0.0.0/8".into(),
            ..Default::default()
        }
    }

    #[test]
    fn masquerading_reads_as_cilium_prints_it() {
        let kpr = KubeProxyReplacement {
            device_list: vec![KubeProxyReplacementDevice {
                name: "eth0".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            masquerading(&on("BPF"), Some(&kpr)),
            "BPF   [eth0]   10.0.0.0/8 [IPv4: Enabled, IPv6: Disabled]"
        );
        assert_eq!(
            masquerading(&on("iptables"), Some(&kpr)),
            "IPTables [IPv4: Enabled, IPv6: Disabled]"
        );
        let off = Masquerading {
            enabled_protocols: Some(MasqueradingProtocols::default()),
            ..Default::default()
        };
        assert_eq!(masquerading(&off, None), "Disabled");
    }
}
