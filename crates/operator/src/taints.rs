//! Node readiness as Cilium's operator marks it: once a node's Cilium
//! agent pod is Ready, the `node.cilium.io/agent-not-ready` taint comes
//! off the Node (so the scheduler places pods there) and the Node gets
//! `NetworkUnavailable=False` (reason `CiliumIsUp`); with
//! `set-cilium-node-taints`, a node whose agent pod exists but is not Ready
//! gets the taint back. The agent never touches either.

use k8s::k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s::k8s_openapi::jiff::Timestamp;
use k8s::kube::api::{Patch, PatchParams};
use k8s::kube::runtime::watcher;
use k8s::kube::Api;
use k8s::ResourceSource;
use std::collections::{BTreeMap, BTreeSet};
use watch::{Event, Source};

/// What the controller is told (Cilium's keys).
#[derive(Clone, Debug)]
pub struct TaintConfig {
    /// `remove-cilium-node-taints`.
    pub remove: bool,
    /// `set-cilium-node-taints`.
    pub set: bool,
    /// `set-cilium-is-up-condition`.
    pub condition: bool,
    /// `agent-not-ready-taint-key`.
    pub key: String,
    /// `cilium-pod-namespace`.
    pub namespace: String,
    /// `cilium-pod-labels`, as a label selector.
    pub labels: String,
}

/// Where a node's agent is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    /// No agent pod on the node.
    Absent,
    /// A pod, not (or no longer) Ready.
    Scheduled,
    /// A Ready pod that is not being deleted.
    Running,
}

fn pod_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn agent_on<'a>(pods: impl Iterator<Item = &'a Pod>) -> Agent {
    let mut agent = Agent::Absent;
    for pod in pods {
        if pod_ready(pod) {
            return Agent::Running;
        }
        agent = Agent::Scheduled;
    }
    agent
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

fn cilium_is_up(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "NetworkUnavailable"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("CiliumIsUp")
            })
        })
}

/// What to do to a node.
#[derive(Debug, Default, PartialEq, Eq)]
struct Actions {
    remove_taint: bool,
    add_taint: bool,
    set_condition: bool,
}

fn decide(c: &TaintConfig, node: &Node, agent: Agent) -> Actions {
    let tainted = has_taint(node, &c.key);
    match agent {
        Agent::Running => Actions {
            remove_taint: c.remove && tainted,
            set_condition: c.condition && !cilium_is_up(node),
            ..Default::default()
        },
        Agent::Scheduled => Actions {
            add_taint: c.set && !tainted,
            ..Default::default()
        },
        Agent::Absent => Actions::default(),
    }
}

/// JSON patch replacing the taints, guarded by a test of the old ones, so
/// a taint another writer added meanwhile is not lost.
fn taints_patch(old: &Option<Vec<Taint>>, new: &[Taint]) -> serde_json::Value {
    match old {
        // a test of a missing path fails: the first taints are added
        None => serde_json::json!([{"op": "add", "path": "/spec/taints", "value": new}]),
        Some(old) => serde_json::json!([
            {"op": "test", "path": "/spec/taints", "value": old},
            {"op": "replace", "path": "/spec/taints", "value": new},
        ]),
    }
}

struct Controller {
    config: TaintConfig,
    nodes_api: Api<Node>,
    nodes: BTreeMap<String, Node>,
    /// The agent pods by node name.
    pods: BTreeMap<String, BTreeMap<String, Pod>>,
    /// Which node each pod was on, to find it again on delete.
    pod_node: BTreeMap<String, String>,
    listed: [bool; 2],
}

impl Controller {
    async fn reconcile(&mut self, name: &str) {
        let Some(node) = self.nodes.get(name) else {
            return;
        };
        let agent = agent_on(self.pods.get(name).into_iter().flat_map(|p| p.values()));
        let actions = decide(&self.config, node, agent);
        let old = node.spec.as_ref().and_then(|s| s.taints.clone());
        let mut result = Ok(());
        if actions.remove_taint || actions.add_taint {
            let mut new: Vec<Taint> = old
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key != self.config.key)
                .collect();
            if actions.add_taint {
                new.push(Taint {
                    key: self.config.key.clone(),
                    value: Some(String::new()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                });
            }
            let patch: json_patch::Patch =
                serde_json::from_value(taints_patch(&old, &new)).expect("a JSON patch");
            result = self
                .nodes_api
                .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map(|_| ());
            if result.is_ok() {
                let what = if actions.add_taint {
                    "Added"
                } else {
                    "Removed"
                };
                tracing::info!(subsys = "cilium-operator", node = name, taint = %self.config.key, "{what} the agent-not-ready taint");
            }
        }
        if actions.set_condition && result.is_ok() {
            let now = Time(Timestamp::now());
            let patch = serde_json::json!({"status": {"conditions": [{
                "type": "NetworkUnavailable",
                "status": "False",
                "reason": "CiliumIsUp",
                "message": "Cilium is running on this node",
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            }]}});
            result = self
                .nodes_api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map(|_| ());
        }
        if let Err(e) = result {
            // the Node's next event (or the pod's) tries again
            tracing::warn!(subsys = "cilium-operator", node = name, error = %e, "Unable to update the node's taints and conditions");
        }
    }
}

/// Runs the controller until the sources end (the operator stops).
pub async fn run(client: k8s::kube::Client, config: TaintConfig) {
    let nodes_api: Api<Node> = Api::all(client.clone());
    let mut nodes = ResourceSource::new("Nodes", nodes_api.clone(), watcher::Config::default());
    let mut pods = ResourceSource::new(
        "CiliumPods",
        Api::<Pod>::namespaced(client, &config.namespace),
        watcher::Config::default().labels(&config.labels),
    );
    let mut c = Controller {
        config,
        nodes_api,
        nodes: BTreeMap::new(),
        pods: BTreeMap::new(),
        pod_node: BTreeMap::new(),
        listed: [false, false],
    };
    loop {
        let mut touched = BTreeSet::new();
        tokio::select! {
            ev = nodes.next() => match ev {
                Some(Event::Upsert { key, value }) => {
                    c.nodes.insert(key.clone(), value);
                    touched.insert(key);
                }
                Some(Event::Delete { key }) => {
                    c.nodes.remove(&key);
                }
                Some(Event::Relist) => c.listed[0] = false,
                Some(Event::ListDone) => {
                    c.listed[0] = true;
                    touched.extend(c.nodes.keys().cloned());
                }
                None => return,
            },
            ev = pods.next() => match ev {
                Some(Event::Upsert { key, value }) => {
                    let node = value.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                    if let Some(old) = c.pod_node.insert(key.clone(), node.clone()) {
                        if old != node {
                            if let Some(p) = c.pods.get_mut(&old) {
                                p.remove(&key);
                            }
                            touched.insert(old);
                        }
                    }
                    c.pods.entry(node.clone()).or_default().insert(key, value);
                    touched.insert(node);
                }
                Some(Event::Delete { key }) => {
                    if let Some(node) = c.pod_node.remove(&key) {
                        if let Some(p) = c.pods.get_mut(&node) {
                            p.remove(&key);
                        }
                        touched.insert(node);
                    }
                }
                Some(Event::Relist) => c.listed[1] = false,
                Some(Event::ListDone) => {
                    c.listed[1] = true;
                    touched.extend(c.nodes.keys().cloned());
                }
                None => return,
            },
        }
        // nothing is decided on half a picture
        if c.listed == [true, true] {
            for name in touched {
                c.reconcile(&name).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(set: bool) -> TaintConfig {
        TaintConfig {
            remove: true,
            set,
            condition: true,
            key: "node.cilium.io/agent-not-ready".into(),
            namespace: "kube-system".into(),
            labels: "k8s-app=cilium".into(),
        }
    }

    fn node(tainted: bool, up: bool) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": {"taints": if tainted {
                serde_json::json!([{"key": "node.cilium.io/agent-not-ready", "effect": "NoSchedule"}])
            } else { serde_json::json!([]) }},
            "status": {"conditions": if up {
                serde_json::json!([{"type": "NetworkUnavailable", "status": "False", "reason": "CiliumIsUp"}])
            } else { serde_json::json!([]) }},
        }))
        .unwrap()
    }

    fn pod(ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cilium-x"},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_ready_agent_untaints_its_node_and_a_lost_one_taints_it_when_asked() {
        let running = agent_on([pod(false), pod(true)].iter());
        assert_eq!(running, Agent::Running);
        assert_eq!(
            decide(&config(false), &node(true, false), running),
            Actions {
                remove_taint: true,
                set_condition: true,
                ..Default::default()
            }
        );
        assert_eq!(
            decide(&config(false), &node(false, true), running),
            Actions::default()
        );
        let scheduled = agent_on([pod(false)].iter());
        assert_eq!(
            decide(&config(false), &node(false, true), scheduled),
            Actions::default()
        );
        assert_eq!(
            decide(&config(true), &node(false, true), scheduled),
            Actions {
                add_taint: true,
                ..Default::default()
            }
        );
        assert_eq!(
            decide(&config(true), &node(false, true), Agent::Absent),
            Actions::default()
        );
    }
}
