//! The CNI configuration the agent writes once it is ready
//! (`write-cni-conf-when-ready`): kubelet starts pods on a node only when a
//! CNI config is there, so writing it last means no pod lands before the
//! agent can serve it. With `cni-exclusive` every other config in the
//! directory is set aside as `*.cilium_bak`; with `cni-uninstall` the file
//! goes when the agent shuts down.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CniConfig {
    /// Where to write (empty: the agent writes none)
    pub path: PathBuf,
    pub exclusive: bool,
    pub uninstall: bool,
    pub debug: bool,
    pub log_file: String,
}

impl CniConfig {
    /// What `cilium status` says of it (Cilium's "CNI Config file" line):
    /// the file as it is on disk now.
    pub fn status(&self) -> api::models::Status {
        use api::models::{State, Status};
        let (state, msg) = if !self.enabled() {
            (
                State::Disabled,
                "CNI configuration management disabled".to_owned(),
            )
        } else if std::fs::read_to_string(&self.path).is_ok_and(|c| c == self.content()) {
            (
                State::Ok,
                format!(
                    "successfully wrote CNI configuration file to {}",
                    self.path.display()
                ),
            )
        } else {
            (
                State::Failure,
                format!(
                    "CNI configuration file {} not written yet",
                    self.path.display()
                ),
            )
        };
        Status { state, msg }
    }

    /// Cilium's conflist for chaining mode `none`.
    pub fn content(&self) -> String {
        let v = serde_json::json!({
            "cniVersion": "0.3.1",
            "name": "cilium",
            "plugins": [{
                "type": "cilium-cni",
                "enable-debug": self.debug,
                "log-file": self.log_file,
            }],
        });
        serde_json::to_string_pretty(&v).expect("conflist serializes") + "\n"
    }

    fn enabled(&self) -> bool {
        !self.path.as_os_str().is_empty()
    }

    /// Writes the file if its content changed (write, rename), then sets
    /// other configs aside; returns the files renamed.
    pub fn write(&self) -> std::io::Result<Vec<PathBuf>> {
        if !self.enabled() {
            return Ok(Vec::new());
        }
        let body = self.content();
        if std::fs::read_to_string(&self.path).ok().as_deref() != Some(body.as_str()) {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            let tmp = self.path.with_extension("tmp");
            std::fs::write(&tmp, &body)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
            std::fs::rename(&tmp, &self.path)?;
            tracing::info!(subsys = "cni-config", file = %self.path.display(), "Wrote CNI configuration file");
        }
        self.set_others_aside()
    }

    fn set_others_aside(&self) -> std::io::Result<Vec<PathBuf>> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let ours = self.path.file_name();
        let mut moved = Vec::new();
        for e in std::fs::read_dir(dir)?.filter_map(Result::ok) {
            let name = e.file_name();
            let text = name.to_string_lossy();
            let legacy = text == "05-cilium.conf";
            let other = self.exclusive
                && [".conf", ".conflist", ".json"]
                    .iter()
                    .any(|x| text.ends_with(x));
            if Some(name.as_os_str()) == ours || !(legacy || other) {
                continue;
            }
            let to = dir.join(format!("{text}.cilium_bak"));
            std::fs::rename(e.path(), &to)?;
            tracing::info!(subsys = "cni-config", file = %e.path().display(), renamed = %to.display(), "Renamed CNI configuration file");
            moved.push(to);
        }
        Ok(moved)
    }

    /// On shutdown with `cni-uninstall`: kubelet stops sending pods here.
    pub fn remove(&self) {
        if self.enabled() && self.uninstall {
            if let Err(e) = std::fs::remove_file(&self.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(subsys = "cni-config", file = %self.path.display(), error = %e, "Unable to remove CNI configuration");
                }
            } else {
                tracing::info!(subsys = "cni-config", file = %self.path.display(), "Removed CNI configuration");
            }
        }
    }
}

/// Writes the configuration once the API answers on `socket` (kubelet
/// sends pods, and the plugin calls the API, as soon as the file is
/// there), then keeps it written every 10 s.
pub fn write_when_ready(
    cni: CniConfig,
    socket: PathBuf,
    tasks: &controlplane::tasks::Tasks,
    controllers: controlplane::controller::Controllers,
) {
    if !cni.enabled() {
        return;
    }
    tasks.spawn("write-cni-conf-when-ready", async move {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while tokio::net::UnixStream::connect(&socket).await.is_err() {
            if tokio::time::Instant::now() > deadline {
                tracing::error!(subsys = "cni-config", socket = %socket.display(), "API never answered; CNI configuration not written");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        if let Err(e) = cni.write() {
            tracing::error!(subsys = "cni-config", file = %cni.path.display(), error = %e, "Unable to write CNI configuration");
        }
        controllers.spawn(
            "write-cni-file",
            std::time::Duration::from_secs(10),
            move || {
                let cni = cni.clone();
                async move { cni.write().map(drop).map_err(|e| e.to_string()) }
            },
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_once_exclusive_and_removed_on_uninstall() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("10-flannel.conflist"), "{}").unwrap();
        std::fs::write(d.join("05-cilium.conf"), "{}").unwrap();
        std::fs::write(d.join("README"), "keep").unwrap();
        let c = CniConfig {
            path: d.join("05-cilium.conflist"),
            exclusive: true,
            uninstall: true,
            debug: false,
            log_file: "/var/run/cilium/cilium-cni.log".into(),
        };
        let moved = c.write().unwrap();
        assert_eq!(moved.len(), 2);
        assert!(d.join("10-flannel.conflist.cilium_bak").exists());
        assert!(d.join("05-cilium.conf.cilium_bak").exists());
        assert!(d.join("README").exists());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&c.path).unwrap()).unwrap();
        assert_eq!(v["plugins"][0]["type"], "cilium-cni");
        assert!(c.write().unwrap().is_empty(), "nothing new to set aside");
        c.remove();
        assert!(!c.path.exists());
    }
}
