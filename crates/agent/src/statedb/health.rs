//! The `health` table: our parts' health in 1.16's module health model
//! (`types.Status`, identified by a module path under `agent` and a
//! component path), which `cilium-dbg status` prints as Modules Health.

use super::tables::ZERO_TIME;
use super::Row;
use crate::status::AgentStatus;
use api::endpoint::EndpointState;
use api::models::{ControllerStatus, State};
use controlplane::endpoint::Endpoints;
use serde_json::json;
use std::time::SystemTime;

/// Where each controller sits in 1.16's module tree: (module path under
/// `agent`, component). A controller not listed is a control-plane
/// module of its own name.
const CONTROLLER_MODULES: &[(&str, &[&str], &str)] = &[
    (
        "agent-liveness-updater",
        &["datapath", "agent-liveness-updater"],
        "timer-job-agent-liveness-updater",
    ),
    (
        "sync-host-ips",
        &["controlplane", "ipcache"],
        "sync-host-ips",
    ),
    (
        "ipam-expiration",
        &["controlplane", "ipam"],
        "ipam-expiration",
    ),
    (
        "write-cni-file",
        &["controlplane", "cni-config"],
        "write-cni-file",
    ),
    (
        "cilium-health-ep",
        &["controlplane", "cilium-health"],
        "cilium-health-ep",
    ),
    (
        crate::status::KVSTORE_HEALTH,
        &["infra", "kvstore"],
        "kvstore-health",
    ),
];

struct Status<'a> {
    module: Vec<&'a str>,
    component: Vec<String>,
    ok: bool,
    message: String,
    error: String,
    last_ok: String,
    updated: String,
    count: u64,
}

impl Status<'_> {
    fn row(self) -> Row {
        let mut module = vec!["agent"];
        module.extend(self.module);
        let id = format!("{}.{}", module.join("."), self.component.join("."));
        Row {
            key: id.into_bytes(),
            obj: json!({
                "ID": { "Module": module, "Component": self.component },
                "Level": if self.ok { "OK" } else { "Degraded" },
                "Message": self.message,
                "Error": self.error,
                "LastOK": self.last_ok,
                "Updated": self.updated,
                "Stopped": ZERO_TIME,
                "Final": "",
                "Count": self.count,
            }),
        }
    }
}

fn controller(c: &ControllerStatus) -> Status<'static> {
    let (module, component) = CONTROLLER_MODULES
        .iter()
        .find(|(name, _, _)| *name == c.name)
        .map(|(_, module, component)| (module.to_vec(), (*component).to_owned()))
        .unwrap_or_else(|| (vec!["controlplane"], c.name.clone()));
    let s = &c.status;
    let failing = s.consecutive_failure_count > 0;
    let last_ok = s
        .last_success_timestamp
        .clone()
        .unwrap_or_else(|| ZERO_TIME.into());
    let updated = match (&s.last_success_timestamp, &s.last_failure_timestamp) {
        (Some(ok), Some(failed)) => ok.max(failed).clone(),
        (Some(t), None) | (None, Some(t)) => t.clone(),
        (None, None) => ZERO_TIME.into(),
    };
    Status {
        module,
        component: vec![component],
        ok: !failing,
        message: if failing {
            "Failed".into()
        } else {
            "OK".into()
        },
        error: if failing {
            s.last_failure_msg.clone()
        } else {
            String::new()
        },
        last_ok,
        updated,
        count: s.success_count + s.failure_count,
    }
}

/// The rows: each controller, the API server connection, each endpoint's
/// regeneration and the sysctls set.
/// `since` stands for when what has no time of its own (an endpoint, the
/// connection) was last seen well: a stable time, so a row's revision
/// changes only with its state.
pub(super) fn rows(status: &AgentStatus, endpoints: &Endpoints, since: SystemTime) -> Vec<Row> {
    let now = api::timefmt::rfc3339(since);
    let mut out: Vec<Status> = status
        .controllers
        .snapshot()
        .iter()
        .map(controller)
        .collect();
    if let Some(k) = &status.kubernetes {
        let k = k.status();
        let ok = k.state == State::Ok;
        out.push(Status {
            module: vec!["infra", "k8s-client"],
            component: vec!["api-server-connection".into()],
            ok,
            message: if ok {
                k.msg.clone()
            } else {
                "Kubernetes service is not ready".into()
            },
            error: if ok { String::new() } else { k.msg.clone() },
            last_ok: if ok { now.clone() } else { ZERO_TIME.into() },
            updated: now.clone(),
            count: 1,
        });
    }
    for ep in endpoints.list() {
        let pod = ep.pod_name();
        let name = if pod.is_empty() {
            format!("cilium-endpoint-{}", ep.id)
        } else {
            format!("cilium-endpoint-{} ({pod})", ep.id)
        };
        let ok = ep.state == EndpointState::Ready;
        out.push(Status {
            module: vec!["controlplane", "endpoint-manager"],
            component: vec![name, "datapath-regenerate".into()],
            ok,
            message: if ok {
                "Endpoint regeneration successful".into()
            } else {
                format!("Endpoint is {}", ep.state.as_str())
            },
            error: String::new(),
            last_ok: if ok { now.clone() } else { ZERO_TIME.into() },
            updated: now.clone(),
            count: 1,
        });
    }
    let sysctls = netdev::sysctl::written();
    let last_set = sysctls
        .iter()
        .map(|w| w.at)
        .max()
        .map_or_else(|| ZERO_TIME.into(), api::timefmt::rfc3339);
    out.push(Status {
        module: vec!["datapath", "sysctl"],
        component: vec!["job-reconcile".into()],
        ok: true,
        message: "OK".into(),
        error: String::new(),
        last_ok: last_set.clone(),
        updated: last_set,
        count: sysctls.len() as u64,
    });
    out.into_iter().map(Status::row).collect()
}
