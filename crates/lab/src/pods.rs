//! Pods of the kvstore-mode lab, made by hand as a container runtime
//! makes them: a network namespace, then CNI ADD through the node's
//! conflist, the labels passed in `CNI_ARGS` as there is no API server.

use crate::{cni, layout};
use anyhow::{bail, Context};
use std::net::Ipv4Addr;
use topology::NodeDir;

fn container_id(pod: &str) -> String {
    format!("lab-{pod}")
}

fn cni(l: &NodeDir, command: &str, pod: &str, labels: &str) -> anyhow::Result<serde_json::Value> {
    let id = container_id(pod);
    let args = format!(
        "K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={id};K8S_POD_LABELS={labels}"
    );
    let netns = l.netns(pod);
    let sandbox = cni::Sandbox {
        container_id: &id,
        netns: &netns,
        args: &args,
        pod,
    };
    cni::call(l, command, &sandbox)
}

/// Creates a pod with `labels` (`app=web,tier=db`); returns its address.
pub fn add(l: &NodeDir, pod: &str, labels: &str) -> anyhow::Result<Ipv4Addr> {
    if pod.is_empty()
        || pod.contains('/')
        || topology::node_index(pod).is_some()
        || pod == layout::UNDERLAY
    {
        bail!("invalid pod name {pod:?}");
    }
    let ns = l.netns(pod);
    if ns.exists() {
        bail!("pod {pod} already exists");
    }
    std::fs::create_dir_all(l.netns_dir())?;
    netdev::netns::create(&ns).with_context(|| format!("creating the netns of {pod}"))?;
    match cni(l, "ADD", pod, labels).and_then(|result| cni::address(&result)) {
        Ok(ip) => Ok(ip),
        Err(e) => {
            let _ = netdev::netns::remove(&ns);
            Err(e)
        }
    }
}

/// Deletes a pod: CNI DEL, then its namespace.
pub fn delete(l: &NodeDir, pod: &str) -> anyhow::Result<()> {
    cni(l, "DEL", pod, "")?;
    netdev::netns::remove(&l.netns(pod)).with_context(|| format!("removing the netns of {pod}"))?;
    Ok(())
}
