//! The host outside the cluster: a machine on the underlay that is no node
//! (no agent, no pod CIDR), answering on port 80 over TCP (HTTP, or a bare
//! line to anything else) and UDP with the address and port it saw the
//! client at. What a pod reaches it
//! from tells whether its traffic was masqueraded, and by which port.

use anyhow::Context;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};

pub const PORT: u16 = 80;

/// What the server answers `peer` with.
fn seen(peer: SocketAddr) -> String {
    format!("{peer}\n")
}

/// An HTTP request gets an HTTP response; anything else (`cilium-lab
/// connect`'s messages) the bare answer.
fn answer(mut conn: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let n = conn.read(&mut buf)?;
    head.extend_from_slice(&buf[..n]);
    let body = seen(peer);
    let http = [&b"GET "[..], b"HEAD ", b"POST ", b"PUT "]
        .iter()
        .any(|m| head.starts_with(m));
    if !http {
        return conn.write_all(body.as_bytes());
    }
    // the rest of the request's head; its content does not matter
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match conn.read(&mut buf)? {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    write!(
        conn,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serve_udp(socket: UdpSocket) {
    let mut buf = [0u8; 2048];
    loop {
        match socket.recv_from(&mut buf) {
            Ok((_, peer)) => {
                if let Err(e) = socket.send_to(seen(peer).as_bytes(), peer) {
                    eprintln!("outside: answering {peer} over UDP: {e}");
                }
            }
            Err(e) => eprintln!("outside: UDP: {e}"),
        }
    }
}

/// Serves until killed, in this process's network namespace.
pub fn serve() -> anyhow::Result<()> {
    let tcp = TcpListener::bind(("0.0.0.0", PORT)).context("binding TCP port 80")?;
    let udp = UdpSocket::bind(("0.0.0.0", PORT)).context("binding UDP port 80")?;
    std::thread::spawn(move || serve_udp(udp));
    // and on its IPv6 address, for dual-stack clusters' pods (a socket of
    // its own: a [::] one would show IPv4 peers IPv4-mapped)
    let six = topology::underlay_ipv6(topology::OUTSIDE_IP);
    let tcp6 = TcpListener::bind((six, PORT)).context("binding TCP port 80 on IPv6")?;
    std::thread::spawn(move || accept(tcp6));
    accept(tcp);
    Ok(())
}

fn accept(tcp: TcpListener) {
    for conn in tcp.incoming() {
        let conn = match conn {
            Ok(c) => c,
            Err(e) => {
                eprintln!("outside: accept: {e}");
                continue;
            }
        };
        std::thread::spawn(move || {
            if let Ok(peer) = conn.peer_addr() {
                if let Err(e) = answer(conn, peer) {
                    eprintln!("outside: answering {peer}: {e}");
                }
            }
        });
    }
}
