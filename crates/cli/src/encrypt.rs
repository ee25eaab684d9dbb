//! `cilium encrypt status`: the agent's encryption mode. This agent runs
//! neither IPsec nor WireGuard (the kernel here has neither), so the mode
//! is the one 1.16 reports with encryption off.

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
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::Status { output } = cmd;
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
