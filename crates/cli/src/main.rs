//! `cilium`: status, configuration and BPF map inspection for the agent.

mod bgp;
mod bpf;
mod bpf_off;
mod bpf_policy;
mod bpf_sha;
mod build_config;
mod cgroups;
mod cleanup;
mod config;
mod debuginfo;
mod encrypt;
mod endpoint;
mod explain;
mod fqdn;
mod gofmt;
mod health_report;
mod identity;
mod ip;
mod kvstore;
mod loadinfo;
mod lrp;
mod map;
mod metrics;
mod modules_health;
mod monitor;
mod mountinfo;
mod node;
mod nodeid;
mod observe;
mod policy;
mod prefilter;
mod preflight;
mod recorder;
mod service;
mod statedb;
mod status;
mod table;
mod troubleshoot;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cilium",
    about = "CLI for interacting with the local Cilium Agent",
    disable_version_flag = true
)]
struct Cli {
    /// URI to server-side API, e.g. unix:///var/run/cilium/cilium.sock
    #[arg(short = 'H', long = "host", global = true)]
    host: Option<String>,
    /// Root of the BPF filesystem the agent pins its maps in
    #[arg(
        long = "bpf-root",
        global = true,
        env = "CILIUM_BPF_ROOT",
        default_value = "/sys/fs/bpf"
    )]
    bpf_root: std::path::PathBuf,
    /// The agent's state directory (endpoints' state, datapath templates)
    #[arg(
        long = "state-dir",
        global = true,
        env = "CILIUM_STATE_DIR",
        default_value = abi::state_dir::DEFAULT
    )]
    state_dir: std::path::PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Display status of daemon
    Status(status::Args),
    /// Print version information
    Version,
    /// Resolve all of the configuration sources that apply to this node
    #[command(name = "build-config")]
    BuildConfig(build_config::Args),
    /// Clean up CNI configurations, CNI binaries, attached BPF programs,
    /// bpffs, tc filters, routes and links
    #[command(alias = "post-uninstall-cleanup")]
    Cleanup(cleanup::Args),
    /// Cilium configuration options
    Config(config::Args),
    /// Manage endpoints
    #[command(subcommand)]
    Endpoint(endpoint::Command),
    /// Explain what the datapath does with a flow, map by map
    Explain(explain::Args),
    /// Manage security identities
    #[command(subcommand)]
    Identity(identity::Command),
    /// Manage IP addresses and associated information
    #[command(subcommand)]
    Ip(ip::Command),
    /// Access userspace cached content of BPF maps
    #[command(subcommand)]
    Map(map::Command),
    /// Access metric status
    #[command(subcommand)]
    Metrics(metrics::Command),
    /// Display BPF program events
    Monitor(monitor::Args),
    /// Observe flows (Hubble's view of the same events)
    Observe(observe::Args),
    /// Manage cluster nodes
    #[command(subcommand)]
    Node(node::Command),
    /// List node IDs and associated information
    #[command(subcommand)]
    Nodeid(nodeid::Command),
    /// Manage security policies
    #[command(subcommand)]
    Policy(policy::Command),
    /// Direct access to the kvstore
    Kvstore(kvstore::Args),
    /// Show load information
    Loadinfo,
    /// Cilium upgrade helper
    #[command(subcommand)]
    Preflight(preflight::Command),
    /// Inspect StateDB
    #[command(subcommand)]
    Statedb(statedb::Command),
    /// Request available debugging information from agent
    Debuginfo(debuginfo::Args),
    /// Manage transparent encryption
    #[command(subcommand)]
    Encrypt(encrypt::Command),
    /// Run troubleshooting utilities to check control-plane connectivity
    #[command(subcommand)]
    Troubleshoot(troubleshoot::Command),
    /// Manage services & loadbalancers
    #[command(subcommand)]
    Service(service::Command),
    /// Direct access to local BPF maps
    #[command(subcommand)]
    Bpf(bpf::Command),
    /// Access to BGP control plane
    #[command(subcommand)]
    Bgp(bgp::Command),
    /// Cgroup metadata
    #[command(subcommand)]
    Cgroups(cgroups::Command),
    /// Manage fqdn proxy
    #[command(subcommand)]
    Fqdn(fqdn::Command),
    /// Manage local redirect policies
    #[command(subcommand)]
    Lrp(lrp::Command),
    /// Manage XDP CIDR filters
    #[command(subcommand)]
    Prefilter(prefilter::Command),
    /// Introspect or mangle pcap recorder
    #[command(subcommand)]
    Recorder(recorder::Command),
}

pub struct Ctx {
    host: Option<String>,
    bpf_root: std::path::PathBuf,
    state_dir: std::path::PathBuf,
}

impl Ctx {
    fn client(&self) -> anyhow::Result<api::Client> {
        Ok(api::Client::from_host(self.host.as_deref())?)
    }
}

/// Runs `f` to completion on a runtime of its own (the CLI is synchronous
/// but for the few clients that are async).
pub fn block_on<T>(f: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    use anyhow::Context;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?
        .block_on(f)
}

/// Asks `prompt` on stdout (as written: a newline or not) and reads the
/// answer: only `y` (or `Y`, `yes`) goes on, as 1.16 asks.
pub fn confirm(prompt: &str) -> std::io::Result<bool> {
    use std::io::{BufRead, Write};
    print!("{prompt}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// The help of the subcommand at `path` (`["bpf", "sha", "get"]`), on
/// stdout as cobra prints it.
pub fn print_help(path: &[&str]) {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    cmd.build();
    for name in path {
        match cmd.find_subcommand(name) {
            Some(sub) => cmd = sub.clone(),
            None => break,
        }
    }
    let _ = cmd.print_help();
}

/// 1.16's `Usagef`: the error, a blank line, then the command's help.
pub fn usage_error(path: &[&str], msg: &str) -> ExitCode {
    eprintln!("Error: {msg}\n");
    print_help(path);
    ExitCode::FAILURE
}

/// Parses `argv` into one subcommand's flags (for the subcommands' tests).
#[cfg(test)]
pub fn parse_args<A: clap::Args>(argv: &[&str]) -> A {
    #[derive(clap::Parser)]
    struct Wrap<A: clap::Args> {
        #[command(flatten)]
        a: A,
    }
    <Wrap<A> as clap::Parser>::parse_from(std::iter::once("test").chain(argv.iter().copied())).a
}

fn main() -> ExitCode {
    // a reader that stops early (`| head`) ends us quietly, as it ends
    // Go's cilium-dbg, instead of a panic on the broken pipe
    // SAFETY: restoring a signal's default disposition before any thread
    // starts
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let ctx = Ctx {
        host: cli.host,
        bpf_root: cli.bpf_root,
        state_dir: cli.state_dir,
    };
    let result = match cli.command {
        Command::Status(args) => status::run(&ctx, &args),
        Command::Version => {
            // as Cilium's: the daemon's version comes from /debuginfo
            println!("Client: {}", api::full_version());
            match ctx
                .client()
                .and_then(|c| Ok(c.get_json::<api::models::DebugInfo>("/debuginfo", &[])?))
            {
                Ok(info) => println!("Daemon: {}", info.cilium_version),
                Err(e) => eprintln!("Daemon: Not responding: {e}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::BuildConfig(args) => build_config::run(&args),
        Command::Cleanup(args) => cleanup::run(&ctx, &args),
        Command::Config(args) => config::run(&ctx, &args),
        Command::Bpf(cmd) => bpf::run(&ctx, &cmd),
        Command::Bgp(cmd) => bgp::run(&ctx, &cmd),
        Command::Cgroups(cmd) => cgroups::run(&ctx, &cmd),
        Command::Fqdn(cmd) => fqdn::run(&ctx, &cmd),
        Command::Lrp(cmd) => lrp::run(&ctx, &cmd),
        Command::Prefilter(cmd) => prefilter::run(&ctx, &cmd),
        Command::Recorder(cmd) => recorder::run(&ctx, &cmd),
        Command::Endpoint(cmd) => endpoint::run(&ctx, &cmd),
        Command::Explain(args) => explain::run(&ctx, &args),
        Command::Identity(cmd) => identity::run(&ctx, &cmd),
        Command::Ip(cmd) => ip::run(&ctx, &cmd),
        Command::Map(cmd) => map::run(&ctx, &cmd),
        Command::Metrics(cmd) => metrics::run(&ctx, &cmd),
        Command::Monitor(args) => monitor::run(&ctx, &args),
        Command::Observe(args) => observe::run(&ctx, &args),
        Command::Node(cmd) => node::run(&ctx, &cmd),
        Command::Nodeid(cmd) => nodeid::run(&ctx, &cmd),
        Command::Policy(cmd) => policy::run(&ctx, &cmd),
        Command::Kvstore(args) => kvstore::run(&ctx, &args),
        Command::Loadinfo => loadinfo::run(),
        Command::Preflight(cmd) => preflight::run(&ctx, &cmd),
        Command::Statedb(cmd) => statedb::run(&ctx, &cmd),
        Command::Debuginfo(args) => debuginfo::run(&ctx, &args),
        Command::Encrypt(cmd) => encrypt::run(&ctx, &cmd),
        Command::Troubleshoot(cmd) => troubleshoot::run(&ctx, &cmd),
        Command::Service(cmd) => service::run(&ctx, &cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
