//! Endpoint ID syntax: `[prefix:]value`; no prefix means `cilium-local`.

use std::net::{Ipv4Addr, Ipv6Addr};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointRef {
    Local(u16),
    ContainerId(String),
    /// `cni-attachment-id:<container>[:<ifname>]`
    CniAttachment(String, Option<String>),
    /// `pod-name:<namespace>/<pod>`
    PodName(String, String),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
}

/// Why an endpoint ID does not parse; each names the ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("endpoint ID {raw:?} has an empty value")]
    Empty { raw: String },
    #[error("invalid endpoint ID {raw:?}: {value:?} is not a number in 0..65535")]
    NotANumber { raw: String, value: String },
    #[error("invalid endpoint ID {raw:?}: expected {prefix}:<namespace>/<pod>")]
    NotAPod { raw: String, prefix: String },
    #[error("invalid endpoint ID {raw:?}: {value:?} is not an IPv4 address")]
    NotIpv4 { raw: String, value: String },
    #[error("invalid endpoint ID {raw:?}: {value:?} is not an IPv6 address")]
    NotIpv6 { raw: String, value: String },
    #[error("unsupported endpoint ID prefix {prefix:?} in {raw:?}")]
    UnknownPrefix { raw: String, prefix: String },
}

pub fn parse(raw: &str) -> Result<EndpointRef, IdError> {
    let (prefix, value) = raw.split_once(':').unwrap_or(("cilium-local", raw));
    let owned = |s: &str| s.to_owned();
    if value.is_empty() {
        return Err(IdError::Empty { raw: owned(raw) });
    }
    match prefix {
        "cilium-local" => {
            value
                .parse::<u16>()
                .map(EndpointRef::Local)
                .map_err(|_| IdError::NotANumber {
                    raw: owned(raw),
                    value: owned(value),
                })
        }
        "container-id" | "docker-endpoint" => Ok(EndpointRef::ContainerId(value.to_owned())),
        "cni-attachment-id" => Ok(match value.split_once(':') {
            Some((c, i)) => EndpointRef::CniAttachment(c.to_owned(), Some(i.to_owned())),
            None => EndpointRef::CniAttachment(value.to_owned(), None),
        }),
        "pod-name" | "cep-name" => value
            .split_once('/')
            .filter(|(ns, pod)| !ns.is_empty() && !pod.is_empty())
            .map(|(ns, pod)| EndpointRef::PodName(ns.to_owned(), pod.to_owned()))
            .ok_or_else(|| IdError::NotAPod {
                raw: owned(raw),
                prefix: owned(prefix),
            }),
        "ipv4" => value
            .parse()
            .map(EndpointRef::Ipv4)
            .map_err(|_| IdError::NotIpv4 {
                raw: owned(raw),
                value: owned(value),
            }),
        // an IPv6 address has colons of its own: the prefix ends at the first
        "ipv6" => value
            .parse()
            .map(EndpointRef::Ipv6)
            .map_err(|_| IdError::NotIpv6 {
                raw: owned(raw),
                value: owned(value),
            }),
        other => Err(IdError::UnknownPrefix {
            raw: owned(raw),
            prefix: owned(other),
        }),
    }
}

impl EndpointRef {
    pub fn matches(&self, ep: &super::Endpoint) -> bool {
        match self {
            EndpointRef::Local(id) => ep.id == *id,
            EndpointRef::ContainerId(c) => ep.container_id == *c,
            EndpointRef::CniAttachment(c, ifname) => {
                ep.container_id == *c
                    && ifname
                        .as_ref()
                        .is_none_or(|i| *i == ep.container_interface_name)
            }
            EndpointRef::PodName(ns, pod) => ep.k8s_namespace == *ns && ep.k8s_pod_name == *pod,
            EndpointRef::Ipv4(ip) => ep.ipv4 == Some(*ip),
            EndpointRef::Ipv6(ip) => ep.ipv6 == Some(*ip),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_and_bad_ones_are_named() {
        assert_eq!(parse("7"), Ok(EndpointRef::Local(7)));
        assert_eq!(
            parse("ipv6:fd00:10::5"),
            Ok(EndpointRef::Ipv6("fd00:10::5".parse().unwrap()))
        );
        assert!(matches!(
            parse("ipv6:10.0.0.1"),
            Err(IdError::NotIpv6 { .. })
        ));
        assert_eq!(parse("cilium-local:0"), Ok(EndpointRef::Local(0)));
        assert_eq!(
            parse("cni-attachment-id:abc:eth0"),
            Ok(EndpointRef::CniAttachment(
                "abc".into(),
                Some("eth0".into())
            ))
        );
        assert_eq!(
            parse("pod-name:default/a"),
            Ok(EndpointRef::PodName("default".into(), "a".into()))
        );
        assert!(parse("bogus:1").unwrap_err().to_string().contains("bogus"));
        assert!(parse("x1")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
        assert!(parse("pod-name:nope").is_err());
    }
}
