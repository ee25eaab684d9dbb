//! Every cilium-config key the agent knows, with its kind and default.
//!
//! Keys of Cilium's ConfigMap that this agent does not act on yet are still
//! known, so a real cilium-config loads; a key that is in no table is a typo
//! and refused. `Implemented::No` keys are reported in the log at start.

/// How a value is validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Str,
    /// Unsigned integer within an inclusive range.
    Uint(u64, u64),
    Float,
    /// One of a fixed set of words (compared case-insensitively).
    Enum(&'static [&'static str]),
    /// An IPv4 CIDR, or empty.
    Cidr4,
    /// An IPv6 CIDR, or empty.
    Cidr6,
    /// An IPv4 address, or empty.
    Ip4,
    /// A Go-style duration such as `10s`, `5m0s` or `1h`.
    Duration,
    /// A path; must be absolute when set.
    Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implemented {
    Yes,
    No,
    /// A key of the shared ConfigMap that only cilium-operator reads.
    Operator,
}

#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub implemented: Implemented,
}

const fn k(name: &'static str, kind: Kind, default: &'static str) -> Key {
    Key {
        name,
        kind,
        default,
        implemented: Implemented::Yes,
    }
}

const fn later(name: &'static str, kind: Kind, default: &'static str) -> Key {
    Key {
        name,
        kind,
        default,
        implemented: Implemented::No,
    }
}

const fn operator(name: &'static str, kind: Kind, default: &'static str) -> Key {
    Key {
        name,
        kind,
        default,
        implemented: Implemented::Operator,
    }
}

use Kind::*;

pub const KEYS: &[Key] = &[
    // Acted on by this agent.
    k("bpf-root", Path, "/sys/fs/bpf"),
    k("state-dir", Path, "/var/run/cilium/state"),
    k("socket-path", Path, "/var/run/cilium/cilium.sock"),
    k("agent-health-port", Uint(0, 65535), "9879"),
    k("debug", Bool, "false"),
    k("debug-verbose", Str, ""),
    k("enable-ipv4", Bool, "true"),
    k("enable-ipv6", Bool, "false"),
    k("ipv4-range", Cidr4, ""),
    k("ipv4-native-routing-cidr", Cidr4, ""),
    k("local-router-ipv4", Ip4, ""),
    k("ipv4-node", Str, "auto"),
    k("cluster-pool-ipv4-cidr", Cidr4, "10.0.0.0/8"),
    k("cluster-pool-ipv4-mask-size", Uint(1, 30), "24"),
    k("ipv6-range", Str, "auto"),
    k("local-router-ipv6", Str, ""),
    k("ipv6-native-routing-cidr", Cidr6, ""),
    // Helm's defaults (the operator's own are empty and /112)
    k("cluster-pool-ipv6-cidr", Str, "fd00::/104"),
    k("cluster-pool-ipv6-mask-size", Uint(1, 127), "120"),
    k("mtu", Uint(0, 65535), "0"),
    k("bpf-ct-global-tcp-max", Uint(1024, 1 << 24), "524288"),
    k("bpf-ct-global-any-max", Uint(1024, 1 << 24), "262144"),
    k("k8s-kubeconfig-path", Path, ""),
    k("k8s-api-server", Str, ""),
    k("k8s-client-qps", Float, "0"),
    k("k8s-client-burst", Uint(0, 1_000_000), "0"),
    k("kvstore", Str, ""),
    k("kvstore-opt", Str, ""),
    k("kvstore-lease-ttl", Duration, "15m0s"),
    k("kvstore-periodic-sync", Duration, "5m0s"),
    k("cluster-name", Str, "default"),
    k("cluster-id", Uint(0, 511), "0"),
    k(
        "enable-policy",
        Enum(&["default", "always", "never"]),
        "default",
    ),
    k(
        "monitor-aggregation",
        Enum(&[
            "none", "disabled", "lowest", "low", "medium", "maximum", "max",
        ]),
        // Cilium's install default (the agent flag alone says none): only
        // packets that open or close a connection are traced
        "medium",
    ),
    k("bpf-events-drop-enabled", Bool, "true"),
    k("bpf-events-policy-verdict-enabled", Bool, "true"),
    k("bpf-events-trace-enabled", Bool, "true"),
    // 0: no limit
    k(
        "bpf-events-default-rate-limit",
        Uint(0, u32::MAX as u64),
        "0",
    ),
    k(
        "bpf-events-default-burst-limit",
        Uint(0, u32::MAX as u64),
        "0",
    ),
    k("routing-mode", Enum(&["tunnel", "native"]), "tunnel"),
    k("auto-direct-node-routes", Bool, "false"),
    k("tunnel-protocol", Enum(&["vxlan", "geneve"]), "vxlan"),
    k("tunnel-port", Uint(0, 65535), "0"),
    k(
        "kube-proxy-replacement",
        Enum(&["true", "false", "strict", "partial", "probe", "disabled"]),
        "false",
    ),
    k(
        "ipam",
        Enum(&[
            "cluster-pool",
            "kubernetes",
            "crd",
            "eni",
            "azure",
            "multi-pool",
            "cluster-pool-v2beta",
            "alibabacloud",
            "delegated-plugin",
        ]),
        "cluster-pool",
    ),
    k(
        "identity-allocation-mode",
        Enum(&[
            "crd",
            "kvstore",
            "doublewrite-readkvstore",
            "doublewrite-readcrd",
        ]),
        "crd",
    ),
    k("enable-hubble", Bool, "false"),
    k("enable-bpf-masquerade", Bool, "false"),
    k("enable-ipv4-masquerade", Bool, "true"),
    k("enable-ipv6-masquerade", Bool, "true"),
    k("enable-host-firewall", Bool, "false"),
    k("enable-host-legacy-routing", Bool, "false"),
    k("enable-bandwidth-manager", Bool, "false"),
    k("enable-ipv4-big-tcp", Bool, "false"),
    k("enable-ipv4-fragment-tracking", Bool, "true"),
    k("bpf-fragments-map-max", Uint(256, 1 << 24), "8192"),
    k("enable-ipv6-big-tcp", Bool, "false"),
    k("cni-chaining-mode", Str, "none"),
    k("write-cni-conf-when-ready", Str, ""),
    k("enable-health-checking", Bool, "true"),
    k("enable-endpoint-health-checking", Bool, "true"),
    k("cluster-health-port", Uint(1, 65535), "4240"),
    k("preallocate-bpf-maps", Bool, "false"),
    k("bpf-map-dynamic-size-ratio", Float, "0.0"),
    // Known Cilium keys this agent accepts but does not act on yet.
    operator(
        "agent-not-ready-taint-key",
        Str,
        "node.cilium.io/agent-not-ready",
    ),
    later("arping-refresh-period", Duration, "30s"),
    later("bpf-lb-external-clusterip", Bool, "false"),
    later("bpf-lb-map-max", Uint(1, 1 << 24), "65536"),
    k("bpf-lb-sock", Bool, "false"),
    k("bpf-lb-algorithm", Enum(&["random", "maglev"]), "random"),
    k("bpf-lb-maglev-table-size", Uint(251, 131071), "16381"),
    k("bpf-lb-maglev-hash-seed", Str, "JLfvgnHc2kaSUFaI"),
    later("bpf-policy-map-max", Uint(256, 65536), "16384"),
    later("bpf-nat-global-max", Uint(1024, 1 << 24), "524288"),
    later("bpf-neigh-global-max", Uint(1024, 1 << 24), "524288"),
    k("cgroup-root", Path, "/run/cilium/cgroupv2"),
    operator("cilium-endpoint-gc-interval", Duration, "5m0s"),
    k("cni-uninstall", Bool, "true"),
    k("cni-exclusive", Bool, "false"),
    k("cni-log-file", Str, "/var/run/cilium/cilium-cni.log"),
    // read by the init containers, known so a real cilium-config loads
    k("clean-cilium-state", Bool, "false"),
    k("clean-cilium-bpf-state", Bool, "false"),
    // written by cilium build-config
    k("config-sources", Str, ""),
    later("custom-cni-conf", Bool, "false"),
    // 0: dynamic
    k("conntrack-gc-interval", Duration, "0s"),
    k("conntrack-gc-max-interval", Duration, "0s"),
    later("devices", Str, ""),
    later("disable-cnp-status-updates", Bool, "true"),
    later("disable-endpoint-crd", Bool, "false"),
    later("enable-auto-protect-node-port-range", Bool, "true"),
    later("enable-bgp-control-plane", Bool, "false"),
    later("enable-bpf-clock-probe", Bool, "false"),
    later("enable-endpoint-routes", Bool, "false"),
    later("enable-health-check-nodeport", Bool, "true"),
    later("enable-k8s-terminating-endpoint", Bool, "true"),
    later("enable-l2-neigh-discovery", Bool, "true"),
    later("enable-l7-proxy", Bool, "true"),
    later("enable-local-redirect-policy", Bool, "false"),
    k("enable-host-port", Bool, "false"),
    k("enable-node-port", Bool, "false"),
    later("enable-remote-node-identity", Bool, "true"),
    later("enable-sctp", Bool, "false"),
    later("enable-svc-source-range-check", Bool, "true"),
    later("enable-vtep", Bool, "false"),
    later("enable-well-known-identities", Bool, "false"),
    later("enable-xt-socket-fallback", Bool, "true"),
    k("enable-tcx", Bool, "true"),
    k("hubble-disable-tls", Bool, "false"),
    k("hubble-listen-address", Str, ""),
    k("hubble-metrics", Str, ""),
    k("hubble-metrics-server", Str, ""),
    k("hubble-socket-path", Path, "/var/run/cilium/hubble.sock"),
    k("hubble-event-buffer-capacity", Uint(1, 65535), "4095"),
    k("hubble-event-queue-size", Uint(0, 1 << 20), "0"),
    k("hubble-tls-cert-file", Str, ""),
    k("hubble-tls-client-ca-files", Str, ""),
    k("hubble-tls-key-file", Str, ""),
    operator("identity-gc-interval", Duration, "15m0s"),
    operator("identity-heartbeat-timeout", Duration, "30m0s"),
    later("install-no-conntrack-iptables-rules", Bool, "false"),
    later("kube-proxy-replacement-healthz-bind-address", Str, ""),
    later("monitor-aggregation-flags", Str, "all"),
    later("monitor-aggregation-interval", Duration, "5s"),
    later("node-port-bind-protection", Bool, "true"),
    k("node-port-range", Str, "30000,32767"),
    operator("nodes-gc-interval", Duration, "5m0s"),
    operator("operator-api-serve-addr", Str, "127.0.0.1:9234"),
    operator("operator-prometheus-serve-addr", Str, ":9963"),
    operator("enable-metrics", Bool, "false"),
    operator("set-cilium-node-taints", Bool, "false"),
    k("procfs", Path, "/proc"),
    k("prometheus-serve-addr", Str, ""),
    operator("remove-cilium-node-taints", Bool, "true"),
    operator("set-cilium-is-up-condition", Bool, "true"),
    later("sidecar-istio-proxy-image", Str, "cilium/istio_proxy"),
    later("skip-cnp-status-startup-clean", Bool, "false"),
    operator("synchronize-k8s-nodes", Bool, "true"),
    later(
        "tofqdns-dns-reject-response-code",
        Enum(&["refused", "nameerror"]),
        "refused",
    ),
    later("tofqdns-enable-dns-compression", Bool, "true"),
    later(
        "tofqdns-endpoint-max-ip-per-hostname",
        Uint(0, 1 << 20),
        "50",
    ),
    later("tofqdns-idle-connection-grace-period", Duration, "0s"),
    later(
        "tofqdns-max-deferred-connection-deletes",
        Uint(0, 1 << 20),
        "10000",
    ),
    later("tofqdns-min-ttl", Uint(0, 1 << 31), "0"),
    later("tofqdns-proxy-response-max-delay", Duration, "100ms"),
    later("tunnel", Enum(&["vxlan", "geneve", "disabled"]), "vxlan"),
    operator("unmanaged-pod-watcher-interval", Uint(0, 1 << 20), "15"),
    later("vtep-cidr", Str, ""),
    later("vtep-endpoint", Str, ""),
    later("vtep-mac", Str, ""),
    later("vtep-mask", Str, ""),
];

pub fn lookup(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.name == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn key_names_are_unique_and_defaults_valid() {
        let mut seen = std::collections::BTreeSet::new();
        for key in super::KEYS {
            assert!(seen.insert(key.name), "duplicate key {}", key.name);
            super::super::validate::validate(key, key.default).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
