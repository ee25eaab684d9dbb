//! The four images defined from this host's Debian packages, with stand-in
//! binaries for ours, pause and agnhost. Skips (saying so) on a host that
//! lacks one of the packages the images take programs from.

use std::path::{Path, PathBuf};

use images::layer::{Entry, Layer};
use images::{build_all, define_all, Inputs};

/// Programs the images take from the host, by package.
const HOST_PROGRAMS: [(&str, &str); 8] = [
    ("/usr/bin/busybox", "busybox-static"),
    ("/usr/bin/dig", "bind9-dnsutils"),
    ("/usr/bin/nc.openbsd", "netcat-openbsd"),
    ("/usr/bin/iperf", "iperf"),
    ("/usr/bin/curl", "curl"),
    ("/usr/bin/kmod", "kmod"),
    ("/usr/sbin/xtables-nft-multi", "iptables"),
    ("/usr/bin/ip", "iproute2"),
];

fn missing_packages() -> Vec<&'static str> {
    HOST_PROGRAMS
        .iter()
        .filter(|(p, _)| !Path::new(p).exists())
        .map(|&(_, pkg)| pkg)
        .collect()
}

/// A release dir of stand-ins (copies of /usr/bin/true, a dynamic ELF).
fn inputs(dir: &Path) -> Inputs {
    let release = dir.join("release");
    std::fs::create_dir_all(&release).unwrap();
    for name in [
        "cilium",
        "cilium-agent",
        "cilium-mount",
        "cilium-sysctlfix",
        "cilium-operator",
        "hubble-relay",
        "cilium-cni",
    ] {
        std::fs::copy("/usr/bin/true", release.join(name)).unwrap();
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut inputs = Inputs::for_workspace(
        &workspace,
        Some("/usr/bin/true".into()),
        Some("/usr/bin/true".into()),
    );
    inputs.release_dir = release;
    inputs.coredns = Some(images::CoreDns {
        binary: "/usr/bin/true".into(),
        version: "v1.12.1".into(),
    });
    inputs
}

fn file(l: &Layer, p: &str) -> bool {
    matches!(l.get(p), Some(Entry::File { .. }))
}

fn link(l: &Layer, p: &str) -> Option<String> {
    match l.get(p) {
        Some(Entry::Symlink { target }) => Some(target.display().to_string()),
        _ => None,
    }
}

#[test]
fn the_images_hold_what_their_commands_run() {
    let missing = missing_packages();
    if !missing.is_empty() {
        eprintln!("skipped: this host lacks the packages {missing:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let images = define_all(&inputs(dir.path())).unwrap();
    let names: Vec<_> = images
        .iter()
        .map(|(f, i)| (*f, i.reference.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("cilium.tar", images::agent_reference().as_str()),
            ("pause.tar", images::PAUSE_REFERENCE),
            ("agnhost.tar", images::AGNHOST_REFERENCE),
            ("coredns.tar", "registry.k8s.io/coredns/coredns:v1.12.1"),
            ("jessie-dnsutils.tar", images::JESSIE_DNSUTILS_REFERENCE),
            ("busybox.tar", images::BUSYBOX_REFERENCE),
        ]
    );
    let jessie = &images[4].1.layer;
    for p in ["/usr/bin/dig", "/usr/bin/getent", "/usr/bin/sh"] {
        assert!(jessie.get(p).is_some(), "{p}");
    }
    assert!(link(jessie, "/usr/bin/seq").is_some(), "busybox's seq");
    let coredns = &images[3].1;
    assert!(file(&coredns.layer, "/coredns"));
    assert_eq!(coredns.config.entrypoint, ["/coredns"]);
    assert_eq!(coredns.config.user, "nonroot:nonroot");

    let agent = &images[0].1.layer;
    for p in [
        "/usr/bin/cilium-agent",
        "/usr/bin/cilium-operator",
        "/usr/bin/hubble-relay",
        "/opt/cni/bin/cilium-cni",
        "/install-plugin.sh",
    ] {
        assert!(file(agent, p), "{p}");
    }
    assert_eq!(link(agent, "/bin").as_deref(), Some("usr/bin"));
    assert_eq!(link(agent, "/var/run").as_deref(), Some("../run"));
    assert_eq!(agent.get("/tmp"), Some(&Entry::Dir { mode: 0o1777 }));
    assert!(link(agent, "/usr/sbin/iptables").is_some());
    assert_eq!(
        link(
            agent,
            "/usr/lib/x86_64-linux-gnu/xtables/libxt_MASQUERADE.so"
        )
        .as_deref(),
        Some("libxt_NAT.so")
    );
    assert!(file(
        agent,
        "/usr/lib/x86_64-linux-gnu/xtables/libxt_NAT.so"
    ));
    assert!(file(
        agent,
        "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    ));
    for p in [
        "/usr/bin/dash",
        "/usr/bin/bash",
        "/usr/bin/nsenter",
        "/usr/bin/kmod",
        "/usr/bin/find",
    ] {
        assert!(file(agent, p), "{p}");
    }

    let pause = &images[1].1;
    assert!(file(&pause.layer, "/pause"));
    assert_eq!(pause.config.user, "65535:65535");

    let agnhost = &images[2].1;
    assert_eq!(agnhost.config.entrypoint, ["/agnhost"]);
    assert_eq!(agnhost.config.cmd, ["pause"]);
    assert_eq!(
        link(&agnhost.layer, "/agnhost-2").as_deref(),
        Some("agnhost")
    );
    assert_eq!(link(&agnhost.layer, "/usr/bin/sh").as_deref(), Some("dash"));
    assert_eq!(
        agnhost.layer.get("/uploads"),
        Some(&Entry::Dir { mode: 0o755 })
    );
    for p in [
        "/usr/bin/dig",
        "/usr/bin/getent",
        "/usr/bin/curl",
        "/usr/bin/nc.openbsd",
        "/usr/bin/iperf",
        "/usr/bin/ip",
    ] {
        assert!(file(&agnhost.layer, p), "{p}");
    }
    assert_eq!(
        link(&agnhost.layer, "/usr/bin/wget").as_deref(),
        Some("/usr/bin/busybox")
    );

    let busybox = &images[5].1;
    assert!(file(&busybox.layer, "/bin/busybox"));
    assert_eq!(
        link(&busybox.layer, "/bin/sh").as_deref(),
        Some("/bin/busybox")
    );
    assert_eq!(busybox.config.cmd, ["sh"]);
}

#[test]
fn a_second_build_rewrites_nothing() {
    let missing = missing_packages();
    if !missing.is_empty() {
        eprintln!("skipped: this host lacks the packages {missing:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let out = dir.path().join("out");
    let first = build_all(&inputs, &out).unwrap();
    assert_eq!(first.len(), 6);
    assert!(first.iter().all(|b| b.rebuilt && b.path.is_file()));
    let second = build_all(&inputs, &out).unwrap();
    for (a, b) in first.iter().zip(&second) {
        assert!(!b.rebuilt, "{} rewritten", b.reference);
        assert_eq!(a.manifest_digest, b.manifest_digest);
    }
}

#[test]
fn the_conformance_tests_images_serve_their_roles() {
    let missing = missing_packages();
    if !missing.is_empty() || !Path::new("/usr/bin/etcd").exists() {
        eprintln!("skipped: this host lacks the packages {missing:?} or etcd-server");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inputs_dir = dir.path().join("test-images");
    for demo in ["nautilus", "kitten"] {
        std::fs::create_dir_all(inputs_dir.join(demo)).unwrap();
        std::fs::write(inputs_dir.join(demo).join(format!("{demo}.jpg")), "jpg").unwrap();
        std::fs::write(inputs_dir.join(demo).join("data.json"), "{}").unwrap();
    }
    for program in ["nnp", "sample-apiserver"] {
        std::fs::copy("/usr/bin/true", inputs_dir.join(program)).unwrap();
    }
    // Debian's static busybox stands in for the one built from source
    std::fs::copy("/bin/busybox", inputs_dir.join("busybox")).unwrap();
    let inputs = images::defs::test_images::Inputs {
        dir: inputs_dir,
        agnhost: "/usr/bin/true".into(),
        porter_tls: None,
        host_root: "/".into(),
    };
    let images = images::defs::test_images::define(&inputs).unwrap();
    let by_name = |name: &str| {
        &images
            .iter()
            .find(|(_, i)| i.reference.ends_with(name))
            .unwrap_or_else(|| panic!("no image {name}"))
            .1
    };
    assert_eq!(images.len(), 11);

    // every applet in /bin, as the Sysctls test runs /bin/sysctl
    let busybox = by_name("/busybox:1.37.0-1");
    assert!(file(&busybox.layer, "/bin/busybox"));
    for applet in ["sh", "sysctl", "env", "mv"] {
        assert_eq!(
            link(&busybox.layer, &format!("/bin/{applet}")).as_deref(),
            Some("busybox")
        );
    }

    // the StatefulSet tests move htdocs/index.html away to fail readiness
    let httpd = by_name("/httpd:2.4.38-4");
    assert!(file(&httpd.layer, "/usr/local/apache2/htdocs/index.html"));
    assert_eq!(httpd.config.cmd[0], "httpd");
    assert!(link(&httpd.layer, "/bin/mv").is_some());
    let nginx = by_name("/nginx:1.15-4");
    assert!(file(&nginx.layer, "/usr/share/nginx/html/index.html"));

    assert_eq!(by_name("/nonroot:1.4").config.user, "1234");
    let nnp = by_name("/nonewprivs:1.3");
    match nnp.layer.get("/usr/local/bin/nnp") {
        Some(Entry::File { mode, .. }) => assert_eq!(mode & 0o4000, 0o4000, "set-user-ID"),
        other => panic!("{other:?}"),
    }
    let nautilus = by_name("/nautilus:1.7");
    assert!(file(&nautilus.layer, "/nautilus.jpg") && file(&nautilus.layer, "/data.json"));
    assert_eq!(nautilus.config.entrypoint, ["/agnhost"]);
    assert_eq!(nautilus.config.cmd, ["test-webserver"]);
    assert_eq!(
        by_name("/sample-apiserver:1.29.2").config.entrypoint,
        ["/sample-apiserver"]
    );
    assert!(file(
        &by_name("registry.k8s.io/etcd:3.6.4-0").layer,
        "/usr/local/bin/etcd"
    ));
}
