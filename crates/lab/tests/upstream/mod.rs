//! Cilium v1.16.0's own `cilium-dbg` and `cilium-health` (built from the
//! Go module by scripts/build-cilium-tools.sh) against a real node's agent:
//! every subcommand in `cilium-dbg --help`'s tree is run, or named here as
//! one that changes state, so a command nobody thought about fails the
//! test. Those that read state exit 0 without an error, a 404 or a decode
//! error; those of features we do not run fail as 1.16's do with the
//! feature off; our own `cilium` answers every line with cilium-dbg's exit
//! code; and no pinned map changes while they run.

use crate::common::{self, Lab};
use std::collections::{BTreeMap, BTreeSet};

/// What a command must do.
enum Expect {
    /// Exit 0, nothing that reads as an error.
    Reads,
    /// A feature we do not run, or a thing that does not exist: 1.16's
    /// exit code and words for it.
    Fails { code: i32, says: &'static str },
}
use Expect::{Fails, Reads};

/// Every run: the leaf command, its arguments (`{ep}`, `{ip}`, `{host}`,
/// `{svc}`, `{rev}` and `{policy}` stand for a pod's endpoint ID and
/// address, the host endpoint's ID, a service ID, the policy revision and
/// a policy file), and what it must do.
const RUNS: &[(&str, &str, Expect)] = &[
    ("status", "", Reads),
    ("status", "--verbose", Reads),
    (
        "status",
        "--all-controllers --all-health --all-redirects --all-clusters --all-addresses --all-nodes",
        Reads,
    ),
    ("status", "--brief", Reads),
    ("version", "", Reads),
    ("config", "", Reads),
    ("config get", "debug", Reads),
    ("debuginfo", "", Reads),
    ("loadinfo", "", Reads),
    ("metrics list", "", Reads),
    ("encrypt status", "", Reads),
    ("endpoint list", "", Reads),
    ("endpoint get", "{ep}", Reads),
    ("endpoint get", "{host}", Reads),
    ("endpoint health", "{ep}", Reads),
    ("endpoint log", "{ep}", Reads),
    ("endpoint config", "{ep}", Reads),
    ("endpoint labels", "{ep}", Reads),
    ("identity list", "", Reads),
    ("identity list", "--endpoints", Reads),
    ("identity get", "1", Reads),
    ("ip list", "", Reads),
    ("node list", "", Reads),
    ("nodeid list", "", Reads),
    ("service list", "", Reads),
    ("service get", "{svc}", Reads),
    ("lrp list", "", Reads),
    ("cgroups list", "", Reads),
    ("recorder list", "", Reads),
    (
        "recorder get",
        "1",
        Fails {
            code: 1,
            says: "getRecorderIdNotFound",
        },
    ),
    ("fqdn cache list", "", Reads),
    ("fqdn names", "", Reads),
    ("policy get", "", Reads),
    ("policy selectors", "", Reads),
    ("policy selectors", "-v", Reads),
    ("policy wait", "{rev}", Reads),
    ("policy validate", "{policy}", Reads),
    ("map list", "", Reads),
    ("map list", "--verbose", Reads),
    ("map get", "cilium_ipcache", Reads),
    ("map get", "cilium_lxc", Reads),
    ("map get", "cilium_tunnel_map", Reads),
    ("map events", "cilium_ipcache", Reads),
    ("monitor", "", Reads),
    ("statedb dump", "", Reads),
    ("statedb health", "", Reads),
    ("statedb devices", "", Reads),
    ("statedb routes", "", Reads),
    ("statedb node-addresses", "", Reads),
    ("statedb sysctl", "", Reads),
    ("statedb ipsets", "", Reads),
    ("statedb l2-announce", "", Reads),
    ("statedb bandwidth-qdiscs", "", Reads),
    ("statedb bandwidth-edts", "", Reads),
    ("statedb nat-stats", "", Reads),
    ("bpf config list", "", Reads),
    ("bpf ct list", "global", Reads),
    ("bpf endpoint list", "", Reads),
    ("bpf fs show", "", Reads),
    ("bpf ipcache list", "", Reads),
    ("bpf ipcache get", "{ip}", Reads),
    ("bpf ipmasq list", "", Reads),
    ("bpf lb list", "", Reads),
    ("bpf lb maglev list", "", Reads),
    (
        "bpf lb maglev get",
        "{svc}",
        Fails {
            code: 1,
            says: "No entry found for service",
        },
    ),
    ("bpf metrics list", "", Reads),
    ("bpf nat list", "", Reads),
    ("bpf policy get", "{ep}", Reads),
    ("bpf policy get", "{host}", Reads),
    ("bpf policy get", "--all", Reads),
    ("bpf policy list", "", Reads),
    ("bpf tunnel list", "", Reads),
    ("bpf auth list", "", Reads),
    ("bpf nodeid list", "", Reads),
    ("bpf sha list", "", Reads),
    // features off, as 1.16 has them off
    (
        "bgp peers",
        "",
        Fails {
            code: 0,
            says: "BGP Control Plane is disabled",
        },
    ),
    (
        "bgp routes",
        "",
        Fails {
            code: 0,
            says: "BGP Control Plane is disabled",
        },
    ),
    (
        "bgp route-policies",
        "",
        Fails {
            code: 0,
            says: "BGP Control Plane is disabled",
        },
    ),
    (
        "prefilter list",
        "",
        Fails {
            code: 1,
            says: "prefilter is not enabled in daemon",
        },
    ),
    (
        "bpf bandwidth list",
        "",
        Fails {
            code: 1,
            says: "cilium_throttle: no such file",
        },
    ),
    (
        "bpf vtep list",
        "",
        Fails {
            code: 1,
            says: "cilium_vtep_map: no such file",
        },
    ),
    (
        "bpf recorder list",
        "",
        Fails {
            code: 1,
            says: "cilium_capture4_rules: no such file",
        },
    ),
    (
        "bpf egress list",
        "",
        Fails {
            code: 0,
            says: "Cannot find egress gateway bpf maps",
        },
    ),
    (
        "bpf srv6 policy",
        "",
        Fails {
            code: 0,
            says: "Cannot find SRv6 policy maps",
        },
    ),
    (
        "bpf srv6 sid",
        "",
        Fails {
            code: 0,
            says: "Cannot find SRv6 SID map",
        },
    ),
    (
        "bpf srv6 vrf",
        "",
        Fails {
            code: 0,
            says: "Cannot find SRv6 VRF mapping maps",
        },
    ),
    (
        "bpf multicast group list",
        "",
        Fails {
            code: 1,
            says: "multicast not enabled",
        },
    ),
    (
        "bpf multicast subscriber list",
        "all",
        Fails {
            code: 1,
            says: "multicast not enabled",
        },
    ),
    // CRD mode: no kvstore, no clustermesh
    (
        "kvstore get",
        "--recursive cilium",
        Fails {
            code: 1,
            says: "unknown key-value store type \"\"",
        },
    ),
    (
        "troubleshoot kvstore",
        "",
        Fails {
            code: 0,
            says: "This is expected when Cilium is running in CRD mode",
        },
    ),
    (
        "troubleshoot clustermesh",
        "",
        Fails {
            code: 1,
            says: "Unable to retrieve cluster configurations",
        },
    ),
];

/// Commands not run, and why: they change state, or (preflight) are
/// migrations run against the API server with credentials a node's
/// shell does not have.
const CHANGES_STATE: &[&str] = &[
    "bpf auth flush",
    "bpf ct flush",
    "bpf endpoint delete",
    "bpf multicast group add",
    "bpf multicast group delete",
    "bpf multicast subscriber add",
    "bpf multicast subscriber delete",
    "bpf nat flush",
    "bpf policy add",
    "bpf policy delete",
    "bpf vtep delete",
    "bpf vtep update",
    "build-config",
    "encrypt flush",
    "endpoint disconnect",
    "fqdn cache clean",
    "kvstore delete",
    "kvstore set",
    "policy delete",
    "policy import",
    "post-uninstall-cleanup",
    "prefilter delete",
    "prefilter update",
    "preflight fqdn-poller",
    "preflight migrate-identity",
    "preflight validate-cnp",
    "recorder delete",
    "recorder update",
    "service delete",
    "service update",
];

/// Changes that leave our state as it was: features we do not run (both
/// refuse), a flush of a map that is empty, a cache that holds nothing,
/// and an upgrade helper without its cluster configuration. Ours and
/// 1.16's must exit alike.
const CHANGES_THAT_KEEP_STATE: &[&str] = &[
    "bpf auth flush",
    "bpf vtep update 10.9.0.0/24 198.18.0.99 aa:bb:cc:dd:ee:ff",
    "bpf vtep update 10.9.0.0/24 198.18.0.99",
    "bpf vtep delete 10.9.0.0/24",
    "bpf multicast group add 229.0.0.1",
    "bpf multicast group add 10.0.0.1",
    "bpf multicast group delete 229.0.0.1",
    "bpf multicast subscriber delete 229.0.0.1 198.18.0.99",
    "prefilter update --cidr 10.9.0.0/24",
    "prefilter delete --cidr 10.9.0.0/24",
    "prefilter update --cidr nonsense",
    "recorder update --id 7 --filters 10.9.0.0/24_0_10.8.0.0/24_80_TCP",
    "recorder update",
    "recorder delete 7",
    "fqdn cache clean -f",
    "endpoint disconnect nosuchprefix:1",
    "endpoint disconnect 4000",
    "kvstore set --value x",
    "kvstore delete",
    "encrypt flush --stale --spi 1",
    "encrypt flush --spi 16",
    "bpf policy add 1",
    "bpf policy add 1 sideways 2",
    "bpf policy delete 4000 ingress 2",
    "preflight validate-cnp",
];

/// `bpf sha get` reads a template named by `bpf sha list`: run with it.
const SHA_GET: &str = "bpf sha get";

/// Words of a client that failed to read what it asked for.
const BAD: &[&str] = &[
    "Error:",
    // go-swagger's shape for a 404 answer ("[GET /path][404] ..."); a bare
    // "404" also matches counters and timestamps in healthy output
    "][404]",
    "Decode error",
    "cannot unmarshal",
    "panic:",
    "Was impossible",
    "not found",
    "Cannot find",
    "unexpected argument",
];

/// The leaves of cilium-dbg's command tree, as `--help` lists them.
fn leaves(lab: &Lab, dbg: &str, prefix: &str) -> Vec<String> {
    let mut args = vec!["exec", "node1", "--", dbg];
    args.extend(prefix.split_whitespace());
    args.push("--help");
    let help = lab.ok(&args);
    let subs: Vec<String> = help
        .split("Available Commands:")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .filter_map(|l| l.split_whitespace().next())
                .filter(|s| *s != "help" && *s != "completion")
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if subs.is_empty() {
        return vec![prefix.trim().to_owned()];
    }
    subs.iter()
        .flat_map(|s| leaves(lab, dbg, &format!("{prefix} {s}")))
        .collect()
}

/// Runs `cilium-dbg <line>` on node1; its exit code and output.
fn run(lab: &Lab, dbg: &str, line: &str) -> (i32, String) {
    let mut args = vec!["exec", "node1", "--", "timeout", "20", dbg];
    args.extend(line.split_whitespace());
    let out = lab.run(&args);
    (out.status.code().unwrap_or(-1), common::text(&out))
}

/// One value of `cilium-dbg <cmd> -o json` at a JSON pointer.
fn json_value(lab: &Lab, dbg: &str, cmd: &str, pointer: &str) -> String {
    let (code, out) = run(lab, dbg, &format!("{cmd} -o json"));
    assert_eq!(code, 0, "{cmd}: {out}");
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{cmd}: {e}: {out}"));
    match v.pointer(pointer) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => panic!("{cmd}: no {pointer} in {out}"),
    }
}

pub fn cilium_1_16_clients_read_everything(lab: &Lab) {
    let bin = common::cilium_tools();
    let dbg = bin.join("cilium-dbg").display().to_string();
    let health = bin.join("cilium-health").display().to_string();

    // every leaf is either run or named as changing state
    let known: BTreeSet<&str> = RUNS
        .iter()
        .map(|(c, _, _)| *c)
        .chain(CHANGES_STATE.iter().copied())
        .chain([SHA_GET])
        .collect();
    let tree = leaves(lab, &dbg, "");
    let unclassified: Vec<&String> = tree
        .iter()
        .filter(|l| !known.contains(l.as_str()))
        .collect();
    assert!(
        unclassified.is_empty(),
        "cilium-dbg commands this test does not know: {unclassified:?}"
    );

    let eps: serde_json::Value =
        serde_json::from_str(&run(lab, &dbg, "endpoint list -o json").1).unwrap();
    let pod = eps
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e.pointer("/status/external-identifiers/k8s-pod-name")
                .is_some_and(|n| !n.as_str().unwrap_or("").is_empty())
        })
        .expect("a pod's endpoint on node1");
    let ep = pod["id"].to_string();
    // Cilium's host endpoint, which 1.16 lists beside the pods
    let host = eps
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e.pointer("/status/identity/labels/0") == Some(&"reserved:host".into()))
        .expect("the host endpoint on node1")["id"]
        .to_string();
    let ip = pod
        .pointer("/status/networking/addressing/0/ipv4")
        .and_then(|v| v.as_str())
        .expect("the pod's address")
        .to_owned();
    let svc = json_value(lab, &dbg, "service list", "/0/spec/id");
    let rev = json_value(lab, &dbg, "policy get", "/revision");
    // what `policy validate` reads: rules as JSON, as `policy import` takes them
    let policy = lab.dir.path().join("validate.json");
    std::fs::write(
        &policy,
        r#"[{"endpointSelector": {}, "ingress": [{"fromEndpoints": [{}]}]}]"#,
    )
    .unwrap();

    let before = common::pins(lab, "node1");
    let mut failures = Vec::new();
    let mut runs: Vec<(&str, String, &Expect)> = RUNS
        .iter()
        .map(|(cmd, args, expect)| {
            let args = args
                .replace("{ep}", &ep)
                .replace("{host}", &host)
                .replace("{ip}", &ip)
                .replace("{svc}", &svc)
                .replace("{rev}", &rev)
                .replace("{policy}", &policy.display().to_string());
            (*cmd, format!("{cmd} {args}"), expect)
        })
        .collect();
    let sha = run(lab, &dbg, "bpf sha list -o json").1;
    let first_sha = serde_json::from_str::<BTreeMap<String, serde_json::Value>>(&sha)
        .ok()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_else(|| panic!("bpf sha list -o json names no template: {sha}"));
    runs.push((SHA_GET, format!("{SHA_GET} {first_sha}"), &Reads));
    for (_, line, expect) in &runs {
        // the monitor streams until stopped: a few seconds of it
        let line = line.trim();
        let (code, out) = if line == "monitor" {
            let o = lab.run(&[
                "exec",
                "node1",
                "--",
                "timeout",
                "3",
                dbg.as_str(),
                "monitor",
            ]);
            let (code, out) = (o.status.code().unwrap_or(-1), common::text(&o));
            (if code == 124 { 0 } else { code }, out)
        } else {
            run(lab, &dbg, line)
        };
        match expect {
            Reads => {
                let bad: Vec<&&str> = BAD.iter().filter(|b| out.contains(**b)).collect();
                if code != 0 || !bad.is_empty() {
                    failures.push(format!("cilium-dbg {line}: exit {code}, {bad:?}:\n{out}"));
                }
            }
            Fails { code: want, says } => {
                if code != *want || !out.contains(says) {
                    failures.push(format!("cilium-dbg {line}: want exit {want} saying {says:?}, got exit {code}:\n{out}"));
                }
            }
        }
        // our `cilium` answers the same line as 1.16's does (the monitor
        // streams: its own tests cover it)
        if line != "monitor" {
            let (ours, our_out) = run(lab, "cilium", line);
            if ours != code {
                failures.push(format!(
                    "cilium {line}: exit {ours} where cilium-dbg exits {code}:\n{our_out}"
                ));
            }
        }
    }
    // every command 1.16 has, ours has; those that change nothing here
    // answer alike
    for leaf in CHANGES_STATE {
        let mut args = vec!["exec", "node1", "--", "cilium"];
        args.extend(leaf.split_whitespace());
        args.push("--help");
        let out = lab.run(&args);
        if !out.status.success() {
            failures.push(format!("cilium {leaf} --help: {}", common::text(&out)));
        }
    }
    for line in CHANGES_THAT_KEEP_STATE {
        // the recorder filter's words are one argument
        let line = line.replace('_', " ");
        let mut dbg_args = vec!["exec", "node1", "--", "timeout", "20", dbg.as_str()];
        let mut ours_args = vec!["exec", "node1", "--", "timeout", "20", "cilium"];
        let words: Vec<&str> = match line.split_once("--filters ") {
            Some((head, filter)) => head
                .split_whitespace()
                .chain(["--filters", filter])
                .collect(),
            None => line.split_whitespace().collect(),
        };
        dbg_args.extend(&words);
        ours_args.extend(&words);
        let (theirs, ours) = (lab.run(&dbg_args), lab.run(&ours_args));
        if theirs.status.code() != ours.status.code() {
            failures.push(format!(
                "{line}: cilium-dbg exits {:?}, ours {:?}:\n{}\n{}",
                theirs.status.code(),
                ours.status.code(),
                common::text(&theirs),
                common::text(&ours)
            ));
        }
    }
    for line in [
        "status",
        "status --verbose",
        "status --probe",
        "status --succinct",
        "get",
        "ping",
    ] {
        let mut args = vec!["exec", "node1", "--", "timeout", "30", health.as_str()];
        args.extend(line.split_whitespace());
        let out = lab.run(&args);
        let text = common::text(&out);
        let bad: Vec<&&str> = BAD.iter().filter(|b| text.contains(**b)).collect();
        if !out.status.success() || !bad.is_empty() {
            failures.push(format!(
                "cilium-health {line}: {:?}, {bad:?}:\n{text}",
                out.status
            ));
        }
    }
    let after = common::pins(lab, "node1");
    for (pin, was) in &before {
        match after.get(pin) {
            Some(now) if now == was => {}
            now => failures.push(format!("pin {pin} changed: {was} -> {now:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        runs.len() + 6,
        failures.join("\n\n")
    );
}
