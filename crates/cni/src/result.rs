//! The ADD result, in the shape the netconf's cniVersion expects.

use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub struct AddResult {
    pub host_ifname: String,
    pub host_mac: String,
    pub pod_ifname: String,
    pub pod_mac: String,
    pub netns: String,
    /// The IPv4 address and gateway, unless the node is IPv6-only.
    pub ipv4: Option<(Ipv4Addr, Ipv4Addr)>,
    /// The IPv6 address and gateway, with IPv6 on.
    pub ipv6: Option<(Ipv6Addr, Ipv6Addr)>,
}

impl AddResult {
    pub fn to_json(&self, cni_version: &str) -> Value {
        let legacy = cni_version.starts_with("0.");
        let mut ips = Vec::new();
        let mut routes = Vec::new();
        let v4 = self
            .ipv4
            .map(|(ip, gw)| (IpAddr::from(ip), IpAddr::from(gw)));
        let v6 = self
            .ipv6
            .map(|(ip, gw)| (IpAddr::from(ip), IpAddr::from(gw)));
        // per family: the address as a host prefix, the gateway on link
        // and the default route through it
        for (ip, gateway) in v4.into_iter().chain(v6) {
            let (host, default) = match ip {
                IpAddr::V4(_) => (32, "0.0.0.0/0"),
                IpAddr::V6(_) => (128, "::/0"),
            };
            let mut entry = json!({
                "address": format!("{ip}/{host}"),
                "gateway": gateway.to_string(),
                "interface": 1,
            });
            if legacy {
                entry["version"] = json!(if ip.is_ipv4() { "4" } else { "6" });
            }
            ips.push(entry);
            routes.push(json!({"dst": format!("{gateway}/{host}")}));
            routes.push(json!({"dst": default, "gw": gateway.to_string()}));
        }
        json!({
            "cniVersion": cni_version,
            "interfaces": [
                {"name": self.host_ifname, "mac": self.host_mac},
                {"name": self.pod_ifname, "mac": self.pod_mac, "sandbox": self.netns},
            ],
            "ips": ips,
            "routes": routes,
            "dns": {},
        })
    }
}
