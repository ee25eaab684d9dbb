//! Calling the node's CNI plugin as a container runtime does: the
//! `cilium-cni` install-cni-binaries put in the node's CNI bin dir, its
//! entry of the conflist the agent wrote once it was ready on stdin, the
//! sandbox described by the `CNI_*` environment.

use anyhow::{bail, Context};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
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

/// One sandbox as the plugin sees it.
pub struct Sandbox<'a> {
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_NETNS`.
    pub netns: &'a Path,
    /// `CNI_ARGS`, `K=V;K=V`.
    pub args: &'a str,
    /// Who the sandbox is in error messages.
    pub pod: &'a str,
}

/// Runs `cilium-cni <command>` (ADD, DEL) for `sandbox`; its JSON answer.
pub fn call(l: &NodeDir, command: &str, sandbox: &Sandbox) -> anyhow::Result<serde_json::Value> {
    let plugin = l.cni_bin_dir().join("cilium-cni");
    let conf = plugin_conf(l)?;
    let mut child = Command::new(&plugin)
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", sandbox.container_id)
        .env("CNI_NETNS", sandbox.netns)
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", l.cni_bin_dir())
        .env("CNI_ARGS", sandbox.args)
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
            "cilium-cni {command} {}: {}",
            sandbox.pod,
            json["msg"].as_str().unwrap_or(&text)
        );
    }
    Ok(json)
}

/// The pod's IPv6 address in an ADD result of a dual-stack node, if any.
pub fn address6(result: &serde_json::Value) -> Option<std::net::Ipv6Addr> {
    result["ips"].as_array()?.iter().find_map(|ip| {
        let addr = ip["address"].as_str()?;
        addr.split('/').next()?.parse().ok()
    })
}

/// The pod's address in an ADD result.
pub fn address(result: &serde_json::Value) -> anyhow::Result<Ipv4Addr> {
    let addr = result["ips"][0]["address"].as_str().unwrap_or_default();
    addr.split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("no address in the CNI result {result}"))
}
