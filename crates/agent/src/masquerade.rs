//! Masquerading of pods' traffic that leaves the cluster, as the
//! configuration asks: in the datapath (`enable-bpf-masquerade`, on the
//! native device NodePort also serves), with iptables (Cilium's default),
//! or not at all. Whichever is not wanted is turned off, so a change of
//! mode across a restart leaves nothing of the old one behind. What was
//! actually installed is what `cilium status` reports.

use crate::option::DaemonConfig;
use api::status::{Masquerading, MasqueradingProtocols};
use datapath::maps::RuntimeConfig;
use std::net::{Ipv4Addr, Ipv6Addr};

fn disabled() -> Masquerading {
    Masquerading {
        enabled: false,
        enabled_protocols: Some(MasqueradingProtocols::default()),
        ..Default::default()
    }
}

/// Sets masquerading up for this node (its pod CIDRs are final by now) and
/// says what is in place. `node_ip` and `node_ipv6` are the native
/// device's addresses, which BPF masquerading gives pods' packets.
pub fn setup(
    config: &DaemonConfig,
    node_ip: Option<Ipv4Addr>,
    node_ipv6: Option<Ipv6Addr>,
) -> Masquerading {
    let v4 = setup_ipv4(config, node_ip);
    let v6 = setup_ipv6(config, node_ipv6);
    let Some(mode) = v4.or(v6) else {
        return disabled();
    };
    Masquerading {
        enabled: true,
        mode: mode.into(),
        enabled_protocols: Some(MasqueradingProtocols {
            ipv4: v4.is_some(),
            ipv6: v6.is_some(),
        }),
        snat_exclusion_cidr_v4: v4
            .and(exclusion_v4(config))
            .map(|(n, l)| format!("{n}/{l}"))
            .unwrap_or_default(),
        snat_exclusion_cidr_v6: v6
            .and(exclusion_v6(config))
            .map(|(n, l)| format!("{n}/{l}"))
            .unwrap_or_default(),
        ..Default::default()
    }
}

/// The IPv4 destinations never masqueraded: `ipv4-native-routing-cidr`,
/// else this node's IPv4 pod CIDR, as Cilium's.
fn exclusion_v4(config: &DaemonConfig) -> Option<(Ipv4Addr, u8)> {
    let pods = config.ipv4.map(|p| p.pod_cidr)?;
    Some(config.ipv4_native_routing_cidr.unwrap_or(pods))
}

/// The IPv6 destinations never masqueraded: `ipv6-native-routing-cidr`,
/// else this node's IPv6 pod CIDR, as Cilium's.
fn exclusion_v6(config: &DaemonConfig) -> Option<(Ipv6Addr, u8)> {
    let pods = config.ipv6.map(|p| p.pod_cidr)?;
    Some(config.ipv6_native_routing_cidr.unwrap_or(pods))
}

/// IPv6 (`enable-ipv6-masquerade`) in the datapath with BPF masquerading
/// (it needs the node's IPv6 address), else with ip6tables; the mode in
/// place, if any.
fn setup_ipv6(config: &DaemonConfig, node_ipv6: Option<Ipv6Addr>) -> Option<&'static str> {
    use netdev::iptables::{Family, Masquerade};
    let wanted = exclusion_v6(config).filter(|_| config.ipv6_masquerade);
    let bpf = wanted.filter(|_| config.bpf_masquerade && config.enable_node_port);
    if config.bpf_masquerade && wanted.is_some() && node_ipv6.is_none() {
        tracing::warn!(subsys = "datapath", "IPv6 masquerading in BPF needs an IPv6 address on the native device; pods' IPv6 traffic leaving the cluster keeps its source");
    }
    let target = bpf.zip(node_ipv6).map(|(exclude, ip)| (ip, exclude));
    let in_datapath = set_bpf(config, " of IPv6", target, RuntimeConfig::set_masquerade6);
    let Some(exclude) = wanted.filter(|_| !config.bpf_masquerade) else {
        if let Err(e) = netdev::iptables::remove(Family::V6) {
            tracing::debug!(subsys = "iptables", error = %e, "Unable to remove IPv6 masquerading rules");
        }
        return (in_datapath && target.is_some()).then_some("BPF");
    };
    let rule = Masquerade {
        source: (exclude.0.into(), exclude.1),
        exclude: (exclude.0.into(), exclude.1),
    };
    match netdev::iptables::install(&rule) {
        Ok(()) => Some("iptables"),
        Err(e) => {
            tracing::error!(subsys = "iptables", error = %e, "Unable to install IPv6 masquerading rules; pods' IPv6 traffic leaving the cluster is not masqueraded");
            None
        }
    }
}

/// IPv4 (`enable-ipv4-masquerade`) in the datapath with BPF masquerading,
/// else with iptables; the mode in place, if any.
fn setup_ipv4(config: &DaemonConfig, node_ip: Option<Ipv4Addr>) -> Option<&'static str> {
    use netdev::iptables::{Family, Masquerade};
    let wanted = exclusion_v4(config).filter(|_| config.ipv4_masquerade);
    // the config requires NodePort for BPF masquerading, and NodePort a
    // node address
    let bpf = wanted.filter(|_| config.bpf_masquerade && config.enable_node_port);
    let target = bpf.zip(node_ip).map(|(exclude, ip)| (ip, exclude));
    let in_datapath = set_bpf(config, "", target, RuntimeConfig::set_masquerade);
    let (Some(exclude), Some(pool)) = (wanted.filter(|_| !config.bpf_masquerade), config.ipv4)
    else {
        if let Err(e) = netdev::iptables::remove(Family::V4) {
            tracing::warn!(subsys = "iptables", error = %e, "Unable to remove masquerading rules");
        }
        return (in_datapath && target.is_some()).then_some("BPF");
    };
    let rule = Masquerade {
        source: (pool.pod_cidr.0.into(), pool.pod_cidr.1),
        exclude: (exclude.0.into(), exclude.1),
    };
    match netdev::iptables::install(&rule) {
        Ok(()) => Some("iptables"),
        Err(e) => {
            tracing::error!(subsys = "iptables", error = %e, "Unable to install masquerading rules; pods' traffic leaving the cluster is not masqueraded");
            None
        }
    }
}

/// Tells the datapath to masquerade one family (`what`: "" or " of
/// IPv6") to `target` (address, exclusion CIDR) through `write`, or not at
/// all; whether that took. An IPv4-only node's datapath never reads the
/// IPv6 slots, but writing them does no harm.
fn set_bpf<A: std::fmt::Display + Copy>(
    config: &DaemonConfig,
    what: &str,
    target: Option<(A, (A, u8))>,
    write: impl FnOnce(&RuntimeConfig, Option<(A, (A, u8))>) -> Result<(), datapath::Error>,
) -> bool {
    let result = RuntimeConfig::open(&config.bpf_root).and_then(|map| write(&map, target));
    match (result, target) {
        (Ok(()), Some((ip, (net, len)))) => {
            tracing::info!(subsys = "datapath", address = %ip, snatExclusionCIDR = %format!("{net}/{len}"), "BPF masquerading{what} enabled");
            true
        }
        (Ok(()), None) => true,
        (Err(e), _) => {
            tracing::error!(subsys = "datapath", error = %e, "Unable to configure BPF masquerading{what}");
            false
        }
    }
}
