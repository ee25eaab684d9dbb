//! Our .proto files against Cilium v1.16.0's own (api/v1 in its Go
//! module, which tools/cilium pins and `go mod download` fetches): every
//! message's fields (name, number, type, label, oneof) and every enum's
//! values must be the same, so what Cilium's Hubble clients send and read
//! is what we decode and encode. Declaration order may differ; the wire
//! does not see it. Skips, saying so, where Go or protoc is missing.

use prost::Message;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const PROTOS: [&str; 4] = [
    "flow/flow.proto",
    "relay/relay.proto",
    "peer/peer.proto",
    "observer/observer.proto",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Cilium v1.16.0's api/v1, from the Go module cache (downloaded if need be).
fn upstream_api() -> Option<PathBuf> {
    let out = Command::new("go")
        .args(["mod", "download", "-json", "github.com/cilium/cilium"])
        .current_dir(workspace().join("tools/cilium"))
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "go mod download: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    Some(PathBuf::from(info["Dir"].as_str()?).join("api/v1"))
}

fn descriptors(include: &Path, proto: &str) -> FileDescriptorSet {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("set.pb");
    let status = Command::new("protoc")
        .arg(format!("-I{}", include.display()))
        .arg("-I/usr/include")
        .arg(format!("--descriptor_set_out={}", out.display()))
        .arg(proto)
        .status()
        .expect("running protoc");
    assert!(status.success(), "protoc {proto} in {}", include.display());
    FileDescriptorSet::decode(std::fs::read(out).unwrap().as_slice()).unwrap()
}

fn enum_values(scope: &str, e: &EnumDescriptorProto, out: &mut BTreeSet<String>) {
    for v in &e.value {
        out.insert(format!(
            "enum {scope}.{} {} = {}",
            e.name(),
            v.name(),
            v.number()
        ));
    }
}

/// One line per field, enum value, service method, nested or not.
fn shape(set: &FileDescriptorSet) -> BTreeSet<String> {
    fn message(prefix: &str, m: &DescriptorProto, out: &mut BTreeSet<String>) {
        let name = format!("{prefix}.{}", m.name());
        out.insert(format!("message {name}"));
        for f in &m.field {
            let oneof = f
                .oneof_index
                .map(|i| m.oneof_decl[i as usize].name().to_owned())
                .unwrap_or_default();
            out.insert(format!(
                "field {name}.{} = {} {:?} {:?} {} oneof={oneof}",
                f.name(),
                f.number(),
                f.label(),
                f.r#type(),
                f.type_name()
            ));
        }
        for r in &m.reserved_range {
            out.insert(format!("reserved {name} {}..{}", r.start(), r.end()));
        }
        for e in &m.enum_type {
            enum_values(&name, e, out);
        }
        for nested in &m.nested_type {
            message(&name, nested, out);
        }
    }
    let mut out = BTreeSet::new();
    for file in &set.file {
        let package = file.package();
        for m in &file.message_type {
            message(package, m, &mut out);
        }
        for e in &file.enum_type {
            enum_values(package, e, &mut out);
        }
        for s in &file.service {
            for m in &s.method {
                out.insert(format!(
                    "rpc {package}.{}/{}({}) -> {}{}",
                    s.name(),
                    m.name(),
                    m.input_type(),
                    if m.server_streaming() { "stream " } else { "" },
                    m.output_type()
                ));
            }
        }
    }
    out
}

#[test]
fn our_protos_are_cilium_1_16s_on_the_wire() {
    if Command::new("protoc").arg("--version").output().is_err() {
        eprintln!("skipped: no protoc");
        return;
    }
    let Some(upstream) = upstream_api() else {
        eprintln!("skipped: no Go to fetch Cilium's module");
        return;
    };
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    for proto in PROTOS {
        let (a, b) = (
            shape(&descriptors(&ours, proto)),
            shape(&descriptors(&upstream, proto)),
        );
        let missing: Vec<_> = b.difference(&a).collect();
        let extra: Vec<_> = a.difference(&b).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{proto}: missing {missing:#?}, not Cilium's {extra:#?}"
        );
        assert!(a.len() > 5, "{proto}: {a:?}");
    }
}

#[test]
fn flows_encode_with_cilium_s_field_numbers() {
    use hubble::flow::{Flow, FlowType, Verdict};
    let flow = Flow {
        node_name: "n".into(),
        verdict: Verdict::Dropped as i32,
        r#type: FlowType::L3L4 as i32,
        drop_reason_desc: hubble::flow::DropReason::PolicyDenied as i32,
        ..Flow::default()
    };
    let bytes = flow.encode_to_vec();
    // field 2 varint 2 (DROPPED), field 10 varint 1 (L3_L4), field 11
    // "n", field 25 varint 133 (POLICY_DENIED)
    assert_eq!(
        bytes,
        [0x10, 2, 0x50, 1, 0x5a, 1, b'n', 0xc8, 0x01, 0x85, 0x01]
    );
    assert_eq!(Flow::decode(bytes.as_slice()).unwrap(), flow);
}
