//! `/ipam` and `/ip` handlers.

use crate::api::server::{error, query_params};
use api::ipam::{AddressPair, IpamAddressResponse, IpamResponse};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::ipam::{Ipam, IpamError};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

fn ipam_status(e: &IpamError) -> StatusCode {
    match e {
        IpamError::Full(..) => StatusCode::BAD_GATEWAY,
        IpamError::OutOfRange(..) => StatusCode::BAD_REQUEST,
        IpamError::InUse(..) => StatusCode::CONFLICT,
        IpamError::NotAllocated(..) => StatusCode::NOT_FOUND,
        IpamError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// What the IPAM API works with.
pub struct IpamApi {
    pub config: Arc<crate::option::DaemonConfig>,
    pub ipam: Arc<Mutex<Ipam>>,
}

/// `/v1/ipam` and `/v1/ipam/{ip}`.
pub fn routes(api: Arc<IpamApi>) -> axum::Router {
    use axum::routing::post;
    axum::Router::new()
        .route("/v1/ipam", post(allocate_next))
        .route("/v1/ipam/{ip}", post(allocate_ip).delete(release))
        .with_state(api)
}

/// Checks `family` and `pool`; only IPv4 from the default pool exists.
fn check_family_pool(uri: &Uri) -> Result<std::collections::BTreeMap<String, String>, Response> {
    let q = query_params(uri);
    match q.get("family").map(String::as_str) {
        None | Some("") | Some("ipv4") => {}
        Some("ipv6") => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "IPv6 is not enabled on this node",
            ))
        }
        Some(other) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("invalid family {other:?}: expected ipv4, ipv6 or empty"),
            ))
        }
    }
    match q.get("pool").map(String::as_str) {
        None | Some("") | Some("default") => Ok(q),
        Some(other) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("unknown IPAM pool {other:?}"),
        )),
    }
}

/// `POST /ipam`: the next free address, with the gateway the pod should use.
async fn allocate_next(State(d): State<Arc<IpamApi>>, uri: Uri, headers: HeaderMap) -> Response {
    let q = match check_family_pool(&uri) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let owner = q.get("owner").cloned().unwrap_or_default();
    let expiring = headers
        .get("expiration")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let result = d
        .ipam
        .lock()
        .expect("ipam lock")
        .allocate_next(&owner, expiring);
    let (ip, alloc) = match result {
        Ok(r) => r,
        Err(e) => {
            return error(
                ipam_status(&e),
                format!("failed to allocate IPv4 address: {e}"),
            );
        }
    };
    tracing::info!(subsys = "ipam", ip = %ip, owner = %owner, "Allocated IP");
    let c = &d.config;
    let resp = IpamResponse {
        address: AddressPair {
            ipv4: ip.to_string(),
            ipv4_expiration_uuid: alloc.expiration_uuid.clone(),
            ..Default::default()
        },
        ipv4: Some(IpamAddressResponse {
            ip: ip.to_string(),
            gateway: c.router_ip.to_string(),
            cidrs: vec![c.pod_cidr()],
            expiration_uuid: alloc.expiration_uuid,
            ..Default::default()
        }),
        ipv6: None,
        host_addressing: crate::api::server::node_addressing(c),
    };
    (StatusCode::CREATED, Json(resp)).into_response()
}

fn parse_ip(raw: &str) -> Result<Ipv4Addr, Response> {
    raw.parse().map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            format!("invalid IP address {raw:?}"),
        )
    })
}

/// `POST /ipam/{ip}`: a specific address.
async fn allocate_ip(State(d): State<Arc<IpamApi>>, Path(raw): Path<String>, uri: Uri) -> Response {
    let q = match check_family_pool(&uri) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let ip = match parse_ip(&raw) {
        Ok(ip) => ip,
        Err(r) => return r,
    };
    let owner = q.get("owner").cloned().unwrap_or_default();
    match d.ipam.lock().expect("ipam lock").allocate_ip(ip, &owner) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => error(ipam_status(&e), e.to_string()),
    }
}

/// `DELETE /ipam/{ip}`.
async fn release(State(d): State<Arc<IpamApi>>, Path(raw): Path<String>, uri: Uri) -> Response {
    if let Err(r) = check_family_pool(&uri) {
        return r;
    }
    let ip = match parse_ip(&raw) {
        Ok(ip) => ip,
        Err(r) => return r,
    };
    if ip == d.config.router_ip {
        return error(
            StatusCode::BAD_REQUEST,
            format!("IP {ip} is the router address and cannot be released"),
        );
    }
    match d.ipam.lock().expect("ipam lock").release(ip) {
        Ok(a) => {
            tracing::info!(subsys = "ipam", ip = %ip, owner = %a.owner, "Released IP");
            StatusCode::OK.into_response()
        }
        Err(e) => error(ipam_status(&e), e.to_string()),
    }
}
