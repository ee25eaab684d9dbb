//! Policy text to rules and rules to verdicts, as users write them; bad
//! input names its field and line.

use policy::*;

const WEB_DB: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: db-from-web
  namespace: prod
spec:
  endpointSelector:
    matchLabels:
      app: db
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: web
    toPorts:
    - ports:
      - port: "5432"
        protocol: TCP
  ingressDeny:
  - fromCIDRSet:
    - cidr: 192.0.2.0/24
      except: [192.0.2.128/25]
"#;

fn ids(list: &[(u32, &[&str])]) -> Vec<Identity> {
    let mut all: Vec<Identity> = [
        (1, &["reserved:host"][..]),
        (2, &["reserved:world"]),
        (6, &["reserved:remote-node"]),
    ]
    .iter()
    .chain(list)
    .map(|(id, l)| Identity {
        id: *id,
        labels: Labels::parse(l.iter().copied()),
    })
    .collect();
    all.sort_by_key(|i| i.id);
    all
}

fn pod(app: &str, ns: &str) -> Labels {
    Labels::parse([
        format!("k8s:app={app}").as_str(),
        format!("k8s:io.kubernetes.pod.namespace={ns}").as_str(),
    ])
}

const WEB: u32 = 256;
const WEB_OTHER_NS: u32 = 257;
const DB: u32 = 258;
const CIDR_24: u32 = 16_777_217;
const CIDR_25: u32 = 16_777_218;

fn universe() -> Vec<Identity> {
    ids(&[
        (
            WEB,
            &["k8s:app=web", "k8s:io.kubernetes.pod.namespace=prod"],
        ),
        (
            WEB_OTHER_NS,
            &["k8s:app=web", "k8s:io.kubernetes.pod.namespace=dev"],
        ),
        (DB, &["k8s:app=db", "k8s:io.kubernetes.pod.namespace=prod"]),
        (CIDR_24, &["cidr:192.0.2.0/24", "reserved:world"]),
        (CIDR_25, &["cidr:192.0.2.128/25", "reserved:world"]),
    ])
}

#[test]
fn a_namespaced_rule_allows_its_peer_on_its_port_only() {
    let rules = parse(WEB_DB).unwrap();
    assert_eq!(rules.len(), 1);
    assert!(rules[0]
        .labels
        .iter()
        .any(|l| l.to_string() == "k8s:io.cilium.k8s.policy.name=db-from-web"));
    let p = resolve(
        &rules,
        &pod("db", "prod"),
        &universe(),
        Enforcement::Default,
    );
    assert!(p.ingress_enforced && !p.egress_enforced);
    let s = &p.state;
    assert!(s.lookup(WEB, false, 6, 5432).allowed());
    assert_eq!(s.lookup(WEB, false, 6, 80), Verdict::NoMatch);
    assert_eq!(s.lookup(WEB_OTHER_NS, false, 6, 5432), Verdict::NoMatch);
    assert!(matches!(
        s.lookup(CIDR_24, false, 6, 5432),
        Verdict::Denied(..)
    ));
    assert_eq!(s.lookup(CIDR_25, false, 6, 5432), Verdict::NoMatch);
    assert!(
        s.lookup(1, false, 6, 22).allowed(),
        "the node may always reach its pods"
    );
    assert!(s.lookup(WEB, true, 6, 80).allowed(), "egress not enforced");
    // the same pod labels in another namespace are not selected
    let p = resolve(&rules, &pod("db", "dev"), &universe(), Enforcement::Default);
    assert!(!p.ingress_enforced);
    assert!(resolve(&rules, &pod("db", "dev"), &universe(), Enforcement::Always).ingress_enforced);
    assert!(!resolve(&rules, &pod("db", "prod"), &universe(), Enforcement::Never).ingress_enforced);
}

#[test]
fn entities_clusterwide_policies_and_network_policies() {
    let text = r#"
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata:
  name: to-world
spec:
  endpointSelector: {}
  egress:
  - toEntities: [world]
  - toEntities: [host]
    toPorts:
    - ports:
      - port: "8000"
        endPort: 8003
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web-in
  namespace: prod
spec:
  podSelector:
    matchLabels: {app: web}
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: dev
    ports:
    - port: 80
"#;
    let rules = parse(text).unwrap();
    assert_eq!(rules.len(), 2);
    let web = resolve(
        &rules,
        &pod("web", "prod"),
        &universe(),
        Enforcement::Default,
    );
    assert!(web.ingress_enforced && web.egress_enforced);
    assert!(web.state.lookup(2, true, 17, 53).allowed());
    assert!(web.state.lookup(CIDR_24, true, 6, 443).allowed());
    assert!(web.state.lookup(1, true, 6, 8002).allowed());
    assert_eq!(web.state.lookup(1, true, 6, 8004), Verdict::NoMatch);
    assert!(
        web.state.lookup(1, true, 17, 8000).allowed(),
        "no protocol = any"
    );
    assert_eq!(web.state.lookup(DB, true, 6, 5432), Verdict::NoMatch);
    assert!(web.state.lookup(WEB_OTHER_NS, false, 6, 80).allowed());
    assert_eq!(
        web.state.lookup(WEB_OTHER_NS, false, 17, 80),
        Verdict::NoMatch
    );
    assert_eq!(web.state.lookup(DB, false, 6, 80), Verdict::NoMatch);
}

#[test]
fn bare_rules_as_cilium_policy_import_takes_them() {
    let text = r#"[{
        "endpointSelector": {"matchLabels": {"k8s:app": "db"}},
        "ingress": [{"fromEntities": ["cluster"]}],
        "labels": [{"key": "name", "value": "db", "source": "unspec"}]
    }]"#;
    let rules = parse(text).unwrap();
    assert_eq!(
        rules[0].labels.iter().next().unwrap().to_string(),
        "unspec:name=db"
    );
    let p = resolve(&rules, &pod("db", "x"), &universe(), Enforcement::Default);
    assert!(p.state.lookup(WEB_OTHER_NS, false, 6, 1).allowed());
    assert_eq!(p.state.lookup(2, false, 6, 1), Verdict::NoMatch);
}

#[test]
fn a_rule_label_is_an_object_or_a_string_and_nothing_else() {
    let rule = |labels: &str| {
        format!(
            r#"[{{"endpointSelector": {{"matchLabels": {{"app": "db"}}}}, "labels": {labels}}}]"#
        )
    };
    let rules = parse(&rule(r#"[{"key": "name", "value": "db"}, "k8s:team=a"]"#)).unwrap();
    let labels: Vec<String> = rules[0].labels.iter().map(|l| l.to_string()).collect();
    assert_eq!(labels, ["k8s:team=a", "unspec:name=db"]);
    let err = parse(&rule("[[\"db\"]]")).unwrap_err().to_string();
    assert!(
        err.contains("a label: a string or an object with a key"),
        "{err}"
    );
    let err = parse(&rule(r#"[{"value": "db"}]"#))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field `key`"), "{err}");
}

/// A policy is known by its labels: the rules of a list that share a label
/// set (none at all, as often as not) are one policy, not each a policy
/// replacing the one before.
#[test]
fn a_list_is_one_policy_per_label_set() {
    let rule = |app: &str, port: u16, labels: &str| {
        format!(
            r#"{{"endpointSelector": {{"matchLabels": {{"app": "{app}"}}}},
                "ingress": [{{"toPorts": [{{"ports": [{{"port": "{port}"}}]}}]}}]{labels}}}"#
        )
    };
    let bench = r#", "labels": [{"key": "name", "value": "bench"}]"#;
    let text = format!(
        "[{}, {}, {}, {}]",
        rule("a", 80, ""),
        rule("b", 81, bench),
        rule("c", 82, ""),
        rule("d", 83, bench)
    );
    let docs = parse_documents(&text).unwrap();
    let shape: Vec<(String, usize)> = docs
        .iter()
        .map(|d| (format!("{:?}", d.labels()), d.rules.len()))
        .collect();
    assert_eq!(docs.len(), 2, "{shape:?}");
    assert_eq!((docs[0].rules.len(), docs[1].rules.len()), (2, 2));
    assert!(docs[0].labels().0.is_empty());
    assert_eq!(
        docs[1].labels().iter().next().unwrap().to_string(),
        "unspec:name=bench"
    );
    // each document's text reads back as that document alone
    for d in &docs {
        assert_eq!(parse_documents(&d.text).unwrap(), vec![d.clone()]);
    }
    // one label set: the text is kept as written
    let one = format!("[{}, {}]", rule("a", 80, ""), rule("c", 82, ""));
    let docs = parse_documents(&one).unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].rules.len(), 2);
}

fn error(text: &str) -> ParseError {
    parse(text).unwrap_err()
}

#[test]
fn bad_input_names_the_field_and_line() {
    let bad_port = WEB_DB.replace("\"5432\"", "70000");
    let e = error(&bad_port);
    assert_eq!(e.path, "spec.ingress[0].toPorts[0].ports[0].port");
    assert!(e.message.contains("70000 out of range"), "{e}");
    assert_eq!(e.line.map(|l| l.0), Some(17), "{e}");
    // a port is a number or a string, either way (both read above)
    let e = error(&WEB_DB.replace("\"5432\"", "[5432]"));
    assert_eq!(e.path, "spec.ingress[0].toPorts[0].ports[0].port");
    assert!(e.message.contains("expected a number or a string"), "{e}");
    assert_eq!(e.line.map(|l| l.0), Some(17), "{e}");
    let numbered = parse(&WEB_DB.replace("\"5432\"", "5432")).unwrap();
    assert_eq!(numbered, parse(WEB_DB).unwrap());

    let e = error(&WEB_DB.replace("app: web", "app: web\n      bogus: [1"));
    assert!(e.line.is_some(), "{e}");

    let e = error(&WEB_DB.replace("fromEndpoints", "fromEndpointz"));
    assert_eq!(e.path, "spec.ingress[0].fromEndpointz");
    assert!(e.message.contains("unknown field `fromEndpointz`"), "{e}");
    assert_eq!(e.line.map(|l| l.0), Some(12), "{e}");

    let e = error(&WEB_DB.replace("192.0.2.0/24", "192.0.2.0/33"));
    assert_eq!(e.path, "spec.ingressDeny[0].fromCIDRSet[0].cidr");
    assert!(e.message.contains("prefix length"), "{e}");

    let e = error(&WEB_DB.replace(
        "matchLabels:\n      app: db",
        "matchExpressions:\n    - {key: app, operator: Near, values: [db]}",
    ));
    assert_eq!(e.path, "spec.endpointSelector.matchExpressions[0].operator");
    assert!(e.message.contains("unknown operator \"Near\""), "{e}");

    let e = error(&WEB_DB.replace("protocol: TCP", "protocol: TPC"));
    assert!(e.message.contains("unknown protocol"), "{e}");

    let e = error(&WEB_DB.replace("  ingressDeny:", "  - fromEntities: [moon]\n  ingressDeny:"));
    assert!(e.message.contains("unknown entity \"moon\""), "{e}");

    let e = error(&WEB_DB.replace("\"5432\"", "\"5432\"\n        endPort: 5000"));
    assert!(e.message.contains("endPort 5000"), "{e}");

    let e = error(&WEB_DB.replace("cilium.io/v2", "cilium.io/v1"));
    assert_eq!(e.path, "apiVersion");

    let e = error(&WEB_DB.replace("kind: CiliumNetworkPolicy", "kind: Pod"));
    assert_eq!(e.path, "kind");

    let e = error(&WEB_DB.replace("  endpointSelector:\n    matchLabels:\n      app: db\n", ""));
    assert!(e.message.contains("endpointSelector is required"), "{e}");

    assert!(error("").message.contains("no rules"));
    assert!(error("just text").message.contains("expected a policy"));
}

#[test]
fn the_shared_text_reads_back_to_the_same_policy() {
    // Plain scalars a YAML reader takes as text wherever a field wants
    // text: a numeric label value, an unquoted port, a boolean-looking
    // label. Nodes share the canonical JSON, which must keep them so.
    let text = WEB_DB
        .replace(
            "app: web",
            "app: web\n        version: 2\n        canary: true",
        )
        .replace("\"5432\"", "5432");
    let docs = parse_documents(&text).unwrap();
    assert_eq!(docs.len(), 1);
    assert!(docs[0].text.starts_with('{'), "{}", docs[0].text);
    let again = parse_documents(&docs[0].text).unwrap();
    assert_eq!(again, docs);
    let peer = &docs[0].rules[0];
    let shown = format!("{peer:?}");
    assert!(
        shown.contains("version") && shown.contains("canary"),
        "{shown}"
    );
}

#[test]
fn icmp_rules_allow_their_types_only() {
    let with_icmps = |fields: &str| {
        WEB_DB.replace(
            "    toPorts:\n    - ports:\n      - port: \"5432\"\n        protocol: TCP\n",
            &format!("    icmps: [{{fields: [{fields}]}}]\n"),
        )
    };
    let rules = parse(&with_icmps("{type: 8}, {type: EchoReply, family: IPv4}")).unwrap();
    let db = resolve(
        &rules,
        &pod("db", "prod"),
        &universe(),
        Enforcement::Default,
    );
    assert!(db.state.lookup(WEB, false, 1, 8 << 8).allowed());
    assert!(
        db.state.lookup(WEB, false, 1, 0).allowed(),
        "type 0 is exact, not any"
    );
    assert_eq!(db.state.lookup(WEB, false, 1, 13 << 8), Verdict::NoMatch);
    assert_eq!(db.state.lookup(WEB, false, 6, 5432), Verdict::NoMatch);

    // ICMPv6 types are keyed under protocol 58, names by the family's
    // numbers, and never allow everything
    let rules = parse(&with_icmps(
        "{type: EchoRequest, family: IPv6}, {type: PacketTooBig, family: IPv6}",
    ))
    .unwrap();
    let db = resolve(
        &rules,
        &pod("db", "prod"),
        &universe(),
        Enforcement::Default,
    );
    assert!(db.state.lookup(WEB, false, 58, 128 << 8).allowed());
    assert!(db.state.lookup(WEB, false, 58, 2 << 8).allowed());
    assert_eq!(db.state.lookup(WEB, false, 58, 129 << 8), Verdict::NoMatch);
    assert_eq!(db.state.lookup(WEB, false, 1, 8 << 8), Verdict::NoMatch);
    assert_eq!(db.state.lookup(WEB, false, 6, 5432), Verdict::NoMatch);
    let e = error(&with_icmps("{type: PacketTooBig}"));
    assert!(e.message.contains("not an ICMPv4 type"), "{e}");

    let e = error(&with_icmps("{type: 300}"));
    assert_eq!(e.path, "spec.ingress[0].icmps[0].fields[0].type");
    assert!(e.message.contains("out of range"), "{e}");
    let e = error(&with_icmps("{type: 8, family: IPv5}"));
    assert_eq!(e.path, "spec.ingress[0].icmps[0].fields[0].family");
    let e = error(&WEB_DB.replace(
        "    toPorts:",
        "    icmps: [{fields: [{type: 8}]}]\n    toPorts:",
    ));
    assert!(
        e.message.contains("may only be present without ToPorts"),
        "{e}"
    );
}

#[test]
fn the_world_entity_holds_both_families_and_each_has_its_own() {
    let universe = ids(&[
        (9, &["reserved:world-ipv4"]),
        (10, &["reserved:world-ipv6"]),
        (
            WEB,
            &["k8s:app=web", "k8s:io.kubernetes.pod.namespace=prod"],
        ),
    ]);
    let allowed = |entity: &str| -> Vec<u32> {
        let text = format!(
            "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p, namespace: prod}}\nspec:\n  endpointSelector: {{}}\n  ingress:\n  - fromEntities: [{entity}]\n"
        );
        let rules = parse(&text).unwrap();
        let web = resolve(&rules, &pod("web", "prod"), &universe, Enforcement::Default);
        // (the host is always let in, as allow-localhost does)
        [2, 6, 9, 10, WEB]
            .into_iter()
            .filter(|id| web.state.lookup(*id, false, 6, 80).allowed())
            .collect()
    };
    assert_eq!(allowed("world"), vec![2, 9, 10]);
    assert_eq!(allowed("world-ipv4"), vec![2, 9]);
    assert_eq!(allowed("world-ipv6"), vec![10]);
    assert_eq!(allowed("cluster"), vec![6, WEB]);
}

#[test]
fn ipv6_cidrs_select_their_prefixes_and_the_ipv6_world() {
    let text = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: v6-out
  namespace: prod
spec:
  endpointSelector:
    matchLabels:
      app: web
  egress:
  - toCIDRSet:
    - cidr: 2001:db8::/32
      except: [2001:db8:1::/48]
  - toCIDR: ["::/0"]
    toPorts:
    - ports: [{port: "443", protocol: TCP}]
"#;
    let rules = parse(text).unwrap();
    const NET: u32 = 16_777_219;
    const HOLE: u32 = 16_777_220;
    const V4: u32 = 16_777_221;
    let net = Cidr::parse("2001:db8::/32").unwrap();
    let hole = Cidr::parse("2001:db8:1::/48").unwrap();
    assert!(net.contains(&hole) && !hole.contains(&net));
    assert!(!net.contains(&Cidr::parse("192.0.2.0/24").unwrap()));
    assert!(!Cidr::parse("0.0.0.0/0").unwrap().contains(&net));
    // a label key holds no colon: Cilium writes them as dashes
    assert_eq!(net.label_key(), "2001-db8--0/32");
    assert_eq!(Cidr::parse("::/0").unwrap().label_key(), "0--0/0");
    assert_eq!(Cidr::parse("fd00::1").unwrap().to_string(), "fd00::1/128");
    assert_eq!(
        Cidr::parse("2001:db8::ff/120").unwrap().to_string(),
        "2001:db8::/120"
    );
    let label = |c: &Cidr| format!("cidr:{}", c.label_key());
    let mut universe = universe();
    universe.extend(
        [
            (NET, label(&net), "reserved:world-ipv6"),
            (HOLE, label(&hole), "reserved:world-ipv6"),
            (V4, "cidr:192.0.2.0/24".to_owned(), "reserved:world"),
        ]
        .map(|(id, l, world)| Identity {
            id,
            labels: Labels::parse([l.as_str(), world]),
        }),
    );
    universe.push(Identity {
        id: 10,
        labels: Labels::parse(["reserved:world-ipv6"]),
    });
    let p = resolve(&rules, &pod("web", "prod"), &universe, Enforcement::Default);
    let s = &p.state;
    assert!(p.egress_enforced);
    assert!(s.lookup(NET, true, 17, 53).allowed());
    assert!(s.lookup(HOLE, true, 6, 443).allowed(), "::/0 on 443");
    assert_eq!(
        s.lookup(HOLE, true, 6, 80),
        Verdict::NoMatch,
        "the exception"
    );
    assert!(s.lookup(10, true, 6, 443).allowed(), "the IPv6 world");
    assert_eq!(s.lookup(10, true, 6, 80), Verdict::NoMatch);
    assert_eq!(
        s.lookup(2, true, 6, 443),
        Verdict::NoMatch,
        "not the IPv4 world"
    );
    assert_eq!(s.lookup(V4, true, 6, 443), Verdict::NoMatch);

    let e = error(&text.replace("2001:db8:1::/48", "2001:db9::/48"));
    assert_eq!(e.path, "spec.egress[0].toCIDRSet[0]");
    assert_eq!(
        e.message,
        "allow CIDR prefix 2001:db8::/32 does not contain exclude CIDR prefix 2001:db9::/48"
    );
    let e = error(&text.replace("2001:db8:1::/48", "10.0.0.0/8"));
    assert!(e.message.contains("does not contain"), "{e}");

    let e = error(&text.replace("2001:db8::/32", "2001:db8::/129"));
    assert_eq!(e.path, "spec.egress[0].toCIDRSet[0].cidr");
    assert!(e.message.contains("prefix length above 128"), "{e}");

    // a NetworkPolicy ipBlock of IPv6, with its except
    let np = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: v6-in
  namespace: prod
spec:
  podSelector:
    matchLabels: {app: web}
  ingress:
  - from:
    - ipBlock:
        cidr: 2001:db8::/32
        except: [2001:db8:1::/48]
"#;
    let rules = parse(np).unwrap();
    let p = resolve(&rules, &pod("web", "prod"), &universe, Enforcement::Default);
    assert!(p.state.lookup(NET, false, 6, 80).allowed());
    assert_eq!(p.state.lookup(HOLE, false, 6, 80), Verdict::NoMatch);
    assert_eq!(p.state.lookup(V4, false, 6, 80), Verdict::NoMatch);
}

/// YAML read as JSON text keeps a key written twice twice; the typed
/// reading refuses that, and the reading behind it keeps the later value,
/// as reading through a tree always did.
#[test]
fn a_key_written_twice_keeps_its_later_value() {
    let twice = WEB_DB.replace("  name: db-from-web", "  name: first\n  name: db-from-web");
    let docs = parse_documents(&twice).unwrap();
    assert_eq!(docs.len(), 1);
    assert!(docs[0]
        .labels()
        .iter()
        .any(|l| l.to_string() == "k8s:io.cilium.k8s.policy.name=db-from-web"));
    // and the text kept reads back the same on another node
    assert_eq!(parse_documents(&docs[0].text).unwrap(), docs);
}

#[test]
fn rules_repeating_a_selector_or_labels_share_them() {
    let rule = r#"{"endpointSelector": {"matchLabels": {"app": "a"}},
        "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "b"}}]}],
        "labels": [{"key": "name", "value": "p"}]}"#;
    let docs = parse_documents(&format!("[{rule}, {rule}]")).unwrap();
    let [first, second] = &docs[0].rules[..] else {
        panic!("two rules: {docs:?}");
    };
    let peer = |r: &policy::Rule| match &r.ingress.as_ref().unwrap()[0].peers[0] {
        policy::Peer::Endpoints(s) => s.requirements.clone(),
        other => panic!("an endpoint peer: {other:?}"),
    };
    use std::sync::Arc;
    assert!(Arc::ptr_eq(
        &first.subject.requirements,
        &second.subject.requirements
    ));
    assert!(Arc::ptr_eq(&peer(first), &peer(second)));
    assert!(Arc::ptr_eq(&first.labels, &second.labels));
    assert_eq!(first, second);
}
