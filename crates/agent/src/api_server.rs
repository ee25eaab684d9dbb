//! The REST API on the agent's unix socket (base path /v1). Errors are a
//! JSON string body with the status code, as Cilium's API returns them.

use crate::daemon::Daemon;
use crate::status;
use crate::{api_endpoint, api_ipam};
use api::models::{
    DaemonConfiguration, DaemonConfigurationSpec, DaemonConfigurationStatus, NodeAddressing,
    NodeAddressingElement,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

pub(crate) type Shared = State<Arc<Daemon>>;

pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(msg.into())).into_response()
}

async fn healthz(State(d): Shared, headers: HeaderMap) -> Response {
    let brief = headers
        .get("brief")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    Json(status::collect(&d, brief)).into_response()
}

/// Query parameters of a request, percent-decoded.
pub(crate) fn query_params(uri: &Uri) -> std::collections::BTreeMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(
                    std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                    16,
                ) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The node's addressing as `/config` and `/ipam` report it.
pub(crate) fn node_addressing(c: &crate::option::DaemonConfig) -> NodeAddressing {
    NodeAddressing {
        ipv4: Some(NodeAddressingElement {
            enabled: true,
            ip: c.router_ip.to_string(),
            alloc_range: c.pod_cidr(),
            address_type: String::new(),
        }),
        ipv6: Some(NodeAddressingElement {
            enabled: false,
            ..Default::default()
        }),
    }
}

fn configuration(d: &Daemon) -> DaemonConfiguration {
    let runtime = d.runtime.lock().expect("runtime options lock").clone();
    let realized = DaemonConfigurationSpec {
        options: runtime.options,
        policy_enforcement: Some(runtime.policy_enforcement),
    };
    let c = &d.config;
    DaemonConfiguration {
        spec: realized.clone(),
        status: DaemonConfigurationStatus {
            addressing: node_addressing(c),
            datapath_mode: "veth".into(),
            device_mtu: c.mtu,
            route_mtu: c.route_mtu(),
            ipam_mode: c.ipam_mode.clone(),
            masquerade: false,
            realized,
            immutable: c.all.clone(),
            daemon_configuration_map: c
                .all
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        },
    }
}

async fn get_config(State(d): Shared) -> Json<DaemonConfiguration> {
    Json(configuration(&d))
}

async fn patch_config(State(d): Shared, body: Bytes) -> Response {
    let spec: DaemonConfigurationSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("invalid configuration body: {e}"),
            )
        }
    };
    let applied = {
        let mut runtime = d.runtime.lock().expect("runtime options lock");
        runtime
            .apply(&spec.options, spec.policy_enforcement.as_deref())
            .map(|changed| {
                let level = runtime
                    .options
                    .get("MonitorAggregationLevel")
                    .cloned()
                    .unwrap_or_default();
                (changed, runtime.policy_enforcement.clone(), level)
            })
    };
    match applied {
        Ok((changed, enforcement, level)) => {
            for name in &changed {
                tracing::info!(subsys = "daemon", option = %name, "Configuration option changed");
            }
            if changed.iter().any(|n| n == "MonitorAggregationLevel") {
                if let Err(e) = crate::daemon::write_monitor_aggregation(&d.config.bpf_root, &level)
                {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"));
                }
            }
            // a new enforcement mode changes every endpoint's policy map
            let mode =
                policy::Enforcement::parse(&enforcement).unwrap_or(policy::Enforcement::Default);
            if mode != d.policies.mode() {
                d.policies.set_mode(mode);
                d.regeneration.run("policy enforcement changed").await;
            }
            StatusCode::OK.into_response()
        }
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// `GET /metrics/`: the agent's metrics as `cilium metrics list` shows them.
async fn metrics_list(State(d): Shared) -> Json<Vec<crate::metrics::Metric>> {
    Json(crate::metrics::list(&d))
}

/// `GET /cluster/nodes`: this node and every node learned from the kvstore.
async fn cluster_nodes(State(d): Shared) -> Json<api::models::ClusterNodeStatus> {
    let mut nodes = vec![d.node.to_api("local")];
    let source = "kvstore";
    nodes.extend(d.nodes.list().iter().map(|n| n.to_api(source)));
    Json(api::models::ClusterNodeStatus {
        self_: d.node.name.clone(),
        nodes_added: nodes,
    })
}

async fn not_found(uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("path {} was not found", uri.path()),
    )
}

pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route("/v1/healthz", get(healthz))
        .route("/v1/config", get(get_config).patch(patch_config))
        .route("/v1/debuginfo", get(crate::api_debuginfo::get))
        .route("/v1/ipam", post(api_ipam::allocate_next))
        .route(
            "/v1/ipam/{ip}",
            post(api_ipam::allocate_ip).delete(api_ipam::release),
        )
        .route("/v1/ip", get(api_ipam::ip_list))
        .route("/v1/cluster/nodes", get(cluster_nodes))
        .route("/v1/identity", get(crate::api_identity::list))
        .route("/v1/map", get(crate::api_map::list))
        .route("/v1/service", get(crate::api_service::list))
        .route(
            "/v1/policy",
            get(crate::api_policy::get)
                .put(crate::api_policy::put)
                .delete(crate::api_policy::delete),
        )
        .route("/v1/policy/resolve", get(crate::api_policy::trace))
        .route("/v1/policy/selectors", get(crate::api_policy::selectors))
        .route("/v1/metrics/", get(metrics_list))
        .route("/v1/explain", get(crate::api_policy::explain))
        .route(
            "/v1/service/{id}",
            get(crate::api_service::get)
                .put(crate::api_service::put)
                .delete(crate::api_service::delete),
        )
        .route("/v1/map/{name}", get(crate::api_map::get))
        .route("/v1/identity/{id}", get(crate::api_identity::get))
        .route(
            "/v1/endpoint",
            get(api_endpoint::list).delete(api_endpoint::delete_batch),
        )
        .route(
            "/v1/endpoint/{id}",
            get(api_endpoint::get)
                .put(api_endpoint::put)
                .delete(api_endpoint::delete),
        )
        .route("/v1/endpoint/{id}/healthz", get(api_endpoint::healthz))
        .fallback(not_found)
        .with_state(daemon)
}

/// Serves the API on `socket` until `shutdown` completes, then removes it.
pub async fn serve(
    daemon: Arc<Daemon>,
    socket: &Path,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(socket) {
        Ok(()) => {
            tracing::info!(subsys = "daemon", path = %socket.display(), "Removed stale API socket")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(anyhow::anyhow!(
                "removing stale socket {}: {e}",
                socket.display()
            ))
        }
    }
    let listener = tokio::net::UnixListener::bind(socket)
        .map_err(|e| anyhow::anyhow!("binding {}: {e}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o660))?;
    tracing::info!(subsys = "daemon", path = %socket.display(), "Serving cilium API");
    let result = axum::serve(listener, router(daemon))
        .with_graceful_shutdown(shutdown)
        .await;
    let _ = std::fs::remove_file(socket);
    result.map_err(Into::into)
}
