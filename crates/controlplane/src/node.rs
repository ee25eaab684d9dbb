//! A node as Cilium publishes it (`nodeTypes.Node` JSON), shared by the
//! node manager and what another node means for the datapath.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, Ipv6Addr};

/// One of a node's addresses (`Type`: InternalIP, ExternalIP, CiliumInternalIP).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "IP")]
    pub ip: String,
}

/// A CIDR as Go's `net.IPNet` marshals it: IP text, mask as base64 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpNet {
    #[serde(rename = "IP")]
    pub ip: String,
    #[serde(rename = "Mask")]
    pub mask: String,
}

impl IpNet {
    pub fn v4(net: Ipv4Addr, len: u8) -> Self {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(len))
            .unwrap_or(0)
            .to_be_bytes();
        Self {
            ip: net.to_string(),
            mask: STANDARD.encode(mask),
        }
    }

    /// `10.1.0.0/24`, or empty when the mask does not decode.
    pub fn cidr(&self) -> String {
        if self.ip.is_empty() {
            return String::new();
        }
        format!("{}/{}", self.ip, self.prefix_len())
    }

    fn prefix_len(&self) -> u8 {
        STANDARD
            .decode(&self.mask)
            .unwrap_or_default()
            .iter()
            .map(|b| b.count_ones() as u8)
            .sum()
    }

    pub fn v6(net: Ipv6Addr, len: u8) -> Self {
        let mask = u128::MAX
            .checked_shl(128 - u32::from(len))
            .unwrap_or(0)
            .to_be_bytes();
        Self {
            ip: net.to_string(),
            mask: STANDARD.encode(mask),
        }
    }

    pub fn ipv4_prefix(&self) -> Option<(Ipv4Addr, u8)> {
        Some((self.ip.parse().ok()?, self.prefix_len()))
    }

    pub fn ipv6_prefix(&self) -> Option<(Ipv6Addr, u8)> {
        Some((self.ip.parse().ok()?, self.prefix_len()))
    }
}

/// Cilium's `nodeTypes.Node` JSON (the fields this agent fills).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "Cluster", default)]
    pub cluster: String,
    #[serde(rename = "IPAddresses", default)]
    pub addresses: Vec<NodeAddress>,
    #[serde(rename = "IPv4AllocCIDR", default)]
    pub ipv4_alloc_cidr: Option<IpNet>,
    /// A dual-stack node's IPv6 pod CIDR.
    #[serde(
        rename = "IPv6AllocCIDR",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ipv6_alloc_cidr: Option<IpNet>,
    /// The node's health endpoint (Go's `net.IP`: text, empty when none).
    #[serde(rename = "IPv4HealthIP", default, with = "text_ip")]
    pub health_ipv4: Option<Ipv4Addr>,
    /// A dual-stack node's health endpoint's IPv6 address.
    #[serde(rename = "IPv6HealthIP", default, with = "text_ip")]
    pub health_ipv6: Option<std::net::Ipv6Addr>,
    #[serde(rename = "ClusterID", default)]
    pub cluster_id: u32,
    #[serde(rename = "Source", default)]
    pub source: String,
}

/// `net.IP` as Go marshals it: its text, or an empty string for nil.
mod text_ip {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer, A: std::fmt::Display>(
        ip: &Option<A>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match ip {
            Some(ip) => s.collect_str(ip),
            None => s.serialize_str(""),
        }
    }

    /// An address of the field's family; any other text is none.
    pub fn deserialize<'de, D: Deserializer<'de>, A: std::str::FromStr>(
        d: D,
    ) -> Result<Option<A>, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        Ok(text.parse().ok())
    }
}

impl Node {
    /// The first address of `kind` that reads as an `A` (a dual-stack node
    /// lists one of each family).
    pub fn address_of<A: std::str::FromStr>(&self, kind: &str) -> Option<A> {
        self.addresses
            .iter()
            .filter(|a| a.kind == kind)
            .find_map(|a| a.ip.parse().ok())
    }

    pub fn address(&self, kind: &str) -> Option<&str> {
        self.addresses
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.ip.as_str())
    }

    /// The IPv4 address `node list` shows: InternalIP, else
    /// CiliumInternalIP; None on an IPv6-only node.
    pub fn primary_ipv4(&self) -> Option<Ipv4Addr> {
        self.address_of("InternalIP")
            .or_else(|| self.address_of("CiliumInternalIP"))
    }

    /// The node's own IPv6 address as Cilium picks it: InternalIP, else
    /// ExternalIP (never the router's CiliumInternalIP).
    pub fn primary_ipv6(&self) -> Option<std::net::Ipv6Addr> {
        self.address_of("InternalIP")
            .or_else(|| self.address_of("ExternalIP"))
    }

    pub fn to_api(&self, source: &str) -> api::models::NodeElement {
        api::models::NodeElement {
            name: self.name.clone(),
            primary_address: api::models::NodeAddressingSummary {
                ipv4: Some(api::models::NodeAddressingElement {
                    enabled: self.ipv4_alloc_cidr.is_some() || self.primary_ipv4().is_some(),
                    ip: self
                        .primary_ipv4()
                        .map(|ip| ip.to_string())
                        .unwrap_or_default(),
                    alloc_range: self
                        .ipv4_alloc_cidr
                        .as_ref()
                        .map(IpNet::cidr)
                        .unwrap_or_default(),
                    address_type: String::new(),
                }),
                ipv6: self.ipv6_alloc_cidr.as_ref().map(|cidr| {
                    api::models::NodeAddressingElement {
                        enabled: true,
                        ip: self
                            .primary_ipv6()
                            .map(|ip| ip.to_string())
                            .unwrap_or_default(),
                        alloc_range: cidr.cidr(),
                        address_type: String::new(),
                    }
                }),
            },
            health_endpoint_address: (self.health_ipv4.is_some() || self.health_ipv6.is_some())
                .then(|| {
                    let element = |ip: String| api::models::NodeAddressingElement {
                        enabled: true,
                        ip,
                        ..Default::default()
                    };
                    api::models::NodeAddressingSummary {
                        ipv4: self.health_ipv4.map(|ip| element(ip.to_string())),
                        ipv6: self.health_ipv6.map(|ip| element(ip.to_string())),
                    }
                }),
            source: source.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_marshal_as_go_ipnet() {
        let n = IpNet::v4(Ipv4Addr::new(10, 1, 0, 0), 24);
        assert_eq!(n.mask, "////AA==");
        assert_eq!(n.cidr(), "10.1.0.0/24");
        assert_eq!(
            IpNet::v4(Ipv4Addr::new(10, 0, 0, 0), 8).cidr(),
            "10.0.0.0/8"
        );
    }
}
