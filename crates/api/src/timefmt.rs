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
    format!("{}.{ms:03}Z", civil(t))
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC.
fn civil(t: SystemTime) -> String {
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
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
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
    }
}
