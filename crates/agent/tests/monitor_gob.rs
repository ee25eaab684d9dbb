//! `monitor1_2.sock` read by an independent decoder: Go's own
//! `encoding/gob`, in the small program under `tests/gobdecode`, reading
//! the socket as Cilium 1.16's `cilium-dbg monitor` does. The agent's
//! monitor runs in-process on sockets in a temp dir (no rings: no kernel
//! needed); the test publishes ring samples with known bytes, a lost
//! count and an agent notification, and compares what Go decoded with
//! what was sent. Needs `go` (1.22 or later) on PATH, and fails saying so
//! when it is not there.

use agent::monitor::{self, AgentNotify, Hub};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, ErrorKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Builds tests/gobdecode into `dir` with the local Go toolchain, offline.
fn build_decoder(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gobdecode");
    let bin = dir.join("gobdecode");
    let mut go = Command::new("go");
    go.args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "");
    let home_usable = std::env::var_os("HOME").is_some_and(|h| Path::new(&h).is_dir());
    if std::env::var_os("GOCACHE").is_none() && !home_usable {
        go.env("GOCACHE", dir.join("gocache"));
    }
    let out = match go.output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "`go` is not on PATH: this test needs Go 1.22 or later to build its \
             independent gob decoder ({}); install it from https://go.dev/dl",
            src.display()
        ),
        Err(e) => panic!("running `go build` in {}: {e}", src.display()),
    };
    assert!(
        out.status.success(),
        "go build in {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// The agent's monitor serving in a temp dir, on a runtime of its own.
struct Served {
    hub: Arc<Hub>,
    socket: PathBuf,
    tasks: controlplane::tasks::Tasks,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    fn start(dir: &Path) -> Self {
        let hub = Arc::new(Hub::default());
        let socket = monitor::socket_path(&dir.join("cilium.sock"));
        let tasks = controlplane::tasks::Tasks::default();
        let thread = std::thread::spawn({
            let (hub, socket, bpf) = (Arc::clone(&hub), socket.clone(), dir.join("no-bpffs"));
            let tasks = tasks.clone();
            move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async move {
                    monitor::serve(hub, bpf, socket, tasks)
                        .await
                        .expect("monitor serves");
                });
            }
        });
        let json = monitor::json_socket_path(&socket);
        wait_for("the monitor's sockets", || socket.exists() && json.exists());
        Self {
            hub,
            socket,
            tasks,
            thread: Some(thread),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.tasks.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn go_reads_the_monitor_socket_as_cilium_dbg_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let decoder = build_decoder(dir.path());
    let served = Served::start(dir.path());

    // Samples as a ring would hold them: a trace notification's first
    // bytes, a drop on CPU 0 (zero CPU: left out of the message), and one
    // long enough for multi-byte lengths.
    let trace = [4u8, 0, 0x2a, 0, 0x10, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef];
    let drop = [1u8, 133, 7, 0];
    let long: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let policy = json!({"labels": ["k8s:app=web"], "revision": 7, "rule_count": 1});
    let sent = 5;

    let mut child = Command::new(&decoder)
        .arg("-n")
        .arg(sent.to_string())
        .arg(&served.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gobdecode");
    wait_for("gobdecode to connect", || {
        served.hub.monitor_listeners() == 1
    });

    served.hub.sample(1, &trace);
    served.hub.lost_samples(3, 300);
    served.hub.agent(AgentNotify::PolicyUpdated, policy.clone());
    served.hub.sample(0, &drop);
    served.hub.sample(2, &long);

    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("gobdecode status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("gobdecode did not read {sent} payloads in 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("gobdecode output");
    assert!(
        out.status.success(),
        "gobdecode: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoded: Vec<Value> = BufReader::new(&out.stdout[..])
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("gobdecode prints JSON"))
        .collect();

    let agent = &decoded[2];
    let data = agent["data"].as_str().expect("data");
    assert!(data.starts_with("82"), "MessageTypeAgent first: {data}");
    let expected = vec![
        json!({"type": 9, "cpu": 1, "lost": 0, "data": hex(&trace)}),
        json!({"type": 2, "cpu": 3, "lost": 300, "data": ""}),
        json!({"type": 9, "cpu": 0, "lost": 0, "data": data,
               "agent": {"type": 5, "text": policy.to_string()}}),
        json!({"type": 9, "cpu": 0, "lost": 0, "data": hex(&drop)}),
        json!({"type": 9, "cpu": 2, "lost": 0, "data": hex(&long)}),
    ];
    assert_eq!(decoded, expected);
}

#[test]
fn our_cli_reads_json_lines_on_a_socket_of_its_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let served = Served::start(dir.path());
    let json_socket = monitor::json_socket_path(&served.socket);
    assert_eq!(
        json_socket.file_name().and_then(|n| n.to_str()),
        Some("cilium-rs-monitor.sock")
    );
    let conn = std::os::unix::net::UnixStream::connect(&json_socket).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut lines = BufReader::new(conn).lines();
    let hello: Value =
        serde_json::from_str(&lines.next().expect("hello").expect("read")).expect("JSON");
    assert_eq!(hello, json!({"type": "hello", "cpus": 0}));
    served
        .hub
        .agent(AgentNotify::EndpointCreated, json!({"id": 12}));
    let ev: Value =
        serde_json::from_str(&lines.next().expect("event").expect("read")).expect("JSON");
    assert_eq!(ev["type"], "agent");
    assert_eq!(ev["message"], r#"{"id":12}"#);
}
