/* SPDX-License-Identifier: Apache-2.0 */
/* Programs on cilium_vxlan: packets other nodes sent through the overlay,
 * and packets leaving through it. */
#define SOURCE_FILE SOURCE_FILE_BPF_OVERLAY

#include <linux/if_packet.h>

#include "lib/common.h"
#include "lib/maps.h"
#include "lib/metrics.h"
#include "lib/drop.h"
#include "lib/eth.h"
#include "lib/ipv4.h"
#include "lib/ipv6.h"
#include "lib/endpoint.h"
#include "lib/conntrack.h"
#include "lib/l3.h"
#include "lib/encap.h"
#include "lib/lb.h"
#include "lib/policy.h"

/* The sender's identity rides in the VNI. A node never sends as host (it
 * uses remote-node), so a host VNI is forged. */
static __always_inline int overlay_source_identity(struct __sk_buff *ctx, __u32 *src_id)
{
	int ret;

	ret = tunnel_source_identity(ctx, src_id);
	if (IS_ERR(ret))
		return ret;
	if (*src_id == IDENTITY_HOST)
		return -DROP_INVALID_IDENTITY;
	return 0;
}

/* For remote-node the ipcache may know better (`info`, the sender's
 * entry): a pod the VNI could not name. Callers look it up only for
 * remote-node, as Cilium does, sparing every pod's packet the trie. */
static __always_inline __u32 remote_node_refined(__u32 src_id,
						 const struct remote_endpoint_info *info)
{
	return info ? info->sec_identity : src_id;
}

static __always_inline int handle_ipv4_from_overlay(struct __sk_buff *ctx)
{
	struct endpoint_info *ep = NULL;
	struct iphdr *ip4;
	__u32 src_id = IDENTITY_UNKNOWN;
	int ret;

	ip4 = ipv4_hdr(ctx);
	if (!ip4) {
		ret = -DROP_INVALID;
		goto drop;
	}
	ret = overlay_source_identity(ctx, &src_id);
	if (IS_ERR(ret))
		goto drop;
	if (src_id == IDENTITY_REMOTE_NODE)
		src_id = remote_node_refined(src_id, lookup_ip4_remote(ip4->saddr));
	/* The inner destination MAC is the sender's gateway, not ours: without
	 * this the receiving stack would discard the packet as not for us. */
	if (bpf_skb_change_type(ctx, PACKET_HOST) < 0) {
		ret = -DROP_WRITE_ERROR;
		goto drop;
	}
	ep = lookup_ip4_endpoint(ip4->daddr);
	if (!is_local_pod(ep)) {
		/* this node's own addresses: the host stack takes it */
		update_metrics(ctx->len, METRIC_INGRESS, REASON_FORWARDED, 0, 0);
		return CTX_ACT_OK;
	}
	ret = policy_tail_call_ingress(ctx, ep, ip4->daddr, src_id, POLICY_F_PEER);
drop:
	return send_drop_notify(ctx, src_id, ep ? ep->sec_id : IDENTITY_UNKNOWN,
				ep ? ep->lxc_id : 0, ret, METRIC_INGRESS, 0);
}

#ifdef ENABLE_IPV6
/* IPv6 inside the IPv4 tunnel: the same way to a local pod. */
static __always_inline int handle_ipv6_from_overlay(struct __sk_buff *ctx)
{
	struct endpoint_info *ep = NULL;
	struct ipv6hdr *ip6;
	union v6addr saddr, daddr;
	__u32 src_id = IDENTITY_UNKNOWN;
	int ret;

	ip6 = ipv6_hdr(ctx);
	if (!ip6) {
		ret = -DROP_INVALID;
		goto drop;
	}
	ipv6_saddr(ip6, &saddr);
	ipv6_daddr(ip6, &daddr);
	ret = overlay_source_identity(ctx, &src_id);
	if (IS_ERR(ret))
		goto drop;
	if (src_id == IDENTITY_REMOTE_NODE)
		src_id = remote_node_refined(src_id, lookup_ip6_remote(&saddr));
	/* a dual-stack sender's world is the IPv6 world here (1.16's
	 * get_id_from_tunnel_id) */
	if (src_id == IDENTITY_WORLD)
		src_id = IDENTITY_WORLD_IPV6;
	if (bpf_skb_change_type(ctx, PACKET_HOST) < 0) {
		ret = -DROP_WRITE_ERROR;
		goto drop;
	}
	ep = lookup_ip6_endpoint(&daddr);
	if (!is_local_pod(ep)) {
		update_metrics(ctx->len, METRIC_INGRESS, REASON_FORWARDED, 0, 0);
		return CTX_ACT_OK;
	}
	ret = policy_tail_call_ingress(ctx, ep, 0, src_id, POLICY_F_PEER);
drop:
	return send_drop_notify(ctx, src_id, ep ? ep->sec_id : IDENTITY_UNKNOWN,
				ep ? ep->lxc_id : 0, ret, METRIC_INGRESS, 0);
}
#endif /* ENABLE_IPV6 */

/* Decapsulated packets (tc ingress of cilium_vxlan). */
__section_entry
int cil_from_overlay(struct __sk_buff *ctx)
{
	__u16 proto = 0;
	int ret;

	ret = validate_ethertype(ctx, &proto);
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
					ret, METRIC_INGRESS, 0);
	if (proto == ETH_P_IP)
		return handle_ipv4_from_overlay(ctx);
#ifdef ENABLE_IPV6
	if (proto == ETH_P_IPV6)
		return handle_ipv6_from_overlay(ctx);
#endif
	return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
				-DROP_UNKNOWN_L3, METRIC_INGRESS, 0);
}

/* Packets leaving through cilium_vxlan (tc egress). Only what the datapath
 * encapsulated carries a tunnel key; the device would silently discard
 * anything else the stack routed here, so it is dropped here with a reason. */
__section_entry
int cil_to_overlay(struct __sk_buff *ctx)
{
	__u32 src_id = IDENTITY_UNKNOWN;
	int ret;

	ret = tunnel_source_identity(ctx, &src_id);
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN,
					0, ret, METRIC_EGRESS, 0);
	return CTX_ACT_OK;
}

char __license[] SEC("license") = "Dual BSD/GPL";
