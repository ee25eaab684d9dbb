//! CiliumIdentities against a real API server (built from tools/k8s), as
//! the agent's ServiceAccount: two agents' identities (two `Identities`
//! over CiliumIdentities, in this process) asked for the same labels at
//! once agree on one ID and make one object, which `kubectl get
//! ciliumidentities` shows with its Namespace column; an identity the
//! operator marked for collection loses the mark when an agent takes it
//! up again, and while the agent keeps using it.

use agent::k8s::identities::CiliumIdentities;
use controlplane::identity::{labels_key, Backend, Identities};
use controlplane::tasks::Tasks;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One agent's identities, over its own connection as the ServiceAccount.
async fn agent(opts: &k8s::ClientOptions, tasks: &Tasks) -> Arc<Identities> {
    let client = k8s::connect(opts).await.expect("connect");
    let objects = Arc::new(CiliumIdentities::new(client.clone()));
    let ids = Identities::new(
        Backend::Objects(objects.clone(), tasks.clone()),
        "node".into(),
    );
    ids.follow_source(objects.source(), tasks);
    ids
}

fn labels(app: &str) -> Vec<String> {
    vec![
        format!("k8s:app={app}"),
        "k8s:io.kubernetes.pod.namespace=default".to_string(),
        "k8s:io.cilium.k8s.policy.cluster=default".to_string(),
    ]
}

#[test]
fn agents_racing_for_the_same_labels_agree_on_one_cilium_identity() {
    let mut sb = testsupport::Sandbox::enter();
    let (cp, _) = testsupport::kube::start(&mut sb);
    testsupport::kube::apply_crds(&cp);
    let opts = k8s::ClientOptions {
        kubeconfig: Some(testsupport::kube::agent_kubeconfig(&cp)),
        api_server: None,
        ..Default::default()
    };
    let apps: Vec<String> = (0..20).map(|i| format!("app{i}")).collect();

    // on this thread, in the sandbox's namespaces; the two agents' requests
    // are in flight at once
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (ia, ib) = rt.block_on(async {
        let tasks = Tasks::default();
        let (a, b) = (agent(&opts, &tasks).await, agent(&opts, &tasks).await);
        let on = |ids: Arc<Identities>| {
            let apps = apps.clone();
            async move {
                let mut got = Vec::new();
                for app in &apps {
                    got.push(ids.allocate(&labels(app)).await.expect("allocate"));
                }
                got
            }
        };
        let got = tokio::join!(on(Arc::clone(&a)), on(Arc::clone(&b)));
        tasks.shutdown(std::time::Duration::from_secs(5)).await;
        got
    });
    assert_eq!(ia, ib, "both agents use the same ID for each label set");
    assert!(ia.iter().all(|id| (256..=65535).contains(id)), "{ia:?}");

    // one object per label set, named after its ID
    let list: serde_json::Value = serde_json::from_str(&testsupport::kube::kubectl_ok(
        &cp,
        &["get", "ciliumidentities", "-o", "json"],
    ))
    .unwrap();
    let mut by_labels: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in list["items"].as_array().unwrap() {
        let labels: Vec<String> = item["security-labels"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect();
        by_labels
            .entry(labels_key(&labels))
            .or_default()
            .push(item["metadata"]["name"].as_str().unwrap().to_owned());
    }
    assert_eq!(by_labels.len(), apps.len(), "{by_labels:?}");
    for (app, id) in apps.iter().zip(&ia) {
        assert_eq!(
            by_labels[&labels_key(&labels(app))],
            vec![id.to_string()],
            "{app}"
        );
    }

    // as kubectl shows them: the Namespace column from the metadata labels
    let table = testsupport::kube::kubectl_ok(&cp, &["get", "ciliumidentities"]);
    assert!(
        table.starts_with("NAME") && table.contains("NAMESPACE"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&ia[0].to_string()))
        .unwrap_or_else(|| panic!("no row for {}: {table}", ia[0]));
    assert_eq!(row.split_whitespace().nth(1), Some("default"), "{table}");
    let app = testsupport::kube::kubectl_ok(
        &cp,
        &[
            "get",
            "ciliumidentities",
            "-l",
            "app=app0",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    assert_eq!(app, ia[0].to_string());
}

fn heartbeat(cp: &kubeplane::ControlPlane, id: u32) -> String {
    testsupport::kube::kubectl_ok(
        cp,
        &[
            "get",
            "ciliumidentity",
            &id.to_string(),
            "-o",
            r"jsonpath={.metadata.annotations.io\.cilium\.heartbeat}",
        ],
    )
}

#[test]
fn a_marked_identity_in_use_loses_its_mark() {
    let mut sb = testsupport::Sandbox::enter();
    let (cp, _) = testsupport::kube::start(&mut sb);
    testsupport::kube::apply_crds(&cp);
    let opts = k8s::ClientOptions {
        kubeconfig: Some(testsupport::kube::agent_kubeconfig(&cp)),
        ..Default::default()
    };
    // as the operator leaves an identity no endpoint named for a while
    let marked = |id: u32| {
        testsupport::kube::kubectl_ok(
            &cp,
            &[
                "annotate",
                "--overwrite",
                "ciliumidentity",
                &id.to_string(),
                "io.cilium.heartbeat=2026-11-24T10:00:00.000000000Z",
            ],
        );
    };
    testsupport::kube::apply(
        &cp,
        r#"{"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{"name":"4242"},
            "security-labels":{"k8s:app":"db","k8s:io.kubernetes.pod.namespace":"default",
                               "k8s:io.cilium.k8s.policy.cluster":"default"}}"#,
    );
    marked(4242);
    assert!(!heartbeat(&cp, 4242).is_empty());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks = Tasks::default();
        let ids = agent(&opts, &tasks).await;
        // found among the cluster's identities: reused, so taken back
        assert_eq!(ids.allocate(&labels("db")).await.unwrap(), 4242);
        let unmarked = || async { heartbeat(&cp, 4242).is_empty() };
        assert!(unmarked().await, "the reuse removed the mark");

        // marked again while this node holds it: the periodic sync takes
        // it back
        marked(4242);
        ids.keep_alive(std::time::Duration::from_millis(500), &tasks);
        let t = std::time::Instant::now();
        while !unmarked().await {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(20),
                "the mark stayed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        tasks.shutdown(std::time::Duration::from_secs(5)).await;
    });
}
