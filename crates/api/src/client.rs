//! A blocking HTTP/1.1 client for the agent's unix socket.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach cilium-agent at {path}: {source}")]
    Unreachable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("[{status}] {message}")]
    Api { status: u16, message: String },
    #[error("malformed response from cilium-agent: {0}")]
    Malformed(String),
    #[error("invalid API host {0:?}: expected unix:///path/to/cilium.sock")]
    BadHost(String),
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Percent-escapes a path segment or query value (endpoint IDs such as
/// `pod-name:ns/pod`, IPAM owners such as `ns/pod`).
pub fn escape(s: &str) -> String {
    s.replace('%', "%25")
        .replace('/', "%2F")
        .replace(' ', "%20")
}

/// `path` with the query `pairs` (values escaped); `path` alone when
/// there are none.
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return path.to_owned();
    }
    let query: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", escape(v)))
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// A response that was read in full.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

#[derive(Clone, Debug)]
pub struct Client {
    socket: PathBuf,
    timeout: Duration,
    /// `/v1` for the agent, `/v1beta` for cilium-health.
    base: &'static str,
}

impl Client {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            timeout: Duration::from_secs(30),
            base: crate::BASE_PATH,
        }
    }

    /// Builds a client from a `-H` value (`unix:///path` or a bare path),
    /// falling back to `$CILIUM_SOCK` and the default socket.
    pub fn from_host(host: Option<&str>) -> Result<Self, ClientError> {
        let env = std::env::var("CILIUM_SOCK").ok();
        let raw = host
            .map(str::to_owned)
            .or(env)
            .unwrap_or_else(|| crate::DEFAULT_SOCKET.to_owned());
        let path = if let Some(p) = raw.strip_prefix("unix://") {
            p.to_owned()
        } else if raw.starts_with('/') {
            raw.clone()
        } else {
            return Err(ClientError::BadHost(raw));
        };
        if path.is_empty() {
            return Err(ClientError::BadHost(raw));
        }
        Ok(Self::new(path))
    }

    /// A client of cilium-health's API on `socket`.
    pub fn health(socket: impl Into<PathBuf>) -> Self {
        Self {
            base: crate::health::BASE_PATH,
            ..Self::new(socket)
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends one request and reads the whole response.
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Response, ClientError> {
        let unreachable = |source| ClientError::Unreachable {
            path: self.socket.clone(),
            source,
        };
        let mut stream = UnixStream::connect(&self.socket).map_err(unreachable)?;
        stream
            .set_read_timeout(Some(self.timeout))
            .map_err(unreachable)?;
        stream
            .set_write_timeout(Some(self.timeout))
            .map_err(unreachable)?;
        let mut req = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n",
            self.base
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        if let Some(b) = body {
            bytes.extend_from_slice(b);
        }
        stream.write_all(&bytes).map_err(unreachable)?;
        // room for a typical answer (GET /config is ~10 KB): read_to_end
        // otherwise starts at 32 bytes and doubles, a syscall each
        let mut raw = Vec::with_capacity(16 * 1024);
        stream.read_to_end(&mut raw).map_err(unreachable)?;
        parse_response(&raw)
    }

    /// Sends a request; non-2xx answers become [`ClientError::Api`] carrying
    /// the agent's error string.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Vec<u8>, ClientError> {
        let resp = self.raw(method, path, headers, body)?;
        if (200..300).contains(&resp.status) {
            return Ok(resp.body);
        }
        let message = serde_json::from_slice::<String>(&resp.body)
            .unwrap_or_else(|_| String::from_utf8_lossy(&resp.body).trim().to_owned());
        Err(ClientError::Api {
            status: resp.status,
            message,
        })
    }

    pub fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<T, ClientError> {
        let body = self.call("GET", path, headers, None)?;
        serde_json::from_slice(&body).map_err(|e| ClientError::Malformed(e.to_string()))
    }

    pub fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let payload =
            serde_json::to_vec(body).map_err(|e| ClientError::Malformed(e.to_string()))?;
        let resp = self.call(method, path, &[], Some(&payload))?;
        let resp = if resp.is_empty() {
            b"null".to_vec()
        } else {
            resp
        };
        serde_json::from_slice(&resp).map_err(|e| ClientError::Malformed(e.to_string()))
    }
}

fn parse_response(raw: &[u8]) -> Result<Response, ClientError> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| ClientError::Malformed("no end of headers".into()))?;
    let head =
        std::str::from_utf8(&raw[..split]).map_err(|e| ClientError::Malformed(e.to_string()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ClientError::Malformed(format!("bad status line {status_line:?}")))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if k == "content-length" {
            length = v.parse::<usize>().ok();
        }
    }
    let rest = &raw[split + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        match length {
            Some(n) if n <= rest.len() => rest[..n].to_vec(),
            Some(n) => {
                return Err(ClientError::Malformed(format!(
                    "body shorter than content-length {n}"
                )))
            }
            None => rest.to_vec(),
        }
    };
    Ok(Response { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, ClientError> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| ClientError::Malformed("truncated chunk size".into()))?;
        let size_str =
            std::str::from_utf8(&data[..eol]).map_err(|e| ClientError::Malformed(e.to_string()))?;
        let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| ClientError::Malformed(format!("bad chunk size {size_str:?}")))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(ClientError::Malformed("truncated chunk".into()));
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked_bodies() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        let r = parse_response(b"HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n\r\n3\r\n\"x\"\r\n0\r\n\r\n").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (400, &b"\"x\""[..]));
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn host_flag_accepts_unix_uris_and_paths_only() {
        assert_eq!(
            Client::from_host(Some("unix:///tmp/a.sock"))
                .unwrap()
                .socket(),
            Path::new("/tmp/a.sock")
        );
        assert_eq!(
            Client::from_host(Some("/tmp/b.sock")).unwrap().socket(),
            Path::new("/tmp/b.sock")
        );
        assert!(Client::from_host(Some("tcp://1.2.3.4:80")).is_err());
    }
}
