//! A Kubernetes control plane for `cilium-lab` and the tests: the PKI it
//! needs (a CA, serving and client certificates, the service-account
//! key), kubeconfigs, and the command lines of kube-apiserver,
//! kube-controller-manager and kube-scheduler as `scripts/build-k8s.sh`
//! builds them from `tools/k8s`. It starts nothing itself: the caller
//! spawns the commands where they belong (the lab's underlay namespace, a
//! test's sandbox) and owns the processes.

pub mod bins;
pub mod components;
pub mod kubeconfig;
pub mod pki;

pub use bins::{bin_dir, Binaries};
pub use components::ControlPlane;
pub use pki::Pki;
