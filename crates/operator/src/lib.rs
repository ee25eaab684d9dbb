//! cilium-operator: the cluster-wide half of Cilium. Replicas elect a
//! leader on a Lease; the leader hands out pod CIDRs (cluster-pool IPAM),
//! marks nodes ready, and collects what nobody uses any more (identities,
//! CiliumEndpoints, CiliumNodes); every replica serves its health API and
//! metrics.

pub mod api;
pub mod clusterpool;
pub mod config;
pub mod endpointgc;
pub mod identitygc;
pub mod judged;
pub mod kvstoregc;
pub mod leader;
pub mod metrics;
pub mod nodegc;
pub mod nodes;
pub mod taints;
