//! Creating, deleting and restoring endpoints. Each step that touches the
//! kernel or disk is undone when a later one fails, so a refused request
//! leaves no program, map entry, identity or directory behind.

use super::{state, Endpoint, EndpointRef, MAX_ID, MIN_ID};
use crate::daemon::Daemon;
use crate::ipcache::{Entry, SOURCE_LOCAL};
use crate::ipsync;
use crate::monitor::AgentNotify;
use abi::endpoint::{parse_mac, EndpointInfo, EndpointKey};
use api::endpoint::{EndpointChangeRequest, EndpointState};
use datapath::maps::Lxc;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Exists(String),
    #[error("endpoint not found")]
    NotFound,
    #[error("{0}")]
    Failed(String),
}

impl EndpointError {
    /// The HTTP status Cilium answers with.
    pub fn status(&self) -> u16 {
        match self {
            EndpointError::Invalid(_) => 400,
            EndpointError::Exists(_) => 409,
            EndpointError::NotFound => 404,
            EndpointError::Failed(_) => 500,
        }
    }
}

fn failed<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> EndpointError + '_ {
    move |e| EndpointError::Failed(format!("{what}: {e}"))
}

pub struct Endpoints {
    state_dir: PathBuf,
    by_id: BTreeMap<u16, Endpoint>,
}

fn ifindex_of(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: a valid C string; returns 0 when there is no such interface.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (index != 0).then_some(index)
}

/// Labels of the endpoint's identity: the request's, plus the namespace.
pub fn labels_of(req: &EndpointChangeRequest) -> Vec<String> {
    let mut labels: Vec<String> = req
        .labels
        .iter()
        .map(|l| {
            if l.contains(':') {
                l.clone()
            } else {
                format!("unspec:{l}")
            }
        })
        .collect();
    if !req.k8s_namespace.is_empty() {
        labels.push(format!(
            "k8s:io.kubernetes.pod.namespace={}",
            req.k8s_namespace
        ));
    }
    labels.sort();
    labels.dedup();
    labels
}

impl Endpoints {
    pub fn new(state_dir: PathBuf) -> Self {
        Self {
            state_dir,
            by_id: BTreeMap::new(),
        }
    }

    pub fn list(&self) -> Vec<Endpoint> {
        self.by_id.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn find(&self, r: &EndpointRef) -> Vec<Endpoint> {
        self.by_id
            .values()
            .filter(|e| r.matches(e))
            .cloned()
            .collect()
    }

    /// The ID the next endpoint without one will get.
    pub fn free_id(&self) -> Option<u16> {
        (MIN_ID..=MAX_ID).find(|id| !self.by_id.contains_key(id))
    }

    /// Refuses a request that `create` would refuse, before anything is
    /// allocated for it.
    pub fn check(&self, req: &EndpointChangeRequest) -> Result<(), EndpointError> {
        self.from_request(req).map(drop)
    }

    /// Validates a change request into an endpoint (not yet realized).
    fn from_request(&self, req: &EndpointChangeRequest) -> Result<Endpoint, EndpointError> {
        let bad = |m: String| EndpointError::Invalid(m);
        if let Err(e) = req.state.parse::<EndpointState>() {
            return Err(bad(e.to_string()));
        }
        if req.interface_name.is_empty() {
            return Err(bad("interface-name is required".into()));
        }
        let ifindex = ifindex_of(&req.interface_name)
            .ok_or_else(|| bad(format!("interface {} does not exist", req.interface_name)))?;
        if req.interface_index != 0 && req.interface_index != i64::from(ifindex) {
            return Err(bad(format!(
                "interface-index {} does not match interface {} (index {ifindex})",
                req.interface_index, req.interface_name
            )));
        }
        let addressing = req.addressing.clone().unwrap_or_default();
        if addressing.ipv4.is_empty() {
            return Err(bad(
                "addressing.ipv4 is required (IPv6 is not enabled)".into()
            ));
        }
        let ipv4: Ipv4Addr = addressing.ipv4.parse().map_err(|_| {
            bad(format!(
                "addressing.ipv4 {:?} is not an IPv4 address",
                addressing.ipv4
            ))
        })?;
        for (field, value) in [("mac", &req.mac), ("host-mac", &req.host_mac)] {
            if parse_mac(value).is_none() {
                return Err(bad(format!("{field} {value:?} is not a MAC address")));
            }
        }
        let id = match req.id {
            0 => self
                .free_id()
                .ok_or_else(|| EndpointError::Failed("no free endpoint ID".into()))?,
            n if (i64::from(MIN_ID)..=i64::from(MAX_ID)).contains(&n) => n as u16,
            n => {
                return Err(bad(format!(
                    "endpoint ID {n} is outside {MIN_ID}..{MAX_ID}"
                )))
            }
        };
        let ep = Endpoint {
            id,
            container_id: req.container_id.clone(),
            container_interface_name: req.container_interface_name.clone(),
            ifname: req.interface_name.clone(),
            ifindex,
            mac: req.mac.to_ascii_lowercase(),
            host_mac: req.host_mac.to_ascii_lowercase(),
            ipv4,
            k8s_namespace: req.k8s_namespace.clone(),
            k8s_pod_name: req.k8s_pod_name.clone(),
            labels: labels_of(req),
            identity: 0,
            external_ipam: req
                .datapath_configuration
                .as_ref()
                .is_some_and(|c| c.external_ipam),
            state: EndpointState::WaitingForIdentity,
            policy: Default::default(),
        };
        for other in self.by_id.values() {
            let clash = if other.id == ep.id {
                Some(format!("endpoint ID {} already exists", ep.id))
            } else if other.ipv4 == ep.ipv4 {
                Some(format!(
                    "IP {} is already used by endpoint {}",
                    ep.ipv4, other.id
                ))
            } else if other.ifname == ep.ifname {
                Some(format!(
                    "interface {} already belongs to endpoint {}",
                    ep.ifname, other.id
                ))
            } else if !ep.container_id.is_empty()
                && other.container_id == ep.container_id
                && other.container_interface_name == ep.container_interface_name
            {
                Some(format!(
                    "endpoint for container {} already exists as {}",
                    ep.container_id, other.id
                ))
            } else {
                None
            };
            if let Some(msg) = clash {
                return Err(EndpointError::Exists(msg));
            }
        }
        Ok(ep)
    }

    /// `PUT /endpoint/{id}`: creates and realizes an endpoint with the
    /// identity the caller allocated for `labels_of(req)`; the caller keeps
    /// that reference when this fails.
    pub fn create(
        &mut self,
        d: &Daemon,
        req: &EndpointChangeRequest,
        identity: u32,
    ) -> Result<Endpoint, EndpointError> {
        let started = std::time::Instant::now();
        let mut ep = self.from_request(req)?;
        ep.identity = identity;
        claim_ip(d, &ep)?;
        let fast = d.attach_mode == datapath::attach::AttachMode::Tcx;
        if let Err(e) = realize(d, &mut ep, fast, false).and_then(|()| {
            state::write(&self.state_dir, &ep)
                .map_err(|e| EndpointError::Failed(format!("writing endpoint state: {e}")))
        }) {
            unrealize(d, &ep);
            release_ip(d, &ep);
            let _ = state::remove(&self.state_dir, ep.id);
            return Err(e);
        }
        tracing::info!(
            subsys = "endpoint",
            endpointID = ep.id,
            containerID = %ep.container_id,
            ipv4 = %ep.ipv4,
            identity = ep.identity,
            interface = %ep.ifname,
            duration = ?started.elapsed(),
            "New endpoint"
        );
        d.monitor
            .agent(AgentNotify::EndpointCreated, notify_body(&ep));
        self.by_id.insert(ep.id, ep.clone());
        Ok(ep)
    }

    /// Deletes every endpoint `r` matches; returns how many.
    pub fn delete(&mut self, d: &Daemon, r: &EndpointRef) -> Result<usize, EndpointError> {
        let ids: Vec<u16> = self.find(r).iter().map(|e| e.id).collect();
        if ids.is_empty() {
            return Err(EndpointError::NotFound);
        }
        for id in &ids {
            let ep = self.by_id.remove(id).expect("found above");
            self.teardown(d, &ep, true);
            tracing::info!(subsys = "endpoint", endpointID = ep.id, containerID = %ep.container_id, "Removed endpoint");
            d.monitor
                .agent(AgentNotify::EndpointDeleted, notify_body(&ep));
        }
        Ok(ids.len())
    }

    /// Removes an endpoint's traces. `holds_identity` is false for a
    /// restored endpoint that never took its identity reference in this run:
    /// releasing it would drop another endpoint's reference.
    fn teardown(&self, d: &Daemon, ep: &Endpoint, holds_identity: bool) {
        unrealize(d, ep);
        release_ip(d, ep);
        if holds_identity {
            d.identities.release(&ep.labels);
        }
        if let Err(e) = state::remove(&self.state_dir, ep.id) {
            tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to remove endpoint state");
        }
    }

    /// Rewrites every endpoint's policy map with `realize`; returns how
    /// many succeeded.
    pub fn regenerate_policy(
        &mut self,
        mut realize: impl FnMut(
            u16,
            &[String],
        )
            -> Result<crate::policies::Realized, crate::policies::PolicyError>,
    ) -> usize {
        let mut n = 0;
        for ep in self.by_id.values_mut() {
            match realize(ep.id, &ep.labels) {
                Ok(r) => {
                    ep.policy = r;
                    n += 1;
                }
                Err(e) => {
                    tracing::warn!(subsys = "policy", endpointID = ep.id, error = %e, "Unable to regenerate endpoint policy")
                }
            }
        }
        n
    }

    /// Takes back the endpoints a previous run left in the state dir. An
    /// endpoint whose interface is gone (its pod was deleted while the agent
    /// was down) is cleaned up instead.
    pub fn restore(&mut self, d: &Daemon) -> (usize, usize) {
        let (mut restored, mut dropped) = (0, 0);
        for found in state::scan(&self.state_dir) {
            let mut ep = match found {
                Ok(ep) => ep,
                Err(e) => {
                    tracing::warn!(subsys = "endpoint", error = %e, "Unable to restore endpoint, skipping");
                    continue;
                }
            };
            let Some(ifindex) = ifindex_of(&ep.ifname) else {
                tracing::info!(subsys = "endpoint", endpointID = ep.id, interface = %ep.ifname, "Interface is gone, removing endpoint");
                self.teardown(d, &ep, false);
                dropped += 1;
                continue;
            };
            ep.ifindex = ifindex;
            let claimed = claim_ip(d, &ep);
            let holds_identity = claimed.is_ok();
            if holds_identity {
                ep.identity = d.identities.adopt(&ep.labels, ep.identity);
            }
            match claimed.and_then(|()| realize(d, &mut ep, false, true)) {
                Ok(()) => {
                    tracing::info!(subsys = "endpoint", endpointID = ep.id, ipv4 = %ep.ipv4, "Restored endpoint");
                    self.by_id.insert(ep.id, ep);
                    restored += 1;
                }
                Err(e) => {
                    tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to restore endpoint, removing it");
                    self.teardown(d, &ep, holds_identity);
                    dropped += 1;
                }
            }
        }
        (restored, dropped)
    }
}

/// Claims the endpoint's address from IPAM (unless it came from elsewhere).
fn claim_ip(d: &Daemon, ep: &Endpoint) -> Result<(), EndpointError> {
    if !ep.external_ipam {
        d.ipam
            .lock()
            .expect("ipam lock")
            .claim(ep.ipv4, &ep.ipam_owner())
            .map_err(|e| EndpointError::Exists(e.to_string()))?;
    }
    Ok(())
}

fn release_ip(d: &Daemon, ep: &Endpoint) {
    if !ep.external_ipam {
        if let Err(e) = d.ipam.lock().expect("ipam lock").release(ep.ipv4) {
            tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to release endpoint IP");
        }
    }
}

/// Attaches the programs and writes the endpoint into the maps.
///
/// A new endpoint is attached with a legacy tc filter, which takes well under
/// a millisecond, and moved onto a tcx link right after the API answered
/// ([`upgrade_to_tcx`]): creating a tcx link waits for an RCU grace period
/// (10-25 ms here), which would otherwise be most of a pod's ADD time.
fn realize(
    d: &Daemon,
    ep: &mut Endpoint,
    fast_attach: bool,
    restoring: bool,
) -> Result<(), EndpointError> {
    use datapath::attach::AttachMode;
    ep.state = EndpointState::Regenerating;
    let mut dp = d.datapath.lock().expect("datapath lock");
    let attached = if fast_attach {
        dp.attach_endpoint_as(ep.id, &ep.ifname, AttachMode::Tc)
    } else {
        dp.attach_endpoint(ep.id, &ep.ifname)
    };
    drop(dp);
    attached.map_err(|e| EndpointError::Failed(format!("attaching programs: {e}")))?;
    // its policy map before the datapath can see the endpoint; a restored
    // endpoint keeps the map it has until the desired state is all known
    if !(restoring && !d.policies.synced()) {
        let (rules, revision) = d.policies.rules();
        let ids = crate::policies::identities(d);
        ep.policy = crate::policies::realize(d, ep.id, &ep.labels, &rules, revision, &ids)
            .map_err(failed("realizing policy"))?;
    }
    d.datapath
        .lock()
        .expect("datapath lock")
        .install_policy_program(ep.id)
        .map_err(|e| e.to_string())
        .map_err(failed("installing the endpoint's ingress program"))?;
    let info = EndpointInfo::pod(
        ep.ifindex,
        ep.id,
        parse_mac(&ep.mac).unwrap_or_default(),
        parse_mac(&ep.host_mac).unwrap_or_default(),
        ep.identity,
    );
    Lxc::open(&d.config.bpf_root)
        .and_then(|m| m.put(&EndpointKey::v4(ep.ipv4), &info))
        .map_err(|e| e.to_string())
        .map_err(failed("writing cilium_lxc"))?;
    d.ipcache
        .upsert(ep.ipv4, 32, Entry::new(ep.identity, SOURCE_LOCAL))
        .map_err(|e| e.to_string())
        .map_err(failed("writing cilium_ipcache"))?;
    d.monitor
        .name_pod(ep.ipv4, &ep.k8s_namespace, &ep.k8s_pod_name);
    ipsync::publish(d, ep);
    ep.state = EndpointState::Ready;
    Ok(())
}

/// What `cilium monitor` shows of an endpoint that came or went.
fn notify_body(ep: &Endpoint) -> serde_json::Value {
    serde_json::json!({
        "id": ep.id,
        "labels": ep.labels,
        "namespace": ep.k8s_namespace,
        "pod-name": ep.k8s_pod_name,
    })
}

/// Best-effort inverse of `realize`.
fn unrealize(d: &Daemon, ep: &Endpoint) {
    if let Ok(map) = Lxc::open(&d.config.bpf_root) {
        let _ = map.remove(&EndpointKey::v4(ep.ipv4));
    }
    let _ = d.ipcache.remove(ep.ipv4, 32, SOURCE_LOCAL);
    ipsync::withdraw(d, ep.ipv4);
    d.monitor.forget_pod(ep.ipv4);
    datapath::policymap::remove(&d.config.bpf_root.join(abi::maps::GLOBALS_DIR), ep.id);
    d.datapath
        .lock()
        .expect("datapath lock")
        .remove_policy_program(ep.id);
    d.datapath
        .lock()
        .expect("datapath lock")
        .detach_endpoint(ep.id);
}

/// Second half of a fast attach: moves endpoint `id` onto its pinned tcx
/// link, unless it was deleted meanwhile.
pub fn upgrade_to_tcx(d: &Daemon, id: u16, ifname: &str) {
    let result = d
        .datapath
        .lock()
        .expect("datapath lock")
        .attach_endpoint(id, ifname);
    if let Err(e) = result {
        tracing::warn!(subsys = "endpoint", endpointID = id, error = %e, "Unable to move endpoint to tcx, it stays on tc");
        return;
    }
    let eps = d.endpoints.lock().expect("endpoints lock");
    if !eps
        .find(&EndpointRef::Local(id))
        .iter()
        .any(|e| e.ifname == ifname)
    {
        d.datapath
            .lock()
            .expect("datapath lock")
            .detach_endpoint(id);
    }
}
