//! BPF_PROG_TEST_RUN harness: run a program on a crafted packet with given
//! map state, then inspect verdict, output packet and maps.

use crate::loader::{load_classifier, load_object};
use crate::map::PinnedMap;
use crate::maps::GlobalMap;
use crate::objects::Object;
use crate::Error;
use aya::programs::{TestRun, TestRunOptions};
use aya::Ebpf;
use std::path::{Path, PathBuf};

/// An object loaded for tests, its maps pinned under a test's own directory.
pub struct TestObject {
    object: Object,
    ebpf: Ebpf,
    pin_dir: PathBuf,
}

/// What one run produced.
#[derive(Debug)]
pub struct RunResult {
    pub retval: u32,
    pub packet: Vec<u8>,
    /// The skb's mark as the program left it.
    pub mark: u32,
}

/// `struct __sk_buff`'s size and where its `mark` is (after `len` and
/// `pkt_type`).
const SKB_CTX_SIZE: usize = 192;
const SKB_MARK_OFFSET: usize = 8;

impl TestObject {
    /// Loads `object`, pinning its maps in `pin_dir` (which must be on a bpffs).
    pub fn load(
        object: Object,
        pin_dir: &Path,
        overrides: &[(&'static str, u32)],
    ) -> Result<Self, Error> {
        let ebpf = load_object(object, pin_dir, overrides)?;
        Ok(Self {
            object,
            ebpf,
            pin_dir: pin_dir.to_owned(),
        })
    }

    /// The object this is.
    pub fn object(&self) -> Object {
        self.object
    }

    /// Where the object's maps are pinned.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// Opens one of the object's global maps through its typed handle
    /// (`obj.open::<maps::Lxc>()`) to seed or inspect state.
    pub fn open<M: GlobalMap>(&self) -> Result<M, Error> {
        M::open_in(&self.pin_dir)
    }

    /// Opens any map pinned in the object's directory by name, untyped
    /// (an endpoint's policy map, or a map a test looks at as bytes).
    pub fn map(&self, name: &str) -> Result<PinnedMap, Error> {
        PinnedMap::open(&self.pin_dir.join(name), name)
    }

    /// Runs the tc program `program` once on `packet`.
    pub fn run(&mut self, program: &str, packet: &[u8]) -> Result<RunResult, Error> {
        self.run_marked(program, packet, 0)
    }

    /// Runs the tc program `program` once on `packet` carrying skb->mark
    /// `mark` (what an earlier program or the stack set).
    pub fn run_marked(
        &mut self,
        program: &str,
        packet: &[u8],
        mark: u32,
    ) -> Result<RunResult, Error> {
        let object = self.object.name;
        let prog = load_classifier(&mut self.ebpf, object, program)?;
        let mut out = vec![0u8; packet.len() + 256];
        let mut ctx_in = [0u8; SKB_CTX_SIZE];
        ctx_in[SKB_MARK_OFFSET..SKB_MARK_OFFSET + 4].copy_from_slice(&mark.to_ne_bytes());
        let mut ctx = [0u8; SKB_CTX_SIZE];
        let result = prog
            .test_run(TestRunOptions {
                data_in: Some(packet),
                data_out: Some(&mut out),
                ctx_in: Some(&ctx_in),
                ctx_out: Some(&mut ctx),
                ..Default::default()
            })
            .map_err(|e| Error::Program {
                object,
                program: program.to_owned(),
                source: Box::new(e),
            })?;
        out.truncate(result.data_size_out as usize);
        let mut mark = [0u8; 4];
        mark.copy_from_slice(&ctx[SKB_MARK_OFFSET..SKB_MARK_OFFSET + 4]);
        Ok(RunResult {
            retval: result.return_value,
            packet: out,
            mark: u32::from_ne_bytes(mark),
        })
    }
}
