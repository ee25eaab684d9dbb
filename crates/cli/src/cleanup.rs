//! `cilium cleanup`: takes the node back to before Cilium, for uninstall
//! or the clean-cilium-state init container. `--bpf-state` removes the
//! programs (tc filters, tcx and cgroup links) and pinned maps;
//! `--all-state` also the devices, the iptables masquerading rules, the
//! run and state directories, the CNI configuration and the cgroup v2
//! mount. Refuses while an agent's pid file
//! exists. Every path is a flag, so it can be pointed at a lab node's.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Remove all cilium state
    #[arg(long = "all-state")]
    all_state: bool,
    /// Remove BPF state
    #[arg(long = "bpf-state")]
    bpf_state: bool,
    /// Skip confirmation
    #[arg(short = 'f', long)]
    force: bool,
    /// The agent's run directory (its pid file, sockets, state)
    #[arg(long = "run-dir", default_value = "/var/run/cilium")]
    run_dir: PathBuf,
    /// The agent's library directory
    #[arg(long = "lib-dir", default_value = "/var/lib/cilium")]
    lib_dir: PathBuf,
    /// Where the CNI configuration lives
    #[arg(long = "cni-conf-dir", default_value = "/etc/cni/net.d")]
    cni_conf_dir: PathBuf,
    /// Where cgroup v2 is mounted for socket LB
    #[arg(long = "cgroup-root", default_value = "/run/cilium/cgroupv2")]
    cgroup_root: PathBuf,
}

/// The CNI configuration files Cilium writes (any version).
const CNI_CONFIGS: [&str; 5] = [
    "10-cilium-cni.conf",
    "00-cilium-cni.conf",
    "05-cilium-cni.conf",
    "05-cilium.conf",
    "05-cilium.conflist",
];

fn env_true(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "true")
}

/// Devices the agent and the CNI plugin create.
fn ours(name: &str) -> bool {
    name.starts_with("cilium_") || name.starts_with("lxc")
}

struct Plan {
    bpf_only: bool,
    devices: Vec<(u32, String)>,
}

impl Args {
    /// `--bpf-state` alone keeps devices and files; no flag means all.
    fn bpf_only(&self) -> bool {
        let all = self.all_state || env_true("CLEAN_CILIUM_STATE") || env_true("CILIUM_ALL_STATE");
        let bpf =
            self.bpf_state || env_true("CLEAN_CILIUM_BPF_STATE") || env_true("CILIUM_BPF_STATE");
        bpf && !all
    }

    fn plan(&self) -> anyhow::Result<Plan> {
        let devices = crate::block_on(async {
            let nl = netdev::Netlink::connect()?;
            Ok(nl
                .links()
                .await?
                .into_iter()
                .filter(|l| ours(&l.name))
                .map(|l| (l.index, l.name))
                .collect())
        })?;
        Ok(Plan {
            bpf_only: self.bpf_only(),
            devices,
        })
    }

    fn describe(&self, bpf_root: &Path, plan: &Plan) -> Vec<String> {
        let mut out = vec![
            "tc filters and tcx links of Cilium's programs".to_owned(),
            format!("socketlb bpf programs at {}", self.cgroup_root.display()),
            format!(
                "pinned maps and links in {} and {}",
                bpf_root.join("tc/globals").display(),
                bpf_root.join("cilium").display()
            ),
        ];
        if plan.bpf_only {
            return out;
        }
        if !plan.devices.is_empty() {
            let names: Vec<&str> = plan.devices.iter().map(|(_, n)| n.as_str()).collect();
            out.push(format!("links\n{}", names.join("\n")));
        }
        out.push(format!(
            "iptables and ip6tables masquerading rules (the nat table's {} chain and its feeder)",
            netdev::iptables::POST_NAT
        ));
        out.push(format!(
            "mounted cgroupv2 at {}",
            self.cgroup_root.display()
        ));
        out.push(format!(
            "endpoint state in {} and {}",
            self.run_dir.display(),
            self.lib_dir.display()
        ));
        out.push(format!(
            "CNI configuration at {}",
            CNI_CONFIGS
                .iter()
                .map(|c| self.cni_conf_dir.join(c).display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out
    }
}

fn remove_bpf_state(bpf_root: &Path, devices: &[(u32, String)]) {
    for (_, name) in devices {
        for hook in [
            datapath::attach::Hook::Ingress,
            datapath::attach::Hook::Egress,
        ] {
            datapath::attach::detach_tc(name, hook);
        }
    }
    datapath::socketlb::detach(bpf_root);
    // Unpinning the links detaches the tcx programs.
    let _ = std::fs::remove_dir_all(bpf_root.join("cilium"));
    let globals = bpf_root.join(abi::maps::GLOBALS_DIR);
    if let Ok(entries) = std::fs::read_dir(&globals) {
        for e in entries.filter_map(Result::ok) {
            if e.file_name().to_string_lossy().starts_with("cilium_") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

fn remove_all_state(args: &Args, devices: &[(u32, String)]) -> anyhow::Result<()> {
    crate::block_on(async {
        let nl = netdev::Netlink::connect()?;
        for (index, name) in devices {
            if let Err(e) = nl.delete_link(*index).await {
                // a veth's peer goes with it
                if nl.link_by_name(name).await?.is_some() {
                    eprintln!("Unable to delete link {name}: {e}");
                }
            }
        }
        Ok(())
    })?;
    for family in [netdev::iptables::Family::V4, netdev::iptables::Family::V6] {
        if let Err(e) = netdev::iptables::remove(family) {
            eprintln!("Unable to remove the iptables masquerading rules ({family:?}): {e}");
        }
    }
    let target = std::ffi::CString::new(args.cgroup_root.as_os_str().as_encoded_bytes())
        .context("cgroup root path")?;
    // SAFETY: a valid C string; a path that is not a mount just fails.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    // the health endpoint's namespace, pinned (mounted) in the run dir
    for e in netdev::netns::remove_all_in(&args.run_dir.join("netns")) {
        eprintln!("Unable to remove namespace: {e}");
    }
    for dir in [&args.run_dir, &args.lib_dir] {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("Unable to remove {}: {e}", dir.display());
            }
        }
    }
    for c in CNI_CONFIGS {
        let _ = std::fs::remove_file(args.cni_conf_dir.join(c));
    }
    if let Ok(entries) = std::fs::read_dir(&args.cni_conf_dir) {
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(orig) = name.strip_suffix(".cilium_bak") {
                let _ = std::fs::rename(e.path(), args.cni_conf_dir.join(orig));
            }
        }
    }
    Ok(())
}

pub fn run(ctx: &crate::Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    let pid = args.run_dir.join("cilium.pid");
    if pid.exists() {
        bail!(
            "cilium-agent is running (its pid file {} exists); stop it first",
            pid.display()
        );
    }
    let plan = args.plan()?;
    if !args.force {
        println!("Warning: Destructive operation. You are about to remove:");
        for item in args.describe(&ctx.bpf_root, &plan) {
            println!("- {item}");
        }
        if !crate::confirm("Do you want to continue? [y/N] ")? {
            println!("Cleanup cancelled");
            return Ok(ExitCode::FAILURE);
        }
    }
    remove_bpf_state(&ctx.bpf_root, &plan.devices);
    if !plan.bpf_only {
        remove_all_state(args, &plan.devices)?;
    }
    Ok(ExitCode::SUCCESS)
}
