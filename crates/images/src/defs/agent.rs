//! The agent's image (the operator and Hubble Relay run from it too,
//! each with its own command): our binaries, the scripts of deploy/image, and exactly the
//! host programs that the DaemonSet's commands and the agent run.

use std::path::Path;

use crate::defs::{add_accounts, add_base_dirs, add_nsswitch, add_usrmerge, require, PATH, ROOT};
use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::oci::{Image, RunConfig};
use crate::Error;

/// Binaries of `cargo build --release --workspace` put in /usr/bin.
const BINARIES: [&str; 6] = [
    "cilium",
    "cilium-agent",
    "cilium-mount",
    "cilium-sysctlfix",
    "cilium-operator",
    "hubble-relay",
];
/// Put in /usr/bin when it was built.
const OPTIONAL_BINARIES: [&str; 1] = ["cilium-health"];

/// deploy/image's scripts, run by deploy/kubernetes/cilium.yaml.
const SCRIPTS: [&str; 3] = ["install-plugin.sh", "init-container.sh", "cni-uninstall.sh"];

/// Host programs, and who runs them.
const PROGRAMS: [(&str, &str); 23] = [
    (
        "sh",
        "mount-cgroup and apply-sysctl-overwrites (sh -c), init-container.sh",
    ),
    (
        "bash",
        "mount-bpf-fs (/bin/bash -c), install-plugin.sh, cni-uninstall.sh",
    ),
    (
        "cp",
        "mount-cgroup, apply-sysctl-overwrites, install-plugin.sh",
    ),
    (
        "rm",
        "mount-cgroup, apply-sysctl-overwrites, install-plugin.sh",
    ),
    ("mv", "install-plugin.sh"),
    ("mkdir", "install-plugin.sh"),
    ("cat", "cni-uninstall.sh"),
    ("ls", "kubectl exec, to look around"),
    ("sleep", "kubectl exec and debugging pods"),
    ("echo", "scripts run by sh -c that do not use the builtin"),
    ("mount", "mount-bpf-fs"),
    ("umount", "kubectl exec, undoing mount-bpf-fs"),
    ("nsenter", "mount-cgroup, apply-sysctl-overwrites"),
    ("grep", "mount-bpf-fs"),
    ("find", "cni-uninstall.sh"),
    (
        "ip",
        "kubectl exec, to look at the node's devices and routes",
    ),
    ("iptables", "the agent's masquerading (netdev::iptables)"),
    (
        "iptables-restore",
        "the agent's masquerading (netdev::iptables)",
    ),
    ("iptables-save", "kubectl exec, to look at the rules"),
    ("ip6tables", "the IPv6 counterpart of iptables"),
    (
        "ip6tables-restore",
        "the IPv6 counterpart of iptables-restore",
    ),
    ("ip6tables-save", "the IPv6 counterpart of iptables-save"),
    ("modprobe", "loading netfilter modules (iptables runs it)"),
];

/// Where iptables (xtables-*-multi) loads its match and target
/// extensions from: a rule's extension must be there for iptables to read
/// any chain holding the rule, and the host's chains may hold any.
const XTABLES_DIR: &str = "/usr/lib/x86_64-linux-gnu/xtables";

/// The agent image's input paths.
pub struct AgentInputs<'a> {
    /// Where `cargo build --release --workspace` put the binaries.
    pub release_dir: &'a Path,
    /// deploy/image, holding the scripts.
    pub deploy_image_dir: &'a Path,
    /// Where host programs come from ("/").
    pub host_root: &'a Path,
}

pub fn image(reference: &str, inputs: &AgentInputs) -> Result<Image, Error> {
    let mut layer = Layer::new();
    let mut host = HostFiles::new(inputs.host_root);
    add_usrmerge(&mut layer, &mut host)?;
    add_base_dirs(&mut layer)?;
    add_accounts(&mut layer, &[ROOT], &[])?;
    add_nsswitch(&mut layer)?;

    for name in BINARIES {
        let path = inputs.release_dir.join(name);
        require(&path)?;
        host.add_external(&mut layer, Path::new("/usr/bin").join(name), &path, 0o755)?;
    }
    for name in OPTIONAL_BINARIES {
        let path = inputs.release_dir.join(name);
        if path.is_file() {
            host.add_external(&mut layer, Path::new("/usr/bin").join(name), &path, 0o755)?;
        }
    }
    let cni = crate::cilium_cni(inputs.release_dir);
    require(&cni)?;
    host.add_external(&mut layer, "/opt/cni/bin/cilium-cni", &cni, 0o755)?;
    for name in SCRIPTS {
        let path = inputs.deploy_image_dir.join(name);
        require(&path)?;
        layer.file_from_host(Path::new("/").join(name), path, 0o755)?;
    }

    for (program, _why) in PROGRAMS {
        host.add_program(&mut layer, program)?;
    }
    host.add_tree(&mut layer, XTABLES_DIR)?;

    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            cmd: vec!["/usr/bin/cilium-agent".into()],
            env: vec![PATH.into()],
            working_dir: "/".into(),
            ..RunConfig::default()
        },
        layer,
    })
}
