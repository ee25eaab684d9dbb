//! `cilium prefilter list|update|delete`: the XDP prefilter's CIDRs. The
//! agent runs no prefilter and answers 500, reported as 1.16 reports it.

use crate::table::{print_json, ListArgs};
use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List CIDR filters
    #[command(alias = "ls")]
    List(ListArgs),
    /// Update CIDR filters
    Update(ChangeArgs),
    /// Delete CIDR filters
    Delete(ChangeArgs),
}

#[derive(clap::Args)]
pub struct ChangeArgs {
    /// Update revision
    #[arg(long, default_value_t = 0)]
    revision: u64,
    /// List of CIDR prefixes
    #[arg(long, value_delimiter = ',')]
    cidr: Vec<String>,
}

/// `PATCH` (update) or `DELETE` the CIDRs, checked here first as 1.16
/// checks them.
fn change(ctx: &Ctx, args: &ChangeArgs, update: bool) -> anyhow::Result<ExitCode> {
    for c in &args.cidr {
        if policy::rule::Cidr::parse(c).is_err() {
            anyhow::bail!("Cannot parse CIDR \"{c}\": invalid CIDR address: {c}");
        }
    }
    let mut spec = serde_json::json!({ "deny": args.cidr });
    if args.revision != 0 {
        spec["revision"] = args.revision.into();
    }
    let (method, what, op, done) = if update {
        (
            "PATCH",
            "Cannot add/update prefilter",
            "patchPrefilter",
            "Updated",
        )
    } else {
        (
            "DELETE",
            "Cannot delete prefilter",
            "deletePrefilter",
            "Deleted",
        )
    };
    let body = spec.to_string();
    match ctx
        .client()?
        .call(method, "/prefilter", &[], Some(body.as_bytes()))
    {
        Ok(_) => {
            println!("{done} {} prefilter entries", args.cidr.len());
            Ok(ExitCode::SUCCESS)
        }
        Err(api::ClientError::Api { status, message }) => {
            let suffix = match status {
                403 => "Forbidden",
                461 => "InvalidCIdR",
                _ => "Failure",
            };
            anyhow::bail!("{what}: [{method} /prefilter][{status}] {op}{suffix}  {message}")
        }
        Err(e) => anyhow::bail!("{what}: {e}"),
    }
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let args = match cmd {
        Command::List(args) => args,
        Command::Update(a) => return change(ctx, a, true),
        Command::Delete(a) => return change(ctx, a, false),
    };
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
