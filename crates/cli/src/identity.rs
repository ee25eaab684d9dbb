//! `cilium identity list|get`.

use crate::table::{print, print_json, tabwrite, ListArgs};
use crate::{row, Ctx};
use api::endpoint::Identity;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List identities
    #[command(alias = "ls")]
    List {
        /// list identities of locally managed endpoints
        #[arg(long)]
        endpoints: bool,
        #[command(flatten)]
        args: ListArgs,
    },
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

/// One entry of `GET /identity/endpoints` (`IdentityEndpoints`).
#[derive(serde::Serialize, serde::Deserialize)]
struct IdentityEndpoints {
    identity: Identity,
    #[serde(rename = "refCount", default)]
    ref_count: i64,
}

/// `identity list --endpoints`: the identities this node's endpoints
/// have, each with how many endpoints have it, as 1.16 prints them.
fn list_endpoints(ctx: &Ctx, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let mut list: Vec<IdentityEndpoints> = ctx.client()?.get_json("/identity/endpoints", &[])?;
    if args.output.is_some() {
        print_json(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    list.sort_by_key(|e| e.identity.id);
    let mut text = String::from("ID\tLABELS\tREFCOUNT\n");
    for e in &list {
        let mut labels = e.identity.labels.clone();
        labels.sort();
        for (i, label) in labels.iter().enumerate() {
            if i == 0 {
                text.push_str(&format!("{}\t{label}\t{}\t\n", e.identity.id, e.ref_count));
            } else {
                text.push_str(&format!("\t{label}\t\n"));
            }
        }
    }
    print!("{}", tabwrite(&text, 5, 3));
    Ok(ExitCode::SUCCESS)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    if let Command::List {
        endpoints: true,
        args,
    } = cmd
    {
        return list_endpoints(ctx, args);
    }
    let client = ctx.client()?;
    let (ids, args): (Vec<Identity>, &ListArgs) = match cmd {
        Command::List { args, .. } => (client.get_json("/identity", &[])?, args),
        Command::Get { id, args } => (
            vec![client.get_json(&format!("/identity/{id}"), &[])?],
            args,
        ),
    };
    if args.output.is_some() {
        match cmd {
            Command::Get { .. } => print_json(&ids[0])?,
            Command::List { .. } => print_json(&ids)?,
        }
    } else {
        print_table(&ids);
    }
    Ok(ExitCode::SUCCESS)
}
