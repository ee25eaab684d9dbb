//! A node in a sandbox: the agent, pods made through the real cilium-cni.
#![allow(dead_code)]

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use testsupport::Sandbox;

pub const CNI: &str = env!("CARGO_BIN_EXE_cilium-cni");
pub const NETCONF: &str = r#"{"cniVersion":"1.0.0","name":"cilium","type":"cilium-cni"}"#;

pub struct Node {
    pub sb: Sandbox,
    pub range: String,
    agent: Option<usize>,
}

pub struct CniOutput {
    pub code: i32,
    pub json: serde_json::Value,
}

impl Node {
    pub fn new(range: &str) -> Self {
        Self {
            sb: Sandbox::enter(),
            range: range.into(),
            agent: None,
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.sb.run_dir().join("cilium.sock")
    }

    pub fn start_agent(&mut self) {
        let child = Command::new(testsupport::bin("cilium-agent"))
            .arg(format!("--bpf-root={}", self.sb.bpffs().display()))
            .arg(format!(
                "--state-dir={}",
                self.sb.run_dir().join("state").display()
            ))
            .arg(format!("--socket-path={}", self.socket().display()))
            .arg(format!("--ipv4-range={}", self.range))
            .arg("--bpf-ct-global-tcp-max=4096")
            .arg("--bpf-ct-global-any-max=4096")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn cilium-agent");
        self.agent = Some(self.sb.adopt(child));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.cilium(&["status", "--brief"]).status.success() {
            assert!(Instant::now() < deadline, "agent did not become ready");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, as a crash or an OOM kill would end it.
    pub fn kill_agent(&mut self) {
        let i = self.agent.take().expect("agent running");
        let child = self.sb.child(i);
        child.kill().expect("kill -9 agent");
        child.wait().expect("reap agent");
    }

    pub fn cilium(&self, args: &[&str]) -> Output {
        testsupport::cilium(&self.socket(), &self.sb.bpffs(), args)
    }

    pub fn cilium_ok(&self, args: &[&str]) -> String {
        let out = self.cilium(args);
        assert!(
            out.status.success(),
            "cilium {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn netns(&self, pod: &str) -> PathBuf {
        self.sb.netns_dir().join(pod)
    }

    pub fn create_netns(&self, pod: &str) -> PathBuf {
        let p = self.netns(pod);
        netdev::netns::create(&p).expect("create pod netns");
        p
    }

    /// Runs cilium-cni as a runtime would: env, stdin, stdout.
    pub fn cni(&self, env: &[(&str, &str)], stdin: &str) -> CniOutput {
        let mut cmd = Command::new(CNI);
        cmd.env_clear()
            .env("CILIUM_SOCK", self.socket())
            .env("CNI_PATH", "/opt/cni/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn cilium-cni");
        // The plugin may refuse its environment before reading stdin.
        if let Err(e) = child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe,
                "writing stdin: {e}"
            );
        }
        let out = child.wait_with_output().expect("cilium-cni output");
        let text = String::from_utf8_lossy(&out.stdout);
        let json = if text.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("cilium-cni printed non-JSON {text:?}: {e}"))
        };
        CniOutput {
            code: out.status.code().unwrap_or(-1),
            json,
        }
    }

    pub fn cni_pod(&self, command: &str, pod: &str, netns: &str) -> CniOutput {
        let args = format!(
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID=c-{pod}"
        );
        self.cni(
            &[
                ("CNI_COMMAND", command),
                ("CNI_CONTAINERID", &format!("c-{pod}")),
                ("CNI_NETNS", netns),
                ("CNI_IFNAME", "eth0"),
                ("CNI_ARGS", &args),
            ],
            NETCONF,
        )
    }

    /// ADDs a pod in a fresh netns; returns its address.
    pub fn add_pod(&self, pod: &str) -> Ipv4Addr {
        let ns = self.create_netns(pod);
        let out = self.cni_pod("ADD", pod, ns.to_str().unwrap());
        assert_eq!(out.code, 0, "ADD {pod}: {}", out.json);
        let addr = out.json["ips"][0]["address"]
            .as_str()
            .expect("ips[0].address");
        addr.split('/').next().unwrap().parse().unwrap()
    }

    pub fn in_pod(&self, pod: &str, args: &[&str]) -> Output {
        Command::new("nsenter")
            .arg(format!("--net={}", self.netns(pod).display()))
            .args(args)
            .output()
            .expect("nsenter")
    }

    pub fn ping(&self, from: &str, to: Ipv4Addr) -> bool {
        self.in_pod(from, &["ping", "-c", "1", "-W", "2", &to.to_string()])
            .status
            .success()
    }

    pub fn links(&self) -> String {
        String::from_utf8_lossy(
            &Command::new("ip")
                .args(["-o", "link"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    }
}

/// One TCP exchange: a listener in `server`'s netns answers a client in
/// `client`'s netns. Returns the client's local port.
pub fn tcp_exchange(server_ns: PathBuf, client_ns: PathBuf, server_ip: Ipv4Addr, port: u16) -> u16 {
    let (sport, reply) =
        netdev::netns::tcp_request(&server_ns, &client_ns, server_ip, port, b"hello")
            .expect("TCP exchange through the datapath");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("pong to ") && reply.ends_with(": hello"),
        "reply {reply:?}"
    );
    sport
}
