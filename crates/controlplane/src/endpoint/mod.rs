//! Local endpoints: one per pod interface, with an ID in 1..4095, an
//! address, an identity, the lxc programs on its veth and its state under
//! `<state dir>/<ID>/` so a restarted agent takes it back.

mod id;
mod log;
mod manager;
mod publisher;
mod state;

pub use id::{parse as parse_id, EndpointRef, IdError};
pub use log::StatusLog;
pub use manager::{labels_of, Deps, EndpointError, Endpoints};
pub use publisher::Publisher;
pub use state::StateError;

use api::endpoint::EndpointState;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Why a pod's labels could not be had.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LabelsUnknown(pub Box<dyn std::error::Error + Send + Sync>);

/// Where pods' identity labels come from when the cluster knows its pods
/// (the API server's Pod and Namespace objects).
pub trait PodLabels: Send + Sync {
    /// The identity labels of pod `namespace/pod`; `uid`, when the
    /// runtime passed one, is the pod the caller means.
    fn resolve<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        uid: &'a str,
    ) -> crate::ports::PortFuture<'a, Result<Vec<String>, LabelsUnknown>>;
}

/// The label of the health endpoint, whose identity is `reserved:health` (4).
pub const HEALTH_LABEL: &str = "reserved:health";
/// The host endpoint's only label (Cilium adds the node's labels).
pub const HOST_LABEL: &str = "reserved:host";

/// Lowest and highest endpoint IDs (Cilium's idallocator range).
pub const MIN_ID: u16 = 1;
pub const MAX_ID: u16 = 4095;

/// What the agent knows about an endpoint; persisted as `ep_config.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub id: u16,
    #[serde(rename = "container-id", default)]
    pub container_id: String,
    #[serde(rename = "container-interface-name", default)]
    pub container_interface_name: String,
    #[serde(rename = "interface-name")]
    pub ifname: String,
    #[serde(rename = "interface-index")]
    pub ifindex: u32,
    pub mac: String,
    #[serde(rename = "host-mac")]
    pub host_mac: String,
    /// None on an IPv6-only node, and for the host endpoint; the state
    /// file says 0.0.0.0 then, as Cilium's does.
    #[serde(with = "unspecified_is_none")]
    pub ipv4: Option<Ipv4Addr>,
    /// Its IPv6 address on a dual-stack node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(rename = "k8s-namespace", default)]
    pub k8s_namespace: String,
    #[serde(rename = "k8s-pod-name", default)]
    pub k8s_pod_name: String,
    /// The pod's UID (what its CiliumEndpoint is owned by).
    #[serde(rename = "k8s-uid", default)]
    pub k8s_uid: String,
    #[serde(default)]
    pub labels: Vec<String>,
    pub identity: u32,
    #[serde(rename = "external-ipam", default)]
    pub external_ipam: bool,
    #[serde(skip, default = "restoring")]
    pub state: EndpointState,
    /// What its policy map was last made from.
    #[serde(skip)]
    pub policy: crate::policies::Realized,
    /// What happened to it since this agent took it.
    #[serde(skip)]
    pub log: StatusLog,
}

/// Whether `labels` are the host endpoint's.
pub fn is_host(labels: &[String]) -> bool {
    labels.iter().any(|l| l == HOST_LABEL)
}

fn restoring() -> EndpointState {
    EndpointState::Restoring
}

impl Endpoint {
    /// Whether this is the node's health endpoint.
    pub fn is_health(&self) -> bool {
        self.labels.iter().any(|l| l == HEALTH_LABEL)
    }

    /// Whether this is Cilium's host endpoint (cilium_host): identity
    /// reserved:host, no address of its own, not a pod's.
    pub fn is_host(&self) -> bool {
        is_host(&self.labels)
    }

    /// Its addresses as host prefixes: IPv4's, then IPv6's if it has one.
    pub fn addresses(&self) -> impl Iterator<Item = (std::net::IpAddr, u8)> {
        let ips = (self.ipv4.map(std::net::IpAddr::from))
            .into_iter()
            .chain(self.ipv6.map(Into::into));
        ips.map(|ip| (ip, abi::ipcache::host_prefix_len(ip)))
    }

    /// The IPAM owner of the endpoint's address: `<namespace>/<pod>`.
    pub fn ipam_owner(&self) -> String {
        if self.is_health() {
            return crate::ipam::OWNER_HEALTH.into();
        }
        api::ipam::owner(&self.k8s_namespace, &self.k8s_pod_name, &self.container_id)
    }

    pub fn pod_name(&self) -> String {
        if self.k8s_pod_name.is_empty() {
            return String::new();
        }
        format!("{}/{}", self.k8s_namespace, self.k8s_pod_name)
    }

    pub fn to_api(&self) -> api::endpoint::Endpoint {
        use api::endpoint::*;
        let identity_labels = self.identity_labels();
        let cni_attachment_id = if self.container_interface_name.is_empty() {
            self.container_id.clone()
        } else {
            format!("{}:{}", self.container_id, self.container_interface_name)
        };
        Endpoint {
            id: self.id,
            spec: EndpointSpec::default(),
            status: EndpointStatus {
                external_identifiers: EndpointIdentifiers {
                    cni_attachment_id,
                    container_id: self.container_id.clone(),
                    container_interface_name: self.container_interface_name.clone(),
                    k8s_namespace: self.k8s_namespace.clone(),
                    k8s_pod_name: self.k8s_pod_name.clone(),
                    pod_name: self.pod_name(),
                },
                identity: Some(crate::identity::to_api(
                    self.identity,
                    identity_labels.clone(),
                )),
                labels: LabelConfigurationStatus {
                    realized: LabelConfigurationSpec {
                        user: self.labels.clone(),
                    },
                    security_relevant: identity_labels,
                },
                networking: Some(EndpointNetworking {
                    addressing: vec![api::ipam::AddressPair {
                        // the host endpoint has none, as in 1.16
                        ipv4: self.ipv4.map(|ip| ip.to_string()).unwrap_or_default(),
                        ipv6: self.ipv6.map(|ip| ip.to_string()).unwrap_or_default(),
                        ..Default::default()
                    }],
                    host_mac: self.host_mac.clone(),
                    interface_index: i64::from(self.ifindex),
                    interface_name: self.ifname.clone(),
                    mac: self.mac.clone(),
                }),
                policy: EndpointPolicy {
                    realized: EndpointPolicyStatus {
                        policy_enabled: self.policy.policy_enabled().into(),
                        policy_revision: self.policy.revision,
                    },
                },
                health: EndpointHealth {
                    bpf: "OK".into(),
                    policy: "OK".into(),
                    connected: true,
                    overall_health: "OK".into(),
                },
                log: self.log.to_api(),
                state: self.state.to_string(),
            },
        }
    }

    /// Labels as the identity carries them; `reserved:init` when none.
    pub fn identity_labels(&self) -> Vec<String> {
        if self.labels.is_empty() {
            return vec!["reserved:init".into()];
        }
        let mut l = self.labels.clone();
        l.sort();
        l
    }
}

/// An address field that Cilium writes as 0.0.0.0 when there is none.
mod unspecified_is_none {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::net::Ipv4Addr;

    pub fn serialize<S: Serializer>(ip: &Option<Ipv4Addr>, s: S) -> Result<S::Ok, S::Error> {
        ip.unwrap_or(Ipv4Addr::UNSPECIFIED).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Ipv4Addr>, D::Error> {
        let ip = Ipv4Addr::deserialize(d)?;
        Ok((!ip.is_unspecified()).then_some(ip))
    }
}
