//! `cilium lrp list`: local redirect policies (none here: the agent runs
//! no LRP manager and lists none), in 1.16's table.

use crate::table::{print_json, tabwrite, ListArgs};
use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List local redirect policies
    #[command(alias = "ls")]
    List(ListArgs),
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List(args) = cmd;
    let lrps: Vec<serde_json::Value> = ctx
        .client()?
        .get_json("/lrp", &[])
        .map_err(|e| anyhow::anyhow!("Cannot get lrp list: {e}"))?;
    if args.output.is_some() {
        print_json(&lrps)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::from("LRP namespace\tLRP name\tFrontendType\tMatching Service\n");
    for lrp in &lrps {
        let s = |k: &str| lrp[k].as_str().unwrap_or("").to_owned();
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            s("namespace"),
            s("name"),
            s("frontend-type"),
            s("service-id")
        ));
        for m in lrp["frontend-mappings"].as_array().into_iter().flatten() {
            let fe = &m["frontend-address"];
            let mut mapping = format!(
                "{}:{}/{} -> ",
                fe["ip"].as_str().unwrap_or(""),
                fe["port"].as_u64().unwrap_or(0),
                fe["protocol"].as_str().unwrap_or("")
            );
            for be in m["backends"].as_array().into_iter().flatten() {
                let addr = &be["backend-address"];
                mapping.push_str(&format!(
                    "{}:{}({}), ",
                    addr["ip"].as_str().unwrap_or(""),
                    addr["port"].as_u64().unwrap_or(0),
                    be["pod-id"].as_str().unwrap_or("")
                ));
            }
            text.push_str(&format!("\t|\t{mapping}\n"));
        }
    }
    print!("{}", tabwrite(&text, 5, 3));
    Ok(ExitCode::SUCCESS)
}
