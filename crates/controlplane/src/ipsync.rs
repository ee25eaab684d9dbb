//! Endpoint IPs shared through the kvstore (Cilium's `pkg/ipcache/kvstore.go`):
//! each node publishes its endpoints under `ip/v1/default/<ip>` with its
//! session lease and learns everyone else's into the ipcache, with the
//! publishing node as the tunnel endpoint.

use crate::events::AgentNotify;
use crate::ipcache::{self, Entry, IpCache};
use crate::ports::{Events, KernelError};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::sync::Arc;
use watch::Source;

/// Cilium's `identity.IPIdentityPair` JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpIdentityPair {
    #[serde(rename = "IP")]
    pub ip: String,
    /// Set for prefixes only; endpoint addresses are hosts.
    #[serde(rename = "Mask", default)]
    pub mask: Option<String>,
    #[serde(rename = "HostIP", default)]
    pub host_ip: String,
    #[serde(rename = "ID")]
    pub id: u32,
    #[serde(rename = "Key", default)]
    pub key: u8,
    #[serde(rename = "Metadata", default)]
    pub metadata: String,
    #[serde(
        rename = "K8sNamespace",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub k8s_namespace: String,
    #[serde(
        rename = "K8sPodName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub k8s_pod_name: String,
}

/// The kvstore's endpoint IPs as a source of [`RemoteEndpoints::follow`]
/// (a key per address).
pub fn kvstore_source(
    kv: &kvstore::Kvstore,
) -> impl Source<Key = String, Value = Vec<IpIdentityPair>> + 'static {
    kv.source(&format!("{}/", kvstore::keys::IPS))
        .decode(|_, raw| serde_json::from_slice::<IpIdentityPair>(raw).map(|p| vec![p]))
}

/// Learns the other nodes' endpoints into the ipcache, behind their node.
pub struct RemoteEndpoints {
    ipcache: Arc<IpCache>,
    events: Arc<dyn Events>,
    /// This node's own addresses: its echo is skipped.
    own: Vec<IpAddr>,
    /// What the ipcache entries say they came from (the kvstore, or
    /// CiliumEndpoints).
    source: ipcache::Source,
}

impl RemoteEndpoints {
    pub fn new(
        ipcache: Arc<IpCache>,
        events: Arc<dyn Events>,
        own: Vec<IpAddr>,
        source: ipcache::Source,
    ) -> Self {
        Self {
            ipcache,
            events,
            own,
            source,
        }
    }

    /// Follows `source` (each value an endpoint's addresses) until the
    /// agent stops.
    pub fn follow(
        self: Arc<Self>,
        source: impl Source<Key = String, Value = Vec<IpIdentityPair>> + 'static,
        tasks: &crate::tasks::Tasks,
    ) {
        let handler = move |change| std::future::ready(self.apply(change));
        tasks.spawn(
            "ipsync",
            watch::Store::new("endpoint IPs").run(source, handler),
        );
    }

    /// One change of the endpoint IPs; an ipcache write that failed is
    /// tried again.
    pub fn apply(
        &self,
        change: watch::Change<String, Vec<IpIdentityPair>>,
    ) -> Result<(), KernelError> {
        match change {
            watch::Change::Upsert { key, old, new } => {
                // an endpoint that moved to other addresses leaves the old ones
                for gone in old
                    .iter()
                    .flatten()
                    .filter(|o| !new.iter().any(|n| n.ip == o.ip))
                {
                    self.forget(gone)?;
                }
                new.iter().try_for_each(|pair| self.learn(&key, pair))
            }
            watch::Change::Delete { old, .. } => old.iter().try_for_each(|pair| self.forget(pair)),
            watch::Change::Synced => {
                tracing::info!(subsys = "ipcache", "Initial list of endpoint IPs received");
                Ok(())
            }
        }
    }

    fn learn(&self, key: &str, pair: &IpIdentityPair) -> Result<(), KernelError> {
        // the endpoint's address and its node's, of either family (an
        // IPv6-only node names itself by IPv6)
        let (Ok(ip), Ok(host)) = (pair.ip.parse::<IpAddr>(), pair.host_ip.parse::<IpAddr>()) else {
            tracing::warn!(subsys = "ipcache", key = %key, "Ignoring IP entry without an address or a host address");
            return Ok(());
        };
        if self.own.contains(&host) {
            return Ok(());
        }
        let len = abi::ipcache::host_prefix_len(ip);
        let entry = Entry::new(pair.id, self.source);
        // the overlay's underlay is IPv4 (as in 1.16): only an IPv4 node
        // address is a tunnel endpoint
        let entry = match host {
            IpAddr::V4(node) => entry.behind(node),
            IpAddr::V6(_) => entry,
        };
        match self.ipcache.upsert(ip, len, entry)? {
            true => {
                self.events
                    .name_pod(ip, &pair.k8s_namespace, &pair.k8s_pod_name);
                self.events.agent(
                    AgentNotify::IpcacheUpserted,
                    serde_json::json!({
                        "cidr": format!("{ip}/{len}"),
                        "id": pair.id,
                        "host-ip": pair.host_ip,
                        "namespace": pair.k8s_namespace,
                        "pod-name": pair.k8s_pod_name,
                    }),
                );
                tracing::debug!(subsys = "ipcache", ip = %ip, identity = pair.id, hostIP = %host, "Learned remote endpoint")
            }
            false => {
                tracing::warn!(subsys = "ipcache", ip = %ip, hostIP = %host, "Remote endpoint claims a local address, ignoring it")
            }
        }
        Ok(())
    }

    fn forget(&self, pair: &IpIdentityPair) -> Result<(), KernelError> {
        let Ok(ip) = pair.ip.parse::<IpAddr>() else {
            return Ok(());
        };
        let len = abi::ipcache::host_prefix_len(ip);
        let remote = self
            .ipcache
            .get(ip, len)
            .is_some_and(|e| e.source == self.source);
        self.ipcache.remove(ip, len, self.source)?;
        if remote {
            self.events.forget_pod(ip);
            self.events.agent(
                AgentNotify::IpcacheDeleted,
                serde_json::json!({ "cidr": format!("{ip}/{len}") }),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_marshal_as_cilium_does() {
        let pair = IpIdentityPair {
            ip: "10.1.0.7".into(),
            mask: None,
            host_ip: "198.18.0.11".into(),
            id: 256,
            key: 0,
            metadata: "cilium-global:default:node1:12".into(),
            k8s_namespace: "default".into(),
            k8s_pod_name: "web".into(),
        };
        assert_eq!(
            serde_json::to_string(&pair).unwrap(),
            r#"{"IP":"10.1.0.7","Mask":null,"HostIP":"198.18.0.11","ID":256,"Key":0,"Metadata":"cilium-global:default:node1:12","K8sNamespace":"default","K8sPodName":"web"}"#
        );
    }
}
