//! Leader election on a `coordination.k8s.io` Lease, as client-go's
//! leaderelection does it for Cilium's operator: one replica holds the
//! Lease and renews it every retry period; the others take it over when
//! its record has not changed for a lease duration by their own clock
//! (never by comparing the holder's timestamps with it, so skewed clocks
//! cannot steal a live lease). Every write carries the resourceVersion
//! read, so of two replicas racing for it one wins.

use k8s::k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s::k8s_openapi::jiff::Timestamp;
use k8s::kube::api::{ObjectMeta, PostParams};
use k8s::kube::Api;
use std::time::{Duration, Instant};

/// Cilium's lease name.
pub const LEASE_NAME: &str = "cilium-operator-resource-lock";

#[derive(Clone, Debug)]
pub struct Timing {
    /// `leader-election-lease-duration`.
    pub lease_duration: Duration,
    /// `leader-election-renew-deadline`.
    pub renew_deadline: Duration,
    /// `leader-election-retry-period`.
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("leader election lost: the Lease {LEASE_NAME} could not be renewed within {0:?}")]
    Lost(Duration),
    #[error("leader election lost: the Lease {LEASE_NAME} is now held by {0}")]
    Taken(String),
}

/// A lease's holder and renew time, as read.
type Record = (Option<String>, Option<MicroTime>);

/// One replica's part in the election.
pub struct Elector {
    api: Api<Lease>,
    identity: String,
    timing: Timing,
    /// The holder and renew time last read, and when they were read
    /// changed: the lease's age by this replica's clock.
    observed: Option<(Record, Instant)>,
}

/// What one attempt found.
enum Attempt {
    Leading,
    Held(String),
}

impl Elector {
    pub fn new(
        client: k8s::kube::Client,
        namespace: &str,
        identity: String,
        timing: Timing,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            identity,
            timing,
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until this replica leads.
    pub async fn acquire(&mut self) {
        let mut last_holder = String::new();
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => {
                    tracing::info!(subsys = "cilium-operator", identity = %self.identity, "Leading the operator HA deployment");
                    return;
                }
                Ok(Attempt::Held(holder)) => {
                    if holder != last_holder {
                        tracing::info!(subsys = "cilium-operator", leader = %holder, "Another operator is leading; waiting for its Lease");
                        last_holder = holder;
                    }
                }
                Err(e) => {
                    tracing::info!(subsys = "cilium-operator", error = %e, "Unable to acquire the leader Lease, retrying");
                }
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// Renews the lease every retry period while leading; returns why
    /// leadership was lost (the process should then stop acting).
    pub async fn hold(&mut self) -> LeaderError {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => renewed = Instant::now(),
                Ok(Attempt::Held(holder)) => return LeaderError::Taken(holder),
                Err(e) => {
                    tracing::warn!(subsys = "cilium-operator", error = %e, "Unable to renew the leader Lease");
                    if renewed.elapsed() >= self.timing.renew_deadline {
                        return LeaderError::Lost(self.timing.renew_deadline);
                    }
                }
            }
        }
    }

    /// Gives the lease up (on shutdown), so another replica takes over at
    /// once instead of after a lease duration.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(LEASE_NAME).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return;
        }
        let now = MicroTime(Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        match self
            .api
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(subsys = "cilium-operator", "Released the leader Lease"),
            Err(e) => {
                tracing::warn!(subsys = "cilium-operator", error = %e, "Unable to release the leader Lease")
            }
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, k8s::kube::Error> {
        let now = MicroTime(Timestamp::now());
        let duration_secs = self.timing.lease_duration.as_secs().max(1) as i32;
        let Some(mut lease) = self.api.get_opt(LEASE_NAME).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            self.api.create(&PostParams::default(), &lease).await?;
            return Ok(Attempt::Leading);
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let record = (spec.holder_identity.clone(), spec.renew_time.clone());
        if self.observed.as_ref().map(|(r, _)| r) != Some(&record) {
            self.observed = Some((record, Instant::now()));
        }
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let held_for = spec
            .lease_duration_seconds
            .map_or(self.timing.lease_duration, |s| {
                Duration::from_secs(s.max(0) as u64)
            });
        let age = self
            .observed
            .as_ref()
            .map_or(Duration::MAX, |(_, t)| t.elapsed());
        match &holder {
            Some(h) if *h != self.identity && age < held_for => {
                return Ok(Attempt::Held(h.clone()))
            }
            Some(h) if *h == self.identity => {}
            _ => {
                // an expired or released lease changes hands
                spec.acquire_time = Some(now.clone());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(duration_secs);
        spec.renew_time = Some(now);
        // the resourceVersion read makes a racing replica's write conflict
        self.api
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await?;
        Ok(Attempt::Leading)
    }
}

/// Cilium's holder identity: the host name and ten random characters.
pub fn holder_identity() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 10];
    // SAFETY: getrandom writes at most len bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        // no entropy: the pid and time still set replicas apart
        let seed = std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64;
        bytes = seed.to_le_bytes().repeat(2)[..10]
            .try_into()
            .expect("10 bytes");
    }
    let suffix: String = bytes
        .iter()
        .map(|b| CHARS[*b as usize % CHARS.len()] as char)
        .collect();
    format!("{}-{suffix}", hostname())
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes a NUL-terminated name into the buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "cilium-operator".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
