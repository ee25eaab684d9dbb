//! Gives back, once the agent is up, the pages of code and read-only data
//! that only its start used. Starting runs a lot of code once (loading
//! and attaching the BPF objects, restoring endpoints, the first
//! listings, TLS), and the kernel keeps every page a process ran mapped
//! into it until memory runs short: most of an idle agent's RSS was such
//! pages. Dropping the mappings of the binary's and libraries' read-only
//! file pages changes no byte: what runs again faults back in from the
//! page cache, so the RSS holds what the agent goes on using.

use std::time::Duration;

/// How long the start may take before the pages are given back anyway.
const START_LIMIT: Duration = Duration::from_secs(120);

/// A mapping in /proc/self/smaps: its range and the kB of it resident.
#[derive(Debug, PartialEq)]
struct Mapping {
    start: usize,
    end: usize,
    rss_kb: u64,
}

/// The private, read-only file mappings that hold no page of their own:
/// never written, so dropping their pages loses nothing. (A relocated
/// read-only range such as a library's RELRO was written before it was
/// protected: its copied pages count as `Anonymous` and keep it out.)
fn read_only_file_mappings(smaps: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    // the mapping being read, and whether it is still eligible
    let mut current: Option<(Mapping, bool)> = None;
    let finish = |m: Option<(Mapping, bool)>, out: &mut Vec<Mapping>| {
        if let Some((m, true)) = m {
            out.push(m);
        }
    };
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-') {
            let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) else {
                continue;
            };
            finish(current.take(), &mut out);
            let perms = fields.next().unwrap_or("");
            let path = fields.nth(3).unwrap_or("");
            let eligible = matches!(perms, "r-xp" | "r--p") && path.starts_with('/');
            current = Some((
                Mapping {
                    start,
                    end,
                    rss_kb: 0,
                },
                eligible,
            ));
            continue;
        }
        let Some((m, eligible)) = current.as_mut() else {
            continue;
        };
        let kb = || fields.clone().next().and_then(|v| v.parse::<u64>().ok());
        match first {
            "Rss:" => m.rss_kb = kb().unwrap_or(0),
            "Anonymous:" if kb() != Some(0) => *eligible = false,
            _ => {}
        }
    }
    finish(current, &mut out);
    out
}

/// Drops this process's resident pages of every such mapping; returns the
/// kB that were resident.
fn release() -> std::io::Result<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut released = 0;
    for m in read_only_file_mappings(&smaps) {
        // SAFETY: a whole mapping that is never written and holds no
        // private page: the next access faults in the same bytes from
        // the file.
        let rc = unsafe {
            libc::madvise(
                m.start as *mut libc::c_void,
                m.end - m.start,
                libc::MADV_DONTNEED,
            )
        };
        if rc == 0 {
            released += m.rss_kb;
        }
    }
    Ok(released)
}

/// Gives the start's pages back once `started` says the agent is up (or
/// after [`START_LIMIT`]).
pub fn release_when_started(
    tasks: &controlplane::tasks::Tasks,
    started: impl Fn() -> bool + Send + 'static,
) {
    tasks.spawn("release-start-pages", async move {
        let deadline = tokio::time::Instant::now() + START_LIMIT;
        while !started() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        match release() {
            Ok(kb) => {
                tracing::info!(subsys = "daemon", residentKB = kb, "Released the pages only the start used")
            }
            Err(e) => {
                tracing::warn!(subsys = "daemon", error = %e, "Unable to read this process's mappings")
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unwritten_read_only_file_mappings_are_taken() {
        let smaps = "\
00400000-00600000 r--p 00000000 08:01 123 /usr/bin/cilium-agent
Rss:                1200 kB
Anonymous:             0 kB
00600000-00a00000 r-xp 00200000 08:01 123 /usr/bin/cilium-agent
Rss:                5000 kB
Anonymous:             0 kB
00a00000-00a10000 rw-p 00600000 08:01 123 /usr/bin/cilium-agent
Rss:                  64 kB
Anonymous:            64 kB
7f0000000000-7f0000004000 r--p 001d0000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                  16 kB
Anonymous:            16 kB
7f0000010000-7f0000020000 rw-p 00000000 00:00 0
Rss:                  64 kB
Anonymous:            64 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
Rss:                   8 kB
Anonymous:             0 kB
";
        assert_eq!(
            read_only_file_mappings(smaps),
            [
                Mapping {
                    start: 0x400000,
                    end: 0x600000,
                    rss_kb: 1200
                },
                Mapping {
                    start: 0x600000,
                    end: 0xa00000,
                    rss_kb: 5000
                },
            ]
        );
    }

    #[test]
    fn released_code_runs_again() {
        let before = release().unwrap();
        assert!(before > 0, "this test's own code was resident");
        // everything from here on faults back in
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 499_500);
    }
}
