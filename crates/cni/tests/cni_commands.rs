//! CHECK, STATUS and GC of CNI 1.1, and the CLI views of a pod.

mod common;

use common::*;

#[test]
fn check_status_and_gc_follow_the_spec() {
    let mut node = Node::new("10.0.15.0/24");
    // STATUS before the agent runs: plugin not available (50).
    let status = node.cni(&[("CNI_COMMAND", "STATUS")], NETCONF);
    assert_eq!(status.json["code"], 50, "{}", status.json);
    node.start_agent();
    assert_eq!(node.cni(&[("CNI_COMMAND", "STATUS")], NETCONF).code, 0);

    let ns_a = node.create_netns("a");
    let add = node.cni_pod("ADD", "a", ns_a.to_str().unwrap());
    assert_eq!(add.code, 0, "{}", add.json);
    let a = node.add_pod("b");

    // CHECK against the ADD result passes; against a wrong one it does not.
    let args = "K8S_POD_NAMESPACE=default;K8S_POD_NAME=a";
    let env = [
        ("CNI_COMMAND", "CHECK"),
        ("CNI_CONTAINERID", "c-a"),
        ("CNI_NETNS", ns_a.to_str().unwrap()),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", args),
    ];
    let mut conf: serde_json::Value = serde_json::from_str(NETCONF).unwrap();
    conf["prevResult"] = add.json.clone();
    assert_eq!(node.cni(&env, &conf.to_string()).code, 0);
    conf["prevResult"]["ips"][0]["address"] = "10.0.15.200/32".into();
    let bad = node.cni(&env, &conf.to_string());
    assert_ne!(bad.code, 0);
    assert!(
        bad.json["msg"].as_str().unwrap().contains("10.0.15.200"),
        "{}",
        bad.json
    );

    // The CLI shows the pods.
    let ip_list = node.cilium_ok(&["ip", "list"]);
    assert!(ip_list.contains(&format!("{a}/32")), "{ip_list}");
    assert!(
        ip_list.contains("0.0.0.0/0") && ip_list.contains("reserved:world"),
        "{ip_list}"
    );
    let get = node.cilium_ok(&["endpoint", "get", "pod-name:default/b"]);
    let eps: serde_json::Value = serde_json::from_str(&get).unwrap();
    assert_eq!(
        eps[0]["status"]["networking"]["addressing"][0]["ipv4"],
        a.to_string()
    );
    assert_eq!(
        eps[0]["status"]["external-identifiers"]["container-id"],
        "c-b"
    );
    let list = node.cilium_ok(&["endpoint", "list"]);
    assert!(
        list.contains("ENFORCEMENT") && list.contains("ready"),
        "{list}"
    );
    assert!(!node.cilium(&["endpoint", "get", "99"]).status.success());

    // GC keeps only the attachments the runtime still lists.
    let mut gc: serde_json::Value = serde_json::from_str(NETCONF).unwrap();
    gc["cniVersion"] = "1.1.0".into();
    gc["cni.dev/valid-attachments"] = serde_json::json!([{"containerID": "c-a", "ifname": "eth0"}]);
    assert_eq!(node.cni(&[("CNI_COMMAND", "GC")], &gc.to_string()).code, 0);
    let left = node.cilium_ok(&["endpoint", "list", "-o", "json"]);
    assert!(left.contains("c-a") && !left.contains("c-b"), "{left}");
}
