//! Pods' `hostPort`s as HostPort services, as Cilium 1.16's pod watcher
//! makes them with kube-proxy replacement (`enable-host-port`): for each
//! container port of a pod on this node that has a hostPort, one frontend
//! per address it is served on, of the port's protocol, with the pod's
//! addresses at the containerPort as backends, named
//! `<pod>/host-port/<hostPort>` in the pod's namespace.
//!
//! - hostIP unset or 0.0.0.0: this node's address and the 0.0.0.0
//!   surrogate (which the node's own sockets reach through loopback);
//! - hostIP 127.0.0.1: only the surrogate, marked so that nothing but the
//!   node's loopback connections reach it;
//! - any other hostIP: that address alone.
//!
//! A hostPort inside the NodePort range is refused, as Cilium refuses it;
//! so is a frontend another pod already holds (the scheduler keeps such
//! pods apart; two that still meet are told in the log).

use crate::k8s::connection::Kubernetes;
use crate::k8s::services::{frontend_name, frontend_of, reconcile, Frontend};
use api::service::{BackendAddress, FrontendAddress, L4Protocol, ServiceSpec, ServiceSpecFlags};
use controlplane::services::Services;
use controlplane::tasks::Tasks;
use k8s::k8s_openapi::api::core::v1::Pod;
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;
use watch::{Event, Source};

/// What this node serves hostPorts on.
#[derive(Clone, Debug)]
pub struct Scope {
    pub node_name: String,
    /// The node's own address (its InternalIP).
    pub node_ip: Ipv4Addr,
    /// `node-port-range`, first and last port.
    pub node_port_range: (u16, u16),
}

/// The service kind this module owns.
const KIND: &str = "HostPort";

/// One container port with a hostPort.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mapping {
    host_ip: String,
    host_port: u16,
    container_port: u16,
    protocol: L4Protocol,
}

/// A pod's part: where it is and what it maps.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostPortPod {
    namespace: String,
    name: String,
    ips: Vec<String>,
    mappings: Vec<Mapping>,
}

/// A running pod's hostPorts; None when it has none, runs in the host's
/// network, has no address yet or is done.
fn host_port_pod(pod: &Pod) -> Option<HostPortPod> {
    let spec = pod.spec.as_ref()?;
    let status = pod.status.as_ref()?;
    if spec.host_network == Some(true)
        || matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
    {
        return None;
    }
    let ips: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.clone())
        .filter(|ip| ip.parse::<Ipv4Addr>().is_ok())
        .collect();
    let mappings: Vec<Mapping> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let host_port = u16::try_from(p.host_port?).ok().filter(|p| *p > 0)?;
            Some(Mapping {
                host_ip: p.host_ip.clone().unwrap_or_default(),
                host_port,
                container_port: u16::try_from(p.container_port).ok()?,
                protocol: L4Protocol::from_kubernetes(p.protocol.as_deref())?,
            })
        })
        .collect();
    (!ips.is_empty() && !mappings.is_empty()).then(|| HostPortPod {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        ips,
        mappings,
    })
}

/// The frontend addresses of a hostIP on this node; None for an address
/// that is not IPv4.
fn frontend_ips(host_ip: &str, node_ip: Ipv4Addr) -> Option<Vec<Ipv4Addr>> {
    let ip = match host_ip {
        "" => Ipv4Addr::UNSPECIFIED,
        s => s.parse().ok()?,
    };
    Some(if ip.is_unspecified() {
        vec![node_ip, Ipv4Addr::UNSPECIFIED]
    } else {
        // 127.0.0.1 stays as it is: the service subsystem turns it into
        // the 0.0.0.0 frontend only loopback reaches
        vec![ip]
    })
}

/// Every HostPort service the pods make, keyed by frontend; the first pod
/// (by namespace/name) keeps a frontend two claim.
fn desired(pods: &BTreeMap<String, HostPortPod>, scope: &Scope) -> BTreeMap<Frontend, ServiceSpec> {
    let (first, last) = scope.node_port_range;
    let mut out: BTreeMap<Frontend, ServiceSpec> = BTreeMap::new();
    for pod in pods.values() {
        for m in &pod.mappings {
            if (first..=last).contains(&m.host_port) {
                tracing::warn!(subsys = "k8s-watcher", k8sNamespace = %pod.namespace, k8sPodName = %pod.name, hostPort = m.host_port, "The requested hostPort {} is colliding with the configured NodePort range [{first}, {last}]. Ignoring.", m.host_port);
                continue;
            }
            let Some(ips) = frontend_ips(&m.host_ip, scope.node_ip) else {
                continue;
            };
            for ip in ips {
                let spec = ServiceSpec {
                    id: 0,
                    frontend_address: FrontendAddress {
                        ip: ip.to_string(),
                        port: m.host_port,
                        protocol: m.protocol,
                        scope: String::new(),
                    },
                    backend_addresses: pod
                        .ips
                        .iter()
                        .map(|ip| BackendAddress {
                            ip: ip.clone(),
                            port: m.container_port,
                            state: "active".into(),
                            ..Default::default()
                        })
                        .collect(),
                    flags: Some(ServiceSpecFlags {
                        kind: KIND.into(),
                        name: format!("{}/host-port/{}", pod.name, m.host_port),
                        namespace: pod.namespace.clone(),
                        ..Default::default()
                    }),
                    update_services: false,
                    session_affinity_timeout: 0,
                };
                let frontend = frontend_of(&spec);
                if let Some(holder) = out.get(&frontend) {
                    let holder = holder.flags.as_ref().map(|f| f.name.as_str());
                    tracing::warn!(subsys = "k8s-watcher", k8sNamespace = %pod.namespace, k8sPodName = %pod.name, frontend = %frontend_name(&frontend), holder = holder.unwrap_or(""), "hostPort already taken on this node, not served");
                    continue;
                }
                out.insert(frontend, spec);
            }
        }
    }
    out
}

fn owned(spec: &ServiceSpec) -> bool {
    spec.flags
        .as_ref()
        .is_some_and(|f| f.kind == KIND && !f.name.is_empty())
}

/// Follows this node's pods into HostPort services until the agent stops.
pub fn follow(services: Arc<Services>, scope: Scope, kubernetes: &Kubernetes, tasks: &Tasks) {
    let on_node = watcher::Config::default().fields(&format!("spec.nodeName={}", scope.node_name));
    let mut source = kubernetes.watched(
        "core/v1::Pods",
        ResourceSource::new("Pods", Api::<Pod>::all(kubernetes.client()), on_node),
    );
    tasks.spawn("k8s-hostports", async move {
        let mut pods: BTreeMap<String, HostPortPod> = BTreeMap::new();
        let mut listed = false;
        let mut failed = false;
        loop {
            tokio::select! {
                ev = source.next() => match ev {
                    Some(Event::Upsert { key, value }) => match host_port_pod(&value) {
                        Some(pod) if pods.get(&key) == Some(&pod) => continue,
                        Some(pod) => {
                            pods.insert(key, pod);
                        }
                        None if pods.remove(&key).is_none() => continue,
                        None => {}
                    },
                    Some(Event::Delete { key }) => {
                        if pods.remove(&key).is_none() {
                            continue;
                        }
                    }
                    Some(Event::Relist) => {
                        pods.clear();
                        listed = false;
                    }
                    Some(Event::ListDone) => listed = true,
                    None => return,
                },
                () = tokio::time::sleep(Duration::from_secs(10)), if failed => {}
            }
            if listed {
                failed = !reconcile(&services, desired(&pods, &scope), owned);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    fn scope() -> Scope {
        Scope {
            node_name: "node1".into(),
            node_ip: Ipv4Addr::new(198, 18, 0, 11),
            node_port_range: (30000, 32767),
        }
    }

    fn host_port(name: &str, host_ip: Option<&str>, port: i32, protocol: &str) -> Pod {
        let mut p =
            serde_json::json!({"containerPort": 8080, "hostPort": port, "protocol": protocol});
        if let Some(ip) = host_ip {
            p["hostIP"] = ip.into();
        }
        pod(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": "node1", "containers": [{"name": "c", "ports": [p]}]},
            "status": {"phase": "Running", "podIPs": [{"ip": format!("10.0.1.{}", name.len())}]},
        }))
    }

    #[test]
    fn each_host_ip_and_protocol_is_a_frontend_of_its_own() {
        let pods: BTreeMap<String, HostPortPod> = [
            host_port("pod1", Some("127.0.0.1"), 54323, "TCP"),
            host_port("pod22", Some("198.18.0.11"), 54323, "TCP"),
            host_port("pod333", Some("198.18.0.11"), 54323, "UDP"),
            host_port("any", None, 8000, "TCP"),
            host_port("np", None, 30001, "TCP"),
        ]
        .iter()
        .map(|p| (p.name_any(), host_port_pod(p).unwrap()))
        .collect();
        let want = desired(&pods, &scope());
        let got: Vec<(String, String)> = want
            .iter()
            .map(|(f, s)| {
                (
                    frontend_name(f),
                    format!(
                        "{} -> {}:{}",
                        s.flags.as_ref().unwrap().name,
                        s.backend_addresses[0].ip,
                        s.backend_addresses[0].port
                    ),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "0.0.0.0:8000/TCP".into(),
                    "any/host-port/8000 -> 10.0.1.3:8080".into()
                ),
                (
                    "127.0.0.1:54323/TCP".into(),
                    "pod1/host-port/54323 -> 10.0.1.4:8080".into()
                ),
                (
                    "198.18.0.11:8000/TCP".into(),
                    "any/host-port/8000 -> 10.0.1.3:8080".into()
                ),
                (
                    "198.18.0.11:54323/TCP".into(),
                    "pod22/host-port/54323 -> 10.0.1.5:8080".into()
                ),
                (
                    "198.18.0.11:54323/UDP".into(),
                    "pod333/host-port/54323 -> 10.0.1.6:8080".into()
                ),
            ],
            "the NodePort-range hostPort is refused"
        );
        assert!(want
            .values()
            .all(|s| s.flags.as_ref().unwrap().kind == "HostPort"));
    }

    #[test]
    fn a_frontend_two_pods_claim_stays_with_the_first() {
        let pods: BTreeMap<String, HostPortPod> = [
            host_port("a", None, 8000, "TCP"),
            host_port("b", Some("198.18.0.11"), 8000, "TCP"),
        ]
        .iter()
        .map(|p| (p.name_any(), host_port_pod(p).unwrap()))
        .collect();
        let want = desired(&pods, &scope());
        assert_eq!(want.len(), 2);
        assert!(want
            .values()
            .all(|s| s.flags.as_ref().unwrap().name == "a/host-port/8000"));
    }

    #[test]
    fn pods_without_an_address_on_the_host_network_or_done_map_nothing() {
        let mut p = host_port("x", None, 8000, "TCP");
        p.status.as_mut().unwrap().pod_ips = None;
        assert!(host_port_pod(&p).is_none());
        let mut p = host_port("x", None, 8000, "TCP");
        p.spec.as_mut().unwrap().host_network = Some(true);
        assert!(host_port_pod(&p).is_none());
        let mut p = host_port("x", None, 8000, "TCP");
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(host_port_pod(&p).is_none());
    }
}
