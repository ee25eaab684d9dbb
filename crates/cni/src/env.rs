//! The runtime's side of the call: CNI_* environment variables.

use crate::error::{CniError, INVALID_ENV};
use std::collections::BTreeMap;

pub struct Env {
    pub command: String,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS`, `K=V;K=V`
    pub args: BTreeMap<String, String>,
}

impl Env {
    pub fn from_process() -> Result<Self, CniError> {
        Self::parse(|k| std::env::var(k).ok())
    }

    pub fn parse(get: impl Fn(&str) -> Option<String>) -> Result<Self, CniError> {
        let command = get("CNI_COMMAND")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                CniError::new(INVALID_ENV, "required env variable CNI_COMMAND missing")
            })?;
        let mut args = BTreeMap::new();
        for pair in get("CNI_ARGS")
            .unwrap_or_default()
            .split(';')
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                CniError::new(
                    INVALID_ENV,
                    format!("invalid CNI_ARGS pair {pair:?}: expected KEY=VALUE"),
                )
            })?;
            args.insert(k.to_owned(), v.to_owned());
        }
        Ok(Self {
            command,
            container_id: get("CNI_CONTAINERID").unwrap_or_default(),
            netns: get("CNI_NETNS").unwrap_or_default(),
            ifname: get("CNI_IFNAME").unwrap_or_default(),
            args,
        })
    }

    /// Fails with the spec's "invalid environment variables" naming the first missing one.
    pub fn require(&self, names: &[&str]) -> Result<(), CniError> {
        for name in names {
            let value = match *name {
                "CNI_CONTAINERID" => &self.container_id,
                "CNI_NETNS" => &self.netns,
                "CNI_IFNAME" => &self.ifname,
                _ => continue,
            };
            if value.is_empty() {
                return Err(CniError::new(
                    INVALID_ENV,
                    format!("required env variable {name} missing"),
                ));
            }
        }
        Ok(())
    }

    pub fn pod_namespace(&self) -> &str {
        self.args
            .get("K8S_POD_NAMESPACE")
            .map_or("", String::as_str)
    }

    /// The pod's labels as identity labels, for an agent without a
    /// kube-apiserver to ask (kvstore mode), passed by the runtime:
    /// `K8S_POD_LABELS=app=web,tier=db`. An agent in Kubernetes mode takes
    /// the labels from the Pod object instead.
    pub fn pod_labels(&self) -> Result<Vec<String>, CniError> {
        let Some(raw) = self.args.get("K8S_POD_LABELS") else {
            return Ok(Vec::new());
        };
        raw.split(',')
            .filter(|l| !l.is_empty())
            .map(|l| match l.split_once('=') {
                Some((k, v)) if !k.is_empty() && !k.contains(':') => Ok(format!("k8s:{k}={v}")),
                _ => Err(CniError::new(
                    INVALID_ENV,
                    format!("invalid K8S_POD_LABELS entry {l:?}: expected key=value"),
                )),
            })
            .collect()
    }

    pub fn pod_name(&self) -> &str {
        self.args.get("K8S_POD_NAME").map_or("", String::as_str)
    }

    pub fn pod_uid(&self) -> &str {
        self.args.get("K8S_POD_UID").map_or("", String::as_str)
    }
}
