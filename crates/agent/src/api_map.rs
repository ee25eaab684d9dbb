//! `/map` handlers: the maps whose contents the agent caches in userspace,
//! with that cache, so `cilium map get` shows what the agent believes next
//! to `cilium bpf ... list` showing what the kernel holds.

use crate::api_server::{error, Shared};
use crate::daemon::Daemon;
use api::models::{BpfMap, BpfMapEntry, BpfMapList};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use datapath::maps::Ipcache;

fn ipcache(d: &Daemon) -> BpfMap {
    let path = Ipcache::pin_path(&d.config.bpf_root);
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

pub async fn list(State(d): Shared) -> Json<BpfMapList> {
    Json(BpfMapList {
        maps: vec![ipcache(&d)],
    })
}

pub async fn get(State(d): Shared, Path(name): Path<String>) -> Response {
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
