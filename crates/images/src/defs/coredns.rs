//! registry.k8s.io/coredns/coredns, mirroring CoreDNS's Dockerfile: the
//! static /coredns given `cap_net_bind_service=+ep` (so it binds port 53
//! as the image's user), on distroless's static nonroot base (root,
//! nobody and nonroot accounts, /tmp, /home/nonroot), `USER
//! nonroot:nonroot`, ENTRYPOINT /coredns, EXPOSE 53 53/udp. Left out: the
//! CA bundle the Dockerfile copies from Debian, which only CoreDNS's
//! TLS upstreams read and no lab cluster has.

use std::path::Path;

use crate::defs::{add_accounts, add_base_dirs, require, User, NOBODY, ROOT};
use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::oci::{Image, RunConfig};
use crate::Error;

/// distroless's unprivileged account.
const NONROOT: User = User {
    name: "nonroot",
    uid: 65532,
    home: "/home/nonroot",
    shell: "/sbin/nologin",
};

/// CAP_NET_BIND_SERVICE.
const NET_BIND_SERVICE: u32 = 10;

pub fn image(reference: &str, coredns: &Path, host_root: &Path) -> Result<Image, Error> {
    require(coredns)?;
    let mut layer = Layer::new();
    add_base_dirs(&mut layer)?;
    add_accounts(&mut layer, &[ROOT, NOBODY, NONROOT], &[])?;
    layer.dir(NONROOT.home, 0o700)?;
    HostFiles::new(host_root).add_external(&mut layer, "/coredns", coredns, 0o755)?;
    layer.set_file_capabilities("/coredns", &[NET_BIND_SERVICE])?;
    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            entrypoint: vec!["/coredns".into()],
            user: "nonroot:nonroot".into(),
            working_dir: "/".into(),
            exposed_ports: vec!["53/tcp".into(), "53/udp".into()],
            ..RunConfig::default()
        },
        layer,
    })
}
