//! Where the Kubernetes binaries are: `$CILIUM_RS_K8S_BIN`, else the cache
//! `scripts/build-k8s.sh` builds into for the version `tools/k8s` pins.
//! And a real node's ([`NodeBinaries`]): `$CILIUM_RS_NODE_BIN`, else the
//! cache `scripts/build-node.sh` builds into for the versions `tools/k8s`,
//! `tools/containerd` and `tools/crictl` pin, plus what Debian installs
//! (runc, the CNI plugins).

use std::path::{Path, PathBuf};

/// The tools/k8s module, which pins the release.
const GO_MOD: &str = include_str!("../../../tools/k8s/go.mod");
/// The tools/containerd module, which pins containerd's release.
const CONTAINERD_GO_MOD: &str = include_str!("../../../tools/containerd/go.mod");
/// The tools/crictl module, which pins cri-tools' release.
const CRICTL_GO_MOD: &str = include_str!("../../../tools/crictl/go.mod");
/// The tools/coredns module, which pins CoreDNS's release.
const COREDNS_GO_MOD: &str = include_str!("../../../tools/coredns/go.mod");

/// Where Debian's `runc` package puts runc.
pub const RUNC_DIR: &str = "/usr/sbin";
/// Where Debian's `containernetworking-plugins` puts the plugins
/// (loopback, bridge, host-local, ...).
pub const CNI_PLUGINS_DIR: &str = "/usr/lib/cni";

const BUILD_K8S: &str = "scripts/build-k8s.sh (scripts/install.sh does)";
const BUILD_NODE: &str = "scripts/build-node.sh (scripts/install.sh does)";
const DEBIAN: &str =
    "scripts/install.sh (it installs Debian's runc and containernetworking-plugins)";

/// The version a go.mod requires of `module`.
fn required(go_mod: &'static str, module: &str) -> Option<&'static str> {
    go_mod
        .lines()
        .map(str::split_whitespace)
        .find_map(|mut words| match (words.next(), words.next()) {
            (Some(m), Some(v)) if m == module => Some(v),
            _ => None,
        })
}

/// The pinned Kubernetes release (`v1.34.4`).
pub fn version() -> &'static str {
    required(GO_MOD, "k8s.io/kubernetes").expect("tools/k8s/go.mod requires k8s.io/kubernetes")
}

/// The pinned containerd release (`v2.2.9`).
pub fn containerd_version() -> &'static str {
    required(CONTAINERD_GO_MOD, "github.com/containerd/containerd/v2")
        .expect("tools/containerd/go.mod requires github.com/containerd/containerd/v2")
}

/// The pinned crictl (cri-tools) release (`v1.34.0`).
pub fn crictl_version() -> &'static str {
    required(CRICTL_GO_MOD, "sigs.k8s.io/cri-tools")
        .expect("tools/crictl/go.mod requires sigs.k8s.io/cri-tools")
}

/// The pinned CoreDNS release (`v1.12.1`, kubeadm's for the control
/// plane's release).
pub fn coredns_version() -> &'static str {
    required(COREDNS_GO_MOD, "github.com/coredns/coredns")
        .expect("tools/coredns/go.mod requires github.com/coredns/coredns")
}

#[derive(Debug, thiserror::Error)]
#[error("{} not found in {}: run {}", name, dir.display(), run)]
pub struct Missing {
    pub name: &'static str,
    pub dir: PathBuf,
    /// What makes it: a script, as the message says.
    pub run: &'static str,
}

fn cache_dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
        Path::new(&home).join(default)
    })
}

/// `dir/name`, when it is a file; else what to run to make it.
fn file(dir: &Path, name: &'static str, run: &'static str) -> Result<PathBuf, Missing> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Missing {
            name,
            dir: dir.to_owned(),
            run,
        })
    }
}

/// The directory with the built binaries.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CILIUM_RS_K8S_BIN") {
        return dir.into();
    }
    cache_dir("CILIUM_RS_K8S_CACHE", ".cache/cilium-rs/k8s")
        .join(version())
        .join("bin")
}

/// The four binaries, checked to exist.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub apiserver: PathBuf,
    pub controller_manager: PathBuf,
    pub scheduler: PathBuf,
    pub kubectl: PathBuf,
}

impl Binaries {
    pub fn find() -> Result<Self, Missing> {
        Self::in_dir(&bin_dir())
    }

    pub fn in_dir(dir: &Path) -> Result<Self, Missing> {
        let get = |name| file(dir, name, BUILD_K8S);
        Ok(Self {
            apiserver: get("kube-apiserver")?,
            controller_manager: get("kube-controller-manager")?,
            scheduler: get("kube-scheduler")?,
            kubectl: get("kubectl")?,
        })
    }
}

/// The name of `scripts/build-node.sh`'s cache dir for the pinned versions:
/// `k8s-v1.34.4_containerd-v2.2.9_crictl-v1.34.0`.
pub fn node_key() -> String {
    format!(
        "k8s-{}_containerd-{}_crictl-{}",
        version(),
        containerd_version(),
        crictl_version()
    )
}

/// The directory with the built node binaries.
pub fn node_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CILIUM_RS_NODE_BIN") {
        return dir.into();
    }
    cache_dir("CILIUM_RS_NODE_CACHE", ".cache/cilium-rs/node")
        .join(node_key())
        .join("bin")
}

/// Where `scripts/build-node.sh` puts CoreDNS: beside the node binaries'
/// dir, named after its own release, so a CoreDNS bump rebuilds CoreDNS
/// alone.
pub fn coredns_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CILIUM_RS_COREDNS_BIN") {
        return dir.into();
    }
    cache_dir("CILIUM_RS_NODE_CACHE", ".cache/cilium-rs/node")
        .join(format!("coredns-{}", coredns_version()))
        .join("bin")
}

/// What a real Kubernetes node runs, checked to exist: kubelet, containerd
/// with its runc shim, ctr, crictl, the e2e images' agnhost and pause and
/// the cluster DNS's CoreDNS (built by `scripts/build-node.sh`), Debian's
/// runc and CNI plugins.
#[derive(Clone, Debug)]
pub struct NodeBinaries {
    pub kubelet: PathBuf,
    /// Only the benchmarks' baseline nodes run it.
    pub kube_proxy: PathBuf,
    pub containerd: PathBuf,
    /// `containerd-shim-runc-v2`
    pub shim: PathBuf,
    pub ctr: PathBuf,
    pub crictl: PathBuf,
    pub agnhost: PathBuf,
    /// agnhost porter's TLS certificate and key (`localhost.crt`, `.key`).
    pub porter_tls: (PathBuf, PathBuf),
    pub pause: PathBuf,
    pub coredns: PathBuf,
    pub runc: PathBuf,
    /// Holds at least `loopback`, which containerd's CRI needs.
    pub cni_plugins_dir: PathBuf,
}

impl NodeBinaries {
    pub fn find() -> Result<Self, Missing> {
        Self::in_dirs(
            &node_bin_dir(),
            &coredns_bin_dir(),
            Path::new(RUNC_DIR),
            Path::new(CNI_PLUGINS_DIR),
        )
    }

    /// The built binaries in `dir`, CoreDNS in `coredns_dir`, runc in
    /// `runc_dir`, the CNI plugins in `cni_plugins_dir`.
    pub fn in_dirs(
        dir: &Path,
        coredns_dir: &Path,
        runc_dir: &Path,
        cni_plugins_dir: &Path,
    ) -> Result<Self, Missing> {
        let get = |name| file(dir, name, BUILD_NODE);
        let runc = file(runc_dir, "runc", DEBIAN)?;
        file(cni_plugins_dir, "loopback", DEBIAN)?;
        Ok(Self {
            kubelet: get("kubelet")?,
            kube_proxy: get("kube-proxy")?,
            containerd: get("containerd")?,
            shim: get("containerd-shim-runc-v2")?,
            ctr: get("ctr")?,
            crictl: get("crictl")?,
            agnhost: get("agnhost")?,
            porter_tls: (get("localhost.crt")?, get("localhost.key")?),
            pause: get("pause")?,
            coredns: file(coredns_dir, "coredns", BUILD_NODE)?,
            runc,
            cni_plugins_dir: cni_plugins_dir.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_release_is_read_from_the_go_module() {
        let v = version();
        assert!(v.starts_with("v1."), "{v}");
        assert!(
            bin_dir().ends_with(format!("{v}/bin"))
                || std::env::var_os("CILIUM_RS_K8S_BIN").is_some()
        );
    }

    #[test]
    fn the_node_binaries_dir_names_the_pinned_releases() {
        assert!(
            containerd_version().starts_with("v2."),
            "{}",
            containerd_version()
        );
        assert!(crictl_version().starts_with("v1."), "{}", crictl_version());
        let key = node_key();
        assert_eq!(
            key,
            format!(
                "k8s-{}_containerd-{}_crictl-{}",
                version(),
                containerd_version(),
                crictl_version()
            )
        );
        assert!(
            node_bin_dir().ends_with(format!("{key}/bin"))
                || std::env::var_os("CILIUM_RS_NODE_BIN").is_some()
        );
    }

    #[test]
    fn node_binaries_are_found_or_named_with_the_script_that_builds_them() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, dns, sbin, cni) = (
            tmp.path().join("bin"),
            tmp.path().join("coredns"),
            tmp.path().join("sbin"),
            tmp.path().join("cni"),
        );
        for d in [&bin, &dns, &sbin, &cni] {
            std::fs::create_dir(d).unwrap();
        }
        let touch = |dir: &Path, name: &str| std::fs::write(dir.join(name), "").unwrap();

        let e = NodeBinaries::in_dirs(&bin, &dns, &sbin, &cni).unwrap_err();
        assert_eq!((e.name, e.run), ("runc", DEBIAN));
        touch(&sbin, "runc");
        let e = NodeBinaries::in_dirs(&bin, &dns, &sbin, &cni).unwrap_err();
        assert_eq!((e.name, e.dir.as_path()), ("loopback", cni.as_path()));
        touch(&cni, "loopback");
        let e = NodeBinaries::in_dirs(&bin, &dns, &sbin, &cni).unwrap_err();
        assert_eq!((e.name, e.run), ("kubelet", BUILD_NODE));
        assert!(e.to_string().contains("run scripts/build-node.sh"), "{e}");

        for name in [
            "kubelet",
            "kube-proxy",
            "containerd",
            "containerd-shim-runc-v2",
            "ctr",
            "crictl",
            "agnhost",
            "localhost.crt",
            "localhost.key",
            "pause",
        ] {
            touch(&bin, name);
        }
        let e = NodeBinaries::in_dirs(&bin, &dns, &sbin, &cni).unwrap_err();
        assert_eq!((e.name, e.dir.as_path()), ("coredns", dns.as_path()));
        touch(&dns, "coredns");
        let found = NodeBinaries::in_dirs(&bin, &dns, &sbin, &cni).unwrap();
        assert_eq!(found.shim, bin.join("containerd-shim-runc-v2"));
        assert_eq!(found.runc, sbin.join("runc"));
        assert_eq!(found.cni_plugins_dir, cni);
    }
}
