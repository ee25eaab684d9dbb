//! `<state dir>/<ID>/ep_config.json` (and `template.txt`, naming the
//! datapath template the endpoint runs), written as Cilium regenerates: into
//! `<ID>_next`, then swapped into place, so a crash never leaves a
//! half-written endpoint directory behind. No fsync: surviving a killed
//! agent needs only the page cache, and the state is for one boot.

use super::Endpoint;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const EP_CONFIG: &str = "ep_config.json";
pub use abi::state_dir::ENDPOINT_TEMPLATE as TEMPLATE_ID;

pub fn dir(state_dir: &Path, id: u16) -> PathBuf {
    state_dir.join(id.to_string())
}

pub fn write(state_dir: &Path, ep: &Endpoint, template: Option<&str>) -> std::io::Result<()> {
    let final_dir = dir(state_dir, ep.id);
    let next = state_dir.join(format!("{}_next", ep.id));
    let stale = state_dir.join(format!("{}_stale", ep.id));
    let _ = std::fs::remove_dir_all(&next);
    std::fs::create_dir_all(&next)?;
    let mut f = std::fs::File::create(next.join(EP_CONFIG))?;
    f.write_all(&serde_json::to_vec_pretty(ep).expect("endpoint serializes"))?;
    if let Some(template) = template {
        std::fs::write(next.join(TEMPLATE_ID), template)?;
    }
    let _ = std::fs::remove_dir_all(&stale);
    if final_dir.exists() {
        std::fs::rename(&final_dir, &stale)?;
    }
    std::fs::rename(&next, &final_dir)?;
    let _ = std::fs::remove_dir_all(&stale);
    Ok(())
}

/// Points a restored endpoint at this run's template, touching nothing
/// when it already names it (a restart after an upgrade is the only
/// writer: restoring hundreds of endpoints stays free of writes).
pub fn refresh_template(state_dir: &Path, id: u16, template: &str) -> std::io::Result<()> {
    let path = dir(state_dir, id).join(TEMPLATE_ID);
    if std::fs::read(&path).is_ok_and(|had| had == template.as_bytes()) {
        return Ok(());
    }
    crate::statefile::replace(&path, template.as_bytes())
}

pub fn remove(state_dir: &Path, id: u16) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir(state_dir, id)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Why a saved endpoint could not be taken back.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{} holds endpoint {found} instead of {want}", path.display())]
    WrongId {
        path: PathBuf,
        found: u16,
        want: u16,
    },
}

/// Endpoints found under `state_dir`; leftovers of interrupted writes are
/// cleaned up (a `_stale` dir whose swap never finished is the one to keep).
pub fn scan(state_dir: &Path) -> Vec<Result<Endpoint, StateError>> {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in &names {
        if let Some(id) = name.strip_suffix("_stale") {
            let final_dir = state_dir.join(id);
            if !final_dir.exists() {
                let _ = std::fs::rename(state_dir.join(name), &final_dir);
            } else {
                let _ = std::fs::remove_dir_all(state_dir.join(name));
            }
        } else if name.ends_with("_next") || name.ends_with("_next_fail") {
            let _ = std::fs::remove_dir_all(state_dir.join(name));
        }
    }
    let mut ids: Vec<u16> = std::fs::read_dir(state_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u16>().ok())
        .collect();
    ids.sort_unstable();
    ids.into_iter()
        .map(|id| {
            let path = dir(state_dir, id).join(EP_CONFIG);
            let bytes = std::fs::read(&path).map_err(|source| StateError::Read {
                path: path.clone(),
                source,
            })?;
            let ep: Endpoint =
                serde_json::from_slice(&bytes).map_err(|source| StateError::Parse {
                    path: path.clone(),
                    source,
                })?;
            if ep.id != id {
                return Err(StateError::WrongId {
                    path,
                    found: ep.id,
                    want: id,
                });
            }
            Ok(ep)
        })
        .collect()
}
