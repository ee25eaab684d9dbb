//! A pod's HTTP startup and readiness probes, run as kubelet runs them:
//! readiness is not probed before startup succeeded; a container is
//! Ready after `successThreshold` readiness successes in a row and stops
//! being Ready after `failureThreshold` failures in a row; each probe runs
//! every `periodSeconds`. Only `httpGet` probes exist here (the DaemonSet's
//! are); a pod without probes is Ready once it runs.

use k8s::k8s_openapi::api::core::v1::{Pod, Probe as K8sProbe};
use k8s::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Debug)]
struct HttpProbe {
    address: String,
    request: String,
    period: Duration,
    timeout: Duration,
    success_threshold: u32,
    failure_threshold: u32,
}

impl HttpProbe {
    fn of(p: &K8sProbe, pod_ip: &str) -> Option<Self> {
        let get = p.http_get.as_ref()?;
        let port = match &get.port {
            IntOrString::Int(n) => *n,
            IntOrString::String(s) => s.parse().ok()?,
        };
        let host = get.host.clone().unwrap_or_else(|| pod_ip.to_owned());
        let mut request = format!(
            "GET {} HTTP/1.0\r\nHost: {host}\r\n",
            get.path.as_deref().unwrap_or("/")
        );
        for h in get.http_headers.iter().flatten() {
            request.push_str(&format!("{}: {}\r\n", h.name, h.value));
        }
        request.push_str("\r\n");
        let secs = |v: Option<i32>, default: u64| {
            Duration::from_secs(v.map_or(default, |v| v.max(1) as u64))
        };
        Some(Self {
            address: format!("{host}:{port}"),
            request,
            period: secs(p.period_seconds, 10),
            timeout: secs(p.timeout_seconds, 1),
            success_threshold: p.success_threshold.map_or(1, |v| v.max(1) as u32),
            failure_threshold: p.failure_threshold.map_or(3, |v| v.max(1) as u32),
        })
    }

    /// Whether the server answers with a 2xx or 3xx status.
    async fn check(&self) -> bool {
        let get = async {
            let mut s = tokio::net::TcpStream::connect(&self.address).await.ok()?;
            s.write_all(self.request.as_bytes()).await.ok()?;
            let mut head = [0u8; 12];
            s.read_exact(&mut head).await.ok()?;
            let code = std::str::from_utf8(&head[9..12])
                .ok()?
                .parse::<u16>()
                .ok()?;
            Some((200..400).contains(&code))
        };
        tokio::time::timeout(self.timeout, get)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
    }
}

/// One probe's state.
#[derive(Debug)]
struct Run {
    probe: HttpProbe,
    next: Instant,
    successes: u32,
    failures: u32,
}

impl Run {
    fn new(probe: HttpProbe) -> Self {
        Self {
            probe,
            next: Instant::now(),
            successes: 0,
            failures: 0,
        }
    }

    /// Probes if due; Some(result) when it ran.
    async fn tick(&mut self) -> Option<bool> {
        if Instant::now() < self.next {
            return None;
        }
        self.next = Instant::now() + self.probe.period;
        let ok = self.probe.check().await;
        if ok {
            self.successes += 1;
            self.failures = 0;
        } else {
            self.failures += 1;
            self.successes = 0;
        }
        Some(ok)
    }
}

/// A pod's probes and its readiness.
#[derive(Debug)]
pub struct Prober {
    startup: Option<Run>,
    readiness: Option<Run>,
    started: bool,
    ready: bool,
}

impl Prober {
    /// The probes of `pod`'s first container that has any; None when no
    /// container does (the pod is Ready as it runs).
    pub fn of(pod: &Pod, pod_ip: &str) -> Option<Self> {
        let c = pod.spec.as_ref()?.containers.iter().find(|c| {
            c.startup_probe
                .as_ref()
                .is_some_and(|p| p.http_get.is_some())
                || c.readiness_probe
                    .as_ref()
                    .is_some_and(|p| p.http_get.is_some())
        })?;
        let startup = c
            .startup_probe
            .as_ref()
            .and_then(|p| HttpProbe::of(p, pod_ip))
            .map(Run::new);
        let readiness = c
            .readiness_probe
            .as_ref()
            .and_then(|p| HttpProbe::of(p, pod_ip))
            .map(Run::new);
        Some(Self {
            started: startup.is_none(),
            startup,
            readiness,
            ready: false,
        })
    }

    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Runs the probes that are due; whether readiness changed.
    pub async fn tick(&mut self) -> bool {
        let was = self.ready;
        if !self.started {
            let startup = self
                .startup
                .as_mut()
                .expect("not started: has a startup probe");
            if startup.tick().await.is_some()
                && startup.successes >= startup.probe.success_threshold
            {
                self.started = true;
                // readiness is probed at once after startup
                if let Some(r) = &mut self.readiness {
                    r.next = Instant::now();
                }
            }
        }
        if self.started {
            match &mut self.readiness {
                None => self.ready = true,
                Some(r) => {
                    if r.tick().await.is_some() {
                        if r.successes >= r.probe.success_threshold {
                            self.ready = true;
                        } else if r.failures >= r.probe.failure_threshold {
                            self.ready = false;
                        }
                    }
                }
            }
        }
        self.ready != was
    }
}
