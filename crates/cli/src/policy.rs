//! `cilium policy import|get|delete|trace|selectors|wait`.

use crate::table::print_json;
use crate::Ctx;
use anyhow::Context;
use api::endpoint::EndpointState;
use api::models::Policy;
use std::io::Read;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Import security policy in YAML or JSON format (a file, or - for stdin)
    Import {
        /// Policy file; `-` reads standard input
        path: String,
    },
    /// Display policy node information
    Get {
        /// Only policies whose labels include all of these
        labels: Vec<String>,
        /// json for the agent's answer as is
        #[arg(short = 'o', long)]
        output: Option<String>,
    },
    /// Trace a policy decision
    Trace(TraceArgs),
    /// Display cached information about selectors
    Selectors {
        #[arg(short = 'o', long)]
        output: Option<String>,
        /// Show the full labels
        #[arg(short = 'v', long)]
        verbose: bool,
    },
    /// Wait for all endpoints to have updated to a given policy revision
    Wait(WaitArgs),
    /// Validate a policy
    Validate {
        /// A policy file or a directory of them; `-` reads standard input
        path: Option<String>,
        /// Print policy after validation
        #[arg(long)]
        print: bool,
        /// Enable verbose output
        #[arg(short = 'v', long, default_value_t = true, num_args = 0..=1,
              default_missing_value = "true", action = clap::ArgAction::Set)]
        verbose: bool,
    },
    /// Delete policy rules
    Delete {
        /// Policies whose labels include all of these
        labels: Vec<String>,
        /// Delete all policies
        #[arg(long)]
        all: bool,
    },
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Source label context (repeat or comma-separate)
    #[arg(short = 's', long = "src", value_delimiter = ',')]
    src: Vec<String>,
    /// Destination label context
    #[arg(short = 'd', long = "dst", value_delimiter = ',')]
    dst: Vec<String>,
    /// Source identity
    #[arg(long = "src-identity")]
    src_identity: Option<u32>,
    /// Destination identity
    #[arg(long = "dst-identity")]
    dst_identity: Option<u32>,
    /// Source pod: [namespace:]pod-name
    #[arg(long = "src-k8s-pod")]
    src_k8s_pod: Option<String>,
    /// Destination pod: [namespace:]pod-name
    #[arg(long = "dst-k8s-pod")]
    dst_k8s_pod: Option<String>,
    /// Destination port, as port[/protocol] (repeatable)
    #[arg(long = "dport")]
    dport: Vec<String>,
    /// Set tracing to TRACE_VERBOSE
    #[arg(short = 'v', long)]
    verbose: bool,
}

#[derive(clap::Args)]
pub struct WaitArgs {
    /// The policy revision (as `policy import` printed it)
    revision: u64,
    /// Sleep interval between checks (seconds)
    #[arg(long = "sleep-time", default_value_t = 1.0)]
    sleep_time: f64,
    /// Wait time after which command fails if endpoint regeneration fails (seconds)
    #[arg(long = "fail-wait-time", default_value_t = 60.0)]
    fail_wait_time: f64,
    /// Wait time after which command fails (seconds)
    #[arg(long = "max-wait-time", default_value_t = 360.0)]
    max_wait_time: f64,
}

/// Polls the endpoint list until every endpoint is ready at `revision` or
/// later, as Cilium's `policy wait` does: a failed endpoint ends the wait
/// after `fail-wait-time`, anything else after `max-wait-time`.
fn wait(client: &api::Client, a: &WaitArgs) -> anyhow::Result<ExitCode> {
    use std::time::{Duration, Instant};
    let secs = |s: f64, flag: &str| {
        Duration::try_from_secs_f64(s).map_err(|_| anyhow::anyhow!("invalid --{flag} {s}"))
    };
    let sleep = secs(a.sleep_time, "sleep-time")?;
    let fail_after = secs(a.fail_wait_time, "fail-wait-time")?;
    let give_up_after = secs(a.max_wait_time, "max-wait-time")?;
    let start = Instant::now();
    let mut waited = false;
    loop {
        let eps: Vec<api::endpoint::Endpoint> = client
            .get_json("/endpoint", &[])
            .context("cannot list endpoints")?;
        let needed = eps.len();
        let ready = eps
            .iter()
            .filter(|e| {
                e.status.state == EndpointState::Ready.as_str()
                    && e.status.policy.realized.policy_revision >= a.revision
            })
            .count();
        let failed = eps
            .iter()
            .filter(|e| e.status.state == EndpointState::NotReady.as_str())
            .count();
        if ready == needed {
            if waited {
                println!();
            }
            return Ok(ExitCode::SUCCESS);
        }
        let elapsed = start.elapsed();
        if elapsed >= fail_after && failed > 0 {
            eprintln!("\n{failed} endpoints have failed regeneration after {elapsed:?}");
            return Ok(ExitCode::FAILURE);
        }
        if elapsed >= give_up_after {
            eprintln!(
                "\n{} endpoints still not ready after {elapsed:?} ({failed} failed)",
                needed - ready
            );
            return Ok(ExitCode::FAILURE);
        }
        print!(
            "\rWaiting for endpoints to run policy revision {}: {ready}/{needed}              ",
            a.revision
        );
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::thread::sleep(sleep);
        waited = true;
    }
}

fn peer(labels: &[String], identity: Option<u32>, pod: &Option<String>) -> serde_json::Value {
    serde_json::json!({ "labels": labels, "identity": identity, "k8s-pod": pod })
}

fn trace(client: &api::Client, a: &TraceArgs) -> anyhow::Result<ExitCode> {
    let mut dports = Vec::new();
    for d in &a.dport {
        let (port, proto) = d.split_once('/').unwrap_or((d, "TCP"));
        let port: u16 = port
            .parse()
            .map_err(|_| anyhow::anyhow!("invalid --dport {d:?}: expected port[/protocol]"))?;
        dports.push(serde_json::json!({ "port": port, "protocol": proto }));
    }
    let body = serde_json::json!({
        "from": peer(&a.src, a.src_identity, &a.src_k8s_pod),
        "to": peer(&a.dst, a.dst_identity, &a.dst_k8s_pod),
        "dports": dports,
    });
    let resp = client.call(
        "GET",
        "/policy/resolve",
        &[],
        Some(&serde_json::to_vec(&body)?),
    )?;
    let resp: serde_json::Value = serde_json::from_slice(&resp)?;
    print!("{}", resp["log"].as_str().unwrap_or_default());
    let _ = a.verbose;
    Ok(ExitCode::SUCCESS)
}

fn read(path: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    if path == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the policy from stdin")?;
    } else {
        text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    }
    Ok(text)
}

/// The policy files at `path`: the file itself, or a directory's files
/// first and then its subdirectories' (`.git` skipped), each in name
/// order, as 1.16 walks them.
fn policy_files(path: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!(crate::gofmt::path_error("stat", path, &e)))?;
    if meta.is_file() {
        out.push(path.to_owned());
        return Ok(());
    }
    if !meta.is_dir() {
        anyhow::bail!("{} is not a file or a directory", path.display());
    }
    let mut entries: Vec<_> = std::fs::read_dir(path)?
        .flatten()
        .filter(|e| e.file_name() != ".git")
        .map(|e| e.path())
        .collect();
    entries.sort();
    let (dirs, files): (Vec<_>, Vec<_>) = entries.into_iter().partition(|p| p.is_dir());
    out.extend(files);
    for dir in dirs {
        policy_files(&dir, out)?;
    }
    Ok(())
}

/// `cilium policy validate`: every rule at `path` parses and passes the
/// checks the agent makes, without asking the agent.
fn validate(path: Option<&str>, print: bool, verbose: bool) -> anyhow::Result<ExitCode> {
    let cmd = ["policy", "validate"];
    let path = match path {
        None => return Ok(crate::usage_error(&cmd, "Missing path argument")),
        Some("") => return Ok(crate::usage_error(&cmd, "Empty path argument")),
        Some(p) => p,
    };
    let failed = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!("Validation of policy {path} has failed: {e}\n")
    };
    let mut texts = Vec::new();
    if path == "-" {
        texts.push(read(path)?);
    } else {
        let mut files = Vec::new();
        policy_files(std::path::Path::new(path), &mut files).map_err(|e| failed(&e))?;
        for f in files {
            texts.push(std::fs::read_to_string(&f).map_err(|e| failed(&e))?);
        }
    }
    let mut rules = Vec::new();
    for text in &texts {
        for doc in policy::parse::parse_documents(text).map_err(|e| failed(&e))? {
            match serde_json::from_str::<serde_json::Value>(&doc.text) {
                Ok(serde_json::Value::Array(items)) => rules.extend(items),
                Ok(rule) => rules.push(rule),
                Err(_) => rules.push(doc.text.into()),
            }
        }
    }
    if verbose {
        println!("All policy elements in {path} are valid.");
    }
    if print {
        print!("{}", serde_json::to_string_pretty(&rules)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn parse(body: &[u8]) -> anyhow::Result<Policy> {
    serde_json::from_slice(body).context("unexpected answer from the agent")
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::Import { path } => {
            let text = read(path)?;
            let body = client.call("PUT", "/policy", &[], Some(text.as_bytes()))?;
            // the answer repeats the whole policy, indented; only the
            // revision is printed, so only the revision is read
            #[derive(serde::Deserialize)]
            struct Imported {
                revision: u64,
            }
            let p: Imported =
                serde_json::from_slice(&body).context("unexpected answer from the agent")?;
            println!("Revision: {}", p.revision);
        }
        Command::Get { labels, output } => {
            let joined = labels.join(",");
            let headers: Vec<(&str, &str)> = if labels.is_empty() {
                Vec::new()
            } else {
                vec![("labels", joined.as_str())]
            };
            let p = parse(&client.call("GET", "/policy", &headers, None)?)?;
            if output.is_some() {
                print_json(&p)?;
            } else {
                print!("{}", p.policy);
                println!("Revision: {}", p.revision);
            }
        }
        Command::Trace(a) => return trace(&client, a),
        Command::Wait(a) => return wait(&client, a),
        Command::Selectors { output, verbose } => {
            let mut list: Vec<serde_json::Value> = client.get_json("/policy/selectors", &[])?;
            if output.is_some() {
                print_json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            list.sort_by(|a, b| a["selector"].as_str().cmp(&b["selector"].as_str()));
            let mut rows = vec![crate::row!["SELECTOR", "LABELS", "USERS", "IDENTITIES"]];
            for s in &list {
                let ids: Vec<String> = s["identities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|i| i.to_string())
                    .collect();
                let labels = selector_labels(&s["labels"]);
                let shown = if *verbose {
                    let mut all: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
                    all.sort();
                    all.join(", ")
                } else {
                    policy_name(&labels)
                };
                let first = ids.first().cloned().unwrap_or_default();
                rows.push(crate::row![
                    s["selector"].as_str().unwrap_or_default(),
                    shown,
                    s["users"].as_u64().unwrap_or(0),
                    first
                ]);
                for id in ids.iter().skip(1) {
                    rows.push(crate::row!["", "", "", id]);
                }
            }
            crate::table::print(&rows);
        }
        Command::Validate {
            path,
            print,
            verbose,
        } => return validate(path.as_deref(), *print, *verbose),
        Command::Delete { labels, all } => {
            if labels.is_empty() && !all {
                anyhow::bail!("specify the labels of the policies to delete, or --all");
            }
            if !labels.is_empty() && *all {
                anyhow::bail!("give either labels or --all, not both");
            }
            let body = serde_json::to_vec(labels)?;
            let p = parse(&client.call("DELETE", "/policy", &[], Some(&body))?)?;
            println!("Revision: {}", p.revision);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A selector's labels as the API sends them: `{key, value, source}`.
fn selector_labels(v: &serde_json::Value) -> Vec<policy::labels::Label> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            policy::labels::Label::new(&field("source"), &field("key"), &field("value"))
        })
        .collect()
}

/// `namespace/name` of the policy the labels name, as Cilium's selectors
/// column shows it; empty for a policy that is not namespaced.
fn policy_name(labels: &[policy::labels::Label]) -> String {
    let get = |key: &str| {
        labels
            .iter()
            .find(|l| l.source == policy::labels::SOURCE_K8S && l.key == key)
            .map(|l| l.value.as_str())
    };
    match get("io.cilium.k8s.policy.namespace") {
        Some(ns) => format!(
            "{ns}/{}",
            get("io.cilium.k8s.policy.name").unwrap_or_default()
        ),
        None => String::new(),
    }
}
