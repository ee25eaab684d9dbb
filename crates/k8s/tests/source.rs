//! A resource's list+watch against a real API server: the initial list,
//! changes and deletions, and the watch resuming after the API server
//! restarts, brought through `watch::Store` as a subsystem sees them.

use k8s::{ClientOptions, ResourceSource};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::watcher;
use kube::Api;
use std::time::Duration;
use testsupport::Sandbox;
use tokio::sync::mpsc;

fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "namespace": "default", "labels": { "test": "source" } },
        "data": { "v": value },
    }))
    .unwrap()
}

/// What the store handed on, as `(change, key, value)` lines.
type Seen = mpsc::UnboundedReceiver<(String, String, Option<String>)>;

async fn expect(seen: &mut Seen, want: (&str, &str, Option<&str>)) {
    let got = tokio::time::timeout(Duration::from_secs(60), seen.recv())
        .await
        .unwrap_or_else(|_| panic!("no change; expected {want:?}"))
        .expect("store running");
    assert_eq!((got.0.as_str(), got.1.as_str(), got.2.as_deref()), want);
}

#[test]
fn config_maps_are_listed_watched_and_followed_across_an_api_server_restart() {
    let mut sb = Sandbox::enter();
    let cp = testsupport::kube::prepare(&sb);
    sb.adopt(testsupport::start_etcd(&sb.path().join("etcd")));
    let apiserver = testsupport::kube::start_apiserver(&mut sb, &cp);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (api, mut seen) = rt.block_on(async {
        let opts = ClientOptions {
            kubeconfig: Some(cp.admin_kubeconfig()),
            api_server: None,
            ..Default::default()
        };
        let client = k8s::connect(&opts).await.expect("client");
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let pp = PostParams::default();
        api.create(&pp, &config_map("a", "1")).await.unwrap();
        api.create(&pp, &config_map("b", "1")).await.unwrap();

        let (tx, mut seen) = mpsc::unbounded_channel();
        let source = ResourceSource::new(
            "ConfigMaps",
            api.clone(),
            // kube-root-ca.crt, which every namespace gets, is not ours
            watcher::Config::default().labels("test=source"),
        );
        let handler = move |change: watch::Change<String, ConfigMap>| {
            let line = match change {
                watch::Change::Upsert { key, new, .. } => {
                    let v = new.data.unwrap_or_default().get("v").cloned();
                    ("upsert".to_owned(), key, v)
                }
                watch::Change::Delete { key, .. } => ("delete".to_owned(), key, None),
                watch::Change::Synced => ("synced".to_owned(), String::new(), None),
            };
            let _ = tx.send(line);
            std::future::ready(Ok::<(), std::convert::Infallible>(()))
        };
        tokio::spawn(watch::Store::new("config maps").run(source, handler));
        expect(&mut seen, ("upsert", "default/a", Some("1"))).await;
        expect(&mut seen, ("upsert", "default/b", Some("1"))).await;
        expect(&mut seen, ("synced", "", None)).await;

        let mut changed = config_map("a", "2");
        changed.metadata.resource_version = api.get("a").await.unwrap().metadata.resource_version;
        api.replace("a", &pp, &changed).await.unwrap();
        expect(&mut seen, ("upsert", "default/a", Some("2"))).await;
        api.delete("b", &DeleteParams::default()).await.unwrap();
        expect(&mut seen, ("delete", "default/b", None)).await;
        (api, seen)
    });

    // the API server goes away and comes back: the watch resumes
    let apiserver = sb.child(apiserver);
    apiserver.kill().expect("kill kube-apiserver");
    apiserver.wait().expect("reap kube-apiserver");
    testsupport::kube::start_apiserver(&mut sb, &cp);
    rt.block_on(async {
        api.create(&PostParams::default(), &config_map("c", "1"))
            .await
            .unwrap();
        expect(&mut seen, ("upsert", "default/c", Some("1"))).await;
    });
}
