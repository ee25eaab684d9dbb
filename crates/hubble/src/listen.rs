//! A listener's connections as a stream, which tonic's servers take
//! (the agent's Unix and TCP servers, Relay's).

use futures::Stream;

pub fn tcp(
    listener: tokio::net::TcpListener,
) -> impl Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |l| async move {
        Some((l.accept().await.map(|(c, _)| c), l))
    })
}

pub fn unix(
    listener: tokio::net::UnixListener,
) -> impl Stream<Item = std::io::Result<tokio::net::UnixStream>> {
    futures::stream::unfold(listener, |l| async move {
        Some((l.accept().await.map(|(c, _)| c), l))
    })
}
