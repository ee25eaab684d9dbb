//! A node boots as the DaemonSet boots it: the init containers in the
//! seed's order (config, mount-cgroup, apply-sysctl-overwrites,
//! mount-bpf-fs, clean-cilium-state, install-cni-binaries), each the same
//! tool or script, then the agent with `--config-dir`. What the cluster's
//! ConfigMap and each node's CiliumNodeConfig say comes from the API
//! server, where `up` puts them (without Kubernetes, from the files `up`
//! writes); the node's paths live under its lab directory or in its own
//! mount namespace, never the machine's.

use crate::layout::{self, Holder};
use anyhow::{bail, Context};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use topology::NodeDir;

/// The image's scripts, as the DaemonSet's containers find them.
const INIT_CONTAINER: &str = include_str!("../../../deploy/image/init-container.sh");
const INSTALL_PLUGIN: &str = include_str!("../../../deploy/image/install-plugin.sh");

pub const STEPS: [&str; 6] = [
    "config",
    "mount-cgroup",
    "apply-sysctl-overwrites",
    "mount-bpf-fs",
    "clean-cilium-state",
    "install-cni-binaries",
];

/// The cluster's cilium-config, as a mounted ConfigMap (one file per key).
pub fn config_map_dir() -> PathBuf {
    layout::root().join("cilium-config")
}

/// The keys `write_config_map` wrote, sorted.
pub fn config_map_keys() -> anyhow::Result<Vec<(String, String)>> {
    let dir = config_map_dir();
    let mut keys = Vec::new();
    for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        let Some(key) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if key.starts_with('.') {
            continue;
        }
        let value = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        keys.push((key.to_owned(), value.trim().to_owned()));
    }
    keys.sort();
    Ok(keys)
}

/// The CiliumNodeConfig objects, one YAML per node.
pub fn node_config_dir() -> PathBuf {
    layout::root().join("node-config")
}

/// Writes the cluster's ConfigMap (`extra` overrides the lab's defaults).
/// With Kubernetes, etcd is the agents' kvstore only when identities are
/// allocated there (`identity-allocation-mode=kvstore`), as in Cilium;
/// otherwise CiliumIdentities do.
pub fn write_config_map(extra: &[(String, String)], kubernetes: bool) -> anyhow::Result<()> {
    let dir = config_map_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut keys: Vec<(String, String)> = [
        ("kvstore", "etcd".to_owned()),
        (
            "kvstore-opt",
            format!("etcd.address={}", topology::etcd_url()),
        ),
        ("kube-proxy-replacement", "true".into()),
        // Hubble as Helm's defaults turn it on (TLS and relay aside)
        ("enable-hubble", "true".into()),
        // as Helm renders them for Kubernetes 1.27 and later
        ("k8s-client-qps", "10".into()),
        ("k8s-client-burst", "20".into()),
        ("bpf-ct-global-tcp-max", "65536".into()),
        ("bpf-ct-global-any-max", "65536".into()),
        ("cni-exclusive", "true".into()),
        ("cni-uninstall", "false".into()),
        ("clean-cilium-state", "false".into()),
        ("clean-cilium-bpf-state", "false".into()),
        // with Kubernetes, the operator's cluster pool (Helm's defaults);
        // without, each node's own ipv4-range
        ("ipam", "cluster-pool".into()),
        ("cluster-pool-ipv4-cidr", "10.0.0.0/8".into()),
        ("cluster-pool-ipv4-mask-size", "24".into()),
        // the operator's, as Helm sets it: a node whose agent is not
        // ready gets the agent-not-ready taint back
        ("set-cilium-node-taints", "true".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (k, v) in extra {
        keys.retain(|(key, _)| key != k);
        keys.push((k.clone(), v.clone()));
    }
    ipv6_defaults(&mut keys);
    ipv6_only_defaults(&mut keys);
    native_routing_defaults(&mut keys);
    let kvstore_identities = keys
        .iter()
        .any(|(k, v)| k == "identity-allocation-mode" && v == "kvstore");
    if kubernetes && !kvstore_identities {
        keys.retain(|(k, _)| k != "kvstore" && k != "kvstore-opt");
    }
    for (k, v) in keys {
        layout::write_atomic(&dir.join(k), v.as_bytes())?;
    }
    Ok(())
}

/// `routing-mode=native` works in the lab as it is: every pod CIDR lies in
/// 10.0.0.0/8 (and in a dual-stack lab the IPv6 cluster pool), not to be
/// masqueraded, and the nodes share one L2 underlay of both families, so
/// each node routes the others' pod CIDRs via their addresses. What the
/// user set stays; runs after [`ipv6_defaults`].
fn native_routing_defaults(keys: &mut Vec<(String, String)>) {
    if value(keys, "routing-mode") != Some("native") {
        return;
    }
    let ipv6_pool = is_on(keys, "enable-ipv6")
        .then(|| value(keys, "cluster-pool-ipv6-cidr").map(str::to_owned))
        .flatten();
    let ipv4_pool = (value(keys, "enable-ipv4") != Some("false")).then(|| "10.0.0.0/8".to_owned());
    let defaults = [
        ("ipv4-native-routing-cidr", ipv4_pool),
        ("ipv6-native-routing-cidr", ipv6_pool),
        ("auto-direct-node-routes", Some("true".to_owned())),
    ];
    for (key, default) in defaults {
        if let (None, Some(v)) = (value(keys, key), default) {
            keys.push((key.to_owned(), v));
        }
    }
}

/// `enable-ipv6=true` gets the IPv6 cluster pool Helm renders with
/// `ipv6.enabled` (fd00::/104 cut into /120s, unique-local addresses that
/// live only in the lab's namespaces). What the user set stays.
fn ipv6_defaults(keys: &mut Vec<(String, String)>) {
    if !is_on(keys, "enable-ipv6") {
        return;
    }
    for (key, default) in [
        ("cluster-pool-ipv6-cidr", "fd00::/104"),
        ("cluster-pool-ipv6-mask-size", "120"),
    ] {
        if value(keys, key).is_none() {
            keys.push((key.to_owned(), default.to_owned()));
        }
    }
}

/// An IPv6-only lab (`enable-ipv4=false`) has no IPv4 pool (as Helm
/// renders none with `ipv4.enabled=false`, and the operator refuses one)
/// and routes natively unless told otherwise: the overlay's underlay is
/// IPv4, which an IPv6-only node does not name itself by (as in 1.16).
/// Runs before [`native_routing_defaults`].
fn ipv6_only_defaults(keys: &mut Vec<(String, String)>) {
    if value(keys, "enable-ipv4") != Some("false") {
        return;
    }
    keys.retain(|(k, _)| !k.starts_with("cluster-pool-ipv4-"));
    if value(keys, "routing-mode").is_none() {
        keys.push(("routing-mode".into(), "native".into()));
    }
}

fn value<'a>(keys: &'a [(String, String)], key: &str) -> Option<&'a str> {
    keys.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// A boolean key set true, spelled as the agent's flags take it.
fn is_on(keys: &[(String, String)], key: &str) -> bool {
    value(keys, key).is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "t"))
}

/// Node `index`'s CiliumNodeConfig (what differs per node), as a file;
/// its YAML.
pub fn write_node_config(l: &NodeDir, index: usize) -> anyhow::Result<String> {
    let name = topology::node_name(index);
    let doc = format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata:\n  name: lab-{name}\n  namespace: kube-system\nspec:\n  nodeSelector:\n    matchLabels:\n      kubernetes.io/hostname: {name}\n  defaults:\n    ipv4-range: {}\n    state-dir: {}\n    write-cni-conf-when-ready: {}\n",
        topology::pod_cidr(index),
        l.state_dir().display(),
        l.cni_conf_file().display(),
    );
    layout::write_atomic(
        &node_config_dir().join(format!("{name}.yaml")),
        doc.as_bytes(),
    )?;
    Ok(doc)
}

fn log_step(log: &mut std::fs::File, name: &str, shown: &str, out: &std::process::Output) {
    let _ = writeln!(log, "==> init container {name}: {shown}");
    for stream in [&out.stdout, &out.stderr] {
        for line in String::from_utf8_lossy(stream).lines() {
            let _ = writeln!(log, "    {line}");
        }
    }
}

fn run(log: &mut std::fs::File, name: &str, shown: &str, cmd: &mut Command) -> anyhow::Result<()> {
    run_restarting(log, name, shown, cmd, Duration::ZERO)
}

/// Runs an init container; as kubelet restarts one that failed, again
/// after a growing pause, for up to `patience`. Failed runs are logged as
/// `--> init container <name> failed`, the run that counts as `==>`.
fn run_restarting(
    log: &mut std::fs::File,
    name: &str,
    shown: &str,
    cmd: &mut Command,
    patience: Duration,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let mut pause = Duration::from_millis(250);
    loop {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("init container {name}: running {shown}"))?;
        if out.status.success() || t.elapsed() + pause > patience {
            log_step(log, name, shown, &out);
            if !out.status.success() {
                bail!(
                    "init container {name} failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            return Ok(());
        }
        let _ = writeln!(
            log,
            "--> init container {name} failed ({}), restarting in {pause:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(4));
    }
}

/// Where install-plugin.sh copies cilium-cni from: the build that ships.
fn cni_source_dir(bin: &Path) -> PathBuf {
    let cni = images::cilium_cni(bin);
    cni.parent().map_or_else(|| bin.to_owned(), Path::to_owned)
}

/// A value of the built configuration (as the ConfigMap env refs read it).
fn built(l: &NodeDir, key: &str) -> String {
    std::fs::read_to_string(l.config_dir().join(key))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Drops the machine's bpffs this mount namespace inherited, so the
/// mount-bpf-fs step finds none and mounts the node's own.
fn forget_inherited_bpffs() {
    let target = c"/sys/fs/bpf";
    // SAFETY: a valid C string; a private mount namespace (the holder's).
    while unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } == 0 {}
}

fn script(l: &NodeDir, name: &str, body: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = l.dir.join("image").join(name);
    layout::write_atomic(&path, body.as_bytes())?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// The config step: `cilium build-config` with the default sources from
/// the API server (as the agents' ServiceAccount, in the node's network
/// namespace) or, without Kubernetes, with files; restarted while the
/// kubelet has not registered the Node yet.
fn build_config(
    log: &mut std::fs::File,
    cilium: &Path,
    l: &NodeDir,
    index: usize,
    kubernetes: bool,
) -> anyhow::Result<()> {
    let node = topology::node_name(index);
    let dest = l.config_dir();
    let mut cmd = Command::new(cilium);
    cmd.arg("build-config");
    if !kubernetes {
        let sources = format!(
            "config-map:{},cilium-node-config:{}",
            config_map_dir().display(),
            node_config_dir().display()
        );
        cmd.args(["--node-name", &node, "--source", &sources, "--dest"])
            .arg(&dest);
        let shown = format!("cilium build-config --source {sources}");
        return run(log, STEPS[0], &shown, &mut cmd);
    }
    let kubeconfig = crate::kube::agent_kubeconfig()?;
    let flag = format!("--k8s-kubeconfig-path={}", kubeconfig.display());
    cmd.args([&flag, "--node-name", &node, "--dest"])
        .arg(&dest)
        .env("CILIUM_K8S_NAMESPACE", "kube-system");
    let shown = format!(
        "CILIUM_K8S_NAMESPACE=kube-system cilium build-config {flag} --node-name {node} --dest {}",
        dest.display()
    );
    run_restarting(log, STEPS[0], &shown, &mut cmd, Duration::from_secs(60))
}

/// Runs the init containers in order; `own_cgroup` is the node's cgroup
/// in the machine's tree (its cgroup namespace root). With `kubernetes`,
/// the configuration comes from the API server.
pub fn init_containers(
    l: &NodeDir,
    index: usize,
    own_cgroup: &Path,
    kubernetes: bool,
) -> anyhow::Result<()> {
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(l.log("boot"))
        .context("opening the boot log")?;
    let bin = layout::bin_dir()?;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cilium = bin.join("cilium");

    build_config(&mut log, &cilium, l, index, kubernetes)?;

    // As `nsenter --cgroup=/hostproc/1/ns/cgroup`: the node's cgroup
    // namespace is rooted at its own cgroup, so the cgroup2 mounted there
    // is the node's subtree, never the machine's whole tree.
    let procs = own_cgroup.join("cgroup.procs");
    let mut mount_cgroup = Command::new(bin.join("cilium-mount"));
    mount_cgroup.arg(layout::NODE_CGROUP);
    // SAFETY: only write(2) and unshare(2) between fork and exec.
    unsafe {
        mount_cgroup.pre_exec(move || {
            std::fs::write(&procs, "0")?;
            if libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run(
        &mut log,
        STEPS[1],
        &format!(
            "nsenter --cgroup=<node> cilium-mount {}",
            layout::NODE_CGROUP
        ),
        &mut mount_cgroup,
    )?;

    let sysctl_dir = l.dir.join("etc/sysctl.d/");
    run(
        &mut log,
        STEPS[2],
        &format!(
            "cilium-sysctlfix --sysctl-conf-dir {}",
            sysctl_dir.display()
        ),
        Command::new(bin.join("cilium-sysctlfix"))
            .arg("--sysctl-conf-dir")
            .arg(&sysctl_dir)
            // never the machine's systemd-sysctl
            .arg("--systemd-sysctl-unit="),
    )?;

    forget_inherited_bpffs();
    let mount_bpf = r#"mount | grep "/sys/fs/bpf type bpf" || mount -t bpf bpf /sys/fs/bpf"#;
    run(
        &mut log,
        STEPS[3],
        mount_bpf,
        Command::new("/bin/bash").args(["-c", "--", mount_bpf]),
    )?;

    let cleanup_args = format!(
        "--run-dir {} --lib-dir {} --cni-conf-dir {} --cgroup-root {}",
        l.run_dir().display(),
        l.dir.join("lib").display(),
        l.cni_conf_file().parent().expect("conf dir").display(),
        layout::NODE_CGROUP
    );
    run(
        &mut log,
        STEPS[4],
        "/init-container.sh",
        Command::new(script(l, "init-container.sh", INIT_CONTAINER)?)
            .env("PATH", &path)
            .env("CILIUM_ALL_STATE", built(l, "clean-cilium-state"))
            .env("CILIUM_BPF_STATE", built(l, "clean-cilium-bpf-state"))
            .env("CLEANUP_ARGS", cleanup_args),
    )?;

    run(
        &mut log,
        STEPS[5],
        "/install-plugin.sh",
        Command::new(script(l, "install-plugin.sh", INSTALL_PLUGIN)?)
            .env("PATH", &path)
            .env("HOST_PREFIX", &l.dir)
            .env("CNI_DIR", l.cni_bin_dir().parent().expect("bin's parent"))
            .env("SOURCE_DIR", cni_source_dir(&bin)),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn native_routing_brings_the_lab_s_cidr_and_direct_routes_unless_set() {
        let mut keys = kv(&[("routing-mode", "native")]);
        native_routing_defaults(&mut keys);
        assert_eq!(
            keys,
            kv(&[
                ("routing-mode", "native"),
                ("ipv4-native-routing-cidr", "10.0.0.0/8"),
                ("auto-direct-node-routes", "true"),
            ])
        );
        let mut keys = kv(&[
            ("routing-mode", "native"),
            ("auto-direct-node-routes", "false"),
        ]);
        native_routing_defaults(&mut keys);
        assert!(keys.contains(&("auto-direct-node-routes".into(), "false".into())));
        assert_eq!(keys.len(), 3);
        let mut keys = kv(&[("routing-mode", "tunnel")]);
        native_routing_defaults(&mut keys);
        assert_eq!(keys.len(), 1, "tunnel mode gets nothing");
    }

    #[test]
    fn an_ipv6_only_lab_routes_natively_unless_told_otherwise() {
        let mut keys = kv(&[("enable-ipv4", "false"), ("enable-ipv6", "true")]);
        ipv6_defaults(&mut keys);
        ipv6_only_defaults(&mut keys);
        native_routing_defaults(&mut keys);
        assert_eq!(value(&keys, "routing-mode"), Some("native"));
        assert_eq!(value(&keys, "ipv6-native-routing-cidr"), Some("fd00::/104"));
        assert_eq!(value(&keys, "ipv4-native-routing-cidr"), None);
        let mut keys = kv(&[("enable-ipv4", "false"), ("routing-mode", "tunnel")]);
        ipv6_only_defaults(&mut keys);
        assert_eq!(value(&keys, "routing-mode"), Some("tunnel"));
    }

    #[test]
    fn a_dual_stack_native_lab_keeps_the_ipv6_pool_unmasqueraded() {
        let mut keys = kv(&[("routing-mode", "native"), ("enable-ipv6", "true")]);
        ipv6_defaults(&mut keys);
        native_routing_defaults(&mut keys);
        assert_eq!(value(&keys, "ipv6-native-routing-cidr"), Some("fd00::/104"));
        let mut keys = kv(&[
            ("routing-mode", "native"),
            ("enable-ipv6", "true"),
            ("cluster-pool-ipv6-cidr", "fd00:1::/96"),
        ]);
        ipv6_defaults(&mut keys);
        native_routing_defaults(&mut keys);
        assert_eq!(
            value(&keys, "ipv6-native-routing-cidr"),
            Some("fd00:1::/96")
        );
    }

    #[test]
    fn a_failed_init_container_is_restarted_until_it_succeeds_or_patience_runs_out() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("boot.log");
        let mut log = std::fs::File::create(&log_path).unwrap();
        let runs = dir.path().join("runs");
        // fails twice, as build-config does before kubelet registered the Node
        let script = format!(
            "echo run >> {0}; [ $(wc -l < {0}) -ge 3 ] || {{ echo 'Error: Node \"node1\" does not exist' >&2; exit 1; }}",
            runs.display()
        );
        let mut flaky = Command::new("sh");
        flaky.args(["-c", &script]);
        run_restarting(
            &mut log,
            "config",
            "shown",
            &mut flaky,
            Duration::from_secs(10),
        )
        .unwrap();
        let text = std::fs::read_to_string(&log_path).unwrap();
        assert_eq!(
            text.matches("--> init container config failed (exit status: 1), restarting in ")
                .count(),
            2,
            "{text}"
        );
        assert!(
            text.contains("Error: Node \"node1\" does not exist"),
            "{text}"
        );
        assert_eq!(text.matches("==> init container config: shown").count(), 1);

        let t = Instant::now();
        let err = run_restarting(
            &mut log,
            "config",
            "false",
            &mut Command::new("false"),
            Duration::from_millis(600),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("init container config failed"),
            "{err}"
        );
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
