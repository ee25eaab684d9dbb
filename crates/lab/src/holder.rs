//! The processes that are the lab's machines: each owns its namespaces and
//! runs its daemons as a supervisor would (a killed agent is started
//! again, as the kubelet restarts a DaemonSet pod), until SIGTERM. A node
//! runs cilium-agent (and, with Kubernetes, the kubelet stand-in); the
//! underlay (the switch all nodes plug into) runs etcd; the control plane
//! kube-apiserver, the controller manager and the scheduler.

use crate::layout::{self, Holder};
use anyhow::Context;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use topology::NodeDir;

static STOP: AtomicBool = AtomicBool::new(false);
/// SIGUSR1: stop the pausable daemons and do not start them again...
static PAUSE: AtomicBool = AtomicBool::new(false);
/// ... until SIGUSR2.
static RESUME: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_pause(_: libc::c_int) {
    PAUSE.store(true, Ordering::SeqCst);
}

extern "C" fn on_resume(_: libc::c_int) {
    RESUME.store(true, Ordering::SeqCst);
}

/// The file a holder writes once its pausable daemons are stopped on
/// request, and removes once they run again.
pub(crate) fn paused_file(l: &NodeDir) -> std::path::PathBuf {
    l.dir.join("paused")
}

/// SIGTERM, then SIGKILL after 10 s.
fn terminate(child: &mut std::process::Child) -> anyhow::Result<()> {
    // SAFETY: signalling a process this holder started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}

fn mount(src: &str, target: &str, fstype: &str, flags: libc::c_ulong) -> anyhow::Result<()> {
    crate::node::filesystem::mount(src, std::path::Path::new(target), fstype, flags, "")
}

pub(crate) fn ip(args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new("ip")
        .args(args)
        .status()
        .context("running ip")?;
    anyhow::ensure!(st.success(), "ip {} failed", args.join(" "));
    Ok(())
}

/// Builds node `index`'s world in fresh namespaces, plugged into the
/// underlay's bridge with `eth0`.
fn build_node(index: usize, underlay: i32) -> anyhow::Result<()> {
    // SAFETY: called while this process has a single thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error()).context("unshare (run as root)");
    }
    mount("none", "/", "", libc::MS_REC | libc::MS_PRIVATE)?;
    mount("tmpfs", "/run", "tmpfs", 0)?;
    std::fs::create_dir_all("/run/cilium").context("creating /run/cilium")?;
    ip(&["link", "set", "lo", "up"])?;
    plug_into_underlay(
        underlay,
        &topology::node_name(index),
        topology::node_ip(index),
    )
    .context("plugging the node into the underlay")
}

/// Plugs this process's network namespace into the bridge of the underlay
/// whose holder is `underlay`, as `eth0` with `addr`; `port` names the
/// bridge's end.
pub(crate) fn plug_into_underlay(
    underlay: i32,
    port: &str,
    addr: std::net::Ipv4Addr,
) -> anyhow::Result<()> {
    let own_ns = netdev::NetNs::current()?;
    let switch_ns = netdev::NetNs::open(std::path::Path::new(&format!("/proc/{underlay}/ns/net")))?;
    block_on(async {
        let switch = netdev::Netlink::connect_in(&switch_ns)?;
        let bridge = switch.require_link(topology::BRIDGE).await?;
        let own = netdev::Netlink::connect()?;
        topology::underlay::plug(&switch, &bridge, &own, &own_ns, port, addr).await
    })
}

/// Where a node holder sees the host's cgroup v2 tree (its own mount).
const HOST_CGROUP: &str = "/run/cilium/cgroup-host";

/// A cgroup of the node's own under the host's cgroup v2 root: the root
/// of the node's cgroup namespace, so what the mount-cgroup step mounts at
/// `layout::NODE_CGROUP` is the node's whole cgroup tree, as a machine's
/// is a real agent's.
fn make_node_cgroup(index: usize) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(HOST_CGROUP).context("creating the cgroup2 mount point")?;
    mount("cgroup2", HOST_CGROUP, "cgroup2", 0)?;
    let own = std::path::Path::new(HOST_CGROUP).join(layout::node_cgroup_name(index));
    std::fs::create_dir_all(&own).with_context(|| format!("creating cgroup {}", own.display()))?;
    Ok(own)
}

/// Removes the node's cgroup once its processes are gone.
fn remove_node_cgroup(index: usize) {
    let target = std::ffi::CString::new(layout::NODE_CGROUP).expect("no NUL");
    // SAFETY: a valid C string; our own mount namespace.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    let own = std::path::Path::new(HOST_CGROUP).join(layout::node_cgroup_name(index));
    crate::node::cgroups::remove_dir(&own, Duration::from_secs(5));
}

/// Builds the outside host: a network namespace plugged into the
/// underlay's bridge at OUTSIDE_IP, as a machine beyond the nodes would be.
fn build_outside(underlay: i32) -> anyhow::Result<()> {
    // SAFETY: called while this process has a single thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("unshare (run as root)");
    }
    ip(&["link", "set", "lo", "up"])?;
    plug_into_underlay(underlay, layout::OUTSIDE, topology::OUTSIDE_IP)
        .context("plugging the outside host into the underlay")
}

/// The outside host, its server supervised, until SIGTERM.
pub fn run_outside(l: &NodeDir, underlay: i32) -> anyhow::Result<()> {
    build_outside(underlay)?;
    let server = || {
        Command::new(layout::sibling("cilium-lab")?)
            .arg("outside-server")
            .stdin(Stdio::null())
            .stdout(append_log(l, "server")?)
            .stderr(append_log(l, "server")?)
            .spawn()
            .context("starting the outside host's server")
    };
    let answers = || {
        std::net::TcpStream::connect_timeout(
            &(topology::OUTSIDE_IP, crate::outside::PORT).into(),
            Duration::from_millis(200),
        )
        .is_ok()
    };
    supervise(l, vec![Daemon::new("server", server, false)], answers)
}

/// Builds the switch: a namespace with the bridge every node plugs into.
fn build_underlay() -> anyhow::Result<()> {
    // SAFETY: called while this process has a single thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("unshare (run as root)");
    }
    ip(&["link", "set", "lo", "up"])?;
    block_on(async {
        let nl = netdev::Netlink::connect()?;
        topology::underlay::bridge(&nl).await.map(drop)
    })
    .context("creating the underlay bridge")
}

/// Runs netlink work on a runtime that is gone (with its threads) when it
/// returns, so the process may still change namespaces afterwards.
fn block_on<T>(
    f: impl std::future::Future<Output = Result<T, netdev::Error>>,
) -> anyhow::Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    Ok(rt.block_on(f)?)
}

pub(crate) fn append_log(l: &NodeDir, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(l.log(name))
        .with_context(|| format!("opening {name} log"))
}

/// The agent container: everything it is told comes from the
/// configuration the config init container built.
fn start_agent(l: &NodeDir, index: usize) -> anyhow::Result<std::process::Child> {
    let log = append_log(l, "agent")?;
    Command::new(layout::sibling("cilium-agent")?)
        .env("K8S_NODE_NAME", topology::node_name(index))
        // the lab's agents are in kvstore mode even when the lab runs in a pod
        .env_remove("KUBERNETES_SERVICE_HOST")
        .arg(format!("--config-dir={}", l.config_dir().display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting cilium-agent")
}

fn agent_ready() -> bool {
    layout::sibling("cilium")
        .ok()
        .and_then(|c| Command::new(c).args(["status", "--brief"]).output().ok())
        .is_some_and(|o| o.status.success())
}

fn start_etcd(l: &NodeDir) -> anyhow::Result<std::process::Child> {
    let log = append_log(l, "etcd")?;
    let client = format!("{},http://127.0.0.1:2379", topology::etcd_url());
    Command::new("etcd")
        .arg("--data-dir")
        .arg(layout::root().join("etcd"))
        .args([
            "--name=lab",
            &format!("--listen-client-urls={client}"),
            &format!("--advertise-client-urls={}", topology::etcd_url()),
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--initial-advertise-peer-urls=http://127.0.0.1:2380",
            "--initial-cluster=lab=http://127.0.0.1:2380",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting etcd (apt install etcd-server)")
}

fn etcd_ready() -> bool {
    std::net::TcpStream::connect_timeout(
        &(std::net::Ipv4Addr::LOCALHOST, 2379).into(),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// The kubelet stand-in, in the node's namespaces like the agent.
fn start_kubelet(l: &NodeDir, index: usize) -> anyhow::Result<std::process::Child> {
    let log = append_log(l, "kubelet")?;
    Command::new(layout::sibling("cilium-lab")?)
        .args(["kubelet", &index.to_string()])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting the kubelet")
}

/// Node `index`, plugged into the underlay whose holder is `underlay`. In
/// a lab with Kubernetes (the node has kubelet credentials) the kubelet
/// starts first, as on a real node: it registers the Node the agent then
/// waits for, and reports it NotReady until the agent wrote the CNI
/// configuration.
pub fn run_node(l: &NodeDir, index: usize, underlay: i32) -> anyhow::Result<()> {
    build_node(index, underlay)?;
    let own = make_node_cgroup(index)?;
    let mut daemons = Vec::new();
    let kubernetes = crate::kube::node_kubeconfig(&topology::node_name(index)).exists();
    if kubernetes {
        let mut kubelet = Daemon::new("kubelet", || start_kubelet(l, index), false);
        if let Err(e) = kubelet.ensure_started() {
            remove_node_cgroup(index);
            return Err(e);
        }
        daemons.push(kubelet);
    }
    if let Err(e) = crate::boot::init_containers(l, index, &own, kubernetes) {
        for d in &mut daemons {
            let _ = d.stop();
        }
        remove_node_cgroup(index);
        return Err(e);
    }
    daemons.push(Daemon::new("cilium-agent", || start_agent(l, index), true));
    // Ready as kubelet sees a node: the agent answers and has written its
    // CNI configuration.
    let ready = || agent_ready() && l.cni_conf_file().exists();
    let supervised = supervise(l, daemons, ready);
    remove_node_cgroup(index);
    supervised
}

/// The Kubernetes control plane, in the underlay's network namespace:
/// the API server, controller manager and scheduler each supervised
/// (restarted when they die, like static pods). The two clients wait for
/// the API server themselves, but exit when it answers before its
/// bootstrap RBAC is in place: a restart is what gets them past that.
pub fn run_control_plane(l: &NodeDir, underlay: i32) -> anyhow::Result<()> {
    let ns = std::fs::File::open(format!("/proc/{underlay}/ns/net"))
        .context("opening the underlay's network namespace")?;
    // SAFETY: a valid namespace fd; this process has one thread here.
    if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("entering the underlay");
    }
    let cp = crate::kube::control_plane(false)?;
    let component = |name: &'static str, cmd: fn(&kubeplane::ControlPlane) -> Command| {
        let cp = &cp;
        Daemon::new(
            name,
            move || {
                cmd(cp)
                    .stdin(Stdio::null())
                    .spawn()
                    .with_context(|| format!("starting {name}"))
            },
            false,
        )
    };
    let daemons = vec![
        component("kube-apiserver", kubeplane::ControlPlane::apiserver),
        component(
            "kube-controller-manager",
            kubeplane::ControlPlane::controller_manager,
        ),
        component("kube-scheduler", kubeplane::ControlPlane::scheduler),
    ];
    supervise(l, daemons, || crate::kube::ready(&cp))
}

/// The operator's replicas, as its Deployment runs them on the host
/// network: in the underlay, beside the API server, each with the
/// cluster's ConfigMap as its config dir and the operator's
/// ServiceAccount token; each replica its own health and metrics ports,
/// as the Deployment's pods would have on their own nodes.
pub fn run_operators(l: &NodeDir, underlay: i32) -> anyhow::Result<()> {
    let ns = std::fs::File::open(format!("/proc/{underlay}/ns/net"))
        .context("opening the underlay's network namespace")?;
    // SAFETY: a valid namespace fd; this process has one thread here.
    if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("entering the underlay");
    }
    let bin = layout::bin_dir()?.join("cilium-operator");
    let kubeconfig = crate::kube::operator_kubeconfig()?;
    let config_dir = crate::boot::config_map_dir();
    const NAMES: [&str; crate::kube::OPERATOR_REPLICAS] =
        ["cilium-operator-1", "cilium-operator-2"];
    let daemons = NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (bin, kubeconfig, config_dir) = (&bin, &kubeconfig, &config_dir);
            Daemon::new(
                name,
                move || {
                    let log = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(l.log(name))?;
                    Command::new(bin)
                        .arg(format!("--config-dir={}", config_dir.display()))
                        .arg(format!("--k8s-kubeconfig-path={}", kubeconfig.display()))
                        .arg(format!("--operator-api-serve-addr=127.0.0.1:{}", 9234 + i))
                        .arg(format!("--operator-prometheus-serve-addr=:{}", 9963 + i))
                        .env("CILIUM_K8S_NAMESPACE", "kube-system")
                        .env("K8S_NODE_NAME", crate::kube::MACHINE)
                        .stdin(Stdio::null())
                        .stdout(log.try_clone()?)
                        .stderr(log)
                        .spawn()
                        .with_context(|| format!("starting {name}"))
                },
                false,
            )
        })
        .collect();
    supervise(l, daemons, || true)
}

pub fn run_underlay(l: &NodeDir) -> anyhow::Result<()> {
    build_underlay()?;
    supervise(
        l,
        vec![Daemon::new("etcd", || start_etcd(l), false)],
        etcd_ready,
    )
}

/// A process a holder keeps running.
pub(crate) struct Daemon<'a> {
    name: &'static str,
    start: Box<dyn FnMut() -> anyhow::Result<std::process::Child> + 'a>,
    child: Option<std::process::Child>,
    /// When it may be started again after it died.
    restart_at: Instant,
    /// Whether SIGUSR1 (`cilium-lab stop-agent`, `stop-runtime`) stops it
    /// until SIGUSR2.
    pausable: bool,
    paused: bool,
    /// What must happen before it stops with its machine (containerd: its
    /// pods go first); not when it is paused.
    before_shutdown: Option<Box<dyn FnMut() + 'a>>,
}

impl<'a> Daemon<'a> {
    pub(crate) fn new(
        name: &'static str,
        start: impl FnMut() -> anyhow::Result<std::process::Child> + 'a,
        pausable: bool,
    ) -> Self {
        Self {
            name,
            start: Box::new(start),
            child: None,
            restart_at: Instant::now(),
            pausable,
            paused: false,
            before_shutdown: None,
        }
    }

    /// Runs `f` before it stops with its machine.
    pub(crate) fn before_shutdown(mut self, f: impl FnMut() + 'a) -> Self {
        self.before_shutdown = Some(Box::new(f));
        self
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    pub(crate) fn ensure_started(&mut self) -> anyhow::Result<()> {
        if self.child.is_none() && !self.paused && Instant::now() >= self.restart_at {
            let child = (self.start)()?;
            eprintln!("holder: started {} pid {}", self.name, child.id());
            self.child = Some(child);
        }
        Ok(())
    }

    /// Notices an exit; it is started again half a second later.
    fn reap(&mut self) -> anyhow::Result<()> {
        if let Some(child) = &mut self.child {
            if let Some(status) = child.try_wait()? {
                eprintln!("holder: {} exited ({status}); restarting", self.name);
                self.child = None;
                self.restart_at = Instant::now() + Duration::from_millis(500);
            }
        }
        Ok(())
    }

    fn shut_down(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            if let Some(f) = &mut self.before_shutdown {
                f();
            }
        }
        self.stop()
    }

    fn stop(&mut self) -> anyhow::Result<()> {
        match self.child.take() {
            Some(mut child) => terminate(&mut child),
            None => Ok(()),
        }
    }
}

/// Runs `daemons` until SIGTERM, restarting each that dies, and stops them
/// in order; the ready file appears once all run and `ready` first holds.
fn supervise(l: &NodeDir, daemons: Vec<Daemon>, ready: impl Fn() -> bool) -> anyhow::Result<()> {
    layout::write_atomic(
        &l.holder_pid_file(),
        std::process::id().to_string().as_bytes(),
    )?;
    supervise_loop(l, daemons, ready, false)
}

/// `supervise` as the init of a PID namespace (a real node's), whose pid
/// file its parent writes: processes orphaned in the namespace (the
/// containerd shims, which detach from containerd) become its children,
/// and it reaps them.
pub(crate) fn supervise_as_init(
    l: &NodeDir,
    daemons: Vec<Daemon>,
    ready: impl Fn() -> bool,
) -> anyhow::Result<()> {
    supervise_loop(l, daemons, ready, true)
}

/// Reaps exited children that are none of `daemons` (theirs are left for
/// their `Child`).
fn reap_orphans(daemons: &[Daemon]) {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: peeks (WNOWAIT) at any exited child without blocking.
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid is set by waitid (0 when no child has exited).
        let pid = unsafe { info.si_pid() };
        if rc != 0 || pid == 0 || daemons.iter().any(|d| d.pid() == Some(pid)) {
            return;
        }
        // SAFETY: reaping the orphan found above.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

fn supervise_loop(
    l: &NodeDir,
    mut daemons: Vec<Daemon>,
    ready: impl Fn() -> bool,
    init: bool,
) -> anyhow::Result<()> {
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR1, on_pause as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR2, on_resume as *const () as libc::sighandler_t);
    }
    let mut announced = false;
    let started = Instant::now();
    let mut run = || -> anyhow::Result<()> {
        while !STOP.load(Ordering::SeqCst) {
            if PAUSE.swap(false, Ordering::SeqCst) {
                for d in daemons.iter_mut().filter(|d| d.pausable && !d.paused) {
                    d.stop()?;
                    d.paused = true;
                    eprintln!("holder: {} stopped on request", d.name);
                }
                layout::write_atomic(&paused_file(l), b"paused")?;
            }
            if RESUME.swap(false, Ordering::SeqCst) {
                // last first: what the others need (containerd) before them
                for d in daemons.iter_mut().rev().filter(|d| d.paused) {
                    d.paused = false;
                    d.ensure_started()?;
                    eprintln!("holder: {} started again on request", d.name);
                }
                let _ = std::fs::remove_file(paused_file(l));
            }
            for d in daemons.iter_mut() {
                d.reap()?;
                d.ensure_started()?;
            }
            if init {
                reap_orphans(&daemons);
            }
            let all_up = daemons.iter().all(|d| d.child.is_some());
            if !announced && all_up && started.elapsed() > Duration::from_millis(50) && ready() {
                layout::write_atomic(&l.ready_file(), b"ready")?;
                announced = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    };
    let result = run();
    // in order: the kubelet goes before the agent its CNI calls need
    for d in &mut daemons {
        d.shut_down()?;
    }
    result
}
