//! A client process for socket-level tests: the socket calls must come from
//! a process placed in a cgroup (socket LB attaches to cgroups), so this
//! runs a small Python program rather than a thread of the test.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

/// Connects (tcp) or sends unconnected datagrams (udp) `count` times and
/// prints, per attempt, `peer=<ip>:<port> reply=<line>` with the peer as
/// getpeername()/recvfrom() report it, or `error=<errno name>`.
const PROGRAM: &str = r#"
import errno, socket, sys
proto, ip, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for _ in range(count):
    try:
        if proto == "tcp":
            s = socket.create_connection((ip, port), timeout=3)
            peer = s.getpeername()
            s.sendall(b"hello\n")
            reply = s.makefile().readline().strip()
        else:
            s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(3)
            s.sendto(b"hello\n", (ip, port))
            data, peer = s.recvfrom(1500)
            reply = data.decode().strip()
        print(f"peer={peer[0]}:{peer[1]} reply={reply}", flush=True)
        s.close()
    except OSError as e:
        print(f"error={errno.errorcode.get(e.errno, e.errno)}", flush=True)
"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

/// Where the client process runs.
#[derive(Default)]
pub struct Placement<'a> {
    /// Network namespace file; None = the caller's.
    pub netns: Option<&'a Path>,
    /// cgroup v2 directory; None = the caller's.
    pub cgroup: Option<&'a Path>,
}

/// Runs the client and returns its lines.
pub fn run(
    at: Placement<'_>,
    proto: Proto,
    ip: impl Into<IpAddr>,
    port: u16,
    count: u32,
) -> Vec<String> {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(PROGRAM).args([
        match proto {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        },
        &ip.into().to_string(),
        &port.to_string(),
        &count.to_string(),
    ]);
    if let Some(ns) = at.netns {
        crate::node::in_netns(&mut cmd, ns);
    }
    if let Some(cg) = at.cgroup {
        crate::in_cgroup(&mut cmd, cg);
    }
    let out = cmd
        .output()
        .expect("running python3 (scripts/install.sh installs it)");
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}
