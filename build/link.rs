//! Build script shared by the crates whose binaries ship. It sets how they
//! are linked:
//!
//! - Position-dependent, as Go (and so Cilium) links its own. A PIE
//!   cilium-agent applied ~49,000 relocations at every start, reading 1.2 MB
//!   of relocation table and dirtying 0.9 MB of pointer tables (1.4 MB of
//!   its idle RSS); every `cilium` and `cilium-cni` run paid for the same
//!   before its first line of work.
//! - With the functions a profiled run executed placed first, when the crate
//!   has a `symbol-order.txt` (scripts/symbol-order.sh writes it). The kernel
//!   maps a binary's pages 64 KB around each one touched, so code that runs
//!   scattered among code that never does keeps megabytes of the latter
//!   resident. Symbols the build no longer has are skipped, so a stale list
//!   costs only its benefit.

use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-link-arg-bins=-no-pie");
    let dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let order = dir.join("symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    if order.exists() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
