//! `cilium-lab up` with real nodes: the control plane on the underlay,
//! nodes running containerd and kubelet (`node`), the images built and
//! imported, then Cilium installed by applying deploy/kubernetes
//! (`install`), so kubelet runs the DaemonSet's init containers and the
//! agent, the operator's Deployment, and every pod through cilium-cni.

use crate::layout;
use crate::{boot, install, kube};
use anyhow::bail;

use std::time::{Duration, Instant};

/// Marks a lab of real nodes, for the commands that run after `up`.
fn marker() -> std::path::PathBuf {
    layout::root().join("real-nodes")
}

/// Whether the running lab's nodes are real ones.
pub fn running() -> bool {
    marker().exists()
}

pub fn up(nodes: usize, settings: &[(String, String)]) -> anyhow::Result<()> {
    let t0 = Instant::now();
    // before anything starts: a missing build is said at once
    kubeplane::bins::NodeBinaries::find()?;
    kube::control_plane(true)?;
    let image = install::image()?;
    if image != images::agent_reference() {
        bail!(
            "deploy/kubernetes runs {image}, but this build makes {}",
            images::agent_reference()
        );
    }
    let t = Instant::now();
    let built = crate::images::build()?;
    println!("==> images: {} ({:?})", built.join(", "), t.elapsed());
    layout::write_atomic(&marker(), b"")?;
    boot::write_config_map(settings, true)?;
    let switch = crate::start_underlay()?;
    let t = Instant::now();
    let cp = crate::start_control_plane(switch)?;
    kube::prepare_nodes(nodes)?;
    println!(
        "==> Kubernetes {}: kube-apiserver at https://{}:{}, controller manager and scheduler up in {:?} (pid {cp})",
        kubeplane::bins::version(),
        topology::UNDERLAY_IP,
        kube::API_PORT,
        t.elapsed()
    );
    for index in 1..=nodes {
        let t = Instant::now();
        let name = topology::node_name(index);
        let l = layout::machine_dir(&name);
        let args = ["node-holder".to_string(), index.to_string()];
        let holder = crate::start_holder(&l, &args, &name, "kubelet")?;
        println!(
            "==> {name}: {}, containerd and kubelet up, images imported, in {:?} (pid {holder})",
            topology::node_ip(index),
            t.elapsed()
        );
    }
    let t = Instant::now();
    kube::wait_nodes_registered(nodes, Duration::from_secs(60))?;
    println!("==> {nodes} node(s) registered, tainted node.cilium.io/agent-not-ready until their agent runs ({:?})", t.elapsed());

    let t = Instant::now();
    let config = boot::config_map_keys()?;
    let missing = install::missing_capabilities();
    if !missing.is_empty() {
        println!(
            "    this machine cannot grant {}: taken out of the containers that ask for them",
            missing.join(", ")
        );
    }
    let api = std::net::SocketAddrV4::new(topology::UNDERLAY_IP, kube::API_PORT);
    let list = install::manifests(api, &config, &missing)?;
    kube::apply("applying deploy/kubernetes", &list.to_string())?;
    kube::wait_rollout("daemonset/cilium", Duration::from_secs(180))?;
    kube::wait_rollout("deployment/cilium-operator", Duration::from_secs(120))?;
    kube::wait_nodes_ready(nodes, Duration::from_secs(120))?;
    println!(
        "==> Cilium installed from deploy/kubernetes: DaemonSet cilium and Deployment cilium-operator available, every node Ready ({:?})",
        t.elapsed()
    );
    println!("\n$ kubectl get nodes,ds,deploy,pods -n kube-system -o wide");
    print!(
        "{}",
        kube::run_args(&[
            "get",
            "nodes,ds,deploy,pods",
            "-n",
            "kube-system",
            "-o",
            "wide"
        ])?
    );
    println!("\n==> cluster up in {:?}", t0.elapsed());
    Ok(())
}
