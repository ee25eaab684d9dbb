//! A real Kubernetes node: containerd and the real kubelet, in namespaces
//! of their own on this machine, as a kind node is a container.
//!
//! Two processes hold a node. `node-holder` (host side) makes the node's
//! cgroups, unshares a PID namespace and starts the node's init in it,
//! inside those cgroups and a fresh cgroup namespace; it writes the init's
//! pid as the holder pid (its namespaces are the node's) and removes the
//! cgroups once the init is gone. The init (`node-init`, PID 1 of the node)
//! makes the node's network, UTS and mount namespaces and its filesystem
//! (`filesystem`), plugs into the underlay, starts containerd, imports the
//! lab's images, starts kubelet (and, on the baseline's `--cni bridge`
//! nodes, kube-proxy), and supervises them (restarting any that dies,
//! reaping orphaned shims) until SIGTERM. When it exits, the
//! kernel ends every process left in the node.

pub mod cgroups;
pub(crate) mod containerd;
pub(crate) mod filesystem;
mod kube_proxy;
mod kubelet;

use crate::holder::{self, Daemon};
use crate::layout::{self, Holder};
use crate::real::PodNetwork;
use anyhow::{bail, Context};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;
use topology::NodeDir;

static INIT: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_term(sig: libc::c_int) {
    let pid = INIT.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; the node's init is our child.
        unsafe { libc::kill(pid, sig) };
    }
}

/// `node-holder` of a real node: the host side, until its init exits.
pub fn run_holder(l: &NodeDir, index: usize, underlay: i32) -> anyhow::Result<()> {
    let cgroups = cgroups::NodeCgroups::plan(&layout::node_cgroup_name(index))?;
    cgroups.create()?;
    // SAFETY: unshare affects only the children started after it.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        cgroups.remove();
        return Err(std::io::Error::last_os_error()).context("unshare(CLONE_NEWPID) (run as root)");
    }
    let mut cmd = Command::new(layout::sibling("cilium-lab")?);
    cmd.args(["node-init", &index.to_string(), &underlay.to_string()])
        .stdin(Stdio::null());
    let joined = cgroups.clone();
    // SAFETY: only write(2) and unshare(2) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            joined.join()?;
            if libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut init = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            cgroups.remove();
            return Err(e).context("starting the node's init");
        }
    };
    INIT.store(init.id() as i32, Ordering::SeqCst);
    // SAFETY: a handler that only forwards the signal.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            forward_term as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGINT,
            forward_term as *const () as libc::sighandler_t,
        );
    }
    layout::write_atomic(&l.holder_pid_file(), init.id().to_string().as_bytes())?;
    let status = init.wait().context("waiting for the node's init")?;
    cgroups.remove();
    if !status.success() {
        bail!("the node's init exited: {status}");
    }
    Ok(())
}

/// `node-init`: PID 1 of node `index`.
pub fn run_init(l: &NodeDir, index: usize, underlay: i32) -> anyhow::Result<()> {
    let node = topology::node_name(index);
    let node_ip = topology::node_ip(index);
    let bins = kubeplane::bins::NodeBinaries::find()?;
    let lab_bin = layout::bin_dir()?;
    let hierarchies = cgroups::parse_mountinfo(
        &std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?,
    );
    // SAFETY: this process has one thread here.
    if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS | libc::CLONE_NEWUTS) } != 0 {
        return Err(std::io::Error::last_os_error()).context("unshare (run as root)");
    }
    // SAFETY: a valid buffer and length.
    if unsafe { libc::sethostname(node.as_ptr().cast(), node.len()) } != 0 {
        return Err(std::io::Error::last_os_error()).context("setting the node's hostname");
    }
    // while /proc is still the machine's, where the underlay's pid is
    holder::ip(&["link", "set", "lo", "up"])?;
    holder::plug_into_underlay(underlay, &node, node_ip)
        .context("plugging the node into the underlay")?;
    filesystem::build(&filesystem::Backing { dir: l.dir.clone() }, &hierarchies)?;
    let network = crate::real::pod_network();
    // kubelet names the node by the address of the lab's first family
    let kubelet_ip = crate::stack::Stack::running().underlay_address(node_ip);
    prepare_files(&bins, kubelet_ip, network == PodNetwork::Cilium)?;
    if network == PodNetwork::Bridge {
        bridge_network(&bins, index)?;
        let pods = kubeplane::components::Ranges::default().pods;
        let kubeconfig = crate::kube::kube_proxy_kubeconfig();
        layout::write_atomic(
            std::path::Path::new(kube_proxy::CONFIG),
            kube_proxy::config(&node, node_ip, &pods, &kubeconfig).as_bytes(),
        )?;
    }

    let path = format!(
        "{}:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        kubeplane::bins::node_bin_dir().display(),
        lab_bin.display()
    );
    let mut containerd = {
        let (bins, path) = (&bins, &path);
        logged_daemon(
            l,
            "containerd",
            &bins.containerd,
            vec!["--config".into(), containerd::CONFIG.into()],
            path,
        )
        .before_shutdown(move || remove_pods(bins, path))
    };
    containerd.ensure_started()?;
    containerd::wait_ready(&bins.ctr, Duration::from_secs(30))?;
    for archive in crate::images::archives()? {
        containerd::import(&bins.ctr, &archive)?;
    }
    let kubeconfig = crate::kube::node_kubeconfig(&node);
    let kubelet_args = kubelet::args(&node, kubelet_ip, &kubeconfig);
    let mut daemons = vec![logged_daemon(
        l,
        "kubelet",
        &bins.kubelet,
        kubelet_args,
        &path,
    )];
    if network == PodNetwork::Bridge {
        daemons.push(logged_daemon(
            l,
            "kube-proxy",
            &bins.kube_proxy,
            kube_proxy::args(),
            &path,
        ));
    }
    // kubelet goes first when the node stops, then the pods, then containerd
    daemons.push(containerd);
    holder::supervise_as_init(l, daemons, kubelet_healthy)
}

/// One of the node's daemons: `program` with `args` and `path` as its
/// PATH, started (and restarted) by the supervisor through
/// [`spawn_logged`], stopped by `stop-runtime`.
fn logged_daemon<'a>(
    l: &'a NodeDir,
    name: &'static str,
    program: &'a std::path::Path,
    args: Vec<String>,
    path: &'a str,
) -> Daemon<'a> {
    Daemon::new(
        name,
        move || spawn_logged(l, name, Command::new(program).args(&args), path),
        true,
    )
}

/// Starts one of the node's daemons with `path` as its PATH, its output
/// appended to `<node dir>/<name>.log`.
fn spawn_logged(
    l: &NodeDir,
    name: &str,
    cmd: &mut Command,
    path: &str,
) -> anyhow::Result<std::process::Child> {
    cmd.env("PATH", path)
        .stdin(Stdio::null())
        .stdout(holder::append_log(l, name)?)
        .stderr(holder::append_log(l, name)?)
        .spawn()
        .with_context(|| format!("starting {name}"))
}

/// The files containerd and kubelet read, in the node's own /etc and /var.
fn prepare_files(
    bins: &kubeplane::bins::NodeBinaries,
    node_ip: std::net::IpAddr,
    tainted: bool,
) -> anyhow::Result<()> {
    let cp = crate::kube::control_plane(false)?;
    let files = [
        (containerd::CONFIG, containerd::config()),
        (
            kubelet::CONFIG,
            kubelet::config(node_ip, &cp.pki.ca_cert(), tainted),
        ),
        // crictl on the node (`cilium-lab exec node1 -- crictl ps`)
        // talks to this containerd without naming it
        (
            "/etc/crictl.yaml",
            format!(
                "runtime-endpoint: {}\nimage-endpoint: {}\n",
                containerd::ENDPOINT,
                containerd::ENDPOINT
            ),
        ),
        (kubelet::RESOLV_CONF, kubelet::resolv_conf()),
    ];
    for (path, body) in files {
        layout::write_atomic(std::path::Path::new(path), body.as_bytes())?;
    }
    // containerd's CRI brings every sandbox's loopback up with the
    // reference plugin, which a node's CNI package provides
    install_cni_plugins(bins, &["loopback"])
}

/// Copies Debian's reference CNI plugins into the node's /opt/cni/bin.
fn install_cni_plugins(
    bins: &kubeplane::bins::NodeBinaries,
    plugins: &[&str],
) -> anyhow::Result<()> {
    let bin = std::path::Path::new("/opt/cni/bin");
    std::fs::create_dir_all(bin).context("creating /opt/cni/bin")?;
    for plugin in plugins {
        let from = bins.cni_plugins_dir.join(plugin);
        std::fs::copy(&from, bin.join(plugin))
            .with_context(|| format!("copying {}", from.display()))?;
    }
    Ok(())
}

/// The baseline's pod network instead of Cilium: Debian's reference
/// `bridge` plugin (a Linux bridge, the node's gateway on it) with
/// `host-local` addresses from the node's pod CIDR; kubelet finds its
/// configuration and the node turns Ready.
fn bridge_network(bins: &kubeplane::bins::NodeBinaries, index: usize) -> anyhow::Result<()> {
    install_cni_plugins(bins, &["bridge", "host-local"])?;
    let conflist = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "bridge",
        "plugins": [{
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": topology::pod_cidr(index)}]],
                "dataDir": "/var/lib/cni/networks",
            },
        }],
    });
    layout::write_atomic(
        std::path::Path::new("/etc/cni/net.d/10-bridge.conflist"),
        serde_json::to_string_pretty(&conflist)?.as_bytes(),
    )
}

/// Stops and removes every pod sandbox (CNI DEL for each), so no shim
/// outlives containerd.
fn remove_pods(bins: &kubeplane::bins::NodeBinaries, path: &str) {
    let out = Command::new(&bins.crictl)
        .args([
            "--runtime-endpoint",
            containerd::ENDPOINT,
            "--timeout",
            "20s",
            "rmp",
            "--all",
            "--force",
        ])
        .env("PATH", path)
        .output();
    match out {
        Ok(o) if !o.status.success() => eprintln!(
            "node: removing the pods: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("node: running crictl: {e}"),
        Ok(_) => {}
    }
}

/// kubelet's own health endpoint answers.
fn kubelet_healthy() -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &(std::net::Ipv4Addr::LOCALHOST, 10248).into(),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = String::new();
    s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_ok()
        && s.read_to_string(&mut reply).is_ok()
        && reply.ends_with("ok")
}
