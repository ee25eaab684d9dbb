/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NodePort for IPv6 on the native device, nodeport.h's rules over the
 * cilium_lb6 maps and cilium_snat_v6_external: a connection to a node
 * address and a NodePort (its own frontend or the [::] one standing for
 * every node address) is DNATed to a backend. A backend of this node sees
 * the client as it is, and its replies, marked in conntrack, are sent back
 * from cil_from_container; a backend elsewhere gets the flow SNATed to the
 * node address with a port of its own, and its replies come back to this
 * device. Either way the replies leave towards the client from the node
 * address and NodePort. The entries carry NAT6_F_NODEPORT so masquerading's
 * reverse path never takes them for its own.
 */
#ifndef __LIB_NODEPORT6_H_
#define __LIB_NODEPORT6_H_

#ifdef ENABLE_IPV6

#include "nodeport.h"
#include "nat6.h"

static __always_inline int is_node_address6(const union v6addr *addr)
{
	struct endpoint_info *ep = lookup_ip6_endpoint(addr);

	return ep && (ep->flags & ENDPOINT_F_HOST);
}

/* The service a packet to a node address reaches from outside (nodeport.h's
 * nodeport_lookup for IPv6). */
static __always_inline struct lb6_service *nodeport_lookup6(const union v6addr *addr,
							     __u16 port, __u8 proto,
							     struct lb6_frontend *fe)
{
	union v6addr any = {};
	struct lb6_service *svc;

	svc = lb6_lookup_scoped(addr, port, proto, LB_LOOKUP_SCOPE_EXT, fe);
	if (svc && (svc->flags & (SVC_FLAG_NODEPORT | SVC_FLAG_HOSTPORT)))
		return svc;
	svc = lb6_lookup_scoped(&any, port, proto, LB_LOOKUP_SCOPE_EXT, fe);
	if (svc && (svc->flags & SVC_FLAG_NODEPORT))
		return svc;
	return NULL;
}

/* The NodePort entry of a backend's reply (ports network order), if it is
 * one. */
static __always_inline struct ipv6_nat_entry *
nodeport_reply_nat6(const union v6addr *saddr, const union v6addr *daddr, __u16 sport,
		    __u16 dport, __u8 proto)
{
	struct ipv6_ct_tuple key = {};
	struct ipv6_nat_entry *nat;

	nat6_key(&key, saddr, daddr, sport, dport, proto, NAT_DIR_INGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v6_external, &key);
	return nat && (nat->flags & NAT6_F_NODEPORT) ? nat : NULL;
}

/* A backend's reply: to the client, from node and the NodePort it
 * connected to, out of the native device. */
static __always_inline int nodeport_reply6(struct __sk_buff *ctx, const struct ipv6_l4 *l4,
					   __u8 proto, struct ipv6_nat_entry *nat,
					   const union v6addr *node)
{
	__u32 ifindex = (__u32)runtime_config(RUNTIME_CONFIG_NATIVE_IFINDEX);
	union v6addr client = nat->to_addr;
	__u16 client_port = nat->to_port, node_port = nat->rev_port;
	int ret;

	if (!ifindex)
		return -DROP_NO_FIB;
	nat6_touch(nat);
	ret = lb6_xlate(ctx, l4, proto, 1, &client, client_port);
	if (!IS_ERR(ret))
		ret = lb6_xlate(ctx, l4, proto, 0, node, node_port);
	if (IS_ERR(ret))
		return ret;
	nat_done_set(ctx);
	return bpf_redirect_neigh(ifindex, NULL, 0, 0);
}

/* The node address replies of this node's backends leave from. */
static __always_inline int nodeport_node_ipv6(union v6addr *node)
{
	return runtime_config_ipv6(RUNTIME_CONFIG_NODE_IPV6_HI, RUNTIME_CONFIG_NODE_IPV6_LO,
				   node);
}

/* A reply of this node's backend to a NodePort client that kept its
 * address, leaving the backend (cil_from_container): back out of the
 * native device. 0 when it is none; else a verdict or drop reason. */
static __always_inline int nodeport_local_reply6(struct __sk_buff *ctx,
						 const struct ct6_packet *pkt)
{
	struct ipv6_nat_entry *nat;
	union v6addr node;

	nat = nodeport_reply_nat6(&pkt->tuple.saddr, &pkt->tuple.daddr, pkt->tuple.dport,
				  pkt->tuple.sport, pkt->tuple.nexthdr);
	if (!nat || !nodeport_node_ipv6(&node))
		return 0;
	return nodeport_reply6(ctx, &pkt->l4, pkt->tuple.nexthdr, nat, &node);
}

/* Records a new NodePort flow of client:sport to node:dport, balanced to
 * backend:bport (local: a backend of this node, which sees the client).
 * Returns the port the backend sees the flow from, or a negative drop
 * reason. */
static __always_inline int nodeport_nat6_create(const struct ipv6_ct_tuple *key,
						const union v6addr *backend, __u16 bport,
						int local)
{
	struct ipv6_ct_tuple rkey = {};
	struct ipv6_nat_entry fwd, rev;
	__u64 flags = NAT6_F_NODEPORT | (local ? NAT6_F_LOCAL : 0);
	int ret;

	nat6_entry(&rev, &key->saddr, key->sport, 0);
	rev.rev_port = key->dport;
	rev.flags = flags;
	if (local) {
		nat6_key(&rkey, backend, &key->saddr, bport, key->sport, key->nexthdr,
			 NAT_DIR_INGRESS);
		if (bpf_map_update_elem(&cilium_snat_v6_external, &rkey, &rev, BPF_ANY) < 0)
			return -DROP_NAT_NO_MAPPING;
	} else {
		nat6_key(&rkey, backend, &key->daddr, bport, 0, key->nexthdr, NAT_DIR_INGRESS);
		ret = nat6_claim_port(&rkey, &rev, key->sport);
		if (IS_ERR(ret))
			return ret;
	}
	nat6_entry(&fwd, backend, bport, 0);
	fwd.rev_port = rkey.dport;
	fwd.flags = flags;
	if (bpf_map_update_elem(&cilium_snat_v6_external, key, &fwd, BPF_ANY) < 0) {
		bpf_map_delete_elem(&cilium_snat_v6_external, &rkey);
		return -DROP_NAT_NO_MAPPING;
	}
	return rkey.dport;
}

/*
 * A packet arriving on the native device: a reply of a NodePort flow from
 * a backend elsewhere, or a packet to a NodePort. Returns CTX_ACT_OK for
 * anything else (masquerading's replies, the stack's), a verdict, or a
 * negative drop reason.
 */
static __always_inline int nodeport_lb6(struct __sk_buff *ctx)
{
	struct ipv6_ct_tuple key = {};
	struct lb6_target target = {};
	union v6addr saddr, daddr, backend;
	struct ipv6_nat_entry *nat;
	struct endpoint_info *ep;
	struct lb6_frontend fe;
	struct lb6_service *svc;
	struct ct6_packet pkt;
	struct ipv6hdr *ip6;
	__u16 sport, dport, bport;
	__u32 tunnel_ep;
	int ret, natport, local;
	__u8 proto;

	ip6 = ipv6_hdr(ctx);
	if (!ip6)
		return CTX_ACT_OK;
	ipv6_daddr(ip6, &daddr);
	if (!is_node_address6(&daddr))
		return CTX_ACT_OK;
	ipv6_saddr(ip6, &saddr);
	if (ct_parse6(ctx, ip6, &pkt) < 0)
		return CTX_ACT_OK;
	proto = pkt.tuple.nexthdr;
	if (!lb4_is_balanced_proto(proto))
		return CTX_ACT_OK;
	/* the CT tuple keeps the source port in dport and vice versa */
	sport = pkt.tuple.dport;
	dport = pkt.tuple.sport;

	nat = nodeport_reply_nat6(&saddr, &daddr, sport, dport, proto);
	if (nat)
		return nodeport_reply6(ctx, &pkt.l4, proto, nat, &daddr);
	svc = nodeport_lookup6(&daddr, dport, proto, &fe);
	if (!svc)
		return CTX_ACT_OK;

	nat6_key(&key, &saddr, &daddr, sport, dport, proto, NAT_DIR_EGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v6_external, &key);
	if (nat && (nat->flags & NAT6_F_NODEPORT)) {
		nat6_touch(nat);
		backend = nat->to_addr;
		bport = nat->to_port;
		natport = nat->rev_port;
		local = !!(nat->flags & NAT6_F_LOCAL);
	} else {
		ret = lb6_select(ctx, &pkt, svc, &fe,
				 runtime_config(RUNTIME_CONFIG_LB_ALGORITHM) == LB_ALGORITHM_MAGLEV,
				 &target);
		if (IS_ERR(ret))
			return ret;
		backend = target.address;
		local = is_local_pod(lookup_ip6_endpoint(&backend));
		/* a HostPort's backends are this node's pods, never another's */
		if ((svc->flags & SVC_FLAG_HOSTPORT) && !local)
			return -DROP_INVALID;
		bport = target.port ? target.port : dport;
		natport = nodeport_nat6_create(&key, &backend, bport, local);
		if (IS_ERR(natport))
			return natport;
	}
	ret = lb6_xlate(ctx, &pkt.l4, proto, 1, &backend, bport);
	if (!IS_ERR(ret) && !local)
		ret = lb6_xlate(ctx, &pkt.l4, proto, 0, &daddr, (__u16)natport);
	if (IS_ERR(ret))
		return ret;

	ep = lookup_ip6_endpoint(&backend);
	if (local && is_local_pod(ep))
		return policy_tail_call_ingress(ctx, ep, 0, ip6_identity(&saddr),
						POLICY_F_PEER | POLICY_F_NODEPORT);
	tunnel_ep = tunnel_endpoint6(lookup_ip6_remote(&backend));
	if (tunnel_ep)
		return encap_and_redirect4(ctx, tunnel_ep, IDENTITY_WORLD);
	nat_done_set(ctx);
	return CTX_ACT_OK;
}

#endif /* ENABLE_IPV6 */
#endif /* __LIB_NODEPORT6_H_ */
