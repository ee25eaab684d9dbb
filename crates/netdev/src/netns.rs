//! Network namespaces by path: entering them on the calling thread, and
//! creating persistent ones (a bind mount of the namespace file), which is
//! how pods exist in the lab and the tests.

use crate::Error;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

/// An open handle on a network namespace.
pub struct NetNs {
    file: File,
    path: PathBuf,
}

impl NetNs {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = File::open(path).map_err(|e| Error::Netns {
            op: "opening",
            path: path.to_owned(),
            source: e,
        })?;
        Ok(Self {
            file,
            path: path.to_owned(),
        })
    }

    /// The namespace the calling thread is in now.
    pub fn current() -> Result<Self, Error> {
        Self::open(Path::new("/proc/thread-self/ns/net"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Moves the calling thread into this namespace.
    pub fn enter(&self) -> Result<(), Error> {
        // SAFETY: setns on a valid namespace fd affects only this thread.
        if unsafe { libc::setns(self.file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(Error::Netns {
                op: "entering",
                path: self.path.clone(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Runs `f` with the calling thread inside this namespace, then returns.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> Result<T, Error> {
        let home = NetNs::current()?;
        self.enter()?;
        let out = f();
        home.enter()?;
        Ok(out)
    }
}

/// Creates a new, empty network namespace kept alive by a bind mount at
/// `path` (like `ip netns add`), with its loopback up.
pub fn create(path: &Path) -> Result<(), Error> {
    let err = |op: &'static str| {
        let path = path.to_owned();
        move |source| Error::Netns { op, path, source }
    };
    File::create(path).map_err(err("creating"))?;
    let target = path.to_owned();
    // A helper thread unshares so the caller's own namespace is untouched.
    let result = std::thread::spawn(move || -> std::io::Result<()> {
        // SAFETY: plain syscalls on this short-lived thread.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        let src = std::ffi::CString::new("/proc/thread-self/ns/net").expect("no NUL");
        let dst = std::ffi::CString::new(target.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: valid C strings; a bind mount of our namespace file.
        if unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        loopback_up()
    })
    .join()
    .expect("netns helper thread panicked");
    if let Err(e) = result {
        let _ = std::fs::remove_file(path);
        return Err(err("creating")(e));
    }
    Ok(())
}

/// Unmounts and removes a namespace made by `create`; a missing one is fine.
pub fn remove(path: &Path) -> Result<(), Error> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::Netns {
            op: "removing",
            path: path.to_owned(),
            source: std::io::ErrorKind::InvalidInput.into(),
        })?;
    // SAFETY: valid C string; a failed detach of a non-mount is harmless.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::Netns {
            op: "removing",
            path: path.to_owned(),
            source: e,
        }),
    }
}

/// Removes every namespace pinned in `dir` (a pin is a mount, which keeps
/// its directory from being removed); the pins that could not go, with
/// why. A missing `dir` has none.
pub fn remove_all_in(dir: &Path) -> Vec<Error> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|pin| remove(&pin.path()).err())
        .collect()
}

/// Brings `lo` up with an ioctl: the fresh namespace has no netlink handle yet.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: an ifreq we own, passed to ioctls on a socket we own and close.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut rc = libc::ioctl(sock, libc::SIOCGIFFLAGS as libc::Ioctl, &mut req);
        if rc == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            rc = libc::ioctl(sock, libc::SIOCSIFFLAGS as libc::Ioctl, &req);
        }
        let err = std::io::Error::last_os_error();
        libc::close(sock);
        if rc != 0 {
            return Err(err);
        }
    }
    Ok(())
}

/// One TCP request/response between two namespaces, to show that they can
/// talk: a listener in `server` answers `pong to <peer>: <request>` to one
/// client in `client`. Returns the client's local port and the reply.
/// Taking opened namespaces lets the two live in different mount namespaces
/// (the lab's nodes each mount their pods' namespaces privately).
pub fn tcp_request(
    server: NetNs,
    client: NetNs,
    server_ip: impl Into<std::net::IpAddr>,
    port: u16,
    request: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let server_ip = server_ip.into();
    let any: std::net::IpAddr = if server_ip.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    let timeout = std::time::Duration::from_secs(5);
    let enter = |ns: &NetNs| ns.enter().map_err(std::io::Error::other);
    let (tx, rx) = std::sync::mpsc::channel();
    let client_gone = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gone = client_gone.clone();
    let srv = std::thread::spawn(move || -> std::io::Result<()> {
        enter(&server)?;
        let listener = TcpListener::bind((any, port))?;
        let _ = tx.send(());
        // a client that never arrives (a dropped SYN) must not hold the
        // caller: accept polls until the client gave up
        listener.set_nonblocking(true)?;
        let (mut s, peer) = loop {
            match listener.accept() {
                Ok(conn) => break conn,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if gone.load(std::sync::atomic::Ordering::SeqCst) {
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => return Err(e),
            }
        };
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(timeout))?;
        let mut req = Vec::new();
        s.read_to_end(&mut req)?;
        let mut reply = format!("pong to {peer}: ").into_bytes();
        reply.extend_from_slice(&req);
        s.write_all(&reply)
    });
    rx.recv_timeout(timeout)
        .map_err(|_| std::io::Error::other("server did not start"))?;
    let request = request.to_vec();
    let cli = std::thread::spawn(move || -> std::io::Result<(u16, Vec<u8>)> {
        enter(&client)?;
        let mut s = TcpStream::connect_timeout(&(server_ip, port).into(), timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.write_all(&request)?;
        s.shutdown(Shutdown::Write)?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply)?;
        Ok((s.local_addr()?.port(), reply))
    });
    let out = cli
        .join()
        .map_err(|_| std::io::Error::other("client thread panicked"))?;
    client_gone.store(true, std::sync::atomic::Ordering::SeqCst);
    let served = srv
        .join()
        .map_err(|_| std::io::Error::other("server thread panicked"))?;
    // the client's failure says more than the server's wait for it
    let out = out?;
    served?;
    Ok(out)
}
