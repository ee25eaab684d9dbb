//! The REST API on the agent's unix socket (base path /v1). Errors are a
//! JSON string body with the status code, as Cilium's API returns them.

use api::models::{NodeAddressing, NodeAddressingElement};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(msg.into())).into_response()
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
        ipv4: Some(addressing_of(c.ipv4, c.pod_cidr())),
        ipv6: Some(addressing_of(c.ipv6, c.pod_cidr6())),
    }
}

/// One family's router address and pod CIDR; disabled when the node
/// does not run it.
fn addressing_of<A: std::fmt::Display>(
    pool: Option<controlplane::plane::Pool<A>>,
    alloc_range: Option<String>,
) -> NodeAddressingElement {
    match pool {
        Some(p) => NodeAddressingElement {
            enabled: true,
            ip: p.router_ip.to_string(),
            alloc_range: alloc_range.unwrap_or_default(),
            address_type: String::new(),
        },
        None => NodeAddressingElement {
            enabled: false,
            ..Default::default()
        },
    }
}

async fn not_found(uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("path {} was not found", uri.path()),
    )
}

/// The API: every subsystem's routes, and Cilium's 404 for the rest.
pub fn router(routes: impl IntoIterator<Item = Router>) -> Router {
    routes
        .into_iter()
        .fold(Router::new(), Router::merge)
        .fallback(not_found)
}

/// Serves the API on `socket` until `shutdown` completes, then removes it.
pub async fn serve(
    api: Router,
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
    let result = axum::serve(listener, api)
        .with_graceful_shutdown(shutdown)
        .await;
    let _ = std::fs::remove_file(socket);
    result.map_err(Into::into)
}
