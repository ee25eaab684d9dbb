//! cilium-operator: the cluster-wide half of Cilium. Replicas elect a
//! leader on a Lease; the leader hands out pod CIDRs (cluster-pool IPAM);
//! every replica serves its health API and metrics.

pub mod api;
pub mod clusterpool;
pub mod config;
pub mod kvstoregc;
pub mod leader;
pub mod metrics;
pub mod nodes;
pub mod taints;
