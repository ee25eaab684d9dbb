//! The node's containerd: its configuration and the images it is given.
//! Paths are the standard ones; they are the node's own through its mount
//! namespace (see `filesystem`).

use anyhow::{bail, Context};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub const SOCKET: &str = "/run/containerd/containerd.sock";
pub const CONFIG: &str = "/etc/containerd/config.toml";
/// What kubelet and crictl are given as the runtime endpoint.
pub const ENDPOINT: &str = "unix:///run/containerd/containerd.sock";
/// The sandbox image containerd's CRI pins (so image GC never takes it).
pub const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10.1";

/// containerd 2.x's configuration (schema version 3) for a lab node:
/// - `restrict_oom_score_adj`: this machine kind cannot lower
///   oom_score_adj (no CAP_SYS_RESOURCE); without it every sandbox fails
///   in runc;
/// - CNI from the standard dirs, which the DaemonSet's install-cni-binaries
///   and the agent fill;
/// - no image can be pulled: the pinned sandbox image is imported.
pub fn config() -> String {
    format!(
        r#"version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[grpc]
  address = "{SOCKET}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{SANDBOX_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
"#
    )
}

/// Waits until containerd answers on its socket.
pub fn wait_ready(ctr: &Path, timeout: Duration) -> anyhow::Result<()> {
    let t = Instant::now();
    loop {
        let out = Command::new(ctr)
            .args(["--address", SOCKET, "version"])
            .output()
            .context("running ctr")?;
        if out.status.success() {
            return Ok(());
        }
        if t.elapsed() > timeout {
            bail!(
                "containerd did not answer on {SOCKET} within {timeout:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ctr`'s arguments before the archive to import it into the CRI's
/// namespace (`k8s.io`), unpacked for the CRI's snapshotter.
pub fn import_args() -> [&'static str; 8] {
    [
        "--address",
        SOCKET,
        "-n",
        "k8s.io",
        "images",
        "import",
        "--snapshotter",
        "overlayfs",
    ]
}

/// Imports an OCI archive into the CRI's namespace under the name its
/// index carries.
pub fn import(ctr: &Path, archive: &Path) -> anyhow::Result<()> {
    let out = Command::new(ctr)
        .args(import_args())
        .arg(archive)
        .output()
        .context("running ctr")?;
    if !out.status.success() {
        bail!(
            "importing {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
