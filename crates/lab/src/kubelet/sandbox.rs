//! A pod's sandbox, as the container runtime keeps it: a network
//! namespace, a random 64-hex sandbox id (`CNI_CONTAINERID` and
//! `K8S_POD_INFRA_CONTAINER_ID`), and a state file
//! `<node dir>/sandboxes/<netns name>.json` written before CNI ADD, so a
//! DEL after a kubelet restart (or from `cilium-lab down`) names the same
//! sandbox the ADD did.

use crate::{cni, layout};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use topology::NodeDir;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sandbox {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub id: String,
    /// Set once ADD answered.
    pub ip: Option<Ipv4Addr>,
    /// A dual-stack node's second address for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
}

/// The pod's network namespace name: `<name>` in `default`,
/// `<namespace>_<name>` elsewhere (`_` is in no Kubernetes name, so the
/// two never collide).
pub fn netns_name(namespace: &str, name: &str) -> String {
    if namespace == "default" {
        name.to_owned()
    } else {
        format!("{namespace}_{name}")
    }
}

fn state_dir(l: &NodeDir) -> PathBuf {
    l.dir.join("sandboxes")
}

fn random_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sandbox {
    pub fn netns_name(&self) -> String {
        netns_name(&self.namespace, &self.name)
    }

    /// Who the sandbox is for in messages: `namespace/name`.
    pub fn pod(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn state_file(&self, l: &NodeDir) -> PathBuf {
        state_dir(l).join(format!("{}.json", self.netns_name()))
    }

    fn save(&self, l: &NodeDir) -> anyhow::Result<()> {
        layout::write_atomic(&self.state_file(l), &serde_json::to_vec(self)?)
    }

    /// The sandboxes the node's state files record.
    pub fn all(l: &NodeDir) -> Vec<Sandbox> {
        std::fs::read_dir(state_dir(l))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| {
                let text = std::fs::read(e.path()).ok()?;
                match serde_json::from_slice(&text) {
                    Ok(s) => Some(s),
                    Err(err) => {
                        eprintln!("kubelet: ignoring {}: {err}", e.path().display());
                        None
                    }
                }
            })
            .collect()
    }

    /// Makes the pod's netns and runs CNI ADD in it; on failure nothing is
    /// left behind (DEL, netns and state file removed).
    pub fn create(l: &NodeDir, namespace: &str, name: &str, uid: &str) -> anyhow::Result<Sandbox> {
        let mut sb = Sandbox {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            id: random_id()?,
            ip: None,
            ipv6: None,
        };
        let netns = l.netns(&sb.netns_name());
        std::fs::create_dir_all(l.netns_dir())?;
        sb.save(l)?;
        let added = netdev::netns::create(&netns)
            .with_context(|| format!("creating the netns of {}", sb.pod()))
            .and_then(|()| sb.cni(l, "ADD"))
            .and_then(|result| Ok((cni::address(&result)?, cni::address6(&result))));
        match added {
            Ok((ip, ipv6)) => {
                sb.ip = Some(ip);
                sb.ipv6 = ipv6;
                sb.save(l)?;
                Ok(sb)
            }
            Err(e) => {
                if let Err(del) = sb.destroy(l) {
                    eprintln!("kubelet: cleaning up after a failed ADD: {del:#}");
                }
                Err(e)
            }
        }
    }

    /// CNI DEL, then the netns and the state file.
    pub fn destroy(&self, l: &NodeDir) -> anyhow::Result<()> {
        self.cni(l, "DEL")?;
        netdev::netns::remove(&l.netns(&self.netns_name()))
            .with_context(|| format!("removing the netns of {}", self.pod()))?;
        match std::fs::remove_file(self.state_file(l)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing the state of {}", self.pod()))
            }
            _ => Ok(()),
        }
    }

    /// Whether the sandbox's netns is still there (a kubelet restart
    /// keeps it: the holder's mount namespace holds its mount).
    pub fn netns_exists(&self, l: &NodeDir) -> bool {
        l.netns(&self.netns_name()).exists()
    }

    /// The agent reads the pod's labels from the API server: kubelet's
    /// arguments name the pod and nothing more.
    fn cni(&self, l: &NodeDir, command: &str) -> anyhow::Result<serde_json::Value> {
        let args = format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
            self.namespace, self.name, self.id, self.uid
        );
        let netns = l.netns(&self.netns_name());
        let pod = self.pod();
        cni::call(
            l,
            command,
            &cni::Sandbox {
                container_id: &self.id,
                netns: &netns,
                args: &args,
                pod: &pod,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn netns_names_are_the_pod_name_in_default_and_unambiguous_elsewhere() {
        assert_eq!(super::netns_name("default", "web-1"), "web-1");
        assert_eq!(
            super::netns_name("kube-system", "web-1"),
            "kube-system_web-1"
        );
        // `_` is in no namespace or pod name: no other pair maps here
        assert_ne!(super::netns_name("a", "b-c"), super::netns_name("a-b", "c"));
    }
}
