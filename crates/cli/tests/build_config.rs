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

/// `a-edge` (v2alpha1) and `b-expr` select node1, `c-core` does not.
const NODE_CONFIGS: [(&str, &str); 3] = [
    (
        "a-edge",
        r#"apiVersion: cilium.io/v2alpha1
kind: CiliumNodeConfig
metadata: {name: a-edge, namespace: kube-system}
spec:
  nodeSelector: {matchLabels: {role: edge}}
  defaults: {debug: alpha, only-alpha: "1"}
"#,
    ),
    (
        "b-expr",
        r#"apiVersion: cilium.io/v2
kind: CiliumNodeConfig
metadata: {name: b-expr, namespace: kube-system}
spec:
  nodeSelector:
    matchExpressions:
    - {key: zone, operator: In, values: [a, b]}
    - {key: gpu, operator: DoesNotExist}
  defaults: {debug: expr, monitor-aggregation: medium, tunnel-port: "8473"}
"#,
    ),
    (
        "c-core",
        r#"apiVersion: cilium.io/v2
kind: CiliumNodeConfig
metadata: {name: c-core, namespace: kube-system}
spec:
  nodeSelector: {matchLabels: {role: core}}
  defaults: {debug: core, only-core: "1"}
"#,
    ),
];

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

fn ok(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "build-config failed:\n{stderr}");
    stderr
}

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
    let no_crd = out.join("no-crd");
    let log = ok(build_config(
        &agent,
        &no_crd,
        &[
            "--node-name",
            "node1",
            "--source",
            "config-map:cilium-config,cilium-node-config:kube-system,node:",
        ],
    ));
    let keys = published(&no_crd);
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
    for (name, yaml) in NODE_CONFIGS {
        kube::apply(&cp, yaml);
        std::fs::write(files.join("node-config").join(format!("{name}.yaml")), yaml).unwrap();
    }

    let from_api = out.join("api");
    let log = ok(build_config(
        &agent,
        &from_api,
        &[
            "--node-name",
            "node1",
            "--source",
            "config-map:cilium-config,cilium-node-config:kube-system,node:",
        ],
    ));
    let from_files = out.join("files");
    let file_sources = format!(
        "config-map:{0}/cilium-config.yaml,cilium-node-config:{0}/node-config,node:{0}/node.yaml",
        files.display()
    );
    ok(build_config(
        &agent,
        &from_files,
        &[
            "--node-name",
            "node1",
            "--node-labels",
            "role=edge,zone=a,config.cilium.io/monitor-aggregation=maximum",
            "--source",
            &file_sources,
        ],
    ));
    let mut api_keys = published(&from_api);
    let mut file_keys = published(&from_files);
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
    let named = out.join("named");
    let log = ok(build_config(
        &agent,
        &named,
        &[
            "--source",
            "config-map:cilium-config,cilium-node-config:kube-system/c-core",
        ],
    ));
    let keys = published(&named);
    assert_eq!(keys["debug"], "core", "{log}");
    assert_eq!(keys["only-core"], "1");

    // A missing ConfigMap is skipped and not listed.
    let missing_cm = out.join("missing-cm");
    let log = ok(build_config(
        &agent,
        &missing_cm,
        &[
            "--node-name",
            "node1",
            "--source",
            "config-map:absent,cilium-node-config:kube-system",
        ],
    ));
    assert!(log.contains("Configmap not found, ignoring"), "{log}");
    let keys = published(&missing_cm);
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
