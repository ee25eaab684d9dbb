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
//! - cilium-cni statically. The runtime execs it for every pod; linked
//!   against the shared libc its start mapped and relocated libc and
//!   libgcc_s first, about a quarter millisecond of a 3-4 ms ADD. It
//!   resolves no names, so static glibc's NSS limits do not touch it.
//!   This is the fallback: scripts/build-cni.sh builds the one that ships
//!   for musl (see there), which is static and position-dependent by the
//!   target and .cargo/config.toml, so none of the above applies to it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Packages whose binaries link statically.
const STATIC: &[&str] = &["cni"];

/// The libraries rustc's standard library asks the linker for, each
/// `-Bdynamic`: a shared one would make a `-static` binary without an
/// interpreter.
const STD_LIBS: &[&str] = &["gcc_s", "util", "rt", "pthread", "m", "dl", "c"];

/// The compiler driver's path of a library file, when it has one.
fn archive(name: &str) -> Option<String> {
    let out = Command::new("cc")
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    // an unknown file is echoed back bare
    Path::new(&path).is_absolute().then_some(path)
}

/// Links the package's binaries statically: rustc names its libraries
/// after `-Bdynamic`, so a directory searched first holds a `lib<x>.so`
/// for each, a linker script naming the static archive instead. Returns
/// false, leaving the link dynamic, when an archive is missing.
fn link_statically() -> bool {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (Some(gcc), Some(gcc_eh)) = (archive("libgcc.a"), archive("libgcc_eh.a")) else {
        return false;
    };
    for lib in STD_LIBS {
        let script = match *lib {
            "gcc_s" => format!("INPUT({gcc_eh})\n"),
            "c" => match archive("libc.a") {
                Some(c) => format!("GROUP({c} {gcc} {gcc_eh})\n"),
                None => return false,
            },
            other => match archive(&format!("lib{other}.a")) {
                Some(a) => format!("INPUT({a})\n"),
                None => return false,
            },
        };
        let file = out.join(format!("lib{lib}.so"));
        std::fs::write(&file, script).expect("writing a linker script to OUT_DIR");
    }
    // as a link argument, not a search path, so that only the binaries
    // (not the package's test harnesses) find these scripts
    println!("cargo:rustc-link-arg-bins=-L{}", out.display());
    println!("cargo:rustc-link-arg-bins=-static");
    true
}

fn main() {
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl");
    if !musl {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    let dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let order = dir.join("symbol-order.txt");
    // A missing file named here would rerun this script, and so relink the
    // binaries, on every build; while there is none, the package's dir
    // (cargo scans it) tells when one appears.
    let watched = if order.exists() { &order } else { &dir };
    println!("cargo:rerun-if-changed={}", watched.display());
    if order.exists() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    if STATIC.contains(&package.as_str()) && !musl && !link_statically() {
        println!("cargo:warning=no static libc or libgcc_eh: {package} links dynamically");
    }
}
