//! `cilium-mount <cgroup-mount-point>`: mounts cgroup v2 there when it is
//! not yet. Never fails the init container once started right: a problem is
//! a warning (socket LB will then not work).

use tools::cgroup::{ensure_mounted, Outcome};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(target) = args.get(1).filter(|_| args.len() == 2) else {
        eprintln!("usage: {} <cgroup-mount-point>", args[0]);
        return std::process::ExitCode::FAILURE;
    };
    let path = std::path::Path::new(target);
    match ensure_mounted(path) {
        Ok(Outcome::Mounted) => {
            println!("level=info msg=\"Mounted cgroupv2 filesystem at {target}\" subsys=cgroups")
        }
        Ok(Outcome::AlreadyMounted) => {
            println!("level=info msg=\"cgroupv2 filesystem already mounted at {target}\" subsys=cgroups")
        }
        Ok(Outcome::OtherFilesystem(magic)) => println!(
            "level=warning msg=\"Mount in the custom directory is not a cgroupv2 filesystem (magic {magic:#x}); socket LB will not work\" mountPoint={target} subsys=cgroups"
        ),
        Err(e) => println!(
            "level=warning msg=\"Failed to mount cgroupv2; socket LB will not work\" error=\"{e}\" mountPoint={target} subsys=cgroups"
        ),
    }
    std::process::ExitCode::SUCCESS
}
