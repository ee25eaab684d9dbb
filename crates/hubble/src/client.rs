//! Clients of Hubble's services: where a server is (a Unix socket, TCP,
//! or TCP with TLS and the server name its certificate must carry) and a
//! gRPC channel to it, made at once (Relay, which must know whether a
//! node answers) or at the first call (our CLI and tests).

use crate::tls::TlsError;
use rustls::pki_types::ServerName;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::{Channel, Endpoint, Uri};

/// A Hubble server and the way to it.
#[derive(Clone)]
pub enum Target {
    Unix(PathBuf),
    /// `host:port`, plaintext
    Tcp(String),
    /// `host:port`, TLS checked against `server_name`
    Tls {
        address: String,
        server_name: ServerName<'static>,
        connector: tokio_rustls::TlsConnector,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connecting to {target}: {source}")]
    Transport {
        target: String,
        source: tonic::transport::Error,
    },
    #[error("connecting to {target}: no connection within {timeout:?}")]
    Timeout { target: String, timeout: Duration },
}

impl Target {
    /// `address` over TLS from `config`, expecting `server_name`.
    pub fn tls(
        address: String,
        server_name: &str,
        config: impl Into<Arc<rustls::ClientConfig>>,
    ) -> Result<Self, TlsError> {
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| TlsError::Config(format!("server name {server_name:?}: {e}")))?;
        Ok(Self::Tls {
            address,
            server_name,
            connector: tokio_rustls::TlsConnector::from(config.into()),
        })
    }

    /// A channel that connects at its first call.
    pub fn lazy(self) -> Channel {
        endpoint().connect_with_connector_lazy(self.connector())
    }

    /// A channel connected now, or why there is none within `timeout`.
    pub async fn connect(self, timeout: Duration) -> Result<Channel, ConnectError> {
        let target = self.to_string();
        match tokio::time::timeout(timeout, endpoint().connect_with_connector(self.connector()))
            .await
        {
            Ok(Ok(channel)) => Ok(channel),
            Ok(Err(source)) => Err(ConnectError::Transport { target, source }),
            Err(_) => Err(ConnectError::Timeout { target, timeout }),
        }
    }

    fn connector(
        self,
    ) -> impl tower::Service<
        Uri,
        Response = hyper_util::rt::TokioIo<Io>,
        Error = std::io::Error,
        Future = impl Send,
    > + Send
           + Clone
           + 'static {
        tower::service_fn(move |_: Uri| {
            let target = self.clone();
            async move { target.open().await.map(hyper_util::rt::TokioIo::new) }
        })
    }

    async fn open(self) -> std::io::Result<Io> {
        Ok(match self {
            Self::Unix(path) => Io::Unix(tokio::net::UnixStream::connect(&path).await?),
            Self::Tcp(address) => Io::Tcp(tokio::net::TcpStream::connect(&address).await?),
            Self::Tls {
                address,
                server_name,
                connector,
            } => {
                let tcp = tokio::net::TcpStream::connect(&address).await?;
                Io::Tls(Box::new(connector.connect(server_name, tcp).await?))
            }
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "unix://{}", path.display()),
            Self::Tcp(address) => f.write_str(address),
            Self::Tls {
                address,
                server_name,
                ..
            } => write!(f, "{address} (TLS, {})", server_name.to_str()),
        }
    }
}

/// The URI is not used to connect; gRPC needs one for :authority.
fn endpoint() -> Endpoint {
    Endpoint::from_static("http://hubble")
}

/// A channel to the gRPC server on the Unix socket at `path`; it
/// connects at the first call.
pub fn unix_channel(path: impl Into<PathBuf>) -> Channel {
    Target::Unix(path.into()).lazy()
}

/// A connection to a Hubble server, whichever way it was reached.
pub enum Io {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

macro_rules! each_io {
    ($self:ident, $io:ident => $e:expr) => {
        match $self.get_mut() {
            Io::Unix($io) => {
                let $io = Pin::new($io);
                $e
            }
            Io::Tcp($io) => {
                let $io = Pin::new($io);
                $e
            }
            Io::Tls($io) => {
                let $io = Pin::new($io.as_mut());
                $e
            }
        }
    };
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        each_io!(self, io => io.poll_read(cx, buf))
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        each_io!(self, io => io.poll_write(cx, buf))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each_io!(self, io => io.poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each_io!(self, io => io.poll_shutdown(cx))
    }
}
