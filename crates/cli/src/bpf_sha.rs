//! `cilium bpf sha list|get`: the datapath templates in the state
//! directory and the endpoints running each, as 1.16 lists them.

use crate::table::{print_json, print_keyed, ListArgs};
use crate::Ctx;
use abi::state_dir::{ENDPOINT_TEMPLATE, TEMPLATES_DIR, TEMPLATE_HEADER};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List BPF template objects
    #[command(alias = "ls")]
    List(ListArgs),
    /// Get datapath SHA header
    #[command(alias = "describe")]
    Get {
        sha: Option<String>,
        #[command(flatten)]
        args: ListArgs,
    },
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::List(args) => list(&ctx.state_dir, args),
        Command::Get { sha: None, .. } => {
            // 1.16 prints the command's help and succeeds
            crate::print_help(&["bpf", "sha", "get"]);
            Ok(ExitCode::SUCCESS)
        }
        Command::Get {
            sha: Some(sha),
            args,
        } => get(&ctx.state_dir, sha, args),
    }
}

/// Each template with the endpoints whose template.txt names it; an
/// endpoint naming no template is listed under what is wrong with it.
fn templates(state: &Path) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let templates = state.join(TEMPLATES_DIR);
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(&templates).map_err(|e| {
        let e = crate::gofmt::path_error("open", &templates, &e);
        anyhow::anyhow!("failed to list template directory: {e}")
    })?;
    for e in entries.flatten() {
        out.insert(e.file_name().to_string_lossy().into_owned(), Vec::new());
    }
    let mut endpoints: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(state)
        .map_err(|e| anyhow::anyhow!("failed to list state directory: {e}"))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    endpoints.sort();
    for (id, dir) in endpoints {
        let sha = match std::fs::read_to_string(dir.join(ENDPOINT_TEMPLATE)) {
            Ok(s) if templates.join(s.trim()).exists() => s.trim().to_owned(),
            Ok(_) => "<template path invalid>".to_owned(),
            Err(_) => "<missing template.txt>".to_owned(),
        };
        out.entry(sha).or_default().push(id.to_string());
    }
    Ok(out)
}

fn list(state: &Path, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let mut templates = templates(state)?;
    if args.output.is_some() {
        print_json(&templates)?;
        return Ok(ExitCode::SUCCESS);
    }
    if templates.is_empty() {
        eprintln!("No entries found.");
        return Ok(ExitCode::SUCCESS);
    }
    for endpoints in templates.values_mut() {
        if endpoints.is_empty() {
            endpoints.push("-".into());
        }
    }
    print_keyed("Datapath SHA", "Endpoint(s)", &templates);
    Ok(ExitCode::SUCCESS)
}

/// The template's header (1.16's JSON form is its ep_config.json, which a
/// template here does not have: the same header, as a string).
fn get(state: &Path, sha: &str, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let path = state.join(TEMPLATES_DIR).join(sha).join(TEMPLATE_HEADER);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let e = crate::gofmt::path_error("open", &path, &e);
        anyhow::anyhow!("Failed to describe SHA: {e}")
    })?;
    if args.output.is_some() {
        print_json(&text)?;
    } else {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
