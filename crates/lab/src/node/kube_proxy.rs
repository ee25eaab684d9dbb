//! kube-proxy in iptables mode, on the baseline's nodes (`--cni bridge`):
//! Services as a cluster without Cilium has them, so the benchmarks
//! compare against a whole kubeadm-style node. Its configuration keeps it
//! off machine-wide state: the conntrack table size and TCP timeouts
//! (`nf_conntrack_max`, the `nf_conntrack_tcp_timeout_*` it would tune)
//! are left as they are, as kube-proxy does when they are 0; what it
//! still writes (`route_localnet`) belongs to the node's own network
//! namespace.

use std::net::Ipv4Addr;
use std::path::Path;

/// The node's own /var, beside kubelet's.
pub const CONFIG: &str = "/var/lib/kube-proxy/config.yaml";

/// The KubeProxyConfiguration of node `node` at `node_ip`; `cluster_cidr`
/// is what the pods' addresses come from (traffic from elsewhere to a
/// Service is masqueraded).
pub fn config(node: &str, node_ip: Ipv4Addr, cluster_cidr: &str, kubeconfig: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: {node}
bindAddress: {node_ip}
clusterCIDR: {cluster_cidr}
nodePortAddresses: [primary]
clientConnection:
  kubeconfig: {kubeconfig}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        kubeconfig = kubeconfig.display(),
    )
}

pub fn args() -> Vec<String> {
    vec![format!("--config={CONFIG}")]
}
