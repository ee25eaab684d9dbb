//! Options that can change while the agent runs (`PATCH /v1/config`), with
//! Cilium's names and "Enabled"/"Disabled" spelling.

use super::modes::MonitorAggregation;
use policy::Enforcement;
use std::collections::BTreeMap;

const TOGGLES: &[(&str, bool)] = &[
    ("ConntrackAccounting", true),
    ("Debug", false),
    ("DebugLB", false),
    ("DebugPolicy", false),
    ("DropNotification", true),
    ("PolicyAccounting", true),
    ("PolicyAuditMode", false),
    ("PolicyTracing", false),
    ("PolicyVerdictNotification", true),
    ("SourceIPVerification", true),
    ("TraceNotification", true),
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuntimeOptionError {
    #[error("unknown option {0:?}; mutable options: {1}")]
    Unknown(String, String),
    #[error("invalid value {value:?} for option {name}: {why}")]
    BadValue {
        name: String,
        value: String,
        why: String,
    },
    #[error("invalid policy-enforcement {0:?}: must be one of default, always, never")]
    BadEnforcement(String),
}

/// The realized mutable options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeOptions {
    pub options: BTreeMap<String, String>,
    pub policy_enforcement: String,
}

fn toggle_word(on: bool) -> String {
    if on { "Enabled" } else { "Disabled" }.to_owned()
}

fn parse_toggle(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "enabled" | "enable" | "true" | "on" | "1" => Some(true),
        "disabled" | "disable" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

impl RuntimeOptions {
    pub fn new(
        debug: bool,
        monitor_aggregation: MonitorAggregation,
        policy_enforcement: Enforcement,
    ) -> Self {
        let mut options: BTreeMap<String, String> = TOGGLES
            .iter()
            .map(|(name, on)| ((*name).to_owned(), toggle_word(*on)))
            .collect();
        options.insert("Debug".into(), toggle_word(debug));
        options.insert(
            "MonitorAggregationLevel".into(),
            monitor_aggregation.as_str().to_owned(),
        );
        Self {
            options,
            policy_enforcement: policy_enforcement.as_str().to_owned(),
        }
    }

    /// Validates every change first and applies all or nothing; returns the
    /// names that changed.
    pub fn apply(
        &mut self,
        changes: &BTreeMap<String, String>,
        enforcement: Option<&str>,
    ) -> Result<Vec<String>, RuntimeOptionError> {
        let mut next = self.clone();
        let mut changed = Vec::new();
        for (name, value) in changes {
            let canonical = if name == "MonitorAggregationLevel" {
                MonitorAggregation::parse(value)
                    .ok_or_else(|| RuntimeOptionError::BadValue {
                        name: name.clone(),
                        value: value.clone(),
                        why: format!("must be one of {}", MonitorAggregation::NAMES.join(", ")),
                    })?
                    .as_str()
                    .to_owned()
            } else if TOGGLES.iter().any(|(n, _)| n == name) {
                toggle_word(
                    parse_toggle(value).ok_or_else(|| RuntimeOptionError::BadValue {
                        name: name.clone(),
                        value: value.clone(),
                        why: "must be Enabled or Disabled".into(),
                    })?,
                )
            } else {
                let known: Vec<&str> = self.options.keys().map(String::as_str).collect();
                return Err(RuntimeOptionError::Unknown(name.clone(), known.join(", ")));
            };
            if next.options.get(name) != Some(&canonical) {
                changed.push(name.clone());
            }
            next.options.insert(name.clone(), canonical);
        }
        if let Some(e) = enforcement {
            let e = e.to_ascii_lowercase();
            let mode = Enforcement::parse(&e).ok_or(RuntimeOptionError::BadEnforcement(e))?;
            if next.policy_enforcement != mode.as_str() {
                changed.push("policy-enforcement".into());
            }
            next.policy_enforcement = mode.as_str().to_owned();
        }
        *self = next;
        Ok(changed)
    }

    pub fn is_enabled(&self, name: &str) -> bool {
        self.options.get(name).map(String::as_str) == Some("Enabled")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn apply_is_all_or_nothing() {
        let mut o = RuntimeOptions::new(false, MonitorAggregation::None, Enforcement::Default);
        let before = o.clone();
        let e = o
            .apply(&changes(&[("Debug", "true"), ("Bogus", "true")]), None)
            .unwrap_err();
        assert!(matches!(e, RuntimeOptionError::Unknown(ref n, _) if n == "Bogus"));
        assert_eq!(o, before);
        let e = o.apply(&changes(&[("Debug", "maybe")]), None).unwrap_err();
        assert!(e.to_string().contains("Debug"));
        assert_eq!(
            o.apply(&changes(&[]), Some("sometimes")).unwrap_err(),
            RuntimeOptionError::BadEnforcement("sometimes".into())
        );
        assert_eq!(o, before);
    }

    #[test]
    fn apply_reports_changes_in_cilium_spelling() {
        let mut o = RuntimeOptions::new(false, MonitorAggregation::Medium, Enforcement::Default);
        assert_eq!(o.options["MonitorAggregationLevel"], "Medium");
        let changed = o
            .apply(
                &changes(&[("Debug", "enable"), ("DropNotification", "Enabled")]),
                Some("always"),
            )
            .unwrap();
        assert_eq!(
            changed,
            vec!["Debug".to_string(), "policy-enforcement".to_string()]
        );
        assert!(o.is_enabled("Debug"));
        assert_eq!(o.policy_enforcement, "always");
    }
}
