//! The lab's container images, written as OCI image archives that
//! `ctr -n k8s.io images import <archive>` loads under their full names,
//! with no registry and no daemon. The same inputs give the same bytes
//! (and manifest digest); an archive that already holds the image is left
//! alone.
//!
//! - `layer`: an image's files as a deterministic tar (`tar` writes it).
//! - `host_files`: files from the host's packages with their symlinks,
//!   interpreter and shared libraries (`elf` reads what they need).
//! - `oci`: the config, manifest and index; `archive`: the layout in a tar.
//! - `defs`: the six images the lab runs, and the conformance tests' own
//!   (`defs::test_images`).

pub mod archive;
pub mod defs;
pub mod elf;
mod error;
pub mod host_files;
pub mod layer;
pub mod oci;
pub mod tar;

use std::path::{Path, PathBuf};
use std::time::Instant;

pub use error::Error;
pub use oci::{Digest, Image, RunConfig};

/// The sandbox image containerd's CRI config pins.
pub const PAUSE_REFERENCE: &str = "registry.k8s.io/pause:3.10.1";
pub const AGNHOST_REFERENCE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.56";
pub const BUSYBOX_REFERENCE: &str = "docker.io/library/busybox:1.35.0";
pub const JESSIE_DNSUTILS_REFERENCE: &str = "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7";

/// The cluster DNS image kubeadm names for CoreDNS `version` ("v1.12.1").
pub fn coredns_reference(version: &str) -> String {
    format!("registry.k8s.io/coredns/coredns:{version}")
}

/// The CoreDNS binary and the release it was built from.
#[derive(Debug, Clone)]
pub struct CoreDns {
    pub binary: PathBuf,
    pub version: String,
}

/// The agent's (and operator's) image, tagged with the workspace version:
/// "localhost/cilium-rs/cilium:v0.1.0".
pub fn agent_reference() -> String {
    format!("localhost/cilium-rs/cilium:v{}", env!("CARGO_PKG_VERSION"))
}

/// The cilium-cni to ship from a cargo `release_dir` (`<target>/release`):
/// the musl build scripts/build-cni.sh makes in
/// `<target>/x86_64-unknown-linux-musl/release` (a pod's ADD skips glibc's
/// start, 0.8 ms on a VM), unless cargo linked the glibc one since.
pub fn cilium_cni(release_dir: &Path) -> PathBuf {
    let made = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let glibc = release_dir.join("cilium-cni");
    let Some(target) = release_dir.parent() else {
        return glibc;
    };
    let musl = target.join("x86_64-unknown-linux-musl/release/cilium-cni");
    match made(&musl) {
        Some(m) if Some(m) >= made(&glibc) => musl,
        _ => glibc,
    }
}

/// Where the images' files come from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Where `cargo build --release --workspace` put our binaries.
    pub release_dir: PathBuf,
    /// deploy/image, holding the agent image's scripts.
    pub deploy_image_dir: PathBuf,
    /// The pause binary; None leaves the pause image out.
    pub pause: Option<PathBuf>,
    /// The agnhost binary; None leaves the agnhost image out.
    pub agnhost: Option<PathBuf>,
    /// agnhost porter's TLS certificate and key, put at /localhost.crt and
    /// /localhost.key as upstream's image has them; None leaves them out.
    pub porter_tls: Option<(PathBuf, PathBuf)>,
    /// CoreDNS; None leaves its image out.
    pub coredns: Option<CoreDns>,
    /// Where Debian's programs and libraries are taken from: "/".
    pub host_root: PathBuf,
}

impl Inputs {
    /// The workspace's target/release and deploy/image, programs from "/".
    pub fn for_workspace(
        workspace: &Path,
        pause: Option<PathBuf>,
        agnhost: Option<PathBuf>,
    ) -> Self {
        Inputs {
            release_dir: workspace.join("target/release"),
            deploy_image_dir: workspace.join("deploy/image"),
            pause,
            agnhost,
            porter_tls: None,
            coredns: None,
            host_root: PathBuf::from("/"),
        }
    }
}

/// One archive [`build_all`] made or found up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub reference: String,
    pub path: PathBuf,
    pub manifest_digest: Digest,
    /// Bytes of the archive.
    pub size: u64,
    /// False when the archive already held this image and was not touched.
    pub rebuilt: bool,
}

/// The images `inputs` allow, in memory (layers list files; nothing is
/// read yet), each with the file name its archive gets.
pub fn define_all(inputs: &Inputs) -> Result<Vec<(&'static str, Image)>, Error> {
    let root = inputs.host_root.as_path();
    let agent_inputs = defs::agent::AgentInputs {
        release_dir: &inputs.release_dir,
        deploy_image_dir: &inputs.deploy_image_dir,
        host_root: root,
    };
    let mut images = vec![(
        "cilium.tar",
        defs::agent::image(&agent_reference(), &agent_inputs)?,
    )];
    if let Some(pause) = &inputs.pause {
        images.push((
            "pause.tar",
            defs::pause::image(PAUSE_REFERENCE, pause, root)?,
        ));
    }
    if let Some(agnhost) = &inputs.agnhost {
        images.push((
            "agnhost.tar",
            defs::agnhost::image(AGNHOST_REFERENCE, agnhost, inputs.porter_tls.as_ref(), root)?,
        ));
    }
    if let Some(coredns) = &inputs.coredns {
        images.push((
            "coredns.tar",
            defs::coredns::image(&coredns_reference(&coredns.version), &coredns.binary, root)?,
        ));
    }
    images.push((
        "jessie-dnsutils.tar",
        defs::jessie_dnsutils::image(JESSIE_DNSUTILS_REFERENCE, root)?,
    ));
    images.push((
        "busybox.tar",
        defs::busybox::image(BUSYBOX_REFERENCE, root)?,
    ));
    Ok(images)
}

/// Writes every image `inputs` allow into `out_dir` (cilium.tar,
/// pause.tar, agnhost.tar, coredns.tar, jessie-dnsutils.tar, busybox.tar), rewriting only those whose
/// content or name changed.
pub fn build_all(inputs: &Inputs, out_dir: &Path) -> Result<Vec<Built>, Error> {
    define_all(inputs)?
        .into_iter()
        .map(|(file, image)| build(&image, &out_dir.join(file)))
        .collect()
}

/// Writes the conformance tests' images ([`defs::test_images`]) into
/// `out_dir`, rewriting only those whose content or name changed.
pub fn build_test_images(
    inputs: &defs::test_images::Inputs,
    out_dir: &Path,
) -> Result<Vec<Built>, Error> {
    defs::test_images::define(inputs)?
        .into_iter()
        .map(|(file, image)| build(&image, &out_dir.join(file)))
        .collect()
}

/// Writes one image's archive at `path` unless it is already there.
pub fn build(image: &Image, path: &Path) -> Result<Built, Error> {
    let start = Instant::now();
    let written = archive::write(image, path)?;
    tracing::info!(
        subsys = "images",
        image = %image.reference,
        path = %path.display(),
        digest = %written.manifest_digest,
        size = written.size,
        rebuilt = written.rebuilt,
        duration = ?start.elapsed(),
        "{}",
        if written.rebuilt { "Wrote image archive" } else { "Image archive up to date" }
    );
    Ok(Built {
        reference: image.reference.clone(),
        path: path.to_owned(),
        manifest_digest: written.manifest_digest,
        size: written.size,
        rebuilt: written.rebuilt,
    })
}

#[cfg(test)]
mod tests {
    use super::cilium_cni;
    use std::fs::{File, FileTimes};
    use std::time::{Duration, SystemTime};

    fn made_at(path: &std::path::Path, secs_ago: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let at = SystemTime::now() - Duration::from_secs(secs_ago);
        File::create(path)
            .unwrap()
            .set_times(FileTimes::new().set_modified(at))
            .unwrap();
    }

    #[test]
    fn the_cni_built_last_ships() {
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        let glibc = release.join("cilium-cni");
        let musl = dir
            .path()
            .join("x86_64-unknown-linux-musl/release/cilium-cni");
        made_at(&glibc, 60);
        assert_eq!(cilium_cni(&release), glibc, "no musl build: glibc's");
        made_at(&musl, 30);
        assert_eq!(cilium_cni(&release), musl, "musl's built since");
        made_at(&glibc, 10);
        assert_eq!(cilium_cni(&release), glibc, "glibc's relinked since");
    }
}
