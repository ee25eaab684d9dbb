//! `cilium debuginfo`: the agent's debugging information as 1.16's
//! markdown report (version, kernel, status with every detail, settings,
//! endpoints with what `cilium` itself says of each, services, policy,
//! memory map, subsystems, encryption), or its JSON model.

use crate::table::render;
use crate::Ctx;
use api::models::DebugInfo;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Redirect output to file(s)
    #[arg(short = 'f', long)]
    file: bool,
    /// Generate a single file per command
    #[arg(long = "file-per-command")]
    file_per_command: bool,
    /// markdown| json (html and jsonpath are not offered here)
    #[arg(long, value_delimiter = ',')]
    output: Vec<String>,
    /// directory for files (if specified will use directory in which this command was ran)
    #[arg(long = "output-directory")]
    output_directory: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Markdown,
    Json,
}

fn formats(args: &Args) -> anyhow::Result<Vec<Format>> {
    if let Some(dir) = &args.output_directory {
        if !args.file {
            anyhow::bail!(
                "invalid option combination; specified output-directory {:?}, but did not specify for output to be redirected to file; exiting",
                dir.display().to_string()
            );
        }
    }
    let mut out = Vec::new();
    for o in &args.output {
        match o.to_lowercase().as_str() {
            "markdown" => out.push(Format::Markdown),
            "json" if args.file_per_command => {
                anyhow::bail!("{o} does not support dumping a file per command; exiting")
            }
            "json" => out.push(Format::Json),
            _ => anyhow::bail!("{o} is not a valid output format; exiting"),
        }
    }
    if args.file && out.is_empty() {
        out.push(Format::Markdown);
    }
    Ok(out)
}

fn md(out: &mut String, header: &str, body: &str) {
    if body.is_empty() {
        let _ = write!(out, "\n#### {header}\n\n");
    } else {
        let _ = write!(out, "\n#### {header}\n\n```\n{body}\n```\n\n");
    }
}

/// What this same CLI prints for `args` (1.16 runs `cilium` from PATH,
/// which on a node is this binary).
fn ours(out: &mut String, header: &str, args: &[&str]) {
    let text = std::env::current_exe()
        .and_then(|exe| std::process::Command::new(exe).args(args).output())
        .map(|o| {
            let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
            t.push_str(&String::from_utf8_lossy(&o.stderr));
            t
        })
        .unwrap_or_default();
    md(out, header, &text);
}

/// Each section under its name (`--file-per-command` writes one file
/// each), in 1.16's list order.
fn sections(p: &DebugInfo) -> Vec<(&'static str, String)> {
    let mut all = Vec::new();
    let mut s = String::new();
    md(&mut s, "Cilium version", &p.cilium_version);
    all.push(("cilium-version", s));

    let mut s = String::new();
    md(&mut s, "Kernel version", &p.kernel_version);
    all.push(("kernel-version", s));

    let mut s = String::new();
    md(&mut s, "Cilium status", "");
    s.push_str("```\n");
    s.push_str(&crate::status::format(
        &p.cilium_status,
        crate::status::Details::ALL,
        None,
    ));
    s.push_str("```\n");
    all.push(("cilium-status", s));

    let mut s = String::new();
    md(
        &mut s,
        "Cilium environment keys",
        &p.environment_variables.join("\n"),
    );
    all.push(("cilium-environment-keys", s));

    let mut s = String::new();
    md(&mut s, "Endpoint list", "");
    s.push_str("```\n");
    s.push_str(&render(&crate::endpoint::list_rows(&p.endpoint_list)));
    s.push_str("```\n");
    for ep in &p.endpoint_list {
        let id = ep.id.to_string();
        ours(
            &mut s,
            &format!("BPF Policy Get {id}"),
            &["bpf", "policy", "get", &id, "-n"],
        );
        ours(
            &mut s,
            &format!("BPF CT List {id}"),
            &["bpf", "ct", "list", &id],
        );
        ours(
            &mut s,
            &format!("Endpoint Get {id}"),
            &["endpoint", "get", &id],
        );
        ours(
            &mut s,
            &format!("Endpoint Health {id}"),
            &["endpoint", "health", &id],
        );
        ours(
            &mut s,
            &format!("Endpoint Log {id}"),
            &["endpoint", "log", &id],
        );
        if let Some(identity) = &ep.status.identity {
            let n = identity.id.to_string();
            ours(
                &mut s,
                &format!("Identity get {n}"),
                &["identity", "get", &n],
            );
        }
    }
    all.push(("cilium-endpoint-list", s));

    let mut s = String::new();
    md(&mut s, "Service list", "");
    s.push_str("```\n");
    s.push_str(&render(&crate::service::list_rows(&p.service_list)));
    s.push_str("```\n");
    all.push(("cilium-service-list", s));

    let mut s = String::new();
    let policy = format!(":\n {}\nRevision: {}\n", p.policy.policy, p.policy.revision);
    md(&mut s, "Policy get", &policy);
    all.push(("cilium-policy", s));

    let mut s = String::new();
    md(&mut s, "Cilium memory map\n", &p.cilium_memory_map);
    if !p.cilium_nodemonitor_memory_map.is_empty() {
        md(
            &mut s,
            "Cilium nodemonitor memory map",
            &p.cilium_nodemonitor_memory_map,
        );
    }
    all.push(("cilium-memory-map", s));

    let mut s = String::new();
    for (name, status) in &p.subsystem {
        md(&mut s, name, status);
    }
    all.push(("cilium-subsystems", s));

    let mut s = String::new();
    md(&mut s, "Cilium encryption\n", "");
    all.push(("cilium-encryption", s));
    all
}

const HEADER: &str = "# Cilium debug information\n";

fn report(p: &DebugInfo) -> String {
    let mut out = HEADER.to_owned();
    for (_, s) in sections(p) {
        out.push_str(&s);
    }
    out
}

/// `cilium-debuginfo-20060102-150405.999-0700-MST.<ext>`, in the output
/// directory when one is given.
fn file_name(dir: Option<&PathBuf>, ext: &str) -> PathBuf {
    let stamp = api::timefmt::debuginfo_stamp(std::time::SystemTime::now());
    let name = format!("cilium-debuginfo-{stamp}.{ext}");
    dir.map_or_else(|| PathBuf::from(&name), |d| d.join(&name))
}

/// `x.md` with suffix `s` is `x-s.md`.
fn with_suffix(path: &std::path::Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!("{stem}-{suffix}{ext}"))
}

fn write_file(path: &std::path::Path, data: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|_| anyhow::anyhow!("Could not create file {}", path.display()))?;
    std::io::Write::write_all(&mut f, data.as_bytes())?;
    Ok(())
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    let formats = formats(args)?;
    let p: DebugInfo = ctx.client()?.get_json("/debuginfo", &[])?;
    if formats.is_empty() {
        println!("{}", report(&p));
        return Ok(ExitCode::SUCCESS);
    }
    let dir = args.output_directory.as_ref();
    for format in formats {
        if !args.file {
            match format {
                Format::Json => println!("{}\n", serde_json::to_string_pretty(&p)?),
                Format::Markdown => println!("{}", report(&p)),
            }
            continue;
        }
        let (ext, kind) = match format {
            Format::Json => ("json", "JSON"),
            Format::Markdown => ("md", "MARKDOWN"),
        };
        let path = file_name(dir, ext);
        if format == Format::Markdown && args.file_per_command {
            for (name, section) in sections(&p) {
                let each = with_suffix(&path, name);
                write_file(&each, &format!("{HEADER}{section}"))?;
                println!("{kind} output at {}", each.display());
            }
            continue;
        }
        let data = match format {
            Format::Json => serde_json::to_string_pretty(&p)?,
            Format::Markdown => report(&p),
        };
        write_file(&path, &data)?;
        println!("{kind} output at {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
