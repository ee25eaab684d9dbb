//! deploy/kubernetes, checked at the schema level: every document parses
//! as a Kubernetes object, the DaemonSet runs the seed's init containers in
//! the seed's order with the seed's commands, every volume mount names a
//! volume, the probes ask 127.0.0.1:9879/healthz with `brief: true`, and
//! every cilium-config key is one the agent knows. The image's scripts the
//! DaemonSet calls exist in deploy/image.
//!
//! The CRDs carry Cilium 1.16's names, versions, scope, subresources and
//! printer columns (facts from Cilium's generated CRDs in
//! pkg/k8s/apis/cilium.io/client/crds/), and their schemas accept objects
//! shaped like the ones 1.16 writes and refuse fields 1.16 does not have.
//! The agent's ServiceAccount is bound to 1.16's default RBAC (Helm's
//! cilium-agent clusterrole.yaml and role.yaml): list and watch on every
//! resource the agent watches, 1.16's writes and no others.

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
    for file in ["cilium.yaml", "crds.yaml", "hubble-relay.yaml"] {
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
    let expected: Vec<&str> = CILIUM_1_16.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, expected);
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
    // its default sources read the pod's namespace and node from the API
    // server (no ConfigMap volume)
    let env: Vec<(&str, &str)> = inits[0]["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            (
                s(e, &["name"]),
                s(e, &["valueFrom", "fieldRef", "fieldPath"]),
            )
        })
        .collect();
    assert_eq!(
        env,
        [
            ("K8S_NODE_NAME", "spec.nodeName"),
            ("CILIUM_K8S_NAMESPACE", "metadata.namespace")
        ]
    );
    assert!(cmd(&inits[1]).contains("nsenter --cgroup=/hostproc/1/ns/cgroup --mount=/hostproc/1/ns/mnt \"${BIN_PATH}/cilium-mount\" $CGROUP_ROOT"));
    assert!(cmd(&inits[2])
        .contains("nsenter --mount=/hostproc/1/ns/mnt \"${BIN_PATH}/cilium-sysctlfix\""));
    assert!(cmd(&inits[3])
        .ends_with("mount | grep \"/sys/fs/bpf type bpf\" || mount -t bpf bpf /sys/fs/bpf"));
    assert_eq!(cmd(&inits[4]), "/init-container.sh");
    assert_eq!(cmd(&inits[5]), "/install-plugin.sh");
    for script in ["init-container.sh", "install-plugin.sh", "cni-uninstall.sh"] {
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

/// Relay as Cilium's chart has it: its config file naming the peer
/// Service and the client certificate where the projected Secret puts
/// them, the agent's image, gRPC probes on the health port, and the
/// agents' Hubble TLS from the Secret the chart names.
#[test]
fn hubble_relay_and_the_peer_service_mirror_the_chart() {
    let relay = docs("hubble-relay.yaml");
    let config: Value =
        serde_yaml::from_str(s(find(&relay, "ConfigMap"), &["data", "config.yaml"])).unwrap();
    assert_eq!(
        s(&config, &["peer-service"]),
        "hubble-peer.kube-system.svc.cluster.local:443"
    );
    assert_eq!(s(&config, &["listen-address"]), ":4245");
    assert_eq!(
        s(&config, &["tls-hubble-client-cert-file"]),
        "/var/lib/hubble-relay/tls/client.crt"
    );
    assert_eq!(
        s(&config, &["tls-hubble-server-ca-files"]),
        "/var/lib/hubble-relay/tls/hubble-server-ca.crt"
    );
    let deploy = find(&relay, "Deployment");
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let all = docs("cilium.yaml");
    let ds = find(&all, "DaemonSet");
    assert_eq!(
        s(c, &["image"]),
        s(&ds["spec"]["template"]["spec"]["containers"][0], &["image"])
    );
    assert_eq!(s(&c["command"][0], &[]), "hubble-relay");
    assert_eq!(s(&c["args"][0], &[]), "serve");
    assert_eq!(c["ports"][0]["containerPort"].as_u64(), Some(4245));
    assert_eq!(c["readinessProbe"]["grpc"]["port"].as_u64(), Some(4222));
    let tls = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| s(v, &["name"]) == "tls")
        .unwrap();
    assert_eq!(
        s(&tls["projected"]["sources"][0]["secret"], &["name"]),
        "hubble-relay-client-certs"
    );
    let svc = find(&relay, "Service");
    assert_eq!(svc["spec"]["ports"][0]["port"].as_u64(), Some(80));
    assert_eq!(s(&svc["spec"]["ports"][0], &["targetPort"]), "grpc");

    let peer = all
        .iter()
        .find(|d| d["kind"] == "Service" && s(d, &["metadata", "name"]) == "hubble-peer")
        .expect("hubble-peer");
    assert_eq!(peer["spec"]["ports"][0]["port"].as_u64(), Some(443));
    assert_eq!(peer["spec"]["ports"][0]["targetPort"].as_u64(), Some(4244));
    assert_eq!(s(&peer["spec"], &["internalTrafficPolicy"]), "Local");
    let cm = find(&all, "ConfigMap");
    assert_eq!(s(&cm["data"], &["hubble-listen-address"]), ":4244");
    assert_eq!(
        s(&cm["data"], &["hubble-tls-cert-file"]),
        "/var/lib/cilium/tls/hubble/server.crt"
    );
    let volumes = ds["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap();
    let hubble_tls = volumes
        .iter()
        .find(|v| s(v, &["name"]) == "hubble-tls")
        .unwrap();
    assert_eq!(
        s(&hubble_tls["projected"]["sources"][0]["secret"], &["name"]),
        "hubble-server-certs"
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

/// What Cilium 1.16 declares for one CRD, as far as a client sees it.
struct Crd {
    kind: &'static str,
    plural: &'static str,
    scope: &'static str,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    /// (name, served, storage, deprecated)
    versions: &'static [(&'static str, bool, bool, bool)],
    status_subresource: bool,
    /// Top-level fields besides apiVersion, kind and metadata.
    fields: &'static [&'static str],
    required: &'static [&'static str],
}

const POLICY: &[&str] = &["cilium", "ciliumpolicy"];
const CILIUM: &[&str] = &["cilium"];
const BGP: &[&str] = &["cilium", "ciliumbgp"];

/// The CRDs in crds.yaml, in file order.
const CILIUM_1_16: &[Crd] = &[
    Crd {
        kind: "CiliumNetworkPolicy",
        plural: "ciliumnetworkpolicies",
        scope: "Namespaced",
        short_names: &["cnp", "ciliumnp"],
        categories: POLICY,
        versions: &[("v2", true, true, false)],
        status_subresource: true,
        fields: &["spec", "specs", "status"],
        required: &[],
    },
    Crd {
        kind: "CiliumClusterwideNetworkPolicy",
        plural: "ciliumclusterwidenetworkpolicies",
        scope: "Cluster",
        short_names: &["ccnp"],
        categories: POLICY,
        versions: &[("v2", true, true, false)],
        status_subresource: true,
        fields: &["spec", "specs", "status"],
        required: &[],
    },
    Crd {
        kind: "CiliumNodeConfig",
        plural: "ciliumnodeconfigs",
        scope: "Namespaced",
        short_names: &[],
        categories: CILIUM,
        versions: &[("v2", true, true, false), ("v2alpha1", true, false, true)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumNode",
        plural: "ciliumnodes",
        scope: "Cluster",
        short_names: &["cn", "ciliumn"],
        categories: CILIUM,
        versions: &[("v2", true, true, false)],
        status_subresource: true,
        fields: &["spec", "status"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumEndpoint",
        plural: "ciliumendpoints",
        scope: "Namespaced",
        short_names: &["cep", "ciliumep"],
        categories: CILIUM,
        versions: &[("v2", true, true, false)],
        status_subresource: false,
        fields: &["status"],
        required: &[],
    },
    Crd {
        kind: "CiliumIdentity",
        plural: "ciliumidentities",
        scope: "Cluster",
        short_names: &["ciliumid"],
        categories: CILIUM,
        versions: &[("v2", true, true, false)],
        status_subresource: true,
        fields: &["security-labels"],
        required: &["security-labels"],
    },
    Crd {
        kind: "CiliumCIDRGroup",
        plural: "ciliumcidrgroups",
        scope: "Cluster",
        short_names: &["ccg"],
        categories: CILIUM,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumPodIPPool",
        plural: "ciliumpodippools",
        scope: "Cluster",
        short_names: &["cpip"],
        categories: CILIUM,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumLoadBalancerIPPool",
        plural: "ciliumloadbalancerippools",
        scope: "Cluster",
        short_names: &["ippools", "ippool", "lbippool", "lbippools"],
        categories: CILIUM,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: true,
        fields: &["spec", "status"],
        required: &[],
    },
    Crd {
        kind: "CiliumL2AnnouncementPolicy",
        plural: "ciliuml2announcementpolicies",
        scope: "Cluster",
        short_names: &["l2announcement"],
        categories: CILIUM,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: true,
        fields: &["spec", "status"],
        required: &[],
    },
    Crd {
        kind: "CiliumClusterwideEnvoyConfig",
        plural: "ciliumclusterwideenvoyconfigs",
        scope: "Cluster",
        short_names: &["ccec"],
        categories: CILIUM,
        versions: &[("v2", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &[],
    },
    Crd {
        kind: "CiliumEnvoyConfig",
        plural: "ciliumenvoyconfigs",
        scope: "Namespaced",
        short_names: &["cec"],
        categories: CILIUM,
        versions: &[("v2", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &[],
    },
    Crd {
        kind: "CiliumEgressGatewayPolicy",
        plural: "ciliumegressgatewaypolicies",
        scope: "Cluster",
        short_names: &["cegp"],
        categories: POLICY,
        versions: &[("v2", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &[],
    },
    Crd {
        kind: "CiliumExternalWorkload",
        plural: "ciliumexternalworkloads",
        scope: "Cluster",
        short_names: &["cew"],
        categories: CILIUM,
        versions: &[("v2", true, true, false)],
        status_subresource: true,
        fields: &["spec", "status"],
        required: &[],
    },
    Crd {
        kind: "CiliumLocalRedirectPolicy",
        plural: "ciliumlocalredirectpolicies",
        scope: "Namespaced",
        short_names: &["clrp"],
        categories: POLICY,
        versions: &[("v2", true, true, false)],
        status_subresource: false,
        fields: &["spec", "status"],
        required: &[],
    },
    Crd {
        kind: "CiliumEndpointSlice",
        plural: "ciliumendpointslices",
        scope: "Cluster",
        short_names: &["ces"],
        categories: CILIUM,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["endpoints", "namespace"],
        required: &["endpoints"],
    },
    Crd {
        kind: "CiliumBGPPeeringPolicy",
        plural: "ciliumbgppeeringpolicies",
        scope: "Cluster",
        short_names: &["bgpp"],
        categories: BGP,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &[],
    },
    Crd {
        kind: "CiliumBGPClusterConfig",
        plural: "ciliumbgpclusterconfigs",
        scope: "Cluster",
        short_names: &["cbgpcluster"],
        categories: BGP,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumBGPPeerConfig",
        plural: "ciliumbgppeerconfigs",
        scope: "Cluster",
        short_names: &["cbgppeer"],
        categories: BGP,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumBGPAdvertisement",
        plural: "ciliumbgpadvertisements",
        scope: "Cluster",
        short_names: &["cbgpadvert"],
        categories: BGP,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumBGPNodeConfig",
        plural: "ciliumbgpnodeconfigs",
        scope: "Cluster",
        short_names: &["cbgpnode"],
        categories: BGP,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec", "status"],
        required: &["spec"],
    },
    Crd {
        kind: "CiliumBGPNodeConfigOverride",
        plural: "ciliumbgpnodeconfigoverrides",
        scope: "Cluster",
        short_names: &["cbgpnodeoverride"],
        categories: BGP,
        versions: &[("v2alpha1", true, true, false)],
        status_subresource: false,
        fields: &["spec"],
        required: &["spec"],
    },
];

fn crd<'a>(all: &'a [Value], kind: &str) -> &'a Value {
    all.iter()
        .find(|c| c["spec"]["names"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .map(|x| x.as_str().unwrap())
        .collect()
}

fn top_level_fields(schema: &Value) -> Vec<&str> {
    schema["properties"]
        .as_mapping()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str().unwrap())
        .collect()
}

#[test]
fn crds_carry_cilium_1_16_names_versions_and_scope() {
    let all = docs("crds.yaml");
    for want in CILIUM_1_16 {
        let c = crd(&all, want.kind);
        let k = want.kind;
        let names = &c["spec"]["names"];
        assert_eq!(s(c, &["spec", "group"]), "cilium.io", "{k}");
        assert_eq!(s(c, &["spec", "scope"]), want.scope, "{k}");
        let plural = s(names, &["plural"]);
        assert_eq!(plural, want.plural, "{k}");
        assert_eq!(s(names, &["singular"]), k.to_lowercase(), "{k}");
        assert_eq!(s(names, &["listKind"]), format!("{k}List"));
        assert_eq!(strings(&names["shortNames"]), want.short_names, "{k}");
        assert_eq!(strings(&names["categories"]), want.categories, "{k}");

        let versions = c["spec"]["versions"].as_sequence().unwrap();
        let got: Vec<(&str, bool, bool, bool)> = versions
            .iter()
            .map(|v| {
                (
                    s(v, &["name"]),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                    v["deprecated"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        assert_eq!(got, want.versions, "{k}");
        for v in versions {
            let status = &v["subresources"]["status"];
            assert_eq!(
                !status.is_null(),
                want.status_subresource,
                "{k} status subresource"
            );
            let schema = &v["schema"]["openAPIV3Schema"];
            assert_eq!(s(schema, &["type"]), "object", "{k}");
            assert_eq!(
                top_level_fields(schema),
                want.fields,
                "{k} top-level fields"
            );
            assert_eq!(strings(&schema["required"]), want.required, "{k} required");
        }
    }
}

/// (name, type, jsonPath, priority) of each printer column, in order.
fn columns(c: &Value) -> Vec<(&str, &str, &str, u64)> {
    c["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|col| {
            (
                s(col, &["name"]),
                s(col, &["type"]),
                s(col, &["jsonPath"]),
                col["priority"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn kubectl_get_shows_cilium_1_16_columns() {
    let all = docs("crds.yaml");
    assert_eq!(
        columns(crd(&all, "CiliumEndpoint")),
        [
            ("Security Identity", "integer", ".status.identity.id", 0),
            (
                "Ingress Enforcement",
                "string",
                ".status.policy.ingress.state",
                1
            ),
            (
                "Egress Enforcement",
                "string",
                ".status.policy.egress.state",
                1
            ),
            (
                "Visibility Policy",
                "string",
                ".status.visibility-policy-status",
                1
            ),
            ("Endpoint State", "string", ".status.state", 0),
            ("IPv4", "string", ".status.networking.addressing[0].ipv4", 0),
            ("IPv6", "string", ".status.networking.addressing[0].ipv6", 0),
        ]
    );
    assert_eq!(
        columns(crd(&all, "CiliumIdentity")),
        [
            (
                "Namespace",
                "string",
                r".metadata.labels.io\.kubernetes\.pod\.namespace",
                0
            ),
            ("Age", "date", ".metadata.creationTimestamp", 0),
        ]
    );
    assert_eq!(
        columns(crd(&all, "CiliumNode")),
        [
            (
                "CiliumInternalIP",
                "string",
                r#".spec.addresses[?(@.type=="CiliumInternalIP")].ip"#,
                0
            ),
            (
                "InternalIP",
                "string",
                r#".spec.addresses[?(@.type=="InternalIP")].ip"#,
                0
            ),
            ("Age", "date", ".metadata.creationTimestamp", 0),
        ]
    );
    assert_eq!(
        columns(crd(&all, "CiliumNetworkPolicy")),
        [("Age", "date", ".metadata.creationTimestamp", 0)]
    );
    assert!(columns(crd(&all, "CiliumClusterwideNetworkPolicy")).is_empty());
}

/// The API server's verdict on an object's top level under a CRD's stored
/// version, for the checks our short schemas make: every field is declared
/// (a strict apply refuses unknown ones), required fields are present, and
/// declared types and string maps hold.
fn top_level_accepts(c: &Value, obj: &Value) -> Result<(), String> {
    let version = c["spec"]["versions"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["storage"] == true)
        .unwrap();
    let schema = &version["schema"]["openAPIV3Schema"];
    let fields = obj.as_mapping().unwrap();
    for (k, v) in fields {
        let k = k.as_str().unwrap();
        if ["apiVersion", "kind", "metadata"].contains(&k) {
            continue;
        }
        let prop = &schema["properties"][k];
        if prop.is_null() {
            return Err(format!("unknown field {k:?}"));
        }
        let type_ok = match prop["type"].as_str() {
            Some("object") => v.is_mapping(),
            Some("array") => v.is_sequence(),
            Some("string") => v.is_string(),
            _ => true,
        };
        if !type_ok {
            return Err(format!("{k}: not of type {:?}", prop["type"]));
        }
        if prop["additionalProperties"]["type"] == "string" {
            for (mk, mv) in v.as_mapping().unwrap() {
                if !mv.is_string() {
                    return Err(format!("{k}.{mk:?}: not a string"));
                }
            }
        }
    }
    for r in strings(&schema["required"]) {
        if !fields.contains_key(r) {
            return Err(format!("missing required field {r:?}"));
        }
    }
    Ok(())
}

fn object(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap()
}

#[test]
fn cilium_1_16_shaped_objects_are_accepted_and_others_refused() {
    let all = docs("crds.yaml");
    let identity = crd(&all, "CiliumIdentity");
    let cep = crd(&all, "CiliumEndpoint");
    let node = crd(&all, "CiliumNode");

    let id = object(
        r#"
apiVersion: cilium.io/v2
kind: CiliumIdentity
metadata:
  name: "12345"
  labels:
    app: web
    io.kubernetes.pod.namespace: default
security-labels:
  k8s:app: web
  k8s:io.cilium.k8s.policy.cluster: default
  k8s:io.kubernetes.pod.namespace: default
"#,
    );
    assert_eq!(top_level_accepts(identity, &id), Ok(()));
    let with_spec = object("metadata: {name: \"1\"}\nsecurity-labels: {}\nspec: {}\n");
    assert!(top_level_accepts(identity, &with_spec).is_err());
    let without_labels = object("metadata: {name: \"1\"}\n");
    assert!(top_level_accepts(identity, &without_labels).is_err());
    let numeric_value = object("metadata: {name: \"1\"}\nsecurity-labels: {\"k8s:n\": 1}\n");
    assert!(top_level_accepts(identity, &numeric_value).is_err());

    let endpoint = object(
        r#"
apiVersion: cilium.io/v2
kind: CiliumEndpoint
metadata:
  name: web-0
  namespace: default
status:
  id: 1234
  identity:
    id: 12345
    labels: ["k8s:app=web"]
  networking:
    addressing:
    - ipv4: 10.0.1.5
    node: 192.168.1.10
  state: ready
  encryption: {}
  external-identifiers:
    container-id: abc
    k8s-namespace: default
    k8s-pod-name: web-0
  named-ports:
  - name: http
    port: 80
    protocol: TCP
"#,
    );
    assert_eq!(top_level_accepts(cep, &endpoint), Ok(()));
    let cep_with_spec = object("metadata: {name: a}\nspec: {}\n");
    assert!(top_level_accepts(cep, &cep_with_spec).is_err());

    let cilium_node = object(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNode
metadata:
  name: node-1
spec:
  addresses:
  - type: InternalIP
    ip: 192.168.1.10
  - type: CiliumInternalIP
    ip: 10.0.1.1
  health:
    ipv4: 10.0.1.20
  ipam:
    podCIDRs: [10.0.1.0/24]
status:
  ipam:
    operator-status: {}
"#,
    );
    assert_eq!(top_level_accepts(node, &cilium_node), Ok(()));
    assert!(top_level_accepts(node, &object("metadata: {name: n}\n")).is_err());
}

/// The CRDs Cilium 1.16's agent waits for before it starts its watchers
/// with default features (pkg/k8s/synced/crd.go): all must be in crds.yaml
/// or the agent gives up after crd-wait-timeout.
#[test]
fn every_crd_the_agent_waits_for_is_defined() {
    let all = docs("crds.yaml");
    let names: Vec<&str> = all.iter().map(|c| s(c, &["metadata", "name"])).collect();
    for plural in [
        "ciliumnetworkpolicies",
        "ciliumclusterwidenetworkpolicies",
        "ciliumnodes",
        "ciliumidentities",
        "ciliumcidrgroups",
        "ciliumpodippools",
        "ciliumendpoints",
        "ciliumloadbalancerippools",
        "ciliuml2announcementpolicies",
    ] {
        let name = format!("{plural}.cilium.io");
        assert!(names.contains(&name.as_str()), "no CRD {name}");
    }
}

/// Whether an RBAC role's rules allow `verb` on `resource` in API `group`.
fn allows(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    role["rules"].as_sequence().unwrap().iter().any(|r| {
        strings(&r["apiGroups"]).contains(&group)
            && strings(&r["resources"]).contains(&resource)
            && strings(&r["verbs"]).contains(&verb)
    })
}

fn named<'a>(all: &'a [Value], kind: &str, name: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn the_cluster_role_lets_the_agent_watch_what_it_watches() {
    let all = docs("cilium.yaml");
    let role = named(&all, "ClusterRole", "cilium");
    // Every informer the agent starts lists, then watches.
    for (group, resource) in [
        ("", "pods"),
        ("", "namespaces"),
        ("", "services"),
        ("discovery.k8s.io", "endpointslices"),
        ("", "nodes"),
        ("cilium.io", "ciliumnodes"),
        ("networking.k8s.io", "networkpolicies"),
        ("cilium.io", "ciliumnetworkpolicies"),
        ("cilium.io", "ciliumclusterwidenetworkpolicies"),
        ("cilium.io", "ciliumendpoints"),
        ("cilium.io", "ciliumidentities"),
        ("cilium.io", "ciliumcidrgroups"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    ] {
        for verb in ["list", "watch"] {
            assert!(
                allows(role, group, resource, verb),
                "ClusterRole cilium does not allow {verb} on {group}/{resource}"
            );
        }
    }
    // The start-up connectivity check reads namespace kube-system.
    assert!(allows(role, "", "namespaces", "get"));
}

#[test]
fn the_cluster_role_grants_the_writes_of_cilium_1_16_and_no_more() {
    let all = docs("cilium.yaml");
    let role = named(&all, "ClusterRole", "cilium");
    let writes = [
        ("ciliumnodes", "create"),
        ("ciliumnodes", "get"),
        ("ciliumnodes", "update"),
        ("ciliumnodes/status", "get"),
        ("ciliumnodes/status", "update"),
        ("ciliumendpoints", "create"),
        ("ciliumendpoints", "get"),
        ("ciliumendpoints", "patch"),
        ("ciliumendpoints", "delete"),
        ("ciliumendpoints/status", "patch"),
        ("ciliumidentities", "create"),
        ("ciliumidentities", "update"),
        ("ciliuml2announcementpolicies/status", "patch"),
        ("ciliumbgpnodeconfigs/status", "patch"),
    ];
    for (resource, verb) in writes {
        assert!(
            allows(role, "cilium.io", resource, verb),
            "{verb} on cilium.io/{resource}"
        );
    }
    // 1.16 gives the agent no delete on identities (the operator collects
    // them), no writes to policies and none to core objects by default.
    assert!(!allows(role, "cilium.io", "ciliumidentities", "delete"));
    assert!(!allows(
        role,
        "cilium.io",
        "ciliumnetworkpolicies",
        "update"
    ));
    assert!(!allows(
        role,
        "cilium.io",
        "ciliumnetworkpolicies/status",
        "patch"
    ));
    for r in role["rules"].as_sequence().unwrap() {
        let verbs = strings(&r["verbs"]);
        assert!(!verbs.contains(&"*"), "wildcard verb in {r:?}");
        assert!(!strings(&r["resources"]).contains(&"*"));
        if strings(&r["apiGroups"]) != ["cilium.io"] {
            for v in verbs {
                assert!(["get", "list", "watch"].contains(&v), "{v} in {r:?}");
            }
        }
    }
}

#[test]
fn the_agent_runs_as_the_service_account_the_roles_are_bound_to() {
    let all = docs("cilium.yaml");
    let sa = find(&all, "ServiceAccount");
    let (sa_name, sa_ns) = (
        s(sa, &["metadata", "name"]),
        s(sa, &["metadata", "namespace"]),
    );
    let ds = find(&all, "DaemonSet");
    assert_eq!(
        s(ds, &["spec", "template", "spec", "serviceAccountName"]),
        sa_name
    );
    assert_eq!(s(ds, &["metadata", "namespace"]), sa_ns);

    for (binding_kind, role_kind, name) in [
        ("ClusterRoleBinding", "ClusterRole", "cilium"),
        ("RoleBinding", "Role", "cilium-config-agent"),
    ] {
        let b = named(&all, binding_kind, name);
        assert_eq!(s(b, &["roleRef", "kind"]), role_kind);
        assert_eq!(s(b, &["roleRef", "name"]), name);
        let subject = &b["subjects"][0];
        assert_eq!(s(subject, &["kind"]), "ServiceAccount");
        assert_eq!(s(subject, &["name"]), sa_name);
        assert_eq!(s(subject, &["namespace"]), sa_ns);
        named(&all, role_kind, name);
    }

    // ConfigMaps are readable in the agent's own namespace only.
    let config = named(&all, "Role", "cilium-config-agent");
    assert_eq!(s(config, &["metadata", "namespace"]), sa_ns);
    assert_eq!(
        s(
            named(&all, "RoleBinding", "cilium-config-agent"),
            &["metadata", "namespace"]
        ),
        sa_ns
    );
    for verb in ["get", "list", "watch"] {
        assert!(allows(config, "", "configmaps", verb));
    }
    let cluster = named(&all, "ClusterRole", "cilium");
    assert!(!allows(cluster, "", "configmaps", "get"));
    // build-config's other reads: the CiliumNodeConfigs (listed, also the
    // one asked for by name) and its Node's labels
    assert!(allows(cluster, "cilium.io", "ciliumnodeconfigs", "list"));
    assert!(allows(cluster, "", "nodes", "get"));
}
