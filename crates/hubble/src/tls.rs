//! TLS as Hubble uses it between agents, Relay and clients: TLS 1.3 only,
//! the server's certificate from PEM files, and with client CAs given,
//! a client certificate signed by one of them required (mutual TLS; the
//! client's name is not checked, as in Cilium).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {why}")]
    Pem { path: PathBuf, why: String },
    #[error("{path} holds no {what}")]
    Empty { path: PathBuf, what: &'static str },
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Pem {
            path: path.into(),
            why: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            path: path.into(),
            what: "certificate",
        });
    }
    Ok(certs)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Pem {
        path: path.into(),
        why: e.to_string(),
    })
}

fn roots(ca_files: &[PathBuf]) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for f in ca_files {
        for c in certs(f)? {
            roots
                .add(c)
                .map_err(|e| TlsError::Config(format!("{}: {e}", f.display())))?;
        }
    }
    Ok(roots)
}

/// How often missing certificate files are looked for again.
const FILES_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// What `build` makes of certificate files once it can: a Secret mounted
/// as optional may come later, and Cilium waits for it. `waiting` hears
/// each failure before the next try.
pub async fn when_ready<T>(
    build: impl Fn() -> Result<T, TlsError>,
    waiting: impl Fn(&TlsError),
) -> T {
    loop {
        match build() {
            Ok(v) => return v,
            Err(e) => {
                waiting(&e);
                tokio::time::sleep(FILES_RETRY).await;
            }
        }
    }
}

/// A server's TLS: its certificate and key; with `client_cas`, clients
/// must present a certificate one of them signed.
pub fn server_config(
    cert: &Path,
    key_file: &Path,
    client_cas: &[PathBuf],
) -> Result<rustls::ServerConfig, TlsError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots(client_cas)?),
            provider(),
        )
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(certs(cert)?, key(key_file)?)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// A client's TLS: the CAs it trusts, and its own certificate when the
/// server asks for one.
pub fn client_config(
    ca_files: &[PathBuf],
    identity: Option<(&Path, &Path)>,
) -> Result<rustls::ClientConfig, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots(ca_files)?);
    let mut config = match identity {
        Some((cert, key_file)) => builder
            .with_client_auth_cert(certs(cert)?, key(key_file)?)
            .map_err(|e| TlsError::Config(e.to_string()))?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// A server's accepted TLS connection, as tonic serves it.
pub struct Conn(tokio_rustls::server::TlsStream<tokio::net::TcpStream>);

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Handshakes a listener's connections, each on a task of its own so a
/// slow or failing client holds up no other; a failed handshake (a
/// client without an accepted certificate) is dropped and reported to
/// `refused`.
pub fn incoming(
    listener: tokio::net::TcpListener,
    config: rustls::ServerConfig,
    refused: impl Fn(std::net::SocketAddr, std::io::Error) + Send + Sync + 'static,
) -> impl futures::Stream<Item = std::io::Result<Conn>> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let refused = Arc::new(refused);
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    if tx.send(Err(e)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let (acceptor, conns, refused) = (acceptor.clone(), tx.clone(), Arc::clone(&refused));
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(tls) => {
                        let _ = conns.send(Ok(Conn(tls))).await;
                    }
                    Err(e) => refused(peer, e),
                }
            });
            if tx.is_closed() {
                return;
            }
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}
