//! The pods the scheduler binds to this node, run as kubelet runs them:
//! a sandbox (netns + CNI ADD) and the built-in servers per pod, the
//! status reported through the `status` subresource; a pod being deleted
//! is torn down (servers, CNI DEL, netns) and then deleted for good with
//! grace 0 and a UID precondition, a pod that vanished is torn down too.
//! At start, sandboxes left by a previous run are adopted (their pod
//! still wants them) or torn down. A `hostNetwork` pod (the cilium
//! DaemonSet's, whose agent the node holder runs) gets no sandbox, as
//! with kubelet: it is the node's network, its servers bound there.

use super::probes::Prober;
use super::sandbox::Sandbox;
use super::servers::{self, Port, Protocol, Servers};
use anyhow::Context;
use futures::StreamExt;
use k8s::k8s_openapi::api::core::v1::Pod;
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s::k8s_openapi::jiff::Timestamp;
use k8s::kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use k8s::kube::runtime::watcher::{self, Event};
use k8s::kube::runtime::WatchStreamExt;
use k8s::kube::{Api, Client, ResourceExt};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};
use topology::NodeDir;

const MAX_BACKOFF: Duration = Duration::from_secs(30);

struct Running {
    /// None for a hostNetwork pod.
    sandbox: Option<Sandbox>,
    ip: String,
    /// A dual-stack pod's second address (`podIPs[1]`).
    ipv6: Option<String>,
    container_id: String,
    /// Held for their lifetime: dropping stops them.
    _servers: Servers,
    /// Whether the API server has the Running status.
    reported: bool,
    /// Its startup and readiness probes; None: Ready as it runs.
    prober: Option<Prober>,
}

impl Running {
    fn ready(&self) -> bool {
        self.prober.as_ref().is_none_or(Prober::ready)
    }
}

struct Retry {
    attempts: u32,
    next: Instant,
}

struct Kubelet {
    l: NodeDir,
    node_ip: String,
    client: Client,
    /// By pod UID.
    running: HashMap<String, Running>,
    /// Sandboxes whose pod is gone and whose teardown failed, or that a
    /// previous run left (adopted or torn down at the first sync).
    leftover: Vec<Sandbox>,
    first_sync: bool,
    retries: HashMap<String, Retry>,
    /// Pods whose final delete the API server accepted.
    deleted: HashSet<String>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn namespace(pod: &Pod) -> String {
    pod.namespace().unwrap_or_else(|| "default".into())
}

/// `namespace/name`, as messages name a pod.
fn key(pod: &Pod) -> String {
    format!("{}/{}", namespace(pod), pod.name_any())
}

fn ports(pod: &Pod) -> Vec<Port> {
    let spec = pod.spec.iter().flat_map(|s| &s.containers);
    spec.flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let protocol = match p.protocol.as_deref() {
                None | Some("TCP") => Protocol::Tcp,
                Some("UDP") => Protocol::Udp,
                // SCTP and whatever else: the built-in servers speak neither
                Some(_) => return None,
            };
            u16::try_from(p.container_port)
                .ok()
                .map(|port| Port { port, protocol })
        })
        .collect()
}

fn now() -> Value {
    json!(Time(Timestamp::now()))
}

fn condition(kind: &str, status: &str, reason: Option<&str>, message: Option<&str>) -> Value {
    let mut c =
        json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": now()});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

impl Kubelet {
    /// The status kubelet posts for a pod whose containers all run.
    fn running_status(&self, pod: &Pod, r: &Running) -> Value {
        let ip = &r.ip;
        let pod_ips: Vec<Value> = std::iter::once(ip)
            .chain(&r.ipv6)
            .map(|ip| json!({"ip": ip}))
            .collect();
        let started = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .map_or_else(now, |t| json!(t));
        let containers: Vec<Value> = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| {
                json!({
                    "name": c.name,
                    "image": c.image.clone().unwrap_or_default(),
                    "imageID": format!("cilium-lab://{}", c.image.clone().unwrap_or_default()),
                    "containerID": r.container_id,
                    "ready": r.ready(),
                    "started": true,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started}},
                })
            })
            .collect();
        let ready = if r.ready() { "True" } else { "False" };
        let conditions: Vec<Value> = [
            ("PodReadyToStartContainers", "True"),
            ("Initialized", "True"),
            ("Ready", ready),
            ("ContainersReady", ready),
            ("PodScheduled", "True"),
        ]
        .into_iter()
        .map(|(kind, status)| condition(kind, status, None, None))
        .collect();
        json!({"status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": pod_ips,
            "hostIP": self.node_ip,
            "hostIPs": [{"ip": self.node_ip}],
            "startTime": started,
            "conditions": conditions,
            "containerStatuses": containers,
        }})
    }

    /// Reports running pod `uid` as Running, Ready as its probes say; a
    /// failed report is tried again on the next pass.
    async fn report_running(&mut self, pod: &Pod, uid: &str) {
        let Some(r) = self.running.get(uid) else {
            return;
        };
        let status = self.running_status(pod, r);
        match self.patch_status(pod, status).await {
            Ok(()) => {
                if let Some(r) = self.running.get_mut(uid) {
                    r.reported = true;
                }
            }
            Err(e) => eprintln!("kubelet: {e:#}"),
        }
    }

    async fn patch_status(&self, pod: &Pod, status: Value) -> anyhow::Result<()> {
        self.api_of(pod)
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(status),
            )
            .await
            .with_context(|| format!("reporting the status of {}", key(pod)))?;
        Ok(())
    }

    fn api_of(&self, pod: &Pod) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &namespace(pod))
    }

    async fn teardown(&mut self, sb: Sandbox) {
        let l = self.l.clone();
        let pod = sb.pod();
        let kept = sb.clone();
        match tokio::task::spawn_blocking(move || sb.destroy(&l)).await {
            Ok(Ok(())) => eprintln!("kubelet: pod {pod}: sandbox {} torn down", kept.id),
            Ok(Err(e)) => {
                eprintln!("kubelet: pod {pod}: teardown: {e:#}; retrying");
                self.leftover.push(kept);
            }
            Err(e) => eprintln!("kubelet: pod {pod}: teardown task: {e}"),
        }
    }

    fn start_servers(sb: &Sandbox, pod: &Pod, l: &NodeDir) -> anyhow::Result<Servers> {
        servers::start(&pod.name_any(), &l.netns(&sb.netns_name()), &ports(pod))
            .with_context(|| format!("starting the servers of {}", sb.pod()))
    }

    fn sandboxed(sb: Sandbox, servers: Servers, pod: &Pod) -> Running {
        let ip = sb.ip.map(|ip| ip.to_string()).unwrap_or_default();
        Running {
            prober: Prober::of(pod, &ip),
            ip,
            ipv6: sb.ipv6.map(|ip| ip.to_string()),
            container_id: format!("cilium-lab://{}", sb.id),
            sandbox: Some(sb),
            _servers: servers,
            reported: false,
        }
    }

    /// A hostNetwork pod: its servers in the node's namespace (this
    /// process's), its IP the node's.
    fn start_on_host(&mut self, pod: &Pod) -> anyhow::Result<()> {
        let servers = servers::start(&pod.name_any(), Path::new("/proc/self/ns/net"), &ports(pod))
            .with_context(|| format!("starting the servers of {}", key(pod)))?;
        eprintln!("kubelet: pod {}: running in the node's network", key(pod));
        self.running.insert(
            uid(pod),
            Running {
                sandbox: None,
                prober: Prober::of(pod, &self.node_ip),
                ip: self.node_ip.clone(),
                ipv6: None,
                container_id: format!("cilium-lab://host-{}", uid(pod)),
                _servers: servers,
                reported: false,
            },
        );
        Ok(())
    }

    /// Sandbox, servers and Running status for `pod`.
    async fn start(&mut self, pod: &Pod) -> anyhow::Result<()> {
        if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            return self.start_on_host(pod);
        }
        let (l, ns, name, uid) = (self.l.clone(), namespace(pod), pod.name_any(), uid(pod));
        let sb = tokio::task::spawn_blocking(move || Sandbox::create(&l, &ns, &name, &uid))
            .await
            .context("the sandbox task")??;
        let servers = match Self::start_servers(&sb, pod, &self.l) {
            Ok(s) => s,
            Err(e) => {
                self.teardown(sb).await;
                return Err(e);
            }
        };
        eprintln!(
            "kubelet: pod {}: running at {} (sandbox {})",
            sb.pod(),
            sb.ip.map(|ip| ip.to_string()).unwrap_or_default(),
            sb.id
        );
        self.running
            .insert(sb.uid.clone(), Self::sandboxed(sb, servers, pod));
        Ok(())
    }

    async fn failed(&mut self, pod: &Pod, err: anyhow::Error) {
        let uid = uid(pod);
        let retry = self.retries.entry(uid).or_insert(Retry {
            attempts: 0,
            next: Instant::now(),
        });
        retry.attempts += 1;
        let wait = Duration::from_secs(1 << retry.attempts.min(5)).min(MAX_BACKOFF);
        retry.next = Instant::now() + wait;
        eprintln!("kubelet: pod {}: {err:#}; retrying in {wait:?}", key(pod));
        let message = format!("{err:#}");
        let status = json!({"status": {
            "phase": "Pending",
            "hostIP": self.node_ip,
            "hostIPs": [{"ip": self.node_ip}],
            "conditions": [
                condition("PodScheduled", "True", None, None),
                condition("PodReadyToStartContainers", "False", Some("FailedCreatePodSandBox"), Some(&message)),
            ],
        }});
        if let Err(e) = self.patch_status(pod, status).await {
            eprintln!("kubelet: {e:#}");
        }
    }

    /// The final delete kubelet sends once a terminating pod is torn down.
    async fn finish_delete(&mut self, pod: &Pod) {
        let uid = uid(pod);
        if self.deleted.contains(&uid) {
            return;
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.api_of(pod).delete(&pod.name_any(), &params).await {
            Ok(_) => {}
            Err(k8s::kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                eprintln!("kubelet: deleting pod {}: {e}", key(pod));
                return;
            }
        }
        self.deleted.insert(uid);
    }

    /// Brings the node's sandboxes in line with `pods` (this node's, by UID).
    async fn sync(&mut self, pods: &HashMap<String, Pod>) {
        let network_ready = self.l.cni_conf_file().exists();
        for sb in std::mem::take(&mut self.leftover) {
            let wanted = pods
                .get(&sb.uid)
                .filter(|p| p.metadata.deletion_timestamp.is_none());
            match wanted {
                Some(pod) if self.first_sync && sb.ip.is_some() && sb.netns_exists(&self.l) => {
                    match Self::start_servers(&sb, pod, &self.l) {
                        Ok(servers) => {
                            eprintln!("kubelet: pod {}: adopted sandbox {}", sb.pod(), sb.id);
                            self.running
                                .insert(sb.uid.clone(), Self::sandboxed(sb, servers, pod));
                        }
                        Err(e) => {
                            eprintln!("kubelet: {e:#}");
                            self.teardown(sb).await;
                        }
                    }
                }
                _ => self.teardown(sb).await,
            }
        }
        self.first_sync = false;
        let gone: Vec<String> = self
            .running
            .keys()
            .filter(|uid| {
                pods.get(*uid)
                    .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            })
            .cloned()
            .collect();
        for uid in gone {
            if let Some(r) = self.running.remove(&uid) {
                drop(r._servers);
                if let Some(sb) = r.sandbox {
                    self.teardown(sb).await;
                }
            }
        }
        self.retries.retain(|uid, _| pods.contains_key(uid));
        self.deleted.retain(|uid| pods.contains_key(uid));
        for (uid, pod) in pods {
            if pod.metadata.deletion_timestamp.is_some() {
                // torn down above; the pod goes once its sandbox did
                if !self.leftover.iter().any(|sb| &sb.uid == uid) {
                    self.finish_delete(pod).await;
                }
                continue;
            }
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            if let Some(r) = self.running.get_mut(uid) {
                if let Some(p) = &mut r.prober {
                    if p.tick().await {
                        eprintln!("kubelet: pod {}: Ready is now {}", key(pod), p.ready());
                        r.reported = false;
                    }
                }
                if !r.reported {
                    self.report_running(pod, uid).await;
                }
                continue;
            }
            if !network_ready
                || self
                    .retries
                    .get(uid)
                    .is_some_and(|r| Instant::now() < r.next)
            {
                continue;
            }
            match self.start(pod).await {
                Ok(()) => {
                    self.retries.remove(uid);
                    self.report_running(pod, uid).await;
                }
                Err(e) => self.failed(pod, e).await,
            }
        }
    }
}

/// Follows the pods bound to `node` and runs them until the watch ends.
pub async fn run(client: Client, l: &NodeDir, index: usize) -> anyhow::Result<()> {
    let node = topology::node_name(index);
    let api: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let mut kubelet = Kubelet {
        l: l.clone(),
        node_ip: topology::node_ip(index).to_string(),
        client,
        running: HashMap::new(),
        leftover: Sandbox::all(l),
        first_sync: true,
        retries: HashMap::new(),
        deleted: HashSet::new(),
    };
    let mut pods: HashMap<String, Pod> = HashMap::new();
    let mut listing: Option<HashMap<String, Pod>> = None;
    let mut listed = false;
    // retries and status reports that failed are taken up again each second
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            ev = events.next() => match ev.context("the pod watch ended")? {
                Ok(Event::Init) => listing = Some(HashMap::new()),
                Ok(Event::InitApply(pod)) => {
                    listing.get_or_insert_with(HashMap::new).insert(uid(&pod), pod);
                }
                Ok(Event::InitDone) => {
                    pods = listing.take().unwrap_or_default();
                    listed = true;
                }
                Ok(Event::Apply(pod)) => {
                    pods.insert(uid(&pod), pod);
                }
                Ok(Event::Delete(pod)) => {
                    pods.remove(&uid(&pod));
                }
                Err(e) => eprintln!("kubelet: watching pods: {e}; retrying"),
            },
            _ = tick.tick() => {}
        }
        // nothing is torn down before the first listing says what exists
        if listed && listing.is_none() {
            kubelet.sync(&pods).await;
        }
    }
}
