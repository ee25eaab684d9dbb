//! RFC 3339 timestamps in UTC without a calendar dependency.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn rfc3339(t: SystemTime) -> String {
    format!("{}Z", civil(t))
}

/// With milliseconds, as event timestamps need.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_millis())
        .unwrap_or(0);
    let mut out = String::with_capacity(24);
    push_civil(&mut out, t);
    out.push('.');
    push_padded(&mut out, u64::from(ms), 3);
    out.push('Z');
    out
}

/// Go's `20060102-150405.999-0700-MST` in UTC (what `cilium debuginfo`
/// names its files with): milliseconds without trailing zeros.
pub fn debuginfo_stamp(t: SystemTime) -> String {
    let digits: String = civil(t).chars().filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at(8);
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_millis())
        .unwrap_or(0);
    let frac = format!("{ms:03}");
    let frac = frac.trim_end_matches('0');
    let frac = if frac.is_empty() {
        String::new()
    } else {
        format!(".{frac}")
    };
    format!("{date}-{time}{frac}+0000-UTC")
}

/// Reads `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, as Go marshals a
/// `time.Time`.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = s.get(19..)?;
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits: String = frac.chars().take_while(char::is_ascii_digit).collect();
        rest = &frac[digits.len()..];
        let padded = format!("{digits:0<9}");
        nanos = padded.get(..9)?.parse().ok()?;
    }
    let offset = match rest {
        "Z" => 0,
        zone => {
            let sign = match zone.get(..1)? {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            let h: i64 = zone.get(1..3)?.parse().ok()?;
            let mi: i64 = zone.get(4..6)?.parse().ok()?;
            sign * (h * 3600 + mi * 60)
        }
    };
    // days-from-civil (Howard Hinnant's algorithm)
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let secs = days * 86400 + hh * 3600 + mm * 60 + ss - offset;
    let at = std::time::Duration::new(secs.unsigned_abs(), nanos);
    if secs >= 0 {
        UNIX_EPOCH.checked_add(at)
    } else {
        UNIX_EPOCH.checked_sub(at)
    }
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC.
fn civil(t: SystemTime) -> String {
    let mut out = String::with_capacity(24);
    push_civil(&mut out, t);
    out
}

/// Appends `YYYY-MM-DDTHH:MM:SS`, the digits written by hand: every
/// monitor event carries a timestamp, and the formatting machinery cost
/// more than the rest of it.
fn push_civil(out: &mut String, t: SystemTime) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    push_padded(out, y as u64, 4);
    for (sep, n) in [
        ('-', m),
        ('-', d),
        ('T', rem / 3600),
        (':', rem % 3600 / 60),
        (':', rem % 60),
    ] {
        out.push(sep);
        push_padded(out, n as u64, 2);
    }
}

/// `n` in decimal, zero-padded to `width` digits at least.
fn push_padded(out: &mut String, n: u64, width: usize) {
    out.push_str(crate::decimal::decimal(n, width, &mut [0; 20]));
}

#[cfg(test)]
mod tests {
    #[test]
    fn digits_are_written_as_the_formatting_machinery_writes_them() {
        use std::time::{Duration, UNIX_EPOCH};
        // a day, a leap day, the year 10000, and instants in between
        for secs in [0, 86_399, 951_782_400, 253_402_300_800, 1_764_475_200]
            .into_iter()
            .chain((0..2000).map(|i: u64| i * 7_919_993 + i % 61))
        {
            for ms in [0, 7, 42, 999] {
                let t = UNIX_EPOCH + Duration::from_millis(secs * 1000 + ms);
                let d = t.duration_since(UNIX_EPOCH).unwrap();
                let (days, rem) = (d.as_secs() / 86400, d.as_secs() % 86400);
                let (y, m, dd) = reference_civil_date(days as i64);
                let want = format!(
                    "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{ms:03}Z",
                    rem / 3600,
                    rem % 3600 / 60,
                    rem % 60
                );
                assert_eq!(super::rfc3339_millis(t), want);
            }
        }
    }

    /// The date of a day since the epoch, counted the slow way.
    fn reference_civil_date(mut days: i64) -> (i64, i64, i64) {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let mut y = 1970;
        while days >= if leap(y) { 366 } else { 365 } {
            days -= if leap(y) { 366 } else { 365 };
            y += 1;
        }
        let months = [
            31,
            if leap(y) { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        let mut m = 0;
        while days >= months[m] {
            days -= months[m];
            m += 1;
        }
        (y, m as i64 + 1, days + 1)
    }

    #[test]
    fn formats_known_instants() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(super::rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            super::rfc3339(UNIX_EPOCH + Duration::from_secs(1_689_302_462)),
            "2023-07-14T02:41:02Z"
        );
        assert_eq!(
            super::rfc3339_millis(UNIX_EPOCH + Duration::from_millis(1_689_302_462_042)),
            "2023-07-14T02:41:02.042Z"
        );
        assert_eq!(
            super::parse_rfc3339("2023-07-14T04:41:02.042+02:00"),
            Some(UNIX_EPOCH + Duration::from_millis(1_689_302_462_042))
        );
        assert_eq!(
            super::parse_rfc3339("1970-01-01T00:00:00Z"),
            Some(UNIX_EPOCH)
        );
        assert_eq!(
            super::debuginfo_stamp(UNIX_EPOCH + Duration::from_millis(1_689_302_462_040)),
            "20230714-024102.04+0000-UTC"
        );
    }
}
