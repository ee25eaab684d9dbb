//! The node's kubelet: its configuration file and flags. What a kubeadm
//! node has, with what this machine kind needs:
//! - `oomScoreAdj: 0`: kubelet may not lower its own score (no
//!   CAP_SYS_RESOURCE);
//! - `cgroupRoot: /` of the node's cgroup namespace, with the cgroupfs
//!   driver (no systemd runs here);
//! - the agent-not-ready taint at registration, as Cilium asks of nodes, so
//!   no pod lands before the agent runs; the operator removes it;
//! - image garbage collection and disk-pressure eviction kept off: nothing
//!   can be pulled again here, and the machine's disk is shared by every
//!   node;
//! - the cluster DNS at the kube-dns Service (`clusterDNS`), and for what
//!   is not the cluster's, its own resolv.conf naming the underlay host as
//!   the upstream resolver: the machine's resolver is out of the lab's
//!   reach, and the underlay answers no DNS, so outside names fail at
//!   once instead of timing out.

use std::net::IpAddr;
use std::path::Path;

/// Where the node keeps kubelet's files (the node's own /var).
pub const CONFIG: &str = "/var/lib/kubelet/config.yaml";
pub const RESOLV_CONF: &str = "/etc/kubernetes/resolv.conf";

/// The KubeletConfiguration of a lab node; `tainted`: registered with
/// Cilium's agent-not-ready taint.
pub fn config(node_ip: IpAddr, client_ca: &Path, tainted: bool) -> String {
    let taints = if tainted {
        format!(
            "registerWithTaints:\n- key: {}\n  value: \"true\"\n  effect: NoSchedule\n",
            crate::AGENT_NOT_READY_TAINT
        )
    } else {
        String::new()
    };
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {node_ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
containerRuntimeEndpoint: {endpoint}
cgroupDriver: cgroupfs
cgroupRoot: /
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
protectKernelDefaults: false
resolvConf: {resolv}
clusterDomain: cluster.local
clusterDNS:
- {dns}
{taints}evictionHard:
  memory.available: 50Mi
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
volumePluginDir: /var/lib/kubelet/volumeplugins
serializeImagePulls: false
shutdownGracePeriod: 0s
rotateCertificates: false
"#,
        ca = client_ca.display(),
        endpoint = super::containerd::ENDPOINT,
        resolv = RESOLV_CONF,
        dns = crate::stack::Stack::running().dns_service_ip(),
    )
}

/// The node's upstream resolver, for kubelet's `resolvConf`: what pods
/// with `dnsPolicy: Default` (CoreDNS's own) get, and what CoreDNS
/// forwards outside names to.
pub fn resolv_conf() -> String {
    format!(
        "# the lab's upstream resolver: the underlay host, which answers no DNS\nnameserver {}\n",
        topology::UNDERLAY_IP
    )
}

/// kubelet's flags beside its config file.
pub fn args(node: &str, node_ip: IpAddr, kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--config={CONFIG}"),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--hostname-override={node}"),
        format!("--node-ip={node_ip}"),
        "--v=1".into(),
    ]
}
