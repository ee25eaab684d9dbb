//! `cilium bpf bandwidth|egress|vtep|recorder|multicast|srv6 ...`: the maps
//! of features this agent does not run (bandwidth manager, egress gateway,
//! VTEP, pcap recorder, multicast, SRv6). 1.16 creates them only with the
//! feature on; here they are never pinned, so each command answers as
//! 1.16's does with its feature off: its own words, its own exit code.

use crate::table::ListArgs;
use crate::Ctx;
use abi::maps;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum ListCommand {
    /// List entries
    #[command(alias = "ls")]
    List(ListArgs),
}

#[derive(clap::Subcommand)]
pub enum MulticastCommand {
    /// Manage the multicast groups
    #[command(subcommand)]
    Group(ListCommand),
    /// Manage the multicast subscribers
    #[command(subcommand, alias = "sub")]
    Subscriber(SubscriberCommand),
}

#[derive(clap::Subcommand)]
pub enum SubscriberCommand {
    /// List the multicast subscribers for the given group
    #[command(alias = "ls")]
    List {
        /// A group address, or `all`
        args: Vec<String>,
        #[command(flatten)]
        output: ListArgs,
    },
}

#[derive(clap::Subcommand)]
pub enum Srv6Command {
    /// List SRv6 policy entries
    #[command(alias = "pol")]
    Policy(ListArgs),
    /// List SRv6 SID entries
    Sid(ListArgs),
    /// List SRv6 VRF mappings
    #[command(alias = "ctx")]
    Vrf(ListArgs),
}

/// Which feature's maps, for the answer 1.16 gives without them.
pub enum Feature {
    Bandwidth,
    Egress,
    Vtep,
    Recorder,
    Multicast,
    MulticastSubscribers(Vec<String>),
    Srv6Policy,
    Srv6Sid,
    Srv6Vrf,
}

impl From<&Srv6Command> for Feature {
    fn from(cmd: &Srv6Command) -> Self {
        match cmd {
            Srv6Command::Policy(_) => Feature::Srv6Policy,
            Srv6Command::Sid(_) => Feature::Srv6Sid,
            Srv6Command::Vrf(_) => Feature::Srv6Vrf,
        }
    }
}

/// The map each feature's listing opens first.
fn first_map(feature: &Feature) -> &'static str {
    match feature {
        Feature::Bandwidth => maps::THROTTLE,
        Feature::Egress => maps::EGRESS_GW_POLICY_V4,
        Feature::Vtep => maps::VTEP,
        Feature::Recorder => maps::CAPTURE4_RULES,
        Feature::Multicast | Feature::MulticastSubscribers(_) => maps::MCAST_GROUP_OUTER_V4,
        Feature::Srv6Policy => maps::SRV6_POLICY_V4,
        Feature::Srv6Sid => maps::SRV6_SID,
        Feature::Srv6Vrf => maps::SRV6_VRF_V4,
    }
}

pub fn run(ctx: &Ctx, feature: Feature) -> anyhow::Result<ExitCode> {
    if let Feature::MulticastSubscribers(args) = &feature {
        check_subscriber_args(args)?;
    }
    let name = first_map(&feature);
    let path = ctx.bpf_root.join(maps::GLOBALS_DIR).join(name);
    if path.exists() {
        anyhow::bail!(
            "{} is pinned, but this agent never creates it: it belongs to a feature it does not run",
            path.display()
        );
    }
    let loading = format!(
        "loading pinned map {}: no such file or directory",
        path.display()
    );
    match feature {
        Feature::Bandwidth | Feature::Vtep => {
            eprintln!("error dumping contents of map: {loading}");
            Ok(ExitCode::FAILURE)
        }
        Feature::Egress => note("Cannot find egress gateway bpf maps"),
        Feature::Recorder => anyhow::bail!("Unable to open {}: {loading}", path.display()),
        Feature::Multicast => {
            anyhow::bail!("failed to get multicast bpf map: multicast not enabled")
        }
        Feature::MulticastSubscribers(_) => {
            anyhow::bail!("Failed to get multicast bpf map: multicast not enabled")
        }
        Feature::Srv6Policy => note("Cannot find SRv6 policy maps"),
        Feature::Srv6Sid => note("Cannot find SRv6 SID map"),
        Feature::Srv6Vrf => note("Cannot find SRv6 VRF mapping maps"),
    }
}

fn note(text: &str) -> anyhow::Result<ExitCode> {
    eprintln!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// 1.16 checks the group argument before it opens a map.
fn check_subscriber_args(args: &[String]) -> anyhow::Result<()> {
    match args {
        [one] if one == "all" => Ok(()),
        [one] => match one.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) if a.is_multicast() => Ok(()),
            _ => anyhow::bail!(
                "invalid argument: invalid group address: {one:?} is not a multicast address"
            ),
        },
        _ => anyhow::bail!(
            "invalid argument: expected group address or 'all' as argument, got {} arguments",
            args.len()
        ),
    }
}
