//! The userspace ipcache: which identity each address or prefix has and who
//! said so. Every change is written through to cilium_ipcache.

use abi::ipcache::{IpcacheKey, RemoteEndpointInfo};
use datapath::PinnedMap;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Mutex;

/// Where an entry came from (Cilium's `source.Source` names).
pub const SOURCE_LOCAL: &str = "local";
pub const SOURCE_GENERATED: &str = "generated";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub identity: u32,
    pub source: &'static str,
}

pub struct IpCache {
    bpf_root: PathBuf,
    entries: Mutex<BTreeMap<(Ipv4Addr, u8), Entry>>,
}

impl IpCache {
    pub fn new(bpf_root: PathBuf) -> Self {
        Self {
            bpf_root,
            entries: Mutex::default(),
        }
    }

    pub fn upsert(&self, ip: Ipv4Addr, len: u8, entry: Entry) -> Result<(), datapath::Error> {
        let map = PinnedMap::open_global(&self.bpf_root, abi::maps::IPCACHE)?;
        let value = RemoteEndpointInfo {
            sec_identity: entry.identity,
            ..Default::default()
        };
        map.put(&IpcacheKey::v4(ip, len), &value)?;
        self.entries
            .lock()
            .expect("ipcache lock")
            .insert((ip, len), entry);
        Ok(())
    }

    pub fn remove(&self, ip: Ipv4Addr, len: u8) -> Result<(), datapath::Error> {
        let map = PinnedMap::open_global(&self.bpf_root, abi::maps::IPCACHE)?;
        map.remove(&IpcacheKey::v4(ip, len))?;
        self.entries
            .lock()
            .expect("ipcache lock")
            .remove(&(ip, len));
        Ok(())
    }

    pub fn list(&self) -> Vec<((Ipv4Addr, u8), Entry)> {
        let entries = self.entries.lock().expect("ipcache lock");
        entries.iter().map(|(k, v)| (*k, v.clone())).collect()
    }
}
