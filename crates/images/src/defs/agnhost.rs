//! registry.k8s.io/e2e-test-images/agnhost, mirroring upstream's
//! test/images/agnhost/Dockerfile: /agnhost (ENTRYPOINT, CMD pause),
//! /agnhost-2 linking to it, porter's /localhost.crt and /localhost.key,
//! /uploads, the ports it EXPOSEs, the users it
//! adds, and the packages it installs on Alpine (bind-tools, curl,
//! netcat-openbsd, iproute2, iperf, bash) taken from their Debian
//! counterparts; the rest of Alpine's userland (cat, sleep, wget, ...) is
//! busybox, as on Alpine. The shell is Debian's dash, not busybox's ash:
//! Debian builds ash to run its own applets before searching PATH, so
//! `sh -c "nc ..."` or `sh -c "ip ..."` would not reach the real ones.
//! Left out: the CoreDNS release upstream ships at /coredns, which only a
//! DNS test outside the conformance set runs (75 MB more for every node
//! to import).

use std::path::{Path, PathBuf};

use crate::defs::busybox::add_applets_where_no_program_is;
use crate::defs::{
    add_accounts, add_base_dirs, add_nsswitch, add_usrmerge, require, User, NOBODY, PATH, ROOT,
};
use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::oci::{Image, RunConfig};
use crate::Error;

/// Programs of the packages upstream installs, from Debian's:
/// bind9-dnsutils and bind9-host (Alpine's bind-tools), curl,
/// netcat-openbsd, iproute2, iperf (iperf 2), bash; sh (dash); and getent
/// (Alpine's base has musl's; the DNS tests' probes run `getent hosts`).
const PROGRAMS: [&str; 11] = [
    "dig", "host", "nslookup", "curl", "nc", "ip", "ss", "iperf", "bash", "sh", "getent",
];

/// "EXPOSE 80 8080 8081 9376 5000": test-webserver; netexec, nettest,
/// resource-consumer; netexec; serve-hostname; grpc-health-checking.
const PORTS: [&str; 5] = ["80/tcp", "8080/tcp", "8081/tcp", "9376/tcp", "5000/tcp"];

/// "adduser -u 1000 -D user-defined-in-image", for the supplemental
/// groups test, with the group "addgroup -g 50000" adds it to.
const TEST_USER: User = User {
    name: "user-defined-in-image",
    uid: 1000,
    home: "/home/user-defined-in-image",
    shell: "/bin/sh",
};
const TEST_GROUP: &str = "group-defined-in-image:x:50000:user-defined-in-image";

/// `porter_tls`: the certificate and key porter's TLS ports serve, from
/// the module's test/images/agnhost/porter.
pub fn image(
    reference: &str,
    agnhost: &Path,
    porter_tls: Option<&(PathBuf, PathBuf)>,
    host_root: &Path,
) -> Result<Image, Error> {
    require(agnhost)?;
    let mut layer = Layer::new();
    let mut host = HostFiles::new(host_root);
    add_usrmerge(&mut layer, &mut host)?;
    add_base_dirs(&mut layer)?;
    add_accounts(&mut layer, &[ROOT, NOBODY, TEST_USER], &[TEST_GROUP])?;
    add_nsswitch(&mut layer)?;
    layer.dir(TEST_USER.home, 0o755)?;

    host.add_external(&mut layer, "/agnhost", agnhost, 0o755)?;
    layer.symlink("/agnhost-2", "agnhost")?;
    layer.dir("/uploads", 0o755)?;
    if let Some((cert, key)) = porter_tls {
        require(cert)?;
        require(key)?;
        layer.file_from_host("/localhost.crt", cert, 0o644)?;
        layer.file_from_host("/localhost.key", key, 0o600)?;
    }

    for program in PROGRAMS {
        host.add_program(&mut layer, program)?;
    }
    layer.symlink("/usr/local/bin/iperf", "/usr/bin/iperf")?;

    add_applets_where_no_program_is(&mut layer, &mut host)?;

    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            entrypoint: vec!["/agnhost".into()],
            cmd: vec!["pause".into()],
            env: vec![PATH.into()],
            working_dir: "/".into(),
            exposed_ports: PORTS.iter().map(|p| p.to_string()).collect(),
            ..RunConfig::default()
        },
        layer,
    })
}
