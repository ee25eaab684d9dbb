/* SPDX-License-Identifier: Apache-2.0 */
/* IPv6 header access: the extension header walk that finds L4, the hop
 * limit, and the node's IPv6 router address. */
#ifndef __LIB_IPV6_H_
#define __LIB_IPV6_H_

#include <stddef.h>
#include <linux/ipv6.h>
#include "common.h"
#include "runtime_config.h"

#define NEXTHDR_HOP		0
#define NEXTHDR_ROUTING		43
#define NEXTHDR_FRAGMENT	44
#define NEXTHDR_AUTH		51
#define NEXTHDR_ICMP		58
#define NEXTHDR_NONE		59
#define NEXTHDR_DEST		60

/* 1.16's IPV6_MAX_HEADERS: more extension headers than this are refused */
#define IPV6_MAX_HEADERS	4

/* The router address (1.16's ROUTER_IP for IPv6) from the runtime config,
 * its two halves as the agent stored them; false while IPv6 is off. */
static __always_inline int ipv6_router(union v6addr *router)
{
	return runtime_config_ipv6(RUNTIME_CONFIG_ROUTER_IPV6_HI, RUNTIME_CONFIG_ROUTER_IPV6_LO,
				   router);
}

static __always_inline int ipv6_addr_equals(const union v6addr *a, const union v6addr *b)
{
	return a->d[0] == b->d[0] && a->d[1] == b->d[1];
}

static __always_inline struct ipv6hdr *ipv6_hdr(struct __sk_buff *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6 = data + ETH_HLEN;

	if ((void *)(ip6 + 1) > data_end || ip6->version != 6)
		return NULL;
	return ip6;
}

static __always_inline void ipv6_saddr(const struct ipv6hdr *ip6, union v6addr *out)
{
	__builtin_memcpy(out->addr, &ip6->saddr, sizeof(out->addr));
}

static __always_inline void ipv6_daddr(const struct ipv6hdr *ip6, union v6addr *out)
{
	__builtin_memcpy(out->addr, &ip6->daddr, sizeof(out->addr));
}

#define IPV6_FRAG_NONE	0
#define IPV6_FRAG_FIRST	1	/* offset 0, more to come: it has the L4 header */
#define IPV6_FRAG_LATER	2	/* no L4 header */

/* Where a packet's L4 header lies, past its extension headers. */
struct ipv6_l4 {
	int off;		/* from the start of the frame */
	__u8 nexthdr;		/* the L4 protocol */
	__u8 fragment;		/* IPV6_FRAG_* */
	__u32 frag_id;		/* the fragment header's identification */
};

/* An extension header's first bytes; a fragment header is all of these. */
struct ipv6_opt_hdr8 {
	__u8 nexthdr;
	__u8 hdrlen;
	__be16 frag_off;	/* fragment header: offset << 3, bit 0 "more" */
	__be32 id;
};

/*
 * Walks at most IPV6_MAX_HEADERS extension headers as 1.16 does (hop by
 * hop, routing, destination options, authentication), where 1.16 refuses
 * a fragment header our fragment tracking reads it: a first fragment goes
 * on to its L4 header, a later one stops there (it has none). Returns 0 or
 * a negative drop reason.
 */
static __always_inline int ipv6_l4(struct __sk_buff *ctx, const struct ipv6hdr *ip6,
				   struct ipv6_l4 *l4)
{
	int off = ETH_HLEN + sizeof(struct ipv6hdr);
	__u8 nh = ip6->nexthdr;

	l4->fragment = IPV6_FRAG_NONE;
	l4->frag_id = 0;
#pragma unroll
	for (int i = 0; i < IPV6_MAX_HEADERS; i++) {
		struct ipv6_opt_hdr8 opt;

		switch (nh) {
		case NEXTHDR_NONE:
			return -DROP_INVALID_EXTHDR;
		case NEXTHDR_HOP:
		case NEXTHDR_ROUTING:
		case NEXTHDR_DEST:
		case NEXTHDR_AUTH:
		case NEXTHDR_FRAGMENT:
			if (bpf_skb_load_bytes(ctx, off, &opt, sizeof(opt)) < 0)
				return -DROP_INVALID;
			break;
		default:
			l4->off = off;
			l4->nexthdr = nh;
			return 0;
		}
		if (nh == NEXTHDR_FRAGMENT) {
			/* an atomic fragment (offset 0, no more) is a whole datagram */
			if (opt.frag_off & bpf_htons(0xfff8)) {
				l4->off = off + sizeof(opt);
				l4->nexthdr = opt.nexthdr;
				l4->fragment = IPV6_FRAG_LATER;
				l4->frag_id = opt.id;
				return 0;
			}
			if (opt.frag_off & bpf_htons(1)) {
				l4->fragment = IPV6_FRAG_FIRST;
				l4->frag_id = opt.id;
			}
			off += sizeof(opt);
		} else if (nh == NEXTHDR_AUTH) {
			off += (opt.hdrlen + 2) * 4;
		} else {
			off += (opt.hdrlen + 1) * 8;
		}
		nh = opt.nexthdr;
	}
	return -DROP_INVALID_EXTHDR;
}

/* Returns 0, or a negative drop reason when the hop limit runs out. IPv6
 * has no header checksum to fix. */
static __always_inline int ipv6_dec_hoplimit(struct __sk_buff *ctx)
{
	int off = ETH_HLEN + offsetof(struct ipv6hdr, hop_limit);
	__u8 hl;

	if (bpf_skb_load_bytes(ctx, off, &hl, 1) < 0)
		return -DROP_INVALID;
	if (hl <= 1)
		return -DROP_TTL_EXCEEDED;
	hl--;
	if (bpf_skb_store_bytes(ctx, off, &hl, 1, 0) < 0)
		return -DROP_WRITE_ERROR;
	return 0;
}

#endif /* __LIB_IPV6_H_ */
