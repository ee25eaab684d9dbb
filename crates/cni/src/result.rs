//! The ADD result, in the shape the netconf's cniVersion expects.

use serde_json::{json, Value};

pub struct AddResult {
    pub host_ifname: String,
    pub host_mac: String,
    pub pod_ifname: String,
    pub pod_mac: String,
    pub netns: String,
    pub ip: std::net::Ipv4Addr,
    pub gateway: std::net::Ipv4Addr,
    /// The IPv6 address and gateway on a dual-stack node.
    pub ipv6: Option<(std::net::Ipv6Addr, std::net::Ipv6Addr)>,
}

impl AddResult {
    pub fn to_json(&self, cni_version: &str) -> Value {
        let legacy = cni_version.starts_with("0.");
        let mut ip = json!({
            "address": format!("{}/32", self.ip),
            "gateway": self.gateway.to_string(),
            "interface": 1,
        });
        if legacy {
            ip["version"] = json!("4");
        }
        let mut ips = vec![ip];
        let mut routes = vec![
            json!({"dst": format!("{}/32", self.gateway)}),
            json!({"dst": "0.0.0.0/0", "gw": self.gateway.to_string()}),
        ];
        if let Some((ip6, gw6)) = self.ipv6 {
            let mut ip = json!({
                "address": format!("{ip6}/128"),
                "gateway": gw6.to_string(),
                "interface": 1,
            });
            if legacy {
                ip["version"] = json!("6");
            }
            ips.push(ip);
            routes.push(json!({"dst": format!("{gw6}/128")}));
            routes.push(json!({"dst": "::/0", "gw": gw6.to_string()}));
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
