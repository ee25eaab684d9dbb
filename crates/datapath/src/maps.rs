//! Named handles for the global maps the datapath pins under
//! `<bpffs>/tc/globals`: each knows its pin name (`abi::maps`), its key and
//! value types (`abi`) and, through the embedded BPF objects, the type and
//! flags it is defined with. `Lxc::open(bpffs_root)` refuses a pinned map
//! of another layout with an error naming the property that differs.
//!
//! ```no_run
//! # fn f(root: &std::path::Path) -> Result<(), datapath::Error> {
//! use abi::endpoint::{EndpointInfo, EndpointKey};
//! let lxc = datapath::maps::Lxc::open(root)?;
//! lxc.put(&EndpointKey::v4("10.0.0.1".parse().unwrap()), &EndpointInfo::host())?;
//! # Ok(()) }
//! ```

use crate::typed::{Map, PerCpuMap};
use crate::{Error, MapMeta};
use abi::auth::{AuthInfo, AuthKey};
use abi::ct::{CtEntry, Ipv4CtTuple, Ipv6CtTuple};
use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::frag::{Ipv4FragId, Ipv4FragL4Ports};
use abi::ipcache::{IpcacheKey, RemoteEndpointInfo};
use abi::lb::{
    Ipv4NatEntry, Ipv4RevnatEntry, Ipv4RevnatTuple, Ipv6NatEntry, Lb4Backend, Lb4Key,
    Lb4ReverseNat, Lb4Service, Lb6Backend, Lb6Key, Lb6ReverseNat,
};
use abi::metrics::{MetricsKey, MetricsValue};
use abi::node::{NodeKey, NodeValueV2};
use abi::ratelimit::{RatelimitKey, RatelimitMetricsKey, RatelimitMetricsValue, RatelimitValue};
use abi::runtime_config as rc;
use abi::tunnel::{TunnelKey, TunnelValue};
use abi::Be16;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// What every named global map handle offers beyond its typed accessors:
/// generic code (status tables, flush commands) works over any of them.
pub trait GlobalMap: Sized {
    /// The pin name, e.g. `cilium_lxc`.
    const NAME: &'static str;
    /// Opens the map pinned in `pin_dir` (a test object's own directory).
    fn open_in(pin_dir: &Path) -> Result<Self, Error>;
    fn max_entries(&self) -> u32;
    /// Deletes every entry; returns how many it deleted.
    fn clear(&self) -> Result<usize, Error>;

    /// How the datapath's objects define the map (type, sizes, flags, and
    /// max entries before any size option): what `open` checks against.
    fn definition() -> Result<MapMeta, Error> {
        crate::loader::global_map_definition(Self::NAME)
    }

    /// Where the map is pinned under a bpffs root.
    fn pin_path(bpffs_root: &Path) -> PathBuf {
        crate::map::global_pin_path(bpffs_root, Self::NAME)
    }

    /// Opens the map pinned under `bpffs_root`.
    fn open(bpffs_root: &Path) -> Result<Self, Error> {
        Self::open_in(&bpffs_root.join(abi::maps::GLOBALS_DIR))
    }
}

/// Defines a handle: a newtype over `Map<K, V>` (or `PerCpuMap`) whose
/// definition comes from the embedded objects. `deref` handles expose the
/// typed map; the others offer only their own methods.
macro_rules! global_map {
    ($(#[$doc:meta])* $handle:ident = $name:path, $kind:ident<$key:ty, $value:ty> $(, $deref:ident)?) => {
        $(#[$doc])*
        pub struct $handle($kind<$key, $value>);

        impl $handle {
            pub const NAME: &'static str = $name;

            /// Opens the map pinned under `bpffs_root`, checking its layout.
            pub fn open(bpffs_root: &Path) -> Result<Self, Error> {
                <Self as GlobalMap>::open(bpffs_root)
            }

            /// Opens the map pinned in `pin_dir`, checking its layout.
            pub fn open_in(pin_dir: &Path) -> Result<Self, Error> {
                <Self as GlobalMap>::open_in(pin_dir)
            }

            /// Where the map is pinned under `bpffs_root`.
            pub fn pin_path(bpffs_root: &Path) -> PathBuf {
                <Self as GlobalMap>::pin_path(bpffs_root)
            }
        }

        impl GlobalMap for $handle {
            const NAME: &'static str = $name;

            fn open_in(pin_dir: &Path) -> Result<Self, Error> {
                let def = <Self as GlobalMap>::definition()?;
                $kind::open(&pin_dir.join(Self::NAME), Self::NAME, &def).map(Self)
            }

            fn max_entries(&self) -> u32 {
                self.0.max_entries()
            }

            fn clear(&self) -> Result<usize, Error> {
                self.0.clear()
            }
        }

        $(global_map!(@$deref $handle, $kind<$key, $value>);)?
    };
    (@deref $handle:ident, $kind:ident<$key:ty, $value:ty>) => {
        impl $handle {
            /// The typed map, for code that serves several maps of one
            /// layout (the two CT maps).
            pub fn into_map(self) -> $kind<$key, $value> {
                self.0
            }
        }

        impl std::ops::Deref for $handle {
            type Target = $kind<$key, $value>;
            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }
    };
}

global_map!(
    /// `cilium_lxc`: local endpoints and host addresses by IP.
    Lxc = abi::maps::LXC, Map<EndpointKey, EndpointInfo>, deref
);
global_map!(
    /// `cilium_ipcache`: identity and tunnel endpoint by prefix.
    Ipcache = abi::maps::IPCACHE, Map<IpcacheKey, RemoteEndpointInfo>, deref
);
global_map!(
    /// `cilium_tunnel_map`: the node behind each remote pod CIDR.
    Tunnel = abi::maps::TUNNEL, Map<TunnelKey, TunnelValue>, deref
);
global_map!(
    /// `cilium_ct4_global`: TCP conntrack.
    Ct4Global = abi::maps::CT4_GLOBAL, Map<Ipv4CtTuple, CtEntry>, deref
);
global_map!(
    /// `cilium_ct_any4_global`: non-TCP conntrack.
    CtAny4Global = abi::maps::CT_ANY4_GLOBAL, Map<Ipv4CtTuple, CtEntry>, deref
);
global_map!(
    /// `cilium_ct6_global`: IPv6 TCP conntrack (dual-stack nodes).
    Ct6Global = abi::maps::CT6_GLOBAL, Map<Ipv6CtTuple, CtEntry>, deref
);
global_map!(
    /// `cilium_ct_any6_global`: IPv6 non-TCP conntrack (dual-stack nodes).
    CtAny6Global = abi::maps::CT_ANY6_GLOBAL, Map<Ipv6CtTuple, CtEntry>, deref
);
global_map!(
    /// `cilium_snat_v4_external`: NodePort NAT pairs.
    Snat4External = abi::maps::SNAT4_EXTERNAL, Map<Ipv4CtTuple, Ipv4NatEntry>, deref
);
global_map!(
    /// `cilium_snat_v6_external`: IPv6 NodePort and masquerading NAT
    /// pairs (dual-stack nodes).
    Snat6External = abi::maps::SNAT6_EXTERNAL, Map<Ipv6CtTuple, Ipv6NatEntry>, deref
);
global_map!(
    /// `cilium_metrics`: per-CPU drop and forward counters.
    Metrics = abi::maps::METRICS, PerCpuMap<MetricsKey, MetricsValue>, deref
);
global_map!(
    /// `cilium_lb4_services_v2`: frontends and their backend slots.
    Lb4Services = abi::maps::LB4_SERVICES, Map<Lb4Key, Lb4Service>, deref
);
global_map!(
    /// `cilium_lb4_backends_v3`: backends by ID.
    Lb4Backends = abi::maps::LB4_BACKENDS, Map<u32, Lb4Backend>, deref
);
global_map!(
    /// `cilium_lb4_reverse_nat`: service frontends by rev-NAT index.
    Lb4RevNat = abi::maps::LB4_REVERSE_NAT, Map<Be16, Lb4ReverseNat>, deref
);
global_map!(
    /// `cilium_lb_affinity_match`: (backend, rev-NAT) pairs of services
    /// with session affinity.
    LbAffinityMatch = abi::maps::LB_AFFINITY_MATCH, Map<abi::lb::LbAffinityMatch, u8>, deref
);
global_map!(
    /// `cilium_lb4_maglev`: each service's Maglev table (an inner array),
    /// by rev-NAT index; the value is the inner map's ID when read and a
    /// descriptor of it when written.
    Lb4Maglev = abi::maps::LB4_MAGLEV, Map<Be16, u32>, deref
);
global_map!(
    /// `cilium_lb6_services_v2` (dual-stack nodes): IPv6 frontends and
    /// their backend slots.
    Lb6Services = abi::maps::LB6_SERVICES, Map<Lb6Key, Lb4Service>, deref
);
global_map!(
    /// `cilium_lb6_backends_v3`: IPv6 backends by ID (IDs shared with IPv4).
    Lb6Backends = abi::maps::LB6_BACKENDS, Map<u32, Lb6Backend>, deref
);
global_map!(
    /// `cilium_lb6_reverse_nat`: IPv6 service frontends by rev-NAT index.
    Lb6RevNat = abi::maps::LB6_REVERSE_NAT, Map<Be16, Lb6ReverseNat>, deref
);
global_map!(
    /// `cilium_lb6_maglev`: IPv6 services' Maglev tables, as `cilium_lb4_maglev`.
    Lb6Maglev = abi::maps::LB6_MAGLEV, Map<Be16, u32>, deref
);
global_map!(
    /// `cilium_lb4_reverse_sk`: socket LB's reverse translations.
    Lb4ReverseSk = abi::maps::LB4_REVERSE_SK, Map<Ipv4RevnatTuple, Ipv4RevnatEntry>, deref
);
global_map!(
    /// `cilium_ipv4_frag_datagrams`: L4 ports of fragmented datagrams.
    Ipv4FragDatagrams = abi::maps::IPV4_FRAG_DATAGRAMS, Map<Ipv4FragId, Ipv4FragL4Ports>, deref
);
global_map!(
    /// `cilium_node_map_v2`: other nodes' IPs to their node IDs and SPIs.
    NodeMapV2 = abi::maps::NODE_V2, Map<NodeKey, NodeValueV2>, deref
);
global_map!(
    /// `cilium_node_map`: the same without SPIs, as tools before 1.16 read it.
    NodeMap = abi::maps::NODE, Map<NodeKey, u16>, deref
);
global_map!(
    /// `cilium_auth_map`: completed mutual authentications.
    AuthMap = abi::maps::AUTH, Map<AuthKey, AuthInfo>, deref
);
global_map!(
    /// `cilium_rs_ratelimit`: the events rate limit's token buckets.
    Ratelimit = abi::maps::RATELIMIT, Map<RatelimitKey, RatelimitValue>, deref
);
global_map!(
    /// `cilium_rs_ratelimit_metrics`: events the rate limit refused.
    RatelimitMetrics = abi::maps::RATELIMIT_METRICS,
    Map<RatelimitMetricsKey, RatelimitMetricsValue>, deref
);
global_map!(
    /// `cilium_call_policy`: each endpoint's ingress program by endpoint
    /// ID (a program array; see `Datapath::install_policy_program`).
    CallPolicy = abi::maps::CALL_POLICY, Map<u32, u32>
);
global_map!(
    /// `cilium_rs_policy_maps`: each endpoint's policy map by endpoint ID
    /// (a map-in-map; see `policymap::PolicyMap`).
    PolicyMaps = abi::maps::POLICY_MAPS, Map<u32, u32>
);
global_map!(
    /// `cilium_events`: the perf event array `events::EventReader` reads.
    Events = abi::maps::EVENTS, Map<u32, u32>
);
global_map!(
    /// `cilium_runtime_config`: the agent's settings the datapath reads,
    /// each index set through its own typed setter.
    RuntimeConfig = abi::maps::RUNTIME_CONFIG, Map<u32, u64>
);

impl CallPolicy {
    /// Puts the program behind `prog_fd` into the endpoint's slot.
    pub(crate) fn set(&self, endpoint_id: u16, prog_fd: i32) -> Result<(), Error> {
        self.0.put(&u32::from(endpoint_id), &(prog_fd as u32))
    }

    /// Empties the endpoint's slot; Ok(false) when it was empty.
    pub fn remove(&self, endpoint_id: u16) -> Result<bool, Error> {
        self.0.remove(&u32::from(endpoint_id))
    }
}

impl Events {
    /// Points the datapath's output on `cpu` at the perf ring `ring_fd`.
    pub(crate) fn attach_ring(&self, cpu: u32, ring_fd: i32) -> Result<(), Error> {
        self.0.put(&cpu, &(ring_fd as u32))
    }
}

impl PolicyMaps {
    /// The kernel ID of the policy map registered for the endpoint.
    pub fn get(&self, endpoint_id: u16) -> Result<Option<u32>, Error> {
        self.0.get(&u32::from(endpoint_id))
    }

    /// Registers the map behind `map_fd` for the endpoint.
    pub(crate) fn set(&self, endpoint_id: u16, map_fd: i32) -> Result<(), Error> {
        self.0.put(&u32::from(endpoint_id), &(map_fd as u32))
    }

    /// Forgets the endpoint's policy map; Ok(false) when none was there.
    pub fn remove(&self, endpoint_id: u16) -> Result<bool, Error> {
        self.0.remove(&u32::from(endpoint_id))
    }
}

/// How NodePort picks a service's backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbAlgorithm {
    Random,
    Maglev,
}

impl RuntimeConfig {
    fn set(&self, index: u32, value: u64) -> Result<(), Error> {
        self.0.put(&index, &value)
    }

    fn value(&self, index: u32) -> Result<u64, Error> {
        Ok(self.0.get(&index)?.unwrap_or(0))
    }

    /// An IPv6 address as the two values at `hi` and `lo` the datapath
    /// reads back (`runtime_config_ipv6`); None writes both 0 (not set).
    fn set_ipv6(&self, hi: u32, lo: u32, ip: Option<std::net::Ipv6Addr>) -> Result<(), Error> {
        let halves = ip.map_or([0, 0], rc::ipv6_halves);
        self.set(hi, halves[0])?;
        self.set(lo, halves[1])
    }

    /// The node's IPv6 router address, which turns the datapath's IPv6 on
    /// (None: off).
    pub fn set_router_ipv6(&self, router: Option<std::net::Ipv6Addr>) -> Result<(), Error> {
        self.set_ipv6(rc::ROUTER_IPV6_HI, rc::ROUTER_IPV6_LO, router)
    }

    /// Wall clock minus the datapath's monotonic clock, in 512 ns units.
    pub fn set_utime_offset(&self, offset: u64) -> Result<(), Error> {
        self.set(rc::UTIME_OFFSET, offset)
    }

    pub fn utime_offset(&self) -> Result<u64, Error> {
        self.value(rc::UTIME_OFFSET)
    }

    /// The agent's last heartbeat, monotonic nanoseconds.
    pub fn set_agent_liveness(&self, monotonic_ns: u64) -> Result<(), Error> {
        self.set(rc::AGENT_LIVENESS, monotonic_ns)
    }

    pub fn agent_liveness(&self) -> Result<u64, Error> {
        self.value(rc::AGENT_LIVENESS)
    }

    /// The ifindex of cilium_vxlan.
    pub fn set_encap_ifindex(&self, ifindex: u32) -> Result<(), Error> {
        self.set(rc::ENCAP_IFINDEX, u64::from(ifindex))
    }

    /// The pod CIDR mask the tunnel map is keyed by, e.g. /24 for
    /// 255.255.255.0 (stored in network order, as the datapath reads it).
    pub fn set_ipv4_mask(&self, prefix_len: u8) -> Result<(), Error> {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(prefix_len.min(32)))
            .unwrap_or(0);
        self.set(rc::IPV4_MASK, u64::from(mask.to_be()))
    }

    /// The ifindex of the node's native device.
    pub fn set_native_ifindex(&self, ifindex: u32) -> Result<(), Error> {
        self.set(rc::NATIVE_IFINDEX, u64::from(ifindex))
    }

    pub fn set_lb_algorithm(&self, algorithm: LbAlgorithm) -> Result<(), Error> {
        let value = match algorithm {
            LbAlgorithm::Random => rc::LB_ALGORITHM_RANDOM,
            LbAlgorithm::Maglev => rc::LB_ALGORITHM_MAGLEV,
        };
        self.set(rc::LB_ALGORITHM, value)
    }

    /// The IPv4 flow-hash seed Maglev selects with.
    pub fn set_maglev_seed4(&self, seed: u32) -> Result<(), Error> {
        self.set(rc::MAGLEV_SEED4, u64::from(seed))
    }

    /// The seed of IPv6's Maglev flow hash.
    pub fn set_maglev_seed6(&self, seed: u32) -> Result<(), Error> {
        self.set(rc::MAGLEV_SEED6, u64::from(seed))
    }

    /// The netns cookie of the node's own network namespace, whose
    /// sockets reach NodePorts and HostPorts through loopback.
    pub fn set_host_netns_cookie(&self, cookie: u64) -> Result<(), Error> {
        self.set(rc::HOST_NETNS_COOKIE, cookie)
    }

    /// BPF host routing on (else the host's stack routes pods' traffic
    /// beyond the node, and to pods from the native device).
    pub fn set_host_routing(&self, bpf: bool) -> Result<(), Error> {
        self.set(rc::HOST_ROUTING, u64::from(bpf))
    }

    /// node-port-range, first and last port.
    pub fn set_nodeport_range(&self, first: u16, last: u16) -> Result<(), Error> {
        self.set(rc::NODEPORT_RANGE, u64::from(first) << 16 | u64::from(last))
    }

    /// monitor-aggregation: 0 (every packet traced) .. 4 (maximum).
    pub fn set_monitor_aggregation(&self, level: u64) -> Result<(), Error> {
        self.set(rc::MONITOR_AGGREGATION, level)
    }

    /// Events a second (0 = unlimited) and the burst (0 = the rate).
    pub fn set_events_rate_limit(&self, rate: u64, burst: u64) -> Result<(), Error> {
        self.set(rc::EVENTS_RATE_LIMIT, rate)?;
        self.set(rc::EVENTS_BURST_LIMIT, burst)
    }

    /// A set bit `1 << notification type` turns that type off.
    pub fn set_events_disabled(&self, mask: u64) -> Result<(), Error> {
        self.set(rc::EVENTS_DISABLED, mask)
    }

    /// Whether the datapath writes debug captures.
    pub fn set_debug_datapath(&self, on: bool) -> Result<(), Error> {
        self.set(rc::DEBUG_DATAPATH, u64::from(on))
    }

    /// Whether fragment tracking is off (later fragments are dropped).
    pub fn set_fragments_disabled(&self, disabled: bool) -> Result<(), Error> {
        self.set(rc::FRAGMENTS_DISABLED, u64::from(disabled))
    }

    /// BPF masquerading: pods' traffic leaving through the native device
    /// gets `addr` as its source, except towards `exclude` (a CIDR); None
    /// turns it off.
    pub fn set_masquerade(
        &self,
        masquerade: Option<(Ipv4Addr, (Ipv4Addr, u8))>,
    ) -> Result<(), Error> {
        let Some((addr, (net, len))) = masquerade else {
            return self.set(rc::MASQUERADE_IPV4, 0);
        };
        let mask = u32::MAX
            .checked_shl(32 - u32::from(len.min(32)))
            .unwrap_or(0);
        let net = u32::from(net) & mask;
        self.set(
            rc::SNAT_EXCLUSION_IPV4,
            u64::from(mask.to_be()) << 32 | u64::from(net.to_be()),
        )?;
        self.set(rc::MASQUERADE_IPV4, u64::from(u32::from(addr).to_be()))
    }

    /// The node's IPv6 address on the native device (NodePort replies of
    /// its own backends leave from it); None while it has none.
    pub fn set_node_ipv6(&self, ip: Option<std::net::Ipv6Addr>) -> Result<(), Error> {
        self.set_ipv6(rc::NODE_IPV6_HI, rc::NODE_IPV6_LO, ip)
    }

    /// BPF masquerading of IPv6: pods' IPv6 leaving through the native
    /// device gets `addr` as its source, except towards `exclude`; None
    /// turns it off.
    pub fn set_masquerade6(
        &self,
        masquerade: Option<(std::net::Ipv6Addr, (std::net::Ipv6Addr, u8))>,
    ) -> Result<(), Error> {
        let (hi, lo) = (rc::MASQUERADE_IPV6_HI, rc::MASQUERADE_IPV6_LO);
        let Some((addr, (net, len))) = masquerade else {
            return self.set_ipv6(hi, lo, None);
        };
        let len = len.min(128);
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        let net = (u128::from(net) & mask).into();
        self.set_ipv6(
            rc::SNAT_EXCLUSION_IPV6_HI,
            rc::SNAT_EXCLUSION_IPV6_LO,
            Some(net),
        )?;
        self.set(rc::SNAT_EXCLUSION_IPV6_LEN, u64::from(len))?;
        self.set_ipv6(hi, lo, Some(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The objects' definitions agree with the Rust types of every handle
    /// (what `open` relies on), without a kernel.
    #[test]
    fn handles_match_the_objects_definitions() {
        fn agrees<M: GlobalMap, K, V>(_: fn(&M) -> &Map<K, V>) {
            let def = M::definition().unwrap_or_else(|e| panic!("{e}"));
            let sizes = (
                std::mem::size_of::<K>() as u32,
                std::mem::size_of::<V>() as u32,
            );
            assert_eq!((def.key_size, def.value_size), sizes, "{}", M::NAME);
        }
        agrees(|m: &Lxc| &m.0);
        agrees(|m: &Ipcache| &m.0);
        agrees(|m: &Tunnel| &m.0);
        agrees(|m: &Ct4Global| &m.0);
        agrees(|m: &CtAny4Global| &m.0);
        agrees(|m: &Snat4External| &m.0);
        agrees(|m: &Snat6External| &m.0);
        agrees(|m: &Metrics| &m.0 .0);
        agrees(|m: &Lb4Services| &m.0);
        agrees(|m: &Lb4Backends| &m.0);
        agrees(|m: &Lb4RevNat| &m.0);
        agrees(|m: &LbAffinityMatch| &m.0);
        agrees(|m: &Lb4Maglev| &m.0);
        agrees(|m: &Lb4ReverseSk| &m.0);
        agrees(|m: &Ipv4FragDatagrams| &m.0);
        agrees(|m: &Ratelimit| &m.0);
        agrees(|m: &RatelimitMetrics| &m.0);
        agrees(|m: &CallPolicy| &m.0);
        agrees(|m: &PolicyMaps| &m.0);
        agrees(|m: &Events| &m.0);
        agrees(|m: &RuntimeConfig| &m.0);
    }

    #[test]
    fn a_map_no_object_defines_is_refused_by_name() {
        let e = crate::loader::global_map_definition("cilium_nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "map cilium_nope: no datapath object defines it"
        );
    }
}
