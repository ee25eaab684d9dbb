//! Compiles every `bpf/bpf_*.c` entry object with Debian's clang for the BPF
//! target. The objects are embedded in the crate, so binaries need no BPF
//! sources at run time and creating a pod never runs a compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

const OBJECTS: &[&str] = &["bpf_lxc", "bpf_host", "bpf_overlay", "bpf_sock"];

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", root.display());
    for dir in ["include", "lib"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("bpf source dir") {
            println!(
                "cargo:rerun-if-changed={}",
                entry.expect("dir entry").path().display()
            );
        }
    }
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let multiarch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    // Each object twice: IPv4 only, and dual stack (ENABLE_IPV6, 1.16's
    // switch), which the loader picks when IPv6 is on. The compilers run
    // side by side.
    let variants: [(&str, &[&str]); 2] = [("", &[]), ("_v6", &["-DENABLE_IPV6"])];
    std::thread::scope(|s| {
        for name in OBJECTS {
            let src = root.join(format!("{name}.c"));
            println!("cargo:rerun-if-changed={}", src.display());
            for (suffix, defines) in variants {
                let src = src.clone();
                let (root, out, clang, multiarch) = (&root, &out, &clang, &multiarch);
                s.spawn(move || {
                    let obj = out.join(format!("{name}{suffix}.o"));
                    let status = Command::new(clang)
                        .args([
                            "-O2",
                            "-g",
                            "-target",
                            "bpf",
                            "-std=gnu11",
                            "-Wall",
                            "-Werror",
                        ])
                        .args(defines)
                        .arg("-I")
                        .arg(root.join("include"))
                        .arg("-I")
                        .arg(root)
                        .arg("-I")
                        .arg(multiarch)
                        .arg("-c")
                        .arg(&src)
                        .arg("-o")
                        .arg(&obj)
                        .status()
                        .unwrap_or_else(|e| {
                            panic!("running {clang} (install Debian's clang): {e}")
                        });
                    assert!(
                        status.success(),
                        "clang failed to build {}{suffix}.o from {}",
                        name,
                        src.display()
                    );
                });
            }
        }
    });
}
