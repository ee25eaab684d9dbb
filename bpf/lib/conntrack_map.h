/* SPDX-License-Identifier: Apache-2.0 */
/* The global conntrack tables: TCP in one, everything else in the other;
 * the IPv6 pair only in the dual-stack builds (ENABLE_IPV6). */
#ifndef __LIB_CONNTRACK_MAP_H_
#define __LIB_CONNTRACK_MAP_H_

#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv4_ct_tuple);
	__type(value, struct ct_entry);
	__uint(max_entries, CT_MAP_SIZE_TCP);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ct4_global SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv4_ct_tuple);
	__type(value, struct ct_entry);
	__uint(max_entries, CT_MAP_SIZE_ANY);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ct_any4_global SEC(".maps");

#ifdef ENABLE_IPV6
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv6_ct_tuple);
	__type(value, struct ct_entry);
	__uint(max_entries, CT_MAP_SIZE_TCP);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ct6_global SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ipv6_ct_tuple);
	__type(value, struct ct_entry);
	__uint(max_entries, CT_MAP_SIZE_ANY);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cilium_ct_any6_global SEC(".maps");
#endif /* ENABLE_IPV6 */

#endif /* __LIB_CONNTRACK_MAP_H_ */
