//! ICMP echo to many addresses at once from one raw socket: every request
//! goes out first, then replies are matched by identifier and sequence
//! until all are in or the deadline passes.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
const ECHO6_REQUEST: u8 = 128;
const ECHO6_REPLY: u8 = 129;
/// Payload bytes, as Cilium's pinger sends.
const PAYLOAD: usize = 16;

fn checksum(data: &[u8]) -> u16 {
    let mut sum = data.chunks(2).fold(0u32, |s, c| {
        s + u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
    });
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request of ICMP type `kind`. Its checksum is ICMP's; on an
/// ICMPv6 raw socket the kernel replaces it with one over the IPv6
/// pseudo-header.
fn echo_request(kind: u8, id: u16, seq: u16) -> [u8; 8 + PAYLOAD] {
    let mut pkt = [0u8; 8 + PAYLOAD];
    pkt[0] = kind;
    pkt[4..6].copy_from_slice(&id.to_be_bytes());
    pkt[6..8].copy_from_slice(&seq.to_be_bytes());
    let sum = checksum(&pkt);
    pkt[2..4].copy_from_slice(&sum.to_be_bytes());
    pkt
}

/// The echo reply's (source, identifier, sequence) in a raw IPv4 datagram.
fn parse_reply(buf: &[u8]) -> Option<(Ipv4Addr, u16, u16)> {
    let ihl = usize::from(*buf.first()? & 0x0f) * 4;
    let icmp = buf.get(ihl..ihl + 8)?;
    if icmp[0] != ECHO_REPLY {
        return None;
    }
    let src = Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]);
    let id = u16::from_be_bytes([icmp[4], icmp[5]]);
    let seq = u16::from_be_bytes([icmp[6], icmp[7]]);
    Some((src, id, seq))
}

fn raw_socket(family: libc::c_int, protocol: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned from here on.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            protocol,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send_to(fd: &OwnedFd, pkt: &[u8], to: IpAddr) -> std::io::Result<()> {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match to {
        IpAddr::V4(ip) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from(ip).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut addr as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        IpAddr::V6(ip) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: ip.octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut addr as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: pkt and addr outlive the call; lengths are theirs.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            pkt.as_ptr().cast(),
            pkt.len(),
            0,
            (&addr as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One datagram and the address it came from (`None` at the end of what
/// is queued).
fn recv_from(fd: &OwnedFd, buf: &mut [u8]) -> Option<(usize, Option<IpAddr>)> {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: reading into buffers we own, within their lengths.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            (&mut from as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if n <= 0 {
        return None;
    }
    let src = match libc::c_int::from(from.ss_family) {
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6 for this family.
            let sin6: libc::sockaddr_in6 =
                unsafe { std::ptr::read((&from as *const libc::sockaddr_storage).cast()) };
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    };
    Some((n as usize, src))
}

/// Waits until one of the sockets is readable or `left` passes; which
/// are readable (none on timeout).
fn wait_readable(fds: &[&OwnedFd], left: Duration) -> Vec<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: pollfds we own, their count.
    let ready = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    pfds.iter()
        .map(|p| ready > 0 && p.revents & libc::POLLIN != 0)
        .collect()
}

/// An echo reply's source, identifier and sequence.
type Reply = (IpAddr, u16, u16);

/// One family's pinger: its raw socket and how its replies read (from
/// the datagram and the address it came from).
struct Family {
    fd: OwnedFd,
    request: u8,
    parse: fn(&[u8], Option<IpAddr>) -> Option<Reply>,
}

impl Family {
    fn v4() -> std::io::Result<Self> {
        Ok(Self {
            fd: raw_socket(libc::AF_INET, libc::IPPROTO_ICMP)?,
            request: ECHO_REQUEST,
            parse: |buf, _| parse_reply(buf).map(|(src, id, seq)| (src.into(), id, seq)),
        })
    }

    /// An ICMPv6 raw socket hands over the message alone, without the IP
    /// header, and computes its checksum itself.
    fn v6() -> std::io::Result<Self> {
        Ok(Self {
            fd: raw_socket(libc::AF_INET6, libc::IPPROTO_ICMPV6)?,
            request: ECHO6_REQUEST,
            parse: |buf, src| {
                if *buf.first()? != ECHO6_REPLY || buf.len() < 8 {
                    return None;
                }
                let id = u16::from_be_bytes([buf[4], buf[5]]);
                let seq = u16::from_be_bytes([buf[6], buf[7]]);
                Some((src?, id, seq))
            },
        })
    }
}

/// Round-trip times of the addresses that answered within `deadline`.
/// Blocking: run it off the async runtime.
pub fn ping_all(
    targets: &[IpAddr],
    deadline: Duration,
) -> std::io::Result<HashMap<IpAddr, Duration>> {
    let mut rtts = HashMap::new();
    if targets.is_empty() {
        return Ok(rtts);
    }
    let v4 = Family::v4()?;
    // a node without IPv6 has no IPv6 targets and needs no socket
    let v6 = match targets.iter().any(IpAddr::is_ipv6) {
        true => Some(Family::v6()?),
        false => None,
    };
    // Other pingers on this host see our replies too: a per-round
    // identifier keeps theirs and ours apart.
    let id = (std::process::id() as u16) ^ rand_u16();
    let mut sent: HashMap<u16, (IpAddr, Instant)> = HashMap::new();
    for (seq, ip) in targets.iter().enumerate() {
        let seq = seq as u16;
        let family = match ip {
            IpAddr::V4(_) => &v4,
            IpAddr::V6(_) => v6.as_ref().expect("an IPv6 socket"),
        };
        let pkt = echo_request(family.request, id, seq);
        // an unroutable target fails alone; it simply gets no reply
        if send_to(&family.fd, &pkt, *ip).is_ok() {
            sent.insert(seq, (*ip, Instant::now()));
        }
    }
    let end = Instant::now() + deadline;
    let mut buf = [0u8; 1500];
    let families: Vec<&Family> = std::iter::once(&v4).chain(v6.as_ref()).collect();
    let fds: Vec<&OwnedFd> = families.iter().map(|f| &f.fd).collect();
    while rtts.len() < sent.len() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let readable = wait_readable(&fds, end - now);
        if !readable.contains(&true) {
            break;
        }
        for (family, _) in families.iter().zip(readable).filter(|(_, r)| *r) {
            while let Some((n, from)) = recv_from(&family.fd, &mut buf) {
                let Some((src, rid, seq)) = (family.parse)(&buf[..n], from) else {
                    continue;
                };
                if let Some((ip, at)) = sent.get(&seq) {
                    if rid == id && *ip == src {
                        rtts.entry(src).or_insert_with(|| at.elapsed());
                    }
                }
            }
        }
    }
    Ok(rtts)
}

fn rand_u16() -> u16 {
    let mut b = [0u8; 2];
    let _ = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    u16::from_ne_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_a_valid_checksum_and_replies_are_recognised() {
        let req = echo_request(ECHO_REQUEST, 0x1234, 7);
        assert_eq!(checksum(&req), 0, "a correct checksum sums to zero");
        let mut reply = vec![
            0x45u8, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 9, 10, 0, 0, 1,
        ];
        let mut icmp = req.to_vec();
        icmp[0] = ECHO_REPLY;
        reply.extend_from_slice(&icmp);
        assert_eq!(
            parse_reply(&reply),
            Some((Ipv4Addr::new(10, 0, 0, 9), 0x1234, 7))
        );
        reply[20] = ECHO_REQUEST;
        assert_eq!(parse_reply(&reply), None);
    }
}
