/* SPDX-License-Identifier: Apache-2.0 */
/* Global maps shared by every object, pinned by name in <bpffs>/tc/globals.
 * Hash maps (HASH, PERCPU_HASH, HASH_OF_MAPS) are BPF_F_NO_PREALLOC, as
 * Cilium creates them with preallocate-bpf-maps=false, the value its Helm
 * chart writes and its CLI assumes: a pin without the flag is one Cilium's
 * tools re-create. LRU maps and arrays take no flag. */
#ifndef __LIB_MAPS_H_
#define __LIB_MAPS_H_

#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct endpoint_info);
	__uint(max_entries, ENDPOINTS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lxc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct ipcache_key);
	__type(value, struct remote_endpoint_info);
	__uint(max_entries, IPCACHE_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ipcache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct tunnel_key);
	__type(value, struct tunnel_value);
	__uint(max_entries, TUNNEL_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_tunnel_map SEC(".maps");

/* No program of ours reads the node and auth maps yet; they are defined
 * here so every object pins them as 1.16 does (its tools and its agent
 * expect them), and the agent keeps node IDs in them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct node_key);
	__type(value, __u16);
	__uint(max_entries, NODE_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_node_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct node_key);
	__type(value, struct node_value_v2);
	__uint(max_entries, NODE_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_node_map_v2 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct auth_key);
	__type(value, struct auth_info);
	__uint(max_entries, AUTH_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_auth_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb4_key);
	__type(value, struct lb4_service);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_services_v2 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct lb4_backend);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_backends_v3 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u16);
	__type(value, struct lb4_reverse_nat);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_reverse_nat SEC(".maps");

/* One Maglev table per service, by rev-NAT index (network order): as in
 * Cilium, each table is the only element of an inner array the agent
 * creates per service and swaps in (cilium_maglev_inner). */
struct lb4_maglev_lut {
	__u32 backend_ids[LB_MAGLEV_LUT_SIZE];
};

struct lb4_maglev_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct lb4_maglev_lut));
	__uint(max_entries, 1);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u16);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct lb4_maglev_inner);
} cilium_lb4_maglev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb4_affinity_key);
	__type(value, struct lb_affinity_val);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb_affinity_match);
	__type(value, __u8);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb_affinity_match SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv4_revnat_tuple);
	__type(value, struct ipv4_revnat_entry);
	__uint(max_entries, LB_REVERSE_SK_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb4_reverse_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv4_ct_tuple);
	__type(value, struct ipv4_nat_entry);
	__uint(max_entries, NAT_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_snat_v4_external SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv4_frag_id);
	__type(value, struct ipv4_frag_l4ports);
	__uint(max_entries, FRAG_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ipv4_frag_datagrams SEC(".maps");

#ifdef ENABLE_IPV6
/* The IPv6 twins, only in the dual-stack build of each object (1.16
 * creates them only with enable-ipv6): an IPv4-only node pins none. The
 * v6 conntrack tables are in conntrack_map.h. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb6_key);
	__type(value, struct lb6_service);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb6_services_v2 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct lb6_backend);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb6_backends_v3 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u16);
	__type(value, struct lb6_reverse_nat);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb6_reverse_nat SEC(".maps");

/* Maglev tables of v6 services: the inner arrays are cilium_lb4_maglev's */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u16);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct lb4_maglev_inner);
} cilium_lb6_maglev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb6_affinity_key);
	__type(value, struct lb_affinity_val);
	__uint(max_entries, LB_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb6_affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv6_revnat_tuple);
	__type(value, struct ipv6_revnat_entry);
	__uint(max_entries, LB_REVERSE_SK_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_lb6_reverse_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv6_ct_tuple);
	__type(value, struct ipv6_nat_entry);
	__uint(max_entries, NAT_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_snat_v6_external SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv6_frag_id);
	__type(value, struct ipv4_frag_l4ports);
	__uint(max_entries, FRAG_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_rs_ipv6_frag_datagrams SEC(".maps");
#endif /* ENABLE_IPV6 */

/* An endpoint's ingress, by endpoint ID (Cilium's POLICY_CALL_MAP): local
 * delivery tail-calls the endpoint's slot, which applies its ingress
 * policy and delivers. An endpoint without a slot is not served. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, ENDPOINTS_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_call_policy SEC(".maps");

/* Each endpoint's policy map (cilium_policy_<EPID>, Cilium's LPM layout),
 * by endpoint ID. Cilium compiles the map into a per-endpoint program; one
 * object serves every endpoint here, so it finds the map through this
 * map-in-map, a map of our own: named so that Cilium's
 * `bpf policy get --all` (glob cilium_policy_*) does not read it as an
 * endpoint's policy map. */
struct policy_map {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	/* sizes, not types: BTF would only carry forward declarations here */
	__uint(key_size, sizeof(struct policy_key));
	__uint(value_size, sizeof(struct policy_entry));
	__uint(max_entries, POLICY_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32);
	__uint(max_entries, ENDPOINTS_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct policy_map);
} cilium_rs_policy_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct metrics_key);
	__type(value, struct metrics_value);
	__uint(max_entries, METRICS_MAP_SIZE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_metrics SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, RUNTIME_CONFIG_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_runtime_config SEC(".maps");

/* The events rate limit's buckets and refusals (Cilium 1.17's maps, ours
 * in a 1.16 world: see abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct rs_ratelimit_key);
	__type(value, struct rs_ratelimit_value);
	__uint(max_entries, RATELIMIT_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_rs_ratelimit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct rs_ratelimit_metrics_key);
	__type(value, struct rs_ratelimit_metrics_value);
	__uint(max_entries, RATELIMIT_METRICS_MAP_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_rs_ratelimit_metrics SEC(".maps");

/* max_entries 0: the loader sizes it to the number of possible CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_events SEC(".maps");

#endif /* __LIB_MAPS_H_ */
