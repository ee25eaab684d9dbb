//! ADD, DEL, CHECK, STATUS and GC against the agent's REST API.

use crate::env::Env;
use crate::error::*;
use crate::netconf::NetConf;
use crate::result::AddResult;
use abi::endpoint::format_mac;
use api::endpoint::{DatapathConfiguration, EndpointChangeRequest};
use api::ipam::{AddressPair, IpamResponse};
use netdev::{NetNs, Netlink};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn client() -> Result<api::Client, CniError> {
    Ok(api::Client::from_host(None)?.with_timeout(std::time::Duration::from_secs(30)))
}

/// Host-side name: `lxc` + 12 hex of SHA-256 of `<container>:<ifname>`, as
/// Cilium 1.16 derives it. The peer is created inside the pod's namespace
/// under its final name, so no temporary name is needed.
pub fn host_veth_name(container_id: &str, ifname: &str) -> String {
    let digest = Sha256::digest(format!("{container_id}:{ifname}").as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("lxc{hex}")
}

fn open_netns(path: &str) -> Result<NetNs, CniError> {
    NetNs::open(std::path::Path::new(path))
        .map_err(|e| CniError::new(INVALID_ENV, format!("failed to open netns {path:?}: {e}")))
}

/// Undo actions of a half-done ADD, run in reverse on failure.
#[derive(Default)]
struct Undo {
    release_ip: Option<Ipv4Addr>,
    release_ip6: Option<Ipv6Addr>,
    delete_veth: Option<String>,
}

pub async fn add(env: &Env, conf: &NetConf) -> Result<Value, CniError> {
    env.require(&["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"])?;
    if conf.prev_result.is_some() {
        return Err(CniError::new(
            INVALID_CONFIG,
            "prevResult given but chaining is not configured (chaining-mode none)",
        ));
    }
    env.pod_labels()?;
    let ns = open_netns(&env.netns)?;
    let client = client()?;
    let status = client.get_json::<PodConfig>("/config", &[])?.status;
    // A netconf MTU sets both, as Cilium's plugin does.
    let link = PodLink {
        mtu: conf.mtu.unwrap_or(status.device_mtu),
        route_mtu: conf.mtu.unwrap_or(status.route_mtu),
    };

    let host_nl = Netlink::connect()?;
    let pod_nl = Netlink::connect_in(&ns)?;

    let mut undo = Undo::default();
    let result = add_steps(env, &client, &host_nl, &pod_nl, &ns, &link, &mut undo).await;
    match result {
        Ok(r) => Ok(r.to_json(&conf.cni_version)),
        Err(e) => {
            if let Some(name) = &undo.delete_veth {
                let _ = netdev::veth::delete_by_name(&host_nl, name).await;
            }
            let ips = undo.release_ip.map(IpAddr::from).into_iter();
            for ip in ips.chain(undo.release_ip6.map(IpAddr::from)) {
                let _ = client.call("DELETE", &format!("/ipam/{ip}"), &[], None);
            }
            Err(e)
        }
    }
}

/// What ADD reads of `GET /config` (Cilium's `DaemonConfiguration`): the
/// MTUs. The rest, most of it the 10 KB `daemonConfigurationMap`, is
/// skipped unread rather than built into trees the plugin never looks at.
#[derive(serde::Deserialize)]
struct PodConfig {
    status: PodConfigStatus,
}

#[derive(serde::Deserialize)]
struct PodConfigStatus {
    #[serde(rename = "deviceMTU")]
    device_mtu: u32,
    #[serde(rename = "routeMTU")]
    route_mtu: u32,
}

/// How the pod's interface is set up: the MTUs of the device and of the
/// routes out of it.
#[derive(Clone, Copy)]
struct PodLink {
    mtu: u32,
    route_mtu: u32,
}

async fn add_steps(
    env: &Env,
    client: &api::Client,
    host_nl: &Netlink,
    pod_nl: &Netlink,
    ns: &NetNs,
    link: &PodLink,
    undo: &mut Undo,
) -> Result<AddResult, CniError> {
    let PodLink { mtu, route_mtu } = *link;
    let owner = api::ipam::owner(env.pod_namespace(), env.pod_name(), &env.container_id);
    let body = client.call(
        "POST",
        &format!("/ipam?owner={}", api::client::escape(&owner)),
        &[("expiration", "true")],
        None,
    )?;
    let ipam: IpamResponse = serde_json::from_slice(&body)
        .map_err(|e| CniError::new(PLUGIN_FAILURE, format!("malformed IPAM response: {e}")))?;
    let ipv4 = address_of::<Ipv4Addr>(ipam.ipv4.as_ref(), "IPv4")?;
    let ipv6 = address_of::<Ipv6Addr>(ipam.ipv6.as_ref(), "IPv6")?;
    undo.release_ip = ipv4.map(|(ip, _)| ip);
    undo.release_ip6 = ipv6.map(|(ip, _)| ip);
    if ipv4.is_none() && ipv6.is_none() {
        return Err(CniError::new(PLUGIN_FAILURE, "IPAM returned no address"));
    }

    let host_name = host_veth_name(&env.container_id, &env.ifname);
    // create_pod_veth removes a leftover of an ADD that died half way
    let veth =
        netdev::veth::create_pod_veth(host_nl, pod_nl, ns, &host_name, &env.ifname, mtu).await?;
    undo.delete_veth = Some(host_name.clone());
    netdev::sysctl::write(&format!("net/ipv4/conf/{host_name}/rp_filter"), "0")?;

    if ipv6.is_some() {
        // as Cilium's plugin: IPv6 on in a dual-stack pod
        ns.run(|| netdev::sysctl::write_in_pod_netns("net.ipv6.conf.all.disable_ipv6", "0"))??;
    }
    netdev::veth::address_pod(pod_nl, veth.pod_index, ipv4, ipv6, route_mtu).await?;

    let (pod_mac, host_mac) = (format_mac(&veth.pod_mac), format_mac(&veth.host_mac));
    let req = EndpointChangeRequest {
        container_id: env.container_id.clone(),
        container_interface_name: env.ifname.clone(),
        state: "waiting-for-identity".into(),
        addressing: Some(AddressPair {
            ipv4: ipv4.map(|(ip, _)| ip.to_string()).unwrap_or_default(),
            ipv4_expiration_uuid: ipam.address.ipv4_expiration_uuid.clone(),
            ipv6: ipv6.map(|(ip, _)| ip.to_string()).unwrap_or_default(),
            ipv6_expiration_uuid: ipam.address.ipv6_expiration_uuid.clone(),
            ..Default::default()
        }),
        k8s_pod_name: env.pod_name().to_owned(),
        k8s_namespace: env.pod_namespace().to_owned(),
        k8s_uid: env.pod_uid().to_owned(),
        labels: env.pod_labels()?,
        interface_name: host_name.clone(),
        interface_index: i64::from(veth.host_index),
        mac: pod_mac.clone(),
        host_mac: host_mac.clone(),
        sync_build_endpoint: true,
        datapath_configuration: Some(DatapathConfiguration::default()),
        ..Default::default()
    };
    let payload = serde_json::to_vec(&req).expect("request serializes");
    client.call("PUT", "/endpoint/cilium-local:0", &[], Some(&payload))?;
    Ok(AddResult {
        host_ifname: host_name,
        host_mac,
        pod_ifname: env.ifname.clone(),
        pod_mac,
        netns: env.netns.clone(),
        ipv4,
        ipv6,
    })
}

/// The pod's address and gateway of one family, when the agent handed
/// out one.
fn address_of<A: std::str::FromStr>(
    family: Option<&api::ipam::IpamAddressResponse>,
    name: &str,
) -> Result<Option<(A, A)>, CniError> {
    let Some(a) = family else {
        return Ok(None);
    };
    let bad = |what: &str, v: &str| {
        CniError::new(
            PLUGIN_FAILURE,
            format!("IPAM returned {name} {what} {v:?}, not an {name} address"),
        )
    };
    let ip = a.ip.parse().map_err(|_| bad("address", &a.ip))?;
    let gateway = a.gateway.parse().map_err(|_| bad("gateway", &a.gateway))?;
    Ok(Some((ip, gateway)))
}

/// DEL succeeds when the endpoint, the netns or the agent is already gone:
/// a restarted agent drops endpoints whose interface no longer exists.
pub async fn del(env: &Env, _conf: &NetConf) -> Result<(), CniError> {
    env.require(&["CNI_CONTAINERID", "CNI_IFNAME"])?;
    let body = serde_json::json!({ "container-id": env.container_id }).to_string();
    match client()?.call("DELETE", "/endpoint", &[], Some(body.as_bytes())) {
        Ok(_) => {}
        Err(e) if e.status() == Some(404) => {}
        Err(api::ClientError::Unreachable { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    if env.netns.is_empty() {
        return Ok(());
    }
    let Ok(ns) = NetNs::open(std::path::Path::new(&env.netns)) else {
        return Ok(());
    };
    let pod_nl = Netlink::connect_in(&ns)?;
    netdev::veth::delete_by_name(&pod_nl, &env.ifname).await?;
    Ok(())
}

pub async fn check(env: &Env, conf: &NetConf) -> Result<(), CniError> {
    env.require(&["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"])?;
    let prev = conf
        .prev_result
        .as_ref()
        .ok_or_else(|| CniError::new(INVALID_CONFIG, "CHECK needs prevResult"))?;
    let health: api::endpoint::EndpointHealth = client()?
        .get_json(
            &format!("/endpoint/container-id:{}/healthz", env.container_id),
            &[],
        )
        .map_err(|e| match e.status() {
            Some(404) => CniError::new(
                UNKNOWN_CONTAINER,
                format!("no endpoint for container {}", env.container_id),
            ),
            _ => e.into(),
        })?;
    if health.overall_health == "Failure" {
        return Err(CniError::new(
            PLUGIN_FAILURE,
            "HealthzFailed: endpoint health is Failure",
        ));
    }
    let ns = open_netns(&env.netns)?;
    let pod_nl = Netlink::connect_in(&ns)?;
    let link = pod_nl.link_by_name(&env.ifname).await?.ok_or_else(|| {
        CniError::new(
            PLUGIN_FAILURE,
            format!("interface {} missing in {}", env.ifname, env.netns),
        )
    })?;
    for iface in prev["interfaces"].as_array().into_iter().flatten() {
        if iface["name"] == env.ifname.as_str() {
            let want = iface["mac"].as_str().unwrap_or_default();
            let have = format_mac(&link.mac);
            if !want.is_empty() && want != have {
                return Err(CniError::new(
                    PLUGIN_FAILURE,
                    format!("interface {} has MAC {have} instead of {want}", env.ifname),
                ));
            }
        }
    }
    let have = pod_nl.ipv4_addrs(Some(link.index)).await?;
    for ip in prev["ips"].as_array().into_iter().flatten() {
        let addr = ip["address"].as_str().unwrap_or_default();
        let bare = addr.split('/').next().unwrap_or_default();
        if !have.iter().any(|(_, a, _)| a.to_string() == bare) {
            return Err(CniError::new(
                PLUGIN_FAILURE,
                format!("address {addr} missing on {}", env.ifname),
            ));
        }
    }
    Ok(())
}

/// CNI 1.1 STATUS: ready when the agent answers.
pub fn status() -> Result<(), CniError> {
    client()?
        .get_json::<api::models::StatusResponse>("/healthz", &[("brief", "true")])
        .map(|_| ())
        .map_err(|e| {
            CniError::new(
                PLUGIN_NOT_AVAILABLE,
                format!("cilium-agent is not ready: {e}"),
            )
        })
}

/// CNI 1.1 GC: removes endpoints of attachments the runtime no longer has.
pub fn gc(conf: &NetConf) -> Result<(), CniError> {
    let Some(valid) = &conf.valid_attachments else {
        return Ok(());
    };
    let client = client()?;
    let eps: Vec<api::endpoint::Endpoint> = client.get_json("/endpoint", &[])?;
    for ep in eps {
        let ids = &ep.status.external_identifiers;
        if ids.container_id.is_empty() {
            continue;
        }
        let kept = valid.iter().any(|a| {
            a.container_id == ids.container_id
                && (a.ifname.is_empty()
                    || ids.container_interface_name.is_empty()
                    || a.ifname == ids.container_interface_name)
        });
        if !kept {
            match client.call("DELETE", &format!("/endpoint/{}", ep.id), &[], None) {
                Ok(_) => {}
                Err(e) if e.status() == Some(404) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
