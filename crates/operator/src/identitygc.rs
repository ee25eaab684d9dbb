//! Garbage collection of CiliumIdentities (`identity-allocation-mode=crd`)
//! as Cilium's operator runs it. Agents hold no reference objects: an
//! identity is in use while some CiliumEndpoint names it. Each run, an
//! identity that no endpoint names and that showed no sign of life for
//! `identity-heartbeat-timeout` is first marked (the `io.cilium.heartbeat`
//! annotation), and deleted only if it is still unused and still marked a
//! timeout later. The delete is conditional on the object being exactly
//! the one judged, so an agent that took the identity up again in between
//! (which removes the mark) keeps it.

use crate::config::IdentityGc;
use crate::metrics::{IdentityGcRun, Metrics};
use k8s::cilium::HEARTBEAT_ANNOTATION;
use k8s::kube::api::{DynamicObject, PostParams};
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use watch::Mirror;
use watch::Source;

/// Lifesigns older than this many timeouts are forgotten.
const PRUNE_AFTER: u32 = 10;

/// When each identity last showed a sign of life: an event of its object
/// (created, updated, marked) or an endpoint naming it.
pub struct Heartbeats {
    seen: BTreeMap<String, Instant>,
    started: Instant,
    timeout: Duration,
}

impl Heartbeats {
    pub fn new(started: Instant, timeout: Duration) -> Self {
        Self {
            seen: BTreeMap::new(),
            started,
            timeout,
        }
    }

    pub fn beat(&mut self, name: &str, now: Instant) {
        self.seen.insert(name.to_owned(), now);
    }

    /// Alive: a lifesign within the timeout, or none recorded while the
    /// operator itself is younger than the timeout.
    fn alive(&self, name: &str, now: Instant) -> bool {
        let since = self.seen.get(name).copied().unwrap_or(self.started);
        now.saturating_duration_since(since) < self.timeout
    }

    fn prune(&mut self, now: Instant) {
        let keep = self.timeout * PRUNE_AFTER;
        self.seen
            .retain(|_, t| now.saturating_duration_since(*t) < keep);
    }
}

/// What a run does to one identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Alive,
    Mark,
    Delete,
}

/// The verdict on identity `name`; a used one counts as a lifesign.
pub fn judge(
    heartbeats: &mut Heartbeats,
    name: &str,
    used: bool,
    marked: bool,
    now: Instant,
) -> Verdict {
    if used {
        heartbeats.beat(name, now);
        return Verdict::Alive;
    }
    if heartbeats.alive(name, now) {
        Verdict::Alive
    } else if marked {
        Verdict::Delete
    } else {
        Verdict::Mark
    }
}

/// At most `limit` deletions per `interval` (`identity-gc-rate-limit`,
/// `identity-gc-rate-interval`), waiting out the rest of the interval.
struct RateLimit {
    limit: usize,
    interval: Duration,
    window: Instant,
    used: usize,
}

impl RateLimit {
    async fn take(&mut self) {
        if self.window.elapsed() >= self.interval {
            self.window = Instant::now();
            self.used = 0;
        }
        if self.used >= self.limit {
            let rest = self.interval.saturating_sub(self.window.elapsed());
            tracing::info!(subsys = "identity-gc", wait = ?rest, limit = self.limit, "Identity deletion rate limit reached, waiting");
            tokio::time::sleep(rest).await;
            self.window = Instant::now();
            self.used = 0;
        }
        self.used += 1;
    }
}

fn marked(obj: &DynamicObject) -> bool {
    obj.annotations().contains_key(HEARTBEAT_ANNOTATION)
}

/// The identity a CiliumEndpoint names (`status.identity.id`).
fn endpoint_identity(obj: &DynamicObject) -> Option<String> {
    obj.data["status"]["identity"]["id"]
        .as_u64()
        .map(|id| id.to_string())
}

#[derive(Debug, thiserror::Error)]
#[error("CiliumIdentity {name}: {source}")]
struct GcError {
    name: String,
    source: k8s::kube::Error,
}

struct Collector {
    api: Api<DynamicObject>,
    heartbeats: Heartbeats,
    limit: RateLimit,
}

impl Collector {
    async fn mark(&self, mut obj: DynamicObject) -> Result<(), GcError> {
        let name = obj.name_any();
        let now = k8s::k8s_openapi::jiff::Timestamp::now().to_string();
        obj.annotations_mut()
            .insert(HEARTBEAT_ANNOTATION.to_owned(), now);
        // an update carrying the resourceVersion: a change meanwhile wins
        match self.api.replace(&name, &PostParams::default(), &obj).await {
            Ok(_) => {
                tracing::debug!(subsys = "identity-gc", identity = %name, "Marked unused identity for deletion");
                Ok(())
            }
            Err(e) if crate::judged::moved_on(&e) => Ok(()),
            Err(source) => Err(GcError { name, source }),
        }
    }

    /// Deletes the identity as it was judged; false when it changed or
    /// went meanwhile.
    async fn delete(&mut self, obj: &DynamicObject) -> Result<bool, GcError> {
        let name = obj.name_any();
        self.limit.take().await;
        match crate::judged::delete(&self.api, &name, obj.uid(), obj.resource_version()).await {
            Ok(true) => {
                tracing::info!(subsys = "identity-gc", identity = %name, "Deleted unused identity");
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(source) => Err(GcError { name, source }),
        }
    }

    /// One run over every identity; stops at the first error the API
    /// server gives that is not a conflict.
    async fn run(
        &mut self,
        identities: &Mirror<DynamicObject>,
        endpoints: &Mirror<Option<String>>,
    ) -> IdentityGcRun {
        let now = Instant::now();
        let used: BTreeSet<&str> = endpoints
            .iter()
            .filter_map(|(_, id)| id.as_deref())
            .collect();
        let mut run = IdentityGcRun::default();
        for (name, obj) in identities.iter() {
            let verdict = judge(
                &mut self.heartbeats,
                name,
                used.contains(name.as_str()),
                marked(obj),
                now,
            );
            let result = match verdict {
                Verdict::Alive => {
                    run.alive += 1;
                    Ok(())
                }
                Verdict::Mark => {
                    run.alive += 1;
                    self.mark(obj.clone()).await
                }
                Verdict::Delete => match self.delete(obj).await {
                    Ok(true) => {
                        run.deleted += 1;
                        Ok(())
                    }
                    Ok(false) => {
                        run.alive += 1;
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = result {
                tracing::warn!(subsys = "identity-gc", error = %e, "Identity garbage collection failed, trying again next run");
                run.failed = true;
                break;
            }
        }
        self.heartbeats.prune(now);
        run
    }
}

/// Collects CiliumIdentities every `gc.interval` until the operator stops
/// (a run needs both lists in).
pub async fn run(client: k8s::kube::Client, gc: IdentityGc, metrics: Arc<Metrics>) {
    let Some(interval) = gc.interval else {
        return std::future::pending().await;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &k8s::cilium::identities());
    let mut identity_events =
        ResourceSource::new("CiliumIdentities", api.clone(), watcher::Config::default());
    let mut endpoint_events = ResourceSource::new(
        "CiliumEndpoints",
        Api::<DynamicObject>::all_with(client, &k8s::cilium::endpoints()),
        watcher::Config::default(),
    )
    .decode(|_, obj: &DynamicObject| Ok::<_, std::convert::Infallible>(endpoint_identity(obj)));
    let mut identities = Mirror::default();
    let mut endpoints = Mirror::default();
    let mut collector = Collector {
        api,
        heartbeats: Heartbeats::new(Instant::now(), gc.heartbeat_timeout),
        limit: RateLimit {
            limit: gc.rate_limit,
            interval: gc.rate_interval,
            window: Instant::now(),
            used: 0,
        },
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            ev = identity_events.next() => match ev {
                Some(ev) => {
                    if let watch::Event::Upsert { key, .. } = &ev {
                        collector.heartbeats.beat(key, Instant::now());
                    }
                    identities.apply(ev);
                }
                None => return,
            },
            more = endpoints.follow(&mut endpoint_events) => if !more { return },
            _ = tick.tick() => {
                if identities.listed() && endpoints.listed() {
                    let run = collector.run(&identities, &endpoints).await;
                    tracing::info!(subsys = "identity-gc", alive = run.alive, deleted = run.deleted, "Identity garbage collection run");
                    metrics.identity_gc(run);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unused_identity_is_marked_a_timeout_after_its_last_lifesign_and_deleted_a_timeout_later()
    {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(60);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut hb = Heartbeats::new(t0, timeout);
        hb.beat("300", t0);
        assert_eq!(judge(&mut hb, "300", false, false, at(30)), Verdict::Alive);
        assert_eq!(judge(&mut hb, "300", false, false, at(61)), Verdict::Mark);
        // the mark is an update: a lifesign
        hb.beat("300", at(61));
        assert_eq!(judge(&mut hb, "300", false, true, at(90)), Verdict::Alive);
        assert_eq!(judge(&mut hb, "300", false, true, at(122)), Verdict::Delete);
        // an endpoint naming it is a lifesign too, marked or not
        assert_eq!(judge(&mut hb, "300", true, true, at(122)), Verdict::Alive);
        assert_eq!(judge(&mut hb, "300", false, true, at(150)), Verdict::Alive);
    }

    #[test]
    fn identities_never_seen_are_alive_while_the_operator_is_young_and_old_lifesigns_are_forgotten()
    {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(60);
        let mut hb = Heartbeats::new(t0, timeout);
        let soon = t0 + Duration::from_secs(59);
        assert_eq!(judge(&mut hb, "301", false, false, soon), Verdict::Alive);
        let later = t0 + Duration::from_secs(61);
        assert_eq!(judge(&mut hb, "301", false, false, later), Verdict::Mark);
        hb.beat("302", t0);
        hb.prune(t0 + timeout * PRUNE_AFTER);
        assert!(hb.seen.is_empty());
    }
}
