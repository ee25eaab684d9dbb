//! The node as kubelet keeps it in the API server: the Node (registered
//! if missing), its status posted on change and every 10 s (the node
//! lifecycle controller taints nodes whose status goes stale), and its
//! Lease in kube-node-lease renewed every 10 s.

use anyhow::Context;
use k8s::k8s_openapi::api::coordination::v1::Lease;
use k8s::k8s_openapi::api::core::v1::Node;
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s::k8s_openapi::jiff::Timestamp;
use k8s::kube::api::{Patch, PatchParams, PostParams};
use k8s::kube::{Api, Client};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use topology::NodeDir;

const STATUS_EVERY: Duration = Duration::from_secs(10);
const LEASE_EVERY: Duration = Duration::from_secs(10);
const LEASE_SECONDS: i32 = 40;

fn now() -> Value {
    json!(Time(Timestamp::now()))
}

/// What does not change while the kubelet runs.
struct Machine {
    name: String,
    ip: std::net::Ipv4Addr,
    info: Value,
    capacity: Value,
}

fn kernel_version() -> String {
    // SAFETY: uname fills the struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates its fields.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn os_image() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

fn memory() -> String {
    let kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
        })
        .unwrap_or(0);
    format!("{kib}Ki")
}

impl Machine {
    fn new(index: usize) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            name: topology::node_name(index),
            ip: topology::node_ip(index),
            info: json!({
                "kubeletVersion": kubeplane::bins::version(),
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "kernelVersion": kernel_version(),
                "osImage": os_image(),
                "containerRuntimeVersion": format!("cilium-lab://{}", env!("CARGO_PKG_VERSION")),
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            }),
            capacity: json!({"cpu": cpus.to_string(), "memory": memory(), "pods": "110"}),
        }
    }

    fn node(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                },
            },
            // kubelet's --register-with-taints, as Cilium's docs ask: no
            // pod is scheduled here before the operator saw the agent up
            "spec": {
                "taints": [{"key": crate::AGENT_NOT_READY_TAINT, "value": "true", "effect": "NoSchedule"}],
            },
        })
    }

    /// The status with Ready as `network_ready` says, changed at `since`.
    fn status(&self, network_ready: bool, since: &Value) -> Value {
        let heartbeat = now();
        let condition = |kind: &str, status: &str, reason: &str, message: &str| {
            json!({
                "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": heartbeat, "lastTransitionTime": since,
            })
        };
        let ready = if network_ready {
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            )
        } else {
            condition(
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
            )
        };
        json!({
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": self.ip.to_string()},
                    {"type": "Hostname", "address": self.name},
                ],
                "nodeInfo": self.info,
                "capacity": self.capacity,
                "allocatable": self.capacity,
                "conditions": [
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    ready,
                ],
            }
        })
    }
}

/// Creates the Node unless it exists; its UID (the Lease's owner).
async fn register(nodes: &Api<Node>, m: &Machine) -> anyhow::Result<String> {
    let node: Node = serde_json::from_value(m.node())?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => eprintln!("kubelet: registered Node {}", m.name),
        Err(k8s::kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("registering the Node"),
    }
    let node = nodes.get(&m.name).await.context("reading the Node back")?;
    node.metadata.uid.context("the Node has no uid")
}

async fn renew_lease(leases: &Api<Lease>, m: &Machine, node_uid: &str) -> anyhow::Result<()> {
    let spec = json!({
        "holderIdentity": m.name,
        "leaseDurationSeconds": LEASE_SECONDS,
        "renewTime": MicroTime(Timestamp::now()),
    });
    if leases
        .get_opt(&m.name)
        .await
        .context("reading the Lease")?
        .is_some()
    {
        let patch = Patch::Merge(json!({ "spec": spec }));
        leases
            .patch(&m.name, &PatchParams::default(), &patch)
            .await
            .context("renewing the Lease")?;
        return Ok(());
    }
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {
            "name": m.name,
            "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": m.name, "uid": node_uid}],
        },
        "spec": spec,
    }))?;
    leases
        .create(&PostParams::default(), &lease)
        .await
        .context("creating the Lease")?;
    Ok(())
}

/// Registers node `index` and keeps its status and Lease fresh; returns
/// only on an error that retrying cannot fix.
pub async fn run(client: Client, l: &NodeDir, index: usize) -> anyhow::Result<()> {
    let m = Machine::new(index);
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let uid = loop {
        match register(&nodes, &m).await {
            Ok(uid) => break uid,
            Err(e) => {
                eprintln!("kubelet: {e:#}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let mut posted: Option<(bool, Instant)> = None;
    let mut since = now();
    let mut renewed: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let ready = l.cni_conf_file().exists();
        let changed = posted.is_none_or(|(was, _)| was != ready);
        if changed {
            since = now();
        }
        if changed || posted.is_some_and(|(_, at)| at.elapsed() >= STATUS_EVERY) {
            // strategic: conditions merge by type, so the operator's
            // NetworkUnavailable stays
            let patch = Patch::Strategic(m.status(ready, &since));
            match nodes
                .patch_status(&m.name, &PatchParams::default(), &patch)
                .await
            {
                Ok(_) => posted = Some((ready, Instant::now())),
                Err(e) => eprintln!("kubelet: posting the node status: {e}"),
            }
        }
        if renewed.is_none_or(|at| at.elapsed() >= LEASE_EVERY) {
            match renew_lease(&leases, &m, &uid).await {
                Ok(()) => renewed = Some(Instant::now()),
                Err(e) => eprintln!("kubelet: {e:#}"),
            }
        }
    }
}
