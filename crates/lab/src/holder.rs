//! The process that is the node: it owns the node's namespaces and runs the
//! agent as a supervisor would (a killed agent is started again, as the
//! kubelet restarts a DaemonSet pod), until SIGTERM.

use crate::layout::{self, Layout};
use anyhow::Context;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn mount(src: &str, target: &str, fstype: &str, flags: libc::c_ulong) -> anyhow::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src_c, target_c, fs_c) = (c(src), c(target), c(fstype));
    // SAFETY: valid C strings.
    let rc = unsafe {
        libc::mount(
            src_c.as_ptr(),
            target_c.as_ptr(),
            if fstype.is_empty() {
                std::ptr::null()
            } else {
                fs_c.as_ptr()
            },
            flags,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mounting {fstype} on {target}"));
    }
    Ok(())
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new("ip")
        .args(args)
        .status()
        .context("running ip")?;
    anyhow::ensure!(st.success(), "ip {} failed", args.join(" "));
    Ok(())
}

/// Builds the node's world in fresh namespaces.
fn build_node() -> anyhow::Result<()> {
    // SAFETY: called while this process has a single thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error()).context("unshare (run as root)");
    }
    mount("none", "/", "", libc::MS_REC | libc::MS_PRIVATE)?;
    mount("bpffs", "/sys/fs/bpf", "bpf", 0)?;
    mount("tmpfs", "/run", "tmpfs", 0)?;
    std::fs::create_dir_all("/run/cilium").context("creating /run/cilium")?;
    ip(&["link", "set", "lo", "up"])?;
    // The underlay device; until nodes are wired together its peer is a
    // stub in the same namespace (this kernel has no dummy driver).
    ip(&[
        "link",
        "add",
        "eth0",
        "type",
        "veth",
        "peer",
        "name",
        "eth0-stub",
    ])?;
    ip(&["addr", "add", layout::NODE_IP, "dev", "eth0"])?;
    ip(&["link", "set", "eth0-stub", "up"])?;
    ip(&["link", "set", "eth0", "up"])?;
    Ok(())
}

fn start_agent(l: &Layout) -> anyhow::Result<std::process::Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(l.log("agent"))
        .context("opening agent log")?;
    Command::new(layout::sibling("cilium-agent")?)
        .arg(format!("--state-dir={}", l.state_dir().display()))
        .arg(format!("--ipv4-range={}", layout::POD_CIDR))
        .args([
            "--bpf-ct-global-tcp-max=65536",
            "--bpf-ct-global-any-max=65536",
        ])
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

pub fn run(l: &Layout) -> anyhow::Result<()> {
    build_node()?;
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
    }
    layout::write_atomic(
        &l.holder_pid_file(),
        std::process::id().to_string().as_bytes(),
    )?;
    let mut announced = false;
    while !STOP.load(Ordering::SeqCst) {
        let mut agent = start_agent(l)?;
        eprintln!("holder: started cilium-agent pid {}", agent.id());
        let started = Instant::now();
        loop {
            if STOP.load(Ordering::SeqCst) {
                // SAFETY: signalling the agent this process started.
                unsafe { libc::kill(agent.id() as i32, libc::SIGTERM) };
                let deadline = Instant::now() + Duration::from_secs(10);
                while agent.try_wait()?.is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = agent.kill();
                let _ = agent.wait();
                return Ok(());
            }
            if let Some(status) = agent.try_wait()? {
                eprintln!("holder: cilium-agent exited ({status}); restarting");
                break;
            }
            if !announced && started.elapsed() > Duration::from_millis(50) && agent_ready() {
                layout::write_atomic(&l.ready_file(), b"ready")?;
                announced = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}
