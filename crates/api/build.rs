//! Records the git revision for `cilium version` and the status line.
fn main() {
    let rev = std::process::Command::new("git")
        .args(["rev-parse", "--short=8", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CILIUM_GIT_REVISION={rev}");
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    // HEAD names a branch; a commit changes the branch's ref, not HEAD.
    if let Ok(head) = std::fs::read_to_string("../../.git/HEAD") {
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed=../../.git/{r}");
        }
    }
}
