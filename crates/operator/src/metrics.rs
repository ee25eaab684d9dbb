//! The operator's metrics, under Cilium's `cilium_operator_` names, as
//! Prometheus text on `operator-prometheus-serve-addr` (`enable-metrics`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Metrics {
    ipam_sync_queued: AtomicU64,
}

impl Metrics {
    /// A CiliumNode went through the IPAM synchroniser.
    pub fn sync_queued(&self) {
        self.ipam_sync_queued.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        counter(
            &mut out,
            "cilium_operator_ipam_k8s_sync_queued_total",
            "Number of CiliumNode synchronizations queued",
            self.ipam_sync_queued.load(Ordering::Relaxed),
        );
        out
    }
}
