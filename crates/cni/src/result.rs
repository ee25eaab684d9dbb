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
        json!({
            "cniVersion": cni_version,
            "interfaces": [
                {"name": self.host_ifname, "mac": self.host_mac},
                {"name": self.pod_ifname, "mac": self.pod_mac, "sandbox": self.netns},
            ],
            "ips": [ip],
            "routes": [
                {"dst": format!("{}/32", self.gateway)},
                {"dst": "0.0.0.0/0", "gw": self.gateway.to_string()},
            ],
            "dns": {},
        })
    }
}
