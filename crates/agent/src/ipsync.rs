//! Endpoint IPs shared through the kvstore (Cilium's `pkg/ipcache/kvstore.go`):
//! each node publishes its endpoints under `ip/v1/default/<ip>` with its
//! session lease and learns everyone else's into the ipcache, with the
//! publishing node as the tunnel endpoint.

use crate::daemon::Daemon;
use crate::endpoint::Endpoint;
use crate::ipcache::{Entry, SOURCE_KVSTORE};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
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

/// Announces a local endpoint's address (no-op without a kvstore).
pub fn publish(d: &Daemon, ep: &Endpoint) {
    let Some(writer) = &d.kvwriter else { return };
    let pair = IpIdentityPair {
        ip: ep.ipv4.to_string(),
        mask: None,
        host_ip: d.node_ip.map(|i| i.to_string()).unwrap_or_default(),
        id: ep.identity,
        key: 0,
        metadata: format!("cilium-global:default:{}:{}", d.config.node_name, ep.id),
        k8s_namespace: ep.k8s_namespace.clone(),
        k8s_pod_name: ep.k8s_pod_name.clone(),
    };
    let body = serde_json::to_vec(&pair).expect("pair serializes");
    writer.put_leased(kvstore::keys::ip(&pair.ip), body);
}

pub fn withdraw(d: &Daemon, ip: Ipv4Addr) {
    if let Some(writer) = &d.kvwriter {
        writer.delete(kvstore::keys::ip(&ip.to_string()));
    }
}

/// Learns the other nodes' endpoints into the ipcache.
pub fn follow(d: &Arc<Daemon>) {
    let Some(kv) = &d.kvstore else { return };
    let source = kv
        .source(&format!("{}/", kvstore::keys::IPS))
        .decode(|_, raw| serde_json::from_slice::<IpIdentityPair>(raw));
    let tasks = d.tasks.clone();
    let d = Arc::clone(d);
    let handler = move |change| std::future::ready(apply(&d, change));
    tasks.spawn(
        "ipsync",
        watch::Store::new("endpoint IPs").run(source, handler),
    );
}

/// One change of the kvstore's endpoint IPs; an ipcache write that failed
/// is tried again.
fn apply(d: &Daemon, change: watch::Change<String, IpIdentityPair>) -> Result<(), datapath::Error> {
    match change {
        watch::Change::Upsert { key, new, .. } => learn(d, &key, &new),
        watch::Change::Delete { key, .. } => forget(d, &key),
        watch::Change::Synced => {
            tracing::info!(subsys = "ipcache", "Initial list of endpoint IPs received");
            Ok(())
        }
    }
}

fn ip_of_key(key: &str) -> Option<Ipv4Addr> {
    key.rsplit('/').next()?.parse().ok()
}

fn learn(d: &Daemon, key: &str, pair: &IpIdentityPair) -> Result<(), datapath::Error> {
    let (Ok(ip), Ok(host)) = (
        pair.ip.parse::<Ipv4Addr>(),
        pair.host_ip.parse::<Ipv4Addr>(),
    ) else {
        tracing::warn!(subsys = "ipcache", key = %key, "Ignoring IP entry without IPv4 addresses");
        return Ok(());
    };
    if Some(host) == d.node_ip {
        return Ok(());
    }
    let entry = Entry::new(pair.id, SOURCE_KVSTORE).behind(host);
    match d.ipcache.upsert(ip, 32, entry)? {
        true => {
            d.monitor
                .name_pod(ip, &pair.k8s_namespace, &pair.k8s_pod_name);
            d.monitor.agent(
                crate::monitor::AgentNotify::IpcacheUpserted,
                serde_json::json!({
                    "cidr": format!("{ip}/32"),
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

fn forget(d: &Daemon, key: &str) -> Result<(), datapath::Error> {
    let Some(ip) = ip_of_key(key) else {
        return Ok(());
    };
    let remote = d
        .ipcache
        .get(ip, 32)
        .is_some_and(|e| e.source == SOURCE_KVSTORE);
    d.ipcache.remove(ip, 32, SOURCE_KVSTORE)?;
    if remote {
        d.monitor.forget_pod(ip);
        d.monitor.agent(
            crate::monitor::AgentNotify::IpcacheDeleted,
            serde_json::json!({ "cidr": format!("{ip}/32") }),
        );
    }
    Ok(())
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
