//! Value checks per key kind.

use super::keys::{Key, Kind};
use super::ConfigError;
use std::net::Ipv4Addr;

pub fn validate(key: &Key, value: &str) -> Result<(), ConfigError> {
    let bad = |why: String| ConfigError::BadValue {
        key: key.name.to_owned(),
        value: value.to_owned(),
        why,
    };
    match key.kind {
        Kind::Bool => parse_bool(value)
            .map(|_| ())
            .ok_or_else(|| bad("expected true or false".into())),
        Kind::Str => Ok(()),
        Kind::Uint(lo, hi) => {
            let n: u64 = value
                .parse()
                .map_err(|_| bad("expected an unsigned integer".into()))?;
            if n < lo || n > hi {
                return Err(bad(format!("must be between {lo} and {hi}")));
            }
            Ok(())
        }
        Kind::Float => value
            .parse::<f64>()
            .map(|_| ())
            .map_err(|_| bad("expected a number".into())),
        Kind::Enum(words) => {
            if words.iter().any(|w| w.eq_ignore_ascii_case(value)) {
                Ok(())
            } else {
                Err(bad(format!("must be one of {}", words.join(", "))))
            }
        }
        Kind::Cidr4 => {
            if value.is_empty() {
                return Ok(());
            }
            parse_cidr4(value)
                .map(|_| ())
                .ok_or_else(|| bad("expected an IPv4 CIDR such as 10.0.0.0/24".into()))
        }
        Kind::Cidr6 => {
            if value.is_empty() {
                return Ok(());
            }
            parse_cidr6(value).map(|_| ()).ok_or_else(|| {
                bad("expected an IPv6 CIDR with its host bits clear, e.g. fd00::/104".into())
            })
        }
        Kind::Ip4 => {
            if value.is_empty() {
                return Ok(());
            }
            value
                .parse::<Ipv4Addr>()
                .map(|_| ())
                .map_err(|_| bad("expected an IPv4 address".into()))
        }
        Kind::Duration => parse_duration(value)
            .map(|_| ())
            .ok_or_else(|| bad("expected a duration such as 30s or 5m0s".into())),
        Kind::Path => {
            if value.is_empty() || value.starts_with('/') {
                Ok(())
            } else {
                Err(bad("expected an absolute path".into()))
            }
        }
    }
}

pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "t" => Some(true),
        "false" | "0" | "f" => Some(false),
        _ => None,
    }
}

/// Parses `a.b.c.d/len` with the host bits cleared; None if malformed or
/// if host bits are set.
pub fn parse_cidr4(v: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, len) = v.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    if u32::from(ip) & !mask != 0 {
        return None;
    }
    Some((ip, len))
}

/// An IPv6 CIDR with its host bits clear.
pub fn parse_cidr6(v: &str) -> Option<(std::net::Ipv6Addr, u8)> {
    let (ip, len) = v.split_once('/')?;
    let ip: std::net::Ipv6Addr = ip.parse().ok()?;
    let len: u8 = len.parse().ok().filter(|l| *l <= 128)?;
    let host = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
    (u128::from(ip) & host == 0).then_some((ip, len))
}

/// Go duration syntax: a sequence of <number><unit>, units ns us ms s m h.
pub fn parse_duration(v: &str) -> Option<std::time::Duration> {
    if v == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = v;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * secs;
        rest = &rest[unit_end..];
    }
    Some(std::time::Duration::from_secs_f64(total))
}

/// `prometheus-serve-addr` as Cilium writes it (`:9962` is every address).
pub fn listen_addr(s: &str) -> Result<std::net::SocketAddr, NotHostPort> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_owned()
    };
    full.parse().map_err(|_| NotHostPort(s.to_owned()))
}

#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not [host]:port")]
pub struct NotHostPort(String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_must_be_networks() {
        assert_eq!(
            parse_cidr4("10.0.1.0/24"),
            Some((Ipv4Addr::new(10, 0, 1, 0), 24))
        );
        assert_eq!(parse_cidr4("10.0.1.5/24"), None);
        assert_eq!(parse_cidr4("10.0.0/8"), None);
        assert_eq!(parse_cidr4("10.0.0.0/33"), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(
            parse_duration("5m0s"),
            Some(std::time::Duration::from_secs(300))
        );
        assert_eq!(
            parse_duration("100ms"),
            Some(std::time::Duration::from_millis(100))
        );
        assert_eq!(
            parse_duration("1h30m"),
            Some(std::time::Duration::from_secs(5400))
        );
        assert_eq!(parse_duration("5 minutes"), None);
        assert_eq!(parse_duration(""), None);
    }
}
