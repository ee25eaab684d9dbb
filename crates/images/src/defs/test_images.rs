//! The images Kubernetes' conformance tests run besides agnhost,
//! jessie-dnsutils and pause (`e2e.test --list-images`), under upstream's
//! names, each serving its image's role from Debian's packages or from the
//! Go module upstream builds it from:
//!
//! - busybox:1.37.0-1: busybox 1.37.0 as Docker's busybox image has it,
//!   built from upstream's source (scripts/build-e2e.sh), every applet in
//!   /bin. Not Debian's build: its ash drops environment variables whose
//!   names are no shell identifier (`data-1`), which upstream's passes on
//!   as the ConfigMap and Secret tests check with `sh -c env`.
//! - httpd:2.4.38-4 and :2.4.39-4 (upstream: Apache httpd on Alpine),
//!   nginx:1.14-4 and :1.15-4 (upstream: nginx on Alpine): busybox's
//!   httpd serving the same page from the same document root on port 80.
//!   Tests only need a web server there; the StatefulSet tests break its
//!   readiness by moving `htdocs/index.html` away, as with Apache.
//! - nonroot:1.4: busybox with `USER 1234`, as upstream's Dockerfile.
//! - nonewprivs:1.3: its `nnp` (built from the module's
//!   test/images/nonewprivs) set-user-ID root, as upstream.
//! - nautilus:1.7 and kitten:1.7: agnhost with the update demo's picture
//!   and data.json, running test-webserver, as upstream.
//! - sample-apiserver:1.29.2: k8s.io/sample-apiserver built at the
//!   cluster's release (upstream's tag names an older one).
//! - etcd:3.6.4-0: Debian's etcd (3.4) at /usr/local/bin/etcd, where the
//!   aggregator test runs it as the sample API server's store.

use std::path::{Path, PathBuf};

use crate::defs::{agnhost, busybox, require, User, NOBODY, PATH, ROOT};
use crate::host_files::HostFiles;
use crate::oci::{Image, RunConfig};
use crate::Error;

const E2E: &str = "registry.k8s.io/e2e-test-images";

/// A web server's document root and the page upstream's image serves.
struct Site {
    name: &'static str,
    tags: [&'static str; 2],
    docroot: &'static str,
    index: &'static str,
}

const HTTPD: Site = Site {
    name: "httpd",
    tags: ["2.4.38-4", "2.4.39-4"],
    docroot: "/usr/local/apache2/htdocs",
    index: "<html><body><h1>It works!</h1></body></html>\n",
};

const NGINX: Site = Site {
    name: "nginx",
    tags: ["1.14-4", "1.15-4"],
    docroot: "/usr/share/nginx/html",
    index: "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n",
};

/// The update demo's two pictures.
const DEMOS: [&str; 2] = ["nautilus", "kitten"];

/// Where the images' own inputs are: what scripts/build-e2e.sh puts in
/// `test-images/` beside e2e.test.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// test-images/: nnp, sample-apiserver, nautilus/ and kitten/.
    pub dir: PathBuf,
    /// agnhost and porter's TLS files, the demo pictures' base.
    pub agnhost: PathBuf,
    pub porter_tls: Option<(PathBuf, PathBuf)>,
    pub host_root: PathBuf,
}

/// Every test image, each with the file name its archive gets.
pub fn define(inputs: &Inputs) -> Result<Vec<(String, Image)>, Error> {
    let root = inputs.host_root.as_path();
    let mut images = vec![(
        "busybox-1.37.0-1.tar".to_owned(),
        e2e_busybox(&inputs.dir.join("busybox"))?,
    )];
    for site in [HTTPD, NGINX] {
        for tag in site.tags {
            images.push((
                format!("{}-{tag}.tar", site.name),
                web_server(&format!("{E2E}/{}:{tag}", site.name), &site, root)?,
            ));
        }
    }
    images.push(("nonroot-1.4.tar".into(), nonroot(root)?));
    images.push((
        "nonewprivs-1.3.tar".into(),
        nonewprivs(&inputs.dir.join("nnp"), root)?,
    ));
    for demo in DEMOS {
        images.push((format!("{demo}-1.7.tar"), picture_server(demo, inputs)?));
    }
    images.push((
        "sample-apiserver-1.29.2.tar".into(),
        sample_apiserver(&inputs.dir.join("sample-apiserver"), root)?,
    ));
    images.push(("etcd-3.6.4-0.tar".into(), etcd(root)?));
    Ok(images)
}

fn e2e_busybox(binary: &Path) -> Result<Image, Error> {
    require(binary)?;
    let mut image = bare(&format!("{E2E}/busybox:1.37.0-1"), &[ROOT, NOBODY])?;
    image.layer.file_from_host("/bin/busybox", binary, 0o755)?;
    let mut names: Vec<_> = busybox::applets(binary)?
        .into_iter()
        .filter_map(|a| a.file_name().map(|n| n.to_owned()))
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        if name != "busybox" {
            image
                .layer
                .symlink(Path::new("/bin").join(name), "busybox")?;
        }
    }
    image.config.cmd = vec!["sh".into()];
    Ok(image)
}

fn web_server(reference: &str, site: &Site, host_root: &Path) -> Result<Image, Error> {
    let mut image = busybox::image(reference, host_root)?;
    image.layer.dir(site.docroot, 0o755)?;
    image.layer.file_bytes(
        Path::new(site.docroot).join("index.html"),
        site.index,
        0o644,
    )?;
    image.config.cmd = ["httpd", "-f", "-p", "80", "-h", site.docroot]
        .map(String::from)
        .to_vec();
    image.config.exposed_ports = vec!["80/tcp".into()];
    Ok(image)
}

fn nonroot(host_root: &Path) -> Result<Image, Error> {
    let mut image = busybox::image(&format!("{E2E}/nonroot:1.4"), host_root)?;
    image.config.user = "1234".into();
    Ok(image)
}

fn nonewprivs(nnp: &Path, host_root: &Path) -> Result<Image, Error> {
    require(nnp)?;
    let mut image = busybox::image(&format!("{E2E}/nonewprivs:1.3"), host_root)?;
    // `chmod +s`: what the test checks is that no_new_privs stops it
    image
        .layer
        .file_from_host("/usr/local/bin/nnp", nnp, 0o6755)?;
    image.config.cmd = vec!["nnp".into()];
    Ok(image)
}

fn picture_server(demo: &str, inputs: &Inputs) -> Result<Image, Error> {
    let pictures = inputs.dir.join(demo);
    let mut image = agnhost::image(
        &format!("{E2E}/{demo}:1.7"),
        &inputs.agnhost,
        inputs.porter_tls.as_ref(),
        &inputs.host_root,
    )?;
    for file in [format!("{demo}.jpg"), "data.json".to_owned()] {
        let source = pictures.join(&file);
        require(&source)?;
        image
            .layer
            .file_from_host(format!("/{file}"), source, 0o644)?;
    }
    image.config.cmd = vec!["test-webserver".into()];
    Ok(image)
}

fn sample_apiserver(binary: &Path, host_root: &Path) -> Result<Image, Error> {
    require(binary)?;
    let mut image = bare(&format!("{E2E}/sample-apiserver:1.29.2"), &[ROOT])?;
    HostFiles::new(host_root).add_external(&mut image.layer, "/sample-apiserver", binary, 0o755)?;
    image.config.entrypoint = vec!["/sample-apiserver".into()];
    Ok(image)
}

fn etcd(host_root: &Path) -> Result<Image, Error> {
    let mut host = HostFiles::new(host_root);
    let etcd = host.resolve("/usr/bin/etcd")?;
    let mut image = bare("registry.k8s.io/etcd:3.6.4-0", &[ROOT])?;
    host.add_external(&mut image.layer, "/usr/local/bin/etcd", &etcd, 0o755)?;
    image.config.cmd = vec!["/usr/local/bin/etcd".into()];
    Ok(image)
}

/// A distroless base: the directories every image has, `users`' accounts.
fn bare(reference: &str, users: &[User]) -> Result<Image, Error> {
    let mut layer = crate::layer::Layer::new();
    crate::defs::add_base_dirs(&mut layer)?;
    crate::defs::add_accounts(&mut layer, users, &[])?;
    Ok(Image {
        reference: reference.to_owned(),
        config: RunConfig {
            env: vec![PATH.into()],
            working_dir: "/".into(),
            ..RunConfig::default()
        },
        layer,
    })
}
