//! Bad input to cilium-cni: a CNI error with the right code, a non-zero
//! exit, and nothing leaked (no address, veth or endpoint).

mod common;

use common::*;

fn assert_error(out: &CniOutput, code: u64, needle: &str) {
    assert_ne!(out.code, 0, "must fail: {}", out.json);
    assert_eq!(out.json["code"].as_u64(), Some(code), "{}", out.json);
    let msg = out.json["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains(needle),
        "message {msg:?} should mention {needle:?}"
    );
    assert!(out.json["cniVersion"].is_string());
}

/// The node's own endpoints, once the health endpoint is among them: the
/// agent reports ready before it launches that one.
fn node_endpoints(node: &Node) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let eps = node.cilium_ok(&["endpoint", "list", "-o", "json"]);
        let eps: serde_json::Value = serde_json::from_str(&eps).unwrap();
        let list = eps.as_array().expect("a list");
        if list.iter().any(is_health_endpoint) || std::time::Instant::now() > deadline {
            return eps;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn assert_nothing_leaked(node: &Node) {
    let eps = node_endpoints(node);
    let node_only = eps
        .as_array()
        .is_some_and(|eps| eps.len() == 2 && eps.iter().all(is_node_endpoint));
    assert!(node_only, "only the health and the host endpoint: {eps:#}");
    assert_eq!(
        node.lxc_links(),
        ["lxc_health"],
        "only the health endpoint's veth:\n{}",
        node.links()
    );
    let status = node.cilium_ok(&["status"]);
    assert!(
        status.contains("IPv4: 2/"),
        "only the router's and the health endpoint's addresses:\n{status}"
    );
}

#[test]
fn version_lists_the_supported_specs() {
    let node = Node::new("10.0.10.0/24");
    let out = node.cni(&[("CNI_COMMAND", "VERSION")], "");
    assert_eq!(out.code, 0);
    assert_eq!(out.json["cniVersion"], "1.1.0");
    let versions = out.json["supportedVersions"].as_array().unwrap();
    assert!(versions.iter().any(|v| v == "1.0.0") && versions.iter().any(|v| v == "0.3.1"));
}

#[test]
fn bad_environment_and_stdin_are_refused_with_their_codes() {
    let mut node = Node::new("10.0.11.0/24");
    node.start_agent();
    let ns = node.create_netns("p");
    let ns = ns.to_str().unwrap();

    assert_error(&node.cni(&[], NETCONF), 4, "CNI_COMMAND");
    assert_error(&node.cni(&[("CNI_COMMAND", "FROB")], NETCONF), 4, "FROB");
    let missing = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_NETNS", ns),
        ("CNI_IFNAME", "eth0"),
    ];
    assert_error(&node.cni(&missing, NETCONF), 4, "CNI_CONTAINERID");
    let env = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", ns),
        ("CNI_IFNAME", "eth0"),
    ];
    assert_error(&node.cni(&env, "{not json"), 6, "failed to parse");
    assert_error(&node.cni(&env, ""), 6, "no network configuration");
    assert_error(
        &node.cni(&env, r#"{"cniVersion":"9.9.9","name":"x"}"#),
        1,
        "9.9.9",
    );
    assert_error(&node.cni(&env, r#"{"name":"x"}"#), 7, "cniVersion");
    let bad_args = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", ns),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", "K8S_POD_NAME"),
    ];
    assert_error(&node.cni(&bad_args, NETCONF), 4, "CNI_ARGS");
    let gone = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/nonexistent/netns"),
        ("CNI_IFNAME", "eth0"),
    ];
    assert_error(&node.cni(&gone, NETCONF), 4, "/nonexistent/netns");
    assert_nothing_leaked(&node);
}

#[test]
fn an_exhausted_pool_fails_the_add_and_leaks_nothing() {
    // A /30 holds two addresses: the router's and one pod's, as there is
    // no health endpoint without health checking.
    let mut node = Node::new("10.0.12.0/30");
    node.agent_args
        .push("--enable-health-checking=false".into());
    node.start_agent();
    let status = node.cilium_ok(&["status"]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Cluster health:") && l.ends_with(" Probe disabled")),
        "{status}"
    );
    let first = node.add_pod("first");
    let ns = node.create_netns("second");
    let out = node.cni_pod("ADD", "second", ns.to_str().unwrap());
    assert_error(&out, 100, "range is full");
    let links = node.links();
    assert_eq!(
        links.matches("lxc").count(),
        1,
        "only the first pod's veth:\n{links}"
    );
    let eps = node.cilium_ok(&["endpoint", "list", "-o", "json"]);
    assert!(eps.contains(&first.to_string()) && !eps.contains("second"));

    // Removing the first pod frees its address for the second.
    let first_ns = node.netns("first");
    assert_eq!(
        node.cni_pod("DEL", "first", first_ns.to_str().unwrap())
            .code,
        0
    );
    let out = node.cni_pod("ADD", "second", ns.to_str().unwrap());
    assert_eq!(out.code, 0, "{}", out.json);
}

#[test]
fn add_failing_after_ipam_releases_the_address_and_removes_the_veth() {
    let mut node = Node::new("10.0.13.0/24");
    node.start_agent();
    // An interface name the kernel refuses makes ADD fail after IPAM.
    let ns = node.create_netns("p");
    let args = "K8S_POD_NAMESPACE=default;K8S_POD_NAME=p";
    let env = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c-p"),
        ("CNI_NETNS", ns.to_str().unwrap()),
        ("CNI_IFNAME", "this-name-is-far-too-long"),
        ("CNI_ARGS", args),
    ];
    let out = node.cni(&env, NETCONF);
    assert_ne!(out.code, 0, "{}", out.json);
    assert_nothing_leaked(&node);
}

#[test]
fn bad_api_requests_are_refused_without_state_changes() {
    let mut node = Node::new("10.0.14.0/24");
    node.start_agent();
    let client = api::Client::new(node.socket());
    let put = |body: &str| {
        client.call(
            "PUT",
            "/endpoint/cilium-local:0",
            &[],
            Some(body.as_bytes()),
        )
    };
    let e = put("{").unwrap_err();
    assert_eq!(e.status(), Some(400));
    let e = put(r#"{"state":"ready","interface-name":"nope0","addressing":{"ipv4":"10.0.14.9"},"mac":"02:00:00:00:00:01","host-mac":"02:00:00:00:00:02"}"#).unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert!(e.to_string().contains("nope0"), "{e}");
    let e = put(r#"{"state":"sleepy"}"#).unwrap_err();
    assert!(e.to_string().contains("sleepy"), "{e}");
    let e = put(r#"{"state":"ready","bogus":1}"#).unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let e = client
        .call("GET", "/endpoint/frob:1", &[], None)
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    let e = client.call("GET", "/endpoint/77", &[], None).unwrap_err();
    assert_eq!(e.status(), Some(404));
    let e = client
        .call("DELETE", "/ipam/10.0.14.77", &[], None)
        .unwrap_err();
    assert_eq!(e.status(), Some(404));
    let e = client
        .call("DELETE", "/ipam/not-an-ip", &[], None)
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    let e = client
        .call("POST", "/ipam?family=ipv6", &[], None)
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert_nothing_leaked(&node);
}

#[test]
fn add_replaces_the_links_a_half_done_add_left() {
    use sha2::Digest;
    let mut node = Node::new("10.0.15.0/24");
    node.start_agent();
    let ns = node.create_netns("p");
    // Links under the names an ADD of container c-p uses, as a killed ADD
    // or a leak elsewhere could leave them: the host end's (lxc + 12 hex of
    // SHA-256 of `<container>:<ifname>`) and eth0 in the pod.
    let digest = sha2::Sha256::digest(b"c-p:eth0");
    let host: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    let host = format!("lxc{host}");
    let run = |mut cmd: std::process::Command| {
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {out:?}");
    };
    let mut in_host = node.command("ip");
    in_host.args([
        "link", "add", &host, "type", "veth", "peer", "name", "stale0",
    ]);
    run(in_host);
    let mut in_pod = std::process::Command::new("nsenter");
    in_pod.arg(format!("--net={}", ns.display()));
    in_pod.args([
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "stale1",
    ]);
    run(in_pod);

    let out = node.cni_pod("ADD", "p", ns.to_str().unwrap());
    assert_eq!(out.code, 0, "{}", out.json);
    assert_eq!(
        out.json["interfaces"][0]["name"],
        host.as_str(),
        "{}",
        out.json
    );
    let links = node.links();
    assert!(
        links.lines().any(|l| l.contains(&format!(" {host}@if"))) && !links.contains("stale0"),
        "the host end is the pod's veth now:\n{links}"
    );
    let pod_ip: std::net::Ipv4Addr = out.json["ips"][0]["address"]
        .as_str()
        .and_then(|a| a.split('/').next()?.parse().ok())
        .expect("an address");
    assert_eq!(testsupport::node::eth0_ipv4(&ns), Some(pod_ip));
}
