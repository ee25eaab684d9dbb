//! `/map` handlers: the maps whose contents the agent caches in userspace,
//! with that cache, so `cilium map get` shows what the agent believes next
//! to `cilium bpf ... list` showing what the kernel holds.

use crate::api_server::error;
use api::ipam::{IpListEntry, IpListEntryMetadata};
use api::models::{BpfMap, BpfMapEntry, BpfMapList};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::ipcache::IpCache;
use datapath::maps::Ipcache;
use std::sync::Arc;

/// What the map API shows: the ipcache, cached and pinned.
pub struct MapApi {
    pub bpf_root: std::path::PathBuf,
    pub ipcache: Arc<IpCache>,
}

/// `/v1/map`, `/v1/map/{name}` and `/v1/ip`.
pub fn routes(api: Arc<MapApi>) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/v1/map", get(list))
        .route("/v1/map/{name}", get(get_map))
        .route("/v1/ip", get(ip_list))
        .with_state(api)
}

fn ipcache(d: &MapApi) -> BpfMap {
    let path = Ipcache::pin_path(&d.bpf_root);
    BpfMap {
        path: path.display().to_string(),
        cache: d
            .ipcache
            .list()
            .into_iter()
            .map(|((ip, len), e)| BpfMapEntry {
                key: format!("{ip}/{len}"),
                value: e.value().to_string(),
                desired_action: "sync".into(),
                last_error: String::new(),
            })
            .collect(),
    }
}

async fn list(State(d): State<Arc<MapApi>>) -> Json<BpfMapList> {
    Json(BpfMapList {
        maps: vec![ipcache(&d)],
    })
}

async fn get_map(State(d): State<Arc<MapApi>>, Path(name): Path<String>) -> Response {
    if name == Ipcache::NAME {
        return Json(ipcache(&d)).into_response();
    }
    error(
        StatusCode::NOT_FOUND,
        format!(
            "map {name} not found (maps with a cache: {})",
            Ipcache::NAME
        ),
    )
}

/// `GET /ip`: the userspace ipcache.
async fn ip_list(State(d): State<Arc<MapApi>>) -> Json<Vec<IpListEntry>> {
    let entries = d
        .ipcache
        .list()
        .into_iter()
        .map(|((ip, len), e)| IpListEntry {
            cidr: format!("{ip}/{len}"),
            identity: e.identity,
            host_ip: e.tunnel_endpoint.map(|i| i.to_string()).unwrap_or_default(),
            metadata: Some(IpListEntryMetadata {
                source: e.source.as_str().to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    Json(entries)
}
