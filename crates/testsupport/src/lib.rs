//! A world of its own for each kernel test.
//!
//! [`Sandbox::enter`] moves the calling thread into a fresh network and mount
//! namespace, makes every mount private (nothing propagates to the host),
//! mounts a bpffs and gives temp dirs for state and run files. Processes the
//! test spawns from this thread inherit the namespaces. When the test ends,
//! the guard kills the processes it was handed and unmounts; the kernel
//! frees the namespaces with their devices, routes and pins once the last
//! user is gone, also when the test panicked.

pub mod client;
pub mod cluster;
pub mod fakes;
pub mod kube;
pub mod node;
pub mod policies;
pub mod traffic;

/// The cluster's addressing plan and node layout, shared with cilium-lab.
pub use topology;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Child;

pub struct Sandbox {
    dir: tempfile::TempDir,
    children: Vec<Child>,
    cgroup: std::cell::OnceCell<PathBuf>,
}

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    }
}

/// Mounts a fresh filesystem of type `fstype` (bpf, cgroup2) at `target`,
/// in this thread's mount namespace.
pub fn mount_fs(fstype: &std::ffi::CStr, target: &Path) -> io::Result<()> {
    let t = cstr(target);
    // SAFETY: valid NUL-terminated strings.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            t.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    check(rc, &format!("mounting {fstype:?} at {}", target.display()))
}

fn cstr(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

impl Sandbox {
    /// Enters new network and mount namespaces on this thread.
    pub fn enter() -> Self {
        Self::try_enter().expect("creating test namespaces (tests must run as root)")
    }

    pub fn try_enter() -> io::Result<Self> {
        // SAFETY: plain syscalls on the current thread with valid arguments.
        unsafe {
            check(
                libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS),
                "unshare",
            )?;
            check(
                libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ),
                "making mounts private",
            )?;
        }
        let dir = tempfile::Builder::new().prefix("cilium-test-").tempdir()?;
        for sub in ["bpffs", "run", "state", "config"] {
            std::fs::create_dir_all(dir.path().join(sub))?;
        }
        mount_fs(c"bpf", &dir.path().join("bpffs"))?;
        let status = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()?;
        if !status.success() {
            return Err(io::Error::other("ip link set lo up failed"));
        }
        Ok(Self {
            dir,
            children: Vec::new(),
            cgroup: std::cell::OnceCell::new(),
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    /// The sandbox's private bpffs mount.
    pub fn bpffs(&self) -> PathBuf {
        self.dir.path().join("bpffs")
    }
    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }
    /// Backs the run dir with a tmpfs of its own, as a node's `/var/run`
    /// (where the agent keeps its state) is: a benchmark of the writes
    /// there then pays what a node pays, not the journal of the disk under
    /// the temp dir. Unmounted on drop.
    pub fn run_dir_on_tmpfs(&self) -> io::Result<()> {
        mount_fs(c"tmpfs", &self.run_dir())
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    /// Where tests keep pod network namespace files (unmounted on drop).
    pub fn netns_dir(&self) -> PathBuf {
        let d = self.dir.path().join("netns");
        let _ = std::fs::create_dir_all(&d);
        d
    }
    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// The sandbox's own cgroup v2 subtree, for socket LB: cgroup2 is
    /// mounted at `<sandbox>/cgroup2` (in the private mount namespace) and
    /// the subtree is a fresh child of its root, so programs attached there
    /// see only processes the test puts in it.
    pub fn cgroup(&self) -> PathBuf {
        self.cgroup
            .get_or_init(|| {
                let mnt = self.dir.path().join("cgroup2");
                std::fs::create_dir_all(&mnt).expect("cgroup2 mount point");
                mount_fs(c"cgroup2", &mnt).expect("cgroup v2");
                let name = self.dir.path().file_name().expect("temp dir name");
                let sub = mnt.join(name);
                std::fs::create_dir_all(&sub).expect("creating the test cgroup");
                sub
            })
            .clone()
    }

    /// Hands a spawned process to the sandbox, which kills it on drop.
    pub fn adopt(&mut self, child: Child) -> usize {
        self.children.push(child);
        self.children.len() - 1
    }

    pub fn child(&mut self, index: usize) -> &mut Child {
        &mut self.children[index]
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(sub) = self.cgroup.get() {
            remove_cgroup(sub);
            let p = cstr(&self.dir.path().join("cgroup2"));
            // SAFETY: valid path.
            unsafe {
                libc::umount2(p.as_ptr(), libc::MNT_DETACH);
            }
        }
        // Namespaces pinned on files (pods', machines', the agents' health
        // endpoints') are bind mounts; unmount them so the dir can go.
        unmount_pinned_files(self.dir.path());
        for dir in [self.bpffs(), self.run_dir()] {
            let p = cstr(&dir);
            // SAFETY: valid path; failure (not a mount point) only leaves a
            // mount in a namespace that dies with this thread.
            unsafe {
                libc::umount2(p.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// Unmounts every file under `dir` that is a mount point (a pinned
/// namespace), without descending into other filesystems (bpffs, cgroup2).
fn unmount_pinned_files(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(here) = std::fs::symlink_metadata(dir) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.dev() != here.dev() {
            if meta.is_file() {
                let p = cstr(&e.path());
                // SAFETY: valid path; a non-mount just fails.
                unsafe {
                    libc::umount2(p.as_ptr(), libc::MNT_DETACH);
                }
            }
        } else if meta.is_dir() {
            unmount_pinned_files(&e.path());
        }
    }
}

/// Removes a cgroup and the cgroups below it, once their processes are
/// gone (killed ones take a moment to leave).
fn remove_cgroup(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path());
            }
        }
    }
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => return,
        }
    }
}

/// Makes `cmd` start inside the cgroup at `cgroup`.
pub fn in_cgroup(cmd: &mut std::process::Command, cgroup: &Path) {
    use std::os::unix::process::CommandExt;
    let procs = cstr(&cgroup.join("cgroup.procs"));
    // SAFETY: only async-signal-safe syscalls in the forked child; the path
    // was allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            let err = io::Error::last_os_error();
            libc::close(fd);
            if ok {
                Ok(())
            } else {
                Err(err)
            }
        });
    }
}

/// Path of a workspace binary built by cargo.
/// Works from an integration test (`target/<profile>/deps/<test>`) and from
/// a workspace binary beside it (`target/<profile>/<bin>`).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("own executable path");
    let dir = exe.parent().expect("executable dir");
    let profile_dir = if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().expect("target profile dir")
    } else {
        dir
    };
    if name == "cilium-cni" {
        // the build that ships (scripts/build-cni.sh), as nodes run it
        return images::cilium_cni(profile_dir);
    }
    profile_dir.join(name)
}

/// Runs the workspace's `cilium` CLI against an agent socket and a bpffs.
pub fn cilium(socket: &Path, bpffs: &Path, args: &[&str]) -> std::process::Output {
    let cli = bin("cilium");
    assert!(
        cli.exists(),
        "{} missing: run the workspace tests (cargo test --workspace)",
        cli.display()
    );
    std::process::Command::new(cli)
        .arg("-H")
        .arg(format!("unix://{}", socket.display()))
        .arg("--bpf-root")
        .arg(bpffs)
        .args(args)
        .output()
        .expect("run cilium")
}

/// Client URL of the etcd [`start_etcd`] runs inside a sandbox.
pub const ETCD_URL: &str = "http://127.0.0.1:2379";

/// Starts Debian's etcd in the sandbox with its data in `data`. It listens
/// on every address of the sandbox, so nodes plugged into a bridge there
/// reach it too; [`ETCD_URL`] is its loopback address.
pub fn start_etcd(data: &Path) -> Child {
    std::process::Command::new("etcd")
        .arg("--data-dir")
        .arg(data)
        .args([
            "--name=test",
            "--listen-client-urls=http://0.0.0.0:2379",
            "--advertise-client-urls=http://127.0.0.1:2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--initial-advertise-peer-urls=http://127.0.0.1:2380",
            "--initial-cluster=test=http://127.0.0.1:2380",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start etcd (apt install etcd-server)")
}
