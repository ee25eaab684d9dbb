#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("netlink {op} {target}: {source}")]
    Netlink {
        op: &'static str,
        target: String,
        source: rtnetlink::Error,
    },
    #[error("opening netlink socket: {0}")]
    Connect(std::io::Error),
    #[error("link {0} not found")]
    NoLink(String),
    #[error("{op} network namespace {path}: {source}")]
    Netns {
        op: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("sysctl {key}: {source}")]
    Sysctl { key: String, source: std::io::Error },
}

impl Error {
    pub(crate) fn nl(
        op: &'static str,
        target: impl Into<String>,
    ) -> impl FnOnce(rtnetlink::Error) -> Error {
        let target = target.into();
        move |source| Error::Netlink { op, target, source }
    }

    /// The kernel refused to create something because it exists already.
    pub fn is_exists(&self) -> bool {
        matches!(
            self,
            Error::Netlink { source: rtnetlink::Error::NetlinkError(e), .. }
                if e.raw_code() == -libc::EEXIST
        )
    }
}
