//! `cilium identity list|get`.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use api::endpoint::Identity;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List identities
    #[command(alias = "ls")]
    List(ListArgs),
    /// Retrieve information about an identity
    Get {
        /// Numeric identity
        id: u32,
        #[command(flatten)]
        args: ListArgs,
    },
}

/// `ID  LABELS`, one label per row.
fn print_table(ids: &[Identity]) {
    let mut rows = vec![row!["ID", "LABELS"]];
    for identity in ids {
        let mut first = true;
        for label in &identity.labels {
            let id = if first {
                identity.id.to_string()
            } else {
                String::new()
            };
            rows.push(row![id, label]);
            first = false;
        }
        if first {
            rows.push(row![identity.id, ""]);
        }
    }
    print(&rows);
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    let (ids, args): (Vec<Identity>, &ListArgs) = match cmd {
        Command::List(args) => (client.get_json("/identity", &[])?, args),
        Command::Get { id, args } => (
            vec![client.get_json(&format!("/identity/{id}"), &[])?],
            args,
        ),
    };
    if args.output.is_some() {
        match cmd {
            Command::Get { .. } => print_json(&ids[0])?,
            Command::List(_) => print_json(&ids)?,
        }
    } else {
        print_table(&ids);
    }
    Ok(ExitCode::SUCCESS)
}
