//! `cilium-sysctlfix`: writes the rp_filter drop-in and asks systemd to
//! apply it. Every problem is reported and the tool still exits 0, as an
//! init container must not block the node on it. An empty
//! `--systemd-sysctl-unit` skips the reload (the lab and tests, which must
//! never apply sysctls to the machine they run on).

use clap::Parser;
use tools::sysctlfix::{apply, Outcome};

#[derive(Parser)]
#[command(name = "cilium-sysctlfix")]
struct Args {
    /// Path to the sysctl config directory
    #[arg(long = "sysctl-conf-dir", default_value = "/etc/sysctl.d/")]
    sysctl_conf_dir: std::path::PathBuf,
    /// Filename of the cilium sysctl overwrites config file
    #[arg(
        long = "sysctl-config-file",
        default_value = "99-zzz-override_cilium.conf"
    )]
    sysctl_config_file: String,
    /// Name of the systemd sysctl unit to reload
    #[arg(long = "systemd-sysctl-unit", default_value = "systemd-sysctl.service")]
    systemd_sysctl_unit: String,
}

fn main() {
    let args = Args::parse();
    match apply(&args.sysctl_conf_dir, &args.sysctl_config_file) {
        Ok(Outcome::UpToDate) => println!("sysctl config up-to-date, nothing to do"),
        Ok(Outcome::Written) => {
            println!("sysctl config created/updated");
            let unit = &args.systemd_sysctl_unit;
            if unit.is_empty() {
                println!("no systemd unit given, not reloading");
                return;
            }
            match std::process::Command::new("systemctl")
                .args(["restart", unit])
                .status()
            {
                Ok(s) if s.success() => println!("systemd unit '{unit}' restarted"),
                Ok(s) => println!("failed to restart systemd unit '{unit}': {s}"),
                Err(e) => println!("failed to restart systemd unit '{unit}': {e}"),
            }
        }
        Err(e) => println!(
            "failed to write {}: {e}",
            args.sysctl_conf_dir
                .join(&args.sysctl_config_file)
                .display()
        ),
    }
}
