//! The operator's metrics, under Cilium's `cilium_operator_` names, as
//! Prometheus text on `operator-prometheus-serve-addr` (`enable-metrics`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Metrics {
    ipam_sync_queued: AtomicU64,
    /// Identities found alive and deleted by the last GC run.
    identity_gc_alive: AtomicU64,
    identity_gc_deleted: AtomicU64,
    /// GC runs that finished, and that failed part-way.
    identity_gc_success: AtomicU64,
    identity_gc_fail: AtomicU64,
    /// CiliumEndpoints deleted, and deletions that failed.
    endpoint_gc_success: AtomicU64,
    endpoint_gc_fail: AtomicU64,
}

/// How an identity GC run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdentityGcRun {
    pub alive: usize,
    pub deleted: usize,
    pub failed: bool,
}

impl Metrics {
    /// A CiliumNode went through the IPAM synchroniser.
    pub fn sync_queued(&self) {
        self.ipam_sync_queued.fetch_add(1, Ordering::Relaxed);
    }

    pub fn identity_gc(&self, run: IdentityGcRun) {
        self.identity_gc_alive
            .store(run.alive as u64, Ordering::Relaxed);
        self.identity_gc_deleted
            .store(run.deleted as u64, Ordering::Relaxed);
        let outcome = if run.failed {
            &self.identity_gc_fail
        } else {
            &self.identity_gc_success
        };
        outcome.fetch_add(1, Ordering::Relaxed);
    }

    /// A CiliumEndpoint deletion, done or failed.
    pub fn endpoint_gc(&self, ok: bool) {
        let outcome = if ok {
            &self.endpoint_gc_success
        } else {
            &self.endpoint_gc_fail
        };
        outcome.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        family(
            &mut out,
            "cilium_operator_ipam_k8s_sync_queued_total",
            "counter",
            "Number of CiliumNode synchronizations queued",
            &[("", load(&self.ipam_sync_queued))],
        );
        family(
            &mut out,
            "cilium_operator_identity_gc_entries",
            "gauge",
            "The number of alive and deleted identities at the end of a garbage collector run",
            &[
                ("status=\"alive\"", load(&self.identity_gc_alive)),
                ("status=\"deleted\"", load(&self.identity_gc_deleted)),
            ],
        );
        family(
            &mut out,
            "cilium_operator_identity_gc_runs",
            "gauge",
            "The number of times identity garbage collector has run",
            &[
                ("outcome=\"success\"", load(&self.identity_gc_success)),
                ("outcome=\"fail\"", load(&self.identity_gc_fail)),
            ],
        );
        family(
            &mut out,
            "cilium_operator_endpoint_gc_objects",
            "counter",
            "The number of times endpoint objects have been garbage-collected",
            &[
                ("outcome=\"success\"", load(&self.endpoint_gc_success)),
                ("outcome=\"fail\"", load(&self.endpoint_gc_fail)),
            ],
        );
        out
    }
}

/// One metric family: its help, type and a sample per label set.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}
