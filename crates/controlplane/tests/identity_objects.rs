//! Identities as cluster-wide objects (`identity-allocation-mode=crd`)
//! over an in-memory store that behaves as the API server does for
//! CiliumIdentities: a name is created once, a second create of it fails
//! and reads back what it holds, and every change reaches each watcher.

use controlplane::identity::objects::{IdentityObjects, StoreError};
use controlplane::identity::{labels_key, Backend, Identities};
use controlplane::nodes::Node;
use controlplane::ports::PortFuture;
use controlplane::tasks::Tasks;
use controlplane::{ControlPlane, Ports, Settings};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testsupport::fakes::FakeKernel;
use tokio::sync::mpsc;
use watch::Event;

type Watcher = mpsc::Sender<Event<String, String>>;

/// The API server's CiliumIdentities, in memory.
#[derive(Default)]
struct FakeObjects {
    objects: Mutex<BTreeMap<u32, Vec<String>>>,
    watchers: Mutex<Vec<Watcher>>,
    /// Creates that made an object.
    created: Mutex<usize>,
}

impl FakeObjects {
    /// A watch of every object: the listing, then each change.
    fn watch(&self) -> mpsc::Receiver<Event<String, String>> {
        let (tx, rx) = mpsc::channel(100_000);
        for (id, labels) in self.objects.lock().unwrap().iter() {
            tx.try_send(upsert(*id, labels)).unwrap();
        }
        tx.try_send(Event::ListDone).unwrap();
        self.watchers.lock().unwrap().push(tx);
        rx
    }

    /// An object another agent made, announced to the watchers or not.
    fn insert(&self, id: u32, labels: &[String], announce: bool) {
        self.objects.lock().unwrap().insert(id, labels.to_vec());
        if announce {
            for w in self.watchers.lock().unwrap().iter() {
                w.try_send(upsert(id, labels)).unwrap();
            }
        }
    }

    fn created(&self) -> usize {
        *self.created.lock().unwrap()
    }
}

fn upsert(id: u32, labels: &[String]) -> Event<String, String> {
    Event::Upsert {
        key: id.to_string(),
        value: labels_key(labels),
    }
}

impl IdentityObjects for FakeObjects {
    fn create<'a>(
        &'a self,
        id: u32,
        labels: &'a [String],
    ) -> PortFuture<'a, Result<Option<Vec<String>>, StoreError>> {
        Box::pin(async move {
            // a round trip: other agents go on meanwhile
            tokio::task::yield_now().await;
            let now = {
                let mut objects = self.objects.lock().unwrap();
                match objects.get(&id) {
                    Some(held) => held.clone(),
                    None => {
                        objects.insert(id, labels.to_vec());
                        *self.created.lock().unwrap() += 1;
                        for w in self.watchers.lock().unwrap().iter() {
                            w.try_send(upsert(id, labels)).unwrap();
                        }
                        labels.to_vec()
                    }
                }
            };
            tokio::task::yield_now().await;
            Ok(Some(now))
        })
    }
}

/// One agent's identities over `store`, following its watch.
fn agent(store: &Arc<FakeObjects>, tasks: &Tasks) -> Arc<Identities> {
    let objects: Arc<dyn IdentityObjects> = store.clone();
    let ids = Identities::new(Backend::Objects(objects, tasks.clone()), "node".into());
    ids.follow_source(store.watch(), tasks);
    ids
}

fn labels(app: &str) -> Vec<String> {
    vec![
        format!("k8s:app={app}"),
        "k8s:io.kubernetes.pod.namespace=default".to_string(),
    ]
}

#[tokio::test(flavor = "current_thread")]
async fn two_agents_racing_for_the_same_labels_get_one_identity() {
    let (store, tasks) = (Arc::new(FakeObjects::default()), Tasks::default());
    let (a, b) = (agent(&store, &tasks), agent(&store, &tasks));
    let apps: Vec<String> = (0..50).map(|i| format!("app{i}")).collect();
    let on = |ids: Arc<Identities>| {
        let apps = apps.clone();
        async move {
            let mut got = Vec::new();
            for app in &apps {
                got.push(ids.allocate(&labels(app)).await.unwrap());
            }
            got
        }
    };
    let (ia, ib) = tokio::join!(on(Arc::clone(&a)), on(Arc::clone(&b)));
    assert_eq!(ia, ib, "both agents use the same ID for each label set");
    assert_eq!(store.created(), apps.len(), "one object per label set");
    let mut distinct = ia.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), apps.len());
    assert!(ia.iter().all(|id| (256..=65535).contains(id)));
}

#[tokio::test(flavor = "current_thread")]
async fn an_identity_another_agent_made_is_used_listed_and_wakes_policy() {
    let (store, tasks) = (Arc::new(FakeObjects::default()), Tasks::default());
    store.insert(4000, &labels("web"), false);
    let ids = agent(&store, &tasks);
    let mut synced = ids.synced();
    assert!(synced.wait().await);
    assert_eq!(ids.get(4000), Some(labels("web")), "listed from the watch");
    assert_eq!(ids.allocate(&labels("web")).await.unwrap(), 4000);
    assert_eq!(store.created(), 0, "found, not created");

    let mut changes = ids.subscribe();
    changes.mark_unchanged();
    store.insert(4001, &labels("db"), true);
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("a new identity wakes policy regeneration")
        .unwrap();
    assert_eq!(ids.get(4001), Some(labels("db")));
}

#[tokio::test(flavor = "current_thread")]
async fn ids_other_labels_hold_are_skipped_even_when_the_cache_does_not_know_them() {
    let (store, tasks) = (Arc::new(FakeObjects::default()), Tasks::default());
    let key = labels_key(&labels("web"));
    let first: Vec<u32> = controlplane::identity::objects::candidates(&key)
        .take(3)
        .collect();
    // known to the watch, then taken behind its back
    store.insert(first[0], &labels("other0"), false);
    let ids = agent(&store, &tasks);
    ids.synced().wait().await;
    store.insert(first[1], &labels("other1"), false);
    assert_eq!(ids.allocate(&labels("web")).await.unwrap(), first[2]);
    assert_eq!(store.created(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_restored_identity_the_store_lost_is_created_again() {
    let (store, tasks) = (Arc::new(FakeObjects::default()), Tasks::default());
    let ids = agent(&store, &tasks);
    assert_eq!(ids.adopt(&labels("web"), 5000), 5000);
    for _ in 0..500 {
        if store.objects.lock().unwrap().contains_key(&5000) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        store.objects.lock().unwrap().get(&5000),
        Some(&labels("web"))
    );
    assert_eq!(ids.allocate(&labels("web")).await.unwrap(), 5000);
}

#[tokio::test(flavor = "current_thread")]
async fn the_control_plane_gives_endpoints_identities_from_the_objects() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, tasks) = (Arc::new(FakeKernel::default()), Tasks::default());
    let store = Arc::new(FakeObjects::default());
    store.insert(7000, &labels("web"), false);
    let ip = |s: &str| s.parse().unwrap();
    let ports = Ports {
        ipcache: kernel.clone(),
        endpoints: kernel.clone(),
        lb: kernel.clone(),
        node_routes: None,
        node_ids: kernel.clone(),
        events: kernel.clone(),
    };
    let settings = Settings {
        state_dir: dir.path().to_owned(),
        ipv4: Some(controlplane::plane::Pool {
            pod_cidr: (ip("10.1.0.0"), 24),
            router_ip: ip("10.1.0.1"),
        }),
        ipv6: None,
        node: Node {
            name: "node1".into(),
            cluster: "default".into(),
            addresses: Vec::new(),
            ipv4_alloc_cidr: None,
            ipv6_alloc_cidr: None,
            health_ipv4: None,
            health_ipv6: None,
            cluster_id: 0,
            source: "local".into(),
        },
        health: false,
        node_ip: Some(ip("198.18.0.11").into()),
        kvstore: None,
        cluster: "default".into(),
        maglev: None,
        enforcement: policy::Enforcement::Default,
        kubernetes: true,
        identity_objects: Some(store.clone()),
        pod_labels: None,
    };
    let cp = ControlPlane::new(ports, settings, &tasks).unwrap();
    cp.start(&tasks);
    cp.identities.follow_source(store.watch(), &tasks);

    kernel.add_interface("lxcweb");
    let req = api::endpoint::EndpointChangeRequest {
        container_id: "c-web".into(),
        labels: vec!["k8s:app=web".into()],
        interface_name: "lxcweb".into(),
        mac: "02:00:00:00:00:01".into(),
        host_mac: "02:00:00:00:00:02".into(),
        state: api::endpoint::EndpointState::WaitingForIdentity.to_string(),
        addressing: Some(api::ipam::AddressPair {
            ipv4: "10.1.0.5".into(),
            ..Default::default()
        }),
        k8s_pod_name: "web".into(),
        k8s_namespace: "default".into(),
        ..Default::default()
    };
    let ep = cp.endpoints.create(&req).await.unwrap();
    assert_eq!(ep.identity, 7000, "the identity the cluster already has");
    assert_eq!(store.created(), 0);
}
