//! `cilium prefilter list`: the XDP prefilter's CIDRs. The agent runs no
//! prefilter and answers 500, reported as 1.16 reports it.

use crate::table::{print_json, ListArgs};
use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List CIDR filters
    #[command(alias = "ls")]
    List(ListArgs),
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List(args) = cmd;
    let prefilter: serde_json::Value = match ctx.client()?.get_json("/prefilter", &[]) {
        Ok(v) => v,
        Err(api::ClientError::Api {
            status: 500,
            message,
        }) => anyhow::bail!(
            "Cannot get CIDR list: [GET /prefilter][500] getPrefilterFailure  {message}"
        ),
        Err(e) => anyhow::bail!("Cannot get CIDR list: {e}"),
    };
    let realized = &prefilter["status"]["realized"];
    if realized.is_null() {
        anyhow::bail!("Cannot get CIDR list: empty response");
    }
    if args.output.is_some() {
        print_json(&prefilter["spec"])?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("Revision: {}", realized["revision"].as_i64().unwrap_or(0));
    for cidr in realized["deny"].as_array().into_iter().flatten() {
        println!("{}", cidr.as_str().unwrap_or(""));
    }
    Ok(ExitCode::SUCCESS)
}
