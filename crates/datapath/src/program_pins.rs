//! Verified programs kept pinned across agent restarts.
//!
//! Verifying the node's programs is most of an agent's start (some 175 ms
//! of this machine kind's two cores); a restarted agent of the same build
//! on the same maps runs the very programs the last one verified. A
//! program is reused only under the key it was verified with: its object's
//! bytes and the kernel IDs of the pinned maps it was loaded against. A
//! map moved aside and made again has a new ID, so a program still
//! holding the old one is never reused.

use crate::objects::Object;
use crate::sys;
use crate::Error;
use aya::programs::SchedClassifier;
use aya::Ebpf;
use sha2::{Digest, Sha256};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Where the programs of one object, loaded against its maps of now, are
/// pinned: `<bpffs>/cilium/programs/<object>-<key>/<program>`.
pub(crate) struct ProgramPins {
    dir: PathBuf,
}

impl ProgramPins {
    /// The pins of `obj` as `ebpf` loaded it, its pinned maps found under
    /// `globals`; pins of other keys for this object (an earlier build's,
    /// or programs holding replaced maps) are removed. Programs attached
    /// through them stay loaded: their links hold them.
    pub(crate) fn of(bpffs_root: &Path, globals: &Path, obj: Object, ebpf: &Ebpf) -> Self {
        let mut hash = Sha256::new();
        hash.update(obj.bytes);
        let mut names: Vec<&str> = ebpf.maps().map(|(name, _)| name).collect();
        names.sort_unstable();
        for name in names {
            // read-only data sections are not pinned: the object's bytes
            // are their contents
            if let Ok(id) = sys::obj_get(&globals.join(name)).and_then(|fd| sys::map_id(fd.as_fd()))
            {
                hash.update(name.as_bytes());
                hash.update(id.to_le_bytes());
            }
        }
        let key: String = hash.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let root = bpffs_root.join("cilium/programs");
        let dir = root.join(format!("{}-{key}", stem(obj)));
        if let Ok(entries) = std::fs::read_dir(&root) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let ours = name.rsplit_once('-').is_some_and(|(s, _)| s == stem(obj));
                if ours && entry.path() != dir {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        Self { dir }
    }

    /// The program `name` a previous load verified under this key.
    pub(crate) fn reuse(&self, name: &str) -> Option<SchedClassifier> {
        let path = self.dir.join(name);
        if !path.exists() {
            return None;
        }
        match SchedClassifier::from_pin(&path) {
            Ok(prog) => Some(prog),
            Err(e) => {
                tracing::warn!(subsys = "datapath", path = %path.display(), error = %e, "Unable to reuse pinned program; verifying it again");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Pins `prog`, just verified, for the next start. A failure costs
    /// that start the verifier, nothing else.
    pub(crate) fn keep(&self, name: &str, prog: &SchedClassifier) {
        let pinned = std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io("creating", &self.dir, e))
            .and_then(|()| {
                let fd = prog.fd().map_err(|e| Error::Map {
                    map: name.to_owned(),
                    message: format!("program without fd: {e}"),
                })?;
                let path = self.dir.join(name);
                sys::obj_pin(fd.as_fd(), &path).map_err(|e| Error::io("pinning", path, e))
            });
        if let Err(e) = pinned {
            tracing::debug!(subsys = "datapath", program = name, error = %e, "Verified program not kept for the next start");
        }
    }
}

/// `bpf_lxc` of `bpf_lxc.o`.
fn stem(obj: Object) -> &'static str {
    obj.name.trim_end_matches(".o")
}
