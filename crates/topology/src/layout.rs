//! What lives in a node's directory: `$CILIUM_LAB_DIR/node<i>/` in the
//! lab, `<sandbox>/node<i>/` in the tests. Paths only; making them is the
//! caller's job.
//!
//! The lab's node keeps its bpffs and /run/cilium in its own mount
//! namespace (so its agent runs on Cilium's defaults) and writes its agent
//! flags to [`NodeDir::config_dir`]; a test's node passes [`NodeDir::bpffs`]
//! and [`NodeDir::socket`] as flags instead.

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDir {
    pub dir: PathBuf,
}

impl NodeDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `node<i>` under `parent`.
    pub fn of_node(parent: &Path, index: usize) -> Self {
        Self::new(parent.join(crate::node_name(index)))
    }

    /// The node this directory is for (its last component).
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The agent's run directory (its pid file; Cilium's /var/run/cilium).
    pub fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }
    /// The agent's `--state-dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.run_dir().join("state")
    }
    /// The agent's API socket, where a test's node puts it.
    pub fn socket(&self) -> PathBuf {
        self.run_dir().join("cilium.sock")
    }
    /// A test's node mounts its private bpffs here.
    pub fn bpffs(&self) -> PathBuf {
        self.dir.join("bpffs")
    }
    /// A test's node's own network namespace file.
    pub fn node_netns(&self) -> PathBuf {
        self.dir.join("netns-node")
    }
    /// Where the pods' network namespace files are.
    pub fn netns_dir(&self) -> PathBuf {
        self.dir.join("netns")
    }
    pub fn netns(&self, pod: &str) -> PathBuf {
        self.netns_dir().join(pod)
    }
    /// The agent's `--config-dir` (one file per key), as the config init
    /// container builds it.
    pub fn config_dir(&self) -> PathBuf {
        self.dir.join("tmp/cilium/config-map")
    }
    pub fn cni_bin_dir(&self) -> PathBuf {
        self.dir.join("opt/cni/bin")
    }
    /// The conflist the agent writes once it is ready.
    pub fn cni_conf_file(&self) -> PathBuf {
        self.dir.join("etc/cni/net.d/05-cilium.conflist")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_the_node_dir() {
        let d = NodeDir::of_node(Path::new("/tmp/lab"), 2);
        assert_eq!(d.name(), "node2");
        assert_eq!(d.state_dir(), Path::new("/tmp/lab/node2/run/state"));
        assert_eq!(d.socket(), Path::new("/tmp/lab/node2/run/cilium.sock"));
        assert_eq!(d.netns("pod-a"), Path::new("/tmp/lab/node2/netns/pod-a"));
        assert_eq!(
            d.cni_conf_file(),
            Path::new("/tmp/lab/node2/etc/cni/net.d/05-cilium.conflist")
        );
    }
}
