//! Installing Cilium on the lab's real nodes as a user installs it on a
//! cluster: `kubectl apply` of deploy/kubernetes, with what this cluster
//! needs on top, each a change a user makes for theirs too:
//! - the API server's address for the agent, its config init container
//!   and the operator (`KUBERNETES_SERVICE_HOST`/`_PORT`, what Helm's
//!   `k8sServiceHost` sets): with kube-proxy replacement nothing else
//!   translates the `kubernetes` Service before the agent runs;
//! - the lab's cilium-config keys (`--set`) merged into the ConfigMap;
//! - capabilities this machine cannot grant (no CAP_SYS_RESOURCE in its
//!   bounding set) taken out of the containers that ask for them: runc
//!   refuses a container whose capabilities the machine lacks, and kubelet
//!   would retry it forever. What was taken out is printed;
//! - Hubble's certificates in the Secrets Cilium's chart names
//!   (`hubble-server-certs` for every agent, `hubble-relay-client-certs`
//!   for Relay), which a user makes with Cilium's certgen or their own CA.
//!
//! Hubble Relay (hubble-relay.yaml) is applied once cluster DNS answers:
//! it finds the agents by the hubble-peer Service's name.

use anyhow::Context;
use kubeplane::pki::HubblePki;
use serde_json::Value;
use std::net::SocketAddr;

const CILIUM: &str = include_str!("../../../deploy/kubernetes/cilium.yaml");
const OPERATOR: &str = include_str!("../../../deploy/kubernetes/cilium-operator.yaml");
const RELAY: &str = include_str!("../../../deploy/kubernetes/hubble-relay.yaml");

/// The containers that talk to the API server before the agent runs.
const API_CLIENTS: [&str; 3] = ["config", "cilium-agent", "cilium-operator"];

/// Linux capability numbers of the names the manifests use.
const CAPABILITIES: [(&str, u32); 14] = [
    ("CHOWN", 0),
    ("DAC_OVERRIDE", 1),
    ("FOWNER", 3),
    ("KILL", 5),
    ("SETGID", 6),
    ("SETUID", 7),
    ("NET_ADMIN", 12),
    ("NET_RAW", 13),
    ("IPC_LOCK", 14),
    ("SYS_MODULE", 16),
    ("SYS_CHROOT", 18),
    ("SYS_PTRACE", 19),
    ("SYS_ADMIN", 21),
    ("SYS_RESOURCE", 24),
];

/// The image every container of deploy/kubernetes runs.
pub fn image() -> anyhow::Result<String> {
    let docs = documents()?;
    docs.iter()
        .find(|d| d["kind"] == "DaemonSet")
        .and_then(|d| d["spec"]["template"]["spec"]["containers"][0]["image"].as_str())
        .map(str::to_owned)
        .context("deploy/kubernetes/cilium.yaml has no DaemonSet with an image")
}

/// deploy/kubernetes's agent and operator documents.
fn documents() -> anyhow::Result<Vec<Value>> {
    parse(&[("cilium.yaml", CILIUM), ("cilium-operator.yaml", OPERATOR)])
}

fn parse(files: &[(&str, &str)]) -> anyhow::Result<Vec<Value>> {
    let mut docs = Vec::new();
    for (file, text) in files {
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v: Value = serde::Deserialize::deserialize(doc)
                .with_context(|| format!("parsing deploy/kubernetes/{file}"))?;
            if !v.is_null() {
                docs.push(v);
            }
        }
    }
    Ok(docs)
}

/// The capability names the manifests use that this machine's bounding set
/// lacks.
pub fn missing_capabilities() -> Vec<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let Some(bounding) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return Vec::new();
    };
    CAPABILITIES
        .iter()
        .filter(|(_, bit)| bounding & (1 << bit) == 0)
        .map(|(name, _)| *name)
        .collect()
}

/// What `kubectl apply` is given: Hubble's Secrets, then deploy/kubernetes's
/// agent and operator objects, as a List, changed for this cluster (see
/// the module doc).
pub fn manifests(
    api_server: SocketAddr,
    config: &[(String, String)],
    missing_caps: &[&str],
    hubble: &HubblePki,
) -> anyhow::Result<Value> {
    let mut docs = hubble_secrets(hubble)?;
    docs.extend(documents()?);
    for doc in &mut docs {
        adapt(doc, api_server, config, missing_caps);
    }
    Ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs}))
}

/// deploy/kubernetes/hubble-relay.yaml as a List.
pub fn relay_manifests() -> anyhow::Result<Value> {
    let docs = parse(&[("hubble-relay.yaml", RELAY)])?;
    Ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs}))
}

/// The Secrets Cilium's chart makes for Hubble's TLS, keyed as a TLS
/// Secret with the CA beside (`tls.crt`, `tls.key`, `ca.crt`).
fn hubble_secrets(hubble: &HubblePki) -> anyhow::Result<Vec<Value>> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
    };
    let ca = read(&hubble.ca_cert())?;
    [
        ("hubble-server-certs", hubble.server()),
        ("hubble-relay-client-certs", hubble.relay_client()),
    ]
    .into_iter()
    .map(|(name, files)| {
        Ok(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": "kube-system"},
            "stringData": {
                "tls.crt": read(&files.cert)?,
                "tls.key": read(&files.key)?,
                "ca.crt": ca,
            },
        }))
    })
    .collect()
}

fn adapt(doc: &mut Value, api: SocketAddr, config: &[(String, String)], missing_caps: &[&str]) {
    if doc["kind"] == "ConfigMap" && doc["metadata"]["name"] == "cilium-config" {
        for (k, v) in config {
            doc["data"][k] = Value::String(v.clone());
        }
        // an IPv6-only cluster has no IPv4 pool (the operator refuses one)
        let no_ipv4 = config
            .iter()
            .any(|(k, v)| k == "enable-ipv4" && v == "false");
        if let (true, Some(data)) = (no_ipv4, doc["data"].as_object_mut()) {
            data.retain(|k, _| !k.starts_with("cluster-pool-ipv4-"));
        }
        return;
    }
    if doc["kind"] != "DaemonSet" && doc["kind"] != "Deployment" {
        return;
    }
    let spec = &mut doc["spec"]["template"]["spec"];
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec[list].as_array_mut() else {
            continue;
        };
        for c in containers {
            if API_CLIENTS.iter().any(|n| c["name"] == *n) {
                let env = c["env"].as_array_mut();
                let env = match env {
                    Some(env) => env,
                    None => {
                        c["env"] = Value::Array(Vec::new());
                        c["env"].as_array_mut().expect("just made")
                    }
                };
                env.push(serde_json::json!({"name": "KUBERNETES_SERVICE_HOST", "value": api.ip().to_string()}));
                env.push(serde_json::json!({"name": "KUBERNETES_SERVICE_PORT", "value": api.port().to_string()}));
            }
            if let Some(add) = c["securityContext"]["capabilities"]["add"].as_array_mut() {
                add.retain(|cap| !missing_caps.iter().any(|m| cap == *m));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn containers(list: &Value, kind: &str) -> Vec<Value> {
        let doc = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["kind"] == kind)
            .unwrap();
        let spec = &doc["spec"]["template"]["spec"];
        let mut all = spec["initContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        all.extend(spec["containers"].as_array().cloned().unwrap());
        all
    }

    fn env(c: &Value, name: &str) -> Option<String> {
        c["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"]
            .as_str()
            .map(str::to_owned)
    }

    fn hubble() -> (tempfile::TempDir, HubblePki) {
        let dir = tempfile::tempdir().unwrap();
        let pki = HubblePki::create(dir.path(), "default").unwrap();
        (dir, pki)
    }

    fn manifests(
        api: SocketAddr,
        config: &[(String, String)],
        missing: &[&str],
    ) -> anyhow::Result<Value> {
        let (_dir, pki) = hubble();
        super::manifests(api, config, missing, &pki)
    }

    #[test]
    fn hubbles_secrets_come_first_with_the_ca_beside() {
        let api = "198.18.0.1:6443".parse().unwrap();
        let list = manifests(api, &[], &[]).unwrap();
        let items = list["items"].as_array().unwrap();
        for (i, name) in ["hubble-server-certs", "hubble-relay-client-certs"]
            .iter()
            .enumerate()
        {
            assert_eq!(items[i]["kind"], "Secret");
            assert_eq!(items[i]["metadata"]["name"], *name);
            for key in ["tls.crt", "tls.key", "ca.crt"] {
                let pem = items[i]["stringData"][key].as_str().unwrap();
                assert!(pem.starts_with("-----BEGIN"), "{name} {key}");
            }
        }
        let relay = relay_manifests().unwrap();
        let kinds: Vec<&str> = relay["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ConfigMap", "Deployment", "Service"]
        );
    }

    #[test]
    fn api_clients_get_the_api_server_and_the_rest_stays_as_written() {
        let api = "198.18.0.1:6443".parse().unwrap();
        let list = manifests(api, &[("debug".into(), "true".into())], &[]).unwrap();
        for kind in ["DaemonSet", "Deployment"] {
            for c in containers(&list, kind) {
                let name = c["name"].as_str().unwrap().to_owned();
                let host = env(&c, "KUBERNETES_SERVICE_HOST");
                if API_CLIENTS.contains(&name.as_str()) {
                    assert_eq!(host.as_deref(), Some("198.18.0.1"), "{name}");
                    assert_eq!(env(&c, "KUBERNETES_SERVICE_PORT").as_deref(), Some("6443"));
                } else {
                    assert_eq!(host, None, "{name}");
                }
            }
        }
        let cm = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "cilium-config")
            .unwrap();
        assert_eq!(cm["data"]["debug"], "true");
        assert_eq!(cm["data"]["routing-mode"], "tunnel", "the file's keys stay");
    }

    #[test]
    fn only_missing_capabilities_are_taken_out() {
        let api = "198.18.0.1:6443".parse().unwrap();
        let list = manifests(api, &[], &["SYS_RESOURCE"]).unwrap();
        let agent = containers(&list, "DaemonSet")
            .into_iter()
            .find(|c| c["name"] == "cilium-agent")
            .unwrap();
        let caps = agent["securityContext"]["capabilities"]["add"]
            .as_array()
            .unwrap();
        assert!(!caps.iter().any(|c| c == "SYS_RESOURCE"));
        assert!(caps.iter().any(|c| c == "NET_ADMIN"));
        let whole = manifests(api, &[], &[]).unwrap();
        let agent = containers(&whole, "DaemonSet")
            .into_iter()
            .find(|c| c["name"] == "cilium-agent")
            .unwrap();
        assert!(agent["securityContext"]["capabilities"]["add"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "SYS_RESOURCE"));
    }

    #[test]
    fn every_capability_the_manifests_name_has_a_number() {
        let docs = documents().unwrap();
        let text = serde_json::to_string(&docs).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut names = Vec::new();
        collect_caps(&v, &mut names);
        for n in names {
            assert!(CAPABILITIES.iter().any(|(c, _)| *c == n), "{n}");
        }
    }

    fn collect_caps(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(add) = m.get("add").and_then(Value::as_array) {
                    out.extend(add.iter().filter_map(|c| c.as_str().map(str::to_owned)));
                }
                m.values().for_each(|v| collect_caps(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| collect_caps(v, out)),
            _ => {}
        }
    }
}
