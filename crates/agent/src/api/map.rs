//! `/map` handlers: every map the agent pins, with the agent's userspace
//! view of those it keeps one of (the ipcache, the endpoints), so `cilium
//! map get` shows what the agent believes next to `cilium bpf ... list`
//! showing what the kernel holds; and the ipcache's recent changes.

use crate::api::server::error;
use api::ipam::{IpListEntry, IpListEntryMetadata};
use api::models::{BpfMap, BpfMapEntry, BpfMapList};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::endpoint::Endpoints;
use controlplane::ipcache::IpCache;
use controlplane::map_events::MapEvent;
use datapath::maps::Ipcache;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What the map API shows.
pub struct MapApi {
    pub bpf_root: std::path::PathBuf,
    pub ipcache: Arc<IpCache>,
    pub endpoints: Arc<Endpoints>,
}

/// `/v1/map`, `/v1/map/{name}`, its `events`, and `/v1/ip`.
pub fn routes(api: Arc<MapApi>) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/v1/map", get(list))
        .route("/v1/map/{name}", get(get_map))
        .route("/v1/map/{name}/events", get(events))
        .route("/v1/ip", get(ip_list))
        .with_state(api)
}

fn globals(d: &MapApi) -> std::path::PathBuf {
    d.bpf_root.join(abi::maps::GLOBALS_DIR)
}

/// The names of the maps pinned in the globals dir, sorted.
fn pinned(d: &MapApi) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(globals(d))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

fn entry(key: String, value: String) -> BpfMapEntry {
    BpfMapEntry {
        key,
        value,
        desired_action: "sync".into(),
        last_error: String::new(),
    }
}

/// The agent's view of map `name`: Some for a map it keeps one of.
fn cache(d: &MapApi, name: &str) -> Option<Vec<BpfMapEntry>> {
    match name {
        Ipcache::NAME => Some(
            d.ipcache
                .list()
                .into_iter()
                .map(|((ip, len), e)| entry(format!("{ip}/{len}"), e.value().to_string()))
                .collect(),
        ),
        // as Cilium's lxcmap prints an EndpointKey and EndpointInfo, one
        // entry for each address of an endpoint
        abi::maps::LXC => Some(
            d.endpoints
                .list()
                .into_iter()
                .flat_map(|ep| ep.addresses().map(move |(ip, _)| (ip, ep.clone())))
                .map(|(ip, ep)| {
                    entry(
                        std::net::SocketAddr::new(ip, 0).to_string(),
                        format!(
                            "id={:<5} sec_id={:<5} flags=0x{:04X} ifindex={:<3} mac={} nodemac={}",
                            ep.id,
                            ep.identity,
                            0,
                            ep.ifindex,
                            ep.mac.to_ascii_uppercase(),
                            ep.host_mac.to_ascii_uppercase()
                        ),
                    )
                })
                .collect(),
        ),
        _ => None,
    }
}

fn bpf_map(d: &MapApi, name: &str) -> BpfMap {
    BpfMap {
        path: globals(d).join(name).display().to_string(),
        cache: cache(d, name),
    }
}

async fn list(State(d): State<Arc<MapApi>>) -> Json<BpfMapList> {
    Json(BpfMapList {
        maps: pinned(&d).iter().map(|n| bpf_map(&d, n)).collect(),
    })
}

async fn get_map(State(d): State<Arc<MapApi>>, Path(name): Path<String>) -> Response {
    if pinned(&d).contains(&name) {
        return Json(bpf_map(&d, &name)).into_response();
    }
    error(StatusCode::NOT_FOUND, format!("map {name} not found"))
}

/// A MapEvent as Cilium's API writes it, one JSON document per line.
fn event_line(e: &MapEvent) -> String {
    let mut line = serde_json::json!({
        "action": e.action.as_str(),
        "desired-action": e.action.desired_action(),
        "key": e.key,
        "value": e.value,
        "last-error": e.error.as_deref().unwrap_or("<nil>"),
        "timestamp": api::timefmt::rfc3339_millis(e.timestamp),
    })
    .to_string();
    line.push('\n');
    line
}

/// `GET /map/{name}/events[?follow=true]`: the ipcache's recent changes
/// (the one map whose changes are kept), then, when following, each new
/// one as it happens. 1.16's 404 (no body) for a map without events.
async fn events(State(d): State<Arc<MapApi>>, Path(name): Path<String>, uri: Uri) -> Response {
    if name != Ipcache::NAME {
        return StatusCode::NOT_FOUND.into_response();
    }
    let follow = crate::api::server::query_params(&uri)
        .get("follow")
        .is_some_and(|v| v == "true");
    let past = d.ipcache.events();
    let dump: String = past.iter().map(event_line).collect();
    if !follow {
        return ([(header::CONTENT_TYPE, "application/json")], dump).into_response();
    }
    let since = past.last().map_or(SystemTime::UNIX_EPOCH, |e| e.timestamp);
    let first = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(dump) });
    let later = futures::stream::unfold((d, since), |(d, since)| async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let new: Vec<MapEvent> = d
            .ipcache
            .events()
            .into_iter()
            .filter(|e| e.timestamp > since)
            .collect();
        let since = new.last().map_or(since, |e| e.timestamp);
        let chunk: String = new.iter().map(event_line).collect();
        Some((Ok(chunk), (d, since)))
    });
    use futures::StreamExt;
    let body = Body::from_stream(first.chain(later));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
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
