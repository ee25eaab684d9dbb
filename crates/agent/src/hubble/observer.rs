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
    /// A flow the ring evicted that no reader holds: the next flow is
    /// written into its allocations. Freeing 4095-flow-old chunks (out of
    /// the cache by then) took a quarter of the observer thread's time.
    spare: Mutex<Option<Arc<Stored>>>,
}

/// The flow `stored` holds, when nothing else holds `stored`.
fn flow_mut(stored: &mut Arc<Stored>) -> Option<&mut Flow> {
    match &mut Arc::get_mut(stored)?.event {
        Event::Flow(f) => Some(f),
        _ => None,
    }
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
            spare: Mutex::default(),
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

    /// A version 4 UUID, written over `text`.
    fn uuid_into(&self, text: &mut String) {
        let n = self.uuids.fetch_add(0x9e3779b97f4a7c15, Ordering::Relaxed);
        let (a, b) = (mix(n), mix(n ^ 0x5555_5555_5555_5555));
        let a = (a & !0xf000) | 0x4000;
        let b = (b & !(0xc << 60)) | (0x8 << 60);
        crate::text::uuid_into(a, b, text);
    }

    /// A record read from the datapath's rings.
    pub fn sample(&self, raw: &[u8]) {
        let mut spare = self.spare.lock().expect("spare lock").take();
        let mut old = spare
            .as_mut()
            .and_then(flow_mut)
            .map(std::mem::take)
            .unwrap_or_default();
        let Some(mut f) = parse::flow_reusing(raw, &*self.resolve, parse::Ends::of(&mut old))
        else {
            return;
        };
        let now = SystemTime::now();
        f.time = Some(prost_types::Timestamp::from(now));
        f.uuid = std::mem::take(&mut old.uuid);
        self.uuid_into(&mut f.uuid);
        f.node_name = std::mem::take(&mut old.node_name);
        f.node_name.clone_from(&self.node_name);
        drop(old);
        self.note_namespaces(&f);
        if let Some(m) = &self.metrics {
            m.process(&f);
        }
        self.seen_flows.fetch_add(1, Ordering::Relaxed);
        let stored = match spare.as_mut().and_then(Arc::get_mut) {
            Some(s) => {
                s.time = now;
                match &mut s.event {
                    Event::Flow(b) => **b = f,
                    e => *e = Event::Flow(Box::new(f)),
                }
                spare.expect("the spare just written")
            }
            None => Arc::new(Stored {
                time: now,
                event: Event::Flow(Box::new(f)),
            }),
        };
        let evicted = self.ring.push(stored);
        // the ring let it go, so no reader can get it again: when none
        // holds it still, the next flow is written into it
        *self.spare.lock().expect("spare lock") = evicted;
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
        let (mut a, mut b) = (String::new(), "an older flow's".to_owned());
        o.uuid_into(&mut a);
        o.uuid_into(&mut b);
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]), "{a}");
    }

    /// A drop record of `code`, with no packet.
    fn drop_record(code: u8) -> Vec<u8> {
        let mut rec = vec![0u8; 36];
        rec[0] = abi::events::NOTIFY_DROP;
        rec[1] = code;
        rec
    }

    #[test]
    fn flows_written_into_evicted_ones_keep_nothing_of_them() {
        let o = Observer::new(Capacity::new(1).unwrap(), "default", "n1", Arc::new(Nobody));
        let mut policy_drop = drop_record(133);
        policy_drop[16..20].copy_from_slice(&256u32.to_ne_bytes());
        let other_drop = drop_record(130);
        // the ring's two slots are full from the third flow on: the
        // fourth and fifth are written into evicted ones
        for rec in [
            &policy_drop,
            &policy_drop,
            &policy_drop,
            &other_drop,
            &other_drop,
        ] {
            o.sample(rec);
        }
        let (_, next) = o.ring().bounds();
        let super::super::ring::Slot::Event(e) = o.ring().get(next - 1) else {
            panic!("the last flow is kept");
        };
        let Event::Flow(f) = &e.event else {
            panic!("a flow");
        };
        let mut want = parse::flow(&other_drop, &Nobody).unwrap();
        want.time = f.time;
        want.uuid.clone_from(&f.uuid);
        want.node_name = "n1".into();
        assert_eq!(**f, want);
        assert_eq!(o.seen_flows(), 5);
    }

    #[test]
    fn everything_is_kept_but_only_flows_are_counted_as_seen() {
        let o = Observer::new(Capacity::new(7).unwrap(), "default", "n1", Arc::new(Nobody));
        o.sample(&drop_record(133));
        o.sample(&[200, 0, 0, 0]);
        o.agent(AgentNotify::PolicyUpdated, &serde_json::json!({}));
        o.lost(1, 5);
        let st = o.status();
        assert_eq!((st.num_flows, st.max_flows, st.seen_flows), (3, 7, 1));
        assert!(st.version.starts_with("cilium v"));
    }
}
