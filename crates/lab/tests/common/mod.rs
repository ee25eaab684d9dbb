//! A lab of the test's own (its own CILIUM_LAB_DIR), taken down at drop.
#![allow(dead_code)]

pub mod ipv6;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const LAB: &str = env!("CARGO_BIN_EXE_cilium-lab");

pub struct Lab {
    pub dir: tempfile::TempDir,
}

impl Lab {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("lab dir"),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(LAB);
        c.env("CILIUM_LAB_DIR", self.dir.path()).args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run cilium-lab")
    }

    /// Runs and insists on success; the combined output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        text(&out)
    }

    /// `cilium-lab kubectl <args>`, insisting on success; its output.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let mut all = vec!["kubectl"];
        all.extend_from_slice(args);
        self.ok(&all)
    }

    /// Writes `yaml` into the lab dir as `name` and imports it on `node`
    /// (`cilium policy import`; kvstore labs share it with every node).
    pub fn import_policy(&self, node: &str, name: &str, yaml: &str) {
        let file = self.dir.path().join(name);
        std::fs::write(&file, yaml).expect("write the policy");
        let file = file.display().to_string();
        self.ok(&["exec", node, "--", "cilium", "policy", "import", &file]);
    }

    /// Asserts `node`'s `cilium bpf metrics list` counts policy drops in
    /// `direction` (EGRESS or INGRESS).
    pub fn assert_policy_denied(&self, node: &str, direction: &str) {
        let metrics = self.ok(&["exec", node, "--", "cilium", "bpf", "metrics", "list"]);
        assert!(
            metrics
                .lines()
                .any(|l| l.contains("Policy denied") && l.contains(direction)),
            "{node}: {metrics}"
        );
    }

    pub fn node(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("node{n}"))
    }

    /// Node `n`'s agent's pid.
    pub fn agent_pid(&self, n: usize) -> Option<i32> {
        pid_in(&self.node(n).join("run/cilium.pid"))
    }

    /// Waits (30 s at most) until node `n` runs an agent other than `old`
    /// that answers `cilium status`.
    pub fn wait_agent_back(&self, n: usize, old: i32) {
        let node = format!("node{n}");
        let t = Instant::now();
        while self.agent_pid(n).is_none_or(|p| p == old)
            || !self
                .run(&["exec", &node, "--", "cilium", "status", "--brief"])
                .status
                .success()
        {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{node}'s agent never came back"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub fn pid_in(file: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// (id, ipv4, identity) of every endpoint on a node.
pub fn endpoints(lab: &Lab, node: &str) -> Vec<(u64, String, u64)> {
    let out = lab.ok(&[
        "exec", node, "--", "cilium", "endpoint", "list", "-o", "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let mut eps: Vec<(u64, String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["id"].as_u64().unwrap(),
                e["status"]["networking"]["addressing"][0]["ipv4"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["status"]["identity"]["id"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    eps.sort();
    eps
}

/// Polls `f` every 200 ms until it gives a value, for at most `secs`.
pub fn eventually<T>(what: &str, secs: u64, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => panic!("{what} within {secs}s; last: {last}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// `kubectl get pods -l app=web`: (name, IP, node) of each Running pod.
pub fn web_pods(lab: &Lab) -> Vec<(String, String, String)> {
    let out = lab.ok(&[
        "kubectl",
        "get",
        "pods",
        "-l",
        "app=web",
        "--field-selector=status.phase=Running",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}"#,
    ]);
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // a pod being deleted has a fourth field: not counted
            (f.len() == 3).then(|| (f[0].to_owned(), f[1].to_owned(), f[2].to_owned()))
        })
        .collect()
}

/// `kubectl create deployment web` of `replicas` pods serving 8080.
pub fn create_web(lab: &Lab, replicas: usize) {
    lab.ok(&[
        "kubectl",
        "create",
        "deployment",
        "web",
        "--image=cilium-lab/builtin",
        "--port=8080",
        &format!("--replicas={replicas}"),
    ]);
}

/// `kubectl expose deployment web` on port 80 to 8080, with `extra`.
pub fn expose_web(lab: &Lab, extra: &[&str]) {
    let mut args = vec![
        "kubectl",
        "expose",
        "deployment",
        "web",
        "--port=80",
        "--target-port=8080",
    ];
    args.extend_from_slice(extra);
    lab.ok(&args);
}

/// Runs a 10k packets/s UDP stream and an established TCP stream from
/// `source` to `sink` (commands that run a program inside each pod's
/// network namespace) for `secs`, doing `during` 1.5 s in; asserts no UDP
/// datagram was lost and the TCP stream held.
pub fn stream_through(
    lab: &Lab,
    mut sink: Command,
    mut source: Command,
    sink_ip: &str,
    secs: u32,
    during: impl FnOnce(),
) {
    let script = lab.dir.path().join("traffic.py");
    std::fs::write(&script, testsupport::traffic::STREAM_PY).unwrap();
    let mut recv = sink
        .arg("python3")
        .arg(&script)
        .arg("recv")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(recv.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let send = source
        .arg("python3")
        .arg(&script)
        .args(["send", sink_ip, "10000", &secs.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    during();
    let sent = text(&send.wait_with_output().unwrap());
    let mut got = String::new();
    std::io::Read::read_to_string(&mut out, &mut got).unwrap();
    let _ = recv.wait();
    assert!(!sent.contains("tcp failed"), "the TCP stream broke: {sent}");
    let udp: Vec<&str> = got.split_whitespace().collect();
    assert_eq!(udp.first(), Some(&"udp"), "{got}");
    assert_eq!(udp[1], udp[2], "UDP datagrams lost: {got} ({sent})");
}

/// The name of `node`'s agent pod (not one being deleted) on real nodes.
pub fn agent_pod(lab: &Lab, node: &str) -> String {
    agent_pod_now(lab, node).unwrap_or_else(|listed| panic!("no agent pod on {node}: {listed}"))
}

/// `agent_pod`, or what was listed when there is none (between a deleted
/// agent pod and its replacement).
pub fn agent_pod_now(lab: &Lab, node: &str) -> Result<String, String> {
    let out = lab.ok(&[
        "kubectl",
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        "k8s-app=cilium",
        &format!("--field-selector=spec.nodeName={node}"),
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}"#,
    ]);
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() == 1)
        .map(|f| f[0].to_owned())
        .ok_or(out)
}

pub fn pod_field(lab: &Lab, namespace: &str, pod: &str, jsonpath: &str) -> String {
    lab.kubectl(&[
        "get",
        "pod",
        "-n",
        namespace,
        pod,
        "-o",
        &format!("jsonpath={jsonpath}"),
    ])
}

/// The host pid of a process of `pod`'s first container: the one whose
/// cgroup path names the container's id.
pub fn container_pid(lab: &Lab, namespace: &str, pod: &str) -> i32 {
    let id = pod_field(
        lab,
        namespace,
        pod,
        "{.status.containerStatuses[0].containerID}",
    );
    let id = id.trim().trim_start_matches("containerd://").to_owned();
    assert!(!id.is_empty(), "{pod} has no container yet");
    pids_whose_cgroup_names(&id)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no process of {pod}'s container {id}"))
}

/// Host pids whose cgroup path contains `part`.
pub fn pids_whose_cgroup_names(part: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(part))
        })
        .collect()
}

/// The host pid of node `n`'s cilium-agent process.
pub fn agent_process(lab: &Lab, n: usize) -> i32 {
    let pod = agent_pod(lab, &format!("node{n}"));
    container_pid(lab, "kube-system", &pod)
}

/// Where Cilium v1.16.0's own clients are, built by
/// scripts/build-cilium-tools.sh (at once when scripts/test.sh's
/// background build has; else this waits for the script's lock).
pub fn cilium_tools() -> PathBuf {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-cilium-tools.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(out.status.success(), "{}: {}", script.display(), text(&out));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Inode and mtime of every pin under `node`'s bpffs (directories change
/// as the agent pins; the pins themselves must not).
pub fn pins(lab: &Lab, node: &str) -> std::collections::BTreeMap<String, String> {
    let out = lab.ok(&[
        "exec",
        node,
        "--",
        "find",
        "/sys/fs/bpf",
        "!",
        "-type",
        "d",
        "-printf",
        "%p %i %T@\n",
    ]);
    out.lines()
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(p, rest)| (p.to_owned(), rest.to_owned()))
        })
        .collect()
}
