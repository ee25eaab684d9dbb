//! A node with its agent, CLI and CNI plugin, and the traffic helpers the
//! end-to-end tests and the benchmarks drive it with. Clusters of nodes are
//! [`crate::cluster`]'s; where a node's files are is
//! [`topology::NodeDir`]'s. Binaries are the workspace's (see
//! [`crate::bin`]).

use crate::Sandbox;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use topology::NodeDir;

/// The conf a runtime gives cilium-cni (Cilium's default for chaining mode none).
pub const NETCONF: &str = r#"{"cniVersion":"1.0.0","name":"cilium","type":"cilium-cni"}"#;

/// One node: its agent, CLI and CNI plugin. A single-node test owns its
/// sandbox; a cluster's nodes share one and each lives in its own netns.
pub struct Node {
    pub sb: Option<Sandbox>,
    /// Holds run/, bpffs/ and the pods' netns files (see [`NodeDir`]).
    pub dir: PathBuf,
    /// The node's network namespace; None = the test thread's.
    pub netns: Option<PathBuf>,
    pub name: String,
    pub range: String,
    pub agent_args: Vec<String>,
    /// Keep the agent's log in a file of the node's (see
    /// [`Node::agent_log_tail`]) instead of passing it to the test's
    /// stderr.
    pub quiet: bool,
    /// The node's cgroup v2 subtree: its `cgroup-root`, and where pod
    /// processes run.
    pub cgroup: PathBuf,
    agent: Option<Child>,
}

pub struct CniOutput {
    pub code: i32,
    pub json: serde_json::Value,
}

/// Runs `cmd` inside the network namespace at `netns`.
pub fn in_netns(cmd: &mut Command, netns: &Path) {
    let ns = std::fs::File::open(netns).expect("open node netns");
    // SAFETY: setns only touches the forked child before exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl Node {
    pub fn new(range: &str) -> Self {
        let sb = Sandbox::enter();
        let dir = sb.path().to_owned();
        let name = topology::node_name(1);
        let cgroup = node_cgroup(&sb, &name);
        Self {
            sb: Some(sb),
            dir,
            netns: None,
            name,
            range: range.into(),
            agent_args: Vec::new(),
            quiet: false,
            cgroup,
            agent: None,
        }
    }

    /// A node of a cluster: its netns and dirs under `<sandbox>/<name>`,
    /// a private bpffs mounted in the test's mount namespace.
    pub fn in_cluster(sb: &Sandbox, name: &str, range: &str) -> Self {
        let cgroup = node_cgroup(sb, name);
        let paths = NodeDir::new(sb.path().join(name));
        std::fs::create_dir_all(paths.bpffs()).unwrap();
        std::fs::create_dir_all(paths.run_dir()).unwrap();
        crate::mount_fs(c"bpf", &paths.bpffs()).expect("mount bpffs");
        let netns = paths.node_netns();
        netdev::netns::create(&netns).expect("create node netns");
        Self {
            sb: None,
            dir: paths.dir,
            netns: Some(netns),
            name: name.into(),
            range: range.into(),
            agent_args: Vec::new(),
            quiet: false,
            cgroup,
            agent: None,
        }
    }

    /// The sandbox of a node of its own (`Node::new`), for the test to
    /// start other processes in.
    pub fn sandbox_mut(&mut self) -> &mut Sandbox {
        self.sb.as_mut().expect("a node of its own has the sandbox")
    }

    /// Where the node's files are.
    pub fn paths(&self) -> NodeDir {
        NodeDir::new(&self.dir)
    }

    pub fn bpffs(&self) -> PathBuf {
        self.paths().bpffs()
    }

    pub fn run_dir(&self) -> PathBuf {
        self.paths().run_dir()
    }

    pub fn socket(&self) -> PathBuf {
        self.paths().socket()
    }

    /// A command that runs in the node's network namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        if let Some(ns) = &self.netns {
            in_netns(&mut cmd, ns);
        }
        cmd
    }

    pub fn start_agent(&mut self) {
        self.spawn_agent();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = self.cilium(&["status", "--brief"]);
            if status.status.success() {
                return;
            }
            if Instant::now() >= deadline {
                let exited = self
                    .agent
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                    .map_or_else(|| "still running".to_owned(), |s| s.to_string());
                panic!(
                    "agent of {} did not become ready in 30 s ({exited}); `cilium status --brief`: {}{}\n{}",
                    self.name,
                    String::from_utf8_lossy(&status.stdout).trim(),
                    String::from_utf8_lossy(&status.stderr).trim(),
                    self.agent_log_tail(20),
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts the agent without waiting for it to be ready.
    pub fn spawn_agent(&mut self) {
        let child = self
            .command(crate::bin("cilium-agent"))
            // a test's agent uses Kubernetes only when its args say so,
            // even where the tests themselves run in a pod
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("K8S_NODE_NAME", &self.name)
            .arg(format!("--bpf-root={}", self.bpffs().display()))
            .arg(format!(
                "--state-dir={}",
                self.paths().state_dir().display()
            ))
            .arg(format!("--socket-path={}", self.socket().display()))
            .arg(format!("--ipv4-range={}", self.range))
            .arg(format!("--cgroup-root={}", self.cgroup.display()))
            .arg("--bpf-ct-global-tcp-max=4096")
            .arg("--bpf-ct-global-any-max=4096")
            // as Cilium's chart installs it (the client's rate limits are
            // the chart's for Kubernetes 1.27 and later)
            .arg("--enable-hubble=true")
            .arg("--k8s-client-qps=10")
            .arg("--k8s-client-burst=20")
            .args(&self.agent_args)
            .stdout(Stdio::null())
            .stderr(if self.quiet {
                Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(self.agent_log())
                        .expect("open the agent's log file"),
                )
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("spawn cilium-agent");
        self.agent = Some(child);
    }

    /// Where a quiet node's agent logs.
    fn agent_log(&self) -> PathBuf {
        self.dir.join("agent.log")
    }

    /// The last `lines` lines a quiet node's agent logged, for a bench
    /// or test to show when the agent did not do what it waited for.
    pub fn agent_log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.agent_log()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGKILL, as a crash or an OOM kill would end it.
    pub fn kill_agent(&mut self) {
        let mut child = self.agent.take().expect("agent running");
        child.kill().expect("kill -9 agent");
        child.wait().expect("reap agent");
    }

    pub fn cilium(&self, args: &[&str]) -> Output {
        crate::cilium(&self.socket(), &self.bpffs(), args)
    }

    /// `cilium policy import -` with `text` on stdin.
    pub fn import_policy(&self, text: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(crate::bin("cilium"))
            .arg("-H")
            .arg(format!("unix://{}", self.socket().display()))
            .args(["policy", "import", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cilium");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write policy");
        child.wait_with_output().expect("cilium policy import")
    }

    /// A long-running `cilium <args>` (monitor, observe --follow) on this
    /// node: the process and its output lines as they come.
    pub fn cilium_stream(&self, args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
        use std::io::BufRead;
        let mut child = Command::new(crate::bin("cilium"))
            .arg("-H")
            .arg(format!("unix://{}", self.socket().display()))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cilium");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        (child, rx)
    }

    /// `cilium monitor <args>`, once it is listening.
    pub fn monitor(&self, args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
        let all: Vec<&str> = std::iter::once("monitor")
            .chain(args.iter().copied())
            .collect();
        let (child, rx) = self.cilium_stream(&all);
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("monitor header");
        assert!(first.starts_with("Listening for events on "), "{first}");
        let second = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("monitor header");
        assert_eq!(second, "Press Ctrl-C to quit");
        (child, rx)
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
        let paths = self.paths();
        let _ = std::fs::create_dir_all(paths.netns_dir());
        paths.netns(pod)
    }

    pub fn create_netns(&self, pod: &str) -> PathBuf {
        let p = self.netns(pod);
        netdev::netns::create(&p).expect("create pod netns");
        p
    }

    /// Runs cilium-cni as a runtime would: env, stdin, stdout.
    pub fn cni(&self, env: &[(&str, &str)], stdin: &str) -> CniOutput {
        let mut cmd = self.command(crate::bin("cilium-cni"));
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
        self.cni_pod_labeled(command, pod, netns, "")
    }

    /// `labels` as K8S_POD_LABELS (`app=web,tier=db`).
    pub fn cni_pod_labeled(
        &self,
        command: &str,
        pod: &str,
        netns: &str,
        labels: &str,
    ) -> CniOutput {
        let args = format!(
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID=c-{pod};K8S_POD_LABELS={labels}"
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
        self.add_pod_labeled(pod, "")
    }

    pub fn add_pod_labeled(&self, pod: &str, labels: &str) -> Ipv4Addr {
        let ns = self.create_netns(pod);
        let out = self.cni_pod_labeled("ADD", pod, ns.to_str().unwrap(), labels);
        assert_eq!(out.code, 0, "ADD {pod}: {}", out.json);
        let addr = out.json["ips"][0]["address"]
            .as_str()
            .expect("ips[0].address");
        addr.split('/').next().unwrap().parse().unwrap()
    }

    /// `pod`'s address, adding it (no labels) when it is not there yet.
    pub fn add_pod_if_missing(&self, pod: &str) -> Ipv4Addr {
        if !self.netns(pod).exists() {
            return self.add_pod(pod);
        }
        eth0_ipv4(&self.netns(pod)).expect("pod address")
    }

    /// Runs a command in a pod: its network namespace, the node's cgroup.
    pub fn in_pod(&self, pod: &str, args: &[&str]) -> Output {
        let mut cmd = Command::new(args[0]);
        cmd.args(&args[1..]);
        in_netns(&mut cmd, &self.netns(pod));
        crate::in_cgroup(&mut cmd, &self.cgroup);
        cmd.output()
            .unwrap_or_else(|e| panic!("running {} in pod {pod}: {e}", args[0]))
    }

    pub fn ping(&self, from: &str, to: Ipv4Addr) -> bool {
        self.ping_sized(from, to, 56)
    }

    /// A ping with `size` bytes of data: above the route MTU it travels
    /// as fragments.
    pub fn ping_sized(&self, from: &str, to: Ipv4Addr, size: u16) -> bool {
        let size = size.to_string();
        self.in_pod(
            from,
            &["ping", "-c", "1", "-W", "2", "-s", &size, &to.to_string()],
        )
        .status
        .success()
    }

    pub fn links(&self) -> String {
        String::from_utf8_lossy(
            &self
                .command("ip")
                .args(["-o", "link"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    }

    /// Names of the node's lxc devices (pods' veths and `lxc_health`).
    pub fn lxc_links(&self) -> Vec<String> {
        self.links()
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .filter(|name| name.starts_with("lxc"))
            .map(|name| name.split('@').next().unwrap_or(name).to_owned())
            .collect()
    }
}

/// Whether an endpoint of `cilium endpoint list -o json` is the node's
/// health endpoint.
pub fn is_health_endpoint(ep: &serde_json::Value) -> bool {
    ep["status"]["identity"]["labels"][0] == "reserved:health"
}

/// Whether an endpoint of `cilium endpoint list -o json` is the node's own
/// (the health or the host endpoint), not a pod's.
pub fn is_node_endpoint(ep: &serde_json::Value) -> bool {
    is_health_endpoint(ep) || ep["status"]["identity"]["labels"][0] == "reserved:host"
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.agent.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Ok(entries) = std::fs::read_dir(self.paths().netns_dir()) {
            for e in entries.flatten() {
                let _ = netdev::netns::remove(&e.path());
            }
        }
        if let Some(ns) = &self.netns {
            let _ = netdev::netns::remove(ns);
            let bpffs = std::ffi::CString::new(self.bpffs().to_str().unwrap()).unwrap();
            // SAFETY: valid path; a non-mount just fails.
            unsafe { libc::umount2(bpffs.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// One TCP exchange: a listener in `server`'s netns answers a client in
/// `client`'s netns. Returns the client's local port.
pub fn tcp_exchange(
    server_ns: PathBuf,
    client_ns: PathBuf,
    server_ip: impl Into<std::net::IpAddr>,
    port: u16,
) -> u16 {
    let (sport, reply) = netdev::netns::tcp_request(
        netdev::NetNs::open(&server_ns).expect("server netns"),
        netdev::NetNs::open(&client_ns).expect("client netns"),
        server_ip,
        port,
        b"hello",
    )
    .expect("TCP exchange through the datapath");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("pong to ") && reply.ends_with(": hello"),
        "reply {reply:?}"
    );
    sport
}

/// `<sandbox cgroup>/<node>`, made if missing.
fn node_cgroup(sb: &Sandbox, name: &str) -> PathBuf {
    let dir = sb.cgroup().join(name);
    std::fs::create_dir_all(&dir).expect("creating the node's cgroup");
    dir
}

/// The IPv4 address of `eth0` in the network namespace at `netns`.
pub fn eth0_ipv4(netns: &Path) -> Option<Ipv4Addr> {
    let mut cmd = Command::new("ip");
    cmd.args(["-4", "-o", "addr", "show", "dev", "eth0"]);
    in_netns(&mut cmd, netns);
    let out = cmd.output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|a| a.split('/').next()?.parse().ok())
}

/// GET /metrics from a Prometheus endpoint at ip:port, the whole answer.
pub fn scrape(ip: Ipv4Addr, port: u16) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect((ip, port)).expect("connect to the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .expect("send the scrape");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read the scrape");
    body
}

/// Whether a TCP connection from the netns at `from` to ip:port is
/// accepted within `timeout`.
pub fn tcp_reachable(from: &Path, ip: Ipv4Addr, port: u16, timeout: Duration) -> bool {
    on_thread_in(from, move || {
        Ok(std::net::TcpStream::connect_timeout(&(ip, port).into(), timeout).is_ok())
    })
    .expect("connect from the netns")
}

/// Polls `f` until it holds or `secs` pass.
pub fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `f` on a thread of its own inside the netns at `netns`: sockets
/// it opens belong to that namespace and work from any thread after.
fn on_thread_in<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    let ns = netdev::NetNs::open(netns).map_err(std::io::Error::other)?;
    std::thread::spawn(move || {
        ns.enter().map_err(std::io::Error::other)?;
        f()
    })
    .join()
    .map_err(|_| std::io::Error::other("netns thread panicked"))?
}

/// Opens a TCP connection from inside the netns at `netns`.
pub fn connect_in(
    netns: &Path,
    ip: impl Into<std::net::IpAddr>,
    port: u16,
) -> std::io::Result<std::net::TcpStream> {
    let ip = ip.into();
    on_thread_in(netns, move || {
        let s = std::net::TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(s)
    })
}

/// Sends a UDP datagram from `netns` to ip:port with a connected socket
/// and says whether it was refused (the ICMP port unreachable reached the
/// socket) within 3 s.
pub fn udp_refused_in(netns: &Path, ip: Ipv4Addr, port: u16) -> std::io::Result<bool> {
    on_thread_in(netns, move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
        s.connect((ip, port))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        s.send(b"anyone?")?;
        let mut buf = [0u8; 64];
        match s.recv(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(true),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
            Ok(_) => Ok(false),
        }
    })
}

/// Sends one line and reads one line back.
pub fn exchange(stream: &mut std::net::TcpStream, line: &str) -> std::io::Result<String> {
    use std::io::{BufRead, BufReader};
    stream.write_all(format!("{line}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(stream.try_clone()?).read_line(&mut reply)?;
    Ok(reply.trim_end().to_owned())
}

/// A line server in a pod: every line is answered with `<name>: <line>`,
/// on as many connections as come, until the server is dropped.
pub struct LineServer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LineServer {
    pub fn start(netns: &Path, port: u16, name: &str) -> std::io::Result<Self> {
        Self::start_on(netns, Ipv4Addr::UNSPECIFIED.into(), port, name)
    }

    /// A server listening on `ip` only (`::1` for an IPv6 backend).
    pub fn start_on(
        netns: &Path,
        ip: std::net::IpAddr,
        port: u16,
        name: &str,
    ) -> std::io::Result<Self> {
        use std::io::{BufRead, BufReader};
        use std::sync::atomic::{AtomicBool, Ordering};
        let ns = netdev::NetNs::open(netns).map_err(std::io::Error::other)?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, name) = (stop.clone(), name.to_owned());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let listener = ns
                .enter()
                .map_err(std::io::Error::other)
                .and_then(|()| std::net::TcpListener::bind((ip, port)))
                .and_then(|l| l.set_nonblocking(true).map(|()| l));
            let listener = match listener {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            while !flag.load(Ordering::SeqCst) {
                // Wait for a connection without spinning, but look at the
                // stop flag now and then.
                let mut pfd = libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(&listener),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the listener we own.
                if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                    continue;
                }
                match listener.accept() {
                    Ok((stream, _)) => {
                        let name = name.clone();
                        std::thread::spawn(move || {
                            let _ = stream.set_nonblocking(false);
                            let mut out = match stream.try_clone() {
                                Ok(s) => s,
                                Err(_) => return,
                            };
                            for line in BufReader::new(stream).lines() {
                                let Ok(line) = line else { return };
                                if out
                                    .write_all(format!("{name}: {line}\n").as_bytes())
                                    .is_err()
                                {
                                    return;
                                }
                            }
                        });
                    }
                    Err(_) => continue,
                }
            }
        });
        rx.recv()
            .map_err(|_| std::io::Error::other("server thread died"))??;
        Ok(Self { stop })
    }
}

impl Drop for LineServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
