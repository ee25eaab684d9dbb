//! `cilium-lab up` (two nodes on an underlay with etcd), `exec`,
//! `add-pod`/`del-pod`, a kill -9 of a node's agent, and `down`, in a lab
//! directory of the test's own.

mod common;

use common::{text, Lab};

#[test]
fn up_shows_pods_talking_survives_agent_kill_and_down_removes_everything() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--without-kubernetes"]);
    let out = text(&up);
    assert!(up.status.success(), "{out}");
    assert!(out.contains("booted as the DaemonSet does (config, mount-cgroup, apply-sysctl-overwrites, mount-bpf-fs, clean-cilium-state, install-cni-binaries)"), "{out}");
    assert!(out.contains(" 0% packet loss"), "{out}");
    assert!(out.contains("reply: pong to 10.1.0.2:"), "{out}");
    assert!(
        out.contains("TCP OUT 10.1.0.2:") && out.contains("-> 10.2.0.2:8080"),
        "ct entries shown:\n{out}"
    );
    assert!(
        out.contains("IPAM:                    IPv4: 3/254 allocated from 10.1.0.0/24,"),
        "{out}"
    );
    assert!(out.contains("Network: Tunnel [vxlan]"), "{out}");
    assert!(out.contains("Creating new service with id '1'"), "{out}");
    assert!(out.contains("TCP pod-a -> 10.96.0.20:80 (pod-b)"), "{out}");
    assert!(
        out.contains("1    10.96.0.20:80   ClusterIP      1 => 10.2.0.2:80 (active)"),
        "{out}"
    );
    assert!(
        out.contains("10.96.0.20:80     0.0.0.0:0 (1) (0) [ClusterIP, non-routable]"),
        "{out}"
    );
    assert!(
        out.contains("node2   198.18.0.12    10.2.0.0/24") && out.contains("kvstore"),
        "{out}"
    );
    assert!(
        out.contains("10.2.0.2/32         identity=256 encryptkey=0 tunnelendpoint=198.18.0.12"),
        "{out}"
    );

    assert!(
        out.contains("dropped by the policy (Policy denied)"),
        "{out}"
    );
    assert!(out.contains("Revision: "), "{out}");
    assert!(out.contains("\"name\": \"demo-tcp-only\""), "{out}");

    let add = lab.run(&["add-pod", "web", "--node", "node2", "--labels", "app=web"]);
    assert!(add.status.success(), "{}", text(&add));
    assert!(text(&add).contains("web: 10.2.0.3"), "{}", text(&add));
    // web (app=web) is not selected by the demo's policy
    let pid: i32 = std::fs::read_to_string(lab.dir.path().join("node1/run/cilium.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: the agent of the node this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let ping = lab.run(&[
        "exec", "pod-a", "--", "ping", "-c", "1", "-W", "2", "10.2.0.3",
    ]);
    assert!(
        ping.status.success(),
        "pods talk while the agent is down: {}",
        text(&ping)
    );

    let nowhere = lab.run(&["add-pod", "x", "--node", "node9"]);
    assert!(
        !nowhere.status.success() && text(&nowhere).contains("no running node named \"node9\"")
    );
    let dup = lab.run(&["add-pod", "web"]);
    assert!(!dup.status.success() && text(&dup).contains("already exists"));
    // the killed agent is back (its holder restarts it) and knows web's identity
    let t = std::time::Instant::now();
    loop {
        let ids = lab.run(&["exec", "node1", "--", "cilium", "identity", "list"]);
        if text(&ids).contains("k8s:app=web") {
            break;
        }
        assert!(t.elapsed().as_secs() < 30, "{}", text(&ids));
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let del = lab.run(&["del-pod", "web"]);
    assert!(del.status.success(), "{}", text(&del));

    let again = lab.run(&["up", "--without-kubernetes"]);
    assert!(!again.status.success() && text(&again).contains("already up"));
    let bad = lab.run(&["exec", "nope", "--", "true"]);
    assert!(!bad.status.success() && text(&bad).contains("no pod named \"nope\""));

    let down = lab.run(&["down"]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(!lab.dir.path().exists(), "lab dir removed");
    let after = lab.run(&["exec", "pod-a", "--", "true"]);
    assert!(!after.status.success() && text(&after).contains("not up"));
}
