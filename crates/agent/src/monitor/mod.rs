//! The monitor: the datapath's events from `cilium_events` and the agent's
//! own notifications, read once into a hub that hands them to each kind
//! of reader:
//! - `monitor1_2.sock`: Cilium 1.16's monitor protocol 1.2 (gob-encoded
//!   payloads carrying the rings' raw samples, see `listener1_2`), what
//!   Cilium's own `cilium-dbg monitor` reads;
//! - `cilium-rs-monitor.sock`: our `cilium monitor`'s stream, the events
//!   decoded, one JSON object per line (a `hello` line with the CPUs read
//!   first); no Cilium tool knows this name;
//! - and, with Hubble on, the observer (`crate::hubble`), which keeps
//!   flows for its gRPC clients.
//!
//! The rings are read by a thread of their own so a burst of events never
//! waits for the API.

mod batch;
mod decode;
mod event_json;
mod fan_out;
pub mod gob;
mod json_lines;
pub mod listener1_2;
mod observer_feed;

pub use controlplane::AgentNotify;
pub use decode::{decode, parse_packet, summarize, MonitorEvent, Packet};
use fan_out::FanOut;
pub use listener1_2::Payload;
pub use observer_feed::default_queue_size;
use observer_feed::ObserverFeed;

use controlplane::tasks::Tasks;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// What our JSON clients get: a ring's sample as it was read, which each
/// client's stream decodes (so the thread draining the rings only copies
/// it), or an event the agent made.
pub enum Live {
    Sample {
        cpu: u32,
        at: std::time::SystemTime,
        raw: Arc<[u8]>,
    },
    Event(MonitorEvent),
}

/// Where events meet their readers.
pub struct Hub {
    /// Events for our JSON clients
    tx: FanOut<Arc<Live>>,
    /// Cilium's payloads, for `monitor1_2.sock` listeners
    payloads: FanOut<Arc<Payload>>,
    /// Hubble's observer, through its queue, once the agent has built it
    /// (None while Hubble is off)
    observer: OnceLock<ObserverFeed>,
    /// (namespace, pod) by address, local and remote
    pods: RwLock<HashMap<IpAddr, (String, String)>>,
    /// Records the kernel could not write into a full ring
    lost: AtomicU64,
    /// Records read from the rings, by notification type (index 0: ones
    /// this agent does not know)
    received: [AtomicU64; 6],
    /// CPUs whose rings are read (0: none could be opened)
    cpus: std::sync::atomic::AtomicUsize,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            tx: FanOut::new(4096),
            payloads: FanOut::new(4096),
            observer: OnceLock::new(),
            pods: RwLock::default(),
            lost: AtomicU64::new(0),
            received: Default::default(),
            cpus: Default::default(),
        }
    }
}

impl Hub {
    /// Names the pod behind an address for the events that follow.
    pub fn name_pod(&self, ip: IpAddr, namespace: &str, pod: &str) {
        if pod.is_empty() {
            return;
        }
        self.pods
            .write()
            .expect("pods lock")
            .insert(ip, (namespace.to_owned(), pod.to_owned()));
    }

    /// Hands every event from now on to Hubble's observer too, through a
    /// queue of `queue` events.
    pub fn attach_observer(
        &self,
        observer: Arc<crate::hubble::Observer>,
        queue: usize,
    ) -> std::io::Result<()> {
        let feed = ObserverFeed::start(observer, queue)?;
        let _ = self.observer.set(feed);
        Ok(())
    }

    pub fn observer(&self) -> Option<&crate::hubble::Observer> {
        self.observer.get().map(ObserverFeed::observer)
    }

    /// Events the observer's full queue could not take.
    pub fn observer_queue_lost(&self) -> u64 {
        self.observer.get().map_or(0, ObserverFeed::dropped)
    }

    pub fn forget_pod(&self, ip: IpAddr) {
        self.pods.write().expect("pods lock").remove(&ip);
    }

    fn pod_of(&self, ip: &str) -> String {
        let Ok(ip) = ip.parse::<IpAddr>() else {
            return String::new();
        };
        let pods = self.pods.read().expect("pods lock");
        let Some((ns, pod)) = pods.get(&ip) else {
            return String::new();
        };
        let mut name = String::with_capacity(ns.len() + 1 + pod.len());
        name.push_str(ns);
        name.push('/');
        name.push_str(pod);
        name
    }

    /// Hands an event to `cilium monitor`'s readers, if there are any.
    pub fn publish(&self, mut ev: MonitorEvent) {
        if self.tx.receiver_count() == 0 {
            return;
        }
        self.complete(&mut ev, std::time::SystemTime::now());
        self.tx.send(Arc::new(Live::Event(ev)));
    }

    /// Stamps `ev` with its time and the pods behind its addresses.
    fn complete(&self, ev: &mut MonitorEvent, at: std::time::SystemTime) {
        ev.time = api::timefmt::rfc3339_millis(at);
        if let Some(p) = &ev.packet {
            ev.src_pod = self.pod_of(&p.src_ip);
            ev.dst_pod = self.pod_of(&p.dst_ip);
        }
    }

    /// What a JSON client shows of `live`; None for a sample that is no
    /// event this agent knows.
    pub fn decoded<'a>(&self, live: &'a Live) -> Option<std::borrow::Cow<'a, MonitorEvent>> {
        match live {
            Live::Event(ev) => Some(std::borrow::Cow::Borrowed(ev)),
            Live::Sample { cpu, at, raw } => {
                let mut ev = decode(raw)?;
                ev.cpu = *cpu;
                self.complete(&mut ev, *at);
                Some(std::borrow::Cow::Owned(ev))
            }
        }
    }

    /// Hands a payload to the `monitor1_2.sock` listeners; builds it only
    /// when there are some.
    fn send_payload(&self, payload: impl FnOnce() -> Payload) {
        if self.payloads.receiver_count() > 0 {
            self.payloads.send(Arc::new(payload()));
        }
    }

    /// Clients connected to `monitor1_2.sock`.
    pub fn monitor_listeners(&self) -> usize {
        self.payloads.receiver_count()
    }

    /// A sample read from the ring of `cpu`: counted, sent as read to
    /// Cilium's clients and decoded for ours.
    pub fn sample(&self, cpu: usize, raw: &[u8]) {
        let kind = usize::from(raw.first().copied().unwrap_or(0));
        self.received[if kind < 6 { kind } else { 0 }].fetch_add(1, Ordering::Relaxed);
        self.send_payload(|| Payload::sample(cpu, raw));
        let feed = self.observer.get();
        let clients = self.tx.receiver_count() > 0;
        if feed.is_none() && !clients {
            return;
        }
        // One copy for the observer and the JSON clients both.
        let raw: Arc<[u8]> = raw.into();
        if clients {
            self.tx.send(Arc::new(Live::Sample {
                cpu: cpu as u32,
                at: std::time::SystemTime::now(),
                raw: Arc::clone(&raw),
            }));
        }
        if let Some(feed) = feed {
            feed.sample(raw);
        }
    }

    /// Records the ring of `cpu` could not take.
    pub fn lost_samples(&self, cpu: usize, count: u64) {
        self.lost.fetch_add(count, Ordering::Relaxed);
        self.send_payload(|| Payload::lost(cpu, count));
        if let Some(feed) = self.observer.get() {
            feed.ring_lost(cpu, count);
        }
        self.publish(MonitorEvent {
            kind: "lost".into(),
            cpu: cpu as u32,
            len_orig: count as u32,
            ..Default::default()
        });
    }

    /// An agent notification (`cilium monitor --type agent`).
    pub fn agent(&self, what: AgentNotify, body: serde_json::Value) {
        let text = body.to_string();
        self.send_payload(|| Payload::agent(what, &text));
        if let Some(feed) = self.observer.get() {
            feed.agent(what, &body);
        }
        self.publish(MonitorEvent {
            kind: "agent".into(),
            reason: what as u8,
            reason_text: what.text().into(),
            message: text,
            ..Default::default()
        });
    }

    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Records read from the rings so far, by Hubble's type name.
    pub fn received(&self) -> Vec<(&'static str, u64)> {
        [
            "Unknown",
            "Drop",
            "Debug",
            "DebugCapture",
            "Trace",
            "PolicyVerdict",
        ]
        .into_iter()
        .zip(&self.received)
        .map(|(name, n)| (name, n.load(Ordering::Relaxed)))
        .collect()
    }

    /// Cilium's `MonitorStatus`: the rings being read (None: none could
    /// be opened, which Cilium shows as `NodeMonitor: Disabled`). Records
    /// of unknown types are not counted, so `unknown` is left out.
    pub fn monitor_status(&self) -> Option<api::models::MonitorStatus> {
        let cpus = self.cpus.load(Ordering::Relaxed);
        (cpus > 0).then(|| api::models::MonitorStatus {
            cpus: cpus as u64,
            npages: datapath::events::RING_PAGES as u64,
            pagesize: page_size() as u64,
            lost: self.lost(),
            unknown: None,
        })
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096)
}

/// Where Cilium's `cilium-dbg monitor` connects: beside the API socket.
pub fn socket_path(api_socket: &Path) -> PathBuf {
    api_socket.with_file_name("monitor1_2.sock")
}

/// Where our `cilium monitor` connects: beside the other sockets.
pub fn json_socket_path(socket: &Path) -> PathBuf {
    socket.with_file_name("cilium-rs-monitor.sock")
}

/// Reads the rings on a thread of their own into the hub; returns the
/// number of CPUs read.
fn read_rings(bpf_root: &Path, hub: Arc<Hub>, tasks: &Tasks) -> Option<usize> {
    let mut reader = match datapath::events::EventReader::open(bpf_root) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(subsys = "monitor", error = %e, "Unable to read datapath events; cilium monitor will stay silent");
            return None;
        }
    };
    let cpus = reader.cpus();
    let tasks = tasks.clone();
    // A thread, not a task: the rings are polled with a blocking wait. It
    // looks at the agent's state between waits (at most 1 s) and ends with it.
    std::thread::Builder::new()
        .name("monitor".into())
        .spawn(move || {
            while !tasks.is_stopping() {
                reader.poll(1000, &mut |cpu, rec| match rec {
                    datapath::events::Record::Sample(raw) => hub.sample(cpu, raw),
                    datapath::events::Record::Lost(n) => hub.lost_samples(cpu, n),
                });
            }
        })
        .ok()?;
    Some(cpus)
}

fn bind(socket: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    let _ = std::fs::remove_file(socket);
    tokio::net::UnixListener::bind(socket)
        .map_err(|e| anyhow::anyhow!("binding {}: {e}", socket.display()))
}

/// Serves Cilium's monitor clients on `socket` (`monitor1_2.sock`) and
/// ours beside it (`cilium-rs-monitor.sock`: live events) until the agent
/// stops; each client's stream is one of `tasks`.
pub async fn serve(
    hub: Arc<Hub>,
    bpf_root: PathBuf,
    socket: PathBuf,
    tasks: Tasks,
) -> anyhow::Result<()> {
    let cpus = read_rings(&bpf_root, Arc::clone(&hub), &tasks).unwrap_or(0);
    hub.cpus.store(cpus, Ordering::Relaxed);
    let json_socket = json_socket_path(&socket);
    let monitor = bind(&socket)?;
    let json = bind(&json_socket)?;
    tracing::info!(subsys = "monitor", socket = %socket.display(), json = %json_socket.display(), cpus, "Monitor listening");
    let shutdown = tasks.stopping();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = monitor.accept() => {
                let Ok((conn, _)) = accepted else { continue };
                tasks.spawn("monitor-client", listener1_2::stream(conn, hub.payloads.subscribe()));
            }
            accepted = json.accept() => {
                let Ok((conn, _)) = accepted else { continue };
                let hello = api::monitor::hello_line(cpus);
                tasks.spawn("monitor-client", json_lines::stream(conn, vec![hello], Arc::clone(&hub)));
            }
        }
    }
    for path in [&socket, &json_socket] {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Hubble names remote pods by what the ipcache sync told the hub.
impl crate::hubble::PodNames for Hub {
    fn pod(&self, ip: IpAddr) -> Option<(String, String)> {
        self.pods.read().expect("pods lock").get(&ip).cloned()
    }
}

/// The control plane tells `cilium monitor` through the hub.
impl controlplane::Events for Hub {
    fn agent(&self, what: AgentNotify, body: serde_json::Value) {
        Hub::agent(self, what, body);
    }

    fn name_pod(&self, ip: IpAddr, namespace: &str, pod: &str) {
        Hub::name_pod(self, ip, namespace, pod);
    }

    fn forget_pod(&self, ip: IpAddr) {
        Hub::forget_pod(self, ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_events_are_named_for_monitor_readers() {
        let hub = Hub::default();
        let mut rx = hub.tx.subscribe();
        hub.name_pod(IpAddr::from([10, 0, 2, 7]), "default", "db");
        hub.publish(MonitorEvent {
            kind: "drop".into(),
            packet: Some(Packet {
                src_ip: "10.0.1.5".into(),
                dst_ip: "10.0.2.7".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let live = rx.try_recv().unwrap();
        let ev = hub.decoded(&live).unwrap();
        assert_eq!(
            (ev.src_pod.as_str(), ev.dst_pod.as_str()),
            ("", "default/db")
        );
    }

    #[test]
    fn cilium_listeners_get_samples_as_read_and_lost_counts() {
        let hub = Hub::default();
        let mut rx = hub.payloads.subscribe();
        let raw = [200u8, 1, 2, 3];
        hub.sample(3, &raw);
        hub.lost_samples(1, 12);
        assert_eq!(*rx.try_recv().unwrap(), Payload::sample(3, &raw));
        assert_eq!(*rx.try_recv().unwrap(), Payload::lost(1, 12));
        assert_eq!(hub.lost(), 12);
        assert_eq!(hub.received()[0], ("Unknown", 1));
    }

    #[test]
    fn payloads_are_built_only_for_listeners() {
        let hub = Hub::default();
        hub.sample(0, &[4, 0, 0, 0]);
        let mut rx = hub.payloads.subscribe();
        assert!(rx.try_recv().is_err());
        assert_eq!(hub.monitor_listeners(), 1);
    }

    #[test]
    fn json_clients_have_a_socket_of_their_own() {
        let monitor = socket_path(Path::new("/var/run/cilium/cilium.sock"));
        assert_eq!(monitor, Path::new("/var/run/cilium/monitor1_2.sock"));
        assert_eq!(
            json_socket_path(&monitor),
            Path::new("/var/run/cilium/cilium-rs-monitor.sock")
        );
    }
}
