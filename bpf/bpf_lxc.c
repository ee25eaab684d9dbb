/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Programs on the host side of pod veths. One object serves every endpoint:
 * per-endpoint facts come from maps, never from per-pod compiled constants.
 */
#define SOURCE_FILE SOURCE_FILE_BPF_LXC

#include "lib/common.h"
#include "lib/maps.h"
#include "lib/metrics.h"
#include "lib/drop.h"
#include "lib/eth.h"
#include "lib/ipv4.h"
#include "lib/endpoint.h"
#include "lib/conntrack.h"
#include "lib/conntrack6.h"
#include "lib/arp.h"
#include "lib/icmp6.h"
#include "lib/l3.h"
#include "lib/fib.h"
#include "lib/encap.h"
#include "lib/lb.h"
#include "lib/lb6.h"
#include "lib/reject.h"
#include "lib/nodeport.h"
#include "lib/nodeport6.h"
#include "lib/policy.h"
#include "lib/trace.h"
#include "lib/dbg.h"

static __always_inline int handle_ipv4_from_lxc(struct __sk_buff *ctx)
{
	struct endpoint_info *src_ep, *dst_ep;
	struct ct_state ct = {};
	__u32 tunnel_ep, daddr, dst_id = IDENTITY_UNKNOWN;
	struct ct_packet pkt;
	struct iphdr *ip4;
	__u32 sec_id = IDENTITY_UNKNOWN;
	int ret, l4_off, verdict;
	__u8 proto, drop_dir = METRIC_EGRESS;
	__u16 drop_ep = 0, src_lxc = 0;

	ip4 = ipv4_hdr(ctx);
	if (!ip4) {
		ret = -DROP_INVALID;
		goto drop;
	}
	/* A pod may only send from the address the agent gave it. */
	src_ep = lookup_ip4_endpoint(ip4->saddr);
	if (!is_local_pod(src_ep) || src_ep->ifindex != ctx->ifindex) {
		ret = -DROP_INVALID_SIP;
		goto drop;
	}
	sec_id = src_ep->sec_id;
	src_lxc = src_ep->lxc_id;
	l4_off = ipv4_l4_off(ip4);
	proto = ip4->protocol;
	ret = ct_parse4(ctx, ip4, &pkt);
	if (ret < 0)
		goto drop;
	/* A service frontend becomes the flow's backend; from here on the
	 * packet and its tuple name the backend (ip4 is stale). */
	ret = lb4_local(ctx, l4_off, &pkt, &ct);
	if (ret < 0)
		goto drop;
	daddr = pkt.tuple.daddr;
	dst_id = daddr == IPV4_LOOPBACK ? sec_id : ip4_identity(daddr);
	ret = ct_track4_policy(ctx, &pkt, CT_EGRESS, sec_id, 0, &ct, src_ep->lxc_id, dst_id);
	if (ret < 0)
		goto drop;

	/* A reply to a NodePort client that kept its address: back out of the
	 * native device, from the node address and port the client reached,
	 * wherever the client is. */
	if (ct.node_port && ct.status == CT_REPLY) {
		struct ipv4_nat_entry *nat;

		nat = nodeport_reply_nat(pkt.tuple.saddr, daddr, pkt.tuple.dport,
					 pkt.tuple.sport, proto);
		if (nat) {
			ret = nodeport_reply(ctx, l4_off, proto, nat);
			if (ret < 0)
				goto drop;
			update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
			return ret;
		}
	}

	/* a hairpin reply goes back into the pod it came from */
	dst_ep = daddr == IPV4_LOOPBACK ? src_ep : lookup_ip4_endpoint(daddr);
	if (is_local_pod(dst_ep)) {
		/* the destination pod's side of the same packet, in its own
		 * ingress; a pod reaching itself through a service is not
		 * subject to its ingress policy */
		drop_dir = METRIC_INGRESS;
		drop_ep = dst_ep->lxc_id;
		update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
		ret = policy_tail_call_ingress(ctx, dst_ep,
					       daddr == IPV4_LOOPBACK ? pkt.tuple.saddr : daddr,
					       sec_id,
					       POLICY_F_PEER | (ct.loopback ? POLICY_F_SKIP : 0));
		goto drop;
	}

	tunnel_ep = tunnel_endpoint4(daddr, lookup_ip4_remote(daddr));
	if (tunnel_ep) {
		send_trace_notify(ctx, TRACE_TO_OVERLAY, src_lxc, sec_id, dst_id, 0, 0, ct.status,
				  pkt.tcp_flags);
		ret = encap_and_redirect4(ctx, tunnel_ep, sec_id);
		if (ret < 0)
			goto drop;
		update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
		return ret;
	}

	/* A reply keeps its source: its request reached the pod without
	 * passing the stack, so to netfilter (or to_netdev's masquerading)
	 * it would look new and be masqueraded. */
	if (ct.status == CT_REPLY)
		nat_done_set(ctx);
	/* Beyond the node: with BPF host routing, out of the device the FIB
	 * picks; the node itself, or what the FIB cannot answer, the host's
	 * stack routes. */
	if (dst_id != IDENTITY_HOST && host_routing_enabled()) {
		__u32 oif = 0;

		ret = fib_redirect4(ctx, pkt.tuple.saddr, daddr, &oif);
		if (ret < 0)
			goto drop;
		if (ret != FIB_TO_STACK) {
			send_trace_notify(ctx, TRACE_TO_NETWORK, src_lxc, sec_id, dst_id, 0, oif,
					  ct.status, pkt.tcp_flags);
			update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
			return ret;
		}
	}
	send_trace_notify(ctx, TRACE_TO_STACK, src_lxc, sec_id, dst_id, 0, 0, ct.status,
			  pkt.tcp_flags);
	update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
	return CTX_ACT_OK;
drop:
	verdict = send_drop_notify(ctx, sec_id, dst_id, drop_ep, ret, drop_dir, src_lxc);
	return reject_no_service(ctx, ret, verdict);
}

/* The end of an endpoint's ingress, for either family: the packet its
 * policy let through is counted, traced and delivered. Returns the verdict
 * or a negative drop reason. */
static __always_inline int lxc_deliver(struct __sk_buff *ctx, const struct endpoint_info *ep,
				       __u32 src_id, __u32 flags, __u8 ct_status, __u8 tcp_flags)
{
	update_metrics(ctx->len, METRIC_INGRESS, REASON_FORWARDED, 0, 0);
	send_trace_notify(ctx, TRACE_TO_LXC, ep->lxc_id, src_id, ep->sec_id, ep->lxc_id,
			  ep->ifindex, ct_status, tcp_flags);
	send_debug_capture(ctx, DBG_CAPTURE_DELIVERY, ep->lxc_id, ep->ifindex);
	return local_delivery(ctx, ep, flags & POLICY_F_PEER);
}

static __always_inline int lxc_ingress_drop(struct __sk_buff *ctx,
					    const struct endpoint_info *ep, __u32 src_id, int ret)
{
	return send_drop_notify(ctx, src_id, ep ? ep->sec_id : IDENTITY_UNKNOWN,
				ep ? ep->lxc_id : 0, ret, METRIC_INGRESS, ep ? ep->lxc_id : 0);
}

#ifdef ENABLE_IPV6
/* IPv6 from a pod that is not neighbour discovery: IPv4's path, with
 * services balanced by lb6.h. The endpoint map and the ipcache are keyed
 * by the v6 address, the policy maps are shared by both families. */
static __always_inline int ipv6_from_lxc(struct __sk_buff *ctx)
{
	struct endpoint_info *src_ep, *dst_ep;
	struct remote_endpoint_info *info;
	struct ct_state ct = {};
	struct ct6_packet pkt;
	struct ipv6hdr *ip6;
	union v6addr saddr;
	__u32 tunnel_ep, sec_id = IDENTITY_UNKNOWN, dst_id = IDENTITY_UNKNOWN;
	__u8 drop_dir = METRIC_EGRESS;
	__u16 drop_ep = 0, src_lxc = 0;
	int ret, verdict;

	ip6 = ipv6_hdr(ctx);
	if (!ip6) {
		ret = -DROP_INVALID;
		goto drop;
	}
	ipv6_saddr(ip6, &saddr);
	src_ep = lookup_ip6_endpoint(&saddr);
	if (!is_local_pod(src_ep) || src_ep->ifindex != ctx->ifindex) {
		ret = -DROP_INVALID_SIP;
		goto drop;
	}
	sec_id = src_ep->sec_id;
	src_lxc = src_ep->lxc_id;
	ret = ct_parse6(ctx, ip6, &pkt);
	if (ret < 0)
		goto drop;
	/* from here on the packet and its tuple name the backend (ip6 is stale) */
	ret = lb6_local(ctx, &pkt, &ct);
	if (ret < 0)
		goto drop;
	info = lookup_ip6_remote(&pkt.tuple.daddr);
	dst_id = info ? info->sec_identity : IDENTITY_WORLD_IPV6;
	ret = ct_track6_policy(ctx, &pkt, CT_EGRESS, sec_id, 0, &ct, src_lxc, dst_id);
	if (ret < 0)
		goto drop;
	/* a reply to a NodePort client that kept its address */
	if (ct.node_port && ct.status == CT_REPLY) {
		ret = nodeport_local_reply6(ctx, &pkt);
		if (ret < 0)
			goto drop;
		if (ret) {
			update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
			return ret;
		}
	}

	dst_ep = lookup_ip6_endpoint(&pkt.tuple.daddr);
	if (is_local_pod(dst_ep)) {
		drop_dir = METRIC_INGRESS;
		drop_ep = dst_ep->lxc_id;
		update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
		/* the callee reads the endpoint's address from the packet */
		ret = policy_tail_call_ingress(ctx, dst_ep, 0, sec_id, POLICY_F_PEER);
		goto drop;
	}

	tunnel_ep = tunnel_endpoint6(info);
	if (tunnel_ep) {
		send_trace_notify(ctx, TRACE_TO_OVERLAY, src_lxc, sec_id, dst_id, 0, 0, ct.status,
				  pkt.tcp_flags);
		ret = encap_and_redirect4(ctx, tunnel_ep, sec_id);
		if (ret < 0)
			goto drop;
		update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
		return ret;
	}
	if (ct.status == CT_REPLY)
		nat_done_set(ctx);
	send_trace_notify(ctx, TRACE_TO_STACK, src_lxc, sec_id, dst_id, 0, 0, ct.status,
			  pkt.tcp_flags);
	update_metrics(ctx->len, METRIC_EGRESS, REASON_FORWARDED, 0, 0);
	return CTX_ACT_OK;
drop:
	verdict = send_drop_notify(ctx, sec_id, dst_id, drop_ep, ret, drop_dir, src_lxc);
	return reject_no_service(ctx, ret, verdict);
}

/* cil_lxc_policy for IPv6: the endpoint is the packet's destination. */
static __always_inline int ipv6_lxc_policy(struct __sk_buff *ctx, __u32 src_id, __u32 flags)
{
	struct endpoint_info *ep = NULL;
	struct ct_state ct = {};
	struct ct6_packet pkt;
	struct ipv6hdr *ip6;
	union v6addr daddr;
	int ret;

	ip6 = ipv6_hdr(ctx);
	if (!ip6) {
		ret = -DROP_INVALID;
		goto drop;
	}
	ipv6_daddr(ip6, &daddr);
	ep = lookup_ip6_endpoint(&daddr);
	if (!is_local_pod(ep)) {
		ret = -DROP_UNKNOWN_TARGET;
		goto drop;
	}
	ret = ct_parse6(ctx, ip6, &pkt);
	if (ret < 0)
		goto drop;
	ct.node_port = !!(flags & POLICY_F_NODEPORT);
	if (flags & POLICY_F_SKIP)
		ret = ct_track6(ctx, &pkt, CT_INGRESS, src_id, (__u16)ep->ifindex, &ct);
	else
		ret = ct_track6_policy(ctx, &pkt, CT_INGRESS, src_id, (__u16)ep->ifindex, &ct,
				       ep->lxc_id, src_id);
	if (ret < 0)
		goto drop;
	ret = lb6_rev_nat_ingress(ctx, &pkt, &ct);
	if (ret < 0)
		goto drop;
	ret = lxc_deliver(ctx, ep, src_id, flags, ct.status, pkt.tcp_flags);
	if (ret < 0)
		goto drop;
	return ret;
drop:
	return lxc_ingress_drop(ctx, ep, src_id, ret);
}
#endif /* ENABLE_IPV6 */

/*
 * An endpoint's ingress (Cilium's handle_policy), reached by tail call
 * through cilium_call_policy[endpoint ID] from every local delivery: the
 * flow is tracked for the endpoint, its ingress policy applied to the
 * source identity the caller saw, replies of balanced flows get the
 * frontend back, and the packet is delivered.
 */
__section_entry
int cil_lxc_policy(struct __sk_buff *ctx)
{
	__u32 src_id = ctx->cb[CB_SRC_LABEL], flags = ctx->cb[CB_POLICY_FLAGS];
	__u32 ep_addr = ctx->cb[CB_EP_ADDR];
	struct endpoint_info *ep;
	struct ct_state ct = {};
	struct ct_packet pkt;
	struct iphdr *ip4;
	int ret;

#ifdef ENABLE_IPV6
	if (ctx->protocol == bpf_htons(ETH_P_IPV6))
		return ipv6_lxc_policy(ctx, src_id, flags);
#endif
	ep = lookup_ip4_endpoint(ep_addr);
	ip4 = ipv4_hdr(ctx);
	if (!ip4) {
		ret = -DROP_INVALID;
		goto drop;
	}
	if (!is_local_pod(ep)) {
		ret = -DROP_UNKNOWN_TARGET;
		goto drop;
	}
	ret = ct_parse4(ctx, ip4, &pkt);
	if (ret < 0)
		goto drop;
	ct.node_port = !!(flags & POLICY_F_NODEPORT);
	if (flags & POLICY_F_SKIP)
		ret = ct_track4(ctx, &pkt, CT_INGRESS, src_id, (__u16)ep->ifindex, &ct);
	else
		ret = ct_track4_policy(ctx, &pkt, CT_INGRESS, src_id, (__u16)ep->ifindex, &ct,
				       ep->lxc_id, src_id);
	if (ret < 0)
		goto drop;
	ret = lb4_rev_nat_ingress(ctx, ipv4_l4_off(ip4), pkt.tuple.nexthdr, &ct, ep_addr);
	if (ret < 0)
		goto drop;
	ret = lxc_deliver(ctx, ep, src_id, flags, ct.status, pkt.tcp_flags);
	if (ret < 0)
		goto drop;
	return ret;
drop:
	return lxc_ingress_drop(ctx, ep, src_id, ret);
}

/* IPv6 from a pod: neighbour discovery is answered here and, in the
 * dual-stack build, the rest forwarded; nothing of it while IPv6 is off. */
static __always_inline int handle_ipv6_from_lxc(struct __sk_buff *ctx)
{
	union v6addr router;
	int ret = -DROP_UNKNOWN_L3;

	if (ipv6_router(&router)) {
		ret = icmp6_ndp_from_lxc(ctx, &router);
#ifdef ENABLE_IPV6
		if (ret == NDP_NOT_HANDLED)
			return ipv6_from_lxc(ctx);
#endif
		if (ret == NDP_NOT_HANDLED)
			ret = -DROP_UNKNOWN_L3;
	}
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
					ret, METRIC_EGRESS, 0);
	return ret;
}

/* Packets leaving the pod (tc ingress of the host-side veth). */
__section_entry
int cil_from_container(struct __sk_buff *ctx)
{
	__u16 proto = 0;
	int ret;

	ret = validate_ethertype(ctx, &proto);
	if (IS_ERR(ret))
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
					ret, METRIC_EGRESS, 0);

	switch (proto) {
	case ETH_P_IP:
		return handle_ipv4_from_lxc(ctx);
	case ETH_P_ARP:
		ret = arp_respond(ctx);
		if (IS_ERR(ret))
			return send_drop_notify(ctx, IDENTITY_UNKNOWN,
						IDENTITY_UNKNOWN, 0, ret,
						METRIC_EGRESS, 0);
		return ret == ARP_NOT_HANDLED ? CTX_ACT_OK : ret;
	case ETH_P_IPV6:
		return handle_ipv6_from_lxc(ctx);
	default:
		return send_drop_notify(ctx, IDENTITY_UNKNOWN, IDENTITY_UNKNOWN, 0,
					-DROP_UNKNOWN_L3, METRIC_EGRESS, 0);
	}
}

char __license[] SEC("license") = "Dual BSD/GPL";
