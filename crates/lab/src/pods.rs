//! Pods as a container runtime makes them: a network namespace, then the
//! CNI plugin from the node's CNI bin dir (install-cni-binaries put it
//! there) with the conflist the agent wrote once it was ready.

use crate::layout;
use anyhow::{bail, Context};
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use topology::NodeDir;

/// The plugin's stdin: its entry of the conflist with cniVersion and name.
fn plugin_conf(l: &NodeDir) -> anyhow::Result<String> {
    let list: serde_json::Value = serde_json::from_slice(
        &std::fs::read(l.cni_conf_file()).context("reading the CNI conflist")?,
    )?;
    let mut conf = list["plugins"][0].clone();
    conf["cniVersion"] = list["cniVersion"].clone();
    conf["name"] = list["name"].clone();
    Ok(conf.to_string())
}

fn container_id(pod: &str) -> String {
    format!("lab-{pod}")
}

fn cni(l: &NodeDir, command: &str, pod: &str, labels: &str) -> anyhow::Result<serde_json::Value> {
    let plugin = l.cni_bin_dir().join("cilium-cni");
    let conf = plugin_conf(l)?;
    let mut child = Command::new(&plugin)
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", container_id(pod))
        .env("CNI_NETNS", l.netns(pod))
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", l.cni_bin_dir())
        .env(
            "CNI_ARGS",
            format!(
                "K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_LABELS={labels}",
                container_id(pod)
            ),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", plugin.display()))?;
    // A plugin that refuses its environment may exit before reading stdin;
    // its answer on stdout is what counts.
    if let Err(e) = child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(conf.as_bytes())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&text).with_context(|| format!("cilium-cni printed {text:?}"))?
    };
    if !out.status.success() {
        bail!(
            "cilium-cni {command} {pod}: {}",
            json["msg"].as_str().unwrap_or(&text)
        );
    }
    Ok(json)
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
    match cni(l, "ADD", pod, labels) {
        Ok(result) => {
            let addr = result["ips"][0]["address"].as_str().unwrap_or_default();
            addr.split('/')
                .next()
                .and_then(|a| a.parse().ok())
                .with_context(|| format!("no address in the CNI result {result}"))
        }
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
