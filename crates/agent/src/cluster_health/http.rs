//! HTTP on the cluster health port: the responder (only `/hello`, 200
//! with no body, as Cilium's) and the probe that asks it.

use axum::http::StatusCode;
use axum::Router;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const PATH: &str = "/hello";

/// What the node's stack and every health endpoint answer.
pub fn responder() -> Router {
    Router::new()
        .route(PATH, axum::routing::any(|| async { StatusCode::OK }))
        .fallback(|| async { StatusCode::NOT_FOUND })
}

/// Serves the responder on `listener` until the task is dropped.
pub async fn serve(listener: std::net::TcpListener) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    axum::serve(listener, responder()).await
}

/// `GET http://<ip>:<port>/hello`: its round trip, or the error as Go's
/// HTTP client words it (what Cilium's status lines show).
pub async fn probe(
    ip: impl Into<IpAddr>,
    port: u16,
    timeout: Duration,
) -> Result<Duration, String> {
    let addr = SocketAddr::from((ip.into(), port));
    let url = format!("http://{addr}{PATH}");
    let started = Instant::now();
    match tokio::time::timeout(timeout, get(addr)).await {
        Ok(Ok(200)) => Ok(started.elapsed()),
        Ok(Ok(code)) => Err(format!(
            "unexpected status code: {code} {code} {}",
            StatusCode::from_u16(code)
                .ok()
                .and_then(|c| c.canonical_reason())
                .unwrap_or("")
        )),
        Ok(Err(e)) => Err(format!("Get \"{url}\": {e}")),
        Err(_) => Err(format!(
            "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

/// One request; the status code of the answer.
async fn get(addr: SocketAddr) -> Result<u16, String> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("dial tcp {addr}: connect: {}", os_reason(&e)))?;
    let req = format!("GET {PATH} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: cilium-health\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("write tcp {addr}: {}", os_reason(&e)))?;
    let mut head = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = s
            .read(&mut buf)
            .await
            .map_err(|e| format!("read tcp {addr}: {}", os_reason(&e)))?;
        if n == 0 {
            return Err("EOF".into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            format!(
                "malformed HTTP response {:?}",
                line.lines().next().unwrap_or("")
            )
        })
}

/// The errno text alone, as Go prints it (`connection refused`).
fn os_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.split_once(" (os error") {
        Some((reason, _)) => reason.to_lowercase(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn the_responder_answers_hello_and_the_probe_reads_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(serve(listener));
        let lo = std::net::Ipv4Addr::LOCALHOST;
        assert!(probe(lo, port, Duration::from_secs(5)).await.is_ok());
        assert_eq!(get(SocketAddr::from((lo, port))).await.unwrap(), 200);

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed_port = closed.local_addr().unwrap().port();
        drop(closed);
        let err = probe(lo, closed_port, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            format!("Get \"http://127.0.0.1:{closed_port}/hello\": dial tcp 127.0.0.1:{closed_port}: connect: connection refused")
        );
    }
}
