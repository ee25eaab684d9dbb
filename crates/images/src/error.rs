//! What can go wrong building an image; every variant names the path or
//! input that failed.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an ELF file this crate reads ({reason})")]
    Elf { path: PathBuf, reason: String },
    #[error(
        "{library} (needed by {needed_by}) not found in the loader's search path under {root}"
    )]
    LibraryNotFound {
        library: String,
        needed_by: PathBuf,
        root: PathBuf,
    },
    #[error("program {name} not found in {dirs} under {root}")]
    ProgramNotFound {
        name: String,
        dirs: String,
        root: PathBuf,
    },
    #[error("{path}: too many levels of symbolic links")]
    SymlinkLoop { path: PathBuf },
    #[error("{path}: {reason}")]
    UnsupportedFile { path: PathBuf, reason: &'static str },
    #[error("image path {path:?}: {reason}")]
    BadImagePath { path: PathBuf, reason: &'static str },
    #[error("image path /{path}: already {existing}, cannot add {new}")]
    Conflict {
        path: PathBuf,
        existing: String,
        new: String,
    },
    #[error("an input of {path} changed while it was being written; run again")]
    InputChanged { path: PathBuf },
    #[error("{program} --list-full: {reason}")]
    Applets { program: PathBuf, reason: String },
    #[error("image reference {reference:?}: {reason}")]
    BadReference {
        reference: String,
        reason: &'static str,
    },
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
