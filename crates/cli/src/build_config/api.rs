//! Sources read from the API server, with the agent's ServiceAccount's
//! permissions: ConfigMaps get (the `cilium-config-agent` Role),
//! CiliumNodeConfigs list (so one asked for by name is listed with a
//! field selector), Nodes get.

use super::log;
use super::objects::{self, Contribution, NodeConfig, Pairs};
use super::source::Source;
use anyhow::{bail, Context};
use k8s::k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s::kube::api::{ApiResource, DynamicObject, ListParams};
use k8s::kube::Api;
use serde_json::Value;

/// The API server, and the Node it was last asked for.
pub struct ApiReader {
    client: k8s::kube::Client,
    /// Where the server is, for errors.
    server: String,
    node: Option<(String, Value)>,
}

fn not_found(e: &k8s::kube::Error) -> bool {
    matches!(e, k8s::kube::Error::Api(s) if s.code == 404)
}

fn node_config_resource(version: &str) -> ApiResource {
    ApiResource {
        group: "cilium.io".into(),
        version: version.into(),
        api_version: format!("cilium.io/{version}"),
        kind: "CiliumNodeConfig".into(),
        plural: "ciliumnodeconfigs".into(),
    }
}

impl ApiReader {
    pub async fn connect(opts: &k8s::ClientOptions) -> anyhow::Result<ApiReader> {
        let server = match (&opts.api_server, &opts.kubeconfig) {
            (Some(url), _) => url.clone(),
            (None, Some(path)) => format!("of kubeconfig {}", path.display()),
            (None, None) => "in the pod's service account config".into(),
        };
        let client = k8s::connect(opts).await?;
        Ok(ApiReader {
            client,
            server,
            node: None,
        })
    }

    fn failed(&self, what: &str, e: k8s::kube::Error) -> anyhow::Error {
        anyhow::Error::new(e).context(format!("{what} from the API server ({})", self.server))
    }

    /// What `source` gives; `node_name` is the node to select for.
    pub async fn read(&mut self, source: &Source, node_name: &str) -> anyhow::Result<Contribution> {
        match source {
            Source::ConfigMap { namespace, name } => self.config_map(namespace, name).await,
            Source::NodeConfig { namespace, name } => {
                self.node_configs(namespace, name.as_deref(), node_name)
                    .await
            }
            Source::Node { name } => {
                let node = self.node(name).await?;
                let pairs = objects::node_overrides(node)?;
                Ok(Contribution {
                    descriptions: vec![format!("node:{name}")],
                    pairs,
                })
            }
            Source::File { .. } => bail!("{} is a file source", source.describe()),
        }
    }

    async fn config_map(&self, namespace: &str, name: &str) -> anyhow::Result<Contribution> {
        let what = format!("config-map:{namespace}/{name}");
        if namespace.is_empty() {
            bail!("{what}: no namespace; set CILIUM_K8S_NAMESPACE or give config-map:<namespace>/<name>");
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let cm = match api.get(name).await {
            Ok(cm) => cm,
            Err(e) if not_found(&e) => {
                log("error", "Configmap not found, ignoring", &what, "");
                return Ok(Contribution::default());
            }
            Err(e) => return Err(self.failed(&format!("reading ConfigMap {namespace}/{name}"), e)),
        };
        let pairs: Pairs = cm.data.unwrap_or_default().into_iter().collect();
        let descriptions = if pairs.is_empty() { vec![] } else { vec![what] };
        Ok(Contribution {
            pairs,
            descriptions,
        })
    }

    /// The CiliumNodeConfigs served as `version` (`None`: the version or
    /// the CRD is not there).
    async fn list_node_configs(
        &self,
        version: &str,
        namespace: &str,
        name: Option<&str>,
    ) -> anyhow::Result<Option<Vec<NodeConfig>>> {
        let resource = node_config_resource(version);
        let api: Api<DynamicObject> = if namespace.is_empty() {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        };
        let mut params = ListParams::default();
        if let Some(name) = name {
            params = params.fields(&format!("metadata.name={name}"));
        }
        let list = match api.list(&params).await {
            Ok(list) => list,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => {
                let what =
                    format!("listing cilium.io/{version} CiliumNodeConfigs in {namespace:?}");
                return Err(self.failed(&what, e));
            }
        };
        list.items
            .iter()
            .map(|o| NodeConfig::from_object(&serde_json::to_value(o)?))
            .collect::<anyhow::Result<_>>()
            .map(Some)
    }

    /// Both versions' selections, v2's keys over v2alpha1's (the API
    /// server serves every object as both, so they agree unless one
    /// version is not served).
    async fn node_configs(
        &mut self,
        namespace: &str,
        name: Option<&str>,
        node_name: &str,
    ) -> anyhow::Result<Contribution> {
        let mut out = Contribution::default();
        let mut missing = Vec::new();
        for version in ["v2alpha1", "v2"] {
            let Some(configs) = self.list_node_configs(version, namespace, name).await? else {
                missing.push(version);
                continue;
            };
            let labels = if objects::needs_labels(&configs, name.is_some()) {
                objects::node_labels(self.node(node_name).await?)?
            } else {
                Pairs::new()
            };
            let got = objects::apply_node_configs(&configs, name.is_some(), &labels)?;
            out.pairs.extend(got.pairs);
            for d in got.descriptions {
                if !out.descriptions.contains(&d) {
                    out.descriptions.push(d);
                }
            }
        }
        if !missing.is_empty() {
            let what = format!("cilium-node-config:{namespace}/{}", name.unwrap_or(""));
            let versions = missing.join(", ");
            log(
                "info",
                &format!("CiliumNodeConfig {versions} not served, skipping"),
                &what,
                "",
            );
        }
        Ok(out)
    }

    /// Node `name` as the API server has it (asked once).
    async fn node(&mut self, name: &str) -> anyhow::Result<&Value> {
        if name.is_empty() {
            bail!("no node name to read the Node of: set --node-name or K8S_NODE_NAME");
        }
        if self.node.as_ref().is_none_or(|(n, _)| n != name) {
            let api: Api<Node> = Api::all(self.client.clone());
            let node = match api.get(name).await {
                Ok(node) => node,
                Err(e) if not_found(&e) => {
                    bail!("Node {name:?} does not exist in the API server (not registered yet?)")
                }
                Err(e) => return Err(self.failed(&format!("reading Node {name:?}"), e)),
            };
            self.node = Some((name.to_owned(), serde_json::to_value(&node)?));
        }
        let (_, node) = self.node.as_ref().context("the Node just read")?;
        Ok(node)
    }
}
