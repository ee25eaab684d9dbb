//! The cluster DNS of a lab of real nodes, installed as kubeadm installs
//! it (`coredns.yaml`): CoreDNS from the image `crates/images` builds,
//! answering at the kube-dns Service that kubelets name as `clusterDNS`.

use crate::kube;
use anyhow::Context;
use std::time::Duration;

const MANIFEST: &str = include_str!("coredns.yaml");

/// The image the Deployment runs (kubeadm's name for the pinned release).
pub fn image() -> String {
    images::coredns_reference(kubeplane::bins::coredns_version())
}

/// kubeadm's manifests with the lab's DNS address and image.
pub fn manifest() -> String {
    MANIFEST
        .replace(
            "@DNS_IP@",
            &crate::stack::Stack::running().dns_service_ip().to_string(),
        )
        .replace("@IMAGE@", &image())
}

/// Applies the manifests and waits until CoreDNS answers (Available: its
/// readiness probe passes once the kubernetes plugin has synced).
pub fn install(timeout: Duration) -> anyhow::Result<()> {
    kube::apply("applying CoreDNS", &manifest())?;
    kube::wait_available("deployment/coredns", timeout).context("CoreDNS did not come up")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_is_filled_and_parses() {
        let text = manifest();
        assert!(!text.contains('@'), "a placeholder is left: {text}");
        let kinds: Vec<String> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| {
                let v: serde_json::Value = serde::Deserialize::deserialize(d).unwrap();
                v["kind"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "ConfigMap",
                "Deployment",
                "Service"
            ]
        );
        assert!(text.contains("clusterIP: 10.96.0.10\n"));
        assert!(text.contains(&format!("image: {}\n", image())));
    }
}
