//! `cilium`: status, configuration and BPF map inspection for the agent.

mod bgp;
mod bpf;
mod bpf_policy;
mod build_config;
mod cgroups;
mod cleanup;
mod config;
mod endpoint;
mod explain;
mod fqdn;
mod health_report;
mod identity;
mod ip;
mod lrp;
mod map;
mod metrics;
mod monitor;
mod node;
mod nodeid;
mod observe;
mod policy;
mod prefilter;
mod recorder;
mod service;
mod status;
mod table;

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
}

impl Ctx {
    fn client(&self) -> anyhow::Result<api::Client> {
        Ok(api::Client::from_host(self.host.as_deref())?)
    }
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
    let cli = Cli::parse();
    let ctx = Ctx {
        host: cli.host,
        bpf_root: cli.bpf_root,
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
