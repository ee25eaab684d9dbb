//! `cilium bgp peers|routes|route-policies`, as 1.16 answers them. Our
//! agent runs no BGP control plane and answers 501, which 1.16 reports
//! as a note and exit 0; a listing from an agent that runs one is printed
//! as JSON (the route attributes are BGP wire data).

use crate::table::{print_json, tabwrite, ListArgs};
use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List current state of all peers
    #[command(alias = "neighbors")]
    Peers(ListArgs),
    /// List routes in the BGP Control Plane's RIBs
    Routes {
        /// available|advertised, AFI, SAFI, [vrouter <asn>] [peer|neighbor <address>]
        words: Vec<String>,
        #[command(flatten)]
        list: ListArgs,
    },
    /// List route policies configured in the underlying routing daemon
    #[command(name = "route-policies", alias = "rps")]
    RoutePolicies {
        /// [vrouter <asn>]
        words: Vec<String>,
        #[command(flatten)]
        list: ListArgs,
    },
}

const DISABLED: &str = "BGP Control Plane is disabled";
const AFIS: &[&str] = &["ipv4", "ipv6", "l2vpn", "ls", "opaque"];
const SAFIS: &[&str] = &[
    "unicast",
    "multicast",
    "mpls_label",
    "encapsulation",
    "vpls",
    "evpn",
    "ls",
    "sr_policy",
    "mup",
    "mpls_vpn",
    "mpls_vpn_multicast",
    "route_target_constraints",
    "flowspec_unicast",
    "flowspec_vpn",
    "key_value",
];

/// `vrouter <asn>` at the front of `words`; the words after it.
fn vrouter(words: &[String]) -> anyhow::Result<(Option<i64>, &[String])> {
    match words {
        [] => Ok((None, words)),
        [w, rest @ ..] if w == "vrouter" => {
            let Some((asn, rest)) = rest.split_first() else {
                anyhow::bail!("failed to parse vrouter ASN: missing vrouter ASN value\n");
            };
            let asn = asn.parse::<i64>().map_err(|e| {
                anyhow::anyhow!("failed to parse vrouter ASN: invalid vrouter ASN: {e}\n")
            })?;
            Ok((Some(asn), rest))
        }
        _ => anyhow::bail!("failed to parse vrouter ASN: missing `vrouter` parameter\n"),
    }
}

/// The query of `bgp routes` from its words, printing 1.16's notes on
/// what it defaults to (unless the output is JSON).
fn routes_query(words: &[String], quiet: bool) -> anyhow::Result<Vec<(&'static str, String)>> {
    let note = |what: &str| {
        if !quiet {
            println!("(Defaulting to `{what}`, please see help for more options)\n");
        }
    };
    let table = match words.first().map(String::as_str) {
        None => {
            note("available ipv4 unicast` routes");
            "loc-rib"
        }
        Some("available") => "loc-rib",
        Some("advertised") => "adj-rib-out",
        Some(other) => anyhow::bail!(
            "invalid argument: invalid table type discriminator `{other}` (should be `available` / `advertised`)\n"
        ),
    };
    let afi = match words.get(1) {
        None if !words.is_empty() => {
            note("ipv4 unicast` AFI & SAFI");
            "ipv4"
        }
        None => "ipv4",
        Some(a) if AFIS.contains(&a.as_str()) => a,
        Some(a) => anyhow::bail!("invalid argument: unknown AFI {a}\n"),
    };
    let safi = match words.get(2) {
        None if words.len() == 2 => {
            note("unicast` SAFI");
            "unicast"
        }
        None => "unicast",
        Some(s) if SAFIS.contains(&s.as_str()) => s,
        Some(s) => anyhow::bail!("invalid argument: unknown SAFI {s}\n"),
    };
    let mut query = vec![
        ("afi", afi.to_owned()),
        ("safi", safi.to_owned()),
        ("table_type", table.to_owned()),
    ];
    let (asn, rest) = vrouter(words.get(3..).unwrap_or_default())?;
    if let Some(asn) = asn {
        query.push(("router_asn", asn.to_string()));
    }
    if table == "adj-rib-out" && !rest.is_empty() {
        let peer = match rest {
            [w, ip, ..] if w == "peer" || w == "neighbor" => ip,
            [w] if w == "peer" || w == "neighbor" => {
                anyhow::bail!("failed to parse peer address: missing peer IP address\n")
            }
            _ => anyhow::bail!("failed to parse peer address: missing `peer` parameter\n"),
        };
        let ip: std::net::IpAddr = peer.parse().map_err(|e| {
            anyhow::anyhow!("failed to parse peer address: invalid peer IP address: {e}\n")
        })?;
        query.push(("neighbor", ip.to_string()));
    }
    Ok(query)
}

/// The API path with the query of `pairs`.
fn path_with(path: &str, pairs: &[(&'static str, String)]) -> String {
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    api::client::with_query(path, &pairs)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let (path, list, what) = match cmd {
        Command::Peers(list) => ("/bgp/peers".to_owned(), list, "cannot get peers list"),
        Command::Routes { words, list } => {
            let query = routes_query(words, list.output.is_some())?;
            (
                path_with("/bgp/routes", &query),
                list,
                "failed retrieving routes",
            )
        }
        Command::RoutePolicies { words, list } => {
            let (asn, _) = vrouter(words)?;
            let query: Vec<(&'static str, String)> = asn
                .map(|a| ("router_asn", a.to_string()))
                .into_iter()
                .collect();
            (
                path_with("/bgp/route-policies", &query),
                list,
                "cannot get route policies list",
            )
        }
    };
    let answer: Result<serde_json::Value, _> = ctx.client()?.get_json(&path, &[]);
    let listing = match answer {
        Err(e) if e.status() == Some(501) => {
            println!("{DISABLED}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => anyhow::bail!("{what}: {e}\n"),
        Ok(v) => v,
    };
    match (cmd, listing.as_array()) {
        (Command::Peers(_), Some(peers)) if list.output.is_none() => print_peers(peers),
        _ => print_json(&listing)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// 1.16's peers table: a row per peer, a line per address family.
fn print_peers(peers: &[serde_json::Value]) {
    let mut text = String::from(
        "Local AS\tPeer AS\tPeer Address\tSession\tUptime\tFamily\tReceived\tAdvertised\n",
    );
    for p in peers {
        let n = |k: &str| p[k].as_i64().unwrap_or(0);
        let s = |k: &str| p[k].as_str().unwrap_or("").to_owned();
        let uptime = std::time::Duration::from_secs(
            ((n("uptime-nanoseconds") + 500_000_000) / 1_000_000_000).max(0) as u64,
        );
        text.push_str(&format!(
            "{}\t{}\t{}:{}\t{}\t{}\t",
            n("local-asn"),
            n("peer-asn"),
            s("peer-address"),
            n("peer-port"),
            s("session-state"),
            api::duration::go_duration(uptime)
        ));
        for (i, f) in p["families"].as_array().into_iter().flatten().enumerate() {
            if i > 0 {
                text.push_str("\t\t\t\t\t");
            }
            text.push_str(&format!(
                "{}/{}\t{}\t{}\t\n",
                f["afi"].as_str().unwrap_or(""),
                f["safi"].as_str().unwrap_or(""),
                f["received"].as_i64().unwrap_or(0),
                f["advertised"].as_i64().unwrap_or(0)
            ));
        }
    }
    print!("{}", tabwrite(&text, 5, 3));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn routes_words_become_1_16s_query() {
        let q = routes_query(
            &words("advertised ipv6 unicast vrouter 65001 peer 10.0.0.1"),
            true,
        )
        .unwrap();
        assert_eq!(
            path_with("", &q),
            "?afi=ipv6&safi=unicast&table_type=adj-rib-out&router_asn=65001&neighbor=10.0.0.1"
        );
        assert_eq!(
            path_with("", &routes_query(&[], true).unwrap()),
            "?afi=ipv4&safi=unicast&table_type=loc-rib"
        );
        for bad in [
            "sideways",
            "available ipx",
            "available ipv4 anycast",
            "available ipv4 unicast vrouter x",
        ] {
            assert!(routes_query(&words(bad), true).is_err(), "{bad}");
        }
    }
}
