//! `kvstore`, `kvstore-opt` and `kvstore-lease-ttl` as Cilium reads them.

use super::ConfigError;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvstoreConfig {
    pub endpoints: Vec<String>,
    pub lease_ttl: Duration,
}

fn bad(key: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::BadValue {
        key: key.into(),
        value: value.into(),
        why: why.into(),
    }
}

/// `kvstore-opt` is a map, given as `k=v,k2=v2` or as a JSON object.
fn parse_opts(raw: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    if raw.starts_with('{') {
        let map: std::collections::BTreeMap<String, String> =
            serde_json::from_str(raw).map_err(|e| {
                bad(
                    "kvstore-opt",
                    raw,
                    format!("not a JSON object of strings: {e}"),
                )
            })?;
        return Ok(map.into_iter().collect());
    }
    raw.split(',')
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| bad("kvstore-opt", raw, format!("{pair:?} is not key=value")))
        })
        .collect()
}

/// Endpoints from an etcd config file (`endpoints:` list, YAML).
fn endpoints_from_file(path: &str) -> Result<Vec<String>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad("kvstore-opt", path, format!("reading etcd.config: {e}")))?;
    let mut out = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("endpoints:") {
            in_list = true;
            let inline = rest.trim().trim_start_matches('[').trim_end_matches(']');
            out.extend(
                inline
                    .split(',')
                    .map(|s| s.trim().trim_matches('"').to_owned())
                    .filter(|s| !s.is_empty()),
            );
        } else if in_list && t.starts_with('-') {
            out.push(
                t.trim_start_matches('-')
                    .trim()
                    .trim_matches('"')
                    .to_owned(),
            );
        } else if !t.is_empty() && !t.starts_with('#') {
            in_list = false;
        }
    }
    if out.is_empty() {
        return Err(bad("kvstore-opt", path, "etcd.config lists no endpoints"));
    }
    Ok(out)
}

/// None when no kvstore is configured.
pub fn parse(
    kvstore: &str,
    opts: &str,
    lease_ttl: Duration,
) -> Result<Option<KvstoreConfig>, ConfigError> {
    match kvstore {
        "" => {
            if !opts.trim().is_empty() {
                return Err(bad("kvstore-opt", opts, "set, but kvstore is empty"));
            }
            return Ok(None);
        }
        "etcd" => {}
        other => return Err(bad("kvstore", other, "only etcd is supported")),
    }
    let mut endpoints = Vec::new();
    for (k, v) in parse_opts(opts)? {
        match k.as_str() {
            "etcd.address" => endpoints.extend(v.split(';').map(str::to_owned)),
            "etcd.config" => endpoints.extend(endpoints_from_file(&v)?),
            other => {
                return Err(bad(
                    "kvstore-opt",
                    opts,
                    format!("unknown option {other:?} (expected etcd.address or etcd.config)"),
                ))
            }
        }
    }
    if endpoints.is_empty() {
        return Err(bad(
            "kvstore-opt",
            opts,
            "kvstore=etcd needs etcd.address or etcd.config",
        ));
    }
    for e in &endpoints {
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            return Err(bad(
                "kvstore-opt",
                e,
                "etcd endpoints are http:// or https:// URLs",
            ));
        }
    }
    Ok(Some(KvstoreConfig {
        endpoints,
        lease_ttl,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_bad_ones_name_the_problem() {
        let ttl = Duration::from_secs(60);
        assert_eq!(parse("", "", ttl).unwrap(), None);
        let c = parse("etcd", "etcd.address=http://198.18.0.1:2379", ttl)
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoints, vec!["http://198.18.0.1:2379"]);
        let c = parse("etcd", r#"{"etcd.address":"http://a:2379"}"#, ttl)
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoints, vec!["http://a:2379"]);
        assert!(parse("consul", "", ttl)
            .unwrap_err()
            .to_string()
            .contains("only etcd"));
        assert!(parse("etcd", "", ttl)
            .unwrap_err()
            .to_string()
            .contains("etcd.address"));
        assert!(parse("etcd", "etcd.frob=1", ttl)
            .unwrap_err()
            .to_string()
            .contains("etcd.frob"));
        assert!(parse("etcd", "etcd.address=198.18.0.1:2379", ttl)
            .unwrap_err()
            .to_string()
            .contains("http://"));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("etcd.config");
        std::fs::write(&f, "---\nendpoints:\n- http://198.18.0.1:2379\n").unwrap();
        let c = parse("etcd", &format!("etcd.config={}", f.display()), ttl)
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoints, vec!["http://198.18.0.1:2379"]);
    }
}
