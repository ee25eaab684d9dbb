//! The agent in kvstore mode against a real etcd: it registers its node
//! under its session lease and lists the nodes other agents publish; a node
//! whose agent is gone leaves with its lease.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testsupport::Sandbox;

const AGENT: &str = env!("CARGO_BIN_EXE_cilium-agent");

fn agent(sb: &Sandbox, extra: &[&str]) -> Command {
    let mut c = Command::new(AGENT);
    c.env("K8S_NODE_NAME", "node1")
        .arg(format!("--bpf-root={}", sb.bpffs().display()))
        .arg(format!(
            "--state-dir={}",
            sb.run_dir().join("state").display()
        ))
        .arg(format!(
            "--socket-path={}",
            sb.run_dir().join("cilium.sock").display()
        ))
        .arg("--ipv4-range=10.1.0.0/24")
        .args(extra);
    c
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn agent_registers_its_node_and_follows_the_others() {
    let mut sb = Sandbox::enter();
    sb.adopt(testsupport::start_etcd(&sb.path().join("etcd")));
    let opt = format!("--kvstore-opt=etcd.address={}", testsupport::ETCD_URL);
    let child = agent(&sb, &["--kvstore=etcd", &opt])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    sb.adopt(child);
    let socket = sb.run_dir().join("cilium.sock");
    let cilium = |args: &[&str]| {
        let out = testsupport::cilium(&socket, &sb.bpffs(), args);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_for("agent", || cilium(&["status", "--brief"]).trim() == "OK");
    assert!(
        cilium(&["status"]).contains("etcd: 1/1 connected"),
        "{}",
        cilium(&["status"])
    );

    // Another node's agent publishes itself, then dies (its runtime ends).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let own = rt.block_on(async {
        let kv = kvstore::Kvstore::connect(&[testsupport::ETCD_URL.into()], Duration::from_secs(2))
            .await
            .unwrap();
        let node2 = r#"{"Name":"node2","Cluster":"default","IPAddresses":[{"Type":"InternalIP","IP":"198.18.0.12"}],"IPv4AllocCIDR":{"IP":"10.2.0.0","Mask":"////AA=="},"ClusterID":0,"Source":"local"}"#;
        kv.put_leased(&kvstore::keys::node("default", "node2"), node2.as_bytes()).await.unwrap();
        kv.get(&kvstore::keys::node("default", "node1")).await.unwrap()
    });
    drop(rt);
    let own: serde_json::Value = serde_json::from_slice(&own.expect("node1 registered")).unwrap();
    assert_eq!(own["Name"], "node1");
    assert_eq!(own["IPv4AllocCIDR"]["Mask"], "////AA==");
    assert!(own["IPAddresses"].to_string().contains("CiliumInternalIP"));

    wait_for("node2 to be listed", || {
        cilium(&["node", "list"]).contains("node2")
    });
    let list = cilium(&["node", "list"]);
    assert!(
        list.contains("198.18.0.12") && list.contains("10.2.0.0/24"),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.starts_with("node1") && l.contains("10.1.0.0/24") && l.contains("local")),
        "{list}"
    );
    wait_for("node2 to leave with its lease", || {
        !cilium(&["node", "list"]).contains("node2")
    });
}

#[test]
fn bad_kvstore_configuration_is_refused() {
    let sb = Sandbox::enter();
    for (args, needle) in [
        (vec!["--kvstore=consul"], "only etcd"),
        (vec!["--kvstore=etcd"], "etcd.address"),
        (
            vec!["--kvstore=etcd", "--kvstore-opt=etcd.nope=1"],
            "etcd.nope",
        ),
    ] {
        let out = agent(&sb, &args).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
