/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NodePort on the node's native device. A connection to a node address and
 * a NodePort is DNATed to a backend. A backend on another node also needs
 * it SNATed to the node address with a port of its own, so its replies come
 * back through this node; a backend of this node sees the client as it is
 * (as in Cilium, and what externalTrafficPolicy Local promises: its
 * backends are all local). Two NAT entries (cilium_snat_v4_external) undo
 * the translations for the replies, which then leave through the native
 * device towards the client: a local backend's flow is marked in conntrack
 * (CT_F_NODE_PORT) so that cil_from_container looks its replies up. The
 * same table holds masqueraded flows (nat.h), whose replies come back here.
 */
#ifndef __LIB_NODEPORT_H_
#define __LIB_NODEPORT_H_

#include "common.h"
#include "maps.h"
#include "endpoint.h"
#include "conntrack.h"
#include "lb.h"
#include "encap.h"
#include "l3.h"
#include "runtime_config.h"
#include "policy.h"
#include "nat.h"

static __always_inline int is_node_address(__u32 addr)
{
	struct endpoint_info *ep = lookup_ip4_endpoint(addr);

	return ep && (ep->flags & ENDPOINT_F_HOST);
}

/* Whether port (network order) is in the node-port-range. */
static __always_inline int nodeport_port_in_range(__u16 port)
{
	__u64 range = runtime_config(RUNTIME_CONFIG_NODEPORT_RANGE);
	__u16 min = range ? (__u16)(range >> 16) : NODEPORT_PORT_MIN_DEFAULT;
	__u16 max = range ? (__u16)range : NODEPORT_PORT_MAX_DEFAULT;
	__u16 p = bpf_ntohs(port);

	return p >= min && p <= max;
}

/* The service a packet to a node address reaches from outside: a NodePort
 * by its own frontend or the surrogate 0.0.0.0:port that stands for every
 * node address, or a HostPort of this address (a HostPort's 0.0.0.0 entry
 * is for the node's own sockets: an unset hostIP has an entry per node
 * address beside it). */
static __always_inline struct lb4_service *nodeport_lookup(__u32 addr, __u16 port, __u8 proto,
							    struct lb4_frontend *fe)
{
	struct lb4_service *svc = lb4_lookup_service(addr, port, proto, fe);

	if (svc && (svc->flags & (SVC_FLAG_NODEPORT | SVC_FLAG_HOSTPORT)))
		return svc;
	svc = lb4_lookup_service(0, port, proto, fe);
	if (svc && (svc->flags & SVC_FLAG_NODEPORT))
		return svc;
	return NULL;
}

/* A backend's reply: back to the client, from the node address and the
 * NodePort it connected to, out of the native device. */
static __always_inline int nodeport_reply(struct __sk_buff *ctx, int l4_off, __u8 proto,
					  struct ipv4_nat_entry *nat)
{
	__u32 ifindex = (__u32)runtime_config(RUNTIME_CONFIG_NATIVE_IFINDEX);
	__u32 to_addr = nat->to_addr, node = nat->from_addr;
	__u16 to_port = nat->to_port, rev_port = nat->rev_port;
	int ret;

	if (!ifindex)
		return -DROP_NO_FIB;
	nat_touch(nat);
	ret = lb4_xlate_both(ctx, l4_off, proto, node, rev_port, to_addr, to_port);
	if (IS_ERR(ret))
		return ret;
	nat_done_set(ctx);
	return bpf_redirect_neigh(ifindex, NULL, 0, 0);
}

/* The NAT entry of a backend's reply to node:port, if it is one. Ports are
 * network order. */
static __always_inline struct ipv4_nat_entry *nodeport_reply_nat(__u32 saddr, __u32 daddr,
								 __u16 sport, __u16 dport,
								 __u8 proto)
{
	struct ipv4_ct_tuple key = nat_key(saddr, daddr, sport, dport, proto, NAT_DIR_INGRESS);

	return bpf_map_lookup_elem(&cilium_snat_v4_external, &key);
}

/* A reply of a translated flow, arriving on the native device: a NodePort
 * backend's goes back to the client; a masqueraded flow's gets its
 * source's address and port back as destination and goes to that pod, or
 * to the node's stack for one of the node's own. */
static __always_inline int nat_reply(struct __sk_buff *ctx, int l4_off, __u8 proto,
				     struct ipv4_nat_entry *nat, __u32 saddr)
{
	struct endpoint_info *ep;
	__u32 to_addr = nat->to_addr;
	int ret;

	if (nat->from_addr)
		return nodeport_reply(ctx, l4_off, proto, nat);
	nat_touch(nat);
	ret = lb4_xlate(ctx, l4_off, proto, 1, to_addr, nat->to_port);
	if (IS_ERR(ret))
		return ret;
	ep = lookup_ip4_endpoint(to_addr);
	if (is_local_pod(ep))
		return policy_tail_call_ingress(ctx, ep, to_addr, ip4_identity(saddr),
						POLICY_F_PEER);
	return CTX_ACT_OK;
}

/* An ICMP error about a masqueraded flow goes to the pod it is about;
 * any other is the stack's. */
static __always_inline int nat_reply_icmp_error(struct __sk_buff *ctx, int l4_off,
						__u32 saddr, __u32 node)
{
	struct endpoint_info *ep;
	__s64 pod;

	pod = snat_v4_rev_icmp_error(ctx, l4_off, node);
	if (pod <= 0)
		return pod ? (int)pod : CTX_ACT_OK;
	ep = lookup_ip4_endpoint((__u32)pod);
	if (!is_local_pod(ep))
		return CTX_ACT_OK;
	return policy_tail_call_ingress(ctx, ep, (__u32)pod, ip4_identity(saddr), POLICY_F_PEER);
}

/*
 * Handles a packet arriving on the native device: a reply of a NodePort
 * flow, or a packet to a NodePort. Returns CTX_ACT_OK for anything else
 * (the stack's), a redirect verdict, or a negative drop reason.
 */
static __always_inline int nodeport_lb4(struct __sk_buff *ctx)
{
	struct ipv4_nat_entry *nat, fwd, rev;
	struct ipv4_ct_tuple key = {}, rkey;
	struct lb4_target target = {};
	struct endpoint_info *ep;
	struct lb4_service *svc;
	struct ct_packet pkt;
	__u32 saddr, daddr, backend, tunnel_ep, src;
	struct lb4_frontend fe;
	__u16 sport, dport, bport, natport = 0;
	struct iphdr *ip4;
	int ret, l4_off;
	__u8 proto;

	ip4 = ipv4_hdr(ctx);
	if (!ip4 || (!lb4_is_balanced_proto(ip4->protocol) && ip4->protocol != IPPROTO_ICMP))
		return CTX_ACT_OK;
	/* NodePort connections and the replies to SNATed flows all go to a
	 * node address; passing traffic needs no parsing or lookups. */
	if (!is_node_address(ip4->daddr))
		return CTX_ACT_OK;
	l4_off = ipv4_l4_off(ip4);
	proto = ip4->protocol;
	if (ct_parse4(ctx, ip4, &pkt) < 0)
		return CTX_ACT_OK;
	saddr = pkt.tuple.saddr;
	daddr = pkt.tuple.daddr;
	/* the CT tuple keeps the source port in dport and vice versa (an
	 * echo reply's identifier in sport, as NAT keys have it in dport) */
	sport = pkt.tuple.dport;
	dport = pkt.tuple.sport;

	nat = nodeport_reply_nat(saddr, daddr, sport, dport, proto);
	if (nat)
		return nat_reply(ctx, l4_off, proto, nat, saddr);
	if (pkt.tuple.flags & TUPLE_F_RELATED)
		return nat_reply_icmp_error(ctx, l4_off, saddr, daddr);
	if (!lb4_is_balanced_proto(proto))
		return CTX_ACT_OK;

	svc = nodeport_lookup(daddr, dport, proto, &fe);
	if (!svc)
		return CTX_ACT_OK;

	key = nat_key(saddr, daddr, sport, dport, proto, NAT_DIR_EGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v4_external, &key);
	if (nat) {
		nat_touch(nat);
		backend = nat->to_addr;
		bport = nat->to_port;
		natport = nat->rev_port;
		src = nat->from_addr;
	} else {
		ret = lb4_select(ctx, &pkt, svc, &fe,
				 runtime_config(RUNTIME_CONFIG_LB_ALGORITHM) == LB_ALGORITHM_MAGLEV,
				 &target);
		if (IS_ERR(ret))
			return ret;
		backend = target.address;
		/* a HostPort's backends are this node's pods, never another's */
		if ((svc->flags & SVC_FLAG_HOSTPORT) &&
		    !is_local_pod(lookup_ip4_endpoint(backend)))
			return -DROP_INVALID;
		bport = target.port ? target.port : dport;
		fwd = nat_entry(daddr, 0, backend, bport);
		rev = nat_entry(daddr, dport, saddr, sport);
		if (is_local_pod(lookup_ip4_endpoint(backend))) {
			/* the backend sees the client as it is */
			src = saddr;
			natport = sport;
			rkey = nat_key(backend, src, bport, natport, proto, NAT_DIR_INGRESS);
			if (bpf_map_update_elem(&cilium_snat_v4_external, &rkey, &rev, BPF_ANY) < 0)
				return -DROP_NAT_NO_MAPPING;
		} else {
			src = daddr;
			rkey = nat_key(backend, src, bport, 0, proto, NAT_DIR_INGRESS);
			ret = nat_claim_port(&rkey, &rev, sport);
			if (IS_ERR(ret))
				return ret;
			natport = rkey.dport;
		}
		fwd.from_addr = src;
		fwd.rev_port = natport;
		ret = nat_insert_fwd(&key, &fwd, &rkey);
		if (IS_ERR(ret))
			return ret;
	}
	ret = lb4_xlate_both(ctx, l4_off, proto, src, natport, backend, bport);
	if (IS_ERR(ret))
		return ret;

	ep = lookup_ip4_endpoint(backend);
	if (is_local_pod(ep))
		return policy_tail_call_ingress(ctx, ep, backend,
						src == saddr ? ip4_identity(saddr) : IDENTITY_WORLD,
						POLICY_F_PEER | (src == saddr ? POLICY_F_NODEPORT : 0));
	tunnel_ep = tunnel_endpoint4(backend, lookup_ip4_remote(backend));
	if (tunnel_ep)
		return encap_and_redirect4(ctx, tunnel_ep, IDENTITY_WORLD);
	nat_done_set(ctx);
	return CTX_ACT_OK;
}

#endif /* __LIB_NODEPORT_H_ */
