//! docker.io/library/busybox: Debian's busybox-static at /bin/busybox and
//! a symlink for every applet it lists, as upstream's image has them
//! (there as hard links).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::defs::{add_accounts, add_base_dirs, NOBODY, PATH, ROOT};
use crate::elf;
use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::oci::{Image, RunConfig};
use crate::Error;

/// Where Debian's busybox-static puts it.
pub const HOST_BUSYBOX: &str = "/bin/busybox";

pub fn image(reference: &str, host_root: &Path) -> Result<Image, Error> {
    let busybox = static_busybox(host_root)?;
    let mut layer = Layer::new();
    add_base_dirs(&mut layer)?;
    add_accounts(&mut layer, &[ROOT, NOBODY], &[])?;
    layer.file_from_host("/bin/busybox", &busybox, 0o755)?;
    for applet in applets(&busybox)? {
        if applet != Path::new("bin/busybox") {
            layer.symlink(&applet, "/bin/busybox")?;
        }
    }
    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            cmd: vec!["sh".into()],
            env: vec![PATH.into()],
            working_dir: "/".into(),
            ..RunConfig::default()
        },
        layer,
    })
}

/// The host's busybox (under `host_root`), which must be static: it goes
/// into images without a loader.
pub fn static_busybox(host_root: &Path) -> Result<PathBuf, Error> {
    let busybox = HostFiles::new(host_root).resolve(HOST_BUSYBOX)?;
    match elf::read(&busybox)? {
        Some(d) if d.interp.is_none() && d.needed.is_empty() => Ok(busybox),
        _ => Err(Error::UnsupportedFile {
            path: busybox,
            reason: "not a static ELF program (install busybox-static)",
        }),
    }
}

/// The applets' paths (relative, e.g. "usr/bin/awk"), sorted, from
/// `busybox --list-full`.
pub fn applets(busybox: &Path) -> Result<Vec<PathBuf>, Error> {
    let failed = |reason: String| Error::Applets {
        program: busybox.to_owned(),
        reason,
    };
    let out = Command::new(busybox)
        .arg("--list-full")
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| failed(e.to_string()))?;
    let mut list: Vec<PathBuf> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    if let Some(bad) = list
        .iter()
        .find(|p| p.is_absolute() || p.components().count() > 3)
    {
        return Err(failed(format!("unexpected applet path {}", bad.display())));
    }
    list.sort();
    list.dedup();
    Ok(list)
}

/// Where a busybox applet would shadow a program already there.
const BIN_DIRS: [&str; 3] = ["usr/bin", "usr/sbin", "usr/local/bin"];

/// The host's static busybox, and a symlink to it for each applet no
/// program in the layer already answers to: the rest of a small distro's
/// userland (cat, sleep, seq, wget, ...) beside the real programs an image
/// takes from the host.
pub fn add_applets_where_no_program_is(
    layer: &mut Layer,
    host: &mut HostFiles,
) -> Result<(), Error> {
    let busybox = static_busybox(host.root())?;
    let real_busybox = Path::new("/").join(host.add_path(layer, HOST_BUSYBOX)?);
    for applet in applets(&busybox)? {
        let Some(path) = usrmerged(&applet) else {
            continue;
        };
        let name = path.file_name().unwrap_or_default();
        if BIN_DIRS
            .iter()
            .any(|d| layer.get(Path::new(d).join(name)).is_some())
        {
            continue;
        }
        layer.symlink(&path, &real_busybox)?;
    }
    Ok(())
}

/// Where an applet listed as bin/x or sbin/x lives under usrmerge; None
/// for anything outside the bin directories (linuxrc).
fn usrmerged(applet: &Path) -> Option<PathBuf> {
    let mut parts = applet.iter();
    let first = parts.next()?;
    let rest: PathBuf = parts.collect();
    if rest.as_os_str().is_empty() {
        return None;
    }
    match first.to_str()? {
        "bin" | "sbin" => Some(Path::new("/usr").join(first).join(rest)),
        "usr" => Some(Path::new("/").join(applet)),
        _ => None,
    }
}
