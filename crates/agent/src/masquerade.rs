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
    let exclude = config.ipv4_native_routing_cidr.unwrap_or(config.ipv4_range);
    let bpf = config.ipv4_masquerade && config.bpf_masquerade;
    let iptables = config.ipv4_masquerade && !config.bpf_masquerade;
    // the config requires NodePort for BPF masquerading, and NodePort a
    // node address
    let bpf_target = node_ip.filter(|_| bpf && config.enable_node_port);
    let in_datapath = set_bpf(config, bpf_target.map(|ip| (ip, exclude)));
    if !iptables {
        if let Err(e) = netdev::iptables::remove() {
            tracing::warn!(subsys = "iptables", error = %e, "Unable to remove masquerading rules");
        }
        return if in_datapath && bpf_target.is_some() {
            enabled("BPF", exclude)
        } else {
            disabled()
        };
    }
    let rule = netdev::iptables::Masquerade {
        source: config.ipv4_range,
        exclude,
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
