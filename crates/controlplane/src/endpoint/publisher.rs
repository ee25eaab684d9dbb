//! This node's endpoint addresses, announced to the cluster (Cilium's
//! `pkg/ipcache/kvstore.go`): each address of either family under
//! `ip/v1/default/<ip>` with the session lease, so they leave with the
//! agent.

use super::Endpoint;
use crate::ipsync::IpIdentityPair;
use crate::kvwriter::KvWriter;
use std::net::IpAddr;

/// Announces this node's endpoint addresses (a no-op without a kvstore).
#[derive(Clone)]
pub struct Publisher {
    writer: Option<KvWriter>,
    host_ip: String,
    node_name: String,
}

impl Publisher {
    pub fn new(writer: Option<KvWriter>, node_ip: Option<IpAddr>, node_name: String) -> Self {
        Self {
            writer,
            host_ip: node_ip.map(|i| i.to_string()).unwrap_or_default(),
            node_name,
        }
    }

    pub fn publish(&self, ep: &Endpoint) {
        let Some(writer) = &self.writer else { return };
        for (ip, _) in ep.addresses() {
            let pair = IpIdentityPair {
                ip: ip.to_string(),
                mask: None,
                host_ip: self.host_ip.clone(),
                id: ep.identity,
                key: 0,
                metadata: format!("cilium-global:default:{}:{}", self.node_name, ep.id),
                k8s_namespace: ep.k8s_namespace.clone(),
                k8s_pod_name: ep.k8s_pod_name.clone(),
            };
            let body = serde_json::to_vec(&pair).expect("pair serializes");
            writer.put_leased(kvstore::keys::ip(&pair.ip), body);
        }
    }

    pub fn withdraw(&self, ip: IpAddr) {
        if let Some(writer) = &self.writer {
            writer.delete(kvstore::keys::ip(&ip.to_string()));
        }
    }
}
