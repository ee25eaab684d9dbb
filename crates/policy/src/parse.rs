//! Reading policy text (YAML documents or a JSON/YAML list of bare rules)
//! into rules. Every error names the document, the field path and, where
//! the text has one, the line.

use crate::labels::{Label, Labels, NAMESPACE_KEY, SOURCE_K8S};
use crate::manifest::*;
use crate::rule::{Peer, PeerRule, PortProtocol, Protocol, Rule};
use crate::selector::{Operator, Requirement, Selector};
use crate::text_tree;
use std::sync::Arc;

const POLICY_LABEL_PREFIX: &str = "io.cilium.k8s.policy";
/// Cilium's pod label for a namespace label `K`.
const NAMESPACE_LABELS_PREFIX: &str = "io.cilium.k8s.namespace.labels";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("document {document}: {path}: {message}{}", .line.map(|(l, c)| format!(" at line {l} column {c}")).unwrap_or_default())]
pub struct ParseError {
    /// 1-based position of the YAML document.
    pub document: usize,
    /// The field, e.g. `spec.ingress[0].toPorts[0].ports[0].port`.
    pub path: String,
    pub message: String,
    pub line: Option<(usize, usize)>,
}

/// Why a Cilium rule, read field by field, does not make a rule. ParseError
/// adds which rule (`spec`, `specs[1]`, `[0]`).
#[derive(Debug, thiserror::Error)]
enum RuleError {
    #[error("endpointSelector is required")]
    NoEndpointSelector,
    #[error("The ICMPs block may only be present without ToPorts. Define a separate rule to use ToPorts.")]
    IcmpsWithPorts,
    #[error("ICMP type {name:?} is not an {kind} type (family {family})")]
    IcmpTypeFamily {
        name: String,
        kind: &'static str,
        family: &'static str,
    },
}

/// One policy as imported: its rules (which share their labels), and its
/// text as JSON, to store and share: YAML is written out with its keys in
/// their written order and scalars as strings, JSON is kept as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub text: String,
    /// Shared: the only document in force is the rule list every
    /// regeneration reads, not a copy of it.
    pub rules: std::sync::Arc<Vec<Rule>>,
}

impl Document {
    /// The labels its rules carry: what identifies the policy.
    pub fn labels(&self) -> &Labels {
        &self.rules[0].labels
    }
}

/// Parses every document of `text` into rules.
pub fn parse(text: &str) -> Result<Vec<Rule>, ParseError> {
    Ok(parse_documents(text)?
        .into_iter()
        .flat_map(|d| std::sync::Arc::unwrap_or_clone(d.rules))
        .collect())
}

/// Parses `text` into its policies; a list of bare rules gives one policy
/// per label set its rules carry.
///
/// Each document becomes its canonical text first (JSON is kept as
/// written; YAML is written out as JSON whose every scalar is a string),
/// and the typed reading reads that text; no tree of the document is built
/// unless the reading fails, for the error's path and line. What nodes
/// share skips even that (`shared_policy`).
pub fn parse_documents(text: &str) -> Result<Vec<Document>, ParseError> {
    if let Some(docs) = shared_policy(text) {
        return Ok(docs);
    }
    let mut docs = Vec::new();
    for (i, canonical) in canonical_documents(text)?.into_iter().enumerate() {
        let document = i + 1;
        match canonical.as_bytes().first() {
            Some(b'n') => continue, // an empty document: `null`
            Some(b'[') => {
                let specs: Vec<RuleSpec> = typed(&canonical, text, i)?;
                let items: Vec<&serde_json::value::RawValue> =
                    serde_json::from_str(&canonical).expect("the typed reading read a list");
                let groups = label_groups(&specs);
                let whole = groups.len() == 1;
                let mut selectors = Selectors::new(None);
                for (labels, members) in groups {
                    let rules = members
                        .iter()
                        .map(|&n| {
                            cilium_rule(&specs[n], &mut selectors, labels.clone()).map_err(|e| ParseError {
                                document,
                                path: format!("[{n}]"),
                                message: e.to_string(),
                                line: None,
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let text = if whole {
                        canonical.to_string()
                    } else {
                        let parts: Vec<&str> = members.iter().map(|&n| items[n].get()).collect();
                        format!("[{}]", parts.join(","))
                    };
                    docs.push(Document {
                        text,
                        rules: rules.into(),
                    });
                }
            }
            Some(b'{') => match kind_of(&canonical).as_str() {
                "CiliumNetworkPolicy" | "CiliumClusterwideNetworkPolicy" => {
                    let p: CiliumPolicy = typed(&canonical, text, i)?;
                    api_version(document, &p.api_version, "cilium.io/v2")?;
                    docs.push(Document {
                        rules: cilium_policy(document, &p)?.into(),
                        text: canonical.into_owned(),
                    });
                }
                "NetworkPolicy" => {
                    let p: NetworkPolicy = typed(&canonical, text, i)?;
                    api_version(document, &p.api_version, "networking.k8s.io/v1")?;
                    docs.push(Document {
                        rules: vec![network_policy(&p)].into(),
                        text: canonical.into_owned(),
                    });
                }
                other => {
                    return Err(ParseError {
                        document,
                        path: "kind".into(),
                        message: format!("unsupported kind {other:?}: expected CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy or NetworkPolicy"),
                        line: None,
                    })
                }
            },
            _ => {
                return Err(ParseError {
                    document,
                    path: ".".into(),
                    message: "expected a policy object or a list of rules".into(),
                    line: None,
                })
            }
        }
    }
    if docs.iter().all(|d| d.rules.is_empty()) {
        return Err(ParseError {
            document: 1,
            path: ".".into(),
            message: "no rules found".into(),
            line: None,
        });
    }
    docs.retain(|d| !d.rules.is_empty());
    Ok(docs)
}

/// An object's `kind` as text ("" when it has none).
fn kind_of(object: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: Option<serde_json::Value>,
    }
    match serde_json::from_str::<Kind>(object).map(|k| k.kind) {
        Ok(Some(serde_json::Value::String(s))) => s,
        Ok(Some(serde_json::Value::Null) | None) | Err(_) => String::new(),
        Ok(Some(other)) => other.to_string(),
    }
}

/// The policy one node shares with the others (one CiliumNetworkPolicy or
/// CiliumClusterwideNetworkPolicy, or bare rules of one label set, as
/// JSON whose every scalar is a string) read straight into its types,
/// without a tree: a thousand rules in a tenth of the time. None sends
/// anything else the long way, which also words the errors.
fn shared_policy(text: &str) -> Option<Vec<Document>> {
    let trimmed = text.trim();
    let rules = if trimmed.starts_with('{') {
        let p: CiliumPolicy = serde_json::from_str(trimmed).ok()?;
        let kinds = ["CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"];
        if !kinds.contains(&p.kind.as_str()) || p.api_version != "cilium.io/v2" {
            return None;
        }
        cilium_policy(1, &p).ok()?
    } else if trimmed.starts_with('[') {
        let specs: Vec<RuleSpec> = serde_json::from_str(trimmed).ok()?;
        let [(labels, _)] = label_groups(&specs).try_into().ok()?;
        let mut selectors = Selectors::new(None);
        specs
            .iter()
            .map(|s| cilium_rule(s, &mut selectors, labels.clone()).ok())
            .collect::<Option<Vec<_>>>()?
    } else {
        return None;
    };
    (!rules.is_empty()).then(|| {
        vec![Document {
            text: trimmed.to_owned(),
            rules: rules.into(),
        }]
    })
}

/// A list's rules by the labels they carry, in the order each label set
/// first appears: a policy is its labels, so the rules of one label set
/// are one document, or each would replace the one before it.
fn label_groups(specs: &[RuleSpec]) -> Vec<(Arc<Labels>, Vec<usize>)> {
    let mut groups: Vec<(Arc<Labels>, Vec<usize>)> = Vec::new();
    let mut group_of: std::collections::HashMap<Arc<Labels>, usize> =
        std::collections::HashMap::new();
    let mut previous: Option<(&[LabelSpec], usize)> = None;
    for (n, spec) in specs.iter().enumerate() {
        let written = spec.labels.as_deref().unwrap_or_default();
        // rules of one policy come together, their labels written alike:
        // no set to build and look up for each
        if let Some((_, g)) = previous.filter(|(p, _)| same_labels(p, written)) {
            groups[g].1.push(n);
            continue;
        }
        let labels = Arc::new(spec_labels(spec));
        let g = match group_of.get(&labels) {
            Some(&g) => {
                groups[g].1.push(n);
                g
            }
            None => {
                group_of.insert(labels.clone(), groups.len());
                groups.push((labels, vec![n]));
                groups.len() - 1
            }
        };
        previous = Some((written, g));
    }
    groups
}

/// Whether two rules' labels are written alike (then they are the same set).
fn same_labels(a: &[LabelSpec], b: &[LabelSpec]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (LabelSpec::Text(x), LabelSpec::Text(y)) => x == y,
            (LabelSpec::Object(x), LabelSpec::Object(y)) => {
                x.key == y.key && x.value == y.value && x.source == y.source
            }
            _ => false,
        })
}

/// The canonical text of each document of `text`: JSON (what nodes
/// share) as written, YAML as JSON whose every scalar is a string (see
/// `text_tree`).
fn canonical_documents(text: &str) -> Result<Vec<std::borrow::Cow<'_, str>>, ParseError> {
    let trimmed = text.trim();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok()
    {
        return Ok(vec![trimmed.into()]);
    }
    let docs = text_tree::yaml_documents(text).map_err(|(i, e)| yaml_error(i, e))?;
    Ok(docs.into_iter().map(Into::into).collect())
}

fn api_version(document: usize, have: &str, want: &str) -> Result<(), ParseError> {
    if have == want {
        return Ok(());
    }
    Err(ParseError {
        document,
        path: "apiVersion".into(),
        message: format!("unsupported apiVersion {have:?}: expected {want:?}"),
        line: None,
    })
}

fn yaml_error(document: usize, e: serde_yaml::Error) -> ParseError {
    ParseError {
        document,
        path: ".".into(),
        line: e.location().map(|l| (l.line(), l.column())),
        message: e.to_string(),
    }
}

/// Reads document `index` as `T` from its canonical JSON (the fast
/// reading); when that fails, from a tree of it (where a key written
/// twice keeps its later value, as before the canonical text), and then
/// from the text, whose error has the line (and whose reading is the one
/// that counts, should the two ever differ).
fn typed<T: serde::de::DeserializeOwned>(
    canonical: &str,
    text: &str,
    index: usize,
) -> Result<T, ParseError> {
    if let Ok(v) = serde_json::from_str(canonical) {
        return Ok(v);
    }
    let mut tree: serde_json::Value =
        serde_json::from_str(canonical).expect("canonical text is JSON");
    text_tree::scalars_as_text(&mut tree);
    let tree_err = match serde_path_to_error::deserialize(&tree) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    match serde_yaml::Deserializer::from_str(text).nth(index) {
        Some(doc) => typed_from_text(index + 1, doc),
        None => Err(ParseError {
            document: index + 1,
            path: tree_err.path().to_string(),
            message: tree_err.into_inner().to_string(),
            line: None,
        }),
    }
}

/// Deserializes one document from its text, keeping the failing field's
/// path and line.
fn typed_from_text<T: serde::de::DeserializeOwned>(
    document: usize,
    doc: serde_yaml::Deserializer<'_>,
) -> Result<T, ParseError> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let line = inner.location().map(|l| (l.line(), l.column()));
        // serde_yaml appends the location to its message; we print our own
        let mut message = inner.to_string();
        if let Some(at) = message.find(" at line ") {
            message.truncate(at);
        }
        // and may put its own idea of the path in front
        if let Some((head, rest)) = message.split_once(": ") {
            if !head.contains(' ') {
                message = rest.to_owned();
            }
        }
        ParseError {
            document,
            path,
            message,
            line,
        }
    })
}

fn policy_labels(kind: &str, name: &str, namespace: Option<&str>, uid: Option<&str>) -> Labels {
    let mut l = vec![
        Label::new(
            SOURCE_K8S,
            &format!("{POLICY_LABEL_PREFIX}.derived-from"),
            kind,
        ),
        Label::new(SOURCE_K8S, &format!("{POLICY_LABEL_PREFIX}.name"), name),
    ];
    if let Some(ns) = namespace {
        l.push(Label::new(
            SOURCE_K8S,
            &format!("{POLICY_LABEL_PREFIX}.namespace"),
            ns,
        ));
    }
    if let Some(uid) = uid {
        l.push(Label::new(
            SOURCE_K8S,
            &format!("{POLICY_LABEL_PREFIX}.uid"),
            uid,
        ));
    }
    Labels(l.into_iter().collect())
}

fn spec_labels(spec: &RuleSpec) -> Labels {
    Labels(
        spec.labels
            .iter()
            .flatten()
            .map(|l| match l {
                LabelSpec::Text(s) => Label::parse(s),
                LabelSpec::Object(LabelObject { key, value, source }) => {
                    let source = source.as_deref().unwrap_or("unspec");
                    Label::new(source, key, value)
                }
            })
            .collect(),
    )
}

fn cilium_policy(document: usize, p: &CiliumPolicy) -> Result<Vec<Rule>, ParseError> {
    let cluster_wide = p.kind == "CiliumClusterwideNetworkPolicy";
    let namespace = (!cluster_wide).then(|| p.metadata.namespace.as_deref().unwrap_or("default"));
    let specs: Vec<(String, &RuleSpec)> = match (&p.spec, &p.specs) {
        (Some(s), None) => vec![("spec".into(), s)],
        (None, Some(list)) => list
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("specs[{i}]"), s))
            .collect(),
        _ => {
            return Err(ParseError {
                document,
                path: "spec".into(),
                message: "exactly one of spec and specs is required".into(),
                line: None,
            })
        }
    };
    let labels = Arc::new(policy_labels(
        &p.kind,
        &p.metadata.name,
        namespace,
        p.metadata.uid.as_deref(),
    ));
    let mut selectors = Selectors::new(namespace);
    specs
        .into_iter()
        .map(|(path, spec)| {
            let rule_labels = if spec.labels.as_ref().is_none_or(Vec::is_empty) {
                labels.clone()
            } else {
                let mut own = Labels::clone(&labels);
                own.0.extend(spec_labels(spec).0);
                Arc::new(own)
            };
            cilium_rule(spec, &mut selectors, rule_labels).map_err(|e| ParseError {
                document,
                path,
                message: e.to_string(),
                line: None,
            })
        })
        .collect()
}

/// A selector of a namespaced policy: pods of `namespace` unless the
/// selector names a namespace itself.
fn namespaced(sel: Selector, namespace: Option<&str>) -> Selector {
    match namespace {
        Some(ns) => sel.with_default(SOURCE_K8S, NAMESPACE_KEY, ns),
        None => sel,
    }
}

fn cilium_rule<'s>(
    spec: &'s RuleSpec,
    selectors: &mut Selectors<'s>,
    labels: Arc<Labels>,
) -> Result<Rule, RuleError> {
    let subject = selectors.get(
        spec.endpoint_selector
            .as_ref()
            .ok_or(RuleError::NoEndpointSelector)?,
    );
    let ingress = |list: &'s Option<Vec<IngressSpec>>, selectors: &mut Selectors<'s>| {
        peer_rules(
            list.iter().flatten().map(Section::ingress),
            list.is_some(),
            selectors,
        )
    };
    let egress = |list: &'s Option<Vec<EgressSpec>>, selectors: &mut Selectors<'s>| {
        peer_rules(
            list.iter().flatten().map(Section::egress),
            list.is_some(),
            selectors,
        )
    };
    Ok(Rule {
        subject,
        ingress: ingress(&spec.ingress, selectors)?,
        ingress_deny: ingress(&spec.ingress_deny, selectors)?,
        egress: egress(&spec.egress, selectors)?,
        egress_deny: egress(&spec.egress_deny, selectors)?,
        labels,
        description: spec.description.clone().unwrap_or_default(),
    })
}

/// One direction's rules, None when the direction is not written.
fn peer_rules<'s>(
    sections: impl Iterator<Item = Section<'s>>,
    written: bool,
    selectors: &mut Selectors<'s>,
) -> Result<Option<Vec<PeerRule>>, RuleError> {
    if !written {
        return Ok(None);
    }
    sections
        .map(|r| peer_rule(&r, selectors))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The selectors of one policy's rules, each made once: rules repeat them
/// (a thousand rules to one subject, from one peer), and the copies share
/// their requirements instead of each allocating its own.
struct Selectors<'s> {
    namespace: Option<&'s str>,
    made: Vec<(&'s SelectorSpec, Selector)>,
}

impl<'s> Selectors<'s> {
    /// Distinct selectors remembered; a policy of more makes the rest anew.
    const KEPT: usize = 16;

    fn new(namespace: Option<&'s str>) -> Self {
        Self {
            namespace,
            made: Vec::new(),
        }
    }

    fn get(&mut self, spec: &'s SelectorSpec) -> Selector {
        if let Some((_, sel)) = self.made.iter().find(|(s, _)| *s == spec) {
            return sel.clone();
        }
        let sel = namespaced(spec.to_selector(), self.namespace);
        if self.made.len() < Self::KEPT {
            self.made.push((spec, sel.clone()));
        }
        sel
    }
}

/// An ingress or egress rule with its direction's field names set aside:
/// the peers (`from*` or `to*`) and the L4 part.
struct Section<'a> {
    endpoints: Option<&'a [SelectorSpec]>,
    cidrs: Option<&'a [CidrSpec]>,
    cidr_sets: Option<&'a [CidrSetSpec]>,
    entities: Option<&'a [EntitySpec]>,
    ports: Option<&'a [PortRuleSpec]>,
    icmps: Option<&'a [IcmpRuleSpec]>,
}

impl<'a> Section<'a> {
    fn ingress(r: &'a IngressSpec) -> Self {
        Self {
            endpoints: r.from_endpoints.as_deref(),
            cidrs: r.from_cidr.as_deref(),
            cidr_sets: r.from_cidr_set.as_deref(),
            entities: r.from_entities.as_deref(),
            ports: r.to_ports.as_deref(),
            icmps: r.icmps.as_deref(),
        }
    }

    fn egress(r: &'a EgressSpec) -> Self {
        Self {
            endpoints: r.to_endpoints.as_deref(),
            cidrs: r.to_cidr.as_deref(),
            cidr_sets: r.to_cidr_set.as_deref(),
            entities: r.to_entities.as_deref(),
            ports: r.to_ports.as_deref(),
            icmps: r.icmps.as_deref(),
        }
    }
}

/// A rule's L4 part: its `toPorts`, or its `icmps` as ICMP "ports" (type
/// << 8, Cilium's key, with protocol ICMP or ICMPv6 by `family`). None
/// when the rule has neither (it is L3-only).
fn l4(
    ports: Option<&[PortRuleSpec]>,
    icmps: Option<&[IcmpRuleSpec]>,
) -> Result<Option<Vec<PortProtocol>>, RuleError> {
    let icmps = icmps.unwrap_or_default();
    let ports = ports.unwrap_or_default();
    if !icmps.is_empty() && !ports.is_empty() {
        return Err(RuleError::IcmpsWithPorts);
    }
    if !icmps.is_empty() {
        return icmps
            .iter()
            .flat_map(|r| r.fields.iter().flatten())
            .map(|f| {
                // Cilium's default family is IPv4
                let ipv6 = f.family.is_some_and(|f| !f.is_ipv4());
                let t = f
                    .icmp_type
                    .number(ipv6)
                    .ok_or_else(|| RuleError::IcmpTypeFamily {
                        name: f.icmp_type.name.clone().unwrap_or_default(),
                        kind: if ipv6 { "ICMPv6" } else { "ICMPv4" },
                        family: if ipv6 { "IPv6" } else { "IPv4" },
                    })?;
                Ok(PortProtocol {
                    port: u16::from(t) << 8,
                    end_port: 0,
                    protocol: if ipv6 {
                        Protocol::Icmpv6
                    } else {
                        Protocol::Icmp
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some);
    }
    let ports: Vec<_> = ports
        .iter()
        .flat_map(|r| r.ports.iter().flatten().map(|p| p.0))
        .collect();
    Ok((!ports.is_empty()).then_some(ports))
}

/// A Cilium ingress/egress rule: its L3 peers and L4 ports. Ports without
/// any L3 peer apply to every peer; a rule with neither allows nothing, nor
/// does one whose L4 part came to nothing.
fn peer_rule<'s>(r: &Section<'s>, selectors: &mut Selectors<'s>) -> Result<PeerRule, RuleError> {
    let mut peers: Vec<Peer> = Vec::new();
    peers.extend(
        r.endpoints
            .unwrap_or_default()
            .iter()
            .map(|s| Peer::Endpoints(selectors.get(s))),
    );
    peers.extend(r.cidrs.unwrap_or_default().iter().map(|c| Peer::Cidr {
        cidr: c.0,
        except: Vec::new(),
    }));
    peers.extend(r.cidr_sets.unwrap_or_default().iter().map(|c| Peer::Cidr {
        cidr: c.cidr.0,
        except: c.except.iter().flatten().map(|e| e.0).collect(),
    }));
    peers.extend(
        r.entities
            .unwrap_or_default()
            .iter()
            .map(|e| Peer::Entity(e.0)),
    );
    let ports = match l4(r.ports, r.icmps)? {
        Some(p) if p.is_empty() => return Ok(PeerRule::default()),
        Some(p) => p,
        None => Vec::new(),
    };
    if peers.is_empty() && !ports.is_empty() {
        peers.push(Peer::Any);
    }
    Ok(PeerRule { peers, ports })
}

fn network_policy(p: &NetworkPolicy) -> Rule {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let types = p.spec.policy_types.clone().unwrap_or_else(|| {
        let mut t = vec![PolicyTypeSpec::Ingress];
        if p.spec.egress.is_some() {
            t.push(PolicyTypeSpec::Egress);
        }
        t
    });
    let rules = |peers: Option<&Vec<NetworkPolicyPeer>>, ports: Option<&Vec<NetworkPolicyPort>>| {
        let peers: Vec<Peer> = match peers {
            None => vec![Peer::Any],
            Some(list) if list.is_empty() => vec![Peer::Any],
            Some(list) => list.iter().map(|peer| np_peer(peer, ns)).collect(),
        };
        PeerRule {
            peers,
            ports: ports.into_iter().flatten().map(|p| p.0).collect(),
        }
    };
    let ingress = types.contains(&PolicyTypeSpec::Ingress).then(|| {
        p.spec
            .ingress
            .iter()
            .flatten()
            .map(|r| rules(r.from.as_ref(), r.ports.as_ref()))
            .collect()
    });
    let egress = types.contains(&PolicyTypeSpec::Egress).then(|| {
        p.spec
            .egress
            .iter()
            .flatten()
            .map(|r| rules(r.to.as_ref(), r.ports.as_ref()))
            .collect()
    });
    Rule {
        subject: namespaced(p.spec.pod_selector.to_selector(), Some(ns)),
        ingress,
        egress,
        labels: Arc::new(policy_labels(
            "NetworkPolicy",
            &p.metadata.name,
            Some(ns),
            p.metadata.uid.as_deref(),
        )),
        ..Default::default()
    }
}

/// A NetworkPolicy peer. Namespace labels are matched on the pod labels
/// Cilium derives from them (`io.cilium.k8s.namespace.labels.<key>`);
/// `kubernetes.io/metadata.name` is the pod's namespace.
fn np_peer(peer: &NetworkPolicyPeer, ns: &str) -> Peer {
    if let Some(block) = &peer.ip_block {
        return Peer::Cidr {
            cidr: block.cidr.0,
            except: block.except.iter().flatten().map(|e| e.0).collect(),
        };
    }
    let pods = peer.pod_selector.as_ref().map(|s| s.to_selector());
    let Some(nss) = &peer.namespace_selector else {
        return Peer::Endpoints(namespaced(pods.unwrap_or_default(), Some(ns)));
    };
    let mut sel = pods.unwrap_or_default();
    for r in Arc::unwrap_or_clone(nss.to_selector().requirements) {
        let key = if r.key == "kubernetes.io/metadata.name" {
            NAMESPACE_KEY.to_owned()
        } else {
            format!("{NAMESPACE_LABELS_PREFIX}.{}", r.key)
        };
        Arc::make_mut(&mut sel.requirements).push(Requirement {
            source: SOURCE_K8S.into(),
            key,
            ..r
        });
    }
    // every namespace: still only pods
    Arc::make_mut(&mut sel.requirements).push(Requirement {
        source: SOURCE_K8S.into(),
        key: NAMESPACE_KEY.into(),
        op: Operator::Exists,
        values: Vec::new(),
    });
    Peer::Endpoints(sel)
}
