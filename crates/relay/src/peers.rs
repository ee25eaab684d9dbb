//! The nodes Relay reads: learnt from the peer service's notifications
//! (every node first, then who joins, moves and leaves), each kept
//! connected by a task of its own that redials with a growing backoff
//! when its node goes away. A node is available while its connection
//! lives, which a health watch on it tells at once.

use hubble::client::Target;
use hubble::health::{health_client::HealthClient, HealthCheckRequest};
use hubble::peer::{peer_client::PeerClient, ChangeNotification, ChangeNotificationType};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

/// The port of a peer address that names none (Hubble's server port).
pub const DEFAULT_PORT: u16 = 4244;

/// Redials of a node: from the first wait to the longest, doubling.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// How often a node whose health cannot be watched is checked.
const HEALTH_POLL: Duration = Duration::from_secs(5);

/// A node as a request sees it.
#[derive(Clone, Debug)]
pub struct Peer {
    pub name: String,
    pub address: String,
    pub tls_server_name: Option<String>,
    /// While connected.
    pub channel: Option<Channel>,
}

/// How the nodes and the peer service are dialed.
#[derive(Clone)]
pub struct Dialer {
    /// None: plaintext (`disable-client-tls`).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub timeout: Duration,
}

/// `address` with a port: Hubble's when it names none.
pub fn with_port(address: &str) -> String {
    if address.parse::<std::net::SocketAddr>().is_ok() {
        return address.to_owned();
    }
    if let Ok(ip) = address.parse::<std::net::IpAddr>() {
        return std::net::SocketAddr::new(ip, DEFAULT_PORT).to_string();
    }
    match address.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => address.to_owned(),
        _ => format!("{address}:{DEFAULT_PORT}"),
    }
}

impl Dialer {
    /// Where a node or the peer service is, and how to reach it: a Unix
    /// socket as it is; TCP with TLS for `server_name`, which TLS needs
    /// and plaintext must not be given (a mismatch of Relay's and the
    /// nodes' TLS, said at once as Cilium says it).
    pub fn target(&self, address: &str, server_name: Option<&str>) -> Result<Target, String> {
        if let Some(path) = address.strip_prefix("unix://") {
            return Ok(Target::Unix(path.into()));
        }
        if address.starts_with('/') {
            return Ok(Target::Unix(address.into()));
        }
        let address = with_port(address);
        match (&self.tls, server_name) {
            (Some(config), Some(name)) => {
                Target::tls(address, name, Arc::clone(config)).map_err(|e| e.to_string())
            }
            (Some(_), None) => Err(format!("missing TLS ServerName for {address}")),
            (None, Some(name)) => Err(format!("unexpected TLS ServerName {name} for {address}")),
            (None, None) => Ok(Target::Tcp(address)),
        }
    }
}

struct Entry {
    address: String,
    tls_server_name: Option<String>,
    channel: Arc<Mutex<Option<Channel>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every node Relay knows, and whether the peer service is followed.
pub struct Pool {
    dialer: Dialer,
    peers: Mutex<BTreeMap<String, Entry>>,
    peer_service_connected: AtomicBool,
}

impl Pool {
    pub fn new(dialer: Dialer) -> Arc<Self> {
        Arc::new(Self {
            dialer,
            peers: Mutex::new(BTreeMap::new()),
            peer_service_connected: AtomicBool::new(false),
        })
    }

    /// Every node by name, connected or not.
    pub fn list(&self) -> Vec<Peer> {
        let peers = self.peers.lock().expect("peers lock");
        peers
            .iter()
            .map(|(name, e)| Peer {
                name: name.clone(),
                address: e.address.clone(),
                tls_server_name: e.tls_server_name.clone(),
                channel: e.channel.lock().expect("channel lock").clone(),
            })
            .collect()
    }

    pub fn peer_service_connected(&self) -> bool {
        self.peer_service_connected.load(Ordering::Relaxed)
    }

    /// A notification applied: a node added or moved is (re)dialed, one
    /// deleted is dropped with its connection.
    pub fn apply(&self, change: ChangeNotification) {
        let kind = ChangeNotificationType::try_from(change.r#type)
            .unwrap_or(ChangeNotificationType::Unknown);
        let tls_server_name = change.tls.map(|t| t.server_name).filter(|n| !n.is_empty());
        let mut peers = self.peers.lock().expect("peers lock");
        match kind {
            ChangeNotificationType::PeerAdded | ChangeNotificationType::PeerUpdated => {
                if peers.get(&change.name).is_some_and(|e| {
                    e.address == change.address && e.tls_server_name == tls_server_name
                }) {
                    return;
                }
                tracing::info!(subsys = "hubble-relay", peer = %change.name, address = %change.address, "Received peer change notification");
                let channel = Arc::new(Mutex::new(None));
                let target = self
                    .dialer
                    .target(&change.address, tls_server_name.as_deref());
                let task = tokio::spawn(keep_connected(
                    change.name.clone(),
                    target,
                    self.dialer.timeout,
                    Arc::clone(&channel),
                ));
                peers.insert(
                    change.name,
                    Entry {
                        address: change.address,
                        tls_server_name,
                        channel,
                        task,
                    },
                );
            }
            ChangeNotificationType::PeerDeleted => {
                if peers.remove(&change.name).is_some() {
                    tracing::info!(subsys = "hubble-relay", peer = %change.name, "Peer deleted");
                }
            }
            ChangeNotificationType::Unknown => {
                tracing::warn!(subsys = "hubble-relay", peer = %change.name, kind = change.r#type, "Unknown peer change notification");
            }
        }
    }

    /// Follows the peer service at `address` until the process ends:
    /// after its stream breaks, waits `retry` and follows it again.
    pub async fn follow_peer_service(
        self: Arc<Self>,
        address: String,
        cluster: String,
        retry: Duration,
    ) {
        // the peer service is every node's, under the cluster's name
        let server_name = self
            .dialer
            .tls
            .as_ref()
            .map(|_| format!("hubble-peer.{cluster}.hubble-grpc.cilium.io"));
        loop {
            if let Err(e) = self.follow_once(&address, server_name.as_deref()).await {
                tracing::warn!(subsys = "hubble-relay", target = %address, error = %e, retry = ?retry, "Failed to follow the peer service");
            }
            self.peer_service_connected.store(false, Ordering::Relaxed);
            tokio::time::sleep(retry).await;
        }
    }

    async fn follow_once(&self, address: &str, server_name: Option<&str>) -> Result<(), String> {
        let target = self.dialer.target(address, server_name)?;
        let channel = target
            .connect(self.dialer.timeout)
            .await
            .map_err(|e| e.to_string())?;
        let mut stream = PeerClient::new(channel)
            .notify(hubble::peer::NotifyRequest {})
            .await
            .map_err(|e| e.message().to_owned())?
            .into_inner();
        self.peer_service_connected.store(true, Ordering::Relaxed);
        tracing::info!(subsys = "hubble-relay", target = %address, "Connected to the peer service");
        loop {
            match stream.message().await {
                Ok(Some(change)) => self.apply(change),
                Ok(None) => return Err("the peer service ended its stream".into()),
                Err(e) => return Err(e.message().to_owned()),
            }
        }
    }
}

/// Keeps `slot` holding a live connection to `name` at `target`, or none
/// while the node cannot be reached.
async fn keep_connected(
    name: String,
    target: Result<Target, String>,
    timeout: Duration,
    slot: Arc<Mutex<Option<Channel>>>,
) {
    let target = match target {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(subsys = "hubble-relay", peer = %name, error = %e, "Cannot connect to peer");
            return;
        }
    };
    let mut backoff = BACKOFF_MIN;
    loop {
        match target.clone().connect(timeout).await {
            Ok(channel) => {
                tracing::info!(subsys = "hubble-relay", peer = %name, target = %target, "Connected to peer");
                *slot.lock().expect("channel lock") = Some(channel.clone());
                backoff = BACKOFF_MIN;
                let why = until_unhealthy(channel).await;
                *slot.lock().expect("channel lock") = None;
                tracing::warn!(subsys = "hubble-relay", peer = %name, reason = %why, "Lost connection to peer");
            }
            Err(e) => {
                tracing::warn!(subsys = "hubble-relay", peer = %name, error = %e, next_try_in = ?backoff, "Failed to connect to peer");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Returns when the node behind `channel` stops answering: its health
/// watch ends (the connection broke) or, where Watch is not served, a
/// health check fails.
async fn until_unhealthy(channel: Channel) -> String {
    let mut health = HealthClient::new(channel);
    let req = || HealthCheckRequest {
        service: hubble::OBSERVER_HEALTH_NAME.into(),
    };
    match health.watch(req()).await {
        Ok(stream) => {
            let mut stream = stream.into_inner();
            loop {
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return "health watch ended".into(),
                    Err(e) => return e.message().to_owned(),
                }
            }
        }
        Err(e) if e.code() == tonic::Code::Unimplemented => loop {
            tokio::time::sleep(HEALTH_POLL).await;
            if let Err(e) = health.check(req()).await {
                return e.message().to_owned();
            }
        },
        Err(e) => e.message().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_get_hubbles_port_when_they_name_none() {
        assert_eq!(with_port("198.18.0.11"), "198.18.0.11:4244");
        assert_eq!(with_port("198.18.0.11:4000"), "198.18.0.11:4000");
        assert_eq!(with_port("fd00::1"), "[fd00::1]:4244");
        assert_eq!(
            with_port("hubble-peer.kube-system.svc:443"),
            "hubble-peer.kube-system.svc:443"
        );
        assert_eq!(with_port("node1"), "node1:4244");
    }

    #[test]
    fn tls_and_server_names_must_agree() {
        let plain = Dialer {
            tls: None,
            timeout: Duration::from_secs(1),
        };
        assert!(matches!(
            plain.target("unix:///run/h.sock", None),
            Ok(Target::Unix(_))
        ));
        assert!(
            matches!(plain.target("198.18.0.11", None), Ok(Target::Tcp(a)) if a == "198.18.0.11:4244")
        );
        let e = plain
            .target("198.18.0.11:4244", Some("n1.default.hubble-grpc.cilium.io"))
            .err()
            .unwrap();
        assert!(e.contains("unexpected TLS ServerName"), "{e}");
    }
}
