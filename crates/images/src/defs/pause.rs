//! registry.k8s.io/pause: the sandbox image, one static binary.

use std::path::Path;

use crate::defs::require;
use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::oci::{Image, RunConfig};
use crate::Error;

/// `pause` is the binary (static, as upstream builds it; a dynamic one
/// brings its libraries from `host_root`).
pub fn image(reference: &str, pause: &Path, host_root: &Path) -> Result<Image, Error> {
    require(pause)?;
    let mut layer = Layer::new();
    HostFiles::new(host_root).add_external(&mut layer, "/pause", pause, 0o755)?;
    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            entrypoint: vec!["/pause".into()],
            user: "65535:65535".into(),
            working_dir: "/".into(),
            ..RunConfig::default()
        },
        layer,
    })
}
