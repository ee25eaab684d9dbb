//! The userspace ipcache: which identity each address or prefix has, which
//! node hosts it, and who said so. Every change is written through to
//! cilium_ipcache.

use crate::map_events::Action;
use crate::ports::{IpcacheMap, KernelError};
use abi::ipcache::RemoteEndpointInfo;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

/// Where an entry came from (Cilium's `source.Source`). The order is
/// which may overwrite which: what this node knows first-hand beats what
/// other nodes published, which beats defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Generated,
    /// Another node's endpoint, from its CiliumEndpoint.
    CustomResource,
    Kvstore,
    Local,
}

impl Source {
    /// Cilium's name, as `cilium ip list` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Generated => "generated",
            Source::CustomResource => "custom-resource",
            Source::Kvstore => "kvstore",
            Source::Local => "local",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub identity: u32,
    pub source: Source,
    /// The node that hosts the address, for addresses behind the overlay.
    pub tunnel_endpoint: Option<Ipv4Addr>,
}

impl Entry {
    pub fn new(identity: u32, source: Source) -> Self {
        Self {
            identity,
            source,
            tunnel_endpoint: None,
        }
    }

    /// The entry as cilium_ipcache holds it.
    pub fn value(&self) -> RemoteEndpointInfo {
        RemoteEndpointInfo {
            sec_identity: self.identity,
            tunnel_endpoint: self.tunnel_endpoint.unwrap_or(Ipv4Addr::UNSPECIFIED).into(),
            ..Default::default()
        }
    }

    pub fn behind(self, node: Ipv4Addr) -> Self {
        Self {
            tunnel_endpoint: Some(node),
            ..self
        }
    }
}

pub struct IpCache {
    map: Arc<dyn IpcacheMap>,
    entries: Mutex<BTreeMap<(IpAddr, u8), Entry>>,
    events: crate::map_events::MapEvents,
}

impl IpCache {
    pub fn new(map: Arc<dyn IpcacheMap>) -> Self {
        Self {
            map,
            entries: Mutex::default(),
            events: Default::default(),
        }
    }

    /// Writes an entry unless one from a stronger source holds the prefix
    /// (of either family); returns whether it was written.
    pub fn upsert(
        &self,
        ip: impl Into<IpAddr>,
        len: u8,
        entry: Entry,
    ) -> Result<bool, KernelError> {
        let ip = ip.into();
        let mut entries = self.entries.lock().expect("ipcache lock");
        if let Some(old) = entries.get(&(ip, len)) {
            if old.source > entry.source {
                return Ok(false);
            }
        }
        let value = entry.value();
        let written = self.map.write(ip, len, &value);
        self.events.record(
            Action::Update,
            format!("{ip}/{len}"),
            value.to_string(),
            written.as_ref().err().map(|e| e.to_string()),
        );
        written?;
        entries.insert((ip, len), entry);
        Ok(true)
    }

    /// Removes the prefix if `source` is the one that wrote it.
    pub fn remove(
        &self,
        ip: impl Into<IpAddr>,
        len: u8,
        source: Source,
    ) -> Result<(), KernelError> {
        let ip = ip.into();
        let mut entries = self.entries.lock().expect("ipcache lock");
        if entries.get(&(ip, len)).is_some_and(|e| e.source != source) {
            return Ok(());
        }
        let deleted = self.map.delete(ip, len);
        self.events.record(
            Action::Delete,
            format!("{ip}/{len}"),
            String::new(),
            deleted.as_ref().err().map(|e| e.to_string()),
        );
        deleted?;
        entries.remove(&(ip, len));
        Ok(())
    }

    pub fn get(&self, ip: impl Into<IpAddr>, len: u8) -> Option<Entry> {
        self.entries
            .lock()
            .expect("ipcache lock")
            .get(&(ip.into(), len))
            .cloned()
    }

    /// The recent writes and deletes of cilium_ipcache.
    pub fn events(&self) -> Vec<crate::map_events::MapEvent> {
        self.events.list()
    }

    pub fn list(&self) -> Vec<((IpAddr, u8), Entry)> {
        let entries = self.entries.lock().expect("ipcache lock");
        entries.iter().map(|(k, v)| (*k, v.clone())).collect()
    }
}
