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
    #[error("attaching {program} to {device}: {message}")]
    Attach {
        program: String,
        device: String,
        message: String,
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

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
