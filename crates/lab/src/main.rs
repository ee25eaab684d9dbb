//! cilium-lab: Cilium nodes as namespaces on this machine.
//!
//! `up` starts a node (its own network and mount namespaces, bpffs, /run),
//! its agent, and pods made through the real cilium-cni, then shows them
//! talking; the node stays up until `down`. `exec` runs a command in a pod
//! or in the node itself.

mod demo;
mod holder;
mod layout;
mod pods;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use layout::Layout;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "cilium-lab",
    about = "Run a Cilium cluster as namespaces on this machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the node, its agent and pods, and show them talking
    Up {
        /// Pods to create (default: pod-a and pod-b)
        #[arg(long = "pod")]
        pods: Vec<String>,
    },
    /// Delete the pods and stop the node
    Down,
    /// Run a command in a pod's network namespace (or in the node: node1)
    Exec {
        pod: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Add a pod to the running node
    AddPod { pod: String },
    /// Delete a pod of the running node
    DelPod { pod: String },
    #[command(hide = true)]
    NodeHolder,
}

fn running(l: &Layout) -> anyhow::Result<i32> {
    l.running_holder().with_context(|| {
        format!(
            "the lab is not up ({} has no running node); run `cilium-lab up`",
            l.dir.display()
        )
    })
}

fn start_holder(l: &Layout) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&l.dir).with_context(|| format!("creating {}", l.dir.display()))?;
    let _ = std::fs::remove_file(l.ready_file());
    let log = std::fs::File::create(l.log("holder"))?;
    let mut cmd = Command::new(layout::sibling("cilium-lab")?);
    cmd.arg("node-holder")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it detaches the node from our terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting the node")?;
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !l.ready_file().exists() {
        if !layout::alive(pid) || Instant::now() > deadline {
            let log = std::fs::read_to_string(l.log("holder")).unwrap_or_default();
            let agent = std::fs::read_to_string(l.log("agent")).unwrap_or_default();
            let tail: Vec<&str> = agent.lines().rev().take(10).collect();
            // SAFETY: ending the node process we started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            bail!(
                "node did not come up:\n{log}\nagent log (last lines):\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The child is the holder; it outlives us on purpose.
    std::mem::forget(child);
    Ok(pid)
}

fn up(pod_names: &[String]) -> anyhow::Result<()> {
    let l = Layout::new(layout::NODE);
    if let Some(pid) = l.running_holder() {
        bail!(
            "the lab is already up (node {} pid {pid}); run `cilium-lab down` first",
            layout::NODE
        );
    }
    let t0 = Instant::now();
    pods::install_cni(&l)?;
    let holder = start_holder(&l)?;
    println!(
        "==> {}: namespaces, bpffs and cilium-agent up in {:?} (pid {holder}, dir {})",
        layout::NODE,
        t0.elapsed(),
        l.dir.display()
    );
    layout::enter_node(holder)?;
    let names: Vec<String> = if pod_names.is_empty() {
        vec!["pod-a".into(), "pod-b".into()]
    } else {
        pod_names.to_vec()
    };
    let mut addrs = Vec::new();
    for pod in &names {
        let t = Instant::now();
        let ip = pods::add(&l, pod)?;
        println!("==> pod {pod}: {ip} (CNI ADD {:?})", t.elapsed());
        addrs.push(ip);
    }
    let mut ok = true;
    if names.len() >= 2 {
        ok &= demo::ping(&l, &names[0], addrs[1])?;
        ok &= demo::ping(&l, &names[1], addrs[0])?;
        demo::tcp(&l, &names[0], &names[1], addrs[1], 8080)?;
    }
    for args in [
        &["status"][..],
        &["endpoint", "list"],
        &["bpf", "ct", "list", "global"],
        &["bpf", "metrics", "list"],
    ] {
        demo::cilium(args)?;
    }
    println!("\n==> the lab stays up: `cilium-lab exec {} -- ping {}`, `cilium-lab exec node1 -- cilium status`, `cilium-lab down`", names[0], addrs.last().expect("a pod"));
    if !ok {
        bail!("pods could not reach each other");
    }
    Ok(())
}

fn down() -> anyhow::Result<()> {
    let l = Layout::new(layout::NODE);
    let Some(holder) = l.running_holder() else {
        println!("==> the lab is not up");
        let _ = std::fs::remove_dir_all(&l.dir);
        return Ok(());
    };
    layout::enter_node(holder)?;
    for pod in l.pods() {
        match pods::delete(&l, &pod) {
            Ok(()) => println!("==> deleted pod {pod}"),
            Err(e) => eprintln!("warning: {e:#}"),
        }
    }
    // SAFETY: signalling the node process the lab started.
    unsafe { libc::kill(holder, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    while layout::alive(holder) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if layout::alive(holder) {
        // SAFETY: as above.
        unsafe { libc::kill(holder, libc::SIGKILL) };
    }
    std::fs::remove_dir_all(&l.dir).with_context(|| format!("removing {}", l.dir.display()))?;
    println!(
        "==> {} stopped; its namespaces, devices and maps are gone",
        layout::NODE
    );
    Ok(())
}

fn exec(pod: &str, command: &[String]) -> anyhow::Result<()> {
    let l = Layout::new(layout::NODE);
    let holder = running(&l)?;
    layout::enter_node(holder)?;
    if pod != layout::NODE {
        let ns = l.netns(pod);
        if !ns.exists() {
            bail!("no pod named {pod:?}; pods: {}", l.pods().join(", "));
        }
        netdev::NetNs::open(&ns)?.enter()?;
    }
    let path = format!(
        "{}:{}",
        layout::bin_dir()?.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let err = Command::new(&command[0])
        .args(&command[1..])
        .env("PATH", path)
        .exec();
    Err(err).with_context(|| format!("running {}", command[0]))
}

fn pod_cmd(pod: &str, add: bool) -> anyhow::Result<()> {
    let l = Layout::new(layout::NODE);
    layout::enter_node(running(&l)?)?;
    if add {
        println!("{pod}: {}", pods::add(&l, pod)?);
    } else {
        if !l.netns(pod).exists() {
            bail!("no pod named {pod:?}; pods: {}", l.pods().join(", "));
        }
        pods::delete(&l, pod)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::Up { pods } => up(pods),
        Cmd::Down => down(),
        Cmd::Exec { pod, command } => exec(pod, command),
        Cmd::AddPod { pod } => pod_cmd(pod, true),
        Cmd::DelPod { pod } => pod_cmd(pod, false),
        Cmd::NodeHolder => holder::run(&Layout::new(layout::NODE)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
