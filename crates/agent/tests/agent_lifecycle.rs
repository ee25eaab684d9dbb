//! The agent started for real in its own namespaces: status, health probe,
//! pinned maps, kill -9 and restart with map contents intact, bad input.

use abi::ct::{CtEntry, Ipv4CtTuple};
use abi::{Be16, Be32};
use datapath::PinnedMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use testsupport::Sandbox;

const AGENT: &str = env!("CARGO_BIN_EXE_cilium-agent");

struct Node {
    sb: Sandbox,
}

impl Node {
    fn new() -> Self {
        Self {
            sb: Sandbox::enter(),
        }
    }

    fn socket(&self) -> PathBuf {
        self.sb.run_dir().join("cilium.sock")
    }

    fn agent_args(&self) -> Vec<String> {
        vec![
            format!("--bpf-root={}", self.sb.bpffs().display()),
            format!("--state-dir={}", self.sb.run_dir().join("state").display()),
            format!("--socket-path={}", self.socket().display()),
            "--ipv4-range=10.0.7.0/24".into(),
            "--bpf-ct-global-tcp-max=4096".into(),
            "--bpf-ct-global-any-max=4096".into(),
            "--enable-hubble=true".into(),
        ]
    }

    fn spawn_agent(&mut self, extra: &[&str]) -> usize {
        let child = Command::new(AGENT)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .args(self.agent_args())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn cilium-agent");
        self.sb.adopt(child)
    }

    fn cilium(&self, args: &[&str]) -> Output {
        testsupport::cilium(&self.socket(), &self.sb.bpffs(), args)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.cilium(&["status", "--brief"]);
            if out.status.success() {
                assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "agent not ready: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn api(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        let resp = api::Client::new(self.socket())
            .raw(method, path, &[], body.map(str::as_bytes))
            .expect("api call");
        (
            resp.status,
            String::from_utf8_lossy(&resp.body).into_owned(),
        )
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn health_code() -> String {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "brief: true",
            "http://127.0.0.1:9879/healthz",
        ])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sample_ct() -> (Ipv4CtTuple, CtEntry) {
    let key = Ipv4CtTuple {
        daddr: Be32::from(Ipv4Addr::new(10, 0, 7, 5)),
        saddr: Be32::from(Ipv4Addr::new(10, 0, 7, 6)),
        dport: Be16::new(80),
        sport: Be16::new(34567),
        nexthdr: 6,
        flags: 0,
    };
    (
        key,
        CtEntry {
            // alive: conntrack GC runs at start
            lifetime: datapath::ctmap::now_secs() + 3600,
            packets: 3,
            bytes: 180,
            src_sec_id: 1234,
            ..Default::default()
        },
    )
}

#[test]
fn agent_serves_status_and_health_and_keeps_maps_across_kill_9() {
    let mut node = Node::new();
    let first = node.spawn_agent(&[]);
    node.wait_ready();

    assert_eq!(health_code(), "200");
    let globals = node.sb.bpffs().join("tc/globals");
    for name in [
        "cilium_lxc",
        "cilium_ipcache",
        "cilium_ct4_global",
        "cilium_ct_any4_global",
        "cilium_metrics",
        "cilium_runtime_config",
        "cilium_events",
    ] {
        assert!(
            globals.join(name).exists(),
            "{name} pinned in the test's own bpffs"
        );
    }
    let status = node.cilium(&["status"]);
    assert!(status.status.success(), "{}", text(&status));
    let s = text(&status);
    assert!(s.contains("KVStore:                 Ok   Disabled"), "{s}");
    assert!(
        s.contains(&format!(
            "Cilium:                  Ok   {}",
            api::version_string()
        )),
        "{s}"
    );
    assert!(s.contains("Controller Status:"), "{s}");
    // the monitor reads a ring per CPU, and observe keeps flows
    assert!(
        s.contains("NodeMonitor:             Listening for events on ")
            && s.contains("CPUs with 64x"),
        "{s}"
    );
    assert!(
        s.contains("Hubble:                  Ok   Current/Max Flows: "),
        "{s}"
    );
    assert!(
        s.contains("CNI Config file:         CNI configuration management disabled"),
        "{s}"
    );
    let json = node.cilium(&["status", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("status json");
    assert_eq!(v["cilium"]["state"], "Ok");

    // The agent registered its router IP as a host address.
    let eps = text(&node.cilium(&["bpf", "endpoint", "list"]));
    assert!(
        eps.contains("10.0.7.1") && eps.contains("(localhost)"),
        "{eps}"
    );
    let ipc = text(&node.cilium(&["bpf", "ipcache", "list"]));
    assert!(
        ipc.contains("10.0.7.1/32") && ipc.contains("identity=1 "),
        "{ipc}"
    );
    assert!(
        ipc.contains("0.0.0.0/0") && ipc.contains("identity=2 "),
        "{ipc}"
    );

    let (key, entry) = sample_ct();
    PinnedMap::open_global(&node.sb.bpffs(), abi::maps::CT4_GLOBAL)
        .unwrap()
        .put(&key, &entry)
        .unwrap();

    // kill -9: nothing is cleaned up, pins stay, the next agent takes over.
    node.sb.child(first).kill().unwrap();
    node.sb.child(first).wait().unwrap();
    let second = node.spawn_agent(&[]);
    node.wait_ready();
    let ct = PinnedMap::open_global(&node.sb.bpffs(), abi::maps::CT4_GLOBAL).unwrap();
    assert_eq!(
        ct.get::<_, CtEntry>(&key).unwrap(),
        Some(entry),
        "CT entry survived the restart"
    );
    let listing = text(&node.cilium(&["bpf", "ct", "list", "global"]));
    assert!(
        listing.contains("TCP OUT 10.0.7.5:34567 -> 10.0.7.6:80")
            && listing.contains("SourceSecurityID=1234"),
        "{listing}"
    );

    // SIGTERM: clean exit, socket and pid file gone, maps kept.
    let pid = node.sb.child(second).id() as i32;
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let code = node.sb.child(second).wait().unwrap();
    assert!(code.success(), "agent exit status {code:?}");
    assert!(!node.socket().exists(), "API socket removed");
    assert!(
        !node.sb.run_dir().join("cilium.pid").exists(),
        "pid file removed"
    );
    assert!(
        globals.join("cilium_ct4_global").exists(),
        "maps left in place"
    );
    let out = node.cilium(&["status", "--brief"]);
    assert!(!out.status.success(), "status fails when the agent is down");
}

#[test]
fn bad_config_is_refused_before_any_state_is_written() {
    let node = Node::new();
    let run = |extra: &[&str]| {
        Command::new(AGENT)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .args(node.agent_args())
            .args(extra)
            .output()
            .expect("run cilium-agent")
    };
    for (args, needle) in [
        (vec!["--no-such-option=1"], "no-such-option"),
        (vec!["--mtu=huge"], "mtu"),
        (vec!["--ipv4-range=10.0.0.0/33"], "ipv4-range"),
        (vec!["--enable-policy=sometimes"], "enable-policy"),
    ] {
        let out = run(&args);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
    }
    let dir = node.sb.config_dir();
    std::fs::write(dir.join("routing-mode"), "teleport\n").unwrap();
    let out = run(&["--config-dir", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("routing-mode") && text(&out).contains("teleport"),
        "{}",
        text(&out)
    );

    assert!(!node.sb.bpffs().join("tc").exists(), "nothing pinned");
    assert!(
        !node.sb.run_dir().join("cilium.pid").exists(),
        "no pid file"
    );
}

#[test]
fn bad_api_requests_get_4xx_and_leave_config_unchanged() {
    let mut node = Node::new();
    node.spawn_agent(&[]);
    node.wait_ready();
    let (code, before) = node.api("GET", "/config", None);
    assert_eq!(code, 200);

    let (code, body) = node.api(
        "PATCH",
        "/config",
        Some(r#"{"options":{"Debug":"Enabled","NoSuchOption":"Enabled"}}"#),
    );
    assert_eq!(code, 400);
    assert!(body.contains("NoSuchOption"), "{body}");
    let (code, body) = node.api(
        "PATCH",
        "/config",
        Some(r#"{"options":{"Debug":"perhaps"}}"#),
    );
    assert_eq!(code, 400);
    assert!(body.contains("Debug") && body.contains("perhaps"), "{body}");
    let (code, body) = node.api("PATCH", "/config", Some(r#"{"optoins":{}}"#));
    assert_eq!(code, 400);
    assert!(body.contains("optoins"), "{body}");
    let (code, _) = node.api("PATCH", "/config", Some("{not json"));
    assert_eq!(code, 400);
    assert_eq!(
        node.api("GET", "/config", None).1,
        before,
        "failed PATCHes changed nothing"
    );
    let (code, _) = node.api("GET", "/no/such/path", None);
    assert_eq!(code, 404);

    // A valid change through the CLI is applied and visible.
    let out = node.cilium(&["config", "Debug=Enabled", "policy-enforcement=always"]);
    assert!(out.status.success(), "{}", text(&out));
    let cfg = text(&node.cilium(&["config"]));
    assert!(
        cfg.contains("Debug") && cfg.contains("Enabled") && cfg.contains("always"),
        "{cfg}"
    );
    let out = node.cilium(&["config", "Debug"]);
    assert!(!out.status.success(), "malformed option is refused");
    let out = node.cilium(&["status", "--no-such-flag"]);
    assert!(!out.status.success());
}
