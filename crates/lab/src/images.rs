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
