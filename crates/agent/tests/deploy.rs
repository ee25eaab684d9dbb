//! deploy/kubernetes, checked at the schema level: every document parses
//! as a Kubernetes object, the DaemonSet runs the seed's init containers in
//! the seed's order with the seed's commands, every volume mount names a
//! volume, the probes ask 127.0.0.1:9879/healthz with `brief: true`, and
//! every cilium-config key is one the agent knows. The image's scripts the
//! DaemonSet calls exist in deploy/image.

use serde::Deserialize;
use serde_yaml::Value;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join("deploy/kubernetes").join(file)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{file}: {e}")))
        .collect()
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}

fn find<'a>(all: &'a [Value], kind: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn every_document_is_a_named_kubernetes_object() {
    for file in ["cilium.yaml", "crds.yaml"] {
        for d in docs(file) {
            assert!(!s(&d, &["apiVersion"]).is_empty(), "{file}: {d:?}");
            assert!(!s(&d, &["kind"]).is_empty());
            assert!(!s(&d, &["metadata", "name"]).is_empty());
        }
    }
    let crds = docs("crds.yaml");
    let kinds: Vec<&str> = crds
        .iter()
        .map(|c| s(c, &["spec", "names", "kind"]))
        .collect();
    assert_eq!(
        kinds,
        [
            "CiliumNetworkPolicy",
            "CiliumClusterwideNetworkPolicy",
            "CiliumNodeConfig"
        ]
    );
    for c in &crds {
        assert_eq!(
            s(c, &["metadata", "name"]),
            format!(
                "{}.{}",
                s(c, &["spec", "names", "plural"]),
                s(c, &["spec", "group"])
            )
        );
    }
}

#[test]
fn the_daemonset_mirrors_the_seed() {
    let all = docs("cilium.yaml");
    let ds = find(&all, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    let inits = pod["initContainers"].as_sequence().unwrap();
    let names: Vec<&str> = inits.iter().map(|c| s(c, &["name"])).collect();
    assert_eq!(
        names,
        [
            "config",
            "mount-cgroup",
            "apply-sysctl-overwrites",
            "mount-bpf-fs",
            "clean-cilium-state",
            "install-cni-binaries"
        ]
    );
    let cmd = |c: &Value| -> String {
        c["command"]
            .as_sequence()
            .unwrap()
            .iter()
            .chain(c["args"].as_sequence().into_iter().flatten())
            .map(|x| x.as_str().unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(cmd(&inits[0]), "cilium build-config");
    assert!(cmd(&inits[1]).contains("nsenter --cgroup=/hostproc/1/ns/cgroup --mount=/hostproc/1/ns/mnt \"${BIN_PATH}/cilium-mount\" $CGROUP_ROOT"));
    assert!(cmd(&inits[2])
        .contains("nsenter --mount=/hostproc/1/ns/mnt \"${BIN_PATH}/cilium-sysctlfix\""));
    assert!(cmd(&inits[3])
        .ends_with("mount | grep \"/sys/fs/bpf type bpf\" || mount -t bpf bpf /sys/fs/bpf"));
    assert_eq!(cmd(&inits[4]), "/init-container.sh");
    assert_eq!(cmd(&inits[5]), "/install-plugin.sh");
    for script in [
        "init-container.sh",
        "install-plugin.sh",
        "cni-uninstall.sh",
        "Dockerfile",
    ] {
        assert!(
            root().join("deploy/image").join(script).exists(),
            "{script}"
        );
    }

    let agent = &pod["containers"][0];
    assert_eq!(
        cmd(agent),
        "cilium-agent --config-dir=/tmp/cilium/config-map"
    );
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get = &agent[probe]["httpGet"];
        assert_eq!(s(get, &["host"]), "127.0.0.1", "{probe}");
        assert_eq!(s(get, &["path"]), "/healthz");
        assert_eq!(get["port"].as_u64(), Some(9879));
        assert_eq!(s(&get["httpHeaders"][0], &["name"]), "brief");
        assert_eq!(s(&get["httpHeaders"][0], &["value"]), "true");
    }
    assert_eq!(
        s(&agent["lifecycle"]["preStop"]["exec"]["command"][0], &[]),
        "/cni-uninstall.sh"
    );

    let volumes: Vec<&str> = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| s(v, &["name"]))
        .collect();
    for c in inits.iter().chain(pod["containers"].as_sequence().unwrap()) {
        for m in c["volumeMounts"].as_sequence().into_iter().flatten() {
            assert!(
                volumes.contains(&s(m, &["name"])),
                "{} mounts unknown volume {}",
                s(c, &["name"]),
                s(m, &["name"])
            );
        }
    }
    assert_eq!(
        s(&ds["spec"]["selector"]["matchLabels"], &["k8s-app"]),
        s(&ds["spec"]["template"]["metadata"]["labels"], &["k8s-app"])
    );
}

#[test]
fn every_config_map_key_is_known_to_the_agent() {
    let all = docs("cilium.yaml");
    let cm = find(&all, "ConfigMap");
    for (k, v) in cm["data"].as_mapping().unwrap() {
        let k = k.as_str().unwrap();
        assert!(agent::option::keys::lookup(k).is_some(), "unknown key {k}");
        assert!(v.is_string(), "{k}: ConfigMap values are strings");
    }
}
