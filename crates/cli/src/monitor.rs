//! `cilium monitor`: the agent's stream of datapath events and agent
//! notifications, in Cilium's one-line formats, Cilium's verbose dissection
//! with `-v` (and the captured bytes with `-vv`), or `-o json`.

use crate::Ctx;
use anyhow::Context;
use api::monitor::MonitorEvent;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Filter by event types (drop, trace, policy-verdict, l7, agent)
    #[arg(short = 't', long = "type", value_parser = ["drop", "trace", "policy-verdict", "l7", "agent", "capture", "debug"])]
    types: Vec<String>,
    /// Filter by source endpoint IDs
    #[arg(long = "from")]
    from: Vec<u32>,
    /// Filter by events related to endpoint IDs
    #[arg(long = "related-to")]
    related_to: Vec<u32>,
    /// Filter by destination endpoint IDs
    #[arg(long = "to")]
    to: Vec<u32>,
    /// Enable verbose output (-v, -vv)
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// json for the events as the agent sends them
    #[arg(short = 'o', long, value_parser = ["json"])]
    output: Option<String>,
}

/// A socket beside the agent's API socket.
pub fn agent_socket(ctx: &Ctx, name: &str) -> PathBuf {
    let api = match ctx.host.as_deref() {
        Some(h) => h.strip_prefix("unix://").unwrap_or(h).to_owned(),
        None => {
            std::env::var("CILIUM_SOCK").unwrap_or_else(|_| "/var/run/cilium/cilium.sock".into())
        }
    };
    PathBuf::from(api).with_file_name(name)
}

/// Cilium's line for a trace event.
fn trace_line(ev: &MonitorEvent) -> String {
    let to = match ev.obs_point.as_str() {
        "to-endpoint" => format!("-> endpoint {}", ev.dst_id),
        "to-stack" => "-> stack".to_owned(),
        "to-overlay" => "-> overlay".to_owned(),
        "to-host" => "-> host".to_owned(),
        other => format!("-> {other}"),
    };
    format!(
        "{to} flow {:#x} , identity {}->{} state {} ifindex {} orig-ip 0.0.0.0: {}",
        ev.hash, ev.src_label, ev.dst_label, ev.state, ev.ifindex, ev.summary
    )
}

/// Cilium's line for a policy verdict.
fn verdict_line(ev: &MonitorEvent) -> String {
    format!(
        "Policy verdict log: flow {:#x} local EP ID {}, remote ID {}, proto {}, {}, action {}, auth: disabled, match {}, {}",
        ev.hash, ev.dst_id, ev.src_label, ev.proto, ev.obs_point, ev.reason_text, ev.state, ev.summary
    )
}

/// Cilium's line for a drop event.
fn drop_line(ev: &MonitorEvent) -> String {
    format!(
        "xx drop ({}) flow {:#x} to endpoint {}, ifindex {}, file {}:{}, , identity {}->{}: {}",
        ev.reason_text,
        ev.hash,
        ev.dst_id,
        ev.ifindex,
        ev.file,
        ev.line,
        ev.src_label,
        ev.dst_label,
        ev.summary
    )
}

/// The one-line form of any event.
pub fn line(ev: &MonitorEvent) -> Option<String> {
    Some(match ev.kind.as_str() {
        "drop" => drop_line(ev),
        "trace" => trace_line(ev),
        "policy-verdict" => verdict_line(ev),
        "agent" => format!(">> {}: {}", ev.reason_text, ev.message),
        "capture" => format!(
            "CPU {:02}: MARK {:#x} FROM {} DEBUG: {} {}, {} bytes: {}",
            ev.cpu, ev.hash, ev.source, ev.obs_point, ev.ifindex, ev.len_orig, ev.summary
        ),
        "lost" => format!("CPU {:02}: Lost {} events", ev.cpu, ev.len_orig),
        _ => return None,
    })
}

fn bytes_of(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// Cilium's verbose form: the packet layer by layer, then what happened.
fn verbose(ev: &MonitorEvent, level: u8) -> Option<String> {
    let what = match ev.kind.as_str() {
        "drop" => format!(
            "DROP: {} bytes, reason {}, to endpoint {}",
            ev.len_orig, ev.reason_text, ev.dst_id
        ),
        "trace" => format!(
            "{}: {} bytes, state {}, identity {}->{}",
            ev.obs_point, ev.len_orig, ev.state, ev.src_label, ev.dst_label
        ),
        "policy-verdict" => format!(
            "POLICY {}: {} bytes, action {}, match {}, remote ID {}, port {}",
            ev.obs_point.to_uppercase(),
            ev.len_orig,
            ev.reason_text,
            ev.state,
            ev.src_label,
            ev.port
        ),
        _ => return line(ev),
    };
    let frame = bytes_of(&ev.data);
    let mut out = String::from(
        "------------------------------------------------------------------------------\n",
    );
    if frame.len() >= 14 {
        out += &format!(
            "Ethernet\t{{SrcMAC={} DstMAC={} EthernetType={}}}\n",
            abi::endpoint::format_mac(&frame[6..12]),
            abi::endpoint::format_mac(&frame[0..6]),
            if frame[12..14] == [8, 0] {
                "IPv4"
            } else {
                "other"
            }
        );
    }
    if let Some(p) = &ev.packet {
        out += &format!(
            "IPv4\t{{SrcIP={} DstIP={} Protocol={}}}\n",
            p.src_ip, p.dst_ip, p.protocol
        );
        match p.protocol.as_str() {
            "TCP" | "UDP" => {
                out += &format!(
                    "{}\t{{SrcPort={} DstPort={}{}}}\n",
                    p.protocol,
                    p.src_port,
                    p.dst_port,
                    p.flags
                        .iter()
                        .map(|f| format!(" {f}=true"))
                        .collect::<String>()
                )
            }
            _ => out += &format!("{}\t{{TypeCode={}}}\n", p.protocol, p.flags.join(",")),
        }
    }
    out += &format!(
        "CPU {:02}: MARK {:#x} FROM {} {what}",
        ev.cpu, ev.hash, ev.source
    );
    if level > 1 {
        for (i, chunk) in frame.chunks(16).enumerate() {
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            out += &format!("\n{:08x}  {}", i * 16, hex.join(" "));
        }
    }
    Some(out)
}

impl Args {
    fn filters(&self) -> bool {
        !(self.types.is_empty()
            && self.from.is_empty()
            && self.to.is_empty()
            && self.related_to.is_empty())
    }

    fn wants(&self, ev: &MonitorEvent) -> bool {
        let (src, dst) = (ev.source, ev.dst_id);
        (self.types.is_empty() || self.types.contains(&ev.kind))
            && (self.from.is_empty() || self.from.contains(&src))
            && (self.to.is_empty() || self.to.contains(&dst))
            && (self.related_to.is_empty()
                || self.related_to.contains(&src)
                || self.related_to.contains(&dst))
    }
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    // The agent's JSON-lines stream of decoded events (its
    // `monitor1_2.sock` speaks Cilium's gob protocol, for cilium-dbg).
    let path = agent_socket(ctx, "cilium-rs-monitor.sock");
    let stream = std::os::unix::net::UnixStream::connect(&path)
        .with_context(|| format!("connecting to the monitor at {}", path.display()))?;
    // stdout flushes each line by itself: batches need a buffer of their own
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut events = BufReader::new(stream);
    let mut text = String::new();
    loop {
        // what arrived together is written together; a reader sees each
        // event as soon as nothing more is waiting
        if events.buffer().is_empty() {
            out.flush()?;
        }
        text.clear();
        if events
            .read_line(&mut text)
            .context("reading from the monitor")?
            == 0
        {
            break;
        }
        let text = text.trim_end_matches('\n');
        if text.starts_with(api::monitor::HELLO_PREFIX) {
            let raw: serde_json::Value = serde_json::from_str(text).context("malformed event")?;
            if args.output.is_none() {
                writeln!(
                    out,
                    "Listening for events on {} CPUs with 64x4096 of shared memory\nPress Ctrl-C to quit",
                    raw["cpus"]
                )?;
            }
            continue;
        }
        // JSON out and nothing to filter: the line goes as it came
        if args.output.is_some() && !args.filters() {
            writeln!(out, "{text}")?;
            continue;
        }
        let ev: MonitorEvent = serde_json::from_str(text).context("malformed event")?;
        if ev.kind != "lost" && !args.wants(&ev) {
            continue;
        }
        let shown = if args.output.is_some() {
            Some(text.to_owned())
        } else if args.verbose > 0 {
            verbose(&ev, args.verbose)
        } else {
            line(&ev)
        };
        if let Some(s) = shown {
            writeln!(out, "{s}")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::monitor::Packet;

    #[test]
    fn verbose_output_dissects_the_packet() {
        let mut frame = [0u8; 14];
        frame[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0xb]);
        frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xa]);
        frame[12] = 8;
        let ev = MonitorEvent {
            kind: "drop".into(),
            reason_text: "Policy denied".into(),
            len_orig: 74,
            source: 12,
            dst_id: 34,
            data: frame.iter().map(|b| format!("{b:02x}")).collect(),
            packet: Some(Packet {
                src_ip: "10.0.1.5".into(),
                dst_ip: "10.0.2.7".into(),
                src_port: 40000,
                dst_port: 80,
                protocol: "TCP".into(),
                flags: vec!["SYN".into()],
            }),
            ..Default::default()
        };
        let text = verbose(&ev, 2).unwrap();
        assert!(
            text.contains("SrcMAC=02:00:00:00:00:0a DstMAC=02:00:00:00:00:0b"),
            "{text}"
        );
        assert!(
            text.contains("TCP\t{SrcPort=40000 DstPort=80 SYN=true}"),
            "{text}"
        );
        assert!(
            text.contains("FROM 12 DROP: 74 bytes, reason Policy denied, to endpoint 34"),
            "{text}"
        );
        assert!(
            text.ends_with("00000000  02 00 00 00 00 0b 02 00 00 00 00 0a 08 00"),
            "{text}"
        );
    }
}
