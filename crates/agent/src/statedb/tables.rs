//! The rows of Cilium 1.16's StateDB tables, read from the agent's state,
//! in the JSON of 1.16's Go types (`tables.Device`, `tables.Route`,
//! `tables.NodeAddress`, `tables.Sysctl`, `types.Status`).

use super::Row;
use crate::status::AgentStatus;
use controlplane::endpoint::Endpoints;
use netdev::inventory::{self, Device};
use serde_json::json;
use std::net::IpAddr;
use std::sync::Arc;

/// The tables of 1.16's agent, in the order its dump writes them.
pub(super) const NAMES: &[&str] = &[
    "health",
    "sysctl",
    "devices",
    "routes",
    "node-addresses",
    "l2-announce",
    "bandwidth-qdiscs",
    "bandwidth-edts",
    "ipsets",
    "nat-stats",
];

/// Each table's primary index, as 1.16 names it.
pub(super) fn primary_index(table: &str) -> Option<&'static str> {
    Some(match table {
        "health" => "identifier",
        "sysctl" => "name",
        "devices" => "id",
        "routes" => "id",
        "node-addresses" => "id",
        "l2-announce" => "id",
        "bandwidth-qdiscs" => "id",
        "bandwidth-edts" => "endpoint-id",
        "ipsets" => "name",
        "nat-stats" => "byTuple",
        _ => return None,
    })
}

/// What the tables are read from.
pub struct Sources {
    pub status: Arc<AgentStatus>,
    pub endpoints: Arc<Endpoints>,
    /// A netlink socket in the agent's (the node's) network namespace.
    pub netlink: netdev::Netlink,
    /// When the agent finished starting.
    pub started: std::time::SystemTime,
}

/// Go's zero time.Time, what a timestamp that never happened marshals as.
pub(super) const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

impl Sources {
    /// The rows of table `name`, in no order; None for a table 1.16 has not.
    pub(super) async fn rows(&self, name: &str) -> Option<(&'static str, Vec<Row>)> {
        let name = *NAMES.iter().find(|n| **n == name)?;
        let rows = match name {
            "health" => super::health::rows(&self.status, &self.endpoints, self.started),
            "sysctl" => sysctls(),
            "devices" => self
                .devices()
                .await
                .iter()
                .map(|(d, sel)| device(d, *sel))
                .collect(),
            "routes" => self.routes().await,
            "node-addresses" => node_addresses(&self.devices().await),
            // features we do not run: 1.16's tables are empty with them off
            _ => Vec::new(),
        };
        Some((name, rows))
    }

    /// Every device and whether it is one the agent serves (1.16's
    /// "selected": the NodePort device, else the one with the node IP).
    async fn devices(&self) -> Vec<(Device, bool)> {
        let devices = match inventory::devices(&self.netlink).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(subsys = "statedb", error = %e, "Listing devices failed");
                return Vec::new();
            }
        };
        let node_ip = self.status.node_ip.map(IpAddr::V4);
        devices
            .into_iter()
            .map(|d| {
                let selected = match &self.status.native_device {
                    Some(name) => *name == d.name,
                    None => node_ip.is_some_and(|ip| d.addrs.iter().any(|a| a.addr == ip)),
                };
                (d, selected)
            })
            .collect()
    }

    async fn routes(&self) -> Vec<Row> {
        let routes = match inventory::routes(&self.netlink).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(subsys = "statedb", error = %e, "Listing routes failed");
                return Vec::new();
            }
        };
        routes
            .iter()
            .map(|r| {
                let mut key = r.table.to_be_bytes().to_vec();
                key.extend(r.link_index.to_be_bytes());
                key.extend(ip_bytes(r.dst));
                key.push(r.dst_len);
                Row {
                    key,
                    obj: json!({
                        "Table": r.table,
                        "LinkIndex": r.link_index,
                        "Scope": r.scope,
                        "Dst": format!("{}/{}", r.dst, r.dst_len),
                        "Src": r.src.map(|a| a.to_string()).unwrap_or_default(),
                        "Gw": r.gw.map(|a| a.to_string()).unwrap_or_default(),
                    }),
                }
            })
            .collect()
    }
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn mac(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn device(d: &Device, selected: bool) -> Row {
    let addrs: Vec<_> = d
        .addrs
        .iter()
        .map(|a| json!({ "Addr": a.addr.to_string(), "Secondary": a.secondary, "Scope": a.scope }))
        .collect();
    Row {
        key: d.index.to_be_bytes().to_vec(),
        obj: json!({
            "Index": d.index,
            "MTU": d.mtu,
            "Name": d.name,
            "HardwareAddr": mac(&d.mac),
            "Flags": inventory::go_net_flags(d.raw_flags),
            "Addrs": addrs,
            "RawFlags": d.raw_flags,
            "Type": d.kind,
            "MasterIndex": d.master,
            "Selected": selected,
            "NotSelectedReason": if selected { "" } else { "not the native device" },
        }),
    }
}

/// 1.16's node addresses: cilium_host's, and the selected devices' (their
/// first IPv4 address is the primary and the NodePort one).
fn node_addresses(devices: &[(Device, bool)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (d, selected) in devices {
        let host = d.name == netdev::CILIUM_HOST;
        if !host && !selected {
            continue;
        }
        let mut first_v4 = true;
        for a in &d.addrs {
            // link-local and host-scoped addresses are not node addresses
            // (cilium_host's link-scoped ones are, as in 1.16)
            if a.scope == 254 || (a.scope == 253 && !host) {
                continue;
            }
            let primary = a.addr.is_ipv4() && first_v4 && !a.secondary;
            if primary {
                first_v4 = false;
            }
            let mut key = ip_bytes(a.addr);
            key.extend(d.name.as_bytes());
            rows.push(Row {
                key,
                obj: json!({
                    "Addr": a.addr.to_string(),
                    "NodePort": primary && *selected,
                    "Primary": primary,
                    "DeviceName": d.name,
                }),
            });
        }
    }
    rows
}

/// The sysctls this agent set, reconciled (it writes them synchronously,
/// so each is Done when it is listed).
fn sysctls() -> Vec<Row> {
    netdev::sysctl::written()
        .into_iter()
        .map(|w| Row {
            key: w.key.as_bytes().to_vec(),
            obj: json!({
                "Name": w.key,
                "Val": w.value,
                "IgnoreErr": false,
                "Warn": "",
                "Status": {
                    "Kind": "Done",
                    "UpdatedAt": api::timefmt::rfc3339(w.at),
                    "Error": "",
                },
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdev::inventory::DeviceAddr;

    fn dev(name: &str, addrs: &[(&str, u8)]) -> Device {
        Device {
            index: 2,
            name: name.into(),
            mac: vec![0xaa, 0xbb, 0xcc, 0, 1, 2],
            mtu: 1500,
            raw_flags: 0x1043,
            kind: "veth".into(),
            master: 0,
            addrs: addrs
                .iter()
                .map(|(a, scope)| DeviceAddr {
                    addr: a.parse().unwrap(),
                    prefix: 24,
                    secondary: false,
                    scope: *scope,
                })
                .collect(),
        }
    }

    #[test]
    fn node_addresses_are_cilium_hosts_and_the_selected_devices() {
        let devices = vec![
            (dev("eth0", &[("198.18.0.11", 0), ("fe80::1", 253)]), true),
            (dev("cilium_host", &[("10.0.0.1", 0)]), false),
            (dev("lxc1", &[("10.9.9.9", 0)]), false),
        ];
        let rows = node_addresses(&devices);
        let objs: Vec<_> = rows.iter().map(|r| &r.obj).collect();
        assert_eq!(objs.len(), 2, "{objs:?}");
        assert_eq!(objs[0]["Addr"], "198.18.0.11");
        assert_eq!(objs[0]["NodePort"], true);
        assert_eq!(objs[1]["DeviceName"], "cilium_host");
        assert_eq!(objs[1]["NodePort"], false);
        assert_eq!(objs[1]["Primary"], true);
    }

    #[test]
    fn a_device_marshals_as_go_does() {
        let row = device(&dev("eth0", &[("198.18.0.11", 0)]), true);
        assert_eq!(row.obj["HardwareAddr"], "aa:bb:cc:00:01:02");
        // up|broadcast|running|multicast in Go's net.Flags
        assert_eq!(row.obj["Flags"], 1 | 2 | 16 | 32);
        assert_eq!(row.obj["Addrs"][0]["Addr"], "198.18.0.11");
    }
}
