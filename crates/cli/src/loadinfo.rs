//! `cilium loadinfo`: the node's load, memory and the processes using
//! more than 1% of a CPU, as 1.16 prints them (no agent needed).

use std::process::ExitCode;

/// `/proc/meminfo` values in bytes.
fn meminfo() -> Option<std::collections::HashMap<String, u64>> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                let kb: u64 = v.split_whitespace().next()?.parse().ok()?;
                Some((k.to_owned(), kb * 1024))
            })
            .collect(),
    )
}

const MB: u64 = 1024 * 1024;

fn pct(part: u64, total: u64) -> String {
    crate::gofmt::fixed2(part as f64 / total as f64 * 100.0)
}

/// Seconds since boot from /proc/stat's btime.
fn boot_time() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .map_or(0, |kb: u64| kb * 1024)
}

/// The line of one busy process, or None when it uses at most 1% or
/// its files cannot be read.
fn process_line(pid: u32, btime: u64, mem_total: u64, now: u64) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let (comm, rest) = stat.split_once(" (").map(|(_, r)| r.rsplit_once(") "))??;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // after comm: state is field 3, utime 14, stime 15, starttime 22
    let state = fields.first()?;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let start: f64 = fields.get(19)?.parse().ok()?;
    let elapsed = now as f64 - (btime as f64 + start / 100.0);
    let cpu = (utime + stime) / 100.0 / elapsed * 100.0;
    if cpu.is_nan() || cpu <= 1.0 {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let rss = status_field(&status, "VmRSS");
    let f = crate::gofmt::fixed2;
    Some(format!(
        "NAME {} STATUS {state} PID {pid} CPU: {}% MEM: {}% CMDLINE: [{}] MEM-EXT: RSS: {} VMS: {} Data: {} Stack: {} Locked: {} Swap: {}",
        comm.trim(),
        f(cpu),
        f(rss as f64 * 100.0 / mem_total as f64),
        args.join(" "),
        rss / MB,
        status_field(&status, "VmSize") / MB,
        status_field(&status, "VmData") / MB,
        status_field(&status, "VmStk") / MB,
        status_field(&status, "VmLck") / MB,
        status_field(&status, "VmSwap") / MB,
    ))
}

pub fn run() -> anyhow::Result<ExitCode> {
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let l: Vec<f64> = load
            .split_whitespace()
            .take(3)
            .filter_map(|v| v.parse().ok())
            .collect();
        if let [one, five, fifteen] = l[..] {
            let f = crate::gofmt::fixed2;
            println!(
                "Load 1-min: {} 5-min: {} 15min: {}",
                f(one),
                f(five),
                f(fifteen)
            );
        }
    }
    let mem = meminfo().unwrap_or_default();
    let get = |k: &str| mem.get(k).copied().unwrap_or(0);
    let total = get("MemTotal");
    if !mem.is_empty() {
        let used = match mem.get("MemAvailable") {
            Some(avail) => total.saturating_sub(*avail),
            None => total.saturating_sub(get("MemFree") + get("Buffers") + get("Cached")),
        };
        println!(
            "Memory: Total: {} Used: {} ({}%) Free: {} Buffers: {} Cached: {}",
            total / MB,
            used / MB,
            pct(used, total),
            get("MemFree") / MB,
            get("Buffers") / MB,
            get("Cached") / MB
        );
        let (swap, swap_free) = (get("SwapTotal"), get("SwapFree"));
        let swap_used = swap.saturating_sub(swap_free);
        println!(
            "Swap: Total: {} Used: {} ({}%) Free: {}",
            swap / MB,
            swap_used / MB,
            pct(swap_used, swap),
            swap_free / MB
        );
    }
    let btime = boot_time().unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Go globs /proc/[0-9]*/exe: names in lexical order
    let mut pids: Vec<String> = std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    pids.sort();
    for pid in pids {
        if let Some(line) = pid
            .parse()
            .ok()
            .and_then(|p| process_line(p, btime, total, now))
        {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
