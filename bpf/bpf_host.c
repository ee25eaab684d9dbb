/* SPDX-License-Identifier: Apache-2.0 */
/* Programs on cilium_host: the node's own traffic towards its pods. */
#define SOURCE_FILE SOURCE_FILE_BPF_HOST

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
#include "lib/fib.h"
#include "lib/encap.h"
#include "lib/nat.h"
#include "lib/nat6.h"
#include "lib/nodeport6.h"
#include "lib/nodeport.h"
#include "lib/reject.h"
#include "lib/policy.h"

/* The node's own packets to a pod on another node (behind tunnel_ep, 0
 * when none) go through the overlay as Cilium's LOCAL_NODE_ID, which the
 * far side sees as remote-node. */
static __always_inline int host_to_remote_pod(struct __sk_buff *ctx, __u32 tunnel_ep)
{
	int ret;

	if (!tunnel_ep)
		return CTX_ACT_OK;
	ret = encap_and_redirect4(ctx, tunnel_ep, IDENTITY_REMOTE_NODE);
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_HOST, IDENTITY_UNKNOWN, 0,
					ret, METRIC_EGRESS, 0);
	update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
	return ret;
}

/* A packet for local pod `ep` handed over by the host's stack or the
 * native device: through the pod's ingress policy, judged by the sender's
 * identity in the ipcache. Returns only when it was dropped. */
static __always_inline int ipcache_sender_to_pod(struct __sk_buff *ctx,
						 const struct iphdr *ip4,
						 const struct endpoint_info *ep, __u32 flags)
{
	__u32 src_id = ip4_identity(ip4->saddr);
	int ret = policy_tail_call_ingress(ctx, ep, ip4->daddr, src_id, flags);

	return send_drop_notify(ctx, src_id, ep->sec_id, ep->lxc_id, ret, METRIC_INGRESS, 0);
}

/* Packets the host stack routes into cilium_host (tc egress): the pod CIDR
 * routes point here, so pod-bound traffic is tracked as the pod's ingress
 * and handed to its veth, or sent through the overlay when the pod lives on
 * another node; the rest continues to cilium_net as the kernel intended.
 * Pods need no program on their veth's egress this way. */
#ifdef ENABLE_IPV6
/* cil_from_host for IPv6: into a local pod through its ingress policy, or
 * through the overlay to a pod elsewhere; the rest (neighbour discovery
 * among it) goes on as the kernel intended. */
static __always_inline int ipv6_from_host(struct __sk_buff *ctx)
{
	struct endpoint_info *ep;
	struct ipv6hdr *ip6;
	union v6addr saddr, daddr;
	__u32 src_id;
	int ret;

	ip6 = ipv6_hdr(ctx);
	if (!ip6)
		return send_drop_notify(ctx, IDENTITY_HOST, IDENTITY_UNKNOWN, 0,
					-DROP_INVALID, METRIC_EGRESS, 0);
	ipv6_saddr(ip6, &saddr);
	ipv6_daddr(ip6, &daddr);
	ep = lookup_ip6_endpoint(&daddr);
	if (is_local_pod(ep)) {
		src_id = ip6_identity(&saddr);
		ret = policy_tail_call_ingress(ctx, ep, 0, src_id, 0);
		return send_drop_notify(ctx, src_id, ep->sec_id, ep->lxc_id, ret,
					METRIC_INGRESS, 0);
	}
	return host_to_remote_pod(ctx, tunnel_endpoint6(lookup_ip6_remote(&daddr)));
}
#endif /* ENABLE_IPV6 */

__section_entry
int cil_from_host(struct __sk_buff *ctx)
{
	struct endpoint_info *ep;
	struct iphdr *ip4;
	__u16 proto = 0;
	int ret;

	ret = validate_ethertype(ctx, &proto);
#ifdef ENABLE_IPV6
	if (!IS_ERR(ret) && proto == ETH_P_IPV6)
		return ipv6_from_host(ctx);
#endif
	if (IS_ERR(ret) || proto != ETH_P_IP)
		return CTX_ACT_OK;
	ip4 = ipv4_hdr(ctx);
	if (!ip4)
		return send_drop_notify(ctx, IDENTITY_HOST, IDENTITY_UNKNOWN, 0,
					-DROP_INVALID, METRIC_EGRESS, 0);
	ep = lookup_ip4_endpoint(ip4->daddr);
	if (!is_local_pod(ep))
		return host_to_remote_pod(ctx, tunnel_endpoint4(ip4->daddr,
								lookup_ip4_remote(ip4->daddr)));
	return ipcache_sender_to_pod(ctx, ip4, ep, 0);
}

/* With BPF host routing, a packet for a pod of this node that arrived on
 * the native device (native routing, or from outside the cluster) goes
 * straight into the pod through its ingress policy, judged by the
 * sender's identity in the ipcache, instead of through the stack and
 * cilium_host. Anything else stays the stack's. */
static __always_inline int netdev_to_local_pod(struct __sk_buff *ctx)
{
	struct endpoint_info *ep;
	struct iphdr *ip4;

	if (!host_routing_enabled())
		return CTX_ACT_OK;
	ip4 = ipv4_hdr(ctx);
	if (!ip4)
		return CTX_ACT_OK;
	ep = lookup_ip4_endpoint(ip4->daddr);
	if (!is_local_pod(ep))
		return CTX_ACT_OK;
	return ipcache_sender_to_pod(ctx, ip4, ep, POLICY_F_PEER);
}

/* The translations of a packet arriving on the native device: NodePort's
 * and, for IPv6, masquerading's replies (IPv4's are NodePort's business). */
static __always_inline int from_netdev_translate(struct __sk_buff *ctx, __u16 proto)
{
#ifdef ENABLE_IPV6
	if (proto == ETH_P_IPV6) {
		int ret = nodeport_lb6(ctx);

		return ret == CTX_ACT_OK ? snat_v6_rev(ctx) : ret;
	}
#endif
	return proto == ETH_P_IP ? nodeport_lb4(ctx) : CTX_ACT_OK;
}

/* Packets arriving on the node's native device (tc ingress): NodePort
 * connections and their backends' replies, replies of masqueraded flows
 * of either family, and with BPF host routing packets for local pods; the
 * rest is the stack's. */
__section_entry
int cil_from_netdev(struct __sk_buff *ctx)
{
	__u16 proto = 0;
	int ret, verdict;

	ret = validate_ethertype(ctx, &proto);
	if (IS_ERR(ret))
		return CTX_ACT_OK;
	ret = from_netdev_translate(ctx, proto);
	if (IS_ERR(ret)) {
		verdict = send_drop_notify(ctx, IDENTITY_WORLD, IDENTITY_UNKNOWN, 0,
					   ret, METRIC_INGRESS, 0);
		return reject_no_service(ctx, ret, verdict);
	}
	if (ret != CTX_ACT_OK) {
		update_metrics(ctx->len, METRIC_INGRESS, REASON_FORWARDED, 0, 0);
		return ret;
	}
	return netdev_to_local_pod(ctx);
}

/* Packets leaving through the node's native device (tc egress): pods'
 * traffic of either family leaving the cluster is masqueraded here when
 * BPF masquerading is on; the rest goes as it is. */
__section_entry
int cil_to_netdev(struct __sk_buff *ctx)
{
	__u16 proto = 0;
	int ret;

	ret = validate_ethertype(ctx, &proto);
	if (IS_ERR(ret))
		return CTX_ACT_OK;
	if (proto == ETH_P_IP)
		ret = snat_v4_masquerade(ctx);
#ifdef ENABLE_IPV6
	else if (proto == ETH_P_IPV6)
		ret = snat_v6_masquerade(ctx);
#endif
	else
		return CTX_ACT_OK;
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_WORLD, 0, ret,
					METRIC_EGRESS, 0);
	return ret;
}

char __license[] SEC("license") = "Dual BSD/GPL";
