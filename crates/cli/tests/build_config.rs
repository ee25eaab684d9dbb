//! `cilium build-config` against a real API server, as the DaemonSet's
//! init container runs it: the agent's ServiceAccount (so its RBAC is what
//! 1.16 grants), `CILIUM_K8S_NAMESPACE` and the default sources. The same
//! objects as files give the same keys; the merge order is the
//! ConfigMap, then the CiliumNodeConfigs that select the node (both
//! versions, name order), then the Node's `config.cilium.io/` labels and
//! annotations.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use testsupport::kube;
use testsupport::Sandbox;

const CONFIG_MAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: cilium-config, namespace: kube-system}
data:
  debug: "false"
  monitor-aggregation: low
  cluster-name: lab
  tunnel-port: "8472"
"#;

/// CiliumNodeConfigs in kube-system as (name, version, nodeSelector,
/// defaults): `a-edge` (v2alpha1) and `b-expr` select node1, `c-core`
/// does not.
const NODE_CONFIGS: [(&str, &str, &str, &str); 3] = [
    (
        "a-edge",
        "v2alpha1",
        "{matchLabels: {role: edge}}",
        r#"{debug: alpha, only-alpha: "1"}"#,
    ),
    (
        "b-expr",
        "v2",
        "{matchExpressions: [{key: zone, operator: In, values: [a, b]}, {key: gpu, operator: DoesNotExist}]}",
        r#"{debug: expr, monitor-aggregation: medium, tunnel-port: "8473"}"#,
    ),
    (
        "c-core",
        "v2",
        "{matchLabels: {role: core}}",
        r#"{debug: core, only-core: "1"}"#,
    ),
];

fn node_config((name, version, selector, defaults): (&str, &str, &str, &str)) -> String {
    format!(
        "apiVersion: cilium.io/{version}\nkind: CiliumNodeConfig\nmetadata: {{name: {name}, namespace: kube-system}}\nspec:\n  nodeSelector: {selector}\n  defaults: {defaults}\n"
    )
}

const NODE: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: node1
  labels:
    kubernetes.io/hostname: node1
    role: edge
    zone: a
    config.cilium.io/monitor-aggregation: maximum
  annotations:
    config.cilium.io/debug: node
"#;

/// `cilium build-config` as the agent's ServiceAccount, in namespace
/// kube-system.
fn build_config(kubeconfig: &Path, dest: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cilium"))
        .arg("build-config")
        .arg(format!("--k8s-kubeconfig-path={}", kubeconfig.display()))
        .arg("--dest")
        .arg(dest)
        .args(args)
        .env("CILIUM_K8S_NAMESPACE", "kube-system")
        .env_remove("K8S_NODE_NAME")
        .output()
        .expect("run cilium build-config")
}

/// A run that must succeed: the keys it published and its log.
fn resolved(kubeconfig: &Path, dest: &Path, args: &[&str]) -> (BTreeMap<String, String>, String) {
    let out = build_config(kubeconfig, dest, args);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "build-config failed:\n{log}");
    (published(dest), log)
}

/// Node1's sources from the API server: the defaults and `node:`.
const NODE1: [&str; 4] = [
    "--node-name",
    "node1",
    "--source",
    "config-map:cilium-config,cilium-node-config:kube-system,node:",
];

/// The published keys: every `<key>` link under `dest`, read through it.
fn published(dest: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dest)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .map(|name| {
            let value = std::fs::read_to_string(dest.join(&name)).unwrap();
            (name, value)
        })
        .collect()
}

#[test]
fn the_api_server_and_the_same_objects_as_files_give_the_same_keys() {
    let mut sb = Sandbox::enter();
    let cp = kube::prepare(&sb);
    sb.adopt(testsupport::start_etcd(&sb.path().join("etcd")));
    kube::start_apiserver(&mut sb, &cp);
    // applies deploy/kubernetes/cilium.yaml: the ServiceAccount, its
    // RBAC and the deploy's cilium-config, which this test's replaces
    let agent = kube::agent_kubeconfig(&cp);
    kube::kubectl_ok(
        &cp,
        &["delete", "configmap", "-n", "kube-system", "cilium-config"],
    );
    kube::apply(&cp, CONFIG_MAP);
    kube::apply(&cp, NODE);
    let out = sb.path().join("out");

    // No CiliumNodeConfig CRD yet: the ConfigMap and the Node alone.
    let (keys, log) = resolved(&agent, &out.join("no-crd"), &NODE1);
    assert_eq!(keys["debug"], "node", "{log}");
    assert_eq!(
        keys["config-sources"], "config-map:kube-system/cilium-config,node:node1",
        "{log}"
    );

    kube::apply_crds(&cp);
    let files = sb.path().join("files");
    std::fs::create_dir_all(files.join("node-config")).unwrap();
    std::fs::write(files.join("cilium-config.yaml"), CONFIG_MAP).unwrap();
    std::fs::write(files.join("node.yaml"), NODE).unwrap();
    for c in NODE_CONFIGS {
        let yaml = node_config(c);
        kube::apply(&cp, &yaml);
        std::fs::write(
            files.join("node-config").join(format!("{}.yaml", c.0)),
            yaml,
        )
        .unwrap();
    }

    let (mut api_keys, log) = resolved(&agent, &out.join("api"), &NODE1);
    let file_sources = format!(
        "config-map:{0}/cilium-config.yaml,cilium-node-config:{0}/node-config,node:{0}/node.yaml",
        files.display()
    );
    let (mut file_keys, _) = resolved(
        &agent,
        &out.join("files"),
        &[
            "--node-name",
            "node1",
            "--node-labels",
            "role=edge,zone=a,config.cilium.io/monitor-aggregation=maximum",
            "--source",
            &file_sources,
        ],
    );
    assert_eq!(
        api_keys.remove("config-sources").unwrap(),
        "config-map:kube-system/cilium-config,cilium-node-config:kube-system/a-edge,cilium-node-config:kube-system/b-expr,node:node1",
        "{log}"
    );
    assert_eq!(file_keys.remove("config-sources").unwrap(), file_sources);
    assert_eq!(api_keys, file_keys);
    // ConfigMap < a-edge < b-expr < node labels < node annotations
    for (key, want) in [
        ("debug", "node"),
        ("monitor-aggregation", "maximum"),
        ("tunnel-port", "8473"),
        ("only-alpha", "1"),
        ("cluster-name", "lab"),
    ] {
        assert_eq!(
            api_keys.get(key).map(String::as_str),
            Some(want),
            "{key}\n{log}"
        );
    }
    assert!(
        !api_keys.contains_key("only-core"),
        "c-core does not select node1"
    );
    assert!(
        log.contains("msg=\"Source overrides key\" configSource=\"node:node1\" key=debug"),
        "{log}"
    );

    // By name, a CiliumNodeConfig applies whatever its selector says (the
    // agent may only list them: a field selector picks it).
    let (keys, log) = resolved(
        &agent,
        &out.join("named"),
        &[
            "--source",
            "config-map:cilium-config,cilium-node-config:kube-system/c-core",
        ],
    );
    assert_eq!(keys["debug"], "core", "{log}");
    assert_eq!(keys["only-core"], "1");

    // A missing ConfigMap is skipped and not listed.
    let (keys, log) = resolved(
        &agent,
        &out.join("missing-cm"),
        &[
            "--node-name",
            "node1",
            "--source",
            "config-map:absent,cilium-node-config:kube-system",
        ],
    );
    assert!(log.contains("Configmap not found, ignoring"), "{log}");
    assert_eq!(
        keys["config-sources"],
        "cilium-node-config:kube-system/a-edge,cilium-node-config:kube-system/b-expr"
    );
    assert_eq!(keys["debug"], "expr");

    // A node that is not registered: the default sources fail, naming it,
    // and nothing is written.
    let missing_node = out.join("missing-node");
    let failed = build_config(&agent, &missing_node, &["--node-name", "node9"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains("Node \"node9\" does not exist in the API server"),
        "{stderr}"
    );
    assert!(!missing_node.exists(), "nothing published for a failed run");
}
