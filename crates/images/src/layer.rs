//! An image's one layer: the files, directories and symlinks it holds,
//! written as a deterministic tar (sorted, parents before children, mtime
//! 0, owner root, the modes given).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use crate::tar::TarWriter;
use crate::Error;

/// Mode of a directory nobody asked for explicitly (a parent).
const PARENT_DIR_MODE: u32 = 0o755;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir { mode: u32 },
    File { source: Source, mode: u32 },
    Symlink { target: PathBuf },
}

/// Where a file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Read when the layer is written.
    Host(PathBuf),
    Bytes(Vec<u8>),
}

impl Entry {
    fn describe(&self) -> String {
        match self {
            Entry::Dir { mode } => format!("a directory (mode {mode:o})"),
            Entry::File {
                source: Source::Host(p),
                mode,
            } => format!("a file from {} (mode {mode:o})", p.display()),
            Entry::File {
                source: Source::Bytes(b),
                mode,
            } => format!("a file of {} given bytes (mode {mode:o})", b.len()),
            Entry::Symlink { target } => format!("a symlink to {}", target.display()),
        }
    }
}

/// Paths are the image's, absolute or not ("/usr/bin/ls" and "usr/bin/ls"
/// are the same entry); they must not contain "." or "..".
#[derive(Debug, Clone, Default)]
pub struct Layer {
    /// Keyed by the relative path; Path's order compares components, so a
    /// directory sorts before everything under it.
    entries: BTreeMap<PathBuf, Entry>,
    /// File capabilities (`security.capability`) of regular files.
    capabilities: BTreeMap<PathBuf, Vec<u8>>,
}

impl Layer {
    pub fn new() -> Self {
        Layer::default()
    }

    /// A directory with `mode`; if it is already there (as a parent, say),
    /// it takes this mode.
    pub fn dir(&mut self, path: impl AsRef<Path>, mode: u32) -> Result<(), Error> {
        let rel = relative(path.as_ref())?;
        if let Some(Entry::Dir { mode: m }) = self.entries.get_mut(&rel) {
            *m = mode;
            return Ok(());
        }
        self.insert(rel, Entry::Dir { mode })
    }

    /// A directory unless one is there already (its mode stays).
    pub fn ensure_dir(&mut self, path: impl AsRef<Path>) -> Result<(), Error> {
        let rel = relative(path.as_ref())?;
        if let Some(Entry::Dir { .. }) = self.entries.get(&rel) {
            return Ok(());
        }
        self.insert(
            rel,
            Entry::Dir {
                mode: PARENT_DIR_MODE,
            },
        )
    }

    pub fn file(&mut self, path: impl AsRef<Path>, source: Source, mode: u32) -> Result<(), Error> {
        let rel = relative(path.as_ref())?;
        self.insert(rel, Entry::File { source, mode })
    }

    pub fn file_from_host(
        &mut self,
        path: impl AsRef<Path>,
        host: impl Into<PathBuf>,
        mode: u32,
    ) -> Result<(), Error> {
        self.file(path, Source::Host(host.into()), mode)
    }

    pub fn file_bytes(
        &mut self,
        path: impl AsRef<Path>,
        bytes: impl Into<Vec<u8>>,
        mode: u32,
    ) -> Result<(), Error> {
        self.file(path, Source::Bytes(bytes.into()), mode)
    }

    /// A symlink holding `target` verbatim (relative or absolute).
    pub fn symlink(
        &mut self,
        path: impl AsRef<Path>,
        target: impl Into<PathBuf>,
    ) -> Result<(), Error> {
        let rel = relative(path.as_ref())?;
        self.insert(
            rel,
            Entry::Symlink {
                target: target.into(),
            },
        )
    }

    /// Gives the regular file at `path` the file capabilities `caps`
    /// (capability numbers) permitted and effective, as `setcap
    /// cap_x=+ep` does: a process that is not root gets them on exec.
    pub fn set_file_capabilities(
        &mut self,
        path: impl AsRef<Path>,
        caps: &[u32],
    ) -> Result<(), Error> {
        let rel = relative(path.as_ref())?;
        match self.entries.get(&rel) {
            Some(Entry::File { .. }) => {
                self.capabilities.insert(rel, vfs_cap_data(caps));
                Ok(())
            }
            other => Err(Error::Conflict {
                new: "file capabilities".into(),
                existing: other.map_or_else(|| "nothing".into(), Entry::describe),
                path: rel,
            }),
        }
    }

    /// Takes the entry at `path` out (a file or symlink another takes the
    /// place of); a directory's children stay.
    pub fn remove(&mut self, path: impl AsRef<Path>) -> Option<Entry> {
        let rel = relative(path.as_ref()).ok()?;
        self.capabilities.remove(&rel);
        self.entries.remove(&rel)
    }

    pub fn get(&self, path: impl AsRef<Path>) -> Option<&Entry> {
        relative(path.as_ref())
            .ok()
            .and_then(|rel| self.entries.get(&rel))
    }

    /// Every entry, parents before children; paths are relative.
    pub fn entries(&self) -> impl Iterator<Item = (&Path, &Entry)> {
        self.entries.iter().map(|(p, e)| (p.as_path(), e))
    }

    /// Writes the layer as a tar to `out` and returns `out`. Host files are
    /// read now.
    pub fn write_to<W: Write>(&self, out: W) -> Result<W, Error> {
        let mut tar = TarWriter::new(out);
        let write_err = |path: &Path, e| Error::io("writing the layer entry", path, e);
        for (rel, entry) in &self.entries {
            let name = name_of(rel)?;
            match entry {
                Entry::Dir { mode } => tar.dir(name, *mode).map_err(|e| write_err(rel, e))?,
                Entry::Symlink { target } => {
                    let target = target.to_str().ok_or_else(|| Error::BadImagePath {
                        path: target.clone(),
                        reason: "symlink target is not UTF-8",
                    })?;
                    tar.symlink(name, target).map_err(|e| write_err(rel, e))?
                }
                Entry::File { source, mode } => {
                    let data = match source {
                        Source::Bytes(b) => std::borrow::Cow::Borrowed(b),
                        Source::Host(host) => std::borrow::Cow::Owned(
                            std::fs::read(host).map_err(|e| Error::io("reading", host, e))?,
                        ),
                    };
                    let xattrs: Vec<(&str, &[u8])> = self
                        .capabilities
                        .get(rel)
                        .map(|c| ("security.capability", c.as_slice()))
                        .into_iter()
                        .collect();
                    tar.file_with_xattrs(name, *mode, &data, &xattrs)
                        .map_err(|e| write_err(rel, e))?
                }
            }
        }
        tar.finish()
            .map_err(|e| Error::io("writing the layer of", "/", e))
    }

    /// Adds `entry` at `rel` after its parents, which must be directories
    /// (a path under a symlink would be written through it).
    fn insert(&mut self, rel: PathBuf, entry: Entry) -> Result<(), Error> {
        let mut parent = PathBuf::new();
        let components: Vec<_> = rel.components().collect();
        for c in &components[..components.len().saturating_sub(1)] {
            parent.push(c);
            match self.entries.get(&parent) {
                Some(Entry::Dir { .. }) => {}
                None => {
                    self.entries.insert(
                        parent.clone(),
                        Entry::Dir {
                            mode: PARENT_DIR_MODE,
                        },
                    );
                }
                Some(other) => {
                    return Err(Error::Conflict {
                        path: parent,
                        existing: other.describe(),
                        new: format!("/{} under it", rel.display()),
                    })
                }
            }
        }
        match self.entries.get(&rel) {
            None => {
                self.entries.insert(rel, entry);
                Ok(())
            }
            Some(existing) if *existing == entry => Ok(()),
            Some(existing) => Err(Error::Conflict {
                path: rel,
                existing: existing.describe(),
                new: entry.describe(),
            }),
        }
    }
}

/// The image path without its leading '/'; only normal components.
fn relative(path: &Path) -> Result<PathBuf, Error> {
    let bad = |reason| Error::BadImagePath {
        path: path.to_owned(),
        reason,
    };
    let mut rel = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => rel.push(n),
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(bad("contains . or .."))
            }
        }
    }
    if rel.as_os_str().is_empty() {
        return Err(bad("is the root"));
    }
    Ok(rel)
}

fn name_of(rel: &Path) -> Result<&str, Error> {
    rel.to_str().ok_or_else(|| Error::BadImagePath {
        path: rel.to_owned(),
        reason: "not UTF-8",
    })
}

/// `struct vfs_cap_data` revision 2 (little-endian): magic with the
/// effective flag, then permitted and inheritable for capabilities 0-31
/// and 32-63.
fn vfs_cap_data(caps: &[u32]) -> Vec<u8> {
    const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
    const VFS_CAP_FLAGS_EFFECTIVE: u32 = 0x1;
    let mut permitted = [0u32; 2];
    for &c in caps {
        permitted[(c / 32) as usize % 2] |= 1 << (c % 32);
    }
    let mut out = (VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE)
        .to_le_bytes()
        .to_vec();
    for p in permitted {
        out.extend(p.to_le_bytes());
        out.extend(0u32.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_capabilities_are_vfs_cap_data_for_files_only() {
        // cap_net_bind_service=+ep, as `getfattr -n security.capability` shows it
        assert_eq!(
            vfs_cap_data(&[10]),
            [1, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        let mut l = Layer::new();
        l.file_bytes("/coredns", "elf", 0o755).unwrap();
        l.set_file_capabilities("/coredns", &[10]).unwrap();
        assert!(l.set_file_capabilities("/missing", &[10]).is_err());
        l.dir("/etc", 0o755).unwrap();
        assert!(l.set_file_capabilities("/etc", &[10]).is_err());
        let tar = l.write_to(Vec::new()).unwrap();
        let needle = b"SCHILY.xattr.security.capability=\x01\x00\x00\x02\x00\x04";
        assert!(tar.windows(needle.len()).any(|w| w == needle));
    }

    #[test]
    fn parents_come_before_children_whatever_the_insertion_order() {
        let mut l = Layer::new();
        l.file_bytes("/usr/bin/a", "a", 0o755).unwrap();
        l.symlink("/bin", "usr/bin").unwrap();
        l.file_bytes("/usr-x", "x", 0o644).unwrap();
        l.dir("/tmp", 0o1777).unwrap();
        let order: Vec<_> = l
            .entries()
            .map(|(p, _)| p.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            order,
            ["bin", "tmp", "usr", "usr/bin", "usr/bin/a", "usr-x"]
        );
    }

    #[test]
    fn adding_the_same_entry_twice_is_fine_a_different_one_is_a_conflict() {
        let mut l = Layer::new();
        l.symlink("/bin", "usr/bin").unwrap();
        l.symlink("bin", "usr/bin").unwrap();
        let err = l.symlink("/bin", "elsewhere").unwrap_err();
        assert!(
            err.to_string()
                .contains("/bin: already a symlink to usr/bin"),
            "{err}"
        );
    }

    #[test]
    fn nothing_can_be_added_under_a_symlink() {
        let mut l = Layer::new();
        l.symlink("/bin", "usr/bin").unwrap();
        let err = l.file_bytes("/bin/sh", "", 0o755).unwrap_err();
        assert!(matches!(err, Error::Conflict { .. }), "{err}");
    }

    #[test]
    fn an_explicit_directory_mode_wins_over_a_parent() {
        let mut l = Layer::new();
        l.file_bytes("/tmp/x", "", 0o644).unwrap();
        l.dir("/tmp", 0o1777).unwrap();
        l.ensure_dir("/tmp").unwrap();
        assert_eq!(l.get("/tmp"), Some(&Entry::Dir { mode: 0o1777 }));
    }

    #[test]
    fn dot_dot_is_refused() {
        let mut l = Layer::new();
        assert!(l.file_bytes("/a/../b", "", 0o644).is_err());
    }
}
