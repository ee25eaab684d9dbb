//! The agent's pid file: written at start, removed on clean exit. Its
//! presence is what `cilium cleanup` checks before touching state.

use std::io;
use std::path::{Path, PathBuf};

pub struct PidFile {
    path: PathBuf,
}

/// True when `pid` is a live cilium-agent process.
fn is_live_agent(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim() == "cilium-agent")
        .unwrap_or(false)
}

impl PidFile {
    /// Writes our pid; refuses while the file names another live agent.
    pub fn write(path: &Path) -> io::Result<Self> {
        if let Ok(old) = std::fs::read_to_string(path) {
            if let Ok(pid) = old.trim().parse::<i32>() {
                if pid != std::process::id() as i32 && is_live_agent(pid) {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!(
                            "another cilium-agent (pid {pid}) is running per {}",
                            path.display()
                        ),
                    ));
                }
            }
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("pid.tmp");
        std::fs::write(&tmp, format!("{}\n", std::process::id()))?;
        std::fs::rename(&tmp, path)?;
        Ok(Self {
            path: path.to_owned(),
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
