//! The local observer: datapath records, agent notifications and lost
//! records become Hubble events with their time, UUID and node name, kept
//! in the ring for `GetFlows` and the other reads; counts for
//! `ServerStatus` and `cilium status`; the namespaces flows were seen in.

use super::parse::{self, Resolve};
use super::ring::{Capacity, Ring};
use controlplane::AgentNotify;
use hubble::flow::{self, Flow};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What the ring holds. A flow is boxed: inline it made every slot its
/// size (1.1 KB), agent events (a service or endpoint changed) included,
/// and a thousand Services coming in filled the ring with them.
pub enum Event {
    Flow(Box<Flow>),
    Agent(flow::AgentEvent),
    Lost(flow::LostEvent),
}

// Each flow written evicts one: at or under glibc's per-thread cache limit
// (1032 bytes), the new box takes the old one's chunk at once; above it,
// every box merged all freed small chunks first (hubble's build.rs boxes
// the rare large fields to stay under).
const _: () = assert!(std::mem::size_of::<Flow>() <= 1032);

pub struct Stored {
    pub time: SystemTime,
    pub event: Event,
}

impl Stored {
    pub fn timestamp(&self) -> prost_types::Timestamp {
        prost_types::Timestamp::from(self.time)
    }
}

/// Namespaces are forgotten an hour after their last flow, as in Cilium.
const NAMESPACE_TTL: Duration = Duration::from_secs(3600);

/// The window `flows_rate` is taken over.
const RATE_WINDOW: Duration = Duration::from_secs(60);

pub struct Observer {
    ring: Ring<Stored>,
    node_name: String,
    cluster: String,
    version: String,
    resolve: Arc<dyn Resolve>,
    seen_flows: AtomicU64,
    started: Instant,
    uuids: AtomicU64,
    namespaces: Mutex<HashMap<String, Instant>>,
    metrics: Option<Arc<super::metrics::Metrics>>,
}

/// The node name flows carry: `cluster/node` unless the cluster is
/// `default` (or unnamed).
pub fn absolute_node_name(cluster: &str, node: &str) -> String {
    if cluster.is_empty() || cluster == "default" {
        node.to_owned()
    } else {
        format!("{cluster}/{node}")
    }
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }
}

/// splitmix64: flow UUIDs need to be unique, not secret, and cheap.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

impl Observer {
    pub fn new(capacity: Capacity, cluster: &str, node: &str, resolve: Arc<dyn Resolve>) -> Self {
        Self {
            ring: Ring::new(capacity),
            node_name: absolute_node_name(cluster, node),
            cluster: if cluster == "default" {
                String::new()
            } else {
                cluster.to_owned()
            },
            // Cilium's "<component> v<semver>+g<revision>"
            version: format!("cilium v{}+g{}", api::VERSION, api::GIT_REVISION),
            resolve,
            seen_flows: AtomicU64::new(0),
            started: Instant::now(),
            uuids: AtomicU64::new(random_seed()),
            namespaces: Mutex::default(),
            metrics: None,
        }
    }

    /// Counts every flow and lost event into `metrics` too.
    pub fn with_metrics(mut self, metrics: Option<Arc<super::metrics::Metrics>>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> Option<&super::metrics::Metrics> {
        self.metrics.as_deref()
    }

    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    pub fn ring(&self) -> &Ring<Stored> {
        &self.ring
    }

    /// A version 4 UUID.
    fn uuid(&self) -> String {
        let n = self.uuids.fetch_add(0x9e3779b97f4a7c15, Ordering::Relaxed);
        let (a, b) = (mix(n), mix(n ^ 0x5555_5555_5555_5555));
        let a = (a & !0xf000) | 0x4000;
        let b = (b & !(0xc << 60)) | (0x8 << 60);
        crate::text::uuid(a, b)
    }

    /// A record read from the datapath's rings.
    pub fn sample(&self, raw: &[u8]) {
        let Some(mut f) = parse::flow(raw, &*self.resolve) else {
            return;
        };
        let now = SystemTime::now();
        f.time = Some(prost_types::Timestamp::from(now));
        f.uuid = self.uuid();
        f.node_name.clone_from(&self.node_name);
        self.note_namespaces(&f);
        if let Some(m) = &self.metrics {
            m.process(&f);
        }
        self.seen_flows.fetch_add(1, Ordering::Relaxed);
        self.ring.push(Arc::new(Stored {
            time: now,
            event: Event::Flow(Box::new(f)),
        }));
    }

    fn note_namespaces(&self, f: &Flow) {
        let names = [&f.source, &f.destination]
            .into_iter()
            .flatten()
            .map(|e| e.namespace.as_str())
            .filter(|n| !n.is_empty());
        let now = Instant::now();
        let mut seen = self.namespaces.lock().expect("namespaces lock");
        for n in names {
            match seen.get_mut(n) {
                Some(at) => *at = now,
                None => {
                    seen.insert(n.to_owned(), now);
                }
            }
        }
    }

    /// Records the kernel could not write into a full ring of `cpu`.
    pub fn lost(&self, cpu: usize, count: u64) {
        self.push_lost(
            flow::LostEventSource::PerfEventRingBuffer,
            count,
            Some(cpu as i32),
        );
    }

    /// Events the queue in front of the observer could not take.
    pub fn queue_lost(&self, count: u64) {
        self.push_lost(flow::LostEventSource::ObserverEventsQueue, count, None);
    }

    fn push_lost(&self, source: flow::LostEventSource, count: u64, cpu: Option<i32>) {
        if let Some(m) = &self.metrics {
            let name = match source {
                flow::LostEventSource::ObserverEventsQueue => "observer_events_queue",
                flow::LostEventSource::HubbleRingBuffer => "hubble_ring_buffer",
                _ => "perf_event_ring_buffer",
            };
            m.lost(name, count);
        }
        self.ring.push(Arc::new(Stored {
            time: SystemTime::now(),
            event: Event::Lost(flow::LostEvent {
                source: source as i32,
                num_events_lost: count,
                cpu,
            }),
        }));
    }

    pub fn agent(&self, what: AgentNotify, body: &serde_json::Value) {
        self.ring.push(Arc::new(Stored {
            time: SystemTime::now(),
            event: Event::Agent(parse::agent_event(what, body)),
        }));
    }

    /// The namespaces seen in the last hour, sorted.
    pub fn namespaces(&self) -> Vec<hubble::observer::Namespace> {
        let mut seen = self.namespaces.lock().expect("namespaces lock");
        seen.retain(|_, at| at.elapsed() < NAMESPACE_TTL);
        let mut out: Vec<_> = seen
            .keys()
            .map(|n| hubble::observer::Namespace {
                cluster: self.cluster.clone(),
                namespace: n.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        out
    }

    pub fn seen_flows(&self) -> u64 {
        self.seen_flows.load(Ordering::Relaxed)
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Flows a second over the last minute of the ring (or since its
    /// oldest event, when it holds less than a minute).
    fn flows_rate(&self) -> f64 {
        let (oldest, next) = self.ring.bounds();
        let now = SystemTime::now();
        let (mut flows, mut earliest) = (0u64, now);
        for seq in (oldest..next).rev() {
            let super::ring::Slot::Event(e) = self.ring.get(seq) else {
                break;
            };
            if now.duration_since(e.time).unwrap_or_default() > RATE_WINDOW {
                earliest = now - RATE_WINDOW;
                break;
            }
            earliest = e.time;
            if matches!(e.event, Event::Flow(_)) {
                flows += 1;
            }
        }
        let window = now
            .duration_since(earliest)
            .unwrap_or_default()
            .as_secs_f64();
        if window > 0.0 {
            flows as f64 / window
        } else {
            0.0
        }
    }

    pub fn status(&self) -> hubble::observer::ServerStatusResponse {
        hubble::observer::ServerStatusResponse {
            num_flows: self.ring.len() as u64,
            max_flows: self.ring.capacity() as u64,
            seen_flows: self.seen_flows(),
            uptime_ns: self.uptime().as_nanos() as u64,
            version: self.version.clone(),
            flows_rate: self.flows_rate(),
            ..Default::default()
        }
    }

    pub fn version(&self) -> &str {
        &self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nobody;
    impl Resolve for Nobody {
        fn endpoint(&self, _: std::net::IpAddr, identity: u32) -> flow::Endpoint {
            flow::Endpoint {
                identity,
                namespace: "default".into(),
                ..Default::default()
            }
        }
        fn service(&self, _: std::net::IpAddr, _: u16) -> Option<flow::Service> {
            None
        }
        fn cgroup_pod(&self, _: u64) -> Option<std::net::IpAddr> {
            None
        }
    }

    #[test]
    fn node_names_carry_their_cluster_unless_default() {
        assert_eq!(absolute_node_name("default", "n1"), "n1");
        assert_eq!(absolute_node_name("", "n1"), "n1");
        assert_eq!(absolute_node_name("east", "n1"), "east/n1");
    }

    #[test]
    fn uuids_are_version_4_and_differ() {
        let o = Observer::new(Capacity::DEFAULT, "default", "n1", Arc::new(Nobody));
        let (a, b) = (o.uuid(), o.uuid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]), "{a}");
    }

    #[test]
    fn everything_is_kept_but_only_flows_are_counted_as_seen() {
        let o = Observer::new(Capacity::new(7).unwrap(), "default", "n1", Arc::new(Nobody));
        let mut rec = vec![0u8; 36];
        rec[0] = abi::events::NOTIFY_DROP;
        rec[1] = 133;
        o.sample(&rec);
        o.sample(&[200, 0, 0, 0]);
        o.agent(AgentNotify::PolicyUpdated, &serde_json::json!({}));
        o.lost(1, 5);
        let st = o.status();
        assert_eq!((st.num_flows, st.max_flows, st.seen_flows), (3, 7, 1));
        assert!(st.version.starts_with("cilium v"));
    }
}
