//! The operator's garbage collectors against a real API server, as its
//! ServiceAccount, with their intervals and the identity heartbeat
//! timeout shortened: CiliumEndpoints whose pod is gone or finished go and
//! the one of a running pod stays; an identity no endpoint names is marked
//! and then deleted while a used one stays unmarked; a CiliumNode without
//! Node and owner goes while one with its Node stays; the metrics count it.
//! In kvstore mode, an identity master key no node references goes and a
//! referenced one stays.

mod common;

use common::Cluster;
use std::process::Command;
use testsupport::kube;
use testsupport::node::wait_for;

const METRICS: &str = "127.0.0.1:9963";

fn identity(id: u32, app: &str) -> String {
    format!(
        r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{{"name":"{id}","labels":{{"app":"{app}"}}}},
            "security-labels":{{"k8s:app":"{app}","k8s:io.kubernetes.pod.namespace":"default"}}}}"#
    )
}

/// A CEP naming identity `id`, owned by the pod `owner` (name, uid) if any.
fn endpoint(name: &str, id: u32, owner: Option<(&str, &str)>) -> String {
    let owners = owner.map_or(String::new(), |(pod, uid)| {
        format!(r#","ownerReferences":[{{"apiVersion":"v1","kind":"Pod","name":"{pod}","uid":"{uid}"}}]"#)
    });
    format!(
        r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumEndpoint","metadata":{{"name":"{name}","namespace":"default"{owners}}},
            "status":{{"id":1,"identity":{{"id":{id}}},"state":"ready"}}}}"#
    )
}

fn pod(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default"}},
            "spec":{{"containers":[{{"name":"app","image":"cilium-lab/builtin"}}]}}}}"#
    )
}

fn exists(c: &Cluster, kind: &str, name: &str) -> bool {
    let mut cmd = c.cp.kubectl();
    cmd.args(["get", kind, name, "-n", "default", "-o", "name"]);
    cmd.output().is_ok_and(|o| o.status.success())
}

fn annotation(c: &Cluster, id: &str) -> String {
    let mut cmd = c.cp.kubectl();
    cmd.args([
        "get",
        "ciliumidentity",
        id,
        "-o",
        r"jsonpath={.metadata.annotations.io\.cilium\.heartbeat}",
    ]);
    common::out_of(cmd)
}

fn metrics() -> String {
    let out = Command::new("curl")
        .args(["-sf", &format!("http://{METRICS}/metrics")])
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn unused_identities_orphaned_endpoints_and_nodes_are_collected_and_used_ones_kept() {
    let mut c = Cluster::start();
    kube::wait_default_service_account(&c.cp, "default");
    kube::apply(&c.cp, &pod("web"));
    kube::apply(&c.cp, &pod("done"));
    c.kubectl(&[
        "patch",
        "pod",
        "done",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Succeeded"}}"#,
    ]);
    let uid = |name: &str| c.kubectl(&["get", "pod", name, "-o", "jsonpath={.metadata.uid}"]);
    let (web_uid, done_uid) = (uid("web"), uid("done"));
    for (id, app) in [
        (1000, "unused"),
        (1001, "web"),
        (1002, "ghost"),
        (1003, "done"),
    ] {
        kube::apply(&c.cp, &identity(id, app));
    }
    kube::apply(&c.cp, &endpoint("web", 1001, Some(("web", &web_uid))));
    kube::apply(&c.cp, &endpoint("done", 1003, Some(("done", &done_uid))));
    // no owner, no pod of its name (a node that went down with it)
    kube::apply(&c.cp, &endpoint("ghost", 1002, None));
    kube::apply(
        &c.cp,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}}"#,
    );
    c.add_nodes(&["node-a".into(), "orphan".into()]);

    c.operator_with(
        1,
        &[
            "--cluster-pool-ipv4-cidr=10.40.0.0/16".into(),
            "--identity-gc-interval=1s".into(),
            "--identity-heartbeat-timeout=3s".into(),
            "--cilium-endpoint-gc-interval=1s".into(),
            "--nodes-gc-interval=1s".into(),
            "--enable-metrics=true".into(),
            format!("--operator-prometheus-serve-addr={METRICS}"),
        ],
    );
    let log = || common::tail(&c.log(1));

    wait_for("the orphaned and finished CEPs to go", 30, || {
        !exists(&c, "ciliumendpoint", "ghost") && !exists(&c, "ciliumendpoint", "done")
    });
    assert!(exists(&c, "ciliumendpoint", "web"), "{}", log());

    wait_for("the unused identity to be marked", 30, || {
        !annotation(&c, "1000").is_empty()
    });
    wait_for("the unused identities to be deleted", 30, || {
        ["1000", "1002", "1003"]
            .iter()
            .all(|id| !exists(&c, "ciliumidentity", id))
    });
    assert!(exists(&c, "ciliumidentity", "1001"), "{}", log());
    assert_eq!(
        annotation(&c, "1001"),
        "",
        "a used identity is never marked"
    );

    wait_for("the CiliumNode without Node to go", 30, || {
        !exists(&c, "ciliumnode", "orphan")
    });
    assert!(exists(&c, "ciliumnode", "node-a"), "{}", log());

    let m = metrics();
    assert!(
        m.contains("cilium_operator_endpoint_gc_objects{outcome=\"success\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("cilium_operator_identity_gc_runs{outcome=\"fail\"} 0"),
        "{m}"
    );
    assert!(
        !m.contains("cilium_operator_identity_gc_runs{outcome=\"success\"} 0"),
        "{m}"
    );
}

#[test]
fn in_kvstore_mode_master_keys_no_node_references_are_deleted() {
    use kvstore::keys::{identity_id, identity_value};
    let mut c = Cluster::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let endpoints = [testsupport::ETCD_URL.to_owned()];
    let node = rt
        .block_on(kvstore::Kvstore::connect(
            &endpoints,
            std::time::Duration::from_secs(60),
        ))
        .expect("connect to etcd");
    let (used, unused) = ("k8s:app=web;", "k8s:app=gone;");
    rt.block_on(async {
        node.put(&identity_id(500), used.as_bytes()).await.unwrap();
        node.put(&identity_id(501), unused.as_bytes())
            .await
            .unwrap();
        node.put_leased(&identity_value(used, "198.18.0.11"), b"500")
            .await
            .unwrap();
    });
    c.operator_with(
        1,
        &[
            "--cluster-pool-ipv4-cidr=10.40.0.0/16".into(),
            "--identity-allocation-mode=kvstore".into(),
            "--kvstore=etcd".into(),
            format!("--kvstore-opt=etcd.address={}", testsupport::ETCD_URL),
            "--identity-gc-interval=1s".into(),
        ],
    );
    let master = |id| rt.block_on(node.get(&identity_id(id))).unwrap();
    wait_for("the unreferenced master key to go", 30, || {
        master(501).is_none()
    });
    assert_eq!(
        master(500).as_deref(),
        Some(used.as_bytes()),
        "{}",
        common::tail(&c.log(1))
    );
}
