//! Where the Kubernetes binaries are: `$CILIUM_RS_K8S_BIN`, else the cache
//! `scripts/build-k8s.sh` builds into for the version `tools/k8s` pins.

use std::path::{Path, PathBuf};

/// The tools/k8s module, which pins the release.
const GO_MOD: &str = include_str!("../../../tools/k8s/go.mod");

/// The pinned Kubernetes release (`v1.34.4`).
pub fn version() -> &'static str {
    GO_MOD
        .lines()
        .map(str::split_whitespace)
        .find_map(|mut words| match (words.next(), words.next()) {
            (Some("k8s.io/kubernetes"), Some(v)) => Some(v),
            _ => None,
        })
        .expect("tools/k8s/go.mod requires k8s.io/kubernetes")
}

#[derive(Debug, thiserror::Error)]
#[error("{} not found in {}: run scripts/build-k8s.sh (scripts/install.sh does)", name, dir.display())]
pub struct Missing {
    pub name: &'static str,
    pub dir: PathBuf,
}

/// The directory with the built binaries.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CILIUM_RS_K8S_BIN") {
        return dir.into();
    }
    let cache = std::env::var_os("CILIUM_RS_K8S_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/cilium-rs/k8s")
        });
    cache.join(version()).join("bin")
}

/// The four binaries, checked to exist.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub apiserver: PathBuf,
    pub controller_manager: PathBuf,
    pub scheduler: PathBuf,
    pub kubectl: PathBuf,
}

impl Binaries {
    pub fn find() -> Result<Self, Missing> {
        Self::in_dir(&bin_dir())
    }

    pub fn in_dir(dir: &Path) -> Result<Self, Missing> {
        let get = |name: &'static str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Missing {
                    name,
                    dir: dir.to_owned(),
                })
            }
        };
        Ok(Self {
            apiserver: get("kube-apiserver")?,
            controller_manager: get("kube-controller-manager")?,
            scheduler: get("kube-scheduler")?,
            kubectl: get("kubectl")?,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pinned_release_is_read_from_the_go_module() {
        let v = super::version();
        assert!(v.starts_with("v1."), "{v}");
        assert!(
            super::bin_dir().ends_with(format!("{v}/bin"))
                || std::env::var_os("CILIUM_RS_K8S_BIN").is_some()
        );
    }
}
