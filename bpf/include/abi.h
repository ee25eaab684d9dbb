/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every map layout and every constant the agent must also know.
 *
 * This header is the single source of truth for the datapath ABI; crates/abi
 * mirrors each struct with compile-time size and offset checks. Layouts follow
 * Cilium 1.16 so that pinned maps stay byte-compatible with Cilium's tools.
 */
#ifndef __ABI_H_
#define __ABI_H_

#include <linux/types.h>

/* ---- Map names (pinned by name under <bpffs>/tc/globals) ---- */
/* The Rust side spells these in crates/abi/src/maps.rs. A map Cilium 1.16
 * knows carries its 1.16 name, type, sizes and flags (preallocate-bpf-maps
 * off: hash maps BPF_F_NO_PREALLOC, as Cilium's Helm chart and its CLI
 * open them), so 1.16's tools open our pins without re-creating them. A
 * map of our own is named cilium_rs_*: no 1.16 glob or prefix
 * (cilium_policy_*, cilium_calls_*, cilium_ct*, ...) takes it for one of
 * its own, while `cilium-dbg post-uninstall-cleanup` (cilium_*) still
 * removes it. */

/* ---- Default map sizes (cilium-config knobs may override) ---- */
#define ENDPOINTS_MAP_SIZE	65535
#define IPCACHE_MAP_SIZE	512000
#define CT_MAP_SIZE_TCP		524288
#define CT_MAP_SIZE_ANY		262144
#define METRICS_MAP_SIZE	1024
#define RUNTIME_CONFIG_SIZE	256
#define TUNNEL_MAP_SIZE		65536
#define POLICY_MAP_SIZE		16384
#define LB_MAP_SIZE		65536
/* bpf-nat-global-max: 2/3 of the CT maps (TCP + any) at their defaults,
 * and auto-sized to that share of smaller CT maps (Cilium's
 * checkMapSizeLimits); crates/datapath MapSizes::nat does the latter. */
#define NAT_MAP_SIZE		524288
#define LB_REVERSE_SK_MAP_SIZE	262144
#define FRAG_MAP_SIZE		8192	/* bpf-fragments-map-max */
#define NODE_MAP_SIZE		16384	/* bpf-node-map-max */
#define AUTH_MAP_SIZE		524288	/* bpf-auth-map-max */
/* Maglev lookup table size (bpf-lb-maglev-table-size): compiled in, as in
 * Cilium, since it is the inner map's value size. */
#define LB_MAGLEV_LUT_SIZE	16381

/* ---- Address families as stored in keys ---- */
#define ENDPOINT_KEY_IPV4	1
#define ENDPOINT_KEY_IPV6	2

/* ---- Reserved identities ---- */
#define IDENTITY_UNKNOWN	0
#define IDENTITY_HOST		1
#define IDENTITY_WORLD		2
#define IDENTITY_UNMANAGED	3
#define IDENTITY_HEALTH		4
#define IDENTITY_INIT		5
#define IDENTITY_REMOTE_NODE	6
#define IDENTITY_KUBE_APISERVER	7
#define IDENTITY_INGRESS	8
#define IDENTITY_WORLD_IPV4	9
#define IDENTITY_WORLD_IPV6	10

/* An address field of 16 bytes; IPv4 lives in the first four, network order. */
union v4v6_addr {
	struct {
		__u32 ip4;
		__u32 ip4_pad[3];
	};
	__u8 ip6[16];
};

/* ---- cilium_lxc: endpoint_key -> endpoint_info ---- */
#define ENDPOINT_F_HOST		1

struct endpoint_key {
	union v4v6_addr addr;
	__u8 family;
	__u8 key;
	__u16 cluster_id;
} __attribute__((packed));

struct endpoint_info {
	__u32 ifindex;
	__u16 unused;
	__u16 lxc_id;
	__u32 flags;
	__u32 pad0;
	__u8 mac[8];		/* pod-side MAC in bytes 0-5 */
	__u8 node_mac[8];	/* host-side veth MAC in bytes 0-5 */
	__u32 sec_id;
	__u32 pad[3];
};

/* ---- cilium_ipcache: ipcache_key (LPM) -> remote_endpoint_info ---- */
/* Bits of the key that precede the address: cluster_id, pad1, family. */
#define IPCACHE_STATIC_PREFIX_BITS	32

struct ipcache_key {
	__u32 prefixlen;	/* struct bpf_lpm_trie_key header */
	__u16 cluster_id;
	__u8 pad1;
	__u8 family;
	union v4v6_addr addr;
} __attribute__((packed));

#define IPCACHE_F_SKIP_TUNNEL	1

struct remote_endpoint_info {
	__u32 sec_identity;
	__u32 tunnel_endpoint;	/* be32 underlay IPv4, 0 = not behind a tunnel */
	__u16 pad;
	__u8 key;		/* encryption key index */
	__u8 flags;		/* bit0 skip tunnel */
};

/* ---- cilium_node_map(_v2): node IP -> node ID ----
 * Every IP of every other node gets the node's ID (1..65535; this node is
 * 0). 1.16's programs read the v2 map; the v1 map mirrors its writes for
 * tools and agents before 1.16. */
struct node_key {
	__u16 pad1;
	__u8 pad2;
	__u8 family;
	union v4v6_addr addr;
} __attribute__((packed));

struct node_value_v2 {
	__u16 id;
	__u8 spi;	/* IPsec key index; 0 without encryption */
	__u8 pad;
};

/* ---- cilium_auth_map: (local, remote identity, node, auth type) ->
 * expiry of a mutual authentication. Created as 1.16 creates it; empty
 * while no policy asks for authentication. ---- */
struct auth_key {
	__u32 local_sec_label;
	__u32 remote_sec_label;
	__u16 remote_node_id;
	__u8 auth_type;
	__u8 pad;
};

struct auth_info {
	__u64 expiration;	/* wall clock in utime units (ns >> 9) */
};

/* ---- cilium_tunnel_map: tunnel_key -> tunnel_value ---- */
struct tunnel_key {
	union v4v6_addr addr;
	__u8 family;
	__u8 pad;
	__u16 cluster_id;
} __attribute__((packed));

struct tunnel_value {
	union v4v6_addr addr;
	__u8 family;
	__u8 key;
	__u16 pad;
} __attribute__((packed));

/* ---- cilium_ct4_global / cilium_ct_any4_global ---- */
/* Tuple flags. Address fields are named for the reply direction and port
 * fields for the original direction, exactly as Cilium stores them. */
#define TUPLE_F_OUT		0
#define TUPLE_F_IN		1
#define TUPLE_F_RELATED		2
#define TUPLE_F_SERVICE		4

struct ipv4_ct_tuple {
	__u32 daddr;
	__u32 saddr;
	__u16 dport;
	__u16 sport;
	__u8 nexthdr;
	__u8 flags;
} __attribute__((packed));

/* ct_entry flag bits (the 16-bit word at offset 36) */
#define CT_F_RX_CLOSING		(1 << 0)
#define CT_F_TX_CLOSING		(1 << 1)
#define CT_F_LB_LOOPBACK	(1 << 3)
#define CT_F_SEEN_NON_SYN	(1 << 4)
#define CT_F_NODE_PORT		(1 << 5)
#define CT_F_PROXY_REDIRECT	(1 << 6)
#define CT_F_DSR_INTERNAL	(1 << 7)
#define CT_F_FROM_L7LB		(1 << 8)
#define CT_F_FROM_TUNNEL	(1 << 10)

/* skb->mark bits the datapath sets for the host stack (Cilium's
 * MARK_MAGIC_*, in the 0x0F00 nibble): SNAT_DONE tells the iptables
 * masquerading rule to leave the packet's source as it is (a reply keeps
 * the address its peer connected to). */
#define MARK_MAGIC_MASK		0x0F00
#define MARK_MAGIC_SNAT_DONE	0x0300
/* an overlay packet: the native device's egress leaves the encapsulated
 * packet as it is */
#define MARK_MAGIC_OVERLAY	0x0400

/* Conntrack directions, lookup results and timeouts (seconds). */
#define CT_EGRESS		0
#define CT_INGRESS		1
#define CT_SERVICE		2

#define CT_NEW			0
#define CT_ESTABLISHED		1
#define CT_REPLY		2
#define CT_RELATED		3

/* Cilium's agent defaults: bpf-ct-timeout-regular-tcp-syn,
 * bpf-ct-timeout-regular-tcp and bpf-ct-timeout-service-tcp (one value
 * here: regular and service entries live alike), -regular-any,
 * -regular-tcp-fin. */
#define CT_SYN_TIMEOUT			60
#define CT_CONNECTION_LIFETIME_TCP	8000
#define CT_CONNECTION_LIFETIME_NONTCP	60
#define CT_CLOSE_TIMEOUT		10

struct ct_entry {
	__u64 reserved0;
	__u64 backend_id;
	__u64 packets;
	__u64 bytes;
	__u32 lifetime;
	__u16 flags;
	__u16 rev_nat_index;	/* network order */
	__u16 ifindex;
	__u8 tx_flags_seen;
	__u8 rx_flags_seen;
	__u32 src_sec_id;
	__u32 last_tx_report;
	__u32 last_rx_report;
};

/* ---- cilium_lb4_services_v2: lb4_key -> lb4_service ---- */
/* A pod reaching itself through a service is SNATed to this address
 * (Cilium's IPV4_LOOPBACK), so its own stack accepts the packet. */
#define IPV4_LOOPBACK		0x012afea9	/* 169.254.42.1 in network order, as a little-endian host reads it */

#define LB_LOOKUP_SCOPE_EXT	0
#define LB_LOOKUP_SCOPE_INT	1

/* lb4_service.flags */
#define SVC_FLAG_EXTERNAL_IP	(1 << 0)
#define SVC_FLAG_NODEPORT	(1 << 1)
#define SVC_FLAG_EXT_LOCAL_SCOPE (1 << 2)
#define SVC_FLAG_HOSTPORT	(1 << 3)
#define SVC_FLAG_AFFINITY	(1 << 4)
#define SVC_FLAG_LOADBALANCER	(1 << 5)
#define SVC_FLAG_ROUTABLE	(1 << 6)
#define SVC_FLAG_SOURCE_RANGE	(1 << 7)

/* lb4_service.flags2 */
#define SVC_FLAG_LOCALREDIRECT	(1 << 0)
/* A HostPort given hostIP 127.0.0.1: its 0.0.0.0 frontend answers only
 * the node's own connections to a loopback address. */
#define SVC_FLAG_LOOPBACK	(1 << 3)
/* Clients outside the cluster get the external scope's backends, the
 * cluster's own the internal scope's (externalTrafficPolicy Local beside
 * internalTrafficPolicy Cluster). */
#define SVC_FLAG_TWO_SCOPES	(1 << 5)

struct lb4_key {
	__u32 address;		/* VIP, network order */
	__u16 dport;		/* network order */
	__u16 backend_slot;	/* 0 = the service entry, 1..N = backends */
	__u8 proto;		/* the frontend's L4 protocol; 0 = any */
	__u8 scope;
	__u8 pad[2];
};

struct lb4_service {
	__u32 backend_id;	/* slot entries; affinity timeout in the service entry */
	__u16 count;		/* service entry: active backend slots */
	__u16 rev_nat_index;	/* network order */
	__u8 flags;
	__u8 flags2;
	__u8 pad[2];
};

/* ---- cilium_lb4_backends_v3: u32 backend ID -> lb4_backend ---- */
#define BE_STATE_ACTIVE		0
#define BE_STATE_TERMINATING	1
#define BE_STATE_QUARANTINED	2
#define BE_STATE_MAINTENANCE	3

struct lb4_backend {
	__u32 address;		/* network order */
	__u16 port;		/* network order */
	__u8 proto;
	__u8 flags;		/* BE_STATE_* */
	__u16 cluster_id;
	__u8 zone;
	__u8 pad;
};

/* ---- cilium_lb4_reverse_nat: u16 rev-NAT index (network order) -> lb4_reverse_nat ---- */
struct lb4_reverse_nat {
	__u32 address;
	__u16 port;
} __attribute__((packed));

/* ---- cilium_lb4_affinity: lb4_affinity_key -> lb_affinity_val (LRU) ---- */
struct lb4_affinity_key {
	__u64 client_id;	/* client IPv4 (network order) in the low bytes, or a netns cookie */
	__u16 rev_nat_id;	/* network order */
	__u8 netns_cookie;	/* bit0: client_id is a netns cookie */
	__u8 pad1;
	__u32 pad2;
} __attribute__((packed));

struct lb_affinity_val {
	__u64 last_used;	/* monotonic seconds */
	__u32 backend_id;
	__u32 pad;
} __attribute__((packed));

/* ---- cilium_lb_affinity_match: lb_affinity_match -> u8 ----
 * Presence means the backend still belongs to the service. */
struct lb_affinity_match {
	__u32 backend_id;
	__u16 rev_nat_id;	/* network order */
	__u16 pad;
} __attribute__((packed));

/* ---- cilium_lb4_reverse_sk: ipv4_revnat_tuple -> ipv4_revnat_entry (LRU) ----
 * Socket LB: what a socket connected to (the frontend), by the socket and
 * the backend it was sent to, so getpeername() and recvmsg() show the
 * frontend again. */
struct ipv4_revnat_tuple {
	__u64 cookie;		/* socket cookie */
	__u32 address;		/* backend, network order */
	__u16 port;		/* backend, network order */
	__u16 pad;
};

struct ipv4_revnat_entry {
	__u32 address;		/* frontend, network order */
	__u16 port;		/* frontend, network order */
	__u16 rev_nat_index;	/* network order */
};

/* ---- cilium_snat_v4_external: ipv4_ct_tuple -> ipv4_nat_entry ---- */
/* Keys are tuples with their real source and destination ports (not CT's
 * skewed order) and the direction in flags. */
#define NAT_DIR_EGRESS		0
#define NAT_DIR_INGRESS		1

struct ipv4_nat_entry {
	__u64 created;
	__u64 needs_ct;
	__u64 last_used;	/* ct_now() of the last packet, for NAT GC (Cilium: pad) */
	__u32 from_addr;	/* NodePort: the source the translated packet gets (Cilium: pad) */
	__u32 pad2;
	__u32 to_addr;		/* egress: new source; ingress: new destination */
	__u16 to_port;
	__u16 rev_port;		/* NodePort: the other side's port (Cilium: pad) */
};

/* ---- The IPv6 twins of the per-family maps, as 1.16 lays them out.
 * Addresses are 16 bytes in network order with byte alignment (1.16's
 * packed union v6addr), so a struct's alignment comes from its other
 * fields. Maps keyed by either family (cilium_lxc, cilium_ipcache,
 * cilium_tunnel_map, the node map) and the policy maps have no twin. ---- */
union v6addr {
	__u8 addr[16];
	__u32 p[4];
	__u64 d[2];
} __attribute__((packed));

/* cilium_ct6_global / cilium_ct_any6_global: ipv6_ct_tuple -> ct_entry */
struct ipv6_ct_tuple {
	union v6addr daddr;
	union v6addr saddr;
	__u16 dport;
	__u16 sport;
	__u8 nexthdr;
	__u8 flags;
} __attribute__((packed));

/* cilium_lb6_services_v2: lb6_key -> lb6_service (lb4_service's layout) */
struct lb6_key {
	union v6addr address;	/* VIP */
	__u16 dport;		/* network order */
	__u16 backend_slot;	/* 0 = the service entry, 1..N = backends */
	__u8 proto;		/* the frontend's L4 protocol; 0 = any */
	__u8 scope;
	__u8 pad[2];
};

struct lb6_service {
	__u32 backend_id;	/* slot entries; affinity timeout in the service entry */
	__u16 count;
	__u16 rev_nat_index;	/* network order */
	__u8 flags;
	__u8 flags2;
	__u8 pad[2];
};

/* cilium_lb6_backends_v3: u32 backend ID -> lb6_backend; backend IDs and
 * rev-NAT indexes come from one pool for both families, as in 1.16. */
struct lb6_backend {
	union v6addr address;
	__u16 port;		/* network order */
	__u8 proto;
	__u8 flags;		/* BE_STATE_* */
	__u16 cluster_id;
	__u8 zone;
	__u8 pad;
};

/* cilium_lb6_reverse_nat: u16 rev-NAT index (network order) -> lb6_reverse_nat */
struct lb6_reverse_nat {
	union v6addr address;
	__u16 port;
} __attribute__((packed));

/* cilium_lb6_affinity: lb6_affinity_key -> lb_affinity_val (LRU) */
struct lb6_affinity_key {
	union v6addr client_id;	/* client IPv6, or a netns cookie in the first 8 bytes */
	__u16 rev_nat_id;	/* network order */
	__u8 netns_cookie;	/* bit0: client_id is a netns cookie */
	__u8 pad1;
	__u32 pad2;
} __attribute__((packed));

/* cilium_lb6_reverse_sk: ipv6_revnat_tuple -> ipv6_revnat_entry (LRU) */
struct ipv6_revnat_tuple {
	__u64 cookie;		/* socket cookie */
	union v6addr address;	/* backend */
	__u16 port;		/* backend, network order */
	__u16 pad;
};

struct ipv6_revnat_entry {
	union v6addr address;	/* frontend */
	__u16 port;		/* frontend, network order */
	__u16 rev_nat_index;	/* network order */
};

/* cilium_snat_v6_external: ipv6_ct_tuple (real port order) -> ipv6_nat_entry */
struct ipv6_nat_entry {
	__u64 created;
	__u64 needs_ct;
	__u64 last_used;	/* as ipv4_nat_entry (Cilium: pad) */
	__u64 flags;		/* NAT6_F_* (Cilium: pad) */
	union v6addr to_addr;	/* egress: new source; ingress: new destination */
	__u16 to_port;
	__u16 rev_port;		/* as ipv4_nat_entry (Cilium: pad) */
	__u32 pad3;
};

/* A NodePort's translation, not masquerading's: the egress entry of a
 * client's flow DNATs to to_addr:to_port from the node's port rev_port,
 * the ingress entry of its replies sends them to the client from the
 * NodePort rev_port. With NAT6_F_LOCAL the backend is this node's and
 * sees the client's own address (no SNAT); there is no room for a source
 * address as ipv4_nat_entry's from_addr. */
#define NAT6_F_NODEPORT		(1 << 0)
#define NAT6_F_LOCAL		(1 << 1)

/* ---- cilium_ipv4_frag_datagrams: ipv4_frag_id -> ipv4_frag_l4ports (LRU)
 * The ports of a fragmented datagram, learned from its first fragment, for
 * the fragments after it, which carry no L4 header. ---- */
struct ipv4_frag_id {
	__u32 daddr;		/* network order */
	__u32 saddr;		/* network order */
	__u16 id;		/* the IP ID, network order */
	__u8 proto;
	__u8 pad;
};

struct ipv4_frag_l4ports {
	__u16 sport;		/* the datagram's source port, network order */
	__u16 dport;		/* its destination port */
};

/* cilium_rs_ipv6_frag_datagrams: ipv6_frag_id -> ipv4_frag_l4ports (LRU).
 * Not in 1.16, which drops every IPv6 fragment (DROP_FRAG_NOSUPPORT):
 * its IPv6 twin, keyed by the fragment header's 32-bit identification. */
struct ipv6_frag_id {
	union v6addr daddr;
	union v6addr saddr;
	__u32 id;		/* network order */
	__u8 proto;		/* the datagram's L4 protocol */
	__u8 pad[3];
};

/* ---- cilium_policy_<EPID>: policy_key (LPM) -> policy_entry ---- */
struct policy_key {
	__u32 prefixlen;
	__u32 sec_label;
	__u8 egress;
	__u8 protocol;
	__u16 dport;		/* network order */
};

/* policy_entry.flags */
#define POLICY_FLAG_DENY		(1 << 0)
#define POLICY_FLAG_WILDCARD_PROTOCOL	(1 << 1)
#define POLICY_FLAG_WILDCARD_DPORT	(1 << 2)

struct policy_entry {
	__u16 proxy_port;	/* network order */
	__u8 flags;
	__u8 auth_type;
	__u16 pad1;
	__u16 pad2;
	__u64 packets;
	__u64 bytes;
};

/* ---- cilium_metrics: metrics_key -> metrics_value (per CPU) ---- */
#define METRIC_INGRESS		1
#define METRIC_EGRESS		2
#define METRIC_SERVICE		3

struct metrics_key {
	__u8 reason;		/* 0 = forwarded, else drop reason */
	__u8 dir;		/* low 2 bits used */
	__u16 line;
	__u8 file;
	__u8 reserved[3];
};

struct metrics_value {
	__u64 count;
	__u64 bytes;
};

/* ---- cilium_rs_ratelimit: rs_ratelimit_key -> rs_ratelimit_value (token
 * bucket, LRU) and cilium_rs_ratelimit_metrics: usage -> events refused ----
 * Maps of our own: the events rate limit (bpf-events-default-rate-limit) is
 * Cilium 1.17's, and these are 1.17's cilium_ratelimit and
 * cilium_ratelimit_metrics layouts. Cilium 1.16 has no metrics map, and its
 * cilium_ratelimit is keyed by { __u32 netdev_idx } alone (the ICMPv6
 * replies of a service without backends, which this IPv4 datapath never
 * sends), so a map of this layout must not carry that name. */
#define RATELIMIT_MAP_SIZE		1024
#define RATELIMIT_METRICS_MAP_SIZE	64
#define RATELIMIT_USAGE_ICMPV6		1
#define RATELIMIT_USAGE_EVENTS_MAP	2

struct rs_ratelimit_key {
	__u32 usage;
	__u32 key;		/* per-usage discriminator (netdev index for ICMPv6) */
};

struct rs_ratelimit_value {
	__u64 last_topup;	/* ktime ns */
	__u64 tokens;
};

struct rs_ratelimit_metrics_key {
	__u32 usage;
};

struct rs_ratelimit_metrics_value {
	__u64 dropped;
};

/* ---- cilium_runtime_config: u32 index -> u64 ---- */
#define RUNTIME_CONFIG_UTIME_OFFSET	0
#define RUNTIME_CONFIG_AGENT_LIVENESS	1
/* ifindex of cilium_vxlan; 0 while there is no overlay */
#define RUNTIME_CONFIG_ENCAP_IFINDEX	2
/* the pod CIDR mask (network order) the tunnel map is keyed by */
#define RUNTIME_CONFIG_IPV4_MASK	3
/* ifindex of the node's native device (NodePort replies leave through it) */
#define RUNTIME_CONFIG_NATIVE_IFINDEX	4
/* NodePort backend selection: 0 random, 1 maglev (bpf-lb-algorithm) */
#define RUNTIME_CONFIG_LB_ALGORITHM	5
/* the IPv4 flow-hash seed Maglev uses (from bpf-lb-maglev-hash-seed) */
#define RUNTIME_CONFIG_MAGLEV_SEED4	6
/* NodePort range (node-port-range): first port << 16 | last port; 0 =
 * Cilium's default 30000-32767 */
#define RUNTIME_CONFIG_NODEPORT_RANGE	7
/* monitor-aggregation: 0 none (trace every packet) .. 4 maximum */
#define RUNTIME_CONFIG_MONITOR_AGGREGATION	8
#define MONITOR_AGGREGATION_MEDIUM	3
/* bpf-events-default-rate-limit: events per second into cilium_events, 0 =
 * unlimited; and bpf-events-default-burst-limit: the bucket size (0 = the
 * rate) */
#define RUNTIME_CONFIG_EVENTS_RATE_LIMIT	9
#define RUNTIME_CONFIG_EVENTS_BURST_LIMIT	10
/* bpf-events-{drop,trace,policy-verdict}-enabled: a set bit 1 << type
 * turns that notification type off */
#define RUNTIME_CONFIG_EVENTS_DISABLED		11
/* 1: write debug captures (debug with debug-verbose=datapath) */
#define RUNTIME_CONFIG_DEBUG_DATAPATH		12
/* 1: enable-ipv4-fragment-tracking=false, fragments are dropped (0, the
 * default, tracks them) */
#define RUNTIME_CONFIG_FRAGMENTS_DISABLED	13
/* enable-bpf-masquerade: the address pods' traffic leaving through the
 * native device is masqueraded to (network order, low 32 bits); 0 = off */
#define RUNTIME_CONFIG_MASQUERADE_IPV4		14
/* the destinations never masqueraded (ipv4-native-routing-cidr, else the
 * pod CIDR): address in the low 32 bits, mask in the high (both network
 * order) */
#define RUNTIME_CONFIG_SNAT_EXCLUSION_IPV4	15
/* the netns cookie of the node's own network namespace (the agent's), where
 * socket LB lets loopback reach NodePorts and HostPorts; 0 = the initial
 * namespace's */
#define RUNTIME_CONFIG_HOST_NETNS_COOKIE	16
/* 1: BPF host routing (enable-host-legacy-routing=false and what it
 * needs): pods' traffic beyond the node leaves by a FIB lookup and a
 * redirect, and traffic for pods arriving on the native device goes
 * straight into them, neither walking the host's stack */
#define RUNTIME_CONFIG_HOST_ROUTING		17
/* the node's IPv6 router address (1.16's ROUTER_IP), bytes 0-7 and 8-15
 * as they lie in memory; both 0 while IPv6 is off */
#define RUNTIME_CONFIG_ROUTER_IPV6_HI		18
#define RUNTIME_CONFIG_ROUTER_IPV6_LO		19
/* enable-ipv6-masquerade in BPF: the address pods' IPv6 leaving through
 * the native device is masqueraded to, halves as the router's; both 0 =
 * off */
#define RUNTIME_CONFIG_MASQUERADE_IPV6_HI	20
#define RUNTIME_CONFIG_MASQUERADE_IPV6_LO	21
/* the IPv6 destinations never masqueraded (ipv6-native-routing-cidr, else
 * the pod CIDR): the prefix's halves, and its length */
#define RUNTIME_CONFIG_SNAT_EXCLUSION_IPV6_HI	22
#define RUNTIME_CONFIG_SNAT_EXCLUSION_IPV6_LO	23
#define RUNTIME_CONFIG_SNAT_EXCLUSION_IPV6_LEN	24
/* the node's IPv6 address on the native device, halves as the router's:
 * NodePort replies of this node's backends leave from it */
#define RUNTIME_CONFIG_NODE_IPV6_HI		25
#define RUNTIME_CONFIG_NODE_IPV6_LO		26
/* the seed of IPv6's Maglev flow hash (1.16's HASH_INIT6_SEED) */
#define RUNTIME_CONFIG_MAGLEV_SEED6		27
#define NODEPORT_PORT_MIN_DEFAULT	30000
#define NODEPORT_PORT_MAX_DEFAULT	32767
#define LB_ALGORITHM_RANDOM		0
#define LB_ALGORITHM_MAGLEV		1

/* ---- cilium_events records ---- */
#define CILIUM_NOTIFY_UNSPEC		0
#define CILIUM_NOTIFY_DROP		1
#define CILIUM_NOTIFY_DBG_MSG		2
#define CILIUM_NOTIFY_DBG_CAPTURE	3
#define CILIUM_NOTIFY_TRACE		4
#define CILIUM_NOTIFY_POLICY_VERDICT	5
#define CILIUM_NOTIFY_TRACE_SOCK	7

#define NOTIFY_CAPTURE_VER	1
#define NOTIFY_TRACE_VER	1
#define TRACE_PAYLOAD_LEN	128

struct notify_common_hdr {
	__u8 type;
	__u8 subtype;
	__u16 source;
	__u32 hash;
};

struct drop_notify {
	struct notify_common_hdr hdr;
	__u32 len_orig;
	__u16 len_cap;
	__u16 version;
	__u32 src_label;
	__u32 dst_label;
	__u32 dst_id;
	__u16 line;
	__u8 file;
	__s8 ext_error;
	__u32 ifindex;
};

/* A packet captured at a point of the datapath (type
 * CILIUM_NOTIFY_DBG_CAPTURE, subtype DBG_CAPTURE_*), written only with
 * datapath debugging on (debug-verbose=datapath) */
struct debug_capture_msg {
	struct notify_common_hdr hdr;
	__u32 len_orig;
	__u16 len_cap;
	__u16 version;
	__u32 arg1;		/* the ifindex */
	__u32 arg2;
};

/* Capture points, Cilium 1.16's numbers (bpf/lib/dbg.h); 1-3 are reserved
 * there. Only the delivery to an endpoint is captured here, as in 1.16. */
#define DBG_CAPTURE_UNSPEC		0
#define DBG_CAPTURE_DELIVERY		4
#define DBG_CAPTURE_FROM_LB		5
#define DBG_CAPTURE_AFTER_V46		6
#define DBG_CAPTURE_AFTER_V64		7
#define DBG_CAPTURE_PROXY_PRE		8
#define DBG_CAPTURE_PROXY_POST		9
#define DBG_CAPTURE_SNAT_PRE		10
#define DBG_CAPTURE_SNAT_POST		11

struct trace_notify {
	struct notify_common_hdr hdr;
	__u32 len_orig;
	__u16 len_cap;
	__u16 version;
	__u32 src_label;
	__u32 dst_label;
	__u16 dst_id;
	__u8 reason;
	__u8 flags;
	__u32 ifindex;
	__u8 orig_ip[16];
};

/* A policy decision (type CILIUM_NOTIFY_POLICY_VERDICT; hdr.source is the
 * local endpoint ID) */
struct policy_verdict_notify {
	struct notify_common_hdr hdr;
	__u32 len_orig;
	__u16 len_cap;
	__u16 version;
	__u32 remote_label;
	__s32 verdict;		/* 0 allowed, < 0 the drop reason */
	__u16 dst_port;		/* host order */
	__u8 proto;
	__u8 flags;		/* bits 0-1 direction (1 ingress, 2 egress), bits 3-5 match type */
	__u8 auth_type;
	__u8 pad0;
	__u16 pad1;
};

/* A socket's destination as socket LB saw it, before and after it chose
 * a backend (type CILIUM_NOTIFY_TRACE_SOCK): Cilium 1.16's
 * trace_sock_notify, byte for byte. No packet is carried. */
struct trace_sock_notify {
	__u8 type;
	__u8 xlate_point;	/* XLATE_* */
	__u32 dst_ip[4];	/* IPv4 in the first word, network order */
	__u16 dst_port;		/* host order */
	__u64 sock_cookie;
	__u64 cgroup_id;
	__u8 l4_proto;		/* TRACE_SOCK_L4_* */
	__u8 flags;		/* TRACE_SOCK_FLAG_IPV6 */
} __attribute__((packed));

#define XLATE_UNKNOWN			0
#define XLATE_PRE_DIRECTION_FWD		1
#define XLATE_POST_DIRECTION_FWD	2
#define XLATE_PRE_DIRECTION_REV		3
#define XLATE_POST_DIRECTION_REV	4

#define TRACE_SOCK_L4_UNKNOWN		0
#define TRACE_SOCK_L4_TCP		1
#define TRACE_SOCK_L4_UDP		2

#define TRACE_SOCK_FLAG_IPV6		0x1

/* Observation points (trace subtype) */
#define TRACE_TO_LXC		0
#define TRACE_TO_PROXY		1
#define TRACE_TO_HOST		2
#define TRACE_TO_STACK		3
#define TRACE_TO_OVERLAY	4
#define TRACE_FROM_LXC		5
#define TRACE_FROM_PROXY	6
#define TRACE_FROM_HOST		7
#define TRACE_FROM_STACK	8
#define TRACE_FROM_OVERLAY	9
#define TRACE_FROM_NETWORK	10
#define TRACE_TO_NETWORK	11

/* ---- Source file ids carried in drop events and metrics ---- */
#define SOURCE_FILE_BPF_HOST	1
#define SOURCE_FILE_BPF_LXC	2
#define SOURCE_FILE_BPF_OVERLAY	3
#define SOURCE_FILE_BPF_SOCK	5

/* ---- Drop reasons (positive; the datapath returns them negated) ---- */
#define DROP_INVALID_SIP	132
#define DROP_POLICY		133
#define DROP_INVALID		134
#define DROP_CT_INVALID_HDR	135
#define DROP_FRAG_NEEDED	136
#define DROP_CT_UNKNOWN_PROTO	137
#define DROP_UNKNOWN_L3		139
#define DROP_MISSED_TAIL_CALL	140
#define DROP_WRITE_ERROR	141
#define DROP_UNKNOWN_L4		142
#define DROP_UNKNOWN_ICMP_CODE	143
#define DROP_UNKNOWN_ICMP_TYPE	144
#define DROP_NO_TUNNEL_KEY	147
#define DROP_UNKNOWN_TARGET	150
#define DROP_UNROUTABLE		151
#define DROP_CSUM_L3		153
#define DROP_CSUM_L4		154
#define DROP_CT_CREATE_FAILED	155
#define DROP_INVALID_EXTHDR	156
#define DROP_FRAG_NOSUPPORT	157
#define DROP_NO_SERVICE		158
#define DROP_NO_TUNNEL_ENDPOINT	160
#define DROP_UNKNOWN_CT		163
#define DROP_HOST_UNREACHABLE	164
#define DROP_NO_CONFIG		165
#define DROP_UNSUPPORTED_L2	166
#define DROP_NAT_NO_MAPPING	167
#define DROP_NO_FIB		169
#define DROP_INVALID_IDENTITY	171
#define DROP_UNKNOWN_SENDER	172
#define DROP_FRAG_NOT_FOUND	175
#define DROP_POLICY_DENY	181
#define DROP_TTL_EXCEEDED	196
#define DROP_EP_NOT_READY	203

/* Metric reason for forwarded packets */
#define REASON_FORWARDED	0
/* Socket LB outcomes, counted like drops but not drops */
#define REASON_LB_NO_BACKEND_SLOT	5
#define REASON_LB_NO_BACKEND		6
#define REASON_LB_REVNAT_UPDATE		7
#define REASON_LB_REVNAT_STALE		8

/* The Rust mirrors in crates/abi check the same sizes. */
#define ABI_SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " layout changed")
ABI_SIZE(struct endpoint_key, 20);
ABI_SIZE(struct endpoint_info, 48);
ABI_SIZE(struct ipcache_key, 24);
ABI_SIZE(struct remote_endpoint_info, 12);
ABI_SIZE(struct tunnel_key, 20);
ABI_SIZE(struct tunnel_value, 20);
ABI_SIZE(struct node_key, 20);
ABI_SIZE(struct node_value_v2, 4);
ABI_SIZE(struct auth_key, 12);
ABI_SIZE(struct auth_info, 8);
ABI_SIZE(struct ipv4_ct_tuple, 14);
ABI_SIZE(struct ct_entry, 56);
ABI_SIZE(struct policy_key, 12);
ABI_SIZE(struct policy_entry, 24);
ABI_SIZE(struct lb4_key, 12);
ABI_SIZE(struct lb4_service, 12);
ABI_SIZE(struct lb4_backend, 12);
ABI_SIZE(struct lb4_reverse_nat, 6);
ABI_SIZE(struct ipv4_nat_entry, 40);
ABI_SIZE(struct lb4_affinity_key, 16);
ABI_SIZE(struct lb_affinity_val, 16);
ABI_SIZE(struct lb_affinity_match, 8);
ABI_SIZE(struct ipv4_revnat_tuple, 16);
ABI_SIZE(struct ipv4_revnat_entry, 8);
ABI_SIZE(struct ipv6_ct_tuple, 38);
ABI_SIZE(struct lb6_key, 24);
ABI_SIZE(struct lb6_service, 12);
ABI_SIZE(struct lb6_backend, 24);
ABI_SIZE(struct lb6_reverse_nat, 18);
ABI_SIZE(struct lb6_affinity_key, 24);
ABI_SIZE(struct ipv6_revnat_tuple, 32);
ABI_SIZE(struct ipv6_revnat_entry, 20);
ABI_SIZE(struct ipv6_nat_entry, 56);
ABI_SIZE(struct ipv6_frag_id, 40);
ABI_SIZE(struct metrics_key, 8);
ABI_SIZE(struct rs_ratelimit_key, 8);
ABI_SIZE(struct rs_ratelimit_value, 16);
ABI_SIZE(struct rs_ratelimit_metrics_key, 4);
ABI_SIZE(struct rs_ratelimit_metrics_value, 8);
ABI_SIZE(struct metrics_value, 16);
ABI_SIZE(struct drop_notify, 36);
ABI_SIZE(struct trace_notify, 48);
ABI_SIZE(struct debug_capture_msg, 24);
ABI_SIZE(struct policy_verdict_notify, 32);
ABI_SIZE(struct trace_sock_notify, 38);

#endif /* __ABI_H_ */
