//! ICMP echo to many addresses at once from one raw socket: every request
//! goes out first, then replies are matched by identifier and sequence
//! until all are in or the deadline passes.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
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

fn echo_request(id: u16, seq: u16) -> [u8; 8 + PAYLOAD] {
    let mut pkt = [0u8; 8 + PAYLOAD];
    pkt[0] = ECHO_REQUEST;
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

fn raw_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned from here on.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::IPPROTO_ICMP,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send_to(fd: &OwnedFd, pkt: &[u8], to: Ipv4Addr) -> std::io::Result<()> {
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(to).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: pkt and addr outlive the call; lengths are theirs.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            pkt.as_ptr().cast(),
            pkt.len(),
            0,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until the socket is readable or `left` passes; false on timeout.
fn wait_readable(fd: &OwnedFd, left: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: one pollfd we own.
    unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
}

/// Round-trip times of the addresses that answered within `deadline`.
/// Blocking: run it off the async runtime.
pub fn ping_all(
    targets: &[Ipv4Addr],
    deadline: Duration,
) -> std::io::Result<HashMap<Ipv4Addr, Duration>> {
    let mut rtts = HashMap::new();
    if targets.is_empty() {
        return Ok(rtts);
    }
    let fd = raw_socket()?;
    // Other pingers on this host see our replies too: a per-round
    // identifier keeps theirs and ours apart.
    let id = (std::process::id() as u16) ^ rand_u16();
    let mut sent: HashMap<u16, (Ipv4Addr, Instant)> = HashMap::new();
    for (seq, ip) in targets.iter().enumerate() {
        let seq = seq as u16;
        // an unroutable target fails alone; it simply gets no reply
        if send_to(&fd, &echo_request(id, seq), *ip).is_ok() {
            sent.insert(seq, (*ip, Instant::now()));
        }
    }
    let end = Instant::now() + deadline;
    let mut buf = [0u8; 1500];
    while rtts.len() < sent.len() {
        let now = Instant::now();
        if now >= end || !wait_readable(&fd, end - now) {
            break;
        }
        loop {
            // SAFETY: reading into a buffer we own, within its length.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                break;
            }
            let Some((src, rid, seq)) = parse_reply(&buf[..n as usize]) else {
                continue;
            };
            if let Some((ip, at)) = sent.get(&seq) {
                if rid == id && *ip == src {
                    rtts.entry(src).or_insert_with(|| at.elapsed());
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
        let req = echo_request(0x1234, 7);
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
