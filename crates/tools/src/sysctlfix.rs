//! The sysctl drop-in that keeps rp_filter off on Cilium's devices
//! (Cilium's `cilium-sysctlfix`): written only when its content differs,
//! then systemd-sysctl is asked to apply it.

use std::path::Path;

/// The drop-in, byte for byte (the tool compares against it).
pub const CONTENT: &str = "
# Disable rp_filter on Cilium interfaces since it may cause mangled packets to be dropped
-net.ipv4.conf.lxc*.rp_filter = 0
-net.ipv4.conf.cilium_*.rp_filter = 0
# The kernel uses max(conf.all, conf.{dev}) as its value, so we need to set .all. to 0 as well.
# Otherwise it will overrule the device specific settings.
net.ipv4.conf.all.rp_filter = 0
";

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    UpToDate,
    Written,
}

/// Writes `<dir>/<file>` unless it already says `CONTENT`.
pub fn apply(dir: &Path, file: &str) -> std::io::Result<Outcome> {
    let path = dir.join(file);
    if std::fs::read_to_string(&path).is_ok_and(|c| c == CONTENT) {
        return Ok(Outcome::UpToDate);
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(&path, CONTENT)?;
    Ok(Outcome::Written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_once_then_reports_up_to_date() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("sysctl.d");
        assert_eq!(
            apply(&d, "99-zzz-override_cilium.conf").unwrap(),
            Outcome::Written
        );
        assert_eq!(
            apply(&d, "99-zzz-override_cilium.conf").unwrap(),
            Outcome::UpToDate
        );
        std::fs::write(d.join("99-zzz-override_cilium.conf"), "changed").unwrap();
        assert_eq!(
            apply(&d, "99-zzz-override_cilium.conf").unwrap(),
            Outcome::Written
        );
    }
}
