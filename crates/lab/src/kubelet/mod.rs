//! `cilium-lab kubelet <index>`: the lab's stand-in for kubelet and the
//! container runtime, run by the node holder inside the node's
//! namespaces in a lab with Kubernetes. It is the node to the API server
//! with the node's own credentials (`system:node:<node>`, so the Node
//! authorizer and NodeRestriction hold it to what a kubelet may do):
//! registers the Node, posts its status and Lease, and runs the pods the
//! scheduler binds to it, each a network namespace made through the
//! node's CNI conflist with built-in servers on its container ports, and
//! Ready as their HTTP startup and readiness probes say.

mod node;
mod pods;
mod probes;
pub mod sandbox;
mod servers;

use crate::{kube, layout};
use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};

pub fn run(index: usize) -> anyhow::Result<()> {
    let name = topology::node_name(index);
    let l = layout::machine_dir(&name);
    let kubeconfig = kube::node_kubeconfig(&name);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
        let client = k8s::connect(&k8s::ClientOptions {
            kubeconfig: Some(kubeconfig),
            // kubelet's own client limits (--kube-api-qps/--kube-api-burst)
            qps: 50.0,
            burst: 100,
            ..Default::default()
        })
        .await?;
        eprintln!("kubelet: {name} starting");
        tokio::select! {
            r = node::run(client.clone(), &l, index) => r,
            r = pods::run(client, &l, index) => r,
            _ = term.recv() => Ok(()),
        }
    })
}
