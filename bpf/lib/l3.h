/* SPDX-License-Identifier: Apache-2.0 */
/* Routing a packet to a pod on this node without the host stack. */
#ifndef __LIB_L3_H_
#define __LIB_L3_H_

#include <stddef.h>
#include "common.h"
#include "ipv6.h"

/* Returns 0, or a negative drop reason when the TTL runs out. */
static __always_inline int ipv4_dec_ttl(struct __sk_buff *ctx)
{
	int off = ETH_HLEN + offsetof(struct iphdr, ttl);
	__u8 ttl, new_ttl;

	if (bpf_skb_load_bytes(ctx, off, &ttl, 1) < 0)
		return -DROP_INVALID;
	if (ttl <= 1)
		return -DROP_TTL_EXCEEDED;
	new_ttl = ttl - 1;
	/* TTL is the high byte of its checksum word in network order */
	if (bpf_l3_csum_replace(ctx, ETH_HLEN + offsetof(struct iphdr, check),
				ttl, new_ttl, 2) < 0 ||
	    bpf_skb_store_bytes(ctx, off, &new_ttl, 1, 0) < 0)
		return -DROP_WRITE_ERROR;
	return 0;
}

static __always_inline int eth_rewrite(struct __sk_buff *ctx, const __u8 *src,
				       const __u8 *dst)
{
	if (bpf_skb_store_bytes(ctx, 0, dst, ETH_ALEN, 0) < 0 ||
	    bpf_skb_store_bytes(ctx, ETH_ALEN, src, ETH_ALEN, 0) < 0)
		return -DROP_WRITE_ERROR;
	return 0;
}

/*
 * Hands the packet to a local pod as its gateway would: MACs rewritten to
 * veth -> pod, TTL (IPv6: hop limit) decremented. From a tc ingress hook the packet goes
 * straight into the pod's namespace (bpf_redirect_peer); elsewhere it is
 * sent out of the host-side veth.
 */
static __always_inline int local_delivery(struct __sk_buff *ctx,
					  const struct endpoint_info *ep,
					  int from_ingress)
{
	__u8 node_mac[ETH_ALEN], pod_mac[ETH_ALEN];
	__u32 ifindex = ep->ifindex;
	int ret;

	__builtin_memcpy(node_mac, ep->node_mac, ETH_ALEN);
	__builtin_memcpy(pod_mac, ep->mac, ETH_ALEN);
	ret = ctx->protocol == bpf_htons(ETH_P_IPV6) ? ipv6_dec_hoplimit(ctx) : ipv4_dec_ttl(ctx);
	if (ret < 0)
		return ret;
	ret = eth_rewrite(ctx, node_mac, pod_mac);
	if (ret < 0)
		return ret;
	if (from_ingress)
		return bpf_redirect_peer(ifindex, 0);
	return bpf_redirect(ifindex, 0);
}

#endif /* __LIB_L3_H_ */
