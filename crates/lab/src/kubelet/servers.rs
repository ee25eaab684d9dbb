//! What a pod "runs", as there are no images: a built-in server on each
//! of its containers' ports, in the pod's network namespace. TCP answers
//! `GET /clientip` with an HTTP 200 whose body is the client's address and
//! port as the pod sees them (as agnhost's netexec does), other `GET `s
//! with one whose body is the pod's name, anything else by
//! echoing each chunk as `<pod>: <chunk>` until the peer closes (so a held
//! connection shows it still talks to the same backend); UDP echoes each
//! datagram the same way.

use anyhow::Context;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // as a pod spec spells them
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        })
    }
}

/// A container port.
#[derive(Clone, Copy, Debug)]
pub struct Port {
    pub port: u16,
    pub protocol: Protocol,
}

enum Socket {
    Tcp(std::net::TcpListener),
    Udp(std::net::UdpSocket),
}

/// The servers of one pod; they stop when this is dropped.
pub struct Servers(Vec<JoinHandle<()>>);

impl Drop for Servers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Binds every port inside the namespace at `netns`: a socket stays in the
/// namespace it was made in, so a thread enters it only to make them. A
/// socket on `[::]` takes both families (a dual-stack pod is reached at
/// either address, as a real server listening on `[::]` is); a namespace
/// without IPv6 gets `0.0.0.0`.
fn bind(netns: &Path, ports: &[Port]) -> anyhow::Result<Vec<Socket>> {
    let ns = netdev::NetNs::open(netns)?;
    let ports = ports.to_vec();
    std::thread::spawn(move || -> anyhow::Result<Vec<Socket>> {
        ns.enter()?;
        ports
            .iter()
            .map(|p| {
                let on = |ip: IpAddr| {
                    let addr = SocketAddr::from((ip, p.port));
                    match p.protocol {
                        Protocol::Tcp => std::net::TcpListener::bind(addr).map(Socket::Tcp),
                        Protocol::Udp => std::net::UdpSocket::bind(addr).map(Socket::Udp),
                    }
                };
                on(Ipv6Addr::UNSPECIFIED.into())
                    .or_else(|_| on(Ipv4Addr::UNSPECIFIED.into()))
                    .with_context(|| format!("binding {} port {}", p.protocol, p.port))
            })
            .collect()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the binding thread panicked"))?
}

/// Starts `pod`'s servers on `ports` in its namespace at `netns`; must be
/// called on the kubelet's runtime, which serves them.
pub fn start(pod: &str, netns: &Path, ports: &[Port]) -> anyhow::Result<Servers> {
    let mut tasks = Vec::new();
    for socket in bind(netns, ports)? {
        let pod = pod.to_owned();
        tasks.push(match socket {
            Socket::Tcp(l) => {
                l.set_nonblocking(true)?;
                let l = tokio::net::TcpListener::from_std(l)?;
                tokio::spawn(serve_tcp(pod, l))
            }
            Socket::Udp(s) => {
                s.set_nonblocking(true)?;
                let s = tokio::net::UdpSocket::from_std(s)?;
                tokio::spawn(serve_udp(pod, s))
            }
        });
    }
    Ok(Servers(tasks))
}

async fn serve_tcp(pod: String, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            // each connection ends with the pod's servers too
            Ok((conn, peer)) => {
                let pod = pod.clone();
                let peer = unmapped(peer);
                tokio::spawn(async move {
                    let _ = answer_tcp(&pod, peer, conn).await;
                });
            }
            Err(e) => {
                eprintln!("kubelet: pod {pod}: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer_tcp(
    pod: &str,
    peer: SocketAddr,
    mut conn: tokio::net::TcpStream,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        if first && buf[..n].starts_with(b"GET ") {
            let body = if buf[..n].starts_with(b"GET /clientip") {
                format!("{peer}\n")
            } else {
                format!("{pod}\n")
            };
            let reply = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(reply.as_bytes()).await?;
            return conn.shutdown().await;
        }
        first = false;
        conn.write_all(&echo(pod, &buf[..n])).await?;
    }
}

async fn serve_udp(pod: String, socket: tokio::net::UdpSocket) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match socket.recv_from(&mut buf).await {
            Ok((n, peer)) => {
                let _ = socket.send_to(&echo(&pod, &buf[..n]), peer).await;
            }
            Err(e) => {
                eprintln!("kubelet: pod {pod}: udp: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// An IPv4 client of a `[::]` socket as the client's own family shows it.
fn unmapped(peer: SocketAddr) -> SocketAddr {
    match peer {
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, a.port())),
            None => peer,
        },
        v4 => v4,
    }
}

fn echo(pod: &str, chunk: &[u8]) -> Vec<u8> {
    let mut reply = format!("{pod}: ").into_bytes();
    reply.extend_from_slice(chunk);
    reply
}
