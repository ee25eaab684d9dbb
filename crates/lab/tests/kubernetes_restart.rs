//! Restarts in Kubernetes mode under a 10k packets/s UDP stream and an
//! established TCP stream between pods on two nodes: both agents killed
//! with -9 lose no packet (a restarted agent changes no map before its
//! watches have listed), and neither does the API server killed and
//! restarted; a Service created after that works on every node.

mod common;

use common::{eventually, pid_in, text, Lab};

/// The streams' two ends, placed by the scheduler on the two nodes.
const PODS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
  {"apiVersion":"v1","kind":"Pod","metadata":{"name":"source","labels":{"app":"stream"}},
   "spec":{"nodeSelector":{"kubernetes.io/hostname":"node1"},"containers":[{"name":"c","image":"cilium-lab/builtin"}]}},
  {"apiVersion":"v1","kind":"Pod","metadata":{"name":"sink","labels":{"app":"stream","role":"sink"}},
   "spec":{"nodeSelector":{"kubernetes.io/hostname":"node2"},"containers":[{"name":"c","image":"cilium-lab/builtin"}]}}]}"#;

/// The kube-apiserver the control-plane holder of this lab runs.
fn apiserver_pid(lab: &Lab) -> i32 {
    let holder = pid_in(&lab.dir.path().join("control-plane/holder.pid")).expect("holder pid");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "<pid> (<comm>) <state> <ppid> ..."
            let Some((comm, rest)) = stat.split_once(") ") else {
                return false;
            };
            comm.ends_with("(kube-apiserver")
                && rest.split_whitespace().nth(1) == Some(&holder.to_string())
        })
        .expect("the lab's kube-apiserver")
}

/// The streams from source to sink through `during`.
fn stream_through(lab: &Lab, sink_ip: &str, secs: u32, during: impl FnOnce()) {
    let sink = lab.cmd(&["exec", "sink", "--"]);
    let source = lab.cmd(&["exec", "source", "--"]);
    common::stream_through(lab, sink, source, sink_ip, secs, during);
}

#[test]
fn agents_and_the_api_server_restart_under_traffic_without_loss() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--hollow-nodes"]);
    assert!(up.status.success(), "{}", text(&up));
    let file = lab.dir.path().join("pods.json");
    std::fs::write(&file, PODS).unwrap();
    lab.ok(&["kubectl", "apply", "-f", file.to_str().unwrap()]);
    lab.ok(&[
        "kubectl",
        "wait",
        "--for=condition=Ready",
        "pod/source",
        "pod/sink",
        "--timeout=60s",
    ]);
    let sink_ip = lab
        .ok(&[
            "kubectl",
            "get",
            "pod",
            "sink",
            "-o",
            "jsonpath={.status.podIP}",
        ])
        .trim()
        .to_owned();
    eventually("source reaches sink", 30, || {
        let ping = lab.run(&[
            "exec", "source", "--", "ping", "-c", "1", "-W", "1", &sink_ip,
        ]);
        ping.status.success().then_some(()).ok_or(text(&ping))
    });

    // both agents killed with -9 under the streams
    stream_through(&lab, &sink_ip, 6, || {
        let pids: Vec<i32> = (1..=2)
            .map(|n| lab.agent_pid(n).expect("agent pid"))
            .collect();
        for pid in &pids {
            // SAFETY: the agents of the nodes this test started.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        for (n, pid) in pids.iter().enumerate() {
            lab.wait_agent_back(n + 1, *pid);
        }
    });

    // the API server killed; its supervisor starts it again
    stream_through(&lab, &sink_ip, 8, || {
        let pid = apiserver_pid(&lab);
        // SAFETY: the lab's API server, a child of the holder this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        eventually("the API server back", 60, || {
            let out = lab.run(&["kubectl", "get", "--raw", "/readyz"]);
            out.status.success().then_some(()).ok_or(text(&out))
        });
    });

    // a Service made afterwards reaches every node
    lab.ok(&[
        "kubectl",
        "expose",
        "pod",
        "sink",
        "--name=after",
        "--port=81",
        "--target-port=8080",
        "--protocol=TCP",
    ]);
    let vip = lab
        .ok(&[
            "kubectl",
            "get",
            "service",
            "after",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .trim()
        .to_owned();
    for node in ["node1", "node2"] {
        eventually(&format!("the Service on {node}"), 60, || {
            let list = lab.ok(&["exec", node, "--", "cilium", "service", "list"]);
            list.lines()
                .any(|l| l.contains(&format!("{vip}:81")) && l.contains(&format!("{sink_ip}:8080")))
                .then_some(())
                .ok_or(list)
        });
    }
}
