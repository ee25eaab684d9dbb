//! Collecting raw key/value pairs from defaults, the config dir, the
//! environment and flags.

use super::keys::{self, Key};
use super::validate::validate;
use super::ConfigError;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Where a value came from; later sources win.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Default,
    ConfigDir,
    Env,
    Flag,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Default => "default",
            Source::ConfigDir => "config dir",
            Source::Env => "environment",
            Source::Flag => "command line",
        })
    }
}

/// Every known key with its effective value.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub values: BTreeMap<&'static str, (String, Source)>,
    pub config_dir: Option<String>,
}

impl Loaded {
    pub fn get(&self, key: &str) -> &str {
        self.values
            .get(key)
            .map(|(v, _)| v.as_str())
            .unwrap_or_else(|| panic!("config key {key} is not registered"))
    }

    pub fn source(&self, key: &str) -> Option<Source> {
        self.values.get(key).map(|(_, s)| *s)
    }
}

fn env_name(key: &str) -> String {
    format!("CILIUM_{}", key.to_ascii_uppercase().replace('-', "_"))
}

fn set(
    values: &mut BTreeMap<&'static str, (String, Source)>,
    key: &Key,
    value: String,
    source: Source,
) -> Result<(), ConfigError> {
    validate(key, &value)?;
    values.insert(key.name, (value, source));
    Ok(())
}

/// Parses `args` (without the program name) and merges every source.
pub fn load(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<Loaded, ConfigError> {
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    let mut config_dir = None;
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        let Some(body) = arg.strip_prefix("--") else {
            return Err(ConfigError::UnexpectedArg(arg.clone()));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (body.to_owned(), None),
        };
        if name == "config-dir" {
            let v = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| ConfigError::MissingValue(name.clone()))?,
            };
            config_dir = Some(v);
            continue;
        }
        let key = keys::lookup(&name).ok_or_else(|| ConfigError::UnknownKey {
            key: name.clone(),
            origin: "command line".into(),
        })?;
        let value = match inline {
            Some(v) => Some(v),
            None if key.kind == keys::Kind::Bool => match it.peek() {
                Some(next) if super::validate::parse_bool(next).is_some() => it.next().cloned(),
                _ => Some("true".into()),
            },
            None => Some(
                it.next()
                    .cloned()
                    .ok_or_else(|| ConfigError::MissingValue(name.clone()))?,
            ),
        };
        flags.push((name, value));
    }

    let mut values = BTreeMap::new();
    for key in keys::KEYS {
        values.insert(key.name, (key.default.to_owned(), Source::Default));
    }
    if let Some(dir) = &config_dir {
        for (name, value) in read_config_dir(Path::new(dir))? {
            let key = keys::lookup(&name).ok_or_else(|| ConfigError::UnknownKey {
                key: name.clone(),
                origin: format!("config dir {dir}"),
            })?;
            set(&mut values, key, value, Source::ConfigDir)?;
        }
    }
    for key in keys::KEYS {
        if let Some(v) = env(&env_name(key.name)) {
            set(&mut values, key, v, Source::Env)?;
        }
    }
    for (name, value) in flags {
        let key = keys::lookup(&name).expect("flag keys were looked up while parsing");
        set(&mut values, key, value.unwrap_or_default(), Source::Flag)?;
    }
    Ok(Loaded { values, config_dir })
}

/// Reads `key = trimmed content` for every regular file of a ConfigMap-style
/// directory; dot-entries (`..data` and friends) and directories are skipped.
fn read_config_dir(dir: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let err = |why: String| ConfigError::ConfigDir {
        dir: dir.display().to_string(),
        why,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| err(e.to_string()))? {
        let entry = entry.map_err(|e| err(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            continue;
        }
        let content = std::fs::read_to_string(&path).map_err(|e| err(format!("{name}: {e}")))?;
        out.push((name, content.trim().to_owned()));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_beat_env_beat_config_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("mtu"), "1400\n").unwrap();
        std::fs::write(dir.join("cluster-name"), "from-dir").unwrap();
        std::fs::write(dir.join("debug"), "true").unwrap();
        std::fs::create_dir_all(dir.join("..2024_01_01")).unwrap();
        let env = |k: &str| (k == "CILIUM_CLUSTER_NAME").then(|| "from-env".to_owned());
        let cfg = load(
            &args(&["--config-dir", dir.to_str().unwrap(), "--mtu=1300"]),
            env,
        )
        .unwrap();
        assert_eq!(cfg.get("mtu"), "1300");
        assert_eq!(cfg.get("cluster-name"), "from-env");
        assert_eq!(cfg.get("debug"), "true");
        assert_eq!(cfg.source("debug"), Some(Source::ConfigDir));
        assert_eq!(cfg.get("bpf-root"), "/sys/fs/bpf");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let none = |_: &str| None;
        let e = load(&args(&["--no-such-key=1"]), none).unwrap_err();
        assert!(e.to_string().contains("no-such-key"), "{e}");
        let e = load(&args(&["--mtu=lots"]), none).unwrap_err();
        assert!(
            e.to_string().contains("mtu") && e.to_string().contains("lots"),
            "{e}"
        );
        let e = load(&args(&["--ipv4-range=10.0.0/8"]), none).unwrap_err();
        assert!(e.to_string().contains("ipv4-range"), "{e}");
        let e = load(&args(&["positional"]), none).unwrap_err();
        assert_eq!(e, ConfigError::UnexpectedArg("positional".into()));
        let e = load(&args(&["--bpf-root"]), none).unwrap_err();
        assert_eq!(e, ConfigError::MissingValue("bpf-root".into()));

        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("enable-ipv44"), "true").unwrap();
        let e = load(&args(&["--config-dir", dir.to_str().unwrap()]), none).unwrap_err();
        assert!(
            e.to_string().contains("enable-ipv44") && e.to_string().contains("config dir"),
            "{e}"
        );

        let e = load(&args(&[]), |k: &str| {
            (k == "CILIUM_DEBUG").then(|| "yes please".into())
        })
        .unwrap_err();
        assert!(e.to_string().contains("debug"), "{e}");
    }

    #[test]
    fn bool_flags_take_an_optional_value() {
        let none = |_: &str| None;
        assert_eq!(
            load(&args(&["--debug"]), none).unwrap().get("debug"),
            "true"
        );
        assert_eq!(
            load(&args(&["--debug", "false"]), none)
                .unwrap()
                .get("debug"),
            "false"
        );
        assert_eq!(
            load(&args(&["--debug=false"]), none).unwrap().get("debug"),
            "false"
        );
    }
}
