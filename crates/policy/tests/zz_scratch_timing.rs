use std::fmt::Write as _;
use std::time::Instant;
fn policy(n: usize, marker: u16) -> String {
    let mut doc = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: bench-rules\nspecs:\n",
    );
    for i in 0..n.saturating_sub(1) {
        let _ = write!(doc, "- endpointSelector: {{matchLabels: {{app: server}}}}\n  ingress:\n  - fromEndpoints: [{{matchLabels: {{app: client}}}}]\n    toPorts: [{{ports: [{{port: \"{}\", protocol: TCP}}]}}]\n", 10000 + i);
    }
    let both = "{matchExpressions: [{key: app, operator: In, values: [client, server]}]}";
    let _ = write!(doc, "- endpointSelector: {both}\n  ingress:\n  - fromEndpoints: [{both}]\n    toPorts: [{{ports: [{{port: \"{marker}\"}}, {{port: \"5201\"}}]}}]\n  egress:\n  - toEndpoints: [{both}]\n    toPorts: [{{ports: [{{port: \"{marker}\"}}, {{port: \"5201\"}}]}}]\n");
    doc
}
#[test]
fn timing() {
    let text = policy(1000, 20001);
    println!("yaml bytes {}", text.len());
    for _ in 0..3 {
        let t = Instant::now();
        let docs = policy::parse_documents(&text).unwrap();
        let a = t.elapsed();
        let t = Instant::now();
        let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let b = t.elapsed();
        drop(y);
        let t = Instant::now();
        let docs2 = policy::parse_documents(&docs[0].text).unwrap();
        let c = t.elapsed();
        let t = Instant::now();
        let v: serde_json::Value = serde_json::from_str(&docs[0].text).unwrap();
        let d = t.elapsed();
        let t = Instant::now();
        let _ = format!("{v:#}");
        let e = t.elapsed();
        println!("parse yaml {a:?} (serde_yaml value alone {b:?}); parse json {c:?} (value alone {d:?}); pretty {e:?}; json bytes {}, docs {}", docs[0].text.len(), docs2.len());
    }
}
