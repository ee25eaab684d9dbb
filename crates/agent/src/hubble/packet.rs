//! The captured bytes of a datapath event as Hubble shows them: Ethernet,
//! IPv4 or IPv6, and TCP, UDP, SCTP, ICMPv4 or ICMPv6, with the summary
//! Cilium's parser gives (the last layer read, TCP's flags, ICMP's
//! type and code by gopacket's names).

use hubble::flow::{self, layer4::Protocol};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What the layers tell, and the addresses and ports the resolvers need.
#[derive(Default)]
pub struct Layers {
    pub ethernet: Option<flow::Ethernet>,
    pub ip: Option<flow::Ip>,
    pub l4: Option<flow::Layer4>,
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    pub src_port: u16,
    pub dst_port: u16,
    pub summary: String,
}

fn mac(b: &[u8]) -> String {
    abi::endpoint::format_mac(&[b[0], b[1], b[2], b[3], b[4], b[5]])
}

fn be16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

/// The layers of an Ethernet frame, as far as they are whole.
pub fn decode(frame: &[u8]) -> Layers {
    let mut l = Layers::default();
    if frame.len() < 14 {
        return l;
    }
    l.ethernet = Some(flow::Ethernet {
        source: mac(&frame[6..12]),
        destination: mac(&frame[0..6]),
    });
    l.summary = "Ethernet".into();
    let (proto, payload) = match be16(frame, 12) {
        0x0800 => match ipv4(&frame[14..], &mut l) {
            Some(x) => x,
            None => return l,
        },
        0x86dd => match ipv6(&frame[14..], &mut l) {
            Some(x) => x,
            None => return l,
        },
        _ => return l,
    };
    transport(proto, payload, &mut l);
    l
}

fn ipv4<'a>(ip: &'a [u8], l: &mut Layers) -> Option<(u8, &'a [u8])> {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    set_ip(l, src.into(), dst.into(), flow::IpVersion::IPv4, "IPv4");
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    // a later fragment carries no transport header
    let later_fragment = be16(ip, 6) & 0x1fff != 0;
    (!later_fragment).then(|| (ip[9], ip.get(ihl..).unwrap_or_default()))
}

fn ipv6<'a>(ip: &'a [u8], l: &mut Layers) -> Option<(u8, &'a [u8])> {
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return None;
    }
    let addr = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&ip[at..at + 16]);
        Ipv6Addr::from(b)
    };
    set_ip(
        l,
        addr(8).into(),
        addr(24).into(),
        flow::IpVersion::IPv6,
        "IPv6",
    );
    Some((ip[6], &ip[40..]))
}

fn set_ip(l: &mut Layers, src: IpAddr, dst: IpAddr, v: flow::IpVersion, name: &str) {
    l.ip = Some(flow::Ip {
        source: crate::text::ip(src),
        destination: crate::text::ip(dst),
        ip_version: v as i32,
        ..Default::default()
    });
    (l.src, l.dst) = (Some(src), Some(dst));
    l.summary = name.into();
}

fn transport(proto: u8, b: &[u8], l: &mut Layers) {
    let ports = (be16(b, 0), be16(b, 2));
    let protocol = match proto {
        6 if b.len() >= 20 => {
            let flags = tcp_flags(b[13], b[12]);
            l.summary = format!("TCP Flags: {}", flag_names(&flags));
            Protocol::Tcp(flow::Tcp {
                source_port: ports.0.into(),
                destination_port: ports.1.into(),
                flags: Some(flags),
            })
        }
        17 if b.len() >= 8 => {
            l.summary = "UDP".into();
            Protocol::Udp(flow::Udp {
                source_port: ports.0.into(),
                destination_port: ports.1.into(),
            })
        }
        132 if b.len() >= 12 => {
            l.summary = "SCTP".into();
            Protocol::Sctp(flow::Sctp {
                source_port: ports.0.into(),
                destination_port: ports.1.into(),
            })
        }
        1 if b.len() >= 8 => {
            l.summary = format!("ICMPv4 {}", icmpv4_name(b[0], b[1]));
            Protocol::IcmPv4(flow::IcmPv4 {
                r#type: b[0].into(),
                code: b[1].into(),
            })
        }
        58 if b.len() >= 8 => {
            l.summary = format!("ICMPv6 {}", icmpv6_name(b[0], b[1]));
            Protocol::IcmPv6(flow::IcmPv6 {
                r#type: b[0].into(),
                code: b[1].into(),
            })
        }
        _ => return,
    };
    if matches!(
        protocol,
        Protocol::Tcp(_) | Protocol::Udp(_) | Protocol::Sctp(_)
    ) {
        (l.src_port, l.dst_port) = ports;
    }
    l.l4 = Some(flow::Layer4 {
        protocol: Some(protocol),
    });
}

fn tcp_flags(b: u8, offset_byte: u8) -> flow::TcpFlags {
    flow::TcpFlags {
        fin: b & 0x01 != 0,
        syn: b & 0x02 != 0,
        rst: b & 0x04 != 0,
        psh: b & 0x08 != 0,
        ack: b & 0x10 != 0,
        urg: b & 0x20 != 0,
        ece: b & 0x40 != 0,
        cwr: b & 0x80 != 0,
        ns: offset_byte & 0x01 != 0,
    }
}

/// In Cilium's order: SYN, ACK, RST, FIN, PSH, URG, ECE, CWR, NS.
pub fn flag_names(f: &flow::TcpFlags) -> String {
    [
        (f.syn, "SYN"),
        (f.ack, "ACK"),
        (f.rst, "RST"),
        (f.fin, "FIN"),
        (f.psh, "PSH"),
        (f.urg, "URG"),
        (f.ece, "ECE"),
        (f.cwr, "CWR"),
        (f.ns, "NS"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| *n)
    .collect::<Vec<_>>()
    .join(", ")
}

fn with_code(name: &str, code: u8, codes: &[&str]) -> String {
    match codes.get(usize::from(code)).filter(|c| !c.is_empty()) {
        Some(c) => format!("{name}({c})"),
        None if codes.is_empty() && code == 0 => name.to_owned(),
        None => format!("{name}(Code: {code})"),
    }
}

/// gopacket's name of an ICMPv4 type and code.
pub fn icmpv4_name(t: u8, code: u8) -> String {
    const UNREACH: &[&str] = &[
        "Net",
        "Host",
        "Protocol",
        "Port",
        "FragmentationNeeded",
        "SourceRoutingFailed",
        "NetUnknown",
        "HostUnknown",
        "SourceIsolated",
        "NetAdminProhibited",
        "HostAdminProhibited",
        "NetTOS",
        "HostTOS",
        "CommAdminProhibited",
        "HostPrecedence",
        "PrecedenceCutoff",
    ];
    let (name, codes): (&str, &[&str]) = match t {
        0 => ("EchoReply", &[]),
        3 => ("DestinationUnreachable", UNREACH),
        4 => ("SourceQuench", &[]),
        5 => ("Redirect", &["Net", "Host", "TOS+Net", "TOS+Host"]),
        8 => ("EchoRequest", &[]),
        9 => ("RouterAdvertisement", &[]),
        10 => ("RouterSolicitation", &[]),
        11 => (
            "TimeExceeded",
            &["TTLExceeded", "FragmentReassemblyTimeExceeded"],
        ),
        12 => (
            "ParameterProblem",
            &["PointerIndicatesError", "MissingOption", "BadLength"],
        ),
        13 => ("TimestampRequest", &[]),
        14 => ("TimestampReply", &[]),
        15 => ("InfoRequest", &[]),
        16 => ("InfoReply", &[]),
        17 => ("AddressMaskRequest", &[]),
        18 => ("AddressMaskReply", &[]),
        _ => return format!("{t}({code})"),
    };
    with_code(name, code, codes)
}

/// gopacket's name of an ICMPv6 type and code.
pub fn icmpv6_name(t: u8, code: u8) -> String {
    let (name, codes): (&str, &[&str]) = match t {
        1 => (
            "DestinationUnreachable",
            &[
                "NoRouteToDst",
                "AdminProhibited",
                "BeyondScopeOfSrc",
                "AddressUnreachable",
                "PortUnreachable",
                "SrcAddressFailedPolicy",
                "RejectRouteToDst",
            ],
        ),
        2 => ("PacketTooBig", &[]),
        3 => (
            "TimeExceeded",
            &["HopLimitExceeded", "FragmentReassemblyTimeExceeded"],
        ),
        4 => (
            "ParameterProblem",
            &[
                "ErroneousHeaderField",
                "UnrecognizedNextHeader",
                "UnrecognizedIPv6Option",
            ],
        ),
        128 => ("EchoRequest", &[]),
        129 => ("EchoReply", &[]),
        133 => ("RouterSolicitation", &[]),
        134 => ("RouterAdvertisement", &[]),
        135 => ("NeighborSolicitation", &[]),
        136 => ("NeighborAdvertisement", &[]),
        137 => ("Redirect", &[]),
        _ => return format!("{t}({code})"),
    };
    with_code(name, code, codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn tcp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[34 + 12] = 0x50;
        f[34 + 13] = flags;
        f
    }

    #[test]
    fn tcp_frames_decode_with_cilium_summary() {
        let l = decode(&tcp_frame([10, 0, 1, 5], [10, 0, 2, 7], 34567, 80, 0x12));
        assert_eq!(l.summary, "TCP Flags: SYN, ACK");
        let ip = l.ip.unwrap();
        assert_eq!(
            (ip.source.as_str(), ip.destination.as_str()),
            ("10.0.1.5", "10.0.2.7")
        );
        assert_eq!(ip.ip_version, flow::IpVersion::IPv4 as i32);
        assert_eq!((l.src_port, l.dst_port), (34567, 80));
        let eth = l.ethernet.unwrap();
        assert_eq!(eth.source, "02:00:00:00:00:01");
        match l.l4.unwrap().protocol.unwrap() {
            Protocol::Tcp(t) => assert!(t.flags.unwrap().syn),
            _ => panic!("tcp"),
        }
    }

    #[test]
    fn icmp_names_follow_gopacket() {
        assert_eq!(icmpv4_name(8, 0), "EchoRequest");
        assert_eq!(icmpv4_name(3, 3), "DestinationUnreachable(Port)");
        assert_eq!(icmpv4_name(0, 4), "EchoReply(Code: 4)");
        assert_eq!(icmpv4_name(42, 1), "42(1)");
        assert_eq!(icmpv6_name(133, 0), "RouterSolicitation");
    }

    #[test]
    fn short_and_foreign_frames_keep_what_is_whole() {
        assert!(decode(&[0; 10]).ethernet.is_none());
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let l = decode(&arp);
        assert_eq!(l.summary, "Ethernet");
        assert!(l.ip.is_none());
    }
}
