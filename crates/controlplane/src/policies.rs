//! The policy repository and its realization in every local endpoint's
//! policy map. Policies are documents (a CiliumNetworkPolicy, a
//! NetworkPolicy, or one bare rule) identified by their rules' labels; an
//! import replaces the documents with the same labels. With a kvstore they
//! are shared under `cilium/state/policies/v1/<cluster>/`, otherwise kept
//! in `<state dir>/policies.json`.

use crate::events::AgentNotify;
use crate::identity::Identities;
use crate::ipcache::IpCache;
use crate::ports::{Events, KernelError};
use crate::regeneration::Regeneration;
use policy::{Document, Enforcement, Labels};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use watch::Source;

/// Why a policy could not be taken in, kept or enforced.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Parse(#[from] policy::ParseError),
    #[error("expected one policy, found {0}")]
    NotOne(usize),
    #[error("{0}")]
    Stored(#[from] serde_json::Error),
    #[error("saving policies to {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing the policy map of endpoint {id}: {source}")]
    PolicyMap { id: u16, source: KernelError },
    #[error("policy is {done} here but {not} the cluster: {source}")]
    NotShared {
        done: &'static str,
        not: &'static str,
        source: kvstore::Error,
    },
}

/// A document as stored and shared.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stored {
    pub labels: Vec<String>,
    pub text: String,
}

impl Stored {
    pub fn of(doc: &Document) -> Self {
        Self {
            labels: label_strings(doc),
            text: doc.text.clone(),
        }
    }

    /// The one document `text` holds.
    fn parse(&self) -> Result<Document, PolicyError> {
        let mut docs = policy::parse_documents(&self.text)?;
        if docs.len() != 1 {
            return Err(PolicyError::NotOne(docs.len()));
        }
        Ok(docs.remove(0))
    }

    /// The kvstore key: one per label set.
    pub fn key(&self, cluster: &str) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.labels.join(";").as_bytes());
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        format!("{POLICIES_PREFIX}/{cluster}/{hex}")
    }
}

/// What identifies a document: its labels as `source:key=value` strings.
fn label_strings(doc: &Document) -> Vec<String> {
    doc.labels().iter().map(|l| l.to_string()).collect()
}

pub const POLICIES_PREFIX: &str = "cilium/state/policies/v1";

/// What an endpoint's policy map was last made from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Realized {
    pub ingress: bool,
    pub egress: bool,
    pub revision: u64,
}

impl Realized {
    /// Cilium's `policy-enabled`: none, ingress, egress or both.
    pub fn policy_enabled(&self) -> &'static str {
        match (self.ingress, self.egress) {
            (true, true) => "both",
            (true, false) => "ingress",
            (false, true) => "egress",
            (false, false) => "none",
        }
    }
}

#[derive(Default)]
struct Repo {
    docs: BTreeMap<Vec<String>, Document>,
    revision: u64,
    /// Every document's rules in one list, made once per revision (the
    /// one document's own list when there is one): each regeneration,
    /// trace and scrape reads it.
    flat: Option<Arc<Vec<policy::Rule>>>,
}

impl Repo {
    /// The documents changed: a new revision, and the list is remade.
    /// The old list and what the change `replaced` are freed aside
    /// ([`discard`]).
    fn changed<T: Send + 'static>(&mut self, replaced: T) {
        self.revision += 1;
        discard((replaced, self.flat.take()));
    }
}

/// Where the documents in force are kept for a restart without a
/// kvstore, and the revision last written there. A change is saved after
/// it is on its way to enforcement, not before; each save writes the
/// documents in force when it runs, and skips the write when a save
/// already wrote that revision.
struct StateFile {
    path: PathBuf,
    written: Mutex<u64>,
}

/// Frees what a change replaced on a thread of its own: a thousand rules
/// take milliseconds to free, which enforcing the new ones need not wait
/// for.
fn discard<T: Send + 'static>(garbage: T) {
    let _ = std::thread::Builder::new()
        .name("policy-free".into())
        .spawn(move || drop(garbage));
}

/// Where policies are shared with the other nodes.
pub struct Shared {
    pub kv: kvstore::Kvstore,
    pub cluster: String,
}

/// The handles policy works with.
pub struct Deps {
    pub identities: Arc<Identities>,
    pub ipcache: Arc<IpCache>,
    pub regeneration: Regeneration,
    pub events: Arc<dyn Events>,
    /// None without a kvstore.
    pub shared: Option<Shared>,
    /// Whether the desired policies come from the cluster (the kvstore or
    /// Kubernetes), which must be listed before maps may change.
    pub from_cluster: bool,
    /// An IPv6-only node: IPv6's world is the plain world identity (2),
    /// as 1.16 has it on a single-stack node, not world-ipv6 (10).
    pub ipv6_only: bool,
}

/// Where a followed policy document lives, which names its store key.
#[derive(Clone, Debug)]
pub enum Origin {
    /// `cilium/state/policies/v1/<cluster>/<digest of the labels>`.
    Kvstore { cluster: String },
    /// An object of this kind (`CiliumNetworkPolicy`, ...): `namespace/name`
    /// or `name`, as the Kubernetes source keys it.
    Kubernetes { kind: &'static str },
}

/// The value of label `k8s:<POLICY_LABEL_PREFIX>.<key>` among `labels`.
fn policy_label<'a>(labels: &'a [String], key: &str) -> Option<&'a str> {
    let prefix = format!("k8s:io.cilium.k8s.policy.{key}=");
    labels.iter().find_map(|l| l.strip_prefix(prefix.as_str()))
}

impl Origin {
    /// The store key of a document from here; None when it is not.
    pub fn key(&self, s: &Stored) -> Option<String> {
        match self {
            Origin::Kvstore { cluster } => Some(s.key(cluster)),
            Origin::Kubernetes { kind } => {
                if policy_label(&s.labels, "derived-from") != Some(kind) {
                    return None;
                }
                let name = policy_label(&s.labels, "name")?;
                Some(match policy_label(&s.labels, "namespace") {
                    Some(ns) => format!("{ns}/{name}"),
                    None => name.to_owned(),
                })
            }
        }
    }
}

pub struct Policies {
    deps: Deps,
    /// Until the kvstore's policies and identities are all in, endpoint
    /// policy maps are left as they are: a restarted agent must not
    /// enforce half of the rules, or rules without the peers' identities,
    /// on flows the previous one let through.
    synced: std::sync::atomic::AtomicBool,
    repo: Mutex<Repo>,
    state_file: Option<StateFile>,
    mode: Mutex<Enforcement>,
    cidrs: Mutex<CidrIdentities>,
}

/// Cilium's first node-local identity: CIDR identities live above it.
const FIRST_LOCAL_IDENTITY: u32 = 1 << 24;

/// The node-local identities of the prefixes policies name; each prefix
/// is in the ipcache with its identity, so traffic to or from it is told
/// apart from the rest of the world.
#[derive(Default)]
struct CidrIdentities {
    by_prefix: BTreeMap<policy::Cidr, u32>,
}

impl CidrIdentities {
    fn identities(&self) -> Vec<policy::Identity> {
        self.by_prefix
            .iter()
            .map(|(cidr, id)| {
                // an IPv6 prefix is outside the cluster over IPv6, as on
                // a 1.16 dual-stack node
                let world = match cidr.is_ipv6() {
                    false => "reserved:world",
                    true => "reserved:world-ipv6",
                };
                let label = format!("cidr:{}", cidr.label_key());
                policy::Identity {
                    id: *id,
                    labels: Labels::parse([label.as_str(), world]),
                }
            })
            .collect()
    }
}

/// The prefixes rules name (CIDR peers and their exceptions), but not
/// 0.0.0.0/0 or ::/0: those are the world identities themselves.
fn prefixes(rules: &[policy::Rule]) -> std::collections::BTreeSet<policy::Cidr> {
    let mut out = std::collections::BTreeSet::new();
    for r in rules {
        let lists = [&r.ingress, &r.ingress_deny, &r.egress, &r.egress_deny];
        for pr in lists.into_iter().flatten().flatten() {
            for peer in &pr.peers {
                if let policy::Peer::Cidr { cidr, except } = peer {
                    out.extend(std::iter::once(cidr).chain(except).filter(|c| c.len > 0));
                }
            }
        }
    }
    out
}

impl Policies {
    /// Without a kvstore the policies are this node's own and all known
    /// at once; with one, they are once its initial list is in.
    pub fn new(deps: Deps, mode: Enforcement, state_file: Option<PathBuf>) -> Self {
        Self {
            synced: std::sync::atomic::AtomicBool::new(!deps.from_cluster),
            deps,
            repo: Mutex::new(Repo {
                revision: 1,
                ..Default::default()
            }),
            state_file: state_file.map(|path| StateFile {
                path,
                written: Mutex::new(0),
            }),
            mode: Mutex::new(mode),
            cidrs: Mutex::default(),
        }
    }

    /// Whether policy may be (re)computed: the desired state is all known.
    pub fn synced(&self) -> bool {
        self.synced.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Gives every prefix the rules name an identity and an ipcache entry,
    /// and takes them from prefixes no rule names any more.
    pub fn sync_cidrs(&self, rules: &[policy::Rule]) {
        use crate::ipcache::{Entry, Source};
        let ipcache = &self.deps.ipcache;
        let want = prefixes(rules);
        let mut cidrs = self.cidrs.lock().expect("cidr lock");
        let stale: Vec<policy::Cidr> = cidrs
            .by_prefix
            .keys()
            .filter(|c| !want.contains(c))
            .copied()
            .collect();
        for c in stale {
            cidrs.by_prefix.remove(&c);
            if let Err(e) = ipcache.remove(c.addr, c.len, Source::Generated) {
                tracing::warn!(subsys = "policy", cidr = %c, error = %e, "Unable to remove CIDR identity from ipcache");
            }
        }
        for c in want {
            if cidrs.by_prefix.contains_key(&c) {
                continue;
            }
            let used: std::collections::BTreeSet<u32> = cidrs.by_prefix.values().copied().collect();
            let id = (FIRST_LOCAL_IDENTITY..)
                .find(|i| !used.contains(i))
                .expect("free identity");
            match ipcache.upsert(c.addr, c.len, Entry::new(id, Source::Generated)) {
                Ok(_) => {
                    tracing::info!(subsys = "policy", cidr = %c, identity = id, "Allocated CIDR identity");
                    cidrs.by_prefix.insert(c, id);
                }
                Err(e) => {
                    tracing::warn!(subsys = "policy", cidr = %c, error = %e, "Unable to write CIDR identity to ipcache")
                }
            }
        }
    }

    /// The CIDR identities policies made.
    pub fn cidr_identities(&self) -> Vec<policy::Identity> {
        self.cidrs.lock().expect("cidr lock").identities()
    }

    pub fn set_mode(&self, mode: Enforcement) {
        *self.mode.lock().expect("mode lock") = mode;
    }

    pub fn mode(&self) -> Enforcement {
        *self.mode.lock().expect("mode lock")
    }

    /// Takes back the documents a previous run saved (no kvstore).
    pub fn restore(&self) -> usize {
        let Some(StateFile { path, .. }) = &self.state_file else {
            return 0;
        };
        let Ok(raw) = std::fs::read(path) else {
            return 0;
        };
        let stored: Vec<Stored> = match serde_json::from_slice(&raw) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(subsys = "policy", path = %path.display(), error = %e, "Ignoring corrupt policy state");
                return 0;
            }
        };
        let mut n = 0;
        let mut changed = false;
        for s in &stored {
            match self.upsert(s) {
                Ok(c) => {
                    n += 1;
                    changed |= c;
                }
                Err(e) => {
                    tracing::warn!(subsys = "policy", labels = ?s.labels, error = %e, "Unable to restore policy")
                }
            }
        }
        if let Err(e) = if changed { self.save() } else { Ok(()) } {
            tracing::warn!(subsys = "policy", error = %e, "Unable to save restored policies");
        }
        n
    }

    /// Adds `docs`, each replacing the document with its labels; returns
    /// the new revision (not saved yet).
    fn import_here(&self, docs: Vec<Document>) -> u64 {
        let mut repo = self.repo.lock().expect("policy lock");
        let mut replaced = Vec::new();
        for doc in docs {
            let key = label_strings(&doc);
            replaced.extend(repo.docs.insert(key, doc));
        }
        repo.changed(replaced);
        repo.revision
    }

    /// A document learned from the kvstore or the state file; Ok(false)
    /// when nothing changed. The caller saves.
    fn upsert(&self, stored: &Stored) -> Result<bool, PolicyError> {
        if self.holds(stored) {
            return Ok(false);
        }
        let doc = stored.parse()?;
        Ok(self.put_parsed(stored, doc))
    }

    /// [`Self::upsert`] for the watch: a thousand-rule document takes
    /// milliseconds to read, which the agent's one runtime thread must not
    /// spend (the regeneration it asks for waits on that thread to start).
    async fn upsert_off_runtime(&self, stored: Stored) -> Result<bool, PolicyError> {
        if self.holds(&stored) {
            return Ok(false);
        }
        let (stored, doc) = tokio::task::spawn_blocking(move || {
            let doc = stored.parse();
            (stored, doc)
        })
        .await
        .expect("policy parsing does not panic");
        Ok(self.put_parsed(&stored, doc?))
    }

    /// Whether `stored` is the text already in force: the echo of this
    /// node's own import, and every relist, need no second reading.
    fn holds(&self, stored: &Stored) -> bool {
        self.repo
            .lock()
            .expect("policy lock")
            .docs
            .get(&stored.labels)
            .map(|d| &d.text)
            == Some(&stored.text)
    }

    /// Puts `doc`, read from `stored`, in force; false when it was already.
    fn put_parsed(&self, stored: &Stored, doc: Document) -> bool {
        let mut repo = self.repo.lock().expect("policy lock");
        if repo.docs.get(&stored.labels) == Some(&doc) {
            return false;
        }
        let replaced = repo.docs.insert(stored.labels.clone(), doc);
        repo.changed(replaced);
        true
    }

    /// Deletes the documents whose labels include all of `labels` (every
    /// document when empty); returns them and the new revision.
    pub fn delete(&self, labels: &[String]) -> Result<(Vec<Stored>, u64), PolicyError> {
        let mut repo = self.repo.lock().expect("policy lock");
        let want = Labels::parse(labels.iter().map(String::as_str));
        let gone: Vec<Vec<String>> = repo
            .docs
            .iter()
            .filter(|(_, d)| want.iter().all(|l| d.labels().0.contains(l)))
            .map(|(k, _)| k.clone())
            .collect();
        let removed: Vec<Stored> = gone
            .iter()
            .filter_map(|k| repo.docs.remove(k))
            .map(|d| Stored::of(&d))
            .collect();
        if removed.is_empty() {
            return Ok((removed, repo.revision));
        }
        repo.changed(());
        let revision = repo.revision;
        drop(repo);
        self.save()?;
        Ok((removed, revision))
    }

    /// Drops the document `origin` keys `key`, which the cluster no
    /// longer has; true when it was here.
    pub fn forget(&self, origin: &Origin, key: &str) -> bool {
        let mut repo = self.repo.lock().expect("policy lock");
        let gone: Vec<Vec<String>> = repo
            .docs
            .iter()
            .filter(|(_, d)| origin.key(&Stored::of(d)).as_deref() == Some(key))
            .map(|(k, _)| k.clone())
            .collect();
        if gone.is_empty() {
            return false;
        }
        let removed: Vec<Document> = gone.iter().filter_map(|k| repo.docs.remove(k)).collect();
        repo.changed(removed);
        drop(repo);
        if let Err(e) = self.save() {
            tracing::warn!(subsys = "policy", error = %e, "Unable to save policies");
        }
        true
    }

    /// Documents whose labels include all of `labels`, and the revision.
    pub fn get(&self, labels: &[String]) -> (Vec<Stored>, u64) {
        let repo = self.repo.lock().expect("policy lock");
        let want = Labels::parse(labels.iter().map(String::as_str));
        let docs = repo
            .docs
            .values()
            .filter(|d| want.iter().all(|l| d.labels().0.contains(l)))
            .map(Stored::of)
            .collect();
        (docs, repo.revision)
    }

    /// Every rule in force, and the revision they make.
    pub fn rules(&self) -> (Arc<Vec<policy::Rule>>, u64) {
        let mut guard = self.repo.lock().expect("policy lock");
        let repo = &mut *guard;
        let docs = &repo.docs;
        let rules = repo.flat.get_or_insert_with(|| {
            let mut each = docs.values();
            match (each.next(), each.next()) {
                (Some(only), None) => Arc::clone(&only.rules),
                _ => Arc::new(
                    docs.values()
                        .flat_map(|d| d.rules.iter().cloned())
                        .collect(),
                ),
            }
        });
        (Arc::clone(rules), repo.revision)
    }

    pub fn revision(&self) -> u64 {
        self.repo.lock().expect("policy lock").revision
    }

    /// [`Self::save`] on a blocking thread, so the runtime's one thread
    /// goes on serving (the regeneration, the kvstore put) meanwhile.
    async fn save_off_runtime(self: &Arc<Self>) -> Result<(), PolicyError> {
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || this.save())
            .await
            .expect("saving policies does not panic")
    }

    /// Writes the documents in force to the state file, unless a save
    /// already wrote their revision.
    fn save(&self) -> Result<(), PolicyError> {
        let Some(StateFile { path, written }) = &self.state_file else {
            return Ok(());
        };
        let mut written = written.lock().expect("state file lock");
        let (revision, stored) = {
            let repo = self.repo.lock().expect("policy lock");
            if *written >= repo.revision {
                return Ok(());
            }
            let stored: Vec<Stored> = repo.docs.values().map(Stored::of).collect();
            (repo.revision, stored)
        };
        let body = serde_json::to_vec_pretty(&stored).expect("policies serialize");
        crate::statefile::replace(path, &body).map_err(|source| PolicyError::Save {
            path: path.clone(),
            source,
        })?;
        *written = revision;
        Ok(())
    }
}

impl Policies {
    /// Every identity this node knows, as policy sees them.
    pub fn identities(&self) -> Vec<policy::Identity> {
        let mut all: Vec<policy::Identity> = self
            .deps
            .identities
            .list()
            .into_iter()
            .map(|(id, labels)| policy::Identity {
                id,
                labels: Labels::parse(labels.iter().map(String::as_str)),
            })
            .collect();
        if self.deps.ipv6_only {
            // policy finds IPv6's world by its label
            all.retain(|i| i.id != abi::identity::WORLD_IPV6);
            if let Some(world) = all.iter_mut().find(|i| i.id == abi::identity::WORLD) {
                world.labels = Labels::parse(["reserved:world", "reserved:world-ipv6"]);
            }
        }
        all.extend(self.cidr_identities());
        all
    }

    /// The rules, revision and identities endpoint policy is computed from.
    pub fn snapshot(&self) -> Snapshot {
        let (rules, revision) = self.rules();
        Snapshot {
            identities: self.identities(),
            rules,
            revision,
            mode: self.mode(),
        }
    }

    /// `PUT /policy`: puts `docs` in force on this node (answering once
    /// its endpoints enforce them), then shares them with the cluster.
    pub async fn import(
        self: &Arc<Self>,
        docs: Vec<Document>,
    ) -> Result<(Vec<Stored>, u64), PolicyError> {
        let stored: Vec<Stored> = docs.iter().map(Stored::of).collect();
        let revision = self.import_here(docs);
        // shared while this node regenerates, so the other nodes work on
        // it at the same time instead of after this one
        let share = async {
            let Some(shared) = &self.deps.shared else {
                return Ok::<(), PolicyError>(());
            };
            for s in &stored {
                let body = serde_json::to_vec(s).expect("policy serializes");
                shared
                    .kv
                    .put(&s.key(&shared.cluster), &body)
                    .await
                    .map_err(|source| PolicyError::NotShared {
                        done: "in force",
                        not: "not shared with",
                        source,
                    })?;
            }
            Ok(())
        };
        // the put goes out first, then the state file is written while
        // both this node and the others enforce
        let (shared, (), saved) = tokio::join!(
            share,
            self.deps.regeneration.run("policy imported"),
            self.save_off_runtime()
        );
        saved?;
        shared?;
        tracing::info!(
            subsys = "policy",
            policies = stored.len(),
            revision,
            "Policy imported"
        );
        let labels: Vec<String> = stored.iter().flat_map(|s| s.labels.clone()).collect();
        self.announce(AgentNotify::PolicyUpdated, &labels, stored.len());
        Ok((stored, revision))
    }

    /// `DELETE /policy`: the documents whose labels include all of
    /// `labels`, here (answering once enforced) and in the cluster.
    pub async fn remove(&self, labels: &[String]) -> Result<(Vec<Stored>, u64), PolicyError> {
        let (removed, revision) = self.delete(labels)?;
        if removed.is_empty() {
            return Ok((removed, revision));
        }
        self.deps.regeneration.run("policy deleted").await;
        if let Some(shared) = &self.deps.shared {
            for s in &removed {
                shared
                    .kv
                    .delete(&s.key(&shared.cluster))
                    .await
                    .map_err(|source| PolicyError::NotShared {
                        done: "deleted",
                        not: "not in",
                        source,
                    })?;
            }
        }
        let labels: Vec<String> = removed.iter().flat_map(|s| s.labels.clone()).collect();
        self.announce(AgentNotify::PolicyDeleted, &labels, removed.len());
        Ok((removed, revision))
    }

    /// A new enforcement mode; answers once every endpoint enforces it.
    pub async fn change_mode(&self, mode: Enforcement) {
        if mode != self.mode() {
            self.set_mode(mode);
            self.deps
                .regeneration
                .run("policy enforcement changed")
                .await;
        }
    }

    /// Tells `cilium monitor` a policy changed (Cilium's PolicyUpdated /
    /// PolicyDeleted notification).
    fn announce(&self, what: AgentNotify, labels: &[String], rules: usize) {
        self.deps.events.agent(
            what,
            serde_json::json!({ "labels": labels, "revision": self.revision(), "rule_count": rules }),
        );
    }

    /// Asks for regeneration whenever the identities the rules may select
    /// change.
    pub fn follow_identities(&self, tasks: &crate::tasks::Tasks) {
        let mut changes = self.deps.identities.subscribe();
        let regeneration = self.deps.regeneration.clone();
        tasks.spawn("policy-identities", async move {
            while changes.changed().await.is_ok() {
                regeneration.request("identities changed");
            }
        });
    }

    /// Follows the documents `source` holds, keyed as `origin` keys them;
    /// returns when its first list is in. What the last run left in
    /// `<state-dir>/policies.json` from there (restored already) starts
    /// the store, so the first list deletes what is gone.
    pub fn follow(
        self: &Arc<Self>,
        name: &'static str,
        origin: Origin,
        source: impl Source<Key = String, Value = Stored> + 'static,
        tasks: &crate::tasks::Tasks,
    ) -> watch::Synced {
        let (had, _) = self.get(&[]);
        let had = had.into_iter().filter_map(|s| Some((origin.key(&s)?, s)));
        let store = watch::Store::restored(name, had);
        let listed = store.synced();
        let this = Arc::clone(self);
        let handler = move |change| {
            let this = Arc::clone(&this);
            let origin = origin.clone();
            async move { this.follow_change(&origin, change).await }
        };
        tasks.spawn("policies", store.run(source, handler));
        listed
    }

    /// Lets policy maps change once every source's first list and the
    /// cluster's identities are in, and asks for the regeneration that
    /// brings them up to date then.
    pub fn sync_after(
        self: &Arc<Self>,
        mut listed: Vec<watch::Synced>,
        tasks: &crate::tasks::Tasks,
    ) {
        listed.push(self.deps.identities.synced());
        let this = Arc::clone(self);
        tasks.spawn("policy-initial-sync", async move {
            for l in &mut listed {
                l.wait().await;
            }
            this.synced.store(true, std::sync::atomic::Ordering::SeqCst);
            tracing::info!(
                subsys = "policy",
                "Initial policies and identities received; regenerating endpoints"
            );
            this.deps.regeneration.request("initial sync");
        });
    }

    /// One change of the cluster's policies, announced and regenerated
    /// for. A document that does not parse never will: it is logged and
    /// skipped; one that could not be saved is tried again.
    pub async fn follow_change(
        self: &Arc<Self>,
        origin: &Origin,
        change: watch::Change<String, Stored>,
    ) -> Result<(), PolicyError> {
        let changed = match change {
            watch::Change::Upsert { key, new, .. } => {
                match self.upsert_off_runtime(new.clone()).await {
                    Ok(true) => {
                        // enforced first, saved while that runs
                        self.deps.regeneration.request("policy changed");
                        self.announce(AgentNotify::PolicyUpdated, &new.labels, 1);
                        self.save_off_runtime().await?;
                        return Ok(());
                    }
                    Ok(false) => false,
                    Err(e @ (PolicyError::Parse(_) | PolicyError::NotOne(_))) => {
                        tracing::warn!(subsys = "policy", key = %key, error = %e, "Ignoring policy that does not parse");
                        false
                    }
                    Err(e) => return Err(e),
                }
            }
            watch::Change::Delete { key, .. } => {
                let gone = self.forget(origin, &key);
                if gone {
                    self.announce(AgentNotify::PolicyDeleted, &[], 1);
                }
                gone
            }
            watch::Change::Synced => false,
        };
        if changed {
            self.deps.regeneration.request("policy changed");
        }
        Ok(())
    }
}

/// What one regeneration computes every endpoint's policy from.
pub struct Snapshot {
    pub rules: Arc<Vec<policy::Rule>>,
    pub revision: u64,
    pub identities: Vec<policy::Identity>,
    pub mode: Enforcement,
}

impl Snapshot {
    /// Endpoint policy for an endpoint with `labels`.
    pub fn resolve(&self, labels: &[String]) -> policy::EndpointPolicy {
        let ep_labels = Labels::parse(labels.iter().map(String::as_str));
        policy::resolve(&self.rules, &ep_labels, &self.identities, self.mode)
    }

    /// The host endpoint's policy: allow-all both ways, since host
    /// policies are not enforced (1.16 without the host firewall).
    pub fn resolve_host(&self) -> policy::EndpointPolicy {
        // no rule is consulted, so no labels are needed
        let none: [&str; 0] = [];
        policy::resolve(&[], &Labels::parse(none), &[], Enforcement::Never)
    }
}

/// The cluster's policies in the kvstore, as a source of [`Policies::follow`].
pub fn kvstore_source(
    kv: &kvstore::Kvstore,
    cluster: &str,
) -> impl Source<Key = String, Value = Stored> + 'static {
    kv.source(&format!("{POLICIES_PREFIX}/{cluster}/"))
        .decode(|_, raw| decode(raw))
}

/// A document as the kvstore holds it. Its policy text is parsed once, by
/// `Policies::upsert`, and only when it is not the text already in force
/// (the echo of this node's own import, a relist).
fn decode(raw: &[u8]) -> Result<Stored, PolicyError> {
    Ok(serde_json::from_slice(raw)?)
}
