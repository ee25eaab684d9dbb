/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPv4 fragment tracking (Cilium's enable-ipv4-fragment-tracking): the
 * first fragment of a datagram leaves its ports in cilium_ipv4_frag_datagrams,
 * and the fragments after it, which have no L4 header, take them from there,
 * so conntrack, policy and the load balancer see the datagram's flow.
 * IPv6 fragments are tracked the same way in cilium_rs_ipv6_frag_datagrams.
 */
#ifndef __LIB_FRAG_H_
#define __LIB_FRAG_H_

#include "ipv4.h"
#include "ipv6.h"
#include "maps.h"
#include "runtime_config.h"

static __always_inline void ipv4_frag_key(const struct iphdr *ip4, struct ipv4_frag_id *id)
{
	id->daddr = ip4->daddr;
	id->saddr = ip4->saddr;
	id->id = ip4->id;
	id->proto = ip4->protocol;
	id->pad = 0;
}

/* Notes the ports of a first fragment. Losing them only costs the later
 * fragments (dropped as DROP_FRAG_NOT_FOUND), so a failed update is not an
 * error of this packet. */
static __always_inline void ipv4_frag_remember(const struct iphdr *ip4, __u16 sport, __u16 dport)
{
	struct ipv4_frag_l4ports ports = { .sport = sport, .dport = dport };
	struct ipv4_frag_id id;

	ipv4_frag_key(ip4, &id);
	bpf_map_update_elem(&cilium_ipv4_frag_datagrams, &id, &ports, BPF_ANY);
}

/* The ports a first fragment left under key `id` in `map`, into out.
 * Returns 0 or a negative drop reason: tracking turned off, or a fragment
 * whose first one was not seen (lost, reordered, or evicted from the LRU). */
static __always_inline int frag_recall(void *map, const void *id,
				       struct ipv4_frag_l4ports *out)
{
	struct ipv4_frag_l4ports *ports;

	if (runtime_config(RUNTIME_CONFIG_FRAGMENTS_DISABLED))
		return -DROP_FRAG_NOSUPPORT;
	ports = bpf_map_lookup_elem(map, id);
	if (!ports)
		return -DROP_FRAG_NOT_FOUND;
	*out = *ports;
	return 0;
}

/* The ports of a later fragment's datagram, into out. */
static __always_inline int ipv4_frag_recall(const struct iphdr *ip4,
					    struct ipv4_frag_l4ports *out)
{
	struct ipv4_frag_id id;

	ipv4_frag_key(ip4, &id);
	return frag_recall(&cilium_ipv4_frag_datagrams, &id, out);
}

#ifdef ENABLE_IPV6
/* IPv6 fragments by the same rules (1.16 drops them all): the datagram is
 * named by its addresses, the fragment header's identification and its
 * L4 protocol. */
static __always_inline void ipv6_frag_key(const struct ipv6hdr *ip6, const struct ipv6_l4 *l4,
					  struct ipv6_frag_id *id)
{
	__builtin_memset(id, 0, sizeof(*id));
	ipv6_daddr(ip6, &id->daddr);
	ipv6_saddr(ip6, &id->saddr);
	id->id = l4->frag_id;
	id->proto = l4->nexthdr;
}

static __always_inline void ipv6_frag_remember(const struct ipv6hdr *ip6,
					       const struct ipv6_l4 *l4,
					       __u16 sport, __u16 dport)
{
	struct ipv4_frag_l4ports ports = { .sport = sport, .dport = dport };
	struct ipv6_frag_id id;

	ipv6_frag_key(ip6, l4, &id);
	bpf_map_update_elem(&cilium_rs_ipv6_frag_datagrams, &id, &ports, BPF_ANY);
}

static __always_inline int ipv6_frag_recall(const struct ipv6hdr *ip6, const struct ipv6_l4 *l4,
					    struct ipv4_frag_l4ports *out)
{
	struct ipv6_frag_id id;

	ipv6_frag_key(ip6, l4, &id);
	return frag_recall(&cilium_rs_ipv6_frag_datagrams, &id, out);
}
#endif /* ENABLE_IPV6 */

#endif /* __LIB_FRAG_H_ */
