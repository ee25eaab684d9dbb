//! Where the API server is and who the agent is to it.

use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;

/// The agent's `k8s-*` options.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// `k8s-kubeconfig-path`.
    pub kubeconfig: Option<PathBuf>,
    /// `k8s-api-server`: overrides the kubeconfig's or the in-cluster
    /// server address.
    pub api_server: Option<String>,
    /// `k8s-client-qps` and `k8s-client-burst` (0: client-go's 5 and 10).
    pub qps: f32,
    pub burst: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("no Kubernetes configuration: set k8s-kubeconfig-path or run in a pod ({0})")]
    NoConfig(kube::config::InClusterError),
    #[error("k8s-api-server {url:?} is not a URL: {reason}")]
    BadServer { url: String, reason: String },
    #[error("creating the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

fn server_uri(url: &str) -> Result<http::Uri, ConnectError> {
    url.parse()
        .map_err(|e: http::uri::InvalidUri| ConnectError::BadServer {
            url: url.to_owned(),
            reason: e.to_string(),
        })
}

/// A client as the options say: the kubeconfig when one is given (its
/// server replaced by `k8s-api-server` when that is set too), else the
/// API server address alone (no credentials, as Cilium allows), else the
/// in-cluster service account (token file, CA, KUBERNETES_SERVICE_*).
pub async fn connect(opts: &ClientOptions) -> Result<kube::Client, ConnectError> {
    let mut config = match &opts.kubeconfig {
        None if opts.api_server.is_some() => {
            let url = opts.api_server.as_deref().unwrap_or_default();
            kube::Config::new(server_uri(url)?)
        }
        Some(path) => {
            let bad = |source| ConnectError::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(bad)?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(bad)?
        }
        None => kube::Config::incluster().map_err(ConnectError::NoConfig)?,
    };
    if let Some(url) = &opts.api_server {
        config.cluster_url = server_uri(url)?;
    }
    let throttle = crate::throttle::Throttle::new(opts.qps, opts.burst);
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(ConnectError::Client)?
        .with_layer(&throttle)
        .build())
}

/// The API server's version as `cilium status` shows it:
/// `<major>.<minor> (<gitVersion>) [<platform>]`.
pub async fn version_line(client: &kube::Client) -> Result<String, kube::Error> {
    let v = client.apiserver_version().await?;
    let minor = v.minor.trim_end_matches('+');
    Ok(format!(
        "{}.{minor} ({}) [{}]",
        v.major, v.git_version, v.platform
    ))
}
