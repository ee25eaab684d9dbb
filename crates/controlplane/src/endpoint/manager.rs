//! Creating, deleting and restoring endpoints. Each step that touches the
//! kernel or disk is undone when a later one fails, so a refused request
//! leaves no program, map entry, identity or directory behind.

use super::Publisher;
use super::{state, Endpoint, EndpointRef, PodLabels, MAX_ID, MIN_ID};
use crate::events::AgentNotify;
use crate::identity::Identities;
use crate::ipam::{Families, Ipam};
use crate::ipcache::{Entry, IpCache, Source};
use crate::policies::{Policies, Realized};
use crate::ports::{EndpointDatapath, Events};
use abi::endpoint::{parse_mac, EndpointInfo};
use api::endpoint::{EndpointChangeRequest, EndpointState};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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

/// The handles the endpoint manager works with.
pub struct Deps {
    /// IPv4's allocator; None on an IPv6-only node.
    pub ipam: Option<Arc<Mutex<Ipam>>>,
    /// IPv6's allocator; None while IPv6 is off.
    pub ipam6: Option<Arc<Mutex<Ipam<Ipv6Addr>>>>,
    pub identities: Arc<Identities>,
    pub ipcache: Arc<IpCache>,
    pub policies: Arc<Policies>,
    pub publisher: Publisher,
    pub datapath: Arc<dyn EndpointDatapath>,
    pub events: Arc<dyn Events>,
    /// Runs the work that follows a create (the second attach step, the
    /// next policy map).
    pub tasks: crate::tasks::Tasks,
    /// Where pods' labels come from when the cluster knows them (the API
    /// server); without one, the request's labels are the endpoint's.
    pub pod_labels: Option<Arc<dyn PodLabels>>,
}

/// This node's endpoints: the only owner of the table, the state dir's
/// endpoint directories and the endpoints' map entries and programs.
pub struct Endpoints {
    deps: Deps,
    state_dir: PathBuf,
    /// The datapath template every endpoint runs (`template.txt`).
    template: Option<String>,
    by_id: Mutex<BTreeMap<u16, Endpoint>>,
    /// Bumped when an endpoint comes or goes, for those who mirror the
    /// table elsewhere (CiliumEndpoints).
    changed: tokio::sync::watch::Sender<u64>,
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
    pub fn new(deps: Deps, state_dir: PathBuf) -> Self {
        Self {
            template: deps.datapath.template_id(),
            deps,
            state_dir,
            by_id: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Wakes when an endpoint came or went.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn families(&self) -> Families {
        Families {
            ipv4: self.deps.ipam.is_some(),
            ipv6: self.deps.ipam6.is_some(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, BTreeMap<u16, Endpoint>> {
        self.by_id.lock().expect("endpoints lock")
    }

    pub fn list(&self) -> Vec<Endpoint> {
        self.table().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.table().is_empty()
    }

    pub fn find(&self, r: &EndpointRef) -> Vec<Endpoint> {
        self.table()
            .values()
            .filter(|e| r.matches(e))
            .cloned()
            .collect()
    }

    /// The ID the next endpoint without one will get.
    pub fn free_id(&self) -> Option<u16> {
        free_id(&self.table())
    }

    /// `PUT /endpoint/{id}`: allocates the identity of the request's
    /// labels, then creates and realizes the endpoint. A refused request
    /// allocates nothing; a failed one gives back what it took.
    pub async fn create(
        self: &Arc<Self>,
        req: &EndpointChangeRequest,
    ) -> Result<Endpoint, EndpointError> {
        from_request(
            &self.table(),
            self.deps.datapath.as_ref(),
            self.families(),
            req,
        )?;
        // The labels and identity may take round trips: not under the lock.
        let labels = self.labels_for(req).await;
        let identity = self.allocate(&labels).await?;
        let created = self.create_with(req, labels.clone(), identity);
        match &created {
            Ok(ep) => {
                if self.deps.datapath.attaches_in_two_steps() {
                    let (this, id, ifname) = (Arc::clone(self), ep.id, ep.ifname.clone());
                    self.deps
                        .tasks
                        .spawn_blocking("endpoint-attach", move || this.finish_attach(id, &ifname));
                }
                let this = Arc::clone(self);
                self.deps
                    .tasks
                    .spawn_blocking("prepare-policy-map", move || this.prepare_next());
            }
            Err(_) => self.deps.identities.release(&labels),
        }
        created
    }

    /// A reference to the identity of `labels`.
    async fn allocate(&self, labels: &[String]) -> Result<u32, EndpointError> {
        self.deps
            .identities
            .allocate(labels)
            .await
            .map_err(|e| EndpointError::Failed(e.to_string()))
    }

    /// The identity labels of the requested endpoint: its pod's as the
    /// cluster knows them, else the request's. A pod the cluster cannot
    /// tell about yet starts with the request's labels; the pod watcher
    /// relabels it once the pod is known.
    async fn labels_for(&self, req: &EndpointChangeRequest) -> Vec<String> {
        if let (Some(source), false) = (&self.deps.pod_labels, req.k8s_pod_name.is_empty()) {
            match source
                .resolve(&req.k8s_namespace, &req.k8s_pod_name, &req.k8s_uid)
                .await
            {
                Ok(labels) => return labels,
                Err(e) => {
                    tracing::warn!(subsys = "endpoint", k8sNamespace = %req.k8s_namespace, k8sPodName = %req.k8s_pod_name, error = %e, "Unable to resolve the pod's labels; starting with the request's")
                }
            }
        }
        labels_of(req)
    }

    /// Creates and realizes an endpoint with `labels` and the identity
    /// the caller allocated for them; the caller keeps that reference
    /// when this fails.
    fn create_with(
        &self,
        req: &EndpointChangeRequest,
        labels: Vec<String>,
        identity: u32,
    ) -> Result<Endpoint, EndpointError> {
        let started = std::time::Instant::now();
        let mut table = self.table();
        let mut ep = from_request(&table, self.deps.datapath.as_ref(), self.families(), req)?;
        ep.labels = labels;
        ep.identity = identity;
        self.claim_ip(&ep)?;
        let quick = self.deps.datapath.attaches_in_two_steps();
        if let Err(e) = self.realize(&mut ep, quick, false).and_then(|()| {
            state::write(&self.state_dir, &ep, self.template.as_deref())
                .map_err(|e| EndpointError::Failed(format!("writing endpoint state: {e}")))
        }) {
            self.unrealize(&ep);
            self.release_ip(&ep);
            let _ = state::remove(&self.state_dir, ep.id);
            return Err(e);
        }
        tracing::info!(
            subsys = "endpoint",
            endpointID = ep.id,
            containerID = %ep.container_id,
            ipv4 = %shown(ep.ipv4),
            ipv6 = %shown(ep.ipv6),
            identity = ep.identity,
            interface = %ep.ifname,
            duration = ?started.elapsed(),
            "New endpoint"
        );
        self.deps
            .events
            .agent(AgentNotify::EndpointCreated, notify_body(&ep));
        table.insert(ep.id, ep.clone());
        drop(table);
        self.bump();
        Ok(ep)
    }

    /// Deletes every endpoint `r` matches; returns how many.
    pub fn delete(&self, r: &EndpointRef) -> Result<usize, EndpointError> {
        let mut table = self.table();
        let ids: Vec<u16> = table
            .values()
            .filter(|e| r.matches(e))
            .map(|e| e.id)
            .collect();
        if ids.is_empty() {
            return Err(EndpointError::NotFound);
        }
        if let Some(host) = ids.iter().find(|id| table[id].is_host()) {
            return Err(EndpointError::Invalid(format!(
                "endpoint {host} is the host endpoint: it lives as long as the agent"
            )));
        }
        for id in &ids {
            let ep = table.remove(id).expect("found above");
            self.teardown(&ep, true);
            tracing::info!(subsys = "endpoint", endpointID = ep.id, containerID = %ep.container_id, "Removed endpoint");
            self.deps
                .events
                .agent(AgentNotify::EndpointDeleted, notify_body(&ep));
        }
        drop(table);
        self.bump();
        Ok(ids.len())
    }

    /// Gives endpoint `id` the identity of `labels` (its pod's labels
    /// changed): its policy map first, then the entries that carry its
    /// identity, then the old identity's reference goes. Returns whether
    /// anything changed.
    pub async fn relabel(&self, id: u16, labels: Vec<String>) -> Result<bool, EndpointError> {
        let before = self
            .table()
            .get(&id)
            .map(|ep| ep.labels.clone())
            .ok_or(EndpointError::NotFound)?;
        if before == labels {
            return Ok(false);
        }
        let identity = self.allocate(&labels).await?;
        let mut table = self.table();
        let Some(ep) = table.get_mut(&id).filter(|ep| ep.labels == before) else {
            // deleted or relabeled meanwhile: whoever did it decides
            drop(table);
            self.deps.identities.release(&labels);
            return Ok(false);
        };
        let (old_labels, old_identity) = (ep.labels.clone(), ep.identity);
        ep.labels = labels;
        ep.identity = identity;
        let applied = self.apply_identity(ep);
        if let Err(e) = applied {
            ep.labels = old_labels;
            ep.identity = old_identity;
            let _ = self.apply_identity(ep);
            drop(table);
            self.deps.identities.release(&before);
            return Err(e);
        }
        ep.log.ok(
            ep.state,
            format!("Identity changed from {old_identity} to {identity}: labels updated"),
        );
        tracing::info!(
            subsys = "endpoint",
            endpointID = id,
            oldIdentity = old_identity,
            identity,
            "Endpoint identity changed"
        );
        drop(table);
        self.deps.identities.release(&old_labels);
        self.bump();
        Ok(true)
    }

    /// Brings the kernel and the state dir to an endpoint's new labels
    /// and identity.
    fn apply_identity(&self, ep: &mut Endpoint) -> Result<(), EndpointError> {
        if self.deps.policies.synced() {
            let snapshot = self.deps.policies.snapshot();
            ep.policy = self
                .write_policy(ep.id, &ep.labels, &snapshot)
                .map_err(failed("realizing policy"))?;
        }
        self.write_identity_entries(ep)?;
        state::write(&self.state_dir, ep, self.template.as_deref())
            .map_err(|e| EndpointError::Failed(format!("writing endpoint state: {e}")))
    }

    /// Removes an endpoint's traces. `holds_identity` is false for a
    /// restored endpoint that never took its identity reference in this run:
    /// releasing it would drop another endpoint's reference.
    fn teardown(&self, ep: &Endpoint, holds_identity: bool) {
        self.unrealize(ep);
        self.release_ip(ep);
        if holds_identity && !ep.is_host() {
            self.deps.identities.release(&ep.labels);
        }
        if let Err(e) = state::remove(&self.state_dir, ep.id) {
            tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to remove endpoint state");
        }
    }

    /// Brings every local endpoint's policy map up to the policies in
    /// force; returns how many endpoints were regenerated. Until the
    /// desired state is all known, maps are left as they are.
    pub fn regenerate(&self, reason: &str) -> usize {
        let policies = &self.deps.policies;
        if !policies.synced() {
            tracing::debug!(
                subsys = "policy",
                reason,
                "Waiting for the initial policy and identity lists"
            );
            return 0;
        }
        let t = std::time::Instant::now();
        policies.sync_cidrs(&policies.rules().0);
        let snapshot = policies.snapshot();
        let mut table = self.table();
        let mut n = 0;
        for ep in table.values_mut() {
            match self.write_policy(ep.id, &ep.labels, &snapshot) {
                Ok(r) => {
                    ep.policy = r;
                    n += 1;
                    ep.log.ok(
                        ep.state,
                        format!("Successfully regenerated endpoint policy (reason: {reason})"),
                    );
                }
                Err(e) => {
                    ep.log
                        .failed(ep.state, format!("Policy regeneration failed: {e}"));
                    tracing::warn!(subsys = "policy", endpointID = ep.id, error = %e, "Unable to regenerate endpoint policy")
                }
            }
        }
        tracing::info!(subsys = "policy", reason, endpoints = n, revision = snapshot.revision, duration = ?t.elapsed(), "Policy regenerated");
        n
    }

    /// Computes endpoint `id`'s policy and writes its map.
    fn write_policy(
        &self,
        id: u16,
        labels: &[String],
        snapshot: &crate::policies::Snapshot,
    ) -> Result<Realized, crate::policies::PolicyError> {
        let resolved = if super::is_host(labels) {
            snapshot.resolve_host()
        } else {
            snapshot.resolve(labels)
        };
        self.deps
            .datapath
            .write_policy(id, &resolved.state)
            .map_err(|source| crate::policies::PolicyError::PolicyMap { id, source })?;
        Ok(Realized {
            ingress: resolved.ingress_enforced,
            egress: resolved.egress_enforced,
            revision: snapshot.revision,
        })
    }

    /// Makes the policy map of the endpoint ID the next pod will get ahead
    /// of time: registering it waits for an RCU grace period (a map-in-map
    /// update), which would otherwise be most of a pod's ADD.
    pub fn prepare_next(&self) {
        if let Some(id) = self.free_id() {
            self.deps.datapath.prepare_policy(id);
        }
    }

    /// Creates Cilium's host endpoint for `ifname` (cilium_host) unless a
    /// restored one exists; returns its ID. It has identity reserved:host
    /// and no address of its own, and owns only its policy map: the
    /// node's programs are the daemon's.
    pub fn ensure_host(&self, ifname: &str, mac: &str) -> Result<u16, EndpointError> {
        let mut table = self.table();
        if let Some(ep) = table.values().find(|e| e.is_host()) {
            return Ok(ep.id);
        }
        let ifindex =
            self.deps.datapath.ifindex(ifname).ok_or_else(|| {
                EndpointError::Invalid(format!("interface {ifname} does not exist"))
            })?;
        let id =
            free_id(&table).ok_or_else(|| EndpointError::Failed("no free endpoint ID".into()))?;
        let mut ep = Endpoint {
            id,
            container_id: String::new(),
            container_interface_name: String::new(),
            ifname: ifname.to_owned(),
            ifindex,
            mac: mac.to_owned(),
            host_mac: mac.to_owned(),
            ipv4: None,
            ipv6: None,
            k8s_namespace: String::new(),
            k8s_pod_name: String::new(),
            k8s_uid: String::new(),
            labels: vec![super::HOST_LABEL.to_owned()],
            identity: abi::identity::HOST,
            external_ipam: true,
            state: EndpointState::WaitingForIdentity,
            policy: Default::default(),
            log: Default::default(),
        };
        self.realize(&mut ep, false, false)?;
        if let Err(e) = state::write(&self.state_dir, &ep, self.template.as_deref()) {
            self.unrealize(&ep);
            return Err(EndpointError::Failed(format!(
                "writing endpoint state: {e}"
            )));
        }
        tracing::info!(
            subsys = "endpoint",
            endpointID = id,
            "Host endpoint created"
        );
        table.insert(id, ep);
        drop(table);
        self.bump();
        Ok(id)
    }

    /// Gives the host endpoint `labels` (reserved:host and its node's
    /// labels, as 1.16 shows them). Its identity stays reserved:host, so
    /// nothing in the kernel changes: only its state and what the API
    /// lists. Returns whether anything changed.
    pub fn set_host_labels(&self, labels: Vec<String>) -> Result<bool, EndpointError> {
        if !super::is_host(&labels) {
            return Err(EndpointError::Invalid(format!(
                "host endpoint labels {labels:?} lack {}",
                super::HOST_LABEL
            )));
        }
        let mut table = self.table();
        let Some(ep) = table.values_mut().find(|e| e.is_host()) else {
            return Err(EndpointError::NotFound);
        };
        if ep.labels == labels {
            return Ok(false);
        }
        let old = std::mem::replace(&mut ep.labels, labels);
        if let Err(e) = state::write(&self.state_dir, ep, self.template.as_deref()) {
            ep.labels = old;
            return Err(EndpointError::Failed(format!(
                "writing endpoint state: {e}"
            )));
        }
        ep.log.ok(ep.state, "Node labels updated".to_owned());
        tracing::info!(subsys = "endpoint", endpointID = ep.id, labels = ?ep.labels, "Host endpoint labels updated");
        drop(table);
        self.bump();
        Ok(true)
    }

    /// The host endpoint's policy map: allow-all (see `Snapshot::resolve_host`).
    fn realize_host(&self, ep: &mut Endpoint) -> Result<(), EndpointError> {
        let snapshot = self.deps.policies.snapshot();
        ep.policy = self
            .write_policy(ep.id, &ep.labels, &snapshot)
            .map_err(failed("realizing policy"))?;
        ep.state = EndpointState::Ready;
        Ok(())
    }

    /// Takes back the endpoints a previous run left in the state dir. An
    /// endpoint whose interface is gone (its pod was deleted while the agent
    /// was down) is cleaned up instead.
    pub fn restore(&self) -> (usize, usize) {
        let (mut restored, mut dropped) = (0, 0);
        let mut table = self.table();
        for found in state::scan(&self.state_dir) {
            let mut ep = match found {
                Ok(ep) => ep,
                Err(e) => {
                    tracing::warn!(subsys = "endpoint", error = %e, "Unable to restore endpoint, skipping");
                    continue;
                }
            };
            let Some(ifindex) = self.deps.datapath.ifindex(&ep.ifname) else {
                tracing::info!(subsys = "endpoint", endpointID = ep.id, interface = %ep.ifname, "Interface is gone, removing endpoint");
                self.teardown(&ep, false);
                dropped += 1;
                continue;
            };
            ep.ifindex = ifindex;
            let claimed = self.claim_ip(&ep);
            let holds_identity = claimed.is_ok();
            if holds_identity && !ep.is_host() {
                ep.identity = self.deps.identities.adopt(&ep.labels, ep.identity);
            }
            match claimed.and_then(|()| self.realize(&mut ep, false, true)) {
                Ok(()) => {
                    tracing::info!(subsys = "endpoint", endpointID = ep.id, ipv4 = %shown(ep.ipv4), ipv6 = %shown(ep.ipv6), "Restored endpoint");
                    // this run's template (the last run's may be gone)
                    if let Some(template) = &self.template {
                        if let Err(e) = state::refresh_template(&self.state_dir, ep.id, template) {
                            tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to write endpoint state");
                        }
                    }
                    table.insert(ep.id, ep);
                    restored += 1;
                }
                Err(e) => {
                    tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to restore endpoint, removing it");
                    self.teardown(&ep, holds_identity);
                    dropped += 1;
                }
            }
        }
        drop(table);
        self.bump();
        (restored, dropped)
    }

    /// Claims the endpoint's address from IPAM (unless it came from elsewhere).
    fn claim_ip(&self, ep: &Endpoint) -> Result<(), EndpointError> {
        if ep.external_ipam {
            return Ok(());
        }
        let owner = ep.ipam_owner();
        let exists = |e: crate::ipam::IpamError| EndpointError::Exists(e.to_string());
        if let (Some(ip), Some(ipam)) = (ep.ipv4, &self.deps.ipam) {
            ipam.lock()
                .expect("ipam lock")
                .claim(ip, &owner)
                .map_err(exists)?;
        }
        if let (Some(ip), Some(ipam6)) = (ep.ipv6, &self.deps.ipam6) {
            ipam6
                .lock()
                .expect("ipam lock")
                .claim(ip, &owner)
                .map_err(exists)?;
        }
        Ok(())
    }

    fn release_ip(&self, ep: &Endpoint) {
        if ep.external_ipam {
            return;
        }
        let mut released = Ok(());
        if let (Some(ip), Some(ipam)) = (ep.ipv4, &self.deps.ipam) {
            released = ipam.lock().expect("ipam lock").release(ip).map(drop);
        }
        if let (Some(ip), Some(ipam6)) = (ep.ipv6, &self.deps.ipam6) {
            released = released.and(ipam6.lock().expect("ipam lock").release(ip).map(drop));
        }
        if let Err(e) = released {
            tracing::warn!(subsys = "endpoint", endpointID = ep.id, error = %e, "Unable to release endpoint IP");
        }
    }

    /// Attaches the programs and writes the endpoint into the maps.
    ///
    /// A new endpoint may be attached in two steps (see
    /// [`EndpointDatapath::attaches_in_two_steps`]): creating a tcx link
    /// waits for an RCU grace period (10-25 ms here), which would otherwise
    /// be most of a pod's ADD time; [`Self::finish_attach`] does the rest.
    fn realize(
        &self,
        ep: &mut Endpoint,
        quick: bool,
        restoring: bool,
    ) -> Result<(), EndpointError> {
        ep.state = EndpointState::Regenerating;
        let reason = if restoring {
            "restoring"
        } else {
            "endpoint created"
        };
        ep.log
            .ok(ep.state, format!("Regenerating endpoint: {reason}"));
        let result = self.realize_steps(ep, quick, restoring);
        match &result {
            Ok(()) => ep
                .log
                .ok(ep.state, "Successfully regenerated endpoint program"),
            Err(e) => {
                ep.state = EndpointState::NotReady;
                ep.log
                    .failed(ep.state, format!("Endpoint regeneration failed: {e}"))
            }
        }
        result
    }

    fn realize_steps(
        &self,
        ep: &mut Endpoint,
        quick: bool,
        restoring: bool,
    ) -> Result<(), EndpointError> {
        if ep.is_host() {
            return self.realize_host(ep);
        }
        let dp = &self.deps.datapath;
        dp.attach(ep.id, &ep.ifname, quick)
            .map_err(failed("attaching programs"))?;
        // its policy map before the datapath can see the endpoint; a restored
        // endpoint keeps the map it has until the desired state is all known
        if !restoring || self.deps.policies.synced() {
            let snapshot = self.deps.policies.snapshot();
            ep.policy = self
                .write_policy(ep.id, &ep.labels, &snapshot)
                .map_err(failed("realizing policy"))?;
        }
        dp.install_policy_program(ep.id)
            .map_err(failed("installing the endpoint's ingress program"))?;
        self.write_identity_entries(ep)?;
        for (ip, _) in ep.addresses() {
            self.deps
                .events
                .name_pod(ip, &ep.k8s_namespace, &ep.k8s_pod_name);
        }
        ep.state = EndpointState::Ready;
        Ok(())
    }

    /// The entries that carry an endpoint's identity: its cilium_lxc
    /// entry, its ipcache entry and what the cluster is told.
    fn write_identity_entries(&self, ep: &Endpoint) -> Result<(), EndpointError> {
        if ep.is_host() {
            // the node's addresses carry reserved:host already (hostips)
            return Ok(());
        }
        let info = EndpointInfo::pod(
            ep.ifindex,
            ep.id,
            parse_mac(&ep.mac).unwrap_or_default(),
            parse_mac(&ep.host_mac).unwrap_or_default(),
            ep.identity,
        );
        for (ip, len) in ep.addresses() {
            self.deps
                .datapath
                .write_endpoint(ip, &info)
                .map_err(failed("writing cilium_lxc"))?;
            self.deps
                .ipcache
                .upsert(ip, len, Entry::new(ep.identity, Source::Local))
                .map_err(failed("writing cilium_ipcache"))?;
        }
        self.deps.publisher.publish(ep);
        Ok(())
    }

    /// Best-effort inverse of `realize`.
    fn unrealize(&self, ep: &Endpoint) {
        let dp = &self.deps.datapath;
        if ep.is_host() {
            // cilium_host's programs are the daemon's, not the endpoint's
            dp.remove_policy(ep.id);
            return;
        }
        for (ip, len) in ep.addresses() {
            dp.remove_endpoint(ip);
            let _ = self.deps.ipcache.remove(ip, len, Source::Local);
            self.deps.publisher.withdraw(ip);
            self.deps.events.forget_pod(ip);
        }
        dp.remove_policy(ep.id);
        dp.detach(ep.id);
    }

    /// Second step of a two-step attach: moves endpoint `id` onto its
    /// final link, unless it was deleted meanwhile.
    pub fn finish_attach(&self, id: u16, ifname: &str) {
        let dp = &self.deps.datapath;
        if let Err(e) = dp.attach(id, ifname, false) {
            tracing::warn!(subsys = "endpoint", endpointID = id, error = %e, "Unable to move endpoint to tcx, it stays on tc");
            return;
        }
        let table = self.table();
        if table.get(&id).is_none_or(|e| e.ifname != ifname) {
            dp.detach(id);
        }
    }
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

/// A request's address of one family: None when empty; refused when
/// malformed or of a family the node does not run.
fn address<A: std::str::FromStr>(
    s: &str,
    field: &str,
    enabled: bool,
) -> Result<Option<A>, EndpointError> {
    let family = if field == "ipv4" { "IPv4" } else { "IPv6" };
    match s {
        "" => Ok(None),
        _ if !enabled => Err(EndpointError::Invalid(format!(
            "addressing.{field} {s:?} given, but {family} is not enabled (enable-{field})"
        ))),
        s => s.parse().map(Some).map_err(|_| {
            EndpointError::Invalid(format!(
                "addressing.{field} {s:?} is not an {family} address"
            ))
        }),
    }
}

/// An optional address as logs show it: empty when absent.
fn shown<T: std::fmt::Display>(ip: Option<T>) -> String {
    ip.map(|ip| ip.to_string()).unwrap_or_default()
}

fn free_id(table: &BTreeMap<u16, Endpoint>) -> Option<u16> {
    (MIN_ID..=MAX_ID).find(|id| !table.contains_key(id))
}

/// Validates a change request into an endpoint (not yet realized),
/// refusing one that clashes with an endpoint of `table`.
fn from_request(
    table: &BTreeMap<u16, Endpoint>,
    dp: &dyn EndpointDatapath,
    families: Families,
    req: &EndpointChangeRequest,
) -> Result<Endpoint, EndpointError> {
    let bad = |m: String| EndpointError::Invalid(m);
    if let Err(e) = req.state.parse::<EndpointState>() {
        return Err(bad(e.to_string()));
    }
    if req.interface_name.is_empty() {
        return Err(bad("interface-name is required".into()));
    }
    let ifindex = dp
        .ifindex(&req.interface_name)
        .ok_or_else(|| bad(format!("interface {} does not exist", req.interface_name)))?;
    if req.interface_index != 0 && req.interface_index != i64::from(ifindex) {
        return Err(bad(format!(
            "interface-index {} does not match interface {} (index {ifindex})",
            req.interface_index, req.interface_name
        )));
    }
    let addressing = req.addressing.clone().unwrap_or_default();
    let ipv4 = address::<Ipv4Addr>(&addressing.ipv4, "ipv4", families.ipv4)?;
    let ipv6 = address::<Ipv6Addr>(&addressing.ipv6, "ipv6", families.ipv6)?;
    // the address of the node's first family is what a pod is known by
    if families.ipv4 && ipv4.is_none() {
        return Err(bad("addressing.ipv4 is required".into()));
    }
    if ipv4.is_none() && ipv6.is_none() {
        return Err(bad(
            "addressing.ipv6 is required (IPv4 is not enabled)".into()
        ));
    }
    for (field, value) in [("mac", &req.mac), ("host-mac", &req.host_mac)] {
        if parse_mac(value).is_none() {
            return Err(bad(format!("{field} {value:?} is not a MAC address")));
        }
    }
    let id = match req.id {
        0 => free_id(table).ok_or_else(|| EndpointError::Failed("no free endpoint ID".into()))?,
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
        ipv6,
        k8s_namespace: req.k8s_namespace.clone(),
        k8s_pod_name: req.k8s_pod_name.clone(),
        k8s_uid: req.k8s_uid.clone(),
        labels: labels_of(req),
        identity: 0,
        external_ipam: req
            .datapath_configuration
            .as_ref()
            .is_some_and(|c| c.external_ipam),
        state: EndpointState::WaitingForIdentity,
        policy: Default::default(),
        log: Default::default(),
    };
    for other in table.values() {
        let clash = if other.id == ep.id {
            Some(format!("endpoint ID {} already exists", ep.id))
        } else if let Some(ip) = ep.ipv4.filter(|ip| other.ipv4 == Some(*ip)) {
            Some(format!("IP {ip} is already used by endpoint {}", other.id))
        } else if let Some(ip) = ep.ipv6.filter(|ip| other.ipv6 == Some(*ip)) {
            Some(format!("IP {ip} is already used by endpoint {}", other.id))
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
