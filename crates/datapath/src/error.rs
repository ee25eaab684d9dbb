use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bpf {op} on map {map}: {source}")]
    MapOp {
        op: &'static str,
        map: String,
        source: std::io::Error,
    },
    #[error("loading BPF object {object}: {source}")]
    Load {
        object: &'static str,
        source: Box<aya::EbpfError>,
    },
    #[error("loading program {program} of {object}: {source}")]
    Program {
        object: &'static str,
        program: String,
        source: Box<aya::programs::ProgramError>,
    },
    #[error("program {program} not found in {object}")]
    NoProgram {
        object: &'static str,
        program: String,
    },
    #[error("attaching {program} to {device}: {cause}")]
    Attach {
        program: String,
        /// The device, or the cgroup directory.
        device: String,
        cause: Box<AttachError>,
    },
    #[error("map {map}: {message}")]
    Map { map: String, message: String },
    /// A pinned map whose layout is not the one its handle expects.
    #[error("map {map}: {property} is {found}, expected {expected}")]
    MapMismatch {
        map: String,
        property: &'static str,
        expected: String,
        found: String,
    },
    #[error("parsing BPF object {object}: {message}")]
    Parse {
        object: &'static str,
        message: String,
    },
}

/// Why a program did not attach; `Error::Attach` says which program and
/// where. aya's and the kernel's own words are kept as they are.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    // aya's errors are boxed: unboxed they would make every Result of
    // this crate large.
    #[error(transparent)]
    Program(Box<aya::programs::ProgramError>),
    #[error(transparent)]
    Link(#[from] aya::programs::links::LinkError),
    #[error("pinning link at {}: {source}", .path.display())]
    Pin {
        path: PathBuf,
        source: aya::pin::PinError,
    },
    /// No tc filter could be created, nor the one there taken over.
    #[error("{create}; replacing: {replace}")]
    TcReplace {
        create: Box<aya::programs::ProgramError>,
        replace: Box<aya::programs::ProgramError>,
    },
    /// Creating a tc filter failed and the one there could not be found.
    #[error(transparent)]
    TcLookup(std::io::Error),
    /// The tc fallback, after tcx would not attach, failed too.
    #[error("tc: {0}")]
    Tc(Box<AttachError>),
    /// A cgroup path with a NUL byte in it.
    #[error(transparent)]
    CgroupPath(#[from] std::ffi::NulError),
    #[error(transparent)]
    Statfs(std::io::Error),
    #[error("not a cgroup v2 directory (mount cgroup2 there first)")]
    NotCgroup2,
}

impl From<aya::programs::ProgramError> for AttachError {
    fn from(e: aya::programs::ProgramError) -> Self {
        AttachError::Program(Box::new(e))
    }
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
