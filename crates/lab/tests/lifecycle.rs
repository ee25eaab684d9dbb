//! A node's life as the DaemonSet gives it (issue 9): booted through
//! build-config, cilium-mount, sysctlfix, the bpffs mount, cleanup (asked
//! for here) and install-cni before the agent; both agents killed with -9
//! and restarted under a 10k packets/s UDP stream and an established TCP
//! stream between pods on two nodes, with no packet lost and the same
//! endpoints, identities, service and policy afterwards; then `cilium
//! cleanup` refused while the agent runs, and with it stopped, `cleanup
//! --all-state -f` leaves none of our devices, pins or files.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{endpoints, text, Lab};

const ALLOW_TRAFFIC: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: lifecycle-stream
spec:
  endpointSelector:
    matchLabels: {app: demo}
  ingress:
  - fromEndpoints:
    - matchLabels: {app: demo}
    toPorts:
    - ports:
      - {port: "9999", protocol: UDP}
"#;

fn agent_pid(lab: &Lab, n: usize) -> i32 {
    std::fs::read_to_string(lab.node(n).join("run/cilium.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn wait_ready(lab: &Lab, node: &str, old_pid: i32, n: usize) {
    let t = Instant::now();
    loop {
        let pid = std::fs::read_to_string(lab.node(n).join("run/cilium.pid")).ok();
        let restarted = pid.is_some_and(|p| p.trim() != old_pid.to_string());
        if restarted
            && lab
                .run(&["exec", node, "--", "cilium", "status", "--brief"])
                .status
                .success()
        {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{node}'s agent never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn listing(lab: &Lab, node: &str, cmd: &str) -> String {
    lab.ok(&["exec", node, "--", "sh", "-c", cmd])
}

#[test]
fn boots_as_the_daemonset_restarts_without_loss_and_cleans_up() {
    let lab = Lab::new();
    let up = lab.ok(&[
        "up",
        "--without-kubernetes",
        "--set",
        "clean-cilium-bpf-state=true",
    ]);
    let boot = std::fs::read_to_string(lab.node(1).join("boot.log")).unwrap();
    let order: Vec<&str> = boot
        .lines()
        .filter_map(|l| l.strip_prefix("==> init container "))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "config",
            "mount-cgroup",
            "apply-sysctl-overwrites",
            "mount-bpf-fs",
            "clean-cilium-state",
            "install-cni-binaries"
        ],
        "{boot}"
    );
    assert!(
        boot.contains("Mounted cgroupv2 filesystem at /run/cilium/cgroupv2"),
        "{boot}"
    );
    assert!(
        boot.contains("wrote ") && boot.contains("/opt/cni/bin/cilium-cni"),
        "{boot}"
    );
    let built = lab.node(1).join("tmp/cilium/config-map");
    assert_eq!(
        std::fs::read_to_string(built.join("ipv4-range")).unwrap(),
        "10.1.0.0/24"
    );
    assert_eq!(
        std::fs::read_to_string(built.join("clean-cilium-bpf-state")).unwrap(),
        "true"
    );
    assert!(lab
        .node(1)
        .join("etc/cni/net.d/05-cilium.conflist")
        .exists());
    let status = listing(&lab, "node1", "cilium status");
    assert!(
        status.contains("CNI Config file:         successfully wrote CNI configuration file to ")
            && status.contains("05-cilium.conflist"),
        "{status}"
    );
    assert!(up.contains("dropped by the policy"), "{up}");

    lab.import_policy("node1", "allow-stream.yaml", ALLOW_TRAFFIC);
    let script = lab.dir.path().join("traffic.py");
    std::fs::write(&script, testsupport::traffic::STREAM_PY).unwrap();
    let before = (endpoints(&lab, "node1"), endpoints(&lab, "node2"));

    // The stream: pod-a (node1) to pod-b (node2), 10k/s for 6 s.
    let mut recv = lab
        .cmd(&[
            "exec",
            "pod-b",
            "--",
            "python3",
            script.to_str().unwrap(),
            "recv",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut recv_out = std::io::BufReader::new(recv.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut recv_out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let send = lab
        .cmd(&[
            "exec",
            "pod-a",
            "--",
            "python3",
            script.to_str().unwrap(),
            "send",
            "10.2.0.2",
            "10000",
            "6",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let (pid1, pid2) = (agent_pid(&lab, 1), agent_pid(&lab, 2));
    for pid in [pid1, pid2] {
        // SAFETY: the agents of the nodes this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_ready(&lab, "node1", pid1, 1);
    wait_ready(&lab, "node2", pid2, 2);
    let sent = text(&send.wait_with_output().unwrap());
    let mut got = String::new();
    std::io::Read::read_to_string(&mut recv_out, &mut got).unwrap();
    let _ = recv.wait();
    let sent_n: u64 = sent.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(sent_n > 50_000, "{sent}");
    assert!(!sent.contains("tcp failed"), "the TCP stream broke: {sent}");
    let udp: Vec<&str> = got.split_whitespace().collect();
    assert_eq!(udp[0], "udp", "{got}");
    assert_eq!(
        udp[1], udp[2],
        "UDP datagrams lost across kill -9 and restart: {got} ({sent})"
    );

    // Same endpoints and identities; service and policy still in force.
    assert_eq!((endpoints(&lab, "node1"), endpoints(&lab, "node2")), before);
    let svc = lab.ok(&["exec", "node1", "--", "cilium", "service", "list"]);
    assert!(
        svc.contains("10.96.0.20:80   ClusterIP      1 => 10.2.0.2:80 (active)"),
        "{svc}"
    );
    let ping = lab.run(&[
        "exec", "pod-a", "--", "ping", "-c", "1", "-W", "1", "10.2.0.2",
    ]);
    assert!(!ping.status.success(), "the demo policy still drops ping");

    // Cleanup: refused while the agent runs, then complete.
    let paths = [
        "--run-dir",
        &lab.node(1).join("run").display().to_string(),
        "--lib-dir",
        &lab.node(1).join("lib").display().to_string(),
        "--cni-conf-dir",
        &lab.node(1).join("etc/cni/net.d").display().to_string(),
    ]
    .map(str::to_owned);
    let cleanup: Vec<&str> = [
        "exec",
        "node1",
        "--",
        "cilium",
        "cleanup",
        "--all-state",
        "-f",
    ]
    .into_iter()
    .chain(paths.iter().map(String::as_str))
    .collect();
    let refused = lab.run(&cleanup);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("pid file"), "{}", text(&refused));
    let nat = |lab: &Lab| listing(lab, "node1", "iptables -t nat -S");
    assert!(
        nat(&lab).contains("cilium masquerade non-cluster"),
        "{}",
        nat(&lab)
    );
    lab.ok(&["stop-agent", "node1"]);
    lab.ok(&cleanup);
    assert!(!nat(&lab).contains("CILIUM_POST_nat"), "{}", nat(&lab));
    let links = listing(&lab, "node1", "ip -o link show | cut -d: -f2");
    assert!(
        !links.contains("cilium_") && !links.contains("lxc"),
        "devices left: {links}"
    );
    let pins = listing(&lab, "node1", "find /sys/fs/bpf -name 'cilium*'");
    assert!(pins.trim().is_empty(), "pins left: {pins}");
    let mounts = listing(&lab, "node1", "cat /proc/self/mountinfo");
    assert!(!mounts.contains("/run/cilium/cgroupv2"), "{mounts}");
    for gone in ["run", "lib", "etc/cni/net.d/05-cilium.conflist"] {
        assert!(!Path::new(&lab.node(1).join(gone)).exists(), "{gone} left");
    }
}
