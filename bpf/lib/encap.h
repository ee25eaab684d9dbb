/* SPDX-License-Identifier: Apache-2.0 */
/* VXLAN: sending to the node that hosts a remote pod, with the source
 * identity carried in the VNI as Cilium does. */
#ifndef __LIB_ENCAP_H_
#define __LIB_ENCAP_H_

#include "common.h"
#include "maps.h"
#include "runtime_config.h"

#define TUNNEL_TTL	64

/*
 * The underlay address of the node behind daddr, or 0 when daddr is not
 * behind the overlay. The ipcache's tunnel endpoint wins; the tunnel map,
 * keyed by pod CIDR under this node's mask, covers addresses the ipcache
 * has not learned yet. Without an encap device (native routing) nothing is
 * behind an overlay: the ipcache still names each pod's node, but the
 * packet goes to the stack, whose routes reach that node directly.
 */
static __always_inline __u32
tunnel_endpoint4(__u32 daddr, const struct remote_endpoint_info *info)
{
	struct tunnel_key key = {};
	struct tunnel_value *tv;
	__u32 mask;

	if (!runtime_config(RUNTIME_CONFIG_ENCAP_IFINDEX))
		return 0;
	if (info && (info->flags & IPCACHE_F_SKIP_TUNNEL))
		return 0;
	if (info && info->tunnel_endpoint)
		return info->tunnel_endpoint;
	mask = (__u32)runtime_config(RUNTIME_CONFIG_IPV4_MASK);
	if (!mask)
		return 0;
	key.addr.ip4 = daddr & mask;
	key.family = ENDPOINT_KEY_IPV4;
	tv = bpf_map_lookup_elem(&cilium_tunnel_map, &key);
	return tv ? tv->addr.ip4 : 0;
}

/* The IPv4 underlay address of the node behind an IPv6 destination (1.16
 * tunnels IPv6 over an IPv4 underlay only), from the ipcache alone: the
 * tunnel map has no IPv6 pod CIDRs. */
static __always_inline __u32 tunnel_endpoint6(const struct remote_endpoint_info *info)
{
	if (!runtime_config(RUNTIME_CONFIG_ENCAP_IFINDEX) || !info ||
	    (info->flags & IPCACHE_F_SKIP_TUNNEL))
		return 0;
	return info->tunnel_endpoint;
}

/* Hands the packet to cilium_vxlan for tunnel_ep (network order). */
static __always_inline int encap_and_redirect4(struct __sk_buff *ctx,
					       __u32 tunnel_ep, __u32 src_id)
{
	struct bpf_tunnel_key key = {};
	__u32 ifindex;

	ifindex = (__u32)runtime_config(RUNTIME_CONFIG_ENCAP_IFINDEX);
	if (!ifindex)
		return -DROP_NO_TUNNEL_ENDPOINT;
	key.tunnel_id = src_id;
	key.remote_ipv4 = bpf_ntohl(tunnel_ep);
	key.tunnel_ttl = TUNNEL_TTL;
	if (bpf_skb_set_tunnel_key(ctx, &key, sizeof(key),
				   BPF_F_ZERO_CSUM_TX) < 0)
		return -DROP_WRITE_ERROR;
	ctx->mark = (ctx->mark & ~MARK_MAGIC_MASK) | MARK_MAGIC_OVERLAY;
	return bpf_redirect(ifindex, 0);
}

/* The sender's identity from the VNI of a decapsulated packet. */
static __always_inline int tunnel_source_identity(struct __sk_buff *ctx,
						  __u32 *src_id)
{
	struct bpf_tunnel_key key = {};

	if (bpf_skb_get_tunnel_key(ctx, &key, sizeof(key), 0) < 0)
		return -DROP_NO_TUNNEL_KEY;
	*src_id = key.tunnel_id;
	return 0;
}

#endif /* __LIB_ENCAP_H_ */
