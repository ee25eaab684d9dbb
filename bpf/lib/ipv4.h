/* SPDX-License-Identifier: Apache-2.0 */
/* IPv4 header access and validation. */
#ifndef __LIB_IPV4_H_
#define __LIB_IPV4_H_

#include "common.h"

static __always_inline struct iphdr *ipv4_hdr(struct __sk_buff *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip4 = data + ETH_HLEN;

	if ((void *)(ip4 + 1) > data_end)
		return NULL;
	if (ip4->ihl < 5 || ip4->version != 4)
		return NULL;
	return ip4;
}

/* A non-first fragment carries no L4 header to track or deliver by. */
static __always_inline int ipv4_is_fragment(const struct iphdr *ip4)
{
	return ip4->frag_off & bpf_htons(0x1fff);
}

/* The first fragment of a datagram that has more (its header has ports). */
static __always_inline int ipv4_is_first_fragment(const struct iphdr *ip4)
{
	return (ip4->frag_off & bpf_htons(0x3fff)) == bpf_htons(0x2000);
}

static __always_inline int ipv4_l4_off(const struct iphdr *ip4)
{
	return ETH_HLEN + ip4->ihl * 4;
}

#endif /* __LIB_IPV4_H_ */
