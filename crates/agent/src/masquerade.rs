//! Masquerading of pods' traffic that leaves the cluster, as the
//! configuration asks: with iptables (`enable-ipv4-masquerade` without
//! `enable-bpf-masquerade`, Cilium's default), or not at all. What was
//! actually installed is what `cilium status` reports.

use crate::option::DaemonConfig;
use api::status::{Masquerading, MasqueradingProtocols};

fn disabled() -> Masquerading {
    Masquerading {
        enabled: false,
        enabled_protocols: Some(MasqueradingProtocols::default()),
        ..Default::default()
    }
}

fn cidr((net, len): (std::net::Ipv4Addr, u8)) -> String {
    format!("{net}/{len}")
}

/// Sets masquerading up for this node (its pod CIDR is final by now) and
/// says what is in place. A rule left by an earlier run that is no
/// longer wanted is removed.
pub fn setup(config: &DaemonConfig) -> Masquerading {
    let wanted = config.ipv4_masquerade && !config.bpf_masquerade;
    if config.ipv4_masquerade && config.bpf_masquerade {
        tracing::warn!(
            subsys = "daemon",
            "enable-bpf-masquerade is not implemented yet: pods' traffic leaving the cluster is not masqueraded"
        );
    }
    if !wanted {
        if let Err(e) = netdev::iptables::remove() {
            tracing::warn!(subsys = "iptables", error = %e, "Unable to remove masquerading rules");
        }
        return disabled();
    }
    let rule = netdev::iptables::Masquerade {
        source: config.ipv4_range,
        exclude: config.ipv4_native_routing_cidr.unwrap_or(config.ipv4_range),
    };
    match netdev::iptables::install(&rule) {
        Ok(()) => Masquerading {
            enabled: true,
            mode: "iptables".into(),
            enabled_protocols: Some(MasqueradingProtocols {
                ipv4: true,
                ipv6: false,
            }),
            snat_exclusion_cidr_v4: cidr(rule.exclude),
            ..Default::default()
        },
        Err(e) => {
            tracing::error!(subsys = "iptables", error = %e, "Unable to install masquerading rules; pods' traffic leaving the cluster is not masqueraded");
            disabled()
        }
    }
}
