//! Writes an image as an OCI image layout in one tar, the form
//! `ctr images import` reads, and leaves an archive alone when it already
//! holds the same image under the same name.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::oci::{Digest, Documents, Image, OCI_LAYOUT};
use crate::tar::{read_entry, TarWriter};
use crate::Error;

/// What [`write`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub manifest_digest: Digest,
    /// Bytes of the archive at the path.
    pub size: u64,
    /// False when the archive was already this image and was not touched.
    pub rebuilt: bool,
}

/// Writes `image` to `path` (via a temporary file in the same directory,
/// renamed over it), unless `path` already holds an archive with the same
/// index.json: the same manifest digest and the same name.
pub fn write(image: &Image, path: &Path) -> Result<Written, Error> {
    // First pass: hash the layer to know the documents.
    let (layer_digest, layer_size) = hash_layer(image)?;
    let docs = image.documents(layer_digest, layer_size)?;

    if let Some(size) = unchanged(path, &docs.index) {
        return Ok(Written {
            manifest_digest: docs.manifest_digest,
            size,
            rebuilt: false,
        });
    }

    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io("creating a temporary file in", dir, e))?;
    let out = BufWriter::new(tmp.as_file());
    write_layout(image, &docs, layer_digest, layer_size, out, path)?;
    tmp.as_file()
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .map_err(|e| Error::io("writing", path, e))?;
    tmp.persist(path)
        .map_err(|e| Error::io("renaming into place", path, e.error))?;
    let size = std::fs::metadata(path)
        .map_err(|e| Error::io("reading", path, e))?
        .len();
    Ok(Written {
        manifest_digest: docs.manifest_digest,
        size,
        rebuilt: true,
    })
}

/// The sha256 and size of the layer tar, without keeping it.
fn hash_layer(image: &Image) -> Result<(Digest, u64), Error> {
    let sink = Hashing::new(io::sink());
    let Hashing { hasher, count, .. } = image.layer.write_to(sink)?;
    Ok((Digest(hasher.finalize().into()), count))
}

/// The archive's size if it is already this image (its index.json is
/// `index`).
fn unchanged(path: &Path, index: &[u8]) -> Option<u64> {
    let file = File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let existing = read_entry(BufReader::new(file), "index.json", 1 << 20).ok()??;
    (existing == index).then_some(size)
}

/// The layout as a tar: oci-layout and index.json first (so the check
/// above reads only the start), then the blobs by digest. The layer is
/// read a second time; it must come out as the first pass hashed it.
fn write_layout(
    image: &Image,
    docs: &Documents,
    layer_digest: Digest,
    layer_size: u64,
    out: impl Write,
    path: &Path,
) -> Result<(), Error> {
    let io_err = |e| Error::io("writing", path, e);
    let changed = || Error::InputChanged {
        path: path.to_owned(),
    };
    let mut tar = TarWriter::new(out);
    tar.file("oci-layout", 0o644, OCI_LAYOUT).map_err(io_err)?;
    tar.file("index.json", 0o644, &docs.index).map_err(io_err)?;
    tar.dir("blobs", 0o755).map_err(io_err)?;
    tar.dir("blobs/sha256", 0o755).map_err(io_err)?;

    let config_digest = Digest::of(&docs.config);
    let mut blobs = [config_digest, docs.manifest_digest, layer_digest];
    blobs.sort_by_key(Digest::hex);
    for (i, digest) in blobs.iter().enumerate() {
        if blobs[..i].contains(digest) {
            continue;
        }
        let name = format!("blobs/sha256/{}", digest.hex());
        if *digest == config_digest {
            tar.file(&name, 0o644, &docs.config).map_err(io_err)?;
        } else if *digest == docs.manifest_digest {
            tar.file(&name, 0o644, &docs.manifest).map_err(io_err)?;
        } else {
            let mut failed = None;
            let mut again = None;
            let written = tar.file_with(&name, 0o644, layer_size, |w| {
                let h = image.layer.write_to(Hashing::new(w)).map_err(|e| {
                    failed = Some(e);
                    io::Error::other("reading the layer failed")
                })?;
                again = Some(Digest(h.hasher.finalize().into()));
                Ok(())
            });
            if let Some(e) = failed {
                return Err(e);
            }
            match written {
                // A file that grew or shrank since the first pass.
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(changed()),
                other => other.map_err(io_err)?,
            }
            if again != Some(layer_digest) {
                return Err(changed());
            }
        }
    }
    tar.finish().map_err(io_err)?;
    Ok(())
}

/// Hashes and counts what passes through to `inner`.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::Layer;
    use crate::oci::RunConfig;
    use crate::tar::list;
    use serde_json::Value;

    fn image(dir: &Path) -> Image {
        let host = dir.join("hello");
        std::fs::write(&host, "hello\n").unwrap();
        let mut layer = Layer::new();
        layer
            .file_from_host("/usr/share/hello", &host, 0o644)
            .unwrap();
        layer
            .file_bytes("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644)
            .unwrap();
        layer.symlink("/bin", "usr/bin").unwrap();
        layer.dir("/tmp", 0o1777).unwrap();
        Image {
            reference: "registry.k8s.io/pause:3.10.1".into(),
            config: RunConfig {
                entrypoint: vec!["/pause".into()],
                user: "65535:65535".into(),
                ..RunConfig::default()
            },
            layer,
        }
    }

    fn entry(archive: &[u8], name: &str) -> Vec<u8> {
        list(archive)
            .into_iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no {name} in the archive"))
            .data
    }

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    fn blob(archive: &[u8], digest: &Value) -> Vec<u8> {
        let hex = digest.as_str().unwrap().strip_prefix("sha256:").unwrap();
        entry(archive, &format!("blobs/sha256/{hex}"))
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(&image(dir.path()), &dir.path().join("a.tar")).unwrap();
        let b = write(&image(dir.path()), &dir.path().join("b.tar")).unwrap();
        assert_eq!(a.manifest_digest, b.manifest_digest);
        assert!(a.rebuilt && b.rebuilt);
        let a_bytes = std::fs::read(dir.path().join("a.tar")).unwrap();
        assert_eq!(a_bytes, std::fs::read(dir.path().join("b.tar")).unwrap());
        assert_eq!(a.size, a_bytes.len() as u64);
    }

    #[test]
    fn the_layout_links_index_manifest_config_and_layer_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pause.tar");
        let written = write(&image(dir.path()), &path).unwrap();
        let archive = std::fs::read(&path).unwrap();

        assert_eq!(
            entry(&archive, "oci-layout"),
            br#"{"imageLayoutVersion":"1.0.0"}"#
        );
        let index = json(&entry(&archive, "index.json"));
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(
            index["mediaType"],
            "application/vnd.oci.image.index.v1+json"
        );
        let desc = &index["manifests"][0];
        assert_eq!(
            desc["annotations"]["io.containerd.image.name"],
            "registry.k8s.io/pause:3.10.1"
        );
        assert_eq!(
            desc["annotations"]["org.opencontainers.image.ref.name"],
            "3.10.1"
        );
        assert_eq!(desc["digest"], written.manifest_digest.to_string());

        let manifest_bytes = blob(&archive, &desc["digest"]);
        assert_eq!(Digest::of(&manifest_bytes), written.manifest_digest);
        assert_eq!(desc["size"], manifest_bytes.len());
        let manifest = json(&manifest_bytes);
        assert_eq!(
            manifest["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        let layer_desc = &manifest["layers"][0];
        assert_eq!(
            layer_desc["mediaType"],
            "application/vnd.oci.image.layer.v1.tar"
        );
        let layer = blob(&archive, &layer_desc["digest"]);
        assert_eq!(Digest::of(&layer).to_string(), layer_desc["digest"]);
        assert_eq!(layer_desc["size"], layer.len());

        let config_bytes = blob(&archive, &manifest["config"]["digest"]);
        assert_eq!(
            Digest::of(&config_bytes).to_string(),
            manifest["config"]["digest"]
        );
        let config = json(&config_bytes);
        assert_eq!(config["rootfs"]["diff_ids"][0], layer_desc["digest"]);
        assert_eq!(config["architecture"], "amd64");
        assert_eq!(config["os"], "linux");
        assert_eq!(config["config"]["User"], "65535:65535");
        assert_eq!(config["config"]["Entrypoint"][0], "/pause");
    }

    #[test]
    fn the_layer_lists_parents_first_owned_by_root_at_time_zero() {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        let layer = list(&img.layer.write_to(Vec::new()).unwrap());
        let names: Vec<&str> = layer.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bin",
                "etc/",
                "etc/passwd",
                "tmp/",
                "usr/",
                "usr/share/",
                "usr/share/hello"
            ]
        );
        for e in &layer {
            assert_eq!(
                (e.mtime, e.uid, e.gid, e.owner_names.as_str()),
                (0, 0, 0, ""),
                "{}",
                e.name
            );
        }
        let by_name = |n: &str| layer.iter().find(|e| e.name == n).unwrap();
        assert_eq!(
            (by_name("bin").kind, by_name("bin").link.as_str()),
            (b'2', "usr/bin")
        );
        assert_eq!(by_name("tmp/").mode, 0o1777);
        assert_eq!(by_name("usr/share/hello").data, b"hello\n");
    }

    #[test]
    fn an_archive_holding_the_image_is_left_alone_until_an_input_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pause.tar");
        let first = write(&image(dir.path()), &path).unwrap();
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&path);

        let again = write(&image(dir.path()), &path).unwrap();
        assert!(!again.rebuilt);
        assert_eq!(again.manifest_digest, first.manifest_digest);
        assert_eq!(inode(&path), before, "the archive was rewritten");

        let mut renamed = image(dir.path());
        renamed.reference = "registry.k8s.io/pause:3.10".into();
        let by_name = write(&renamed, &path).unwrap();
        assert!(
            by_name.rebuilt,
            "a new name must be written even with the same content"
        );
        assert_eq!(by_name.manifest_digest, first.manifest_digest);

        let changed = image(dir.path());
        std::fs::write(dir.path().join("hello"), "changed\n").unwrap();
        let by_content = write(&changed, &path).unwrap();
        assert!(by_content.rebuilt);
        assert_ne!(by_content.manifest_digest, first.manifest_digest);
    }

    #[test]
    fn a_missing_input_names_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let mut img = image(dir.path());
        img.layer
            .file_from_host("/x", dir.path().join("not-there"), 0o644)
            .unwrap();
        let err = write(&img, &dir.path().join("x.tar")).unwrap_err();
        assert!(err.to_string().contains("not-there"), "{err}");
        assert!(!dir.path().join("x.tar").exists());
    }
}
