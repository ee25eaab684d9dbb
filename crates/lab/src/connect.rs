//! `cilium-lab connect`: one message to a server and its reply, from a
//! pod (the built-in servers answer `<pod>: <message>`), so a user or a
//! test sees which backend answered.

use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(2);

/// Sends `message` to `to` from the calling thread's network namespace;
/// the reply, or an error naming what failed (refused, no reply in 2 s).
pub fn exchange(to: SocketAddr, udp: bool, message: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut buf = vec![0u8; 64 * 1024];
    let n = if udp {
        let s = UdpSocket::bind(("0.0.0.0", 0)).context("opening a UDP socket")?;
        s.set_read_timeout(Some(WAIT))?;
        // connected, so an ICMP port unreachable comes back as refused
        s.connect(to)
            .with_context(|| format!("connecting to udp {to}"))?;
        s.send(message)
            .with_context(|| format!("sending to udp {to}"))?;
        s.recv(&mut buf).map_err(|e| no_reply(e, "udp", to))?
    } else {
        let mut s = TcpStream::connect_timeout(&to, WAIT)
            .with_context(|| format!("connecting to tcp {to}"))?;
        s.set_read_timeout(Some(WAIT))?;
        s.write_all(message)
            .with_context(|| format!("sending to tcp {to}"))?;
        s.read(&mut buf).map_err(|e| no_reply(e, "tcp", to))?
    };
    if n == 0 && !udp {
        bail!("tcp {to} closed the connection without a reply");
    }
    buf.truncate(n);
    Ok(buf)
}

/// `count` exchanges of `message` over one TCP connection to `to`,
/// `interval` apart, each reply handed to `on_reply`.
pub fn stream(
    to: SocketAddr,
    message: &[u8],
    count: u32,
    interval: Duration,
    mut on_reply: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut s =
        TcpStream::connect_timeout(&to, WAIT).with_context(|| format!("connecting to tcp {to}"))?;
    s.set_read_timeout(Some(WAIT))?;
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..count {
        if i > 0 {
            std::thread::sleep(interval);
        }
        s.write_all(message)
            .with_context(|| format!("sending to tcp {to} (exchange {})", i + 1))?;
        let n = s.read(&mut buf).map_err(|e| no_reply(e, "tcp", to))?;
        if n == 0 {
            bail!("tcp {to} closed the connection after {i} exchanges");
        }
        on_reply(&buf[..n])?;
    }
    Ok(())
}

fn no_reply(e: std::io::Error, proto: &str, to: SocketAddr) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            anyhow::anyhow!("no reply from {proto} {to} within {WAIT:?}")
        }
        _ => anyhow::Error::new(e).context(format!("reading the reply from {proto} {to}")),
    }
}
