//! The agent's connection to Kubernetes and its health as `cilium status`
//! reports it (Cilium's `kubernetes` status probe): the API server's
//! version, asked again every few seconds; a failed ask turns the state
//! to Failure with the error, and the agent unhealthy, until one works.

use api::models::{K8sStatus, State};
use controlplane::tasks::Tasks;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the probe asks (Cilium's interval for a small cluster).
const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// How long a start waits for the API server (Cilium gives up after a minute).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long after the API server answers again (or first) a refused watch
/// is retried at every probe rather than after its backoff: a server just
/// (re)started refuses watches (403) until its RBAC caches fill, which on
/// a loaded machine takes longer than a doubling backoff's first waits, and
/// the watch would then sit out up to 30 s more, reported failing while
/// nothing is wrong.
const SETTLING: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum KubernetesError {
    #[error(transparent)]
    Connect(#[from] k8s::ConnectError),
    #[error("the Kubernetes API server did not answer within {waited:?}: {last}")]
    Unreachable {
        waited: Duration,
        last: k8s::kube::Error,
    },
}

pub struct Kubernetes {
    client: k8s::kube::Client,
    /// The last probe's state and message.
    probed: Mutex<(State, String)>,
    /// The watchers started, by Cilium's API group names
    /// (`core/v1::Pods`, `cilium/v2::CiliumNode`), and how they fare:
    /// `Kubernetes APIs` and their sync state.
    health: Arc<k8s::WatchHealth>,
}

impl Kubernetes {
    /// Connects and asks for the API server's version, retrying for a
    /// minute as Cilium's start does.
    pub async fn connect(opts: &k8s::ClientOptions) -> Result<Arc<Self>, KubernetesError> {
        let client = k8s::connect(opts).await?;
        let started = Instant::now();
        let version = loop {
            match k8s::version_line(&client).await {
                Ok(v) => break v,
                Err(last) if started.elapsed() >= CONNECT_TIMEOUT => {
                    return Err(KubernetesError::Unreachable {
                        waited: CONNECT_TIMEOUT,
                        last,
                    })
                }
                Err(e) => {
                    tracing::info!(subsys = "k8s-client", error = %e, "Waiting for the Kubernetes API server");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        };
        tracing::info!(subsys = "k8s-client", version = %version, "Connected to the Kubernetes API server");
        Ok(Arc::new(Self {
            client,
            probed: Mutex::new((State::Ok, version)),
            health: Arc::default(),
        }))
    }

    pub fn client(&self) -> k8s::kube::Client {
        self.client.clone()
    }

    /// Records `source` as the watcher of `api` (the API group name
    /// Cilium gives it), reporting how it fares to status.
    pub fn watched<K>(&self, api: &str, source: k8s::ResourceSource<K>) -> k8s::ResourceSource<K>
    where
        K: k8s::kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
    {
        source.reporting(Arc::clone(&self.health), api)
    }

    /// The watched APIs whose first listing is still under way.
    pub fn caches_pending(&self) -> Vec<String> {
        self.health.first_lists_pending()
    }

    /// What `cilium status` shows on its `Kubernetes` lines; the APIs are
    /// left out while the API server is unreachable, as Cilium does. A
    /// watch that fails while the server answers (a verb missing from the
    /// RBAC role) turns the state to Warning, naming it.
    pub fn status(&self) -> K8sStatus {
        let (mut state, mut msg) = self.probed.lock().expect("k8s status lock").clone();
        let watches = self.health.all();
        if state == State::Ok {
            for (api, watch) in &watches {
                if let k8s::WatchState::Failing(error) = watch {
                    state = State::Warning;
                    msg.push_str(&format!("; cannot watch {api}: {error}"));
                }
            }
        }
        let k8s_api_versions = match state {
            State::Ok | State::Warning => watches.iter().map(|(api, _)| api.clone()).collect(),
            _ => Vec::new(),
        };
        let k8s_api_sync = watches
            .into_iter()
            .map(|(api, s)| (api, s.to_string()))
            .collect();
        K8sStatus {
            state,
            msg,
            k8s_api_versions,
            k8s_api_sync,
        }
    }

    /// Asks for the version every few seconds until the agent stops.
    pub fn probe(self: &Arc<Self>, tasks: &Tasks) {
        let this = Arc::clone(self);
        tasks.spawn("kubernetes-probe", async move {
            // since when the server answers (the agent connected to it)
            let mut answering_since = Instant::now();
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                let probed = match k8s::version_line(&this.client).await {
                    Ok(version) => (State::Ok, version),
                    Err(e) => {
                        tracing::warn!(subsys = "k8s-client", error = %e, "Kubernetes API server unreachable");
                        (State::Failure, e.to_string())
                    }
                };
                let answers = probed.0 == State::Ok;
                let was = std::mem::replace(
                    &mut *this.probed.lock().expect("k8s status lock"),
                    probed,
                );
                if !answers {
                    continue;
                }
                let back = was.0 != State::Ok;
                if back {
                    answering_since = Instant::now();
                }
                // watches waiting out the outage retry now, and those the
                // settling server still refuses at every probe
                let settling = answering_since.elapsed() < SETTLING;
                if back || (settling && this.health.any_failing()) {
                    this.health.server_back();
                }
            }
        });
    }
}
