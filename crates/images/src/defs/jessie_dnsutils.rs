//! registry.k8s.io/e2e-test-images/jessie-dnsutils, the DNS tests' second
//! prober, mirroring upstream's Dockerfile: a Debian userland with
//! `dnsutils`. Upstream's base is Debian jessie; ours is this host's
//! Debian: dash as sh, bash, bind9-dnsutils' dig, nslookup and host,
//! getent, awk and hostname, and the rest of the userland the probes use
//! (seq, sleep, cat, ...) from busybox. Left out: the CoreDNS release
//! upstream adds at /coredns, which no test runs from this image.

use std::path::Path;

use crate::defs::busybox::add_applets_where_no_program_is;
use crate::defs::{add_accounts, add_base_dirs, add_nsswitch, add_usrmerge, NOBODY, PATH, ROOT};
use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::oci::{Image, RunConfig};
use crate::Error;

/// What the probes run: `sh -c` loops of dig, `getent hosts`, `hostname
/// -i | awk`.
const PROGRAMS: [&str; 9] = [
    "sh", "bash", "dig", "nslookup", "host", "getent", "awk", "hostname", "grep",
];

pub fn image(reference: &str, host_root: &Path) -> Result<Image, Error> {
    let mut layer = Layer::new();
    let mut host = HostFiles::new(host_root);
    add_usrmerge(&mut layer, &mut host)?;
    add_base_dirs(&mut layer)?;
    add_accounts(&mut layer, &[ROOT, NOBODY], &[])?;
    add_nsswitch(&mut layer)?;
    for program in PROGRAMS {
        host.add_program(&mut layer, program)?;
    }
    add_applets_where_no_program_is(&mut layer, &mut host)?;
    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            // Debian's images' CMD
            cmd: vec!["bash".into()],
            env: vec![PATH.into()],
            working_dir: "/".into(),
            ..RunConfig::default()
        },
        layer,
    })
}
