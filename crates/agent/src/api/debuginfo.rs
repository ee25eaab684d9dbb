//! `GET /debuginfo`: what Cilium's `cilium-dbg debuginfo` collects in one
//! answer (and `cilium-dbg version` reads the daemon's version from).

use api::models::{DebugInfo, DebugInfoEncryption, Policy};
use axum::extract::State;
use axum::Json;
use controlplane::endpoint::Endpoints;
use controlplane::ipam::Ipam;
use controlplane::policies::Policies;
use controlplane::services::Services;
use std::sync::{Arc, Mutex};

/// `major.minor.patch` of a kernel release (`6.8.0-45-generic` ->
/// `6.8.0`, `4-generic` -> `4.0.0`), as Cilium reduces `uname -r`; None
/// when it has more than three dotted parts or none are numbers.
pub fn kernel_version(release: &str) -> Option<String> {
    let mut parts: Vec<&str> = release.trim().split('.').collect();
    if parts.len() > 3 {
        return None;
    }
    let last = parts.pop()?;
    let digits = last.len() - last.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let patch = if digits == 0 { "0" } else { &last[..digits] };
    parts.push(patch);
    while parts.len() < 3 {
        parts.push("0");
    }
    parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .then(|| parts.join("."))
}

fn running_kernel() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(release) => kernel_version(&release)
            .unwrap_or_else(|| format!("Error: unable to get kernel version from {release:?}\n")),
        Err(e) => format!("Error: reading /proc/sys/kernel/osrelease: {e}\n"),
    }
}

/// What debuginfo gathers.
pub struct Sources {
    pub status: Arc<crate::status::AgentStatus>,
    pub endpoints: Arc<Endpoints>,
    pub ipam: Option<Arc<Mutex<Ipam>>>,
    pub ipam6: Option<Arc<Mutex<Ipam<std::net::Ipv6Addr>>>>,
    pub policies: Arc<Policies>,
    pub services: Arc<Services>,
}

/// `GET /v1/debuginfo`.
pub fn routes(sources: Arc<Sources>) -> axum::Router {
    axum::Router::new()
        .route("/v1/debuginfo", axum::routing::get(get))
        .with_state(sources)
}

/// Debug text of the subsystems that have some: IPAM's allocations.
fn subsystems(d: &Sources) -> std::collections::BTreeMap<String, String> {
    let text = [
        allocations(d.ipam.as_deref()),
        allocations(d.ipam6.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    [("ipam".to_owned(), text)].into_iter().collect()
}

/// One family's IPAM summary and allocations; None when the node does
/// not run the family.
fn allocations<A: controlplane::ipam::PoolAddr>(ipam: Option<&Mutex<Ipam<A>>>) -> Option<String> {
    let ipam = ipam?.lock().expect("ipam lock");
    let mut text = ipam.status_line();
    for (ip, a) in ipam.allocations() {
        text.push_str(&format!("\n{ip} ({})", a.owner));
    }
    Some(text)
}

async fn get(State(d): State<Arc<Sources>>) -> Json<DebugInfo> {
    let endpoints = d.endpoints.list().iter().map(|e| e.to_api()).collect();
    let (docs, revision) = d.policies.get(&[]);
    Json(DebugInfo {
        cilium_version: api::full_version(),
        kernel_version: running_kernel(),
        cilium_status: d.status.collect(false),
        endpoint_list: endpoints,
        service_list: d.services.list(),
        policy: Policy {
            policy: crate::api::policy::joined(&docs),
            revision,
        },
        cilium_memory_map: std::fs::read_to_string("/proc/self/maps").unwrap_or_default(),
        cilium_nodemonitor_memory_map: String::new(),
        environment_variables: d
            .status
            .config
            .all
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect(),
        subsystem: subsystems(&d),
        encryption: DebugInfoEncryption::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::kernel_version;

    #[test]
    fn kernel_release_reduces_to_major_minor_patch_as_cilium_does() {
        for (release, want) in [
            ("6.8.0-45-generic", Some("6.8.0")),
            ("6.18.44-fc-v595", Some("6.18.44")),
            ("4.9-040917-generic", Some("4.9.0")),
            ("4-generic", Some("4.0.0")),
            ("5.10.rc1", Some("5.10.0")),
            ("6.8.0\n", Some("6.8.0")),
            ("1.2.3.4", None),
            ("x.y.z", None),
        ] {
            assert_eq!(kernel_version(release).as_deref(), want, "{release}");
        }
    }
}
