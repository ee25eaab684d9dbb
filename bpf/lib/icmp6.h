/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Neighbour discovery for pods, as 1.16 answers it: a solicitation for the
 * router address or for another pod on this node gets an advertisement
 * with the pod's host-side veth MAC, so the pod's IPv6 gateway (and its
 * on-link neighbours) resolve to the node. A solicitation for one of the
 * node's own addresses goes to the stack, which answers it itself.
 */
#ifndef __LIB_ICMP6_H_
#define __LIB_ICMP6_H_

#include "endpoint.h"
#include "ipv6.h"

#define ICMP6_NS	135
#define ICMP6_NA	136

/* Advertisement flags, in the first byte after the checksum. */
#define ICMP6_NA_ROUTER		0x80
#define ICMP6_NA_SOLICITED	0x40
#define ICMP6_NA_OVERRIDE	0x20

#define ND_OPT_SOURCE_LL_ADDR	1
#define ND_OPT_TARGET_LL_ADDR	2

/* A solicitation carrying its source link-layer option, and the
 * advertisement it becomes in place (32 bytes either way). */
struct icmp6_nd {
	__u8 type;
	__u8 code;
	__u16 csum;
	__u8 flags;
	__u8 reserved[3];
	union v6addr target;
	__u8 opt_type;
	__u8 opt_len;		/* in units of 8 bytes */
	__u8 lladdr[ETH_ALEN];
};

struct ipv6_pseudo_hdr {
	union v6addr saddr;
	union v6addr daddr;
	__u32 len;		/* network order */
	__u8 zero[3];
	__u8 nexthdr;
};

#define NDP_NOT_HANDLED	1

/* Turns the solicitation at ip6 into the advertisement for its target from
 * router with `flags`, addressed back to its sender with node_mac, and
 * sends it out of the interface it came in on. */
static __always_inline int icmp6_send_na(struct __sk_buff *ctx, const union v6addr *router,
					 const __u8 *node_mac, __u8 flags)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	struct icmp6_nd *nd = (void *)(ip6 + 1);
	struct ipv6_pseudo_hdr ph = {};
	struct icmp6_nd na = {};
	__s64 sum;

	if ((void *)(nd + 1) > data_end)
		return -DROP_INVALID;
	na.type = ICMP6_NA;
	na.flags = flags;
	na.target = nd->target;
	na.opt_type = ND_OPT_TARGET_LL_ADDR;
	na.opt_len = 1;
	__builtin_memcpy(na.lladdr, node_mac, ETH_ALEN);

	__builtin_memcpy(ph.daddr.addr, &ip6->saddr, sizeof(ph.daddr));
	ph.saddr = *router;
	ph.len = bpf_htonl(sizeof(na));
	ph.nexthdr = NEXTHDR_ICMP;
	sum = bpf_csum_diff(NULL, 0, (__be32 *)&ph, sizeof(ph), 0);
	if (sum < 0)
		return -DROP_INVALID;
	sum = bpf_csum_diff(NULL, 0, (__be32 *)&na, sizeof(na), (__u32)sum);
	if (sum < 0)
		return -DROP_INVALID;
	na.csum = csum_fold32(sum);

	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, node_mac, ETH_ALEN);
	__builtin_memcpy(&ip6->daddr, &ph.daddr, sizeof(ph.daddr));
	__builtin_memcpy(&ip6->saddr, router, sizeof(*router));
	ip6->payload_len = bpf_htons(sizeof(na));
	ip6->hop_limit = 255;
	*nd = na;
	return bpf_redirect(ctx->ifindex, 0);
}

/*
 * NDP from a pod (ICMPv6 straight after the IPv6 header). Returns
 * CTX_ACT_REDIRECT with the answer in the packet, CTX_ACT_OK for what the
 * stack takes without policy (advertisements, solicitations for the node's
 * own addresses), NDP_NOT_HANDLED for anything that is not NDP, or a
 * negative drop reason (an unknown target: 1.16's DROP_UNKNOWN_TARGET).
 */
static __always_inline int icmp6_ndp_from_lxc(struct __sk_buff *ctx, const union v6addr *router)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	struct icmp6_nd *nd = (void *)(ip6 + 1);
	struct endpoint_info *sender, *target;
	union v6addr saddr, taddr;

	if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != NEXTHDR_ICMP)
		return NDP_NOT_HANDLED;
	if ((void *)nd + 1 > data_end)
		return -DROP_INVALID;
	if (nd->type == ICMP6_NA)
		return CTX_ACT_OK;
	if (nd->type != ICMP6_NS)
		return NDP_NOT_HANDLED;
	/* Only a solicitation with its source link-layer option has the room
	 * the advertisement is written into; DAD probes (from ::) carry none. */
	if ((void *)(nd + 1) > data_end || bpf_ntohs(ip6->payload_len) != sizeof(*nd) ||
	    nd->opt_type != ND_OPT_SOURCE_LL_ADDR)
		return CTX_ACT_OK;

	__builtin_memcpy(saddr.addr, &ip6->saddr, sizeof(saddr));
	sender = lookup_ip6_endpoint(&saddr);
	if (!is_local_pod(sender) || sender->ifindex != ctx->ifindex)
		return CTX_ACT_OK;

	taddr = nd->target;
	if (ipv6_addr_equals(&taddr, router))
		return icmp6_send_na(ctx, router, sender->node_mac,
				     ICMP6_NA_ROUTER | ICMP6_NA_SOLICITED);
	target = lookup_ip6_endpoint(&taddr);
	if (!target)
		return -DROP_UNKNOWN_TARGET;
	if (target->flags & ENDPOINT_F_HOST)
		return CTX_ACT_OK;
	return icmp6_send_na(ctx, router, sender->node_mac,
			     ICMP6_NA_SOLICITED | ICMP6_NA_OVERRIDE);
}

#endif /* __LIB_ICMP6_H_ */
