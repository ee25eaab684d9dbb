//! Conntrack GC (Cilium's `ctmap/gc`): expired entries leave the CT maps,
//! and idle NodePort NAT pairs the NAT map, on a schedule. `conntrack-gc-interval` fixes it; at 0 (the default) it
//! adapts: a pass that deleted over a quarter of a map's capacity brings
//! the next one closer (down to 10 s), one that deleted under 5% pushes it
//! out (up to `conntrack-gc-max-interval`, 12 h by default, the CT maps
//! being LRU). The first pass runs at start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MIN_INTERVAL: Duration = Duration::from_secs(10);
const START_INTERVAL: Duration = Duration::from_secs(5 * 60);
const DEFAULT_MAX: Duration = Duration::from_secs(12 * 60 * 60);

/// What the passes did, for metrics.
#[derive(Default)]
pub struct GcCounters {
    pub runs: AtomicU64,
    /// Last pass, TCP map then the other one: (alive, deleted)
    pub tcp: [AtomicU64; 2],
    pub any: [AtomicU64; 2],
    /// Last pass over the NodePort NAT map: (alive, deleted)
    pub nat: [AtomicU64; 2],
    pub interval_secs: AtomicU64,
}

/// The interval after a pass that deleted `ratio` of a map's capacity.
pub fn next_interval(prev: Duration, ratio: f64, max: Duration) -> Duration {
    let next = if ratio >= 0.25 {
        prev.mul_f64(1.0 - ratio.min(0.9))
    } else if ratio < 0.05 {
        prev.mul_f64(1.5)
    } else {
        prev
    };
    next.clamp(MIN_INTERVAL, max.max(MIN_INTERVAL))
}

/// One CT map's pass, logged; None when it failed.
fn gc_ct<K: abi::Plain>(
    name: &str,
    map: Result<datapath::Map<K, abi::ct::CtEntry>, datapath::Error>,
    now: u32,
) -> Option<datapath::ctmap::GcStats> {
    match map.and_then(|m| datapath::ctmap::gc_map(&m, now)) {
        Ok(s) => {
            tracing::debug!(
                subsys = "ct-gc",
                map = name,
                alive = s.alive,
                deleted = s.deleted,
                "Conntrack garbage collection pass"
            );
            Some(s)
        }
        Err(e) => {
            tracing::warn!(subsys = "ct-gc", map = name, error = %e, "Unable to garbage collect conntrack map");
            None
        }
    }
}

/// One pass over the maps; returns the highest share of a CT map's
/// capacity it deleted. The IPv6 maps are passed over where they exist
/// (dual-stack nodes); the counters add both families up.
pub fn pass(root: &std::path::Path, counters: &GcCounters) -> f64 {
    use datapath::maps::{
        Ct4Global, Ct6Global, CtAny4Global, CtAny6Global, Snat4External, Snat6External,
    };
    let now = datapath::ctmap::now_secs();
    let ipv6 = Ct6Global::pin_path(root).exists();
    let mut worst: f64 = 0.0;
    let mut tally = |slot: &[AtomicU64; 2], passes: [Option<datapath::ctmap::GcStats>; 2]| {
        let (mut alive, mut deleted) = (0, 0);
        for s in passes.into_iter().flatten() {
            alive += s.alive;
            deleted += s.deleted;
            worst = worst.max(s.deleted_ratio());
        }
        slot[0].store(alive, Ordering::Relaxed);
        slot[1].store(deleted, Ordering::Relaxed);
    };
    tally(
        &counters.tcp,
        [
            gc_ct(
                Ct4Global::NAME,
                Ct4Global::open(root).map(Ct4Global::into_map),
                now,
            ),
            ipv6.then(|| {
                gc_ct(
                    Ct6Global::NAME,
                    Ct6Global::open(root).map(Ct6Global::into_map),
                    now,
                )
            })
            .flatten(),
        ],
    );
    tally(
        &counters.any,
        [
            gc_ct(
                CtAny4Global::NAME,
                CtAny4Global::open(root).map(CtAny4Global::into_map),
                now,
            ),
            ipv6.then(|| {
                gc_ct(
                    CtAny6Global::NAME,
                    CtAny6Global::open(root).map(CtAny6Global::into_map),
                    now,
                )
            })
            .flatten(),
        ],
    );
    let mut nat = [0u64; 2];
    let mut count = |name: &str, pass: Result<datapath::ctmap::GcStats, datapath::Error>| match pass
    {
        Ok(s) => {
            nat[0] += s.alive;
            nat[1] += s.deleted;
        }
        Err(e) => {
            tracing::warn!(subsys = "ct-gc", map = name, error = %e, "Unable to garbage collect the NAT map")
        }
    };
    count(
        Snat4External::NAME,
        Snat4External::open(root).and_then(|m| datapath::ctmap::gc_nat(&m.into_map(), now)),
    );
    if ipv6 {
        count(
            Snat6External::NAME,
            Snat6External::open(root).and_then(|m| datapath::ctmap::gc_nat(&m.into_map(), now)),
        );
    }
    counters.nat[0].store(nat[0], Ordering::Relaxed);
    counters.nat[1].store(nat[1], Ordering::Relaxed);
    counters.runs.fetch_add(1, Ordering::Relaxed);
    worst
}

/// Runs passes until the agent stops.
pub fn start(
    tasks: &controlplane::tasks::Tasks,
    bpf_root: std::path::PathBuf,
    counters: Arc<GcCounters>,
    fixed: Duration,
    max: Duration,
) {
    let max = if max.is_zero() { DEFAULT_MAX } else { max };
    let bpf_root = Arc::new(bpf_root);
    tasks.spawn("ct-gc", async move {
        let mut interval = if fixed.is_zero() {
            START_INTERVAL
        } else {
            fixed
        };
        loop {
            let (root, c) = (Arc::clone(&bpf_root), Arc::clone(&counters));
            let Ok(ratio) = tokio::task::spawn_blocking(move || pass(&root, &c)).await else {
                return;
            };
            if fixed.is_zero() {
                interval = next_interval(interval, ratio, max);
            }
            counters
                .interval_secs
                .store(interval.as_secs(), Ordering::Relaxed);
            tokio::time::sleep(interval).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_follows_how_much_a_pass_deleted() {
        let max = DEFAULT_MAX;
        let five = Duration::from_secs(300);
        assert_eq!(next_interval(five, 0.5, max), Duration::from_secs(150));
        assert_eq!(next_interval(five, 0.0, max), Duration::from_secs(450));
        assert_eq!(next_interval(five, 0.1, max), five);
        assert_eq!(next_interval(MIN_INTERVAL, 0.99, max), MIN_INTERVAL);
        assert_eq!(next_interval(max, 0.0, max), max);
    }
}
