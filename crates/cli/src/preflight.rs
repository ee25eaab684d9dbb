//! `cilium preflight`: Cilium's upgrade helpers. `validate-cnp` reads
//! every CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy in the
//! cluster and checks each as the agent would take it; `migrate-identity`
//! copies kvstore identities into CiliumIdentities; `fqdn-poller` writes
//! the DNS pre-cache of the agent's toFQDNs rules. Messages go to stderr
//! in the logfmt Cilium's logger writes.

use crate::kvstore::StoreFlags;
use crate::Ctx;
use k8s::kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::Value;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Prepare for DNS Polling upgrades to cilium 1.4
    #[command(name = "fqdn-poller")]
    FqdnPoller {
        /// The path to write serialized ToFQDNs pre-cache information. stdout is the default
        #[arg(long = "tofqdns-pre-cache", default_value = "")]
        pre_cache: String,
        /// TTL, in seconds, to set on generated ToFQDNs pre-cache information
        #[arg(long = "tofqdns-pre-cache-ttl", default_value_t = 604800)]
        ttl: i64,
    },
    /// Migrate KVStore-backed identities to kubernetes CRD-backed identities
    #[command(name = "migrate-identity")]
    MigrateIdentity {
        #[command(flatten)]
        store: StoreFlags,
        #[command(flatten)]
        k8s: K8sFlags,
    },
    /// Validate Cilium Network Policies deployed in the cluster
    #[command(name = "validate-cnp")]
    ValidateCnp {
        #[command(flatten)]
        k8s: K8sFlags,
    },
}

/// The API server, as the agent's `k8s-*` options name it.
#[derive(clap::Args)]
pub struct K8sFlags {
    /// Kubernetes API server URL
    #[arg(long = "k8s-api-server")]
    api_server: Option<String>,
    /// Absolute path of the kubernetes kubeconfig file
    #[arg(long = "k8s-kubeconfig-path")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Enable the k8s clientset
    #[arg(long = "enable-k8s", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    enable: bool,
    /// Queries per second limit for the K8s client
    #[arg(long = "k8s-client-qps", default_value_t = 0.0)]
    qps: f32,
    /// Burst value allowed for the K8s client
    #[arg(long = "k8s-client-burst", default_value_t = 0)]
    burst: u32,
}

impl K8sFlags {
    async fn client(&self) -> anyhow::Result<k8s::kube::Client> {
        const UNCONFIGURED: &str = "Kubernetes client not configured. Please provide configuration via --k8s-api-server or --k8s-kubeconfig-path";
        if !self.enable {
            anyhow::bail!("failed to start: {UNCONFIGURED}");
        }
        let opts = k8s::ClientOptions {
            kubeconfig: self.kubeconfig.clone(),
            api_server: self.api_server.clone(),
            qps: self.qps,
            burst: self.burst,
        };
        match k8s::connect(&opts).await {
            Ok(c) => Ok(c),
            Err(k8s::ConnectError::NoConfig(_)) => anyhow::bail!("failed to start: {UNCONFIGURED}"),
            Err(e) => anyhow::bail!("failed to start: {e}"),
        }
    }
}

/// One logfmt line on stderr, as Cilium's logger writes it.
fn log(level: &str, msg: &str, fields: &[(&str, &str)]) {
    let time = api::timefmt::rfc3339(std::time::SystemTime::now());
    let mut line = format!("time=\"{time}\" level={level} msg={msg:?}");
    for (k, v) in fields {
        line.push_str(&format!(" {k}={v:?}"));
    }
    eprintln!("{line} subsys=preflight");
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::FqdnPoller { pre_cache, ttl } => fqdn_poller(ctx, pre_cache, *ttl),
        Command::ValidateCnp { k8s } => crate::block_on(validate_cnp(k8s)),
        Command::MigrateIdentity { store, k8s } => {
            crate::block_on(migrate_identity(ctx, store, k8s))
        }
    }
}

/// Every rule of the agent's policy (its documents: rule lists, or
/// policies with `spec`/`specs`).
fn rules(joined: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in joined.split("---\n") {
        let Ok(tree) = serde_json::from_str::<Value>(doc) else {
            continue;
        };
        match tree {
            Value::Array(items) => out.extend(items),
            obj => {
                out.extend(obj.get("spec").cloned());
                out.extend(obj["specs"].as_array().cloned().unwrap_or_default());
            }
        }
    }
    out
}

/// `fqdn-poller`: each toFQDNs `matchName` with the addresses of the
/// toCIDRSet beside it, as a DNS cache to seed the proxy with.
fn fqdn_poller(ctx: &Ctx, path: &str, ttl: i64) -> anyhow::Result<ExitCode> {
    let fail = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!("Cannot extract DNS data from local cilium-agent: {e}")
    };
    let policy: api::models::Policy = ctx
        .client()?
        .get_json("/policy", &[])
        .map_err(|e| fail(&e))?;
    let mut names: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for rule in rules(&policy.policy) {
        for egress in rule["egress"].as_array().into_iter().flatten() {
            let cidrs: Vec<String> = egress["toCIDRSet"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["cidr"].as_str())
                .filter_map(|c| c.split('/').next().map(str::to_owned))
                .collect();
            if cidrs.is_empty() {
                continue;
            }
            for fqdn in egress["toFQDNs"].as_array().into_iter().flatten() {
                if let Some(name) = fqdn["matchName"].as_str() {
                    let mut name = name.to_lowercase();
                    if !name.ends_with('.') {
                        name.push('.');
                    }
                    names.entry(name).or_default().extend(cidrs.iter().cloned());
                }
            }
        }
    }
    let now = std::time::SystemTime::now();
    let expires = now + std::time::Duration::from_secs(ttl.max(0) as u64);
    let cache: Vec<Value> = names
        .into_iter()
        .map(|(fqdn, ips)| {
            serde_json::json!({
                "fqdn": fqdn,
                "lookup-time": api::timefmt::rfc3339_millis(now),
                "expiration-time": api::timefmt::rfc3339_millis(expires),
                "ttl": ttl,
                "ips": ips,
            })
        })
        .collect();
    let text = serde_json::to_string(&cache)?;
    if path.is_empty() {
        print!("{text}");
    } else {
        std::fs::write(path, text).map_err(|e| {
            anyhow::anyhow!("Cannot open target destination for DNS pre-cache data: {e}")
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `validate-cnp`: each CNP and CCNP parsed as the agent parses it.
async fn validate_cnp(flags: &K8sFlags) -> anyhow::Result<ExitCode> {
    let client = flags.client().await?;
    let mut invalid = None;
    for (resource, kind) in [
        (k8s::cilium::network_policies(), "CiliumNetworkPolicy"),
        (
            k8s::cilium::clusterwide_network_policies(),
            "CiliumClusterwideNetworkPolicy",
        ),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = match api.list(&ListParams::default().limit(25)).await {
            Ok(l) => l,
            Err(k8s::kube::Error::Api(e)) if e.code == 404 => {
                log("info", &format!("{kind} CRD not found, skipping"), &[]);
                continue;
            }
            Err(e) => anyhow::bail!("failed to start: listing {kind}s: {e}"),
        };
        let mut token = list.metadata.continue_.clone();
        let mut items = list.items;
        while let Some(t) = token.filter(|t| !t.is_empty()) {
            let next = api
                .list(&ListParams::default().limit(25).continue_token(&t))
                .await?;
            token = next.metadata.continue_.clone();
            items.extend(next.items);
        }
        for obj in items {
            let name = match &obj.metadata.namespace {
                Some(ns) => format!("{ns}/{}", obj.metadata.name.clone().unwrap_or_default()),
                None => obj.metadata.name.clone().unwrap_or_default(),
            };
            let mut doc = obj.data.clone();
            doc["apiVersion"] = "cilium.io/v2".into();
            doc["kind"] = kind.into();
            doc["metadata"] = serde_json::to_value(&obj.metadata)?;
            match policy::parse::parse_documents(&doc.to_string()) {
                Ok(_) => log("info", "Validation OK!", &[(kind, &name)]),
                Err(e) => {
                    let e = e.to_string();
                    log(
                        "error",
                        "Unexpected validation error",
                        &[(kind, &name), ("error", &e)],
                    );
                    invalid.get_or_insert(kind);
                }
            }
        }
    }
    if let Some(kind) = invalid {
        anyhow::bail!("Found invalid {kind}");
    }
    log("info", "All CCNPs and CNPs valid!", &[]);
    Ok(ExitCode::SUCCESS)
}

/// The labels of a kvstore identity key (`k8s:a=b;k8s:c;`).
fn key_labels(key: &str) -> Vec<String> {
    key.split(';')
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_suffix('=').unwrap_or(l).to_owned())
        .collect()
}

/// `migrate-identity`: each kvstore identity created as a CiliumIdentity
/// with the same ID; one whose ID the cluster already gave other labels
/// is reported and left (its endpoints keep the kvstore's until then).
async fn migrate_identity(
    ctx: &Ctx,
    store: &StoreFlags,
    flags: &K8sFlags,
) -> anyhow::Result<ExitCode> {
    log("info", "Setting up kvstore client", &[]);
    let etcd = crate::kvstore::connect(ctx, store).await?;
    let client = flags.client().await?;
    let api: Api<DynamicObject> = Api::all_with(client, &k8s::cilium::identities());
    let prefix = format!("{}/", kvstore::keys::IDENTITY_IDS);
    let entries = etcd
        .entries(&prefix)
        .await
        .map_err(|e| anyhow::anyhow!("Unable to list identities in kvstore: {e}"))?;
    let mut failed = 0;
    for entry in entries {
        let Some(id) = entry
            .key
            .strip_prefix(&prefix)
            .and_then(|i| i.parse::<u32>().ok())
        else {
            continue;
        };
        let key = String::from_utf8_lossy(&entry.value).into_owned();
        let labels = key_labels(&key);
        let id_text = id.to_string();
        let fields = [
            ("identity", id_text.as_str()),
            ("identityKey", key.as_str()),
        ];
        let obj = k8s::cilium::identity_object(id, &labels);
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => log("info", "Migrated identity", &fields),
            Err(k8s::kube::Error::Api(e)) if e.code == 409 => {
                let existing = api.get(&id_text).await?;
                let mut have = k8s::cilium::identity_labels(&existing).unwrap_or_default();
                let mut want = labels.clone();
                have.sort();
                want.sort();
                if have == want {
                    log(
                        "info",
                        "ID was already allocated to this key. It is already migrated",
                        &fields,
                    );
                } else {
                    log(
                        "warning",
                        "ID is allocated to a different key in CRD; not migrated",
                        &fields,
                    );
                    failed += 1;
                }
            }
            Err(e) => {
                let e = e.to_string();
                log(
                    "error",
                    "Cannot allocate CRD ID",
                    &[fields[0], fields[1], ("error", &e)],
                );
                failed += 1;
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
