//! Node IDs (Cilium's node ID allocation in linuxNodeHandler): each other
//! node gets an ID in 1..=65535, this node is 0, and every address of a
//! node maps to its ID in cilium_node_map_v2. The map is the record: a
//! restarted agent gives each node the ID it had.

use crate::ports::{KernelError, NodeIdMap};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum NodeIdError {
    #[error("no available node ID (all 65535 in use)")]
    Exhausted,
    #[error("mapping {ip} to node ID {id}: {source}")]
    Map {
        ip: IpAddr,
        id: u16,
        source: KernelError,
    },
}

pub struct NodeIds {
    map: Arc<dyn NodeIdMap>,
    by_ip: Mutex<BTreeMap<IpAddr, u16>>,
}

impl NodeIds {
    pub fn new(map: Arc<dyn NodeIdMap>) -> Self {
        Self {
            map,
            by_ip: Mutex::default(),
        }
    }

    /// Takes back the IDs the map holds; an entry with ID 0 (which no other
    /// node can have) is removed, as 1.16 does. Returns how many it kept.
    pub fn restore(&self) -> usize {
        let entries = match self.map.entries() {
            Ok(entries) => entries,
            Err(e) => {
                tracing::error!(subsys = "linux-datapath", error = %e, "Failed to dump content of node map");
                return 0;
            }
        };
        let mut by_ip = self.lock();
        for (ip, id) in entries {
            if id == 0 {
                if let Err(e) = self.map.delete(ip) {
                    tracing::warn!(subsys = "linux-datapath", ip = %ip, error = %e, "Failed to remove a incorrect node IP to node ID mapping");
                }
                continue;
            }
            by_ip.insert(ip, id);
        }
        by_ip.len()
    }

    /// Gives the node owning `ips` its ID: the one any of its addresses
    /// already has, else the lowest free. Every address is mapped to it.
    pub fn assign(&self, ips: &[IpAddr]) -> Result<u16, NodeIdError> {
        let mut by_ip = self.lock();
        let id = match ips.iter().find_map(|ip| by_ip.get(ip)) {
            Some(&id) => id,
            None => {
                let used: BTreeSet<u16> = by_ip.values().copied().collect();
                (1..=u16::MAX)
                    .find(|id| !used.contains(id))
                    .ok_or(NodeIdError::Exhausted)?
            }
        };
        for &ip in ips {
            if by_ip.get(&ip) == Some(&id) {
                continue;
            }
            self.map
                .write(ip, id)
                .map_err(|source| NodeIdError::Map { ip, id, source })?;
            by_ip.insert(ip, id);
        }
        Ok(id)
    }

    /// Forgets `ips`; a node's ID is free once none of its addresses holds it.
    pub fn release(&self, ips: &[IpAddr]) {
        let mut by_ip = self.lock();
        for ip in ips {
            if by_ip.remove(ip).is_some() {
                if let Err(e) = self.map.delete(*ip) {
                    tracing::warn!(subsys = "linux-datapath", ip = %ip, error = %e, "Failed to remove a node IP to node ID mapping");
                }
            }
        }
    }

    /// Every ID with its addresses, by ID (`GET /node/ids`).
    pub fn list(&self) -> Vec<(u16, Vec<IpAddr>)> {
        let mut by_id: BTreeMap<u16, Vec<IpAddr>> = BTreeMap::new();
        for (ip, id) in self.lock().iter() {
            by_id.entry(*id).or_default().push(*ip);
        }
        by_id.into_iter().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<IpAddr, u16>> {
        self.by_ip.lock().expect("node ids lock")
    }
}
