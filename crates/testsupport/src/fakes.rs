//! The control plane's kernel ports, in memory: one [`FakeKernel`] plays
//! every port (ipcache, endpoint datapath, LB maps, overlay routes, the
//! monitor) and records what it was told, so a test can build subsystems
//! as the agent does and check what the datapath would hold, as a normal
//! user. A port can be told to fail, to check that a refused change
//! leaves nothing behind.

use abi::endpoint::EndpointInfo;
use abi::ipcache::RemoteEndpointInfo;
use abi::lb::{Lb4Service, LbAffinityMatch};
use abi::order::Be16;
use controlplane::ports::{
    EndpointDatapath, Events, IpcacheMap, KernelError, LbMaps, NodeIdMap, NodeRoutes, PortFuture,
};
use controlplane::AgentNotify;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, MutexGuard};

/// What the fake datapath holds.
#[derive(Default)]
pub struct Held {
    /// Host-side interfaces that exist, with their index.
    pub interfaces: BTreeMap<String, u32>,
    /// Endpoints with programs attached: ID to (interface, quick step).
    pub attached: BTreeMap<u16, (String, bool)>,
    pub policy_programs: BTreeSet<u16>,
    pub policy_maps: BTreeMap<u16, policy::MapState>,
    pub prepared: BTreeSet<u16>,
    pub lxc: BTreeMap<Ipv4Addr, EndpointInfo>,
    pub lxc6: BTreeMap<std::net::Ipv6Addr, EndpointInfo>,
    pub ipcache: BTreeMap<(Ipv4Addr, u8), RemoteEndpointInfo>,
    pub ipcache6: BTreeMap<(std::net::Ipv6Addr, u8), RemoteEndpointInfo>,
    pub services: Vec<(lb::ServiceKey, Lb4Service)>,
    pub backends: BTreeMap<u32, lb::BackendEntry>,
    pub rev_nat: BTreeSet<(lb::Family, u16)>,
    pub maglev: BTreeSet<(lb::Family, u16)>,
    pub affinity: Vec<LbAffinityMatch>,
    /// Other nodes' pod CIDRs and the node each is tunnelled to.
    pub tunnel: BTreeMap<(Ipv4Addr, u8), Ipv4Addr>,
    /// cilium_node_map_v2: other nodes' addresses to their IDs.
    pub node_ids: BTreeMap<IpAddr, u16>,
    /// What `cilium monitor` was told.
    pub events: Vec<(AgentNotify, serde_json::Value)>,
    pub pod_names: BTreeMap<IpAddr, String>,
}

/// Every kernel port of the control plane, in memory.
#[derive(Default)]
pub struct FakeKernel {
    held: Mutex<Held>,
    /// Operations that fail from now on, by name (`write_policy`, ...).
    failing: Mutex<BTreeSet<&'static str>>,
}

impl FakeKernel {
    pub fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().expect("fake kernel lock")
    }

    /// Adds a host-side interface, as a CNI plugin's veth would be.
    pub fn add_interface(&self, name: &str) -> u32 {
        let mut held = self.held();
        let index = 100 + held.interfaces.len() as u32;
        *held.interfaces.entry(name.to_owned()).or_insert(index)
    }

    pub fn remove_interface(&self, name: &str) {
        self.held().interfaces.remove(name);
    }

    /// Makes `op` fail (true) or work again (false).
    pub fn fail(&self, op: &'static str, failing: bool) {
        let mut set = self.failing.lock().expect("fake kernel lock");
        if failing {
            set.insert(op);
        } else {
            set.remove(op);
        }
    }

    fn check(&self, op: &'static str) -> Result<(), KernelError> {
        if self.failing.lock().expect("fake kernel lock").contains(op) {
            return Err(KernelError::new(format!("{op} failed (injected)")));
        }
        Ok(())
    }

    /// The backends (address, port) the LB maps give a frontend.
    pub fn backends_of(&self, ip: impl Into<IpAddr>, port: u16) -> Vec<(IpAddr, u16)> {
        let ip = ip.into();
        let held = self.held();
        let mut out: Vec<(u16, IpAddr, u16)> = held
            .services
            .iter()
            .filter(|(k, _)| k.frontend() == (ip, port) && k.backend_slot() != 0)
            .filter_map(|(k, s)| {
                let (b_ip, b_port) = held.backends.get(&s.backend_id)?.address();
                Some((k.backend_slot(), b_ip, b_port))
            })
            .collect();
        out.sort();
        out.into_iter().map(|(_, ip, port)| (ip, port)).collect()
    }

    /// The notifications of one kind `cilium monitor` was given.
    pub fn events_of(&self, what: AgentNotify) -> Vec<serde_json::Value> {
        self.held()
            .events
            .iter()
            .filter(|(w, _)| *w == what)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

impl IpcacheMap for FakeKernel {
    fn write(&self, ip: IpAddr, len: u8, value: &RemoteEndpointInfo) -> Result<(), KernelError> {
        self.check("ipcache")?;
        match ip {
            IpAddr::V4(ip) => self.held().ipcache.insert((ip, len), *value),
            IpAddr::V6(ip) => self.held().ipcache6.insert((ip, len), *value),
        };
        Ok(())
    }

    fn delete(&self, ip: IpAddr, len: u8) -> Result<(), KernelError> {
        self.check("ipcache")?;
        match ip {
            IpAddr::V4(ip) => self.held().ipcache.remove(&(ip, len)),
            IpAddr::V6(ip) => self.held().ipcache6.remove(&(ip, len)),
        };
        Ok(())
    }
}

/// The program template every fake endpoint runs.
pub const TEMPLATE: &str = "fa4e";

impl EndpointDatapath for FakeKernel {
    fn template_id(&self) -> Option<String> {
        Some(TEMPLATE.into())
    }

    fn ifindex(&self, ifname: &str) -> Option<u32> {
        self.held().interfaces.get(ifname).copied()
    }

    fn attaches_in_two_steps(&self) -> bool {
        false
    }

    fn attach(&self, id: u16, ifname: &str, quick: bool) -> Result<(), KernelError> {
        self.check("attach")?;
        let mut held = self.held();
        if !held.interfaces.contains_key(ifname) {
            return Err(KernelError::new(format!("no interface {ifname}")));
        }
        held.attached.insert(id, (ifname.to_owned(), quick));
        Ok(())
    }

    fn detach(&self, id: u16) {
        self.held().attached.remove(&id);
    }

    fn install_policy_program(&self, id: u16) -> Result<(), KernelError> {
        self.check("install_policy_program")?;
        self.held().policy_programs.insert(id);
        Ok(())
    }

    fn remove_policy(&self, id: u16) {
        let mut held = self.held();
        held.policy_programs.remove(&id);
        held.policy_maps.remove(&id);
        held.prepared.remove(&id);
    }

    fn write_policy(&self, id: u16, state: &policy::MapState) -> Result<(), KernelError> {
        self.check("write_policy")?;
        self.held().policy_maps.insert(id, state.clone());
        Ok(())
    }

    fn prepare_policy(&self, id: u16) {
        self.held().prepared.insert(id);
    }

    fn write_endpoint(&self, ip: IpAddr, info: &EndpointInfo) -> Result<(), KernelError> {
        self.check("write_endpoint")?;
        match ip {
            IpAddr::V4(ip) => self.held().lxc.insert(ip, *info),
            IpAddr::V6(ip) => self.held().lxc6.insert(ip, *info),
        };
        Ok(())
    }

    fn remove_endpoint(&self, ip: IpAddr) {
        match ip {
            IpAddr::V4(ip) => self.held().lxc.remove(&ip),
            IpAddr::V6(ip) => self.held().lxc6.remove(&ip),
        };
    }
}

impl LbMaps for FakeKernel {
    fn backends(&self) -> Vec<(u32, IpAddr, u16)> {
        self.held()
            .backends
            .iter()
            .map(|(id, b)| {
                let (ip, port) = b.address();
                (*id, ip, port)
            })
            .collect()
    }

    fn ipv6(&self) -> bool {
        true
    }

    fn apply(&self, up: &lb::Update) -> Result<(), KernelError> {
        self.check("lb")?;
        let mut held = self.held();
        held.backends.extend(up.put_backends.iter().copied());
        for (k, v) in &up.put_services {
            held.services.retain(|(old, _)| old != k);
            held.services.push((*k, *v));
        }
        held.rev_nat
            .extend(up.put_rev_nat.iter().map(|(k, v)| (v.family(), k.get())));
        held.affinity.extend(up.put_affinity_match.iter().copied());
        held.maglev
            .extend(up.put_maglev.iter().map(|(f, k, _)| (*f, k.get())));
        for (f, k) in &up.del_maglev {
            held.maglev.remove(&(*f, k.get()));
        }
        held.services.retain(|(k, _)| !up.del_services.contains(k));
        for (f, k) in &up.del_rev_nat {
            held.rev_nat.remove(&(*f, k.get()));
        }
        held.affinity.retain(|a| !up.del_affinity_match.contains(a));
        for (_, id) in &up.del_backends {
            held.backends.remove(id);
        }
        Ok(())
    }

    fn keys(&self) -> Result<lb::MapKeys, KernelError> {
        let held = self.held();
        Ok(lb::MapKeys {
            services: held.services.iter().map(|(k, _)| *k).collect(),
            rev_nat: held
                .rev_nat
                .iter()
                .map(|(f, id)| (*f, Be16::new(*id)))
                .collect(),
            maglev: held
                .maglev
                .iter()
                .map(|(f, id)| (*f, Be16::new(*id)))
                .collect(),
            affinity_match: held.affinity.clone(),
            backends: held
                .backends
                .iter()
                .map(|(id, b)| (b.family(), *id))
                .collect(),
        })
    }
}

impl NodeRoutes for FakeKernel {
    fn install(
        &self,
        cidr: (Ipv4Addr, u8),
        node_ip: Ipv4Addr,
    ) -> PortFuture<'_, Result<(), KernelError>> {
        Box::pin(async move {
            self.check("routes")?;
            self.held().tunnel.insert(cidr, node_ip);
            Ok(())
        })
    }

    fn withdraw(&self, cidr: (Ipv4Addr, u8), _node_ip: Ipv4Addr) -> PortFuture<'_, ()> {
        Box::pin(async move {
            self.held().tunnel.remove(&cidr);
        })
    }
}

impl NodeIdMap for FakeKernel {
    fn write(&self, ip: IpAddr, id: u16) -> Result<(), KernelError> {
        self.check("node_ids")?;
        self.held().node_ids.insert(ip, id);
        Ok(())
    }

    fn delete(&self, ip: IpAddr) -> Result<(), KernelError> {
        self.held().node_ids.remove(&ip);
        Ok(())
    }

    fn entries(&self) -> Result<Vec<(IpAddr, u16)>, KernelError> {
        Ok(self
            .held()
            .node_ids
            .iter()
            .map(|(ip, id)| (*ip, *id))
            .collect())
    }
}

impl Events for FakeKernel {
    fn agent(&self, what: AgentNotify, body: serde_json::Value) {
        self.held().events.push((what, body));
    }

    fn name_pod(&self, ip: IpAddr, namespace: &str, pod: &str) {
        self.held()
            .pod_names
            .insert(ip, format!("{namespace}/{pod}"));
    }

    fn forget_pod(&self, ip: IpAddr) {
        self.held().pod_names.remove(&ip);
    }
}
