//! cilium-lab: runs Cilium nodes as namespaces on this machine.
//!
//! `cilium-lab up` boots one node in a private network + mount namespace with
//! its own bpffs, starts its agent, prints what `cilium status` and the BPF
//! maps say, then stops the agent; the namespaces vanish with the process,
//! so nothing is left on the host. Pods, more nodes and a long-lived
//! `up`/`down` arrive with the pod-networking and multi-node work.

use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating cilium-lab")?;
    let p = exe.parent().context("binary dir")?.join(name);
    if !p.exists() {
        bail!(
            "{} not found next to cilium-lab (build the workspace first)",
            p.display()
        );
    }
    Ok(p)
}

fn up() -> anyhow::Result<()> {
    let agent = sibling("cilium-agent")?;
    let cilium = sibling("cilium")?;
    let mut sb = testsupport::Sandbox::try_enter()
        .context("creating the node's namespaces (run as root)")?;
    let socket = sb.run_dir().join("cilium.sock");
    println!(
        "==> node1: private netns + mount ns, bpffs at {}",
        sb.bpffs().display()
    );
    let child = Command::new(&agent)
        .arg(format!("--bpf-root={}", sb.bpffs().display()))
        .arg(format!(
            "--state-dir={}",
            sb.run_dir().join("state").display()
        ))
        .arg(format!("--socket-path={}", socket.display()))
        .args([
            "--ipv4-range=10.0.1.0/24",
            "--bpf-ct-global-tcp-max=65536",
            "--bpf-ct-global-any-max=65536",
        ])
        .spawn()
        .context("starting cilium-agent")?;
    let agent_pid = child.id() as i32;
    sb.adopt(child);
    let host = format!("unix://{}", socket.display());
    let bpf_root = sb.bpffs();
    let run = |args: &[&str]| -> anyhow::Result<std::process::Output> {
        Command::new(&cilium)
            .arg("-H")
            .arg(&host)
            .arg("--bpf-root")
            .arg(&bpf_root)
            .args(args)
            .output()
            .context("running cilium")
    };
    let start = Instant::now();
    loop {
        if run(&["status", "--brief"])?.status.success() {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("agent did not become ready within 30s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("==> agent ready in {:?}", start.elapsed());
    for args in [
        &["status", "--verbose"][..],
        &["bpf", "endpoint", "list"],
        &["bpf", "ipcache", "list"],
    ] {
        println!("\n$ cilium {}", args.join(" "));
        let out = run(args)?;
        print!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!("\n==> stopping the agent; the node's namespaces go with this process");
    // SAFETY: signalling the agent this process started.
    unsafe { libc::kill(agent_pid, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("up") => up(),
        _ => {
            eprintln!("usage: cilium-lab up");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
