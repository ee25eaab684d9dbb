//! Datapath records and agent notifications into Hubble's events, as
//! Cilium 1.16's parser fills them: verdict and drop reason, trace point
//! and reason, `is_reply` from conntrack, traffic direction, both
//! endpoints and services from what the agent knows of their addresses.

// Cilium still fills the fields its proto deprecates (drop_reason, reply,
// Summary), and clients of this release read them.
#![allow(deprecated)]

use super::packet;
use abi::Plain;
use controlplane::AgentNotify;
use hubble::flow::{self, Flow};
use std::net::IpAddr;

/// What the agent knows of addresses, for the flows' two ends.
pub trait Resolve: Send + Sync {
    /// The endpoint behind `ip`; `identity` is the datapath's, 0 if it
    /// gave none.
    fn endpoint(&self, ip: IpAddr, identity: u32) -> flow::Endpoint;
    /// The same, written over `out`, so that a resolver can reuse its
    /// strings' buffers (the observer refills evicted flows' endpoints).
    fn endpoint_into(&self, ip: IpAddr, identity: u32, out: &mut flow::Endpoint) {
        *out = self.endpoint(ip, identity);
    }
    /// The Service whose frontend is `ip:port`.
    fn service(&self, ip: IpAddr, port: u16) -> Option<flow::Service>;
    /// The address of the pod whose container runs in cgroup `id`.
    fn cgroup_pod(&self, id: u64) -> Option<IpAddr>;
}

// datapath trace reasons (`TRACE_REASON_*`, low 7 bits of the reason byte)
const REASON_CT_REPLY: u8 = 2;
const REASON_UNKNOWN: u8 = 5;
const REASON_SRV6_ENCAP: u8 = 6;
const REASON_SRV6_DECAP: u8 = 7;
const REASON_ENCRYPT_OVERLAY: u8 = 8;
const REASON_ENCRYPTED: u8 = 0x80;

/// The trace point Hubble names (the datapath's 0, to-lxc, is 101).
fn observation_point(p: u8) -> flow::TraceObservationPoint {
    if p == abi::events::TRACE_TO_LXC {
        flow::TraceObservationPoint::ToEndpoint
    } else {
        flow::TraceObservationPoint::try_from(i32::from(p))
            .unwrap_or(flow::TraceObservationPoint::UnknownPoint)
    }
}

/// Hubble's reason numbers leave 0 for unknown: the datapath's below 5
/// move up by one, 5 is unknown, the rest stay.
fn trace_reason(reason: u8) -> flow::TraceReason {
    let n = match reason {
        REASON_UNKNOWN => 0,
        r if r < REASON_UNKNOWN => i32::from(r) + 1,
        r => i32::from(r),
    };
    flow::TraceReason::try_from(n).unwrap_or(flow::TraceReason::Unknown)
}

/// The record's own kind of event, and where its captured packet starts.
enum Notify {
    Drop(abi::events::DropNotify),
    Trace(abi::events::TraceNotify),
    Verdict(abi::events::PolicyVerdictNotify),
    Capture(abi::events::DebugCaptureMsg),
}

fn header_len(n: &Notify) -> usize {
    match n {
        Notify::Drop(_) => std::mem::size_of::<abi::events::DropNotify>(),
        // version 0 has no original address
        Notify::Trace(t) if t.version == 0 => 32,
        Notify::Trace(_) => std::mem::size_of::<abi::events::TraceNotify>(),
        Notify::Verdict(_) => std::mem::size_of::<abi::events::PolicyVerdictNotify>(),
        Notify::Capture(_) => std::mem::size_of::<abi::events::DebugCaptureMsg>(),
    }
}

fn read(raw: &[u8]) -> Option<Notify> {
    use abi::events as ev;
    Some(match *raw.first()? {
        ev::NOTIFY_DROP => Notify::Drop(ev::DropNotify::from_bytes(raw)?),
        ev::NOTIFY_TRACE => {
            // version 0 records are shorter than the struct
            let mut buf = [0u8; std::mem::size_of::<ev::TraceNotify>()];
            let n = raw.len().min(buf.len());
            buf[..n].copy_from_slice(&raw[..n]);
            Notify::Trace(ev::TraceNotify::from_bytes(&buf)?)
        }
        ev::NOTIFY_POLICY_VERDICT => Notify::Verdict(ev::PolicyVerdictNotify::from_bytes(raw)?),
        ev::NOTIFY_DBG_CAPTURE => Notify::Capture(ev::DebugCaptureMsg::from_bytes(raw)?),
        _ => return None,
    })
}

fn cap_len(n: &Notify) -> usize {
    usize::from(match n {
        Notify::Drop(d) => d.len_cap,
        Notify::Trace(t) => t.len_cap,
        Notify::Verdict(v) => v.len_cap,
        Notify::Capture(c) => c.len_cap,
    })
}

/// [`flow_reusing`] with nothing to reuse.
#[cfg(test)]
pub fn flow(raw: &[u8], resolve: &dyn Resolve) -> Option<Flow> {
    flow_reusing(raw, resolve, Ends::default())
}

/// A flow's two ends, kept from a flow the observer's ring evicted: the
/// next flow's are written over them, in the buffers their strings and
/// labels already have, instead of allocating as many anew.
#[derive(Default)]
pub struct Ends {
    pub source: flow::Endpoint,
    pub destination: flow::Endpoint,
}

impl Ends {
    pub fn of(f: &mut Flow) -> Self {
        Self {
            source: f.source.take().unwrap_or_default(),
            destination: f.destination.take().unwrap_or_default(),
        }
    }
}

/// A record as a flow (without its time, UUID and node, which the
/// observer gives), its ends written over `ends`. None for records of
/// other kinds, and for socket traces of processes in no pod's cgroup
/// (Cilium's `hubble-skip-unknown-cgroup-ids`).
pub fn flow_reusing(raw: &[u8], resolve: &dyn Resolve, ends: Ends) -> Option<Flow> {
    if raw.first() == Some(&abi::events::NOTIFY_TRACE_SOCK) {
        return sock_flow(raw, resolve, ends);
    }
    l3l4_flow(raw, resolve, ends)
}

/// A socket LB translation: the pod's socket and where it was sent (the
/// other way round for reverse translations), with no packet.
fn sock_flow(raw: &[u8], resolve: &dyn Resolve, ends: Ends) -> Option<Flow> {
    use abi::events as ev;
    let n = ev::TraceSockNotify::from_bytes(raw)?;
    let v6 = n.flags & ev::TRACE_SOCK_FLAG_IPV6 != 0;
    let dst: IpAddr = if v6 {
        std::net::Ipv6Addr::from(n.dst_ip).into()
    } else {
        std::net::Ipv4Addr::new(n.dst_ip[0], n.dst_ip[1], n.dst_ip[2], n.dst_ip[3]).into()
    };
    let src = resolve.cgroup_pod(n.cgroup_id)?;
    let (mut src, mut dst, mut sport, mut dport) = (src, dst, 0u16, n.dst_port);
    let Ends {
        source: mut src_ep,
        destination: mut dst_ep,
    } = ends;
    resolve.endpoint_into(src, 0, &mut src_ep);
    resolve.endpoint_into(dst, 0, &mut dst_ep);
    let reverse = matches!(
        n.xlate_point,
        ev::XLATE_PRE_DIRECTION_REV | ev::XLATE_POST_DIRECTION_REV
    );
    if reverse {
        std::mem::swap(&mut src, &mut dst);
        std::mem::swap(&mut sport, &mut dport);
        std::mem::swap(&mut src_ep, &mut dst_ep);
    }
    let (l4, summary) = match n.l4_proto {
        ev::TRACE_SOCK_L4_TCP => (
            Some(flow::layer4::Protocol::Tcp(flow::Tcp {
                source_port: sport.into(),
                destination_port: dport.into(),
                flags: None,
            })),
            "TCP",
        ),
        ev::TRACE_SOCK_L4_UDP => (
            Some(flow::layer4::Protocol::Udp(flow::Udp {
                source_port: sport.into(),
                destination_port: dport.into(),
            })),
            "UDP",
        ),
        _ => (None, "Unknown"),
    };
    Some(Flow {
        verdict: match n.xlate_point {
            ev::XLATE_PRE_DIRECTION_FWD | ev::XLATE_PRE_DIRECTION_REV => flow::Verdict::Traced,
            ev::XLATE_POST_DIRECTION_FWD | ev::XLATE_POST_DIRECTION_REV => {
                flow::Verdict::Translated
            }
            _ => flow::Verdict::Unknown,
        } as i32,
        ip: Some(flow::Ip {
            source: crate::text::ip(src),
            destination: crate::text::ip(dst),
            ip_version: if v6 {
                flow::IpVersion::IPv6
            } else {
                flow::IpVersion::IPv4
            } as i32,
            ..Default::default()
        }),
        l4: l4.map(|p| flow::Layer4 { protocol: Some(p) }),
        source_service: resolve.service(src, sport),
        destination_service: resolve.service(dst, dport),
        source: Some(src_ep),
        destination: Some(dst_ep),
        r#type: flow::FlowType::Sock as i32,
        event_type: Some(flow::CiliumEventType {
            r#type: i32::from(n.kind),
            sub_type: i32::from(n.xlate_point),
        }),
        sock_xlate_point: i32::from(n.xlate_point),
        socket_cookie: n.sock_cookie,
        cgroup_id: n.cgroup_id,
        summary: summary.into(),
        ..Default::default()
    })
}

fn l3l4_flow(raw: &[u8], resolve: &dyn Resolve, ends: Ends) -> Option<Flow> {
    let n = read(raw)?;
    let start = header_len(&n).min(raw.len());
    let end = (start + cap_len(&n)).min(raw.len());
    let mut l = packet::decode(&raw[start..end]);
    let hdr = match &n {
        Notify::Drop(d) => d.hdr,
        Notify::Trace(t) => t.hdr,
        Notify::Verdict(v) => v.hdr,
        Notify::Capture(c) => c.hdr,
    };
    let mut f = Flow {
        r#type: flow::FlowType::L3L4 as i32,
        event_type: Some(flow::CiliumEventType {
            r#type: i32::from(hdr.kind),
            sub_type: i32::from(hdr.subtype),
        }),
        ..Default::default()
    };

    // a trace of a SNATed packet names the source it had before
    if let (Notify::Trace(t), Some(ip)) = (&n, l.ip.as_mut()) {
        if let Some(orig) = original_ip(t).filter(|o| Some(*o) != l.src) {
            ip.source_xlated = std::mem::replace(&mut ip.source, crate::text::ip(orig));
            l.src = Some(orig);
        }
        ip.encrypted = t.reason & REASON_ENCRYPTED != 0;
    }

    let (src_id, dst_id) = match &n {
        Notify::Drop(d) => (d.src_label, d.dst_label),
        Notify::Trace(t) => (t.src_label, t.dst_label),
        Notify::Verdict(v) if v.flags & 0x3 == 1 => (v.remote_label, 0),
        Notify::Verdict(v) => (0, v.remote_label),
        Notify::Capture(_) => (0, 0),
    };
    let end = |ip: Option<IpAddr>, id: u32, out: &mut flow::Endpoint| match ip {
        Some(ip) => resolve.endpoint_into(ip, id, out),
        None => {
            *out = flow::Endpoint {
                identity: id,
                ..Default::default()
            }
        }
    };
    let Ends {
        mut source,
        mut destination,
    } = ends;
    end(l.src, src_id, &mut source);
    end(l.dst, dst_id, &mut destination);
    if let (Some(ip), Some(_)) = (l.src, &l.l4) {
        f.source_service = resolve.service(ip, l.src_port);
    }
    if let (Some(ip), Some(_)) = (l.dst, &l.l4) {
        f.destination_service = resolve.service(ip, l.dst_port);
    }

    match &n {
        Notify::Drop(d) => {
            f.verdict = flow::Verdict::Dropped as i32;
            f.drop_reason = u32::from(d.hdr.subtype);
        }
        Notify::Trace(t) => {
            f.verdict = flow::Verdict::Forwarded as i32;
            f.trace_observation_point = observation_point(t.hdr.subtype) as i32;
            f.trace_reason = trace_reason(t.reason & !REASON_ENCRYPTED) as i32;
            f.interface = (t.ifindex != 0).then(|| flow::NetworkInterface {
                index: t.ifindex,
                name: String::new(),
            });
            if t.hdr.subtype == abi::events::TRACE_TO_PROXY {
                f.proxy_port = u32::from(t.dst_id);
            }
        }
        Notify::Verdict(v) => {
            f.verdict = match v.verdict {
                x if x < 0 => flow::Verdict::Dropped,
                x if x > 0 => flow::Verdict::Redirected,
                _ if v.flags & 0x40 != 0 => flow::Verdict::Audit,
                _ => flow::Verdict::Forwarded,
            } as i32;
            if v.verdict < 0 {
                f.drop_reason = v.verdict.unsigned_abs();
            }
            f.auth_type = i32::from(v.auth_type);
            f.policy_match_type = u32::from((v.flags & 0x38) >> 3);
        }
        Notify::Capture(c) => {
            f.verdict = flow::Verdict::Unknown as i32;
            f.debug_capture_point = i32::from(c.hdr.subtype);
            f.interface = (c.arg1 != 0).then(|| flow::NetworkInterface {
                index: c.arg1,
                name: String::new(),
            });
        }
    }
    f.drop_reason_desc = f.drop_reason as i32;
    f.is_reply = match &n {
        Notify::Trace(t) => {
            let r = t.reason & !REASON_ENCRYPTED;
            (r != REASON_UNKNOWN && r != REASON_SRV6_ENCAP && r != REASON_SRV6_DECAP)
                .then_some(r == REASON_CT_REPLY)
        }
        Notify::Verdict(v) if v.verdict >= 0 => Some(false),
        _ => None,
    };
    f.reply = f.is_reply.unwrap_or(false);
    f.traffic_direction = direction(&n, source.id) as i32;
    f.ethernet = l.ethernet;
    f.ip = l.ip;
    f.l4 = l.l4;
    f.summary = l.summary;
    f.source = Some(source);
    f.destination = Some(destination);
    Some(f)
}

fn original_ip(t: &abi::events::TraceNotify) -> Option<IpAddr> {
    if t.version == 0 {
        return None;
    }
    let ip: IpAddr = if t.flags & 0x1 != 0 {
        std::net::Ipv6Addr::from(t.orig_ip).into()
    } else {
        std::net::Ipv4Addr::new(t.orig_ip[0], t.orig_ip[1], t.orig_ip[2], t.orig_ip[3]).into()
    };
    (!ip.is_unspecified()).then_some(ip)
}

/// Cilium's reading of which way a packet went relative to the endpoint
/// that reported it.
fn direction(n: &Notify, source_endpoint: u32) -> flow::TrafficDirection {
    use flow::TrafficDirection::{Egress, Ingress, Unknown};
    match n {
        Notify::Drop(d) if d.hdr.source != 0 => {
            if u32::from(d.hdr.source) == source_endpoint {
                Egress
            } else {
                Ingress
            }
        }
        Notify::Trace(t) if t.hdr.source != 0 => {
            let reason = t.reason & !REASON_ENCRYPTED;
            if reason == REASON_UNKNOWN {
                return Unknown;
            }
            let from_source = u32::from(t.hdr.source) == source_endpoint;
            let reply = reason == REASON_CT_REPLY;
            if reason == REASON_ENCRYPT_OVERLAY || from_source != reply {
                Egress
            } else if original_ip(t).is_some() {
                // SNATed on its way out: the source was ours
                Egress
            } else {
                Ingress
            }
        }
        Notify::Verdict(v) => match v.flags & 0x3 {
            1 => Ingress,
            2 => Egress,
            _ => Unknown,
        },
        _ => Unknown,
    }
}

/// An agent notification as Hubble's agent event; the JSON bodies are the
/// ones our control plane sends.
pub fn agent_event(what: AgentNotify, body: &serde_json::Value) -> flow::AgentEvent {
    use flow::agent_event::Notification;
    let s = |k: &str| {
        body.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let n = |k: &str| body.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let labels = || -> Vec<String> {
        body.get("labels")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let notification = match what {
        AgentNotify::Start => Notification::AgentStart(flow::TimeNotification {
            time: Some(prost_types::Timestamp::from(std::time::SystemTime::now())),
        }),
        AgentNotify::PolicyUpdated | AgentNotify::PolicyDeleted => {
            Notification::PolicyUpdate(flow::PolicyUpdateNotification {
                labels: labels(),
                revision: n("revision"),
                rule_count: n("rule_count") as i64,
            })
        }
        AgentNotify::EndpointRegenerated | AgentNotify::EndpointRegenerateFailed => {
            Notification::EndpointRegenerate(flow::EndpointRegenNotification {
                id: n("id"),
                labels: labels(),
                error: s("error"),
            })
        }
        AgentNotify::EndpointCreated | AgentNotify::EndpointDeleted => {
            Notification::EndpointUpdate(flow::EndpointUpdateNotification {
                id: n("id"),
                labels: labels(),
                error: s("error"),
                pod_name: s("pod-name"),
                namespace: s("namespace"),
            })
        }
        AgentNotify::IpcacheUpserted | AgentNotify::IpcacheDeleted => {
            Notification::IpcacheUpdate(flow::IpCacheNotification {
                cidr: s("cidr"),
                identity: n("id") as u32,
                host_ip: s("host-ip"),
                namespace: s("namespace"),
                pod_name: s("pod-name"),
                ..Default::default()
            })
        }
        AgentNotify::ServiceUpserted => service_upsert(body),
        AgentNotify::ServiceDeleted => {
            Notification::ServiceDelete(flow::ServiceDeleteNotification { id: n("id") as u32 })
        }
    };
    flow::AgentEvent {
        r#type: agent_event_type(what) as i32,
        notification: Some(notification),
    }
}

/// Hubble's name for each of the monitor's agent notifications.
fn agent_event_type(what: AgentNotify) -> flow::AgentEventType {
    use flow::AgentEventType as T;
    match what {
        AgentNotify::Start => T::AgentStarted,
        AgentNotify::PolicyUpdated => T::PolicyUpdated,
        AgentNotify::PolicyDeleted => T::PolicyDeleted,
        AgentNotify::EndpointRegenerated => T::EndpointRegenerateSuccess,
        AgentNotify::EndpointRegenerateFailed => T::EndpointRegenerateFailure,
        AgentNotify::EndpointCreated => T::EndpointCreated,
        AgentNotify::EndpointDeleted => T::EndpointDeleted,
        AgentNotify::IpcacheUpserted => T::IpcacheUpserted,
        AgentNotify::IpcacheDeleted => T::IpcacheDeleted,
        AgentNotify::ServiceUpserted => T::ServiceUpserted,
        AgentNotify::ServiceDeleted => T::ServiceDeleted,
    }
}

/// The body of a service notification is the REST API's ServiceSpec.
fn service_upsert(body: &serde_json::Value) -> flow::agent_event::Notification {
    let addr = |v: &serde_json::Value| flow::ServiceUpsertNotificationAddr {
        ip: v
            .get("ip")
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_owned(),
        port: v.get("port").and_then(|x| x.as_u64()).unwrap_or(0) as u32,
    };
    let flags = body.get("flags");
    let flag = |k: &str| {
        flags
            .and_then(|f| f.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    flow::agent_event::Notification::ServiceUpsert(flow::ServiceUpsertNotification {
        id: body.get("id").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
        frontend_address: body.get("frontend-address").map(addr),
        backend_addresses: body
            .get("backend-addresses")
            .and_then(|b| b.as_array())
            .map(|a| a.iter().map(addr).collect())
            .unwrap_or_default(),
        r#type: flag("type"),
        name: flag("name"),
        namespace: flag("namespace"),
        ext_traffic_policy: flag("extTrafficPolicy"),
        int_traffic_policy: flag("intTrafficPolicy"),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Endpoints by address, and one service frontend.
    #[derive(Default)]
    struct Known {
        eps: HashMap<IpAddr, flow::Endpoint>,
    }

    impl Resolve for Known {
        fn endpoint(&self, ip: IpAddr, identity: u32) -> flow::Endpoint {
            let mut ep = self.eps.get(&ip).cloned().unwrap_or_default();
            if identity != 0 {
                ep.identity = identity;
            }
            ep
        }
        fn service(&self, ip: IpAddr, port: u16) -> Option<flow::Service> {
            (ip.to_string() == "10.96.0.10" && port == 53).then(|| flow::Service {
                name: "kube-dns".into(),
                namespace: "kube-system".into(),
            })
        }
        fn cgroup_pod(&self, id: u64) -> Option<IpAddr> {
            (id == 77).then(|| "10.0.1.5".parse().unwrap())
        }
    }

    fn known() -> Known {
        let mut k = Known::default();
        k.eps.insert(
            "10.0.1.5".parse().unwrap(),
            flow::Endpoint {
                id: 7,
                identity: 256,
                namespace: "default".into(),
                pod_name: "client".into(),
                ..Default::default()
            },
        );
        k.eps.insert(
            "10.0.2.7".parse().unwrap(),
            flow::Endpoint {
                identity: 257,
                namespace: "default".into(),
                pod_name: "server".into(),
                ..Default::default()
            },
        );
        k
    }

    fn frame(dst: [u8; 4], dport: u16, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[26..30].copy_from_slice(&[10, 0, 1, 5]);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&34567u16.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[34 + 13] = flags;
        f
    }

    fn drop_record(code: u8, source: u16) -> Vec<u8> {
        let mut rec = vec![0u8; 36];
        rec[0] = abi::events::NOTIFY_DROP;
        rec[1] = code;
        rec[2..4].copy_from_slice(&source.to_ne_bytes());
        rec[12..14].copy_from_slice(&54u16.to_ne_bytes());
        rec[16..20].copy_from_slice(&256u32.to_ne_bytes());
        rec.extend_from_slice(&frame([10, 0, 2, 7], 80, 0x02));
        rec
    }

    fn trace_record(point: u8, reason: u8, source: u16, frame: &[u8]) -> Vec<u8> {
        let mut rec = vec![0u8; 48];
        rec[0] = abi::events::NOTIFY_TRACE;
        rec[1] = point;
        rec[2..4].copy_from_slice(&source.to_ne_bytes());
        rec[12..14].copy_from_slice(&(frame.len() as u16).to_ne_bytes());
        rec[14..16].copy_from_slice(&1u16.to_ne_bytes());
        rec[26] = reason;
        rec.extend_from_slice(frame);
        rec
    }

    #[test]
    fn a_policy_drop_names_both_pods_and_its_reason() {
        let f = flow(&drop_record(133, 7), &known()).unwrap();
        assert_eq!(f.verdict, flow::Verdict::Dropped as i32);
        assert_eq!(f.drop_reason_desc, flow::DropReason::PolicyDenied as i32);
        assert_eq!(f.drop_reason, 133);
        let (s, d) = (f.source.unwrap(), f.destination.unwrap());
        assert_eq!(
            (s.pod_name.as_str(), d.pod_name.as_str()),
            ("client", "server")
        );
        assert_eq!((s.identity, d.identity), (256, 257));
        assert_eq!(f.traffic_direction, flow::TrafficDirection::Egress as i32);
        assert_eq!(f.is_reply, None);
        assert_eq!(f.summary, "TCP Flags: SYN");
        assert_eq!(f.event_type.unwrap().sub_type, 133);
    }

    #[test]
    fn traces_carry_point_reason_reply_and_direction() {
        // a reply delivered to endpoint 7 (the client)
        let mut fr = frame([10, 0, 2, 7], 80, 0x12);
        fr[26..30].copy_from_slice(&[10, 0, 2, 7]);
        fr[30..34].copy_from_slice(&[10, 0, 1, 5]);
        let f = flow(&trace_record(0, REASON_CT_REPLY, 7, &fr), &known()).unwrap();
        assert_eq!(
            f.trace_observation_point,
            flow::TraceObservationPoint::ToEndpoint as i32
        );
        assert_eq!(f.trace_reason, flow::TraceReason::Reply as i32);
        assert_eq!(f.is_reply, Some(true));
        assert!(f.reply);
        assert_eq!(f.traffic_direction, flow::TrafficDirection::Egress as i32);
        // a new connection sent by endpoint 7
        let f = flow(
            &trace_record(4, 0, 7, &frame([10, 0, 2, 7], 80, 2)),
            &known(),
        )
        .unwrap();
        assert_eq!(f.trace_reason, flow::TraceReason::New as i32);
        assert_eq!(f.is_reply, Some(false));
        assert_eq!(f.traffic_direction, flow::TrafficDirection::Egress as i32);
        // unknown reason: no reply flag, no direction
        let f = flow(
            &trace_record(3, REASON_UNKNOWN, 7, &frame([10, 0, 2, 7], 80, 2)),
            &known(),
        )
        .unwrap();
        assert_eq!(f.is_reply, None);
        assert_eq!(f.traffic_direction, flow::TrafficDirection::Unknown as i32);
    }

    #[test]
    fn a_frontend_names_its_service() {
        let mut fr = frame([10, 96, 0, 10], 53, 0);
        fr[23] = 17;
        let f = flow(&trace_record(3, 0, 7, &fr), &known()).unwrap();
        let svc = f.destination_service.unwrap();
        assert_eq!(
            (svc.namespace.as_str(), svc.name.as_str()),
            ("kube-system", "kube-dns")
        );
        assert_eq!(f.summary, "UDP");
    }

    #[test]
    fn policy_verdicts_put_the_remote_identity_on_their_side() {
        let mut rec = vec![0u8; 32];
        rec[0] = abi::events::NOTIFY_POLICY_VERDICT;
        rec[2..4].copy_from_slice(&12u16.to_ne_bytes());
        rec[12..14].copy_from_slice(&54u16.to_ne_bytes());
        rec[16..20].copy_from_slice(&300u32.to_ne_bytes());
        rec[20..24].copy_from_slice(&(-133i32).to_ne_bytes());
        rec[27] = 1 | (2 << 3);
        rec.extend_from_slice(&frame([10, 0, 2, 7], 80, 2));
        let f = flow(&rec, &known()).unwrap();
        assert_eq!(f.verdict, flow::Verdict::Dropped as i32);
        assert_eq!(f.policy_match_type, 2);
        assert_eq!(f.traffic_direction, flow::TrafficDirection::Ingress as i32);
        assert_eq!(f.source.unwrap().identity, 300);
        assert_eq!(f.drop_reason_desc, flow::DropReason::PolicyDenied as i32);
    }

    #[test]
    fn a_flow_written_over_an_evicted_one_is_the_flow_built_anew() {
        let mut k = known();
        let client: IpAddr = "10.0.1.5".parse().unwrap();
        let labels = ["k8s:app=client", "k8s:io.kubernetes.pod.namespace=default"];
        k.eps.get_mut(&client).unwrap().labels = labels.map(str::to_owned).to_vec();
        let mut udp = frame([10, 96, 0, 10], 53, 0);
        udp[23] = 17;
        let records = [
            drop_record(133, 7),
            trace_record(3, 0, 7, &udp),
            trace_record(0, REASON_CT_REPLY, 7, &frame([10, 9, 9, 9], 80, 0x12)),
            sock_record(4, 77, [10, 96, 0, 10], 53),
        ];
        for old in &records {
            for new in &records {
                let mut evicted = flow(old, &k).unwrap();
                let reused = flow_reusing(new, &k, Ends::of(&mut evicted));
                assert_eq!(reused, flow(new, &k));
            }
        }
    }

    fn sock_record(point: u8, cgroup: u64, dst: [u8; 4], port: u16) -> Vec<u8> {
        let mut rec = vec![0u8; 38];
        rec[0] = abi::events::NOTIFY_TRACE_SOCK;
        rec[1] = point;
        rec[2..6].copy_from_slice(&dst);
        rec[18..20].copy_from_slice(&port.to_ne_bytes());
        rec[20..28].copy_from_slice(&4242u64.to_ne_bytes());
        rec[28..36].copy_from_slice(&cgroup.to_ne_bytes());
        rec[36] = abi::events::TRACE_SOCK_L4_UDP;
        rec
    }

    #[test]
    fn socket_translations_name_the_pod_and_the_service() {
        let f = flow(&sock_record(1, 77, [10, 96, 0, 10], 53), &known()).unwrap();
        assert_eq!(f.r#type, flow::FlowType::Sock as i32);
        assert_eq!(f.verdict, flow::Verdict::Traced as i32);
        assert_eq!(f.source.as_ref().unwrap().pod_name, "client");
        assert_eq!(f.destination_service.as_ref().unwrap().name, "kube-dns");
        assert_eq!(
            (f.socket_cookie, f.cgroup_id, f.sock_xlate_point),
            (4242, 77, 1)
        );
        assert_eq!(f.summary, "UDP");
        // the reverse translation shows the service as the source
        let f = flow(&sock_record(4, 77, [10, 96, 0, 10], 53), &known()).unwrap();
        assert_eq!(f.verdict, flow::Verdict::Translated as i32);
        assert_eq!(f.source_service.unwrap().name, "kube-dns");
        assert_eq!(f.destination.unwrap().pod_name, "client");
        // a socket of no pod is skipped
        assert!(flow(&sock_record(1, 78, [10, 96, 0, 10], 53), &known()).is_none());
    }

    #[test]
    fn agent_notifications_become_agent_events() {
        let e = agent_event(
            AgentNotify::EndpointCreated,
            &serde_json::json!({"id": 9, "labels": ["k8s:app=a"], "namespace": "ns", "pod-name": "p"}),
        );
        assert_eq!(e.r#type, flow::AgentEventType::EndpointCreated as i32);
        match e.notification.unwrap() {
            flow::agent_event::Notification::EndpointUpdate(u) => {
                assert_eq!((u.id, u.pod_name.as_str()), (9, "p"))
            }
            _ => panic!("endpoint update"),
        }
    }
}
