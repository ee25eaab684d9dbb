//! Values as Go prints them, for the outputs 1.16 makes with `%v` and
//! Go's error texts.

use serde_json::Value;

/// `fmt.Sprintf("%v", v)` of a value decoded from JSON into
/// `interface{}` (numbers are float64 there).
pub fn value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => float(n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(value).collect::<Vec<_>>().join(" ")
            )
        }
        Value::Object(m) => {
            let mut pairs: Vec<_> = m.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let pairs: Vec<String> = pairs
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", value(v)))
                .collect();
            format!("map[{}]", pairs.join(" "))
        }
    }
}

/// `%v` of a float64: the shortest digits, in exponent form when the
/// exponent is below -4 or at least 6 (`1e+06`, `1.5e-05`).
pub fn float(f: f64) -> String {
    if !f.is_finite() {
        return match f {
            f if f.is_nan() => "NaN".into(),
            f if f > 0.0 => "+Inf".into(),
            _ => "-Inf".into(),
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is a number");
    if f != 0.0 && !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// `%.2f` (`NaN`, `+Inf` as Go spells them).
pub fn fixed2(f: f64) -> String {
    if f.is_finite() {
        format!("{f:.2}")
    } else {
        float(f)
    }
}

/// An OS error as Go prints it (`no such file or directory`).
pub fn errno_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        // SAFETY: strerror returns a static NUL-terminated string
        Some(n) => unsafe { std::ffi::CStr::from_ptr(libc::strerror(n)) }
            .to_string_lossy()
            .to_lowercase(),
        None => e.to_string(),
    }
}

/// Go's `*fs.PathError` text: `open /x: no such file or directory`.
pub fn path_error(op: &str, path: &std::path::Path, e: &std::io::Error) -> String {
    format!("{op} {}: {}", path.display(), errno_text(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_as_gos_percent_v() {
        assert_eq!(value(&json!(1500)), "1500");
        assert_eq!(value(&json!(1000000)), "1e+06");
        assert_eq!(value(&json!(123456789)), "1.23456789e+08");
        assert_eq!(value(&json!(0.00001)), "1e-05");
        assert_eq!(value(&json!(0.5)), "0.5");
        assert_eq!(value(&json!(0)), "0");
        assert_eq!(value(&json!(null)), "<nil>");
        assert_eq!(value(&json!(["a", true])), "[a true]");
        assert_eq!(value(&json!({"b": 1, "a": "x"})), "map[a:x b:1]");
    }
}
