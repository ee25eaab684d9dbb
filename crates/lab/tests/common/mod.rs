//! A lab of the test's own (its own CILIUM_LAB_DIR), taken down at drop.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

const LAB: &str = env!("CARGO_BIN_EXE_cilium-lab");

pub struct Lab {
    pub dir: tempfile::TempDir,
}

impl Lab {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("lab dir"),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(LAB);
        c.env("CILIUM_LAB_DIR", self.dir.path()).args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run cilium-lab")
    }

    /// Runs and insists on success; the combined output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        text(&out)
    }

    pub fn node(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("node{n}"))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
