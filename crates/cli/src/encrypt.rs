//! `cilium encrypt status|flush`: the agent's encryption mode, and the
//! node's IPsec (XFRM) state. This agent runs neither IPsec nor WireGuard
//! (the kernel here has neither), so the mode is the one 1.16 reports with
//! encryption off, and it installs no XFRM state for `flush` to filter.

use crate::table::{print_json, Output};
use crate::Ctx;
use api::status::{EncryptionStatus, StatusResponse};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Display the current encryption state
    Status {
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<Output>,
    },
    /// Flushes the current IPsec state
    Flush(FlushArgs),
}

#[derive(clap::Args)]
pub struct FlushArgs {
    /// Skip confirmation
    #[arg(short = 'f', long)]
    force: bool,
    /// Only delete states and policies with this SPI. If multiple filters are used, they all apply
    #[arg(long, default_value_t = 0)]
    spi: u8,
    /// Only delete states and policies with this node ID. Decimal or hexadecimal (0x) format. If multiple filters are used, they all apply
    #[arg(long = "node-id", default_value = "")]
    node_id: String,
    /// Delete stale states and policies based on the current node ID map content
    #[arg(long)]
    stale: bool,
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
}

/// `ip xfrm <args>`, its output.
fn xfrm(args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("ip")
        .arg("xfrm")
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("running ip xfrm: {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "ip xfrm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How many states (`src ...` blocks) and policies `ip xfrm` lists.
fn xfrm_counts() -> anyhow::Result<(usize, usize)> {
    let count = |text: String, lead: &str| text.lines().filter(|l| l.starts_with(lead)).count();
    Ok((
        count(xfrm(&["state", "list"])?, "src "),
        count(xfrm(&["policy", "list"])?, "src "),
    ))
}

fn flush(a: &FlushArgs) -> anyhow::Result<ExitCode> {
    if a.spi == 0 && a.node_id.is_empty() && !a.stale {
        if !a.force
            && !crate::confirm("Flushing all XFRM states and policies can lead to transient connectivity interruption and plain-text pod-to-pod traffic. Do you want to continue? [y/N] ")?
        {
            return Ok(ExitCode::SUCCESS);
        }
        xfrm(&["policy", "flush"])?;
        xfrm(&["state", "flush", "proto", "esp"])?;
        println!("All XFRM states and policies have been deleted.");
        return Ok(ExitCode::SUCCESS);
    }
    if a.stale && (a.spi != 0 || !a.node_id.is_empty()) {
        anyhow::bail!("--stale cannot be combined with other flags except for --force");
    }
    if a.spi > 15 {
        anyhow::bail!("Given SPI is too big");
    }
    if !a.node_id.is_empty() {
        let parsed = match a.node_id.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => a.node_id.parse(),
        };
        let why = match parsed {
            Err(_) => Some(format!(
                "strconv.ParseInt: parsing {:?}: invalid syntax",
                a.node_id
            )),
            Ok(0) => Some("0 is not a valid node ID in this context".to_owned()),
            Ok(n) if !(1..=i64::from(u16::MAX)).contains(&n) => {
                Some("given node ID doesn't fit in uint16".to_owned())
            }
            Ok(_) => None,
        };
        if let Some(why) = why {
            anyhow::bail!("Unable to parse node ID {:?}: {why}", a.node_id);
        }
    }
    let (states, policies) = xfrm_counts()?;
    if states + policies > 0 {
        anyhow::bail!(
            "{states} XFRM states and {policies} XFRM policies exist that this agent did not install (it runs no IPsec); flush them all without filters, or with ip xfrm"
        );
    }
    if a.stale {
        print!("No stale XFRM states or policies found.");
        return Ok(ExitCode::SUCCESS);
    }
    if !a.force
        && !crate::confirm("Running this command will delete all XFRM states and/or policies. It will lead to transient connectivity disruption and plain-text pod-to-pod traffic. Do you want to continue? [y/N] ")?
    {
        return Ok(ExitCode::SUCCESS);
    }
    println!("Deleted 0 XFRM states.");
    println!("Deleted 0 XFRM policies.");
    Ok(ExitCode::SUCCESS)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let output = match cmd {
        Command::Status { output } => output,
        Command::Flush(a) => return flush(a),
    };
    let status: StatusResponse = ctx
        .client()?
        .get_json("/healthz", &[("brief", "false")])
        .map_err(|e| anyhow::anyhow!("Cannot get daemon encryption status: {e}"))?;
    let enc = status.encryption.unwrap_or_else(|| EncryptionStatus {
        mode: "Disabled".into(),
        ..Default::default()
    });
    if output.is_some() {
        print_json(&enc)?;
    } else {
        println!("Encryption: {:<26}", enc.mode);
    }
    Ok(ExitCode::SUCCESS)
}
