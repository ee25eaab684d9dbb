//! `cilium status` in Cilium's line format.

use crate::table::{print_json, Output};
use crate::Ctx;
use api::models::{State, StatusResponse};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Only print a one-line status message
    #[arg(long)]
    brief: bool,
    /// Equivalent to --all-controllers plus BPF map and clock details
    #[arg(long)]
    verbose: bool,
    /// Show all controllers, not just failing
    #[arg(long = "all-controllers")]
    all_controllers: bool,
    /// json
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
}

fn ok_state(s: &StatusResponse) -> bool {
    matches!(
        s.cilium.as_ref().map(|c| c.state),
        Some(State::Ok | State::Disabled)
    )
}

/// `OK` or `error in <component>: <msg>`.
pub fn brief_line(s: &StatusResponse) -> (bool, String) {
    match &s.cilium {
        Some(c) if !matches!(c.state, State::Ok | State::Disabled) => {
            (false, format!("error in cilium: {}", c.msg))
        }
        None => (false, "error in cilium: no status reported".into()),
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

/// The non-verbose block, one `Label:` per line, values aligned at column 25.
pub fn format(s: &StatusResponse, verbose: bool, all_controllers: bool) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| lines.push((format!("{k}:"), v));
    if let Some(k) = &s.kvstore {
        push("KVStore", state_line(k.state, &k.msg));
    }
    if let Some(k) = &s.kubernetes {
        push("Kubernetes", state_line(k.state, &k.msg));
    }
    if let Some(k) = &s.kube_proxy_replacement {
        if k.devices.is_empty() {
            push("KubeProxyReplacement", k.mode.clone());
        } else {
            push(
                "KubeProxyReplacement",
                format!("{}   [{}]", k.mode, k.devices.join(", ")),
            );
        }
    }
    if let Some(h) = &s.host_firewall {
        push("Host firewall", h.mode.clone());
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
    push(
        "NodeMonitor",
        s.node_monitor.as_ref().map_or("Disabled".into(), |n| {
            if n.msg.is_empty() {
                n.state.to_string()
            } else {
                n.msg.clone()
            }
        }),
    );
    match &s.ipam {
        Some(ipam) => {
            push("IPAM", ipam.status.clone());
            if verbose {
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
        push("Attach Mode", s.attach_mode.clone());
    }
    if !s.datapath_mode.is_empty() {
        push("Device Mode", s.datapath_mode.clone());
    }
    push(
        "Masquerading",
        if s.masquerading.as_ref().is_some_and(|m| m.enabled) {
            "Enabled".into()
        } else {
            "Disabled".into()
        },
    );
    if verbose {
        if let Some(c) = &s.clock_source {
            push("Clock Source for BPF", c.mode.clone());
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
            .map_or("Disabled".into(), |p| p.state.to_string()),
    ));
    if let Some(r) = &s.identity_range {
        tail.push((
            "Global Identity Range:".into(),
            format!("min {}, max {}", r.min_identity, r.max_identity),
        ));
    }
    tail.push((
        "Hubble:".into(),
        s.hubble
            .as_ref()
            .map_or("Disabled".into(), |h| state_line(h.state, &h.msg)),
    ));
    tail.push((
        "Encryption:".into(),
        s.encryption
            .as_ref()
            .map_or("Disabled".into(), |e| e.mode.clone()),
    ));
    tail.push(("Cluster health:".into(), "Probe disabled".into()));
    for (k, v) in tail {
        out.push_str(&format!("{k:<25}{v}\n"));
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
        print!("{}", format(&s, args.verbose, args.all_controllers));
    }
    Ok(if ok_state(&s) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
