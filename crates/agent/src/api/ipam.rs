//! `/ipam` and `/ip` handlers.

use crate::api::server::{error, query_params};
use api::ipam::{AddressPair, IpamAddressResponse, IpamResponse};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use controlplane::ipam::{Allocation, Families, Ipam, IpamError, PoolAddr};
use std::net::{IpAddr, Ipv6Addr};
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
    /// IPv4's allocator; None on an IPv6-only node.
    pub ipam: Option<Arc<Mutex<Ipam>>>,
    /// IPv6's allocator; None while IPv6 is off.
    pub ipam6: Option<Arc<Mutex<Ipam<Ipv6Addr>>>>,
}

impl IpamApi {
    fn families(&self) -> Families {
        Families {
            ipv4: self.ipam.is_some(),
            ipv6: self.ipam6.is_some(),
        }
    }

    /// Runs `v4` or `v6` on the allocator of `ip`'s family, or answers
    /// that the node does not run it.
    fn with_allocator<R>(
        &self,
        ip: IpAddr,
        v4: impl FnOnce(&mut Ipam, std::net::Ipv4Addr) -> R,
        v6: impl FnOnce(&mut Ipam<Ipv6Addr>, Ipv6Addr) -> R,
    ) -> Result<R, Response> {
        match (ip, &self.ipam, &self.ipam6) {
            (IpAddr::V4(ip), Some(ipam), _) => Ok(v4(&mut ipam.lock().expect("ipam lock"), ip)),
            (IpAddr::V6(ip), _, Some(ipam6)) => Ok(v6(&mut ipam6.lock().expect("ipam lock"), ip)),
            (IpAddr::V4(_), None, _) => Err(not_enabled("IPv4")),
            (IpAddr::V6(_), _, None) => Err(not_enabled("IPv6")),
        }
    }
}

/// `/v1/ipam` and `/v1/ipam/{ip}`.
pub fn routes(api: Arc<IpamApi>) -> axum::Router {
    use axum::routing::post;
    axum::Router::new()
        .route("/v1/ipam", post(allocate_next))
        .route("/v1/ipam/{ip}", post(allocate_ip).delete(release))
        .with_state(api)
}

/// Checks `family` and `pool` (only the default pool exists) against the
/// families this node has.
fn check_family_pool(
    uri: &Uri,
    node: Families,
) -> Result<(std::collections::BTreeMap<String, String>, Families), Response> {
    let q = query_params(uri);
    let families = match q.get("family").map(String::as_str) {
        None | Some("") => node,
        Some("ipv4") if node.ipv4 => Families {
            ipv4: true,
            ipv6: false,
        },
        Some("ipv6") if node.ipv6 => Families {
            ipv4: false,
            ipv6: true,
        },
        Some("ipv4") => return Err(not_enabled("IPv4")),
        Some("ipv6") => return Err(not_enabled("IPv6")),
        Some(other) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("invalid family {other:?}: expected ipv4, ipv6 or empty"),
            ))
        }
    };
    match q.get("pool").map(String::as_str) {
        None | Some("") | Some("default") => Ok((q, families)),
        Some(other) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("unknown IPAM pool {other:?}"),
        )),
    }
}

/// The next free address of one family's allocator.
fn allocate_from<A: PoolAddr>(
    ipam: &Mutex<Ipam<A>>,
    owner: &str,
    expiring: bool,
) -> Result<(A, Allocation), Response> {
    let result = ipam
        .lock()
        .expect("ipam lock")
        .allocate_next(owner, expiring);
    let (ip, alloc) = result.map_err(|e| {
        error(
            ipam_status(&e),
            format!("failed to allocate {} address: {e}", A::FAMILY),
        )
    })?;
    tracing::info!(subsys = "ipam", ip = %ip, owner = %owner, "Allocated IP");
    Ok((ip, alloc))
}

/// `POST /ipam`: the next free address of each family asked for, with the
/// gateway the pod should use. Either both are handed out or neither.
async fn allocate_next(State(d): State<Arc<IpamApi>>, uri: Uri, headers: HeaderMap) -> Response {
    let (q, families) = match check_family_pool(&uri, d.families()) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let owner = q.get("owner").cloned().unwrap_or_default();
    let expiring = headers
        .get("expiration")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let c = &d.config;
    let mut resp = IpamResponse {
        address: AddressPair::default(),
        ipv4: None,
        ipv6: None,
        host_addressing: crate::api::server::node_addressing(c),
    };
    if let (true, Some(ipam), Some(v4)) = (families.ipv4, &d.ipam, c.ipv4) {
        let (ip, alloc) = match allocate_from(ipam, &owner, expiring) {
            Ok(r) => r,
            Err(r) => return r,
        };
        resp.address.ipv4 = ip.to_string();
        resp.address.ipv4_expiration_uuid = alloc.expiration_uuid.clone();
        resp.ipv4 = Some(IpamAddressResponse {
            ip: ip.to_string(),
            gateway: v4.router_ip.to_string(),
            cidrs: c.pod_cidr().into_iter().collect(),
            expiration_uuid: alloc.expiration_uuid,
            ..Default::default()
        });
    }
    if let (true, Some(ipam6), Some(v6)) = (families.ipv6, &d.ipam6, c.ipv6) {
        let (ip, alloc) = match allocate_from(ipam6, &owner, expiring) {
            Ok(r) => r,
            Err(r) => {
                if let (Ok(v4), Some(ipam)) = (resp.address.ipv4.parse(), &d.ipam) {
                    let _ = ipam.lock().expect("ipam lock").release(v4);
                }
                return r;
            }
        };
        resp.address.ipv6 = ip.to_string();
        resp.address.ipv6_expiration_uuid = alloc.expiration_uuid.clone();
        resp.ipv6 = Some(IpamAddressResponse {
            ip: ip.to_string(),
            gateway: v6.router_ip.to_string(),
            cidrs: c.pod_cidr6().into_iter().collect(),
            expiration_uuid: alloc.expiration_uuid,
            ..Default::default()
        });
    }
    (StatusCode::CREATED, Json(resp)).into_response()
}

fn parse_ip(raw: &str) -> Result<IpAddr, Response> {
    raw.parse().map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            format!("invalid IP address {raw:?}"),
        )
    })
}

/// `POST /ipam/{ip}`: a specific address.
async fn allocate_ip(State(d): State<Arc<IpamApi>>, Path(raw): Path<String>, uri: Uri) -> Response {
    let q = match check_family_pool(&uri, d.families()) {
        Ok((q, _)) => q,
        Err(r) => return r,
    };
    let ip = match parse_ip(&raw) {
        Ok(ip) => ip,
        Err(r) => return r,
    };
    let owner = q.get("owner").cloned().unwrap_or_default();
    let result = d.with_allocator(
        ip,
        |ipam, ip| ipam.allocate_ip(ip, &owner).map(drop),
        |ipam, ip| ipam.allocate_ip(ip, &owner).map(drop),
    );
    match result {
        Err(r) => r,
        Ok(result) => match result {
            Ok(()) => StatusCode::OK.into_response(),
            Err(e) => error(ipam_status(&e), e.to_string()),
        },
    }
}

fn not_enabled(family: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        format!("{family} is not enabled on this node"),
    )
}

/// `DELETE /ipam/{ip}`.
async fn release(State(d): State<Arc<IpamApi>>, Path(raw): Path<String>, uri: Uri) -> Response {
    if let Err(r) = check_family_pool(&uri, d.families()) {
        return r;
    }
    let ip = match parse_ip(&raw) {
        Ok(ip) => ip,
        Err(r) => return r,
    };
    let c = &d.config;
    let routers = [
        c.ipv4.map(|p| IpAddr::from(p.router_ip)),
        c.ipv6.map(|p| IpAddr::from(p.router_ip)),
    ];
    if routers.contains(&Some(ip)) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("IP {ip} is the router address and cannot be released"),
        );
    }
    let result =
        match d.with_allocator(ip, |ipam, ip| ipam.release(ip), |ipam, ip| ipam.release(ip)) {
            Ok(result) => result,
            Err(r) => return r,
        };
    match result {
        Ok(a) => {
            tracing::info!(subsys = "ipam", ip = %ip, owner = %a.owner, "Released IP");
            StatusCode::OK.into_response()
        }
        Err(e) => error(ipam_status(&e), e.to_string()),
    }
}
