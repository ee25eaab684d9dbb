//! Masquerading of pods' traffic that leaves the cluster, as the
//! configuration asks: in the datapath (`enable-bpf-masquerade`, on the
//! native device NodePort also serves), with iptables (Cilium's default),
//! or not at all. Whichever is not wanted is turned off, so a change of
//! mode across a restart leaves nothing of the old one behind. What was
//! actually installed is what `cilium status` reports.

use crate::option::DaemonConfig;
use api::status::{Masquerading, MasqueradingProtocols};
use std::net::Ipv4Addr;

fn disabled() -> Masquerading {
    Masquerading {
        enabled: false,
        enabled_protocols: Some(MasqueradingProtocols::default()),
        ..Default::default()
    }
}

fn enabled(mode: &str, exclude: (Ipv4Addr, u8)) -> Masquerading {
    Masquerading {
        enabled: true,
        mode: mode.into(),
        enabled_protocols: Some(MasqueradingProtocols {
            ipv4: true,
            ipv6: false,
        }),
        snat_exclusion_cidr_v4: format!("{}/{}", exclude.0, exclude.1),
        ..Default::default()
    }
}

/// Sets masquerading up for this node (its pod CIDR is final by now) and
/// says what is in place. `node_ip` is the native device's address, which
/// BPF masquerading gives pods' packets.
pub fn setup(config: &DaemonConfig, node_ip: Option<Ipv4Addr>) -> Masquerading {
    let mut status = setup_ipv4(config, node_ip);
    if setup_ipv6(config) {
        status.enabled = true;
        if status.mode.is_empty() {
            status.mode = "iptables".into();
        }
        if let Some(p) = status.enabled_protocols.as_mut() {
            p.ipv6 = true;
        }
        if let Some((net, len)) = config.ipv6.map(|p| p.pod_cidr) {
            status.snat_exclusion_cidr_v6 = format!("{net}/{len}");
        }
    }
    status
}

/// IPv6 with ip6tables (`enable-ipv6-masquerade`, iptables mode: the
/// datapath has no IPv6 masquerading yet); whether it is in place.
fn setup_ipv6(config: &DaemonConfig) -> bool {
    use netdev::iptables::{Family, Masquerade};
    let wanted = config.ipv6.filter(|_| config.ipv6_masquerade);
    let Some(pool) = wanted.filter(|_| !config.bpf_masquerade) else {
        if wanted.is_some() {
            tracing::warn!(subsys = "iptables", "IPv6 masquerading in BPF is not supported yet; pods' IPv6 traffic leaving the cluster keeps its source");
        }
        if let Err(e) = netdev::iptables::remove(Family::V6) {
            tracing::debug!(subsys = "iptables", error = %e, "Unable to remove IPv6 masquerading rules");
        }
        return false;
    };
    let (net, len) = pool.pod_cidr;
    let rule = Masquerade {
        source: (net.into(), len),
        exclude: (net.into(), len),
    };
    match netdev::iptables::install(&rule) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(subsys = "iptables", error = %e, "Unable to install IPv6 masquerading rules; pods' IPv6 traffic leaving the cluster is not masqueraded");
            false
        }
    }
}

fn setup_ipv4(config: &DaemonConfig, node_ip: Option<Ipv4Addr>) -> Masquerading {
    let exclude = config.ipv4_native_routing_cidr.unwrap_or(config.ipv4_range);
    let bpf = config.ipv4_masquerade && config.bpf_masquerade;
    let iptables = config.ipv4_masquerade && !config.bpf_masquerade;
    // the config requires NodePort for BPF masquerading, and NodePort a
    // node address
    let bpf_target = node_ip.filter(|_| bpf && config.enable_node_port);
    let in_datapath = set_bpf(config, bpf_target.map(|ip| (ip, exclude)));
    if !iptables {
        if let Err(e) = netdev::iptables::remove(netdev::iptables::Family::V4) {
            tracing::warn!(subsys = "iptables", error = %e, "Unable to remove masquerading rules");
        }
        return if in_datapath && bpf_target.is_some() {
            enabled("BPF", exclude)
        } else {
            disabled()
        };
    }
    let rule = netdev::iptables::Masquerade {
        source: (config.ipv4_range.0.into(), config.ipv4_range.1),
        exclude: (exclude.0.into(), exclude.1),
    };
    match netdev::iptables::install(&rule) {
        Ok(()) => enabled("iptables", exclude),
        Err(e) => {
            tracing::error!(subsys = "iptables", error = %e, "Unable to install masquerading rules; pods' traffic leaving the cluster is not masqueraded");
            disabled()
        }
    }
}

/// Tells the datapath to masquerade to `target` (address, exclusion CIDR),
/// or not at all; whether that took.
fn set_bpf(config: &DaemonConfig, target: Option<(Ipv4Addr, (Ipv4Addr, u8))>) -> bool {
    let result = datapath::maps::RuntimeConfig::open(&config.bpf_root)
        .and_then(|map| map.set_masquerade(target));
    match (result, target) {
        (Ok(()), Some((ip, (net, len)))) => {
            tracing::info!(subsys = "datapath", address = %ip, snatExclusionCIDR = %format!("{net}/{len}"), "BPF masquerading enabled");
            true
        }
        (Ok(()), None) => true,
        (Err(e), _) => {
            tracing::error!(subsys = "datapath", error = %e, "Unable to configure BPF masquerading");
            false
        }
    }
}
