//! The init-container tools as the DaemonSet runs them: cilium-mount in a
//! private mount namespace (a directory of the test's own), cilium-sysctlfix
//! on a directory of the test's own with the reload skipped.

use std::process::Command;

const MOUNT: &str = env!("CARGO_BIN_EXE_cilium-mount");
const SYSCTLFIX: &str = env!("CARGO_BIN_EXE_cilium-sysctlfix");

fn run(bin: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(bin).args(args).output().expect("run tool");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn cilium_mount_mounts_once_and_explains_its_usage() {
    let _sb = testsupport::Sandbox::enter();
    let (code, out) = run(MOUNT, &[]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("usage: ") && out.contains("<cgroup-mount-point>"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("cgroupv2");
    let t = target.to_str().unwrap();
    let (code, out) = run(MOUNT, &[t]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("Mounted cgroupv2 filesystem at {t}")),
        "{out}"
    );
    assert!(target.join("cgroup.controllers").exists());
    let (code, out) = run(MOUNT, &[t]);
    assert_eq!(code, 0);
    assert!(out.contains("already mounted"), "{out}");
    let c = std::ffi::CString::new(t).unwrap();
    // SAFETY: a valid C string; the sandbox's own mount namespace.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
}

#[test]
fn cilium_sysctlfix_writes_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("sysctl.d");
    let args = [
        "--sysctl-conf-dir",
        d.to_str().unwrap(),
        "--systemd-sysctl-unit=",
    ];
    let (code, out) = run(SYSCTLFIX, &args);
    assert_eq!(code, 0);
    assert!(out.starts_with("sysctl config created/updated"), "{out}");
    let body = std::fs::read_to_string(d.join("99-zzz-override_cilium.conf")).unwrap();
    assert!(body.contains("-net.ipv4.conf.lxc*.rp_filter = 0"), "{body}");
    assert!(
        body.contains("\nnet.ipv4.conf.all.rp_filter = 0\n"),
        "{body}"
    );
    let (code, out) = run(SYSCTLFIX, &args);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "sysctl config up-to-date, nothing to do");
}
