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
pub enum VtepCommand {
    /// List VTEP CIDR and their corresponding VTEP MAC/IP
    #[command(alias = "ls")]
    List(ListArgs),
    /// Update vtep entries
    #[command(alias = "add")]
    Update { args: Vec<String> },
    /// Delete vtep entries
    Delete { args: Vec<String> },
}

#[derive(clap::Subcommand)]
pub enum GroupCommand {
    /// List the multicast groups.
    #[command(alias = "ls")]
    List(ListArgs),
    /// Add a multicast group.
    Add { args: Vec<String> },
    /// Delete a multicast group.
    #[command(alias = "del")]
    Delete { args: Vec<String> },
}

#[derive(clap::Subcommand)]
pub enum MulticastCommand {
    /// Manage the multicast groups
    #[command(subcommand)]
    Group(GroupCommand),
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
    /// Add a remote subscriber to the multicast group.
    Add { args: Vec<String> },
    /// Delete a subscriber from the multicast group.
    #[command(alias = "del")]
    Delete { args: Vec<String> },
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
    VtepUpdate(Vec<String>),
    VtepDelete(Vec<String>),
    Multicast,
    MulticastGroupChange(Vec<String>),
    MulticastSubscribers(Vec<String>),
    MulticastSubscriberAdd(Vec<String>),
    MulticastSubscriberDelete(Vec<String>),
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
        Feature::Vtep | Feature::VtepUpdate(_) | Feature::VtepDelete(_) => maps::VTEP,
        Feature::Recorder => maps::CAPTURE4_RULES,
        Feature::Multicast
        | Feature::MulticastGroupChange(_)
        | Feature::MulticastSubscribers(_)
        | Feature::MulticastSubscriberAdd(_)
        | Feature::MulticastSubscriberDelete(_) => maps::MCAST_GROUP_OUTER_V4,
        Feature::Srv6Policy => maps::SRV6_POLICY_V4,
        Feature::Srv6Sid => maps::SRV6_SID,
        Feature::Srv6Vrf => maps::SRV6_VRF_V4,
    }
}

pub fn run(ctx: &Ctx, feature: Feature) -> anyhow::Result<ExitCode> {
    let group = check_args(&feature)?;
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
        Feature::VtepUpdate(_) => {
            eprintln!("error updating contents of map: {loading}");
            Ok(ExitCode::FAILURE)
        }
        Feature::VtepDelete(_) => anyhow::bail!("error deleting contents of map: {loading}\n"),
        Feature::MulticastGroupChange(_) => {
            anyhow::bail!("failed to get multicast bpf map: multicast not enabled")
        }
        Feature::MulticastSubscriberAdd(_) | Feature::MulticastSubscriberDelete(_) => {
            let group = group.map(|g| g.to_string()).unwrap_or_default();
            anyhow::bail!("Failed to get subscriber map for group {group}: multicast not enabled")
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

/// A multicast group as 1.16 parses one, or its words for what is wrong.
fn group_addr(s: &str) -> Result<std::net::Ipv4Addr, String> {
    match s.parse::<std::net::IpAddr>() {
        Err(_) => Err(format!(
            "invalid IP address format: ParseAddr({s:?}): unable to parse IP"
        )),
        Ok(std::net::IpAddr::V4(a)) if a.is_multicast() => Ok(a),
        Ok(_) => Err(format!("invalid multicast IP: {s}")),
    }
}

fn cidr(s: &str) -> anyhow::Result<()> {
    policy::rule::Cidr::parse(s)
        .map(|_| ())
        .map_err(|_| anyhow::anyhow!("error parsing cidr {s}: invalid CIDR address: {s}"))
}

/// 1.16 checks the arguments before it opens a map (a subscriber's group
/// is named in the error that follows).
fn check_args(feature: &Feature) -> anyhow::Result<Option<std::net::Ipv4Addr>> {
    match feature {
        Feature::MulticastSubscribers(args) => match &args[..] {
            [one] if one == "all" => Ok(None),
            [one] => group_addr(one)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("invalid argument: invalid group address: {e}")),
            _ => anyhow::bail!(
                "invalid argument: expected group address or 'all' as argument, got {} arguments",
                args.len()
            ),
        },
        Feature::MulticastGroupChange(args) => match &args[..] {
            [one] => group_addr(one)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("Invalid arguments: {e}")),
            _ => anyhow::bail!(
                "Invalid arguments: expecting group IP as argument, got {} arguments",
                args.len()
            ),
        },
        Feature::MulticastSubscriberAdd(args) | Feature::MulticastSubscriberDelete(args) => {
            let add = matches!(feature, Feature::MulticastSubscriberAdd(_));
            // add looks up the overlay device first, as 1.16 does
            if add && !std::path::Path::new("/sys/class/net/cilium_vxlan").exists() {
                anyhow::bail!("Failed to get cilium_vxlan device \"cilium_vxlan\": Link not found");
            }
            let end = if add { "" } else { "\n" };
            let [group, sub] = &args[..] else {
                anyhow::bail!(
                    "invalid argument: expected exactly two arguments, group address and subscriber address, got {} arguments{end}",
                    args.len()
                );
            };
            let group = group_addr(group).map_err(|e| {
                anyhow::anyhow!("invalid argument: invalid group address: {e}{end}")
            })?;
            if sub.parse::<std::net::IpAddr>().is_err() {
                anyhow::bail!(
                    "invalid argument: invalid subscriber address: ParseAddr({sub:?}): unable to parse IP{end}"
                );
            }
            Ok(Some(group))
        }
        Feature::VtepUpdate(args) => {
            let [c, ip, mac] = &args[..] else {
                anyhow::bail!("accepts 3 arg(s), received {}", args.len());
            };
            cidr(c)?;
            if ip.parse::<std::net::Ipv4Addr>().is_err() {
                anyhow::bail!("Unable to parse IP '{ip}'");
            }
            let octets: Vec<&str> = mac.split([':', '-']).collect();
            if octets.len() != 6
                || octets
                    .iter()
                    .any(|o| u8::from_str_radix(o, 16).is_err() || o.len() != 2)
            {
                anyhow::bail!("Unable to parse vtep mac '{mac}'");
            }
            Ok(None)
        }
        Feature::VtepDelete(args) => {
            let [c] = &args[..] else {
                anyhow::bail!("accepts 1 arg(s), received {}", args.len());
            };
            cidr(c)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}
