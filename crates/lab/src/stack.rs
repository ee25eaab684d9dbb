//! The address families a lab runs (`enable-ipv4`, `enable-ipv6` among
//! `up`'s settings), and the addresses that follow from them: an
//! IPv6-only lab's API server, kubelets and Services are IPv6 ones. `up`
//! writes the choice beside the lab for the commands that come after.

use crate::layout;
use kubeplane::components::Ranges;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stack {
    Ipv4,
    Dual,
    Ipv6,
}

/// The IPv6-only lab's service range: the dual-stack lab's IPv6 one.
const SERVICES6: &str = "fd00:96::/108";
/// Its pods' pool, as `ipv6_defaults` gives the operator.
const PODS6: &str = "fd00::/104";

fn marker() -> std::path::PathBuf {
    layout::root().join("stack")
}

impl Stack {
    /// What `up`'s settings ask for (Cilium's defaults: IPv4 on, IPv6 off).
    pub fn of_settings(settings: &[(String, String)]) -> Self {
        let on = |key: &str, default: bool| {
            settings
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map_or(default, |(_, v)| v == "true")
        };
        match (on("enable-ipv4", true), on("enable-ipv6", false)) {
            (true, true) => Self::Dual,
            (false, true) => Self::Ipv6,
            // both off is the agent's to refuse, with Cilium's message
            _ => Self::Ipv4,
        }
    }

    /// The running lab's, as `up` wrote it.
    pub fn running() -> Self {
        match std::fs::read_to_string(marker()).unwrap_or_default().trim() {
            "dual" => Self::Dual,
            "ipv6" => Self::Ipv6,
            _ => Self::Ipv4,
        }
    }

    pub fn write(self) -> anyhow::Result<()> {
        let name = match self {
            Self::Ipv4 => "ipv4",
            Self::Dual => "dual",
            Self::Ipv6 => "ipv6",
        };
        layout::write_atomic(&marker(), name.as_bytes())
    }

    /// Where the API server listens and what it advertises: the family of
    /// the first service range (kube-apiserver refuses a mismatch).
    pub fn api_address(self) -> IpAddr {
        self.underlay_address(topology::UNDERLAY_IP)
    }

    /// A machine of the underlay at `ip` as this lab names it: by its IPv6
    /// address in an IPv6-only lab.
    pub fn underlay_address(self, ip: Ipv4Addr) -> IpAddr {
        match self {
            Self::Ipv6 => topology::underlay_ipv6(ip).into(),
            _ => ip.into(),
        }
    }

    /// What the control plane hands out.
    pub fn ranges(self) -> Ranges {
        match self {
            Self::Ipv6 => Ranges {
                services: SERVICES6.into(),
                first_service_ip: service_ip6(1).into(),
                pods: PODS6.into(),
                node_mask: 120,
            },
            _ => Ranges::default(),
        }
    }

    /// The kube-dns Service's ClusterIP: the tenth of the first range, as
    /// kubeadm picks it.
    pub fn dns_service_ip(self) -> IpAddr {
        match self {
            Self::Ipv6 => service_ip6(10).into(),
            _ => layout::DNS_SERVICE_IP.into(),
        }
    }

    /// The demo's ClusterIP, clear of the DNS's.
    pub fn demo_service_ip(self) -> IpAddr {
        match self {
            Self::Ipv6 => service_ip6(20).into(),
            _ => layout::DEMO_SERVICE_IP.into(),
        }
    }
}

/// The `n`th address of the IPv6-only lab's service range.
fn service_ip6(n: u128) -> Ipv6Addr {
    let (net, _) = SERVICES6.split_once('/').expect("a CIDR");
    Ipv6Addr::from(u128::from(net.parse::<Ipv6Addr>().expect("an address")) + n)
}

/// An address as a URL's host: IPv6 in brackets.
pub fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_choose_the_families_and_the_addresses_follow() {
        assert_eq!(Stack::of_settings(&[]), Stack::Ipv4);
        assert_eq!(
            Stack::of_settings(&kv(&[("enable-ipv6", "true")])),
            Stack::Dual
        );
        let six = Stack::of_settings(&kv(&[("enable-ipv4", "false"), ("enable-ipv6", "true")]));
        assert_eq!(six, Stack::Ipv6);
        assert_eq!(six.api_address().to_string(), "fd00:198:18::1");
        assert_eq!(six.dns_service_ip().to_string(), "fd00:96::a");
        assert_eq!(six.ranges().first_service_ip.to_string(), "fd00:96::1");
        assert_eq!(url_host(six.demo_service_ip()), "[fd00:96::14]");
        assert_eq!(Stack::Dual.api_address().to_string(), "198.18.0.1");
    }
}
