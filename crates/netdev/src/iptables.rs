//! Cilium's iptables masquerading of pods' traffic that leaves the cluster
//! (`enable-ipv4-masquerade` without `enable-bpf-masquerade`): the
//! `CILIUM_POST_nat` chain of the nat table, fed from POSTROUTING, with
//! Cilium's rule and comment; packets the datapath marked SNAT_DONE
//! (replies) are left alone. The chain is replaced in one
//! `iptables-restore` commit (declaring a chain there empties it), so an
//! agent that starts again never leaves a moment without the rule; the
//! feeder rule is added only when missing. Like the sysctls, it acts on
//! the calling thread's network namespace. IPv6 (`enable-ipv6-masquerade`)
//! gets the same chain and rules through ip6tables.

use std::io::Write;
use std::net::IpAddr;
use std::process::{Command, Stdio};

/// The chain Cilium masquerades in.
pub const POST_NAT: &str = "CILIUM_POST_nat";
/// The feeder rule's comment, as Cilium marks it.
const FEEDER_COMMENT: &str = "cilium-feeder: CILIUM_POST_nat";
/// How long to wait for the xtables lock (another writer, kube-proxy).
const LOCK_WAIT_SECS: &str = "5";

#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    #[error("running {program}: {source}")]
    Spawn {
        program: &'static str,
        source: std::io::Error,
    },
    #[error("{program} {args}: {stderr}")]
    Failed {
        program: &'static str,
        args: String,
        stderr: String,
    },
}

/// What is masqueraded: traffic from `source` (the node's pod CIDR) to
/// anywhere outside `exclude` (`ipv4-native-routing-cidr`, else the pod
/// CIDR) that does not leave through a `cilium_` device (the overlay).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Masquerade {
    pub source: (IpAddr, u8),
    pub exclude: (IpAddr, u8),
}

/// Which of the two tables: iptables' or ip6tables'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn of(m: &Masquerade) -> Self {
        if m.source.0.is_ipv6() {
            Family::V6
        } else {
            Family::V4
        }
    }

    fn programs(self) -> (&'static str, &'static str) {
        match self {
            Family::V4 => ("iptables", "iptables-restore"),
            Family::V6 => ("ip6tables", "ip6tables-restore"),
        }
    }
}

/// The nat table's part, as `iptables-restore --noflush` reads it.
pub fn restore_input(m: &Masquerade) -> String {
    let ((s, sl), (x, xl)) = (m.source, m.exclude);
    let (mark, mask) = (abi::ct::MARK_MAGIC_SNAT_DONE, abi::ct::MARK_MAGIC_MASK);
    format!(
        "*nat\n:{POST_NAT} - [0:0]\n-A {POST_NAT} -m mark --mark {mark:#x}/{mask:#x} -m comment --comment \"cilium: replies keep their source\" -j ACCEPT\n-A {POST_NAT} -s {s}/{sl} ! -d {x}/{xl} ! -o cilium_+ -m comment --comment \"cilium masquerade non-cluster\" -j MASQUERADE\nCOMMIT\n"
    )
}

fn feeder(op: &'static str) -> Vec<&'static str> {
    vec![
        "-w",
        LOCK_WAIT_SECS,
        "-t",
        "nat",
        op,
        "POSTROUTING",
        "-m",
        "comment",
        "--comment",
        FEEDER_COMMENT,
        "-j",
        POST_NAT,
    ]
}

fn run(program: &'static str, args: &[&str], stdin: Option<&str>) -> Result<(), IptablesError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| IptablesError::Spawn { program, source })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|source| IptablesError::Spawn { program, source })?;
    }
    let out = child
        .wait_with_output()
        .map_err(|source| IptablesError::Spawn { program, source })?;
    if out.status.success() {
        return Ok(());
    }
    Err(IptablesError::Failed {
        program,
        args: args.join(" "),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

/// Installs (or replaces) the masquerading rule and its feeder in the
/// table of the rule's family.
pub fn install(m: &Masquerade) -> Result<(), IptablesError> {
    let (iptables, restore) = Family::of(m).programs();
    run(
        restore,
        &["-w", LOCK_WAIT_SECS, "--noflush"],
        Some(&restore_input(m)),
    )?;
    if run(iptables, &feeder("-C"), None).is_err() {
        run(iptables, &feeder("-A"), None)?;
    }
    tracing::info!(subsys = "iptables", chain = POST_NAT, source = %format!("{}/{}", m.source.0, m.source.1), "Installed masquerading rules");
    Ok(())
}

/// Removes the feeder and the chain of one family; says whether there was
/// anything.
pub fn remove(family: Family) -> Result<bool, IptablesError> {
    let (iptables, _) = family.programs();
    let mut found = false;
    while run(iptables, &feeder("-D"), None).is_ok() {
        found = true;
    }
    let chain = ["-w", LOCK_WAIT_SECS, "-t", "nat"];
    if run(iptables, &[&chain[..], &["-F", POST_NAT]].concat(), None).is_ok() {
        found = true;
        run(iptables, &[&chain[..], &["-X", POST_NAT]].concat(), None)?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_ciliums_and_replaces_the_chain_in_one_commit() {
        let m = Masquerade {
            source: (std::net::Ipv4Addr::new(10, 0, 1, 0).into(), 24),
            exclude: (std::net::Ipv4Addr::new(10, 0, 0, 0).into(), 8),
        };
        assert_eq!(
            restore_input(&m),
            "*nat\n:CILIUM_POST_nat - [0:0]\n-A CILIUM_POST_nat -m mark --mark 0x300/0xf00 -m comment --comment \"cilium: replies keep their source\" -j ACCEPT\n-A CILIUM_POST_nat -s 10.0.1.0/24 ! -d 10.0.0.0/8 ! -o cilium_+ -m comment --comment \"cilium masquerade non-cluster\" -j MASQUERADE\nCOMMIT\n"
        );
    }
}
