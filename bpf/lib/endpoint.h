/* SPDX-License-Identifier: Apache-2.0 */
/* Local endpoint and ipcache lookups by address. */
#ifndef __LIB_ENDPOINT_H_
#define __LIB_ENDPOINT_H_

#include "maps.h"

static __always_inline struct endpoint_info *lookup_ip4_endpoint(__u32 addr)
{
	struct endpoint_key key = {};

	key.addr.ip4 = addr;
	key.family = ENDPOINT_KEY_IPV4;
	return bpf_map_lookup_elem(&cilium_lxc, &key);
}

static __always_inline struct endpoint_info *
lookup_ip6_endpoint(const union v6addr *addr)
{
	struct endpoint_key key = {};

	__builtin_memcpy(key.addr.ip6, addr->addr, sizeof(key.addr.ip6));
	key.family = ENDPOINT_KEY_IPV6;
	return bpf_map_lookup_elem(&cilium_lxc, &key);
}

/* A pod endpoint on this node, as opposed to one of the node's own addresses. */
static __always_inline int is_local_pod(const struct endpoint_info *ep)
{
	return ep && !(ep->flags & ENDPOINT_F_HOST);
}

static __always_inline struct remote_endpoint_info *lookup_ip4_remote(__u32 addr)
{
	struct ipcache_key key = {
		.prefixlen = IPCACHE_STATIC_PREFIX_BITS + 32,
		.family = ENDPOINT_KEY_IPV4,
	};

	key.addr.ip4 = addr;
	return bpf_map_lookup_elem(&cilium_ipcache, &key);
}

/* Security identity of an address: the ipcache's, else world. */
static __always_inline __u32 ip4_identity(__u32 addr)
{
	struct remote_endpoint_info *info = lookup_ip4_remote(addr);

	return info ? info->sec_identity : IDENTITY_WORLD;
}

static __always_inline struct remote_endpoint_info *lookup_ip6_remote(const union v6addr *addr)
{
	struct ipcache_key key = {
		.prefixlen = IPCACHE_STATIC_PREFIX_BITS + 128,
		.family = ENDPOINT_KEY_IPV6,
	};

	__builtin_memcpy(key.addr.ip6, addr->addr, sizeof(key.addr.ip6));
	return bpf_map_lookup_elem(&cilium_ipcache, &key);
}

/* Security identity of an IPv6 address: the ipcache's, else world-ipv6,
 * the world a dual-stack node gives IPv6 (1.16's WORLD_IPV6_ID). */
static __always_inline __u32 ip6_identity(const union v6addr *addr)
{
	struct remote_endpoint_info *info = lookup_ip6_remote(addr);

	return info ? info->sec_identity : IDENTITY_WORLD_IPV6;
}

#endif /* __LIB_ENDPOINT_H_ */
