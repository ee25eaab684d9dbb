//! The control plane over the in-memory kernel of `testsupport::fakes`:
//! what only an end-to-end test could check before, as a normal user and
//! in milliseconds. Each test builds the control plane as the agent does
//! (`ControlPlane::new`, then `start`) in a temp dir of its own.

use api::endpoint::{EndpointChangeRequest, EndpointState};
use api::ipam::AddressPair;
use controlplane::endpoint::EndpointRef;
use controlplane::ipcache::Source;
use controlplane::nodes::{IpNet, Node, NodeAddress};
use controlplane::tasks::Tasks;
use controlplane::{AgentNotify, ControlPlane, Ports, Settings};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use testsupport::fakes::FakeKernel;

const CLUSTER: &str = "default";

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn node(name: &str, node_ip: &str, router: &str, cidr: (Ipv4Addr, u8)) -> Node {
    Node {
        name: name.into(),
        cluster: CLUSTER.into(),
        addresses: vec![
            NodeAddress {
                kind: "InternalIP".into(),
                ip: node_ip.into(),
            },
            NodeAddress {
                kind: "CiliumInternalIP".into(),
                ip: router.into(),
            },
        ],
        ipv4_alloc_cidr: Some(IpNet::v4(cidr.0, cidr.1)),
        ipv6_alloc_cidr: None,
        health_ipv4: None,
        health_ipv6: None,
        cluster_id: 0,
        source: "local".into(),
    }
}

/// node1's control plane over `kernel`, keeping its state in `dir`.
fn plane(
    kernel: &Arc<FakeKernel>,
    dir: &Path,
    kv: Option<kvstore::Kvstore>,
    tasks: &Tasks,
) -> ControlPlane {
    plane_for(kernel, dir, kv, tasks, false)
}

/// [`plane`], with policies and nodes from Kubernetes when `kubernetes`.
fn plane_for(
    kernel: &Arc<FakeKernel>,
    dir: &Path,
    kv: Option<kvstore::Kvstore>,
    tasks: &Tasks,
    kubernetes: bool,
) -> ControlPlane {
    plane_with(kernel, dir, tasks, |s| {
        s.kvstore = kv;
        s.kubernetes = kubernetes;
    })
}

/// node1's control plane with settings `adjust` changes.
fn plane_with(
    kernel: &Arc<FakeKernel>,
    dir: &Path,
    tasks: &Tasks,
    adjust: impl FnOnce(&mut Settings),
) -> ControlPlane {
    let ports = Ports {
        ipcache: kernel.clone(),
        endpoints: kernel.clone(),
        lb: kernel.clone(),
        node_routes: Some(kernel.clone()),
        node_ids: kernel.clone(),
        events: kernel.clone(),
    };
    let mut settings = Settings {
        state_dir: dir.to_owned(),
        ipv4: Some(controlplane::plane::Pool {
            pod_cidr: (ip("10.1.0.0"), 24),
            router_ip: ip("10.1.0.1"),
        }),
        ipv6: None,
        node: node("node1", "198.18.0.11", "10.1.0.1", (ip("10.1.0.0"), 24)),
        health: false,
        node_ip: Some(ip("198.18.0.11").into()),
        kvstore: None,
        cluster: CLUSTER.into(),
        maglev: None,
        enforcement: policy::Enforcement::Default,
        kubernetes: false,
        identity_objects: None,
        pod_labels: None,
    };
    adjust(&mut settings);
    let cp = ControlPlane::new(ports, settings, tasks).expect("control plane starts");
    cp.start(tasks);
    cp
}

/// What the CNI plugin asks for a pod on `ifname` with address `addr`.
fn pod(kernel: &FakeKernel, name: &str, app: &str, addr: &str) -> EndpointChangeRequest {
    let ifname = format!("lxc{name}");
    kernel.add_interface(&ifname);
    EndpointChangeRequest {
        container_id: format!("c-{name}"),
        labels: vec![format!("k8s:app={app}")],
        interface_name: ifname,
        state: EndpointState::WaitingForIdentity.to_string(),
        mac: "02:00:00:00:00:01".into(),
        host_mac: "02:00:00:00:00:02".into(),
        addressing: Some(AddressPair {
            ipv4: addr.into(),
            ..Default::default()
        }),
        k8s_pod_name: name.into(),
        k8s_namespace: "default".into(),
        ..Default::default()
    }
}

/// A temp dir, an empty kernel and the tasks of one agent run.
fn world() -> (tempfile::TempDir, Arc<FakeKernel>, Tasks) {
    (
        tempfile::tempdir().unwrap(),
        Arc::new(FakeKernel::default()),
        Tasks::default(),
    )
}

/// A pod's endpoint, created as the CNI plugin asks for it.
async fn add(
    cp: &ControlPlane,
    kernel: &FakeKernel,
    name: &str,
    app: &str,
    addr: &str,
) -> controlplane::endpoint::Endpoint {
    cp.endpoints
        .create(&pod(kernel, name, app, addr))
        .await
        .unwrap()
}

/// Waits for what a background task does (a watch, a regeneration).
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "current_thread")]
async fn an_endpoint_is_realized_whole_and_deleted_without_trace() {
    let (dir, kernel, tasks) = world();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    let req = pod(&kernel, "web", "web", "10.1.0.5");
    let ep = cp.endpoints.create(&req).await.unwrap();
    assert_eq!(ep.state, EndpointState::Ready);
    assert_eq!(ep.identity, 256, "the first cluster-wide identity");
    {
        {
            let held = kernel.held();
            assert_eq!(held.lxc[&ep.ipv4.unwrap()].sec_id, 256);
            assert_eq!(held.ipcache[&(ep.ipv4.unwrap(), 32)].sec_identity, 256);
            assert_eq!(held.attached[&ep.id].0, "lxcweb");
            assert!(held.policy_programs.contains(&ep.id));
            assert!(
                held.policy_maps.contains_key(&ep.id),
                "policy map written before the endpoint is visible"
            );
        }
        assert!(dir
            .path()
            .join(ep.id.to_string())
            .join("ep_config.json")
            .exists());
        assert!(cp
            .ipam
            .as_ref()
            .unwrap()
            .lock()
            .unwrap()
            .allocations()
            .contains_key(&ep.ipv4.unwrap()));
        assert_eq!(kernel.events_of(AgentNotify::EndpointCreated).len(), 1);

        assert_eq!(cp.endpoints.delete(&EndpointRef::Local(ep.id)).unwrap(), 1);
        let held = kernel.held();
        assert!(held.lxc.is_empty() && held.attached.is_empty() && held.policy_maps.is_empty());
        assert!(!held.ipcache.contains_key(&(ep.ipv4.unwrap(), 32)));
    }
    assert!(
        cp.identities.held().is_empty(),
        "the identity reference is dropped"
    );
    assert!(!cp
        .ipam
        .as_ref()
        .unwrap()
        .lock()
        .unwrap()
        .allocations()
        .contains_key(&ep.ipv4.unwrap()));
    assert!(!dir.path().join(ep.id.to_string()).exists());
    assert_eq!(kernel.events_of(AgentNotify::EndpointDeleted).len(), 1);
    assert!(matches!(
        cp.endpoints.delete(&EndpointRef::Local(ep.id)),
        Err(controlplane::endpoint::EndpointError::NotFound)
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_create_gives_back_everything_it_took() {
    let (dir, kernel, tasks) = world();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    kernel.fail("write_endpoint", true);
    let req = pod(&kernel, "web", "web", "10.1.0.5");
    let err = cp.endpoints.create(&req).await.unwrap_err();
    assert!(err.to_string().contains("writing cilium_lxc"), "{err}");
    {
        let held = kernel.held();
        assert!(
            held.attached.is_empty()
                && held.policy_maps.is_empty()
                && held.policy_programs.is_empty()
        );
        assert!(!held.ipcache.contains_key(&(ip("10.1.0.5"), 32)));
    }
    assert!(cp.identities.held().is_empty());
    assert!(!cp
        .ipam
        .as_ref()
        .unwrap()
        .lock()
        .unwrap()
        .allocations()
        .contains_key(&ip("10.1.0.5")));
    assert!(cp.endpoints.is_empty());
    assert!(
        std::fs::read_dir(dir.path()).unwrap().all(|e| {
            let name = e.unwrap().file_name();
            !name.to_string_lossy().chars().all(|c| c.is_ascii_digit())
        }),
        "no endpoint directory"
    );

    // a refused request (bad address) allocates nothing at all
    kernel.fail("write_endpoint", false);
    let mut bad = pod(&kernel, "db", "db", "10.1.0.6");
    bad.addressing = Some(AddressPair {
        ipv4: "not-an-ip".into(),
        ..Default::default()
    });
    assert_eq!(cp.endpoints.create(&bad).await.unwrap_err().status(), 400);
    assert!(cp.identities.held().is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn endpoints_with_the_same_labels_share_one_identity_reference_counted() {
    let (dir, kernel, tasks) = world();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    let a = add(&cp, &kernel, "a", "web", "10.1.0.5").await;
    let b = add(&cp, &kernel, "b", "web", "10.1.0.6").await;
    let c = add(&cp, &kernel, "c", "db", "10.1.0.7").await;
    assert_eq!(a.identity, b.identity);
    assert_ne!(a.identity, c.identity);
    let refs = |id| {
        cp.identities
            .held()
            .into_iter()
            .find(|h| h.0 == id)
            .map(|h| h.2)
    };
    assert_eq!(refs(a.identity), Some(2));
    cp.endpoints.delete(&EndpointRef::Local(a.id)).unwrap();
    assert_eq!(refs(a.identity), Some(1), "b still holds it");
    cp.endpoints
        .delete(&EndpointRef::ContainerId("c-b".into()))
        .unwrap();
    assert_eq!(refs(a.identity), None);
    assert_eq!(refs(c.identity), Some(1));
}

#[tokio::test(flavor = "current_thread")]
async fn a_restart_takes_endpoints_back_and_removes_those_whose_pod_went_away() {
    let (dir, kernel) = (
        tempfile::tempdir().unwrap(),
        Arc::new(FakeKernel::default()),
    );
    let (web, db) = {
        let tasks = Tasks::default();
        let cp = plane(&kernel, dir.path(), None, &tasks);
        let web = add(&cp, &kernel, "web", "web", "10.1.0.5").await;
        let db = add(&cp, &kernel, "db", "db", "10.1.0.6").await;
        tasks.shutdown(Duration::from_secs(5)).await;
        (web, db)
    };
    // the db pod was deleted while the agent was down
    kernel.remove_interface("lxcdb");
    // and web's state names a template of another build
    let template = dir.path().join(web.id.to_string()).join("template.txt");
    assert_eq!(
        std::fs::read_to_string(&template).unwrap(),
        testsupport::fakes::TEMPLATE
    );
    std::fs::write(&template, "old").unwrap();
    let tasks = Tasks::default();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    let eps = cp.endpoints.list();
    assert_eq!(eps.len(), 1);
    assert_eq!(
        (eps[0].id, eps[0].identity, eps[0].ipv4),
        (web.id, web.identity, web.ipv4)
    );
    assert_eq!(eps[0].state, EndpointState::Ready);
    {
        let held = kernel.held();
        assert!(held.lxc.contains_key(&web.ipv4.unwrap()));
        assert!(
            !held.lxc.contains_key(&db.ipv4.unwrap()),
            "the vanished pod's entry is removed"
        );
        assert!(!held.attached.contains_key(&db.id));
    }
    {
        let ipam = cp.ipam.as_ref().unwrap().lock().unwrap();
        assert!(ipam.allocations().contains_key(&web.ipv4.unwrap()));
        assert!(!ipam.allocations().contains_key(&db.ipv4.unwrap()));
    }
    assert!(!dir.path().join(db.id.to_string()).exists());
    assert_eq!(
        std::fs::read_to_string(&template).unwrap(),
        testsupport::fakes::TEMPLATE
    );
    // the restored endpoint holds its identity: a new pod with its labels shares it
    let again = add(&cp, &kernel, "web2", "web", "10.1.0.7").await;
    assert_eq!(again.identity, web.identity);
}

#[tokio::test(flavor = "current_thread")]
async fn the_host_endpoint_allows_all_keeps_its_id_and_labels_and_cannot_be_deleted() {
    let (dir, kernel) = (
        tempfile::tempdir().unwrap(),
        Arc::new(FakeKernel::default()),
    );
    kernel.add_interface("cilium_host");
    let host = {
        let tasks = Tasks::default();
        let cp = plane_with(&kernel, dir.path(), &tasks, |s| {
            s.enforcement = policy::Enforcement::Always;
        });
        let id = cp
            .endpoints
            .ensure_host("cilium_host", "02:00:00:00:00:0a")
            .unwrap();
        assert_eq!(
            cp.endpoints
                .ensure_host("cilium_host", "02:00:00:00:00:0a")
                .unwrap(),
            id
        );
        let ep = endpoint(&cp, id);
        assert!(ep.is_host());
        assert_eq!(ep.identity, abi::identity::HOST);
        assert_eq!(ep.state, EndpointState::Ready);
        let api = ep.to_api();
        assert_eq!(api.status.networking.unwrap().addressing[0].ipv4, "");
        // host policies are not enforced, whatever the mode: all in
        assert!(admits(&kernel, id, abi::identity::WORLD, 22));
        assert_eq!(ep.policy.policy_enabled(), "none");
        {
            let held = kernel.held();
            assert!(
                held.lxc.is_empty() && held.attached.is_empty(),
                "no pod entries"
            );
        }
        let refused = cp.endpoints.delete(&EndpointRef::Local(id));
        assert!(refused.is_err(), "{refused:?}");
        // its node's labels join reserved:host; the identity stays
        let labels = vec!["k8s:rack=r1".to_owned(), "reserved:host".to_owned()];
        assert!(cp.endpoints.set_host_labels(labels.clone()).unwrap());
        assert!(!cp.endpoints.set_host_labels(labels.clone()).unwrap());
        let not_host = cp.endpoints.set_host_labels(vec!["k8s:rack=r1".into()]);
        assert!(not_host.is_err(), "{not_host:?}");
        let ep = endpoint(&cp, id);
        assert_eq!((ep.labels, ep.identity), (labels, abi::identity::HOST));
        assert!(admits(&kernel, id, abi::identity::WORLD, 22));
        // a pod gets another ID
        let web = add(&cp, &kernel, "web", "web", "10.1.0.5").await;
        assert_ne!(web.id, id);
        tasks.shutdown(Duration::from_secs(5)).await;
        id
    };
    // restored, with its ID
    let tasks = Tasks::default();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    assert_eq!(
        cp.endpoints
            .ensure_host("cilium_host", "02:00:00:00:00:0a")
            .unwrap(),
        host
    );
    let hosts: Vec<u16> = cp
        .endpoints
        .list()
        .iter()
        .filter(|e| e.is_host())
        .map(|e| e.id)
        .collect();
    assert_eq!(hosts, [host]);
    assert!(admits(&kernel, host, abi::identity::WORLD, 22));
    let restored = cp
        .endpoints
        .list()
        .into_iter()
        .find(|e| e.id == host)
        .unwrap();
    assert_eq!(restored.labels, ["k8s:rack=r1", "reserved:host"]);
}

/// Endpoint `id` as the control plane lists it.
fn endpoint(cp: &ControlPlane, id: u16) -> controlplane::endpoint::Endpoint {
    cp.endpoints
        .list()
        .into_iter()
        .find(|e| e.id == id)
        .unwrap()
}

/// Whether endpoint `ep`'s policy map lets `from` in on TCP `port`.
fn admits(kernel: &FakeKernel, ep: u16, from: u32, port: u16) -> bool {
    kernel
        .held()
        .policy_maps
        .get(&ep)
        .is_some_and(|m| m.lookup(from, false, 6, port).allowed())
}

#[tokio::test(flavor = "current_thread")]
async fn policy_is_regenerated_when_rules_and_identities_change() {
    let (dir, kernel, tasks) = world();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    let db = add(&cp, &kernel, "db", "db", "10.1.0.5").await;
    let other = add(&cp, &kernel, "other", "other", "10.1.0.6").await;
    assert!(
        admits(&kernel, db.id, other.identity, 5432),
        "no policy: all in"
    );

    let docs = policy::parse_documents(testsupport::policies::DB_FROM_WEB).unwrap();
    let (_, revision) = cp.policies.import(docs).await.unwrap();
    // import answers once enforced: no waiting here
    assert!(!admits(&kernel, db.id, other.identity, 5432));
    assert_eq!(
        cp.endpoints.find(&EndpointRef::Local(db.id))[0]
            .policy
            .revision,
        revision
    );
    assert_eq!(kernel.events_of(AgentNotify::PolicyUpdated).len(), 1);

    // a web pod brings the identity the rule names: db's map learns it
    let web = add(&cp, &kernel, "web", "web", "10.1.0.7").await;
    eventually("db admits web", || {
        admits(&kernel, db.id, web.identity, 5432)
    })
    .await;
    assert!(
        !admits(&kernel, db.id, web.identity, 80),
        "only the rule's port"
    );

    let (removed, _) = cp.policies.remove(&[]).await.unwrap();
    assert_eq!(removed.len(), 1);
    assert!(
        admits(&kernel, db.id, other.identity, 5432),
        "rule gone: all in again"
    );
}

/// Pods' labels as the API server would give them, changeable by the test.
#[derive(Default)]
struct ClusterPods(std::sync::Mutex<std::collections::BTreeMap<String, Vec<String>>>);

impl ClusterPods {
    fn set(&self, pod: &str, app: &str) {
        let labels = vec![
            format!("k8s:app={app}"),
            "k8s:io.kubernetes.pod.namespace=default".into(),
        ];
        self.0.lock().unwrap().insert(pod.into(), labels);
    }

    fn get(&self, pod: &str) -> Vec<String> {
        self.0.lock().unwrap()[pod].clone()
    }
}

impl controlplane::endpoint::PodLabels for ClusterPods {
    fn resolve<'a>(
        &'a self,
        _namespace: &'a str,
        pod: &'a str,
        _uid: &'a str,
    ) -> controlplane::ports::PortFuture<
        'a,
        Result<Vec<String>, controlplane::endpoint::LabelsUnknown>,
    > {
        let known = self.0.lock().unwrap().get(pod).cloned();
        Box::pin(async move {
            known.ok_or_else(|| {
                controlplane::endpoint::LabelsUnknown(format!("no pod {pod}").into())
            })
        })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn pods_take_the_clusters_labels_and_a_relabel_moves_identity_and_verdict() {
    let (dir, kernel, tasks) = world();
    let pods = Arc::new(ClusterPods::default());
    let source = Arc::clone(&pods);
    let cp = plane_with(&kernel, dir.path(), &tasks, |s| {
        s.pod_labels = Some(source);
    });
    pods.set("db", "db");
    pods.set("client", "other");
    let db = add(&cp, &kernel, "db", "db", "10.1.0.5").await;
    // the request says app=web; the cluster says app=other, and wins
    let client = add(&cp, &kernel, "client", "web", "10.1.0.6").await;
    assert_eq!(client.labels, pods.get("client"));
    let docs = policy::parse_documents(testsupport::policies::DB_FROM_WEB).unwrap();
    cp.policies.import(docs).await.unwrap();
    assert!(!admits(&kernel, db.id, client.identity, 5432));

    pods.set("client", "web");
    assert!(cp
        .endpoints
        .relabel(client.id, pods.get("client"))
        .await
        .unwrap());
    let relabeled = cp.endpoints.find(&EndpointRef::Local(client.id))[0].clone();
    assert_ne!(relabeled.identity, client.identity);
    {
        let held = kernel.held();
        assert_eq!(
            held.lxc[&relabeled.ipv4.unwrap()].sec_id,
            relabeled.identity
        );
        assert_eq!(
            held.ipcache[&(relabeled.ipv4.unwrap(), 32)].sec_identity,
            relabeled.identity
        );
    }
    eventually("db admits the relabeled client", || {
        admits(&kernel, db.id, relabeled.identity, 5432)
    })
    .await;
    assert!(
        cp.identities
            .held()
            .iter()
            .all(|(id, _, _)| *id != client.identity),
        "the old identity's reference is dropped"
    );
    assert!(
        !cp.endpoints
            .relabel(client.id, pods.get("client"))
            .await
            .unwrap(),
        "same labels: nothing to do"
    );
}

fn service(id: i64, vip: &str, port: u16, backends: &[&str]) -> api::service::ServiceSpec {
    api::service::ServiceSpec {
        id,
        frontend_address: api::service::FrontendAddress {
            ip: vip.into(),
            port,
            ..Default::default()
        },
        backend_addresses: backends
            .iter()
            .map(|b| api::service::BackendAddress {
                ip: b.to_string(),
                port: 8080,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn service_backends_follow_each_change() {
    let (dir, kernel, tasks) = world();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    let vip = ip("10.96.0.10");
    assert!(cp
        .services
        .put(&service(1, "10.96.0.10", 80, &["10.1.0.5", "10.2.0.5"]))
        .await
        .unwrap());
    assert_eq!(
        kernel.backends_of(vip, 80),
        [
            (std::net::IpAddr::from(ip("10.1.0.5")), 8080),
            (std::net::IpAddr::from(ip("10.2.0.5")), 8080)
        ]
    );
    assert!(!cp
        .services
        .put(&service(1, "10.96.0.10", 80, &["10.2.0.5"]))
        .await
        .unwrap());
    assert_eq!(
        kernel.backends_of(vip, 80),
        [(std::net::IpAddr::from(ip("10.2.0.5")), 8080)]
    );
    // the dropped backend is in no slot, but stays in the backend map for
    // the connections conntrack pins to it, until the service goes
    assert_eq!(kernel.held().backends.len(), 2);
    cp.services.delete(1).await.unwrap();
    assert!(kernel.backends_of(vip, 80).is_empty());
    {
        let held = kernel.held();
        assert!(held.services.is_empty() && held.backends.is_empty() && held.rev_nat.is_empty());
    }
    assert_eq!(cp.services.events(), (1, 1, 1));
    assert_eq!(cp.services.delete(1).await.unwrap_err().status(), 404);
}

/// A dual-stack NodePort, as the agent makes it from a Service: a
/// wildcard frontend per family, `0.0.0.0` and `::`, each a service of its
/// own with its family's backends.
#[tokio::test(flavor = "current_thread")]
async fn node_ports_have_a_wildcard_frontend_of_each_family() {
    let (dir, kernel, tasks) = world();
    let cp = plane(&kernel, dir.path(), None, &tasks);
    let node_port = |id, wildcard: &str, backend: &str| {
        let mut spec = service(id, wildcard, 30080, &[backend]);
        spec.flags = Some(api::service::ServiceSpecFlags {
            kind: "NodePort".into(),
            ..Default::default()
        });
        spec
    };
    assert!(cp
        .services
        .apply(&node_port(1, "0.0.0.0", "10.1.0.5"))
        .unwrap());
    // the port of the IPv4 wildcard is not taken for the IPv6 one
    assert!(cp.services.apply(&node_port(2, "::", "fd00::105")).unwrap());
    let any6 = std::net::Ipv6Addr::UNSPECIFIED;
    assert_eq!(
        kernel.backends_of(any6, 30080),
        [("fd00::105".parse().unwrap(), 8080)]
    );
    assert_eq!(
        kernel.backends_of(Ipv4Addr::UNSPECIFIED, 30080),
        [(ip("10.1.0.5").into(), 8080)]
    );
    let realized = cp.services.get(2).unwrap().status.realized;
    assert_eq!(realized.frontend_address.ip, "::");
    assert_eq!(realized.flags.unwrap().kind, "NodePort");
    // but `::` itself is: a frontend like any other
    let taken = cp.services.apply(&node_port(3, "::", "fd00::106"));
    assert!(taken.is_err(), "{taken:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn nodes_joining_and_leaving_are_routed_and_unrouted() {
    let (dir, kernel, tasks) = world();
    let store = kvstore::Memory::new();
    let kv = kvstore::Kvstore::new(store.session());
    let cp = plane(&kernel, dir.path(), Some(kv.clone()), &tasks);
    let mut node2 = node("node2", "198.18.0.12", "10.2.0.1", (ip("10.2.0.0"), 24));
    node2.health_ipv4 = Some(ip("10.2.0.9"));
    let key = kvstore::keys::node(CLUSTER, "node2");
    kv.put(&key, &serde_json::to_vec(&node2).unwrap())
        .await
        .unwrap();
    let cidr = (ip("10.2.0.0"), 24);
    eventually("node2 routed", || {
        kernel.held().tunnel.get(&cidr) == Some(&ip("198.18.0.12"))
    })
    .await;
    {
        {
            let held = kernel.held();
            let node_entry = &held.ipcache[&(ip("198.18.0.12"), 32)];
            assert_eq!(node_entry.sec_identity, abi::identity::REMOTE_NODE);
            let router = &held.ipcache[&(ip("10.2.0.1"), 32)];
            assert_eq!(router.tunnel_endpoint.ip(), ip("198.18.0.12"));
            let health = &held.ipcache[&(ip("10.2.0.9"), 32)];
            assert_eq!(health.sec_identity, abi::identity::HEALTH);
            assert_eq!(health.tunnel_endpoint.ip(), ip("198.18.0.12"));
        }
        let source = cp.ipcache.get(ip("198.18.0.12"), 32).map(|e| e.source);
        assert_eq!(source, Some(Source::Kvstore), "learned from the cluster");
        assert_eq!(cp.nodes.list().len(), 1);
        // node2's addresses carry its node ID
        let ids: Vec<(std::net::IpAddr, u16)> = kernel
            .held()
            .node_ids
            .iter()
            .map(|(a, id)| (*a, *id))
            .collect();
        assert_eq!(
            ids,
            [
                ("10.2.0.1".parse().unwrap(), 1),
                ("198.18.0.12".parse().unwrap(), 1)
            ]
        );
        // this node's own key is not another node
        let me = kvstore::keys::node(CLUSTER, "node1");
        kv.put(&me, &serde_json::to_vec(cp.nodes.local()).unwrap())
            .await
            .unwrap();

        kv.delete(&key).await.unwrap();
        eventually("node2 unrouted", || kernel.held().tunnel.is_empty()).await;
        let held = kernel.held();
        assert!(!held.ipcache.contains_key(&(ip("198.18.0.12"), 32)));
        assert!(!held.ipcache.contains_key(&(ip("10.2.0.1"), 32)));
        assert!(!held.ipcache.contains_key(&(ip("10.2.0.9"), 32)));
        assert!(held.node_ids.is_empty(), "node2's ID is freed");
    }
    assert!(cp.nodes.list().is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn what_was_deleted_while_the_agent_was_away_is_removed_on_the_first_list() {
    let (dir, kernel) = (
        tempfile::tempdir().unwrap(),
        Arc::new(FakeKernel::default()),
    );
    let store = kvstore::Memory::new();
    let kv = kvstore::Kvstore::new(store.session());
    let (a_vip, b_vip) = (ip("10.96.0.10"), ip("10.96.0.11"));
    for (id, vip) in [(1, "10.96.0.10"), (2, "10.96.0.11")] {
        let spec = service(id, vip, 80, &["10.1.0.5"]);
        kv.put(
            &kvstore::keys::service(CLUSTER, id as u16),
            &serde_json::to_vec(&spec).unwrap(),
        )
        .await
        .unwrap();
    }
    let db_from_web = {
        let tasks = Tasks::default();
        let cp = plane(&kernel, dir.path(), Some(kv.clone()), &tasks);
        eventually("both services applied", || {
            !kernel.backends_of(a_vip, 80).is_empty() && !kernel.backends_of(b_vip, 80).is_empty()
        })
        .await;
        let docs = policy::parse_documents(testsupport::policies::DB_FROM_WEB).unwrap();
        let (stored, _) = cp.policies.import(docs).await.unwrap();
        tasks.shutdown(Duration::from_secs(5)).await;
        stored[0].clone()
    };
    // while the agent is away, service 2 and the policy are deleted
    kv.delete(&kvstore::keys::service(CLUSTER, 2))
        .await
        .unwrap();
    kv.delete(&db_from_web.key(CLUSTER)).await.unwrap();

    let tasks = Tasks::default();
    let cp = plane(&kernel, dir.path(), Some(kv.clone()), &tasks);
    assert_eq!(
        cp.policies.get(&[]).0,
        [db_from_web],
        "restored from the state dir first"
    );
    eventually("service 2 swept", || {
        kernel.backends_of(b_vip, 80).is_empty()
    })
    .await;
    assert_eq!(
        kernel.backends_of(a_vip, 80),
        [(std::net::IpAddr::from(ip("10.1.0.5")), 8080)]
    );
    eventually("the policy deleted", || cp.policies.get(&[]).0.is_empty()).await;
    assert_eq!(cp.services.list().len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn kubernetes_change_no_map_before_every_kind_is_listed() {
    use controlplane::policies::{Origin, Stored};
    use watch::Event;
    let (dir, kernel, tasks) = world();
    let cp = plane_for(&kernel, dir.path(), None, &tasks, true);
    let db = add(&cp, &kernel, "db", "db", "10.1.0.5").await;
    let other = add(&cp, &kernel, "other", "other", "10.1.0.6").await;
    let (cnp_tx, cnp) = tokio::sync::mpsc::channel(8);
    let (np_tx, np) = tokio::sync::mpsc::channel(8);
    let cnp_listed = cp.policies.follow(
        "CiliumNetworkPolicy",
        Origin::Kubernetes {
            kind: "CiliumNetworkPolicy",
        },
        cnp,
        &tasks,
    );
    let np_listed = cp.policies.follow(
        "NetworkPolicy",
        Origin::Kubernetes {
            kind: "NetworkPolicy",
        },
        np,
        &tasks,
    );
    cp.policies.sync_after(vec![cnp_listed, np_listed], &tasks);

    let doc = policy::parse_documents(testsupport::policies::DB_FROM_WEB)
        .unwrap()
        .remove(0);
    let stored = Stored::of(&doc);
    let key = Origin::Kubernetes {
        kind: "CiliumNetworkPolicy",
    }
    .key(&stored)
    .expect("a CiliumNetworkPolicy's key");
    assert_eq!(
        key, "default/db-from-web",
        "namespace/name, as the source keys it"
    );
    cnp_tx
        .send(Event::Upsert {
            key: key.clone(),
            value: stored,
        })
        .await
        .unwrap();
    cnp_tx.send(Event::ListDone).await.unwrap();
    eventually("the policy in the repository", || {
        !cp.policies.get(&[]).0.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        admits(&kernel, db.id, other.identity, 5432),
        "NetworkPolicies are not listed yet: db's map is left as it was"
    );

    np_tx.send(Event::ListDone).await.unwrap();
    eventually("db's map to deny other", || {
        !admits(&kernel, db.id, other.identity, 5432)
    })
    .await;

    cnp_tx.send(Event::Delete { key }).await.unwrap();
    eventually("db's map to admit other again", || {
        admits(&kernel, db.id, other.identity, 5432)
    })
    .await;
    assert!(cp.policies.get(&[]).0.is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn on_an_ipv6_only_node_the_ipv6_world_is_the_plain_world_identity() {
    let (dir, kernel, tasks) = world();
    let cp = plane_with(&kernel, dir.path(), &tasks, |s| {
        s.ipv4 = None;
        s.ipv6 = Some(controlplane::plane::Pool::first_router((
            "fd00:10:1::".parse().unwrap(),
            120,
        )));
    });
    let mut req = pod(&kernel, "client", "client", "");
    req.addressing = Some(AddressPair {
        ipv6: "fd00:10:1::5".into(),
        ..Default::default()
    });
    let client = cp.endpoints.create(&req).await.unwrap();
    assert_eq!(client.ipv4, None);
    let docs = policy::parse_documents(
        r#"[{"endpointSelector":{"matchLabels":{"app":"client"}},
             "egress":[{"toCIDR":["::/0"],"toPorts":[{"ports":[{"port":"80","protocol":"TCP"}]}]},
                       {"toEntities":["world-ipv6"],"toPorts":[{"ports":[{"port":"443","protocol":"TCP"}]}]}]}]"#,
    )
    .unwrap();
    cp.policies.import(docs).await.unwrap();
    let egress = |to: u32, port: u16| {
        kernel
            .held()
            .policy_maps
            .get(&client.id)
            .is_some_and(|m| m.lookup(to, true, 6, port).allowed())
    };
    // 1.16 gives ::/0 identity 2 on a single-stack node, never 10
    for port in [80, 443] {
        assert!(egress(abi::identity::WORLD, port), "world on {port}");
        assert!(
            !egress(abi::identity::WORLD_IPV6, port),
            "world-ipv6 on {port}"
        );
    }
}
