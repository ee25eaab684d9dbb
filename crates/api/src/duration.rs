//! Durations as Go spells them (`strfmt.Duration` in Cilium's models).

/// A duration as Go's `time.Duration.String()` spells it (`72h3m0.5s`,
/// `1.5s`, `0s`), which is what `strfmt.Duration` sends and parses.
pub fn go_duration(d: std::time::Duration) -> String {
    let total = d.as_nanos();
    if total == 0 {
        return "0s".into();
    }
    if total < 1_000_000_000 {
        // Go switches to ms/µs/ns below a second
        let (unit, div) = match total {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(total, div));
    }
    let secs = total / 1_000_000_000;
    let (h, m) = (secs / 3600, secs / 60 % 60);
    let s = decimal(total % 60_000_000_000, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// `n / div` with the fraction's trailing zeros dropped.
fn decimal(n: u128, div: u128) -> String {
    let (whole, frac) = (n / div, n % div);
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Reads a Go duration (`1h2m3.5s`, `250ms`, `0s`): numbers, each with a
/// unit of `h`, `m`, `s`, `ms`, `us`/`µs` or `ns`. None when malformed.
pub fn parse_go_duration(s: &str) -> Option<std::time::Duration> {
    if s == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let mut rest = s;
    let mut nanos = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let (unit, len) = [
            ("ns", 1e0),
            ("us", 1e3),
            ("µs", 1e3),
            ("ms", 1e6),
            ("s", 1e9),
            ("m", 60e9),
            ("h", 3600e9),
        ]
        .into_iter()
        .filter(|(u, _)| rest.starts_with(u))
        .map(|(u, scale)| (scale, u.len()))
        // "ms" before "m", "ns" before a lone "s"
        .max_by_key(|(_, len)| *len)?;
        nanos += n * unit;
        rest = &rest[len..];
    }
    Some(std::time::Duration::from_nanos(nanos.round() as u64))
}

/// apimachinery's `HumanDuration` (kubectl's ages): `45s`, `3m20s`,
/// `5h10m`, `3d4h`, `2y`.
pub fn human_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            dy => format!("{}y{dy}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}
