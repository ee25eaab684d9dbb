//! `/config`: the agent's configuration, and the runtime options
//! `cilium config` may change.

use crate::api::server::{error, node_addressing};
use crate::option::modes::MonitorAggregation;
use crate::option::runtime::RuntimeOptions;
use crate::option::DaemonConfig;
use api::models::{DaemonConfiguration, DaemonConfigurationSpec, DaemonConfigurationStatus};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use controlplane::policies::Policies;
use std::sync::{Arc, Mutex};

/// What `/config` reads and changes.
pub struct ConfigApi {
    pub config: Arc<DaemonConfig>,
    pub runtime: Mutex<RuntimeOptions>,
    pub policies: Arc<Policies>,
    /// Whose configuration `/endpoint/{id}/config` shows.
    pub endpoints: Arc<controlplane::endpoint::Endpoints>,
}

/// The options an endpoint has of the agent's (Cilium's endpoint
/// options; the agent-wide ones stay out).
const ENDPOINT_OPTIONS: &[&str] = &[
    "ConntrackAccounting",
    "Debug",
    "DebugLB",
    "DebugPolicy",
    "DropNotification",
    "MonitorAggregationLevel",
    "PolicyAuditMode",
    "PolicyVerdictNotification",
    "SourceIPVerification",
    "TraceNotification",
];

type Shared = State<Arc<ConfigApi>>;

/// `GET` and `PATCH /v1/config`; `GET /v1/endpoint/{id}/config`.
pub fn routes(api: Arc<ConfigApi>) -> Router {
    Router::new()
        .route(
            "/v1/config",
            axum::routing::get(get_config).patch(patch_config),
        )
        .route(
            "/v1/endpoint/{id}/config",
            axum::routing::get(get_endpoint_config).patch(patch_endpoint_config),
        )
        .with_state(api)
}

/// An endpoint's EndpointConfigurationStatus: the agent's endpoint
/// options, which every endpoint follows (ours has no per-endpoint ones).
async fn get_endpoint_config(
    State(d): Shared,
    axum::extract::Path(raw): axum::extract::Path<String>,
) -> Response {
    let ep = match crate::api::endpoint::lookup(&d.endpoints, &raw) {
        Ok(ep) => ep,
        Err(resp) => return resp,
    };
    let runtime = d.runtime.lock().expect("runtime options lock").clone();
    let options: std::collections::BTreeMap<&str, String> = ENDPOINT_OPTIONS
        .iter()
        .filter_map(|name| Some((*name, runtime.options.get(*name)?.clone())))
        .collect();
    Json(serde_json::json!({
        "realized": {
            "options": options,
            "label-configuration": ep.status.labels.realized,
        },
        "immutable": {},
    }))
    .into_response()
}

/// Per-endpoint options are not kept apart from the agent's: refused,
/// saying where to change them.
async fn patch_endpoint_config(axum::extract::Path(raw): axum::extract::Path<String>) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        format!("endpoint {raw}: options are the agent's for every endpoint; change them with `cilium config <option>=<value>`"),
    )
}

fn configuration(d: &ConfigApi) -> DaemonConfiguration {
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
            ipam_mode: c.ipam_mode.as_str().into(),
            // as configured, less the BPF mode this agent does not have
            masquerade: c.ipv4_masquerade && !c.bpf_masquerade,
            realized,
            immutable: c.all.clone(),
            daemon_configuration_map: c
                .all
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
            kvstore_configuration: kvstore_configuration(c),
        },
    }
}

/// The kvstore as Cilium's clients connect to it: `etcd` at the agent's
/// endpoints; nothing in CRD mode.
fn kvstore_configuration(c: &DaemonConfig) -> api::models::KvstoreConfiguration {
    let Some(kv) = &c.kvstore else {
        return Default::default();
    };
    api::models::KvstoreConfiguration {
        kind: "etcd".into(),
        options: [("etcd.address".to_owned(), kv.endpoints.join(","))].into(),
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
                // the runtime options hold only levels they accepted
                let level = MonitorAggregation::parse(&level).unwrap_or(MonitorAggregation::Max);
                if let Err(e) = crate::kernel::set_monitor_aggregation(&d.config.bpf_root, level) {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"));
                }
            }
            // a new enforcement mode changes every endpoint's policy map
            let mode =
                policy::Enforcement::parse(&enforcement).unwrap_or(policy::Enforcement::Default);
            d.policies.change_mode(mode).await;
            StatusCode::OK.into_response()
        }
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}
