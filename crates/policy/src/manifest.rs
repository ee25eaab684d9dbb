//! The YAML/JSON shapes users write, checked while they are read so every
//! error names its field path and line: CiliumNetworkPolicy,
//! CiliumClusterwideNetworkPolicy, networking.k8s.io/v1 NetworkPolicy, and
//! Cilium's bare rules (a JSON/YAML list, as `cilium policy import` takes).

use crate::rule::{Cidr, CidrError, Entity, PortProtocol, Protocol};
use crate::selector::{Operator, Requirement, Selector};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A value in a manifest that does not read as what its field holds; each
/// carries the value as written. serde puts the field path and line around
/// it (`try_from` needs only `Display`).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("key {0:?}: In and NotIn need values")]
    ValuesMissing(String),
    #[error("key {0:?}: Exists and DoesNotExist take no values")]
    ValuesNotTaken(String),
    #[error("unknown operator {0:?}: expected In, NotIn, Exists or DoesNotExist")]
    Operator(String),
    #[error("invalid label key {0:?}")]
    LabelKey(String),
    #[error(transparent)]
    Cidr(#[from] CidrError),
    #[error("allow CIDR prefix {cidr} does not contain exclude CIDR prefix {except}")]
    ExceptOutside { cidr: String, except: String },
    #[error("unknown entity {0:?}: expected one of {names}", names = Entity::NAMES.join(", "))]
    Entity(String),
    #[error("unknown protocol {0:?}: expected TCP, UDP, SCTP or ANY")]
    Protocol(String),
    #[error("port {0:?} is not a number (named ports are not supported)")]
    NamedPort(String),
    #[error("port {0} out of range (0-65535)")]
    PortRange(i64),
    #[error("endPort {end_port} needs a port at or below it (port is {port})")]
    EndPort { port: u16, end_port: u16 },
    #[error("unknown ICMP type {0:?}")]
    IcmpType(String),
    #[error("ICMP type {0} out of range (0-255)")]
    IcmpTypeRange(i64),
    #[error("unknown ICMP family {0:?}: expected IPv4 or IPv6")]
    IcmpFamily(String),
    #[error("unknown policy type {0:?}: expected Ingress or Egress")]
    PolicyType(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CiliumPolicy {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    #[serde(default)]
    pub spec: Option<RuleSpec>,
    #[serde(default)]
    pub specs: Option<Vec<RuleSpec>>,
    #[serde(default, rename = "status")]
    pub _status: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleSpec {
    #[serde(default)]
    pub endpoint_selector: Option<SelectorSpec>,
    #[serde(default)]
    pub ingress: Option<Vec<IngressSpec>>,
    #[serde(default)]
    pub ingress_deny: Option<Vec<IngressSpec>>,
    #[serde(default)]
    pub egress: Option<Vec<EgressSpec>>,
    #[serde(default)]
    pub egress_deny: Option<Vec<EgressSpec>>,
    #[serde(default)]
    pub labels: Option<Vec<LabelSpec>>,
    #[serde(default)]
    pub description: Option<String>,
}

/// A rule label as Cilium's JSON writes it: `{"key": ..., "value": ...,
/// "source": ...}`, or a plain `source:key=value` string. Read by hand,
/// as [`PortValue`] is: a thousand rules carry a thousand labels.
pub enum LabelSpec {
    Text(String),
    Object(LabelObject),
}

#[derive(Deserialize)]
pub struct LabelObject {
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub source: Option<String>,
}

impl<'de> Deserialize<'de> for LabelSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextOrObject;
        impl<'de> serde::de::Visitor<'de> for TextOrObject {
            type Value = LabelSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a label: a string or an object with a key")
            }
            fn visit_str<E>(self, s: &str) -> Result<LabelSpec, E> {
                Ok(LabelSpec::Text(s.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<LabelSpec, A::Error> {
                LabelObject::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(LabelSpec::Object)
            }
        }
        d.deserialize_any(TextOrObject)
    }
}

#[derive(Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorSpec {
    #[serde(default)]
    pub match_labels: Option<MatchLabels>,
    #[serde(default)]
    pub match_expressions: Option<Vec<ExpressionSpec>>,
}

/// A checked `matchExpressions` entry.
#[derive(Deserialize, PartialEq)]
#[serde(try_from = "RawExpression")]
pub struct ExpressionSpec(pub Requirement);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawExpression {
    pub key: String,
    pub operator: OperatorSpec,
    #[serde(default)]
    pub values: Option<Vec<String>>,
}

impl TryFrom<RawExpression> for ExpressionSpec {
    type Error = SpecError;
    fn try_from(e: RawExpression) -> Result<Self, SpecError> {
        check_key(&e.key)?;
        let values = e.values.unwrap_or_default();
        match e.operator.0 {
            Operator::In | Operator::NotIn if values.is_empty() => {
                Err(SpecError::ValuesMissing(e.key))
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Err(SpecError::ValuesNotTaken(e.key))
            }
            op => Ok(Self(Requirement::new(&e.key, op, values))),
        }
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(try_from = "String")]
pub struct OperatorSpec(pub Operator);

impl TryFrom<String> for OperatorSpec {
    type Error = SpecError;
    fn try_from(s: String) -> Result<Self, SpecError> {
        Ok(Self(match s.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            _ => return Err(SpecError::Operator(s)),
        }))
    }
}

impl SelectorSpec {
    pub fn to_selector(&self) -> Selector {
        let labels = self
            .match_labels
            .iter()
            .flat_map(|m| &m.0)
            .map(|(k, v)| Requirement::new(k, Operator::In, vec![v.clone()]));
        let exprs = self.match_expressions.iter().flatten().map(|e| e.0.clone());
        Selector {
            requirements: std::sync::Arc::new(labels.chain(exprs).collect()),
        }
    }
}

/// `matchLabels` with checked keys.
#[derive(Deserialize, PartialEq)]
#[serde(try_from = "BTreeMap<String, String>")]
pub struct MatchLabels(pub BTreeMap<String, String>);

impl TryFrom<BTreeMap<String, String>> for MatchLabels {
    type Error = SpecError;
    fn try_from(m: BTreeMap<String, String>) -> Result<Self, SpecError> {
        for k in m.keys() {
            check_key(k)?;
        }
        Ok(Self(m))
    }
}

fn check_key(key: &str) -> Result<(), SpecError> {
    if key.is_empty() || key.chars().any(|c| c.is_whitespace()) {
        return Err(SpecError::LabelKey(key.to_owned()));
    }
    Ok(())
}

#[derive(Deserialize, Clone, Copy)]
#[serde(try_from = "String")]
pub struct CidrSpec(pub Cidr);

impl TryFrom<String> for CidrSpec {
    type Error = SpecError;
    fn try_from(s: String) -> Result<Self, SpecError> {
        Ok(Self(Cidr::parse(&s)?))
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(try_from = "String")]
pub struct EntitySpec(pub Entity);

impl TryFrom<String> for EntitySpec {
    type Error = SpecError;
    fn try_from(s: String) -> Result<Self, SpecError> {
        Entity::parse(&s).map(Self).ok_or(SpecError::Entity(s))
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(try_from = "String")]
pub struct ProtocolSpec(pub Protocol);

impl TryFrom<String> for ProtocolSpec {
    type Error = SpecError;
    fn try_from(s: String) -> Result<Self, SpecError> {
        Protocol::parse(&s).map(Self).ok_or(SpecError::Protocol(s))
    }
}

/// A port number, written as a number or a string; named ports are not
/// supported (no pod specs to look them up in).
#[derive(Deserialize, Clone, Copy)]
#[serde(try_from = "PortValue")]
pub struct PortSpec(pub u16);

/// Read by hand, not `untagged`: that buffers every value before trying
/// each variant, a tenth of the typed reading of a thousand-rule policy.
pub enum PortValue {
    Number(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for PortValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NumberOrText;
        impl serde::de::Visitor<'_> for NumberOrText {
            type Value = PortValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E>(self, n: i64) -> Result<PortValue, E> {
                Ok(PortValue::Number(n))
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<PortValue, E> {
                i64::try_from(n)
                    .map(PortValue::Number)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(n), &self))
            }
            fn visit_str<E>(self, s: &str) -> Result<PortValue, E> {
                Ok(PortValue::Text(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<PortValue, E> {
                Ok(PortValue::Text(s))
            }
        }
        d.deserialize_any(NumberOrText)
    }
}

impl PortValue {
    /// The number written, as a number or as text; other text goes to
    /// `named`.
    fn number(self, named: impl FnOnce(&str) -> Result<i64, SpecError>) -> Result<i64, SpecError> {
        match self {
            PortValue::Number(n) => Ok(n),
            PortValue::Text(s) => s.trim().parse::<i64>().or_else(|_| named(s.trim())),
        }
    }
}

impl TryFrom<PortValue> for PortSpec {
    type Error = SpecError;
    fn try_from(v: PortValue) -> Result<Self, SpecError> {
        let n = v.number(|s| Err(SpecError::NamedPort(s.to_owned())))?;
        u16::try_from(n)
            .map(Self)
            .map_err(|_| SpecError::PortRange(n))
    }
}

/// A CIDR and its exceptions (Cilium's `CIDRRule`, NetworkPolicy's
/// `ipBlock`), each exception inside the CIDR as Cilium requires.
#[derive(Deserialize)]
#[serde(try_from = "RawCidrSet")]
pub struct CidrSetSpec {
    pub cidr: CidrSpec,
    pub except: Option<Vec<CidrSpec>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCidrSet {
    cidr: CidrSpec,
    #[serde(default)]
    except: Option<Vec<CidrSpec>>,
}

impl TryFrom<RawCidrSet> for CidrSetSpec {
    type Error = SpecError;
    fn try_from(raw: RawCidrSet) -> Result<Self, SpecError> {
        let cidr = raw.cidr.0;
        // an address of the other family is outside too
        if let Some(e) = raw
            .except
            .iter()
            .flatten()
            .find(|e| !cidr.contains(&Cidr::new(e.0.addr, 128)))
        {
            return Err(SpecError::ExceptOutside {
                cidr: cidr.to_string(),
                except: e.0.to_string(),
            });
        }
        Ok(Self {
            cidr: raw.cidr,
            except: raw.except,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortRuleSpec {
    #[serde(default)]
    pub ports: Option<Vec<PortProtocolSpec>>,
}

/// A checked port entry of `toPorts`.
#[derive(Deserialize)]
#[serde(try_from = "RawPortProtocol")]
pub struct PortProtocolSpec(pub PortProtocol);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPortProtocol {
    pub port: PortSpec,
    #[serde(default)]
    pub end_port: Option<PortSpec>,
    #[serde(default)]
    pub protocol: Option<ProtocolSpec>,
}

impl TryFrom<RawPortProtocol> for PortProtocolSpec {
    type Error = SpecError;
    fn try_from(p: RawPortProtocol) -> Result<Self, SpecError> {
        port_protocol(
            Some(p.port.0),
            p.end_port.map(|e| e.0),
            p.protocol.map_or(Protocol::Any, |p| p.0),
        )
        .map(Self)
    }
}

/// A port or range, checked: an end port needs a start at or below it.
fn port_protocol(
    port: Option<u16>,
    end_port: Option<u16>,
    protocol: Protocol,
) -> Result<PortProtocol, SpecError> {
    let port = port.unwrap_or(0);
    let end_port = end_port.unwrap_or(0);
    if end_port != 0 && (port == 0 || end_port < port) {
        return Err(SpecError::EndPort { port, end_port });
    }
    Ok(PortProtocol {
        port,
        end_port,
        protocol,
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngressSpec {
    #[serde(default)]
    pub from_endpoints: Option<Vec<SelectorSpec>>,
    #[serde(default, rename = "fromCIDR")]
    pub from_cidr: Option<Vec<CidrSpec>>,
    #[serde(default, rename = "fromCIDRSet")]
    pub from_cidr_set: Option<Vec<CidrSetSpec>>,
    #[serde(default)]
    pub from_entities: Option<Vec<EntitySpec>>,
    #[serde(default)]
    pub to_ports: Option<Vec<PortRuleSpec>>,
    #[serde(default)]
    pub icmps: Option<Vec<IcmpRuleSpec>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressSpec {
    #[serde(default)]
    pub to_endpoints: Option<Vec<SelectorSpec>>,
    #[serde(default, rename = "toCIDR")]
    pub to_cidr: Option<Vec<CidrSpec>>,
    #[serde(default, rename = "toCIDRSet")]
    pub to_cidr_set: Option<Vec<CidrSetSpec>>,
    #[serde(default)]
    pub to_entities: Option<Vec<EntitySpec>>,
    #[serde(default)]
    pub to_ports: Option<Vec<PortRuleSpec>>,
    #[serde(default)]
    pub icmps: Option<Vec<IcmpRuleSpec>>,
}

/// `icmps`: ICMP types a rule allows, instead of ports.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IcmpRuleSpec {
    #[serde(default)]
    pub fields: Option<Vec<IcmpFieldSpec>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IcmpFieldSpec {
    #[serde(rename = "type")]
    pub icmp_type: IcmpTypeSpec,
    #[serde(default)]
    pub family: Option<IcmpFamilySpec>,
}

/// An ICMP type by number or by Cilium's name (`EchoRequest`, ...): a name
/// stands for a different number in each family, or is one family's only.
#[derive(Deserialize, Clone)]
#[serde(try_from = "PortValue")]
pub struct IcmpTypeSpec {
    /// The name as written, for errors.
    pub name: Option<String>,
    pub v4: Option<u8>,
    pub v6: Option<u8>,
}

impl IcmpTypeSpec {
    /// The type number in the given family, when it has the name.
    pub fn number(&self, ipv6: bool) -> Option<u8> {
        if ipv6 {
            self.v6
        } else {
            self.v4
        }
    }
}

/// Cilium's names of ICMPv4 types.
const ICMPV4_TYPES: &[(&str, u8)] = &[
    ("EchoReply", 0),
    ("DestinationUnreachable", 3),
    ("Redirect", 5),
    ("Echo", 8),
    ("EchoRequest", 8),
    ("RouterAdvertisement", 9),
    ("RouterSelection", 10),
    ("TimeExceeded", 11),
    ("ParameterProblem", 12),
    ("Timestamp", 13),
    ("TimestampReply", 14),
    ("Photuris", 40),
    ("ExtendedEchoRequest", 42),
    ("ExtendedEchoReply", 43),
];

/// Cilium's names of ICMPv6 types.
const ICMPV6_TYPES: &[(&str, u8)] = &[
    ("DestinationUnreachable", 1),
    ("PacketTooBig", 2),
    ("TimeExceeded", 3),
    ("ParameterProblem", 4),
    ("EchoRequest", 128),
    ("EchoReply", 129),
    ("MulticastListenerQuery", 130),
    ("MulticastListenerReport", 131),
    ("MulticastListenerDone", 132),
    ("RouterSolicitation", 133),
    ("RouterAdvertisement", 134),
    ("NeighborSolicitation", 135),
    ("NeighborAdvertisement", 136),
    ("RedirectMessage", 137),
    ("RouterRenumbering", 138),
    ("ICMPNodeInformationQuery", 139),
    ("ICMPNodeInformationResponse", 140),
    ("InverseNeighborDiscoverySolicitationMessage", 141),
    ("InverseNeighborDiscoveryAdvertisementMessage", 142),
    ("HomeAgentAddressDiscoveryRequestMessage", 144),
    ("HomeAgentAddressDiscoveryReplyMessage", 145),
    ("MobilePrefixSolicitation", 146),
    ("MobilePrefixAdvertisement", 147),
    ("DuplicateAddressRequestCodeSuffix", 157),
    ("DuplicateAddressConfirmationCodeSuffix", 158),
    ("ExtendedEchoRequest", 160),
    ("ExtendedEchoReply", 161),
];

fn icmp_name(table: &'static [(&'static str, u8)], s: &str) -> Option<(&'static str, u8)> {
    table.iter().find(|(name, _)| *name == s).copied()
}

impl TryFrom<PortValue> for IcmpTypeSpec {
    type Error = SpecError;
    fn try_from(v: PortValue) -> Result<Self, SpecError> {
        if let PortValue::Text(s) = &v {
            let s = s.trim();
            if s.parse::<i64>().is_err() {
                let (v4, v6) = (icmp_name(ICMPV4_TYPES, s), icmp_name(ICMPV6_TYPES, s));
                let name = v4
                    .or(v6)
                    .ok_or_else(|| SpecError::IcmpType(s.to_owned()))?
                    .0;
                return Ok(Self {
                    name: Some(name.to_owned()),
                    v4: v4.map(|(_, t)| t),
                    v6: v6.map(|(_, t)| t),
                });
            }
        }
        let n = v.number(|s| Err(SpecError::IcmpType(s.to_owned())))?;
        let t = u8::try_from(n).map_err(|_| SpecError::IcmpTypeRange(n))?;
        Ok(Self {
            name: None,
            v4: Some(t),
            v6: Some(t),
        })
    }
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(try_from = "String")]
pub struct IcmpFamilySpec(pub bool);

impl IcmpFamilySpec {
    pub fn is_ipv4(self) -> bool {
        self.0
    }
}

impl TryFrom<String> for IcmpFamilySpec {
    type Error = SpecError;
    fn try_from(s: String) -> Result<Self, SpecError> {
        match s.as_str() {
            "IPv4" => Ok(Self(true)),
            "IPv6" => Ok(Self(false)),
            _ => Err(SpecError::IcmpFamily(s)),
        }
    }
}

// ---- networking.k8s.io/v1 NetworkPolicy ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicy {
    pub api_version: String,
    #[serde(rename = "kind")]
    pub _kind: String,
    pub metadata: Metadata,
    pub spec: NetworkPolicySpec,
    #[serde(default, rename = "status")]
    pub _status: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicySpec {
    pub pod_selector: SelectorSpec,
    #[serde(default)]
    pub policy_types: Option<Vec<PolicyTypeSpec>>,
    #[serde(default)]
    pub ingress: Option<Vec<NetworkPolicyIngress>>,
    #[serde(default)]
    pub egress: Option<Vec<NetworkPolicyEgress>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(try_from = "String")]
pub enum PolicyTypeSpec {
    Ingress,
    Egress,
}

impl TryFrom<String> for PolicyTypeSpec {
    type Error = SpecError;
    fn try_from(s: String) -> Result<Self, SpecError> {
        match s.as_str() {
            "Ingress" => Ok(Self::Ingress),
            "Egress" => Ok(Self::Egress),
            _ => Err(SpecError::PolicyType(s)),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicyIngress {
    #[serde(default)]
    pub from: Option<Vec<NetworkPolicyPeer>>,
    #[serde(default)]
    pub ports: Option<Vec<NetworkPolicyPort>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicyEgress {
    #[serde(default)]
    pub to: Option<Vec<NetworkPolicyPeer>>,
    #[serde(default)]
    pub ports: Option<Vec<NetworkPolicyPort>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicyPeer {
    #[serde(default)]
    pub pod_selector: Option<SelectorSpec>,
    #[serde(default)]
    pub namespace_selector: Option<SelectorSpec>,
    #[serde(default)]
    pub ip_block: Option<IpBlockSpec>,
}

/// NetworkPolicy's `ipBlock`: a CIDR and its exceptions.
pub type IpBlockSpec = CidrSetSpec;

/// A checked NetworkPolicy port (protocol defaults to TCP, as in
/// Kubernetes).
#[derive(Deserialize)]
#[serde(try_from = "RawNetworkPolicyPort")]
pub struct NetworkPolicyPort(pub PortProtocol);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawNetworkPolicyPort {
    #[serde(default)]
    pub protocol: Option<ProtocolSpec>,
    #[serde(default)]
    pub port: Option<PortSpec>,
    #[serde(default)]
    pub end_port: Option<PortSpec>,
}

impl TryFrom<RawNetworkPolicyPort> for NetworkPolicyPort {
    type Error = SpecError;
    fn try_from(p: RawNetworkPolicyPort) -> Result<Self, SpecError> {
        port_protocol(
            p.port.map(|p| p.0),
            p.end_port.map(|e| e.0),
            p.protocol.map_or(Protocol::Tcp, |p| p.0),
        )
        .map(Self)
    }
}
