//! The images the lab's nodes run (`crates/images`): built into the cache
//! by `up` (only what changed is written again), imported by every node's
//! init from the list `up` leaves in the lab dir.

use crate::layout;
use anyhow::Context;
use std::path::PathBuf;

/// Where the archives are kept between labs.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("CILIUM_RS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/cilium-rs")
        })
        .join("images")
}

fn list_file() -> PathBuf {
    layout::root().join("images.list")
}

/// Builds the images into `out` from the binaries beside cilium-lab, the
/// node binaries and deploy/image of the source tree they were built in.
pub fn build_into(out: &std::path::Path) -> anyhow::Result<Vec<images::Built>> {
    let bins = kubeplane::bins::NodeBinaries::find()?;
    let release = layout::bin_dir()?;
    // <workspace>/target/release
    let workspace = release
        .parent()
        .and_then(|p| p.parent())
        .context("cilium-lab is not in a workspace's target/release")?;
    let inputs = images::Inputs {
        release_dir: release.clone(),
        porter_tls: Some(bins.porter_tls),
        coredns: Some(images::CoreDns {
            binary: bins.coredns,
            version: kubeplane::bins::coredns_version().to_owned(),
        }),
        ..images::Inputs::for_workspace(workspace, Some(bins.pause), Some(bins.agnhost))
    };
    images::build_all(&inputs, out)
        .with_context(|| format!("building the images into {}", out.display()))
}

/// Builds the conformance tests' images into `out` from `test_images` (the
/// `test-images/` scripts/build-e2e.sh fills) and the node binaries.
pub fn build_test_images_into(
    test_images: &std::path::Path,
    out: &std::path::Path,
) -> anyhow::Result<Vec<images::Built>> {
    let bins = kubeplane::bins::NodeBinaries::find()?;
    let inputs = images::defs::test_images::Inputs {
        dir: test_images.to_owned(),
        agnhost: bins.agnhost,
        porter_tls: Some(bins.porter_tls),
        host_root: PathBuf::from("/"),
    };
    images::build_test_images(&inputs, out)
        .with_context(|| format!("building the test images into {}", out.display()))
}

/// Imports `archives` into every running real node's containerd, as its
/// init imports the lab's own: through `cilium-lab exec <node> -- ctr`.
pub fn import_into_nodes(archives: &[PathBuf]) -> anyhow::Result<()> {
    let nodes = layout::running_nodes();
    if nodes.is_empty() || !crate::real::running() {
        anyhow::bail!("importing images needs a lab of real nodes (`cilium-lab up`)");
    }
    let lab = layout::sibling("cilium-lab")?;
    let ctr = kubeplane::bins::NodeBinaries::find()?.ctr;
    for (index, _, _) in nodes {
        let node = topology::node_name(index);
        for archive in archives {
            let out = std::process::Command::new(&lab)
                .args(["exec", &node, "--"])
                .arg(&ctr)
                .args(crate::node::containerd::import_args())
                .arg(archive)
                .output()
                .context("running cilium-lab exec")?;
            if !out.status.success() {
                anyhow::bail!(
                    "importing {} on {node}: {}",
                    archive.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
    }
    Ok(())
}

/// Builds the images and lists them for the nodes; their references.
pub fn build() -> anyhow::Result<Vec<String>> {
    let built = build_into(&cache_dir())?;
    let list: String = built
        .iter()
        .map(|b| format!("{}\n", b.path.display()))
        .collect();
    layout::write_atomic(&list_file(), list.as_bytes())?;
    Ok(built.iter().map(|b| b.reference.clone()).collect())
}

/// The archives `build` listed.
pub fn archives() -> anyhow::Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(list_file())
        .with_context(|| format!("reading {} (written by `up`)", list_file().display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect())
}
