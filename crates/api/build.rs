//! Records the git revision and author date, the compiler and the target
//! for `cilium version`, `/debuginfo` and the status line.
use std::process::Command;

fn output(cmd: &mut Command) -> Option<String> {
    cmd.output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    let rev = output(Command::new("git").args(["rev-parse", "--short=8", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let date = output(Command::new("git").args(["log", "-1", "--format=%aI", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // "rustc 1.90.0 (1159e78c4 2025-09-14)" -> "1.90.0"
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = output(Command::new(rustc).arg("--version"))
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH")
        .unwrap_or_default()
        .as_str()
    {
        "x86_64" => "amd64".to_owned(),
        "aarch64" => "arm64".to_owned(),
        "x86" => "386".to_owned(),
        other => other.to_owned(),
    };
    println!("cargo:rustc-env=CILIUM_GIT_REVISION={rev}");
    println!("cargo:rustc-env=CILIUM_GIT_AUTHOR_DATE={date}");
    println!("cargo:rustc-env=CILIUM_RUSTC_VERSION=rustc version {rustc_version}");
    println!("cargo:rustc-env=CILIUM_PLATFORM={os}/{arch}");
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    // HEAD names a branch; a commit changes the branch's ref, not HEAD.
    if let Ok(head) = std::fs::read_to_string("../../.git/HEAD") {
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed=../../.git/{r}");
        }
    }
}
