//! Copies files from the host's installed packages into a layer the way
//! the host has them: every symlink on the way (/bin -> usr/bin,
//! /etc/alternatives/...) stays a symlink and its target comes along, and
//! an ELF file brings its interpreter and every shared library it needs,
//! transitively, found where the image's own loader will look (it has no
//! ld.so.cache: RPATH/RUNPATH, then the system directories).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use crate::elf;
use crate::layer::Layer;
use crate::Error;

/// glibc's system search path on Debian amd64 (`ld.so --help`).
const LIBRARY_DIRS: [&str; 4] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib",
    "/usr/lib",
];

/// Where Debian packages put programs (usrmerge: /sbin and /bin are
/// symlinks to these).
const PROGRAM_DIRS: [&str; 2] = ["/usr/sbin", "/usr/bin"];

/// The linux limit on symlinks followed while resolving one path.
const MAX_SYMLINKS: usize = 40;

pub struct HostFiles {
    root: PathBuf,
    /// ELF files (real image paths) whose needs are already in the layer.
    scanned: BTreeSet<PathBuf>,
}

impl HostFiles {
    /// Files are taken from under `root` ("/" for the host itself);
    /// absolute symlinks resolve inside it.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HostFiles {
            root: root.into(),
            scanned: BTreeSet::new(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Adds the host's `path` (absolute, as the image will have it) to the
    /// layer with every symlink and directory on the way, plus, for an ELF
    /// file, what it needs at run time. Returns the path the chain ends at.
    pub fn add_path(
        &mut self,
        layer: &mut Layer,
        path: impl AsRef<Path>,
    ) -> Result<PathBuf, Error> {
        let real = self.walk(path.as_ref(), Some(layer))?.ok_or_else(|| {
            Error::io(
                "reading",
                self.root.join(relative(path.as_ref())),
                std::io::ErrorKind::NotFound.into(),
            )
        })?;
        Ok(real)
    }

    /// Where the host's `path` ends after every symlink, on the host
    /// (under the root).
    pub fn resolve(&mut self, path: impl AsRef<Path>) -> Result<PathBuf, Error> {
        let path = path.as_ref();
        match self.walk(path, None)? {
            Some(real) => Ok(self.root.join(real)),
            None => Err(Error::io(
                "reading",
                self.root.join(relative(path)),
                std::io::ErrorKind::NotFound.into(),
            )),
        }
    }

    /// Finds the program `name` in /usr/sbin or /usr/bin and adds it with
    /// [`add_path`](Self::add_path). Returns where it is in the image.
    pub fn add_program(&mut self, layer: &mut Layer, name: &str) -> Result<PathBuf, Error> {
        for dir in PROGRAM_DIRS {
            let path = Path::new(dir).join(name);
            if self.walk(&path, None)?.is_some() {
                self.add_path(layer, &path)?;
                return Ok(path);
            }
        }
        Err(Error::ProgramNotFound {
            name: name.to_owned(),
            dirs: PROGRAM_DIRS.join(", "),
            root: self.root.clone(),
        })
    }

    /// Adds everything under the host directory `dir`, recursively.
    pub fn add_tree(&mut self, layer: &mut Layer, dir: impl AsRef<Path>) -> Result<(), Error> {
        let real = self.add_path(layer, dir.as_ref())?;
        let host = self.root.join(&real);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&host).map_err(|e| Error::io("listing", &host, e))? {
            names.push(
                entry
                    .map_err(|e| Error::io("listing", &host, e))?
                    .file_name(),
            );
        }
        names.sort();
        for name in names {
            let child = Path::new("/").join(&real).join(name);
            if std::fs::symlink_metadata(self.root.join(relative(&child)))
                .map(|m| m.is_dir())
                .unwrap_or(false)
            {
                self.add_tree(layer, &child)?;
            } else {
                self.add_path(layer, &child)?;
            }
        }
        Ok(())
    }

    /// Adds a file from outside the host root (a binary we built, a
    /// downloaded one) at `image_path`, plus the host libraries it needs.
    pub fn add_external(
        &mut self,
        layer: &mut Layer,
        image_path: impl AsRef<Path>,
        source: &Path,
        mode: u32,
    ) -> Result<(), Error> {
        layer.file_from_host(image_path.as_ref(), source, mode)?;
        self.add_needs(layer, source, &relative(image_path.as_ref()))
    }

    /// Resolves `path` under the root component by component like the
    /// kernel does; with a layer, records each symlink, directory and the
    /// final file in it. None if something on the way does not exist.
    fn walk(
        &mut self,
        path: &Path,
        mut layer: Option<&mut Layer>,
    ) -> Result<Option<PathBuf>, Error> {
        let mut done = PathBuf::new();
        let mut todo: Vec<OsString> = components(path);
        todo.reverse();
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            if c == ".." {
                done.pop();
                continue;
            }
            let rel = done.join(&c);
            let host = self.root.join(&rel);
            let meta = match std::fs::symlink_metadata(&host) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(Error::io("reading", host, e)),
            };
            if meta.file_type().is_symlink() {
                hops += 1;
                if hops > MAX_SYMLINKS {
                    return Err(Error::SymlinkLoop {
                        path: path.to_owned(),
                    });
                }
                let target =
                    std::fs::read_link(&host).map_err(|e| Error::io("reading", &host, e))?;
                if let Some(l) = layer.as_deref_mut() {
                    l.symlink(&rel, &target)?;
                }
                if target.is_absolute() {
                    done = PathBuf::new();
                }
                todo.extend(components(&target).into_iter().rev());
            } else if meta.is_dir() {
                if let Some(l) = layer.as_deref_mut() {
                    l.ensure_dir(&rel)?;
                }
                done = rel;
            } else if meta.is_file() {
                if !todo.is_empty() {
                    return Ok(None);
                }
                if let Some(l) = layer.as_deref_mut() {
                    l.file_from_host(&rel, &host, meta.permissions().mode() & 0o7777)?;
                    self.add_needs(l, &host, &rel)?;
                }
                done = rel;
            } else {
                return Err(Error::UnsupportedFile {
                    path: host,
                    reason: "neither a file, a directory nor a symlink",
                });
            }
        }
        Ok(Some(done))
    }

    /// If `host` is an ELF file (at `rel` in the image), adds its
    /// interpreter and its libraries, transitively.
    fn add_needs(&mut self, layer: &mut Layer, host: &Path, rel: &Path) -> Result<(), Error> {
        if !self.scanned.insert(rel.to_owned()) {
            return Ok(());
        }
        let Some(dynamic) = elf::read(host)? else {
            return Ok(());
        };
        if let Some(interp) = &dynamic.interp {
            self.add_path(layer, interp)?;
        }
        let origin = Path::new("/").join(rel.parent().unwrap_or(Path::new("")));
        for library in &dynamic.needed {
            let found = self
                .find_library(library, &dynamic, &origin)?
                .ok_or_else(|| Error::LibraryNotFound {
                    library: library.clone(),
                    needed_by: host.to_owned(),
                    root: self.root.clone(),
                })?;
            self.add_path(layer, found)?;
        }
        Ok(())
    }

    /// The path the loader would load `library` from: a name with a '/' as
    /// it is, else the first of RPATH (only without RUNPATH), RUNPATH and
    /// the system directories that has it, built for the same machine.
    fn find_library(
        &mut self,
        library: &str,
        needer: &elf::Dynamic,
        origin: &Path,
    ) -> Result<Option<PathBuf>, Error> {
        if library.contains('/') {
            return Ok(Some(Path::new("/").join(library)));
        }
        let rpath = if needer.runpath.is_empty() {
            &needer.rpath[..]
        } else {
            &[]
        };
        let origin = origin.to_string_lossy();
        let dirs = rpath
            .iter()
            .chain(&needer.runpath)
            .map(|d| d.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))
            .chain(LIBRARY_DIRS.iter().map(|d| d.to_string()));
        for dir in dirs {
            let candidate = Path::new(&dir).join(library);
            let Some(real) = self.walk(&candidate, None)? else {
                continue;
            };
            match elf::read(&self.root.join(real))? {
                Some(d) if d.machine == needer.machine => return Ok(Some(candidate)),
                _ => continue,
            }
        }
        Ok(None)
    }
}

fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

fn relative(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::Entry;

    fn has_file(l: &Layer, p: &str) -> bool {
        matches!(l.get(p), Some(Entry::File { .. }))
    }

    #[test]
    fn a_symlinked_shell_brings_its_target_its_loader_and_libc() {
        let mut l = Layer::new();
        let mut h = HostFiles::new("/");
        h.add_path(&mut l, "/bin/sh").unwrap();
        assert_eq!(
            l.get("/bin"),
            Some(&Entry::Symlink {
                target: "usr/bin".into()
            })
        );
        assert_eq!(
            l.get("/usr/bin/sh"),
            Some(&Entry::Symlink {
                target: "dash".into()
            })
        );
        assert!(has_file(&l, "/usr/bin/dash"));
        assert_eq!(
            l.get("/lib64"),
            Some(&Entry::Symlink {
                target: "usr/lib64".into()
            })
        );
        assert!(matches!(
            l.get("/usr/lib64/ld-linux-x86-64.so.2"),
            Some(Entry::Symlink { .. })
        ));
        assert!(has_file(
            &l,
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
        ));
        assert!(has_file(&l, "/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert_eq!(
            l.get("/lib"),
            Some(&Entry::Symlink {
                target: "usr/lib".into()
            })
        );
    }

    #[test]
    fn libraries_are_followed_transitively() {
        // ls needs libselinux, which needs libpcre2-8.
        let mut l = Layer::new();
        let mut h = HostFiles::new("/");
        h.add_program(&mut l, "ls").unwrap();
        assert!(has_file(&l, "/usr/bin/ls"));
        let libs: Vec<_> = l
            .entries()
            .map(|(p, _)| p.to_string_lossy().into_owned())
            .collect();
        assert!(
            libs.iter().any(|p| p.contains("libselinux.so.1")),
            "{libs:?}"
        );
        assert!(libs.iter().any(|p| p.contains("libpcre2-8.so")), "{libs:?}");
    }

    #[test]
    fn a_fake_root_resolves_absolute_and_relative_links_inside_it() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("usr/bin")).unwrap();
        std::fs::create_dir_all(r.join("etc/alternatives")).unwrap();
        std::fs::write(r.join("usr/bin/real"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("usr/bin", r.join("bin")).unwrap();
        std::os::unix::fs::symlink("/bin/real", r.join("etc/alternatives/tool")).unwrap();
        std::os::unix::fs::symlink("../../etc/alternatives/tool", r.join("usr/bin/tool")).unwrap();
        let mut l = Layer::new();
        let mut h = HostFiles::new(r);
        let real = h.add_program(&mut l, "tool").unwrap();
        assert_eq!(real, Path::new("/usr/bin/tool"));
        assert_eq!(
            l.get("/etc/alternatives/tool"),
            Some(&Entry::Symlink {
                target: "/bin/real".into()
            })
        );
        assert_eq!(
            l.get("/bin"),
            Some(&Entry::Symlink {
                target: "usr/bin".into()
            })
        );
        assert!(has_file(&l, "/usr/bin/real"));
        assert!(h.add_program(&mut l, "missing").is_err());
    }

    #[test]
    fn a_symlink_loop_is_an_error_naming_the_path() {
        let root = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("b", root.path().join("a")).unwrap();
        std::os::unix::fs::symlink("a", root.path().join("b")).unwrap();
        let err = HostFiles::new(root.path())
            .add_path(&mut Layer::new(), "/a")
            .unwrap_err();
        assert!(matches!(err, Error::SymlinkLoop { .. }), "{err}");
    }
}
