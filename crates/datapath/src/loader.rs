//! Creating or reopening the pinned global maps and loading programs.
//!
//! Reopening keeps map contents across agent restarts. A pinned map whose
//! type, sizes or flags no longer match the object is moved aside, the object
//! is loaded with a fresh map, and the old pin is removed only once the load
//! succeeded (Cilium's "bpffs migration").

use crate::attach::{attach_pinned, remove_links, AttachMode, Hook};
use crate::objects::{self, Object};
use crate::program_pins::ProgramPins;
use crate::sys::{self, MapMeta};
use crate::Error;
use aya::programs::SchedClassifier;
use aya::{Ebpf, EbpfLoader};
use aya_obj::maps::PinningType;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

const BPF_MAP_TYPE_PERF_EVENT_ARRAY: u32 = 4;
const MIGRATING_SUFFIX: &str = ":migrating";

/// The node's map set: the sizes of the maps whose capacity is a
/// cilium-config knob, and whether the IPv6 maps exist (the dual-stack
/// builds of the objects, see [`objects::Family`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSizes {
    pub ct_tcp: u32,
    pub ct_any: u32,
    pub frag: u32,
    pub ipv6: bool,
}

impl Default for MapSizes {
    fn default() -> Self {
        Self {
            ct_tcp: abi::maps::CT_MAP_SIZE_TCP,
            ct_any: abi::maps::CT_MAP_SIZE_ANY,
            frag: abi::maps::FRAG_MAP_SIZE,
            ipv6: false,
        }
    }
}

impl MapSizes {
    /// `cilium_snat_v4_external`'s size: bpf-nat-global-max at its default
    /// (2/3 of the default CT sizes), or 2/3 of smaller CT maps when it
    /// would exceed them, as Cilium sizes it (`checkMapSizeLimits`).
    pub fn nat(&self) -> u32 {
        let ct = u64::from(self.ct_tcp) + u64::from(self.ct_any);
        if u64::from(abi::maps::NAT_MAP_SIZE) > ct {
            (ct * 2 / 3) as u32
        } else {
            abi::maps::NAT_MAP_SIZE
        }
    }

    /// Each sized map's max entries, for [`load_object`]; the IPv6 maps
    /// take the IPv4 ones' sizes, as in 1.16.
    pub fn overrides(&self) -> [(&'static str, u32); 8] {
        [
            (abi::maps::CT4_GLOBAL, self.ct_tcp),
            (abi::maps::CT_ANY4_GLOBAL, self.ct_any),
            (abi::maps::SNAT4_EXTERNAL, self.nat()),
            (abi::maps::IPV4_FRAG_DATAGRAMS, self.frag),
            (abi::maps::CT6_GLOBAL, self.ct_tcp),
            (abi::maps::CT_ANY6_GLOBAL, self.ct_any),
            (abi::maps::SNAT6_EXTERNAL, self.nat()),
            (abi::maps::IPV6_FRAG_DATAGRAMS, self.frag),
        ]
    }

    /// The objects this node runs.
    pub fn objects(&self) -> objects::Family {
        objects::Family::of(self.ipv6)
    }
}

/// The loaded datapath of one node: global maps pinned, programs verified.
pub struct Datapath {
    bpffs_root: PathBuf,
    mode: AttachMode,
    lxc: Ebpf,
    host: Ebpf,
    overlay: Ebpf,
    /// Which builds `lxc`, `host` and `overlay` are.
    objects: objects::Family,
    /// Programs an earlier start verified against these very maps
    /// (`program_pins`), by name: used instead of the objects' own.
    reused: HashMap<&'static str, SchedClassifier>,
}

const FROM_CONTAINER: &str = "cil_from_container";
const FROM_HOST: &str = "cil_from_host";
const FROM_NETDEV: &str = "cil_from_netdev";
const TO_NETDEV: &str = "cil_to_netdev";
const FROM_OVERLAY: &str = "cil_from_overlay";
const TO_OVERLAY: &str = "cil_to_overlay";
/// An endpoint's ingress, tail-called through `cilium_call_policy`.
pub const LXC_POLICY: &str = "cil_lxc_policy";

/// The objects a [`Datapath`] holds.
#[derive(Clone, Copy)]
enum Which {
    Lxc,
    Host,
    Overlay,
}

impl Datapath {
    /// Creates or reopens every global map under `<bpffs_root>/tc/globals`
    /// and loads the endpoint and host programs through the verifier.
    pub fn init(bpffs_root: &Path, sizes: &MapSizes) -> Result<Self, Error> {
        let globals = bpffs_root.join(abi::maps::GLOBALS_DIR);
        // Objects one after the other (the first creates and pins the
        // maps the others reuse), then the verifier on every program at
        // once: it is most of an agent's start.
        let objects = sizes.objects();
        let mut lxc = load_object(objects.lxc, &globals, &sizes.overrides())?;
        let mut host = load_object(objects.host, &globals, &sizes.overrides())?;
        let mut overlay = load_object(objects.overlay, &globals, &sizes.overrides())?;
        // what a previous start verified against these maps is run as it
        // is; the rest goes through the verifier and is kept for the next
        let mut reused = HashMap::new();
        let verify = |ebpf: &mut Ebpf, object: Object, programs: [&'static str; 2]| {
            let pins = ProgramPins::of(bpffs_root, &globals, object, ebpf);
            let mut found = Vec::new();
            for p in programs {
                if let Some(prog) = pins.reuse(p) {
                    found.push((p, prog));
                    continue;
                }
                pins.keep(p, load_classifier(ebpf, object.name, p)?);
            }
            Ok::<_, Error>(found)
        };
        std::thread::scope(|s| {
            let host = s.spawn(|| verify(&mut host, objects.host, [FROM_HOST, FROM_NETDEV]));
            let overlay =
                s.spawn(|| verify(&mut overlay, objects.overlay, [FROM_OVERLAY, TO_OVERLAY]));
            let lxc = verify(&mut lxc, objects.lxc, [FROM_CONTAINER, LXC_POLICY]);
            let joined = |h: std::thread::ScopedJoinHandle<'_, Result<_, Error>>| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Map {
                        map: "programs".into(),
                        message: "a verifier thread panicked".into(),
                    })
                })
            };
            for found in [lxc, joined(host), joined(overlay)] {
                reused.extend(found?);
            }
            Ok::<_, Error>(())
        })?;
        Ok(Self {
            bpffs_root: bpffs_root.to_owned(),
            mode: AttachMode::Tcx,
            lxc,
            host,
            overlay,
            objects,
            reused,
        })
    }

    /// Program `name` of object `which`: the one reused from an earlier
    /// start, or the object's own (verified now if it was not yet).
    fn classifier(&mut self, which: Which, name: &str) -> Result<&mut SchedClassifier, Error> {
        if self.reused.contains_key(name) {
            return Ok(self.reused.get_mut(name).expect("reused program"));
        }
        let (ebpf, object) = match which {
            Which::Lxc => (&mut self.lxc, self.objects.lxc),
            Which::Host => (&mut self.host, self.objects.host),
            Which::Overlay => (&mut self.overlay, self.objects.overlay),
        };
        load_classifier(ebpf, object.name, name)
    }

    /// Prefer tcx links (the default) or legacy tc filters (`enable-tcx=false`).
    pub fn set_attach_mode(&mut self, mode: AttachMode) {
        self.mode = mode;
    }

    pub fn bpffs_root(&self) -> &Path {
        &self.bpffs_root
    }

    /// Names of the maps this datapath pinned.
    pub fn map_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .lxc
            .maps()
            .chain(self.host.maps())
            .chain(self.overlay.maps())
            .map(|(name, _)| name.to_owned())
            .filter(|n| n.starts_with("cilium_"))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// `<bpffs>/cilium/endpoints/<id>`; its `links/` holds the tcx links.
    fn endpoint_dir(&self, endpoint_id: u16) -> PathBuf {
        self.bpffs_root
            .join("cilium/endpoints")
            .join(endpoint_id.to_string())
    }

    /// Attaches the endpoint program to a pod's host-side veth. Only its
    /// ingress needs one (as in Cilium without endpoint routes): traffic
    /// into the pod is delivered by cil_from_container or cil_from_host.
    /// With tcx, a tc filter left by a fast attach is removed once the link
    /// exists: the tcx program runs first and ends processing, so the
    /// filter is inert from that moment.
    pub fn attach_endpoint(&mut self, endpoint_id: u16, ifname: &str) -> Result<AttachMode, Error> {
        let mode = self.attach_endpoint_as(endpoint_id, ifname, self.mode)?;
        if mode == AttachMode::Tcx {
            crate::attach::detach_tc(ifname, Hook::Ingress);
        }
        Ok(mode)
    }

    /// Attaches with `mode` regardless of the configured one.
    pub fn attach_endpoint_as(
        &mut self,
        endpoint_id: u16,
        ifname: &str,
        mode: AttachMode,
    ) -> Result<AttachMode, Error> {
        let links = self.endpoint_dir(endpoint_id).join("links");
        let prog = self.classifier(Which::Lxc, FROM_CONTAINER)?;
        attach_pinned(prog, FROM_CONTAINER, ifname, Hook::Ingress, &links, mode)
    }

    /// Puts the endpoint's ingress program into its `cilium_call_policy`
    /// slot, which local delivery tail-calls.
    pub fn install_policy_program(&mut self, endpoint_id: u16) -> Result<(), Error> {
        let globals = self.bpffs_root.join(abi::maps::GLOBALS_DIR);
        let prog = self.classifier(Which::Lxc, LXC_POLICY)?;
        install_tail_call(&globals, prog, endpoint_id)
    }

    /// Empties the endpoint's `cilium_call_policy` slot: its traffic drops
    /// as a missed tail call from then on.
    pub fn remove_policy_program(&self, endpoint_id: u16) {
        if let Ok(map) = crate::maps::CallPolicy::open(&self.bpffs_root) {
            let _ = map.remove(endpoint_id);
        }
    }

    /// Drops the endpoint's pinned links (detaching its programs).
    pub fn detach_endpoint(&self, endpoint_id: u16) {
        remove_links(&self.endpoint_dir(endpoint_id));
    }

    /// `<bpffs>/cilium/devices/<ifname>/links`.
    fn device_links(&self, ifname: &str) -> PathBuf {
        self.bpffs_root
            .join("cilium/devices")
            .join(ifname.replace('.', "-"))
            .join("links")
    }

    /// Attaches `cil_from_host` to the egress of cilium_host.
    pub fn attach_host_device(&mut self, ifname: &str) -> Result<AttachMode, Error> {
        let links = self.device_links(ifname);
        let mode = self.mode;
        let prog = self.classifier(Which::Host, FROM_HOST)?;
        attach_pinned(prog, FROM_HOST, ifname, Hook::Egress, &links, mode)
    }

    /// Attaches `cil_from_netdev` and `cil_to_netdev` to the ingress and
    /// egress of the node's native device.
    pub fn attach_native_device(&mut self, ifname: &str) -> Result<AttachMode, Error> {
        let links = self.device_links(ifname);
        let mut mode = self.mode;
        for (symbol, hook) in [(FROM_NETDEV, Hook::Ingress), (TO_NETDEV, Hook::Egress)] {
            let configured = self.mode;
            let prog = self.classifier(Which::Host, symbol)?;
            mode = attach_pinned(prog, symbol, ifname, hook, &links, configured)?;
        }
        Ok(mode)
    }

    /// Attaches `cil_from_overlay` and `cil_to_overlay` to the ingress and
    /// egress of the tunnel device.
    pub fn attach_overlay_device(&mut self, ifname: &str) -> Result<AttachMode, Error> {
        let links = self.device_links(ifname);
        let mut mode = self.mode;
        for (symbol, hook) in [(FROM_OVERLAY, Hook::Ingress), (TO_OVERLAY, Hook::Egress)] {
            let configured = self.mode;
            let prog = self.classifier(Which::Overlay, symbol)?;
            mode = attach_pinned(prog, symbol, ifname, hook, &links, configured)?;
        }
        Ok(mode)
    }
}

/// One loader for every load of the process. aya's `EbpfLoader::new()`
/// parses the kernel's BTF (some 80-100 ms and tens of MB here, once per
/// object: most of the agent's start) for CO-RE relocations, which our
/// objects do not use. This one is made where the kernel's BTF cannot be
/// found (see `without_kernel_btf`), or else parses it once and drops it.
struct SharedLoader {
    loader: EbpfLoader<'static>,
    /// Map names a load gave a size (`map_max_entries` is never undone).
    overridden: HashSet<&'static str>,
}

static SHARED_LOADER: LazyLock<Mutex<SharedLoader>> = LazyLock::new(|| {
    let mut loader = without_kernel_btf(EbpfLoader::new);
    loader.btf(None);
    Mutex::new(SharedLoader {
        loader,
        overridden: HashSet::new(),
    })
});

/// Runs `f` on a thread of its own whose mount namespace hides
/// /sys/kernel/btf under an empty tmpfs, so aya's loader skips the
/// kernel's BTF instead of parsing it. The namespace goes with the thread.
/// Where that cannot be done (no CAP_SYS_ADMIN), `f` runs as it is.
fn without_kernel_btf<T: Send + 'static>(f: fn() -> T) -> T {
    std::thread::spawn(move || {
        // SAFETY: plain syscalls with valid arguments, on this thread's
        // own copy of the filesystem context (CLONE_NEWNS unshares it).
        let hidden = unsafe {
            libc::unshare(libc::CLONE_NEWNS) == 0
                && libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) == 0
                && libc::mount(
                    c"none".as_ptr(),
                    c"/sys/kernel/btf".as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                ) == 0
        };
        if !hidden {
            tracing::debug!(
                subsys = "datapath",
                "Parsing the kernel's BTF once (cannot hide it)"
            );
        }
        f()
    })
    .join()
    .unwrap_or_else(|_| f())
}

/// Makes the shared loader now (on a thread of its own, the agent's start
/// does other work meanwhile) rather than at the first load.
pub fn prepare() {
    LazyLock::force(&SHARED_LOADER);
}

/// Loads `obj` with its pinned-by-name maps under `pin_dir`, migrating any
/// incompatible pin first.
pub fn load_object(
    obj: Object,
    pin_dir: &Path,
    overrides: &[(&'static str, u32)],
) -> Result<Ebpf, Error> {
    std::fs::create_dir_all(pin_dir).map_err(|e| Error::io("creating", pin_dir, e))?;
    let expected = expected_pinned_maps(obj, overrides)?;
    adopt_renamed_pins(pin_dir, &expected);
    let moved = move_incompatible_pins(pin_dir, &expected)?;

    let mut shared = SHARED_LOADER.lock().unwrap_or_else(|e| e.into_inner());
    let SharedLoader { loader, overridden } = &mut *shared;
    loader.default_map_pin_directory(pin_dir);
    // the loader keeps an earlier load's sizes: each name ever given one
    // gets this load's (its override, else the object's own)
    for name in overridden.iter().copied() {
        if let Some((_, meta)) = expected.iter().find(|(n, _)| n == name) {
            loader.map_max_entries(name, meta.max_entries);
        }
    }
    for (name, size) in overrides {
        loader.map_max_entries(name, *size);
        overridden.insert(name);
    }
    let loaded = loader.load(obj.bytes);
    drop(shared);
    obj.release();
    match loaded {
        Ok(ebpf) => {
            for aside in moved {
                if let Err(e) = std::fs::remove_file(&aside) {
                    tracing::warn!(subsys = "datapath", path = %aside.display(), error = %e, "Unable to remove migrated map pin");
                }
            }
            Ok(ebpf)
        }
        Err(source) => {
            for aside in moved {
                let original =
                    PathBuf::from(aside.to_string_lossy().trim_end_matches(MIGRATING_SUFFIX));
                let _ = std::fs::rename(&aside, &original);
            }
            Err(Error::Load {
                object: obj.name,
                source: Box::new(source),
            })
        }
    }
}

/// Puts `prog` into slot `endpoint_id` of the `cilium_call_policy` pinned
/// under `globals`.
pub fn install_tail_call(
    globals: &Path,
    prog: &SchedClassifier,
    endpoint_id: u16,
) -> Result<(), Error> {
    use std::os::fd::{AsFd, AsRawFd};
    let fd = prog.fd().map_err(|e| Error::Program {
        object: objects::BPF_LXC.name,
        program: LXC_POLICY.into(),
        source: Box::new(e),
    })?;
    crate::maps::CallPolicy::open_in(globals)?.set(endpoint_id, fd.as_fd().as_raw_fd())
}

/// How often a load the verifier gave up on because a signal arrived is
/// tried (libbpf's PROG_LOAD_ATTEMPTS).
const LOAD_ATTEMPTS: usize = 5;

/// Runs `load` again while the verifier answers EAGAIN: it stops and says
/// so when the loading thread has a signal pending, which says nothing
/// about the program.
pub(crate) fn verify(
    mut load: impl FnMut() -> Result<(), aya::programs::ProgramError>,
) -> Result<(), aya::programs::ProgramError> {
    let mut attempt = 1;
    loop {
        match load() {
            Err(aya::programs::ProgramError::LoadError { io_error, .. })
                if io_error.raw_os_error() == Some(libc::EAGAIN) && attempt < LOAD_ATTEMPTS =>
            {
                attempt += 1;
            }
            done => return done,
        }
    }
}

/// Loads (verifies) a tc program of a loaded object and returns it.
pub fn load_classifier<'a>(
    ebpf: &'a mut Ebpf,
    object: &'static str,
    name: &str,
) -> Result<&'a mut SchedClassifier, Error> {
    let prog: &mut SchedClassifier = ebpf
        .program_mut(name)
        .ok_or_else(|| Error::NoProgram {
            object,
            program: name.to_owned(),
        })?
        .try_into()
        .map_err(|e| Error::Program {
            object,
            program: name.to_owned(),
            source: Box::new(e),
        })?;
    if prog.fd().is_err() {
        verify(|| prog.load()).map_err(|e| Error::Program {
            object,
            program: name.to_owned(),
            source: Box::new(e),
        })?;
    }
    Ok(prog)
}

/// Each pinned-by-name map `obj` defines, as it defines it (max entries
/// before any override).
fn object_maps(obj: Object) -> Result<Vec<(String, MapMeta)>, Error> {
    let parsed = aya_obj::Object::parse(obj.bytes).map_err(|e| Error::Parse {
        object: obj.name,
        message: format!("{e:?}"),
    })?;
    Ok(parsed
        .maps
        .iter()
        .filter(|(_, map)| map.pinning() == PinningType::ByName)
        .map(|(name, map)| {
            let meta = MapMeta {
                map_type: map.map_type(),
                key_size: map.key_size(),
                value_size: map.value_size(),
                max_entries: map.max_entries(),
                map_flags: map.map_flags(),
            };
            (name.clone(), meta)
        })
        .collect())
}

/// The definition of the global map `name` in the embedded objects: what
/// a typed handle checks the pinned map against. The objects are parsed
/// once per process.
pub(crate) fn global_map_definition(name: &str) -> Result<MapMeta, Error> {
    static DEFINED: std::sync::OnceLock<Result<Vec<(String, MapMeta)>, String>> =
        std::sync::OnceLock::new();
    let defined = DEFINED.get_or_init(|| {
        let mut all = Vec::new();
        // the dual-stack builds define every map the others do, and more
        for obj in [
            objects::BPF_LXC_V6,
            objects::BPF_HOST_V6,
            objects::BPF_OVERLAY_V6,
            objects::BPF_SOCK_V6,
        ] {
            all.extend(object_maps(obj).map_err(|e| e.to_string())?);
            obj.release();
        }
        Ok(all)
    });
    let defined = defined.as_ref().map_err(|message| Error::Map {
        map: name.to_owned(),
        message: format!("reading the datapath's map definitions: {message}"),
    })?;
    defined
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, meta)| *meta)
        .ok_or_else(|| Error::Map {
            map: name.to_owned(),
            message: "no datapath object defines it".into(),
        })
}

/// What the kernel should report for each pinned map of `obj`.
fn expected_pinned_maps(
    obj: Object,
    overrides: &[(&'static str, u32)],
) -> Result<Vec<(String, MapMeta)>, Error> {
    let cpus = sys::possible_cpus()
        .map_err(|e| Error::io("reading", "/sys/devices/system/cpu/possible", e))?
        as u32;
    let mut maps = object_maps(obj)?;
    for (name, meta) in &mut maps {
        if let Some((_, size)) = overrides.iter().find(|(n, _)| n == name) {
            meta.max_entries = *size;
        }
        if meta.map_type == BPF_MAP_TYPE_PERF_EVENT_ARRAY && meta.max_entries == 0 {
            meta.max_entries = cpus;
        }
    }
    Ok(maps)
}

/// Moves the pin of a map of ours that an earlier version pinned under
/// another name (`abi::maps::RENAMED`) to its new name, when the map there
/// has the new map's shape (so it is ours, and its contents and the
/// programs sharing it carry on). A pin of another shape, e.g. Cilium's own
/// map of that name, is left alone.
fn adopt_renamed_pins(pin_dir: &Path, expected: &[(String, MapMeta)]) {
    for (old, new) in abi::maps::RENAMED {
        let Some((_, want)) = expected.iter().find(|(n, _)| n == new) else {
            continue;
        };
        let (from, to) = (pin_dir.join(old), pin_dir.join(new));
        if to.exists() {
            continue;
        }
        let Ok(fd) = sys::obj_get(&from) else {
            continue;
        };
        match sys::map_meta(std::os::fd::AsFd::as_fd(&fd)) {
            Ok(have) if have == *want => match std::fs::rename(&from, &to) {
                Ok(()) => {
                    tracing::info!(subsys = "datapath", from = %old, to = %new, "Renamed map pin")
                }
                Err(e) => {
                    tracing::warn!(subsys = "datapath", from = %old, to = %new, error = %e, "Unable to rename map pin")
                }
            },
            _ => {
                tracing::info!(subsys = "datapath", pin = %from.display(), "Pin under a former name of ours has another shape; left alone")
            }
        }
    }
}

/// Renames pins that do not match their expected shape; returns the new paths.
fn move_incompatible_pins(
    pin_dir: &Path,
    expected: &[(String, MapMeta)],
) -> Result<Vec<PathBuf>, Error> {
    let mut moved = Vec::new();
    for (name, want) in expected {
        let path = pin_dir.join(name);
        let fd = match sys::obj_get(&path) {
            Ok(fd) => fd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("opening pinned map", &path, e)),
        };
        let have = sys::map_meta(std::os::fd::AsFd::as_fd(&fd))
            .map_err(|e| Error::io("reading map info of", &path, e))?;
        if have == *want {
            continue;
        }
        let aside = PathBuf::from(format!("{}{MIGRATING_SUFFIX}", path.display()));
        tracing::warn!(
            subsys = "datapath",
            map = %name,
            have = ?have,
            want = ?want,
            "Pinned map is incompatible with the datapath, migrating to a new map"
        );
        std::fs::rename(&path, &aside).map_err(|e| Error::io("moving aside", &path, e))?;
        moved.push(aside);
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aya::programs::ProgramError;

    fn refused(errno: i32) -> ProgramError {
        ProgramError::LoadError {
            io_error: std::io::Error::from_raw_os_error(errno),
            verifier_log: aya_obj::VerifierLog::new(String::new()),
        }
    }

    #[test]
    fn a_load_interrupted_by_a_signal_is_tried_again_and_a_refusal_is_not() {
        let mut calls = 0;
        let interrupted_twice = verify(|| {
            calls += 1;
            if calls < 3 {
                Err(refused(libc::EAGAIN))
            } else {
                Ok(())
            }
        });
        assert!(interrupted_twice.is_ok());
        assert_eq!(calls, 3);

        calls = 0;
        let always = verify(|| {
            calls += 1;
            Err(refused(libc::EAGAIN))
        });
        assert!(always.is_err());
        assert_eq!(calls, LOAD_ATTEMPTS);

        calls = 0;
        let rejected = verify(|| {
            calls += 1;
            Err(refused(libc::EACCES))
        });
        assert!(rejected.is_err());
        assert_eq!(calls, 1, "the verifier's verdict stands");
    }
}
