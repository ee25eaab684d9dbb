//! A real node's life (issue 30), on one 2-node lab of real kubelets and
//! containerd, in order:
//! - `kubectl rollout restart ds/cilium` under a 10k packets/s UDP stream
//!   and an established TCP stream between pods on the two nodes: nothing
//!   lost, every endpoint restored, a pod made after works;
//! - the agent's process killed: kubelet restarts its container;
//! - an agent pod deleted: the DaemonSet's new pod restores the endpoints;
//! - kubelet and containerd stopped and started on a node: its pods keep
//!   address and connectivity throughout, and pods deleted meanwhile are
//!   cleaned up, one with its network namespace, one without (CNI DEL with
//!   an empty netns);
//! - 50 pods made and deleted leave no veth, IP or endpoint behind;
//! - the DaemonSet's securityContext and hostPath mounts as written.
//!
//! The streams run in the pods' network namespaces (entered from the host
//! with nsenter: the images carry no Python), so the datapath sees the
//! pods' own traffic.

mod common;

use common::{
    agent_pod, agent_pod_now, agent_process, container_pid, eventually, pids_whose_cgroup_names,
    pod_field, stream_through, text, Lab,
};
use std::collections::BTreeSet;
use std::process::Command;

const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.56";

/// Applies pods running agnhost with `args` on the given nodes.
fn create_pods(lab: &Lab, pods: &[(&str, &str, &[&str])], app: &str) {
    let items: Vec<serde_json::Value> = pods
        .iter()
        .map(|(name, node, args)| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": app}},
                "spec": {
                    "nodeName": node,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": AGNHOST, "args": args}],
                },
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let file = lab.dir.path().join(format!("{app}.json"));
    std::fs::write(&file, list.to_string()).unwrap();
    lab.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    let mut wait = vec![
        "wait".to_owned(),
        "--for=condition=Ready".into(),
        "--timeout=90s".into(),
    ];
    wait.extend(pods.iter().map(|p| format!("pod/{}", p.0)));
    lab.kubectl(&wait.iter().map(String::as_str).collect::<Vec<_>>());
}

fn wait_agents_ready(lab: &Lab) {
    lab.kubectl(&[
        "rollout",
        "status",
        "-n",
        "kube-system",
        "ds/cilium",
        "--timeout=120s",
    ]);
    for node in ["node1", "node2"] {
        eventually(&format!("{node}'s agent answering"), 60, || {
            let out = lab.run(&["exec", node, "--", "cilium", "status", "--brief"]);
            out.status.success().then_some(()).ok_or_else(|| text(&out))
        });
    }
}

/// (id, ipv4) of every endpoint of a node but the health endpoint, which
/// the agent makes anew when it starts.
fn endpoints(lab: &Lab, node: &str) -> BTreeSet<(u64, String)> {
    common::endpoints(lab, node)
        .into_iter()
        .filter(|(_, _, identity)| *identity != 4)
        .map(|(id, ip, _)| (id, ip))
        .collect()
}

/// The node's IPAM allocations (`cilium status -o json`).
fn allocations(lab: &Lab, node: &str) -> BTreeSet<String> {
    let out = lab.ok(&["exec", node, "--", "cilium", "status", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["ipam"]["allocations"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The node's pod-side veths (lxc..., not the health endpoint's).
fn veths(lab: &Lab, node: &str) -> BTreeSet<String> {
    let out = lab.ok(&["exec", node, "--", "ip", "-o", "link", "show"]);
    out.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap().to_owned())
        .filter(|n| n.starts_with("lxc") && n != "lxc_health")
        .collect()
}

/// What a node holds for its pods.
#[derive(Debug, PartialEq)]
struct NodeState {
    endpoints: BTreeSet<(u64, String)>,
    allocations: BTreeSet<String>,
    veths: BTreeSet<String>,
}

fn node_state(lab: &Lab, node: &str) -> NodeState {
    NodeState {
        endpoints: endpoints(lab, node),
        allocations: allocations(lab, node),
        veths: veths(lab, node),
    }
}

/// The two ends of the streams, by host pid of a process in each pod.
struct Stream {
    source: i32,
    sink: i32,
    sink_ip: String,
}

impl Stream {
    fn through(&self, lab: &Lab, secs: u32, during: impl FnOnce()) {
        let in_pod = |pid: i32| {
            let mut c = Command::new("nsenter");
            c.args(["-t", &pid.to_string(), "-n"]);
            c
        };
        let mut took = std::time::Duration::ZERO;
        let timed = || {
            let t = std::time::Instant::now();
            during();
            took = t.elapsed();
        };
        stream_through(
            lab,
            in_pod(self.sink),
            in_pod(self.source),
            &self.sink_ip,
            secs,
            timed,
        );
        // what it went through must have ended inside the stream
        assert!(
            took.as_secs() + 3 < u64::from(secs),
            "what ran under the stream outlasted it ({took:?})"
        );
    }
}

#[test]
fn a_real_node_lives_through_restarts_and_cleans_up() {
    let lab = Lab::new();
    lab.ok(&["up", "--nodes", "2"]);
    create_pods(
        &lab,
        &[
            ("source", "node1", &["pause"]),
            ("sink", "node2", &["pause"]),
        ],
        "stream",
    );
    let stream = Stream {
        source: container_pid(&lab, "default", "source"),
        sink: container_pid(&lab, "default", "sink"),
        sink_ip: pod_field(&lab, "default", "sink", "{.status.podIP}"),
    };
    let before = [endpoints(&lab, "node1"), endpoints(&lab, "node2")];

    // a rolling restart of every agent, under the streams
    stream.through(&lab, 40, || {
        lab.kubectl(&["rollout", "restart", "-n", "kube-system", "ds/cilium"]);
        wait_agents_ready(&lab);
    });
    let after = [endpoints(&lab, "node1"), endpoints(&lab, "node2")];
    assert_eq!(before, after, "endpoints not restored by the new agents");
    create_pods(
        &lab,
        &[("late", "node1", &["netexec", "--http-port=8080"])],
        "late",
    );
    let late_ip = pod_field(&lab, "default", "late", "{.status.podIP}");
    let reply = lab.kubectl(&[
        "exec",
        "sink",
        "--",
        "curl",
        "-s",
        "--max-time",
        "5",
        &format!("http://{late_ip}:8080/hostname"),
    ]);
    assert_eq!(reply.trim(), "late");

    // the agent's process killed: kubelet starts its container again
    let agent = agent_pod(&lab, "node1");
    let pid = agent_process(&lab, 1);
    // SAFETY: a process of this test's lab.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    eventually("the killed agent's container restarted", 60, || {
        let restarts = pod_field(
            &lab,
            "kube-system",
            &agent,
            r#"{.status.containerStatuses[?(@.name=="cilium-agent")].restartCount}"#,
        );
        (restarts.trim() == "1").then_some(()).ok_or(restarts)
    });
    wait_agents_ready(&lab);
    let node1 = endpoints(&lab, "node1");

    // an agent pod deleted: the DaemonSet's new one restores the endpoints
    let old = agent_pod(&lab, "node2");
    let node2 = endpoints(&lab, "node2");
    lab.kubectl(&["delete", "pod", "-n", "kube-system", &old, "--wait=false"]);
    eventually("a new agent pod on node2", 60, || {
        let new = agent_pod_now(&lab, "node2")?;
        (new != old).then_some(()).ok_or(new)
    });
    wait_agents_ready(&lab);
    assert_eq!(endpoints(&lab, "node2"), node2);
    assert_eq!(endpoints(&lab, "node1"), node1);

    // kubelet and containerd stopped and started on node1
    create_pods(
        &lab,
        &[
            ("gone1", "node1", &["pause"]),
            ("gone2", "node1", &["pause"]),
        ],
        "gone",
    );
    let clean = node_state(&lab, "node1");
    let source_ip = pod_field(&lab, "default", "source", "{.status.podIP}");
    let gone2_uid = pod_field(&lab, "default", "gone2", "{.metadata.uid}");
    let sandbox = lab.ok(&[
        "exec",
        "node1",
        "--",
        "crictl",
        "pods",
        "-q",
        "--label",
        "io.kubernetes.pod.name=gone2",
    ]);
    let inspect = lab.ok(&["exec", "node1", "--", "crictl", "inspectp", sandbox.trim()]);
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let netns = inspect["info"]["runtimeSpec"]["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["type"] == "network")
        .and_then(|n| n["path"].as_str())
        .expect("gone2's netns path")
        .to_owned();
    lab.ok(&["stop-runtime", "node1"]);
    lab.kubectl(&[
        "delete",
        "pod",
        "gone1",
        "gone2",
        "--force",
        "--grace-period=0",
    ]);
    // gone2 as after a reboot: its processes and its netns gone
    for pid in pids_whose_cgroup_names(&format!("pod{gone2_uid}")) {
        // SAFETY: processes of this test's lab.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    lab.ok(&["exec", "node1", "--", "umount", &netns]);
    lab.ok(&["exec", "node1", "--", "rm", &netns]);
    stream.through(&lab, 8, || {});
    lab.ok(&["start-runtime", "node1"]);
    let mut wanted = clean;
    eventually("gone1 and gone2 cleaned up on node1", 90, || {
        let now = node_state(&lab, "node1");
        let left = |all: &BTreeSet<String>, now: &BTreeSet<String>| all.len() - now.len();
        (left(&wanted.allocations, &now.allocations) == 2
            && left(&wanted.veths, &now.veths) == 2
            && wanted.endpoints.len() - now.endpoints.len() == 2)
            .then_some(())
            .ok_or(format!("{now:#?}"))
    });
    wanted = node_state(&lab, "node1");
    assert_eq!(
        pod_field(&lab, "default", "source", "{.status.podIP}"),
        source_ip
    );
    assert_eq!(
        pod_field(
            &lab,
            "default",
            "source",
            "{.status.containerStatuses[0].restartCount}"
        ),
        "0"
    );
    stream.through(&lab, 5, || {});

    // 50 pods made and deleted leave nothing behind
    let clean = [wanted, node_state(&lab, "node2")];
    lab.kubectl(&[
        "create",
        "deployment",
        "many",
        &format!("--image={AGNHOST}"),
        "--replicas=50",
        "--",
        "/agnhost",
        "pause",
    ]);
    lab.kubectl(&["rollout", "status", "deployment/many", "--timeout=180s"]);
    lab.kubectl(&["delete", "deployment", "many"]);
    eventually("the 50 pods gone", 120, || {
        let left = lab.kubectl(&["get", "pods", "-l", "app=many", "-o", "name"]);
        left.trim().is_empty().then_some(()).ok_or(left)
    });
    eventually("nodes as before the 50 pods", 60, || {
        let now = [node_state(&lab, "node1"), node_state(&lab, "node2")];
        (now == clean)
            .then_some(())
            .ok_or(format!("{now:#?}\nwanted {clean:#?}"))
    });

    // the agent's securityContext as the DaemonSet writes it
    let ds: serde_json::Value = serde_json::from_str(&lab.kubectl(&[
        "get",
        "ds",
        "-n",
        "kube-system",
        "cilium",
        "-o",
        "json",
    ]))
    .unwrap();
    let spec = &ds["spec"]["template"]["spec"];
    let agent_spec = &spec["containers"][0];
    let wanted_caps = agent_spec["securityContext"]["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| capability_bit(c.as_str().unwrap()))
        .fold(0u64, |all, bit| all | 1 << bit);
    let agent = agent_pod(&lab, "node1");
    let in_agent = |file: &str| {
        lab.kubectl(&[
            "exec",
            "-n",
            "kube-system",
            &agent,
            "-c",
            "cilium-agent",
            "--",
            "cat",
            file,
        ])
    };
    let status = in_agent("/proc/1/status");
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(cap_eff, wanted_caps, "the agent's effective capabilities");
    assert!(agent_spec["securityContext"]["privileged"].is_null());
    let privileged: Vec<&str> = spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["securityContext"]["privileged"] == true)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(privileged, ["mount-bpf-fs"]);
    let mountinfo = |out: String| -> Vec<(String, String)> {
        // "... <mount point> <options> ... - <fstype> <source> ..."
        out.lines()
            .filter_map(|l| {
                let point = l.split_whitespace().nth(4)?;
                let fstype = l.split(" - ").nth(1)?.split_whitespace().next()?;
                Some((point.to_owned(), fstype.to_owned()))
            })
            .collect()
    };
    let agent_mounts = mountinfo(in_agent("/proc/self/mountinfo"));
    // as the kernel names them: /var/run and /lib are symlinks in the image
    for (point, fstype) in [
        ("/sys/fs/bpf", Some("bpf")),
        ("/host/proc/sys/net", Some("proc")),
        ("/host/proc/sys/kernel", Some("proc")),
        ("/run/cilium", None),
        ("/host/etc/cni/net.d", None),
        ("/usr/lib/modules", None),
        ("/run/xtables.lock", None),
    ] {
        assert!(
            agent_mounts
                .iter()
                .any(|(p, t)| p == point && fstype.is_none_or(|f| f == t)),
            "{point} ({fstype:?}) not mounted in the agent container: {agent_mounts:?}"
        );
    }
    // what the init containers mounted on the node itself
    let on_node = mountinfo(lab.ok(&["exec", "node1", "--", "cat", "/proc/self/mountinfo"]));
    for (point, fstype) in [("/sys/fs/bpf", "bpf"), ("/run/cilium/cgroupv2", "cgroup2")] {
        assert!(
            on_node.iter().any(|(p, t)| p == point && t == fstype),
            "{point} ({fstype}) not mounted on node1: {on_node:?}"
        );
    }
}

/// A capability's bit, by its Kubernetes name (linux/capability.h).
fn capability_bit(name: &str) -> u32 {
    const NAMES: [&str; 41] = [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ];
    NAMES
        .iter()
        .position(|n| *n == name)
        .unwrap_or_else(|| panic!("unknown capability {name}")) as u32
}
