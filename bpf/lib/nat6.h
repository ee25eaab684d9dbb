/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BPF masquerading of IPv6 (enable-ipv6-masquerade with
 * enable-bpf-masquerade) on the native device, by nat.h's rules over
 * cilium_snat_v6_external: a pod's packet leaving the cluster gets the
 * node's IPv6 address and a port of the node (its own when free), the
 * node's own connections from that address are recorded so neither takes
 * the other's port, each flow has an egress and an ingress entry, and
 * replies (ICMPv6 errors about a flow too) get the pod back on the way in.
 */
#ifndef __LIB_NAT6_H_
#define __LIB_NAT6_H_

#ifdef ENABLE_IPV6

#include "nat.h"
#include "conntrack6.h"
#include "lb6.h"
#include "policy.h"

/* The address pods' IPv6 is masqueraded to; false while that is off. */
static __always_inline int snat6_address(union v6addr *masq)
{
	return runtime_config_ipv6(RUNTIME_CONFIG_MASQUERADE_IPV6_HI,
				   RUNTIME_CONFIG_MASQUERADE_IPV6_LO, masq);
}

/* A NAT key: real ports (network order), direction in flags. */
static __always_inline void nat6_key(struct ipv6_ct_tuple *key, const union v6addr *saddr,
				     const union v6addr *daddr, __u16 sport, __u16 dport,
				     __u8 proto, __u8 dir)
{
	key->saddr = *saddr;
	key->daddr = *daddr;
	key->sport = sport;
	key->dport = dport;
	key->nexthdr = proto;
	key->flags = dir;
}

static __always_inline void nat6_touch(struct ipv6_nat_entry *nat)
{
	__u64 now = ct_now();

	if (nat->last_used != now)
		nat->last_used = now;
}

static __always_inline void nat6_entry(struct ipv6_nat_entry *e, const union v6addr *to,
				       __u16 to_port, __u64 needs_ct)
{
	__builtin_memset(e, 0, sizeof(*e));
	e->created = ct_now();
	e->last_used = e->created;
	e->needs_ct = needs_ct;
	e->to_addr = *to;
	e->to_port = to_port;
}

/* nat_claim_port for IPv6: want if free, else a probed one; created only
 * if absent, so two CPUs cannot both take a port. */
static __always_inline int nat6_claim_port(struct ipv6_ct_tuple *rev_key,
					   const struct ipv6_nat_entry *rev, __u16 want)
{
	__u16 start = NAT_PORT_MIN + bpf_get_prandom_u32() % NAT_PORT_MIN;

	rev_key->dport = want;
	if (!bpf_map_update_elem(&cilium_snat_v6_external, rev_key, rev, BPF_NOEXIST))
		return 0;
	for (int i = 0; i < NAT_PORT_TRIES; i++) {
		rev_key->dport = bpf_htons(NAT_PORT_MIN + (start + i) % NAT_PORT_MIN);
		if (!bpf_map_update_elem(&cilium_snat_v6_external, rev_key, rev, BPF_NOEXIST))
			return 0;
	}
	return -DROP_NAT_NO_MAPPING;
}

/* Whether daddr is in the exclusion prefix (the cluster's own addresses)
 * or another node of the cluster. */
static __always_inline int snat6_excluded(const union v6addr *daddr)
{
	__u32 len = (__u32)runtime_config(RUNTIME_CONFIG_SNAT_EXCLUSION_IPV6_LEN);
	union v6addr net;
	__u32 id;
	int i;

	runtime_config_ipv6(RUNTIME_CONFIG_SNAT_EXCLUSION_IPV6_HI,
			    RUNTIME_CONFIG_SNAT_EXCLUSION_IPV6_LO, &net);
#pragma unroll
	for (i = 0; i < 4; i++) {
		__u32 bits = len > 32 * i ? len - 32 * i : 0;
		__u32 mask = bits >= 32 ? 0xffffffff : bits ? ~(0xffffffff >> bits) : 0;

		if ((bpf_ntohl(daddr->p[i]) & mask) != (bpf_ntohl(net.p[i]) & mask))
			break;
	}
	if (i == 4)
		return 1;
	id = ip6_identity(daddr);
	return id == IDENTITY_REMOTE_NODE || id == IDENTITY_HOST;
}

/* The flow's ports as NAT keys have them; 0 when masquerading leaves the
 * packet alone (only TCP, UDP and echo requests start a mapping). */
static __always_inline int snat6_ports(const struct ct6_packet *pkt, __u16 *sport,
				       __u16 *dport)
{
	switch (pkt->tuple.nexthdr) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		break;
	case NEXTHDR_ICMP:
		if (pkt->icmp_type != ICMP6_ECHO_REQUEST)
			return 0;
		break;
	default:
		return 0;
	}
	*sport = pkt->tuple.dport;
	*dport = pkt->tuple.sport;
	return 1;
}

/* snat_v4_masquerade for IPv6, on the native device's egress. Returns
 * CTX_ACT_OK or a negative drop reason. */
static __always_inline int snat_v6_masquerade(struct __sk_buff *ctx)
{
	struct ipv6_nat_entry *nat, fwd, rev;
	struct ipv6_ct_tuple key = {}, rkey = {};
	union v6addr masq, saddr, daddr;
	struct ct6_packet pkt;
	struct ipv6hdr *ip6;
	__u16 sport, dport, port;
	int ret, host;

	if (!snat6_address(&masq) || nat_done(ctx))
		return CTX_ACT_OK;
	ip6 = ipv6_hdr(ctx);
	if (!ip6)
		return CTX_ACT_OK;
	ipv6_saddr(ip6, &saddr);
	ipv6_daddr(ip6, &daddr);
	host = ipv6_addr_equals(&saddr, &masq);
	if (!host && (!is_local_pod(lookup_ip6_endpoint(&saddr)) || snat6_excluded(&daddr)))
		return CTX_ACT_OK;
	if (ct_parse6(ctx, ip6, &pkt) < 0 || !snat6_ports(&pkt, &sport, &dport))
		return CTX_ACT_OK;
	/* the node's servers answer from their own well-known ports */
	if (host && (pkt.tuple.nexthdr == NEXTHDR_ICMP || bpf_ntohs(sport) < NAT_PORT_MIN))
		return CTX_ACT_OK;

	nat6_key(&key, &saddr, &daddr, sport, dport, pkt.tuple.nexthdr, NAT_DIR_EGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v6_external, &key);
	if (nat) {
		nat6_touch(nat);
		port = nat->to_port;
	} else {
		nat6_entry(&rev, &saddr, sport, host);
		nat6_key(&rkey, &daddr, &masq, dport, 0, pkt.tuple.nexthdr, NAT_DIR_INGRESS);
		ret = nat6_claim_port(&rkey, &rev, sport);
		if (IS_ERR(ret))
			return ret;
		port = rkey.dport;
		nat6_entry(&fwd, &masq, port, host);
		if (bpf_map_update_elem(&cilium_snat_v6_external, &key, &fwd, BPF_ANY) < 0) {
			bpf_map_delete_elem(&cilium_snat_v6_external, &rkey);
			return -DROP_NAT_NO_MAPPING;
		}
	}
	return lb6_xlate(ctx, &pkt.l4, pkt.tuple.nexthdr, 0, &masq, port);
}

/*
 * An ICMPv6 error to the node (packet too big, unreachable, time
 * exceeded) about a masqueraded flow quotes the datagram as it left; the
 * quoted source and port become the pod's again, and so does the error's
 * destination, the ICMPv6 checksum following all three. Returns 1 when
 * the error is the pod's now (to_pod names it), 0 when it is no
 * masqueraded flow's, or a negative drop reason.
 */
static __always_inline int snat_v6_rev_icmp_error(struct __sk_buff *ctx, int l4_off,
						  const union v6addr *node, union v6addr *to_pod)
{
	int quoted = l4_off + 8;	/* the quoted IPv6 header */
	int csum_off = l4_off + 2;
	struct ipv6_ct_tuple key = {};
	struct ipv6_nat_entry *nat;
	union v6addr qsrc, qdst;
	struct ipv6hdr in;
	__u16 ports[2];
	__u8 type;

	if (bpf_skb_load_bytes(ctx, l4_off, &type, 1) < 0)
		return -DROP_INVALID;
	if (type != ICMP6_DEST_UNREACH && type != ICMP6_PKT_TOOBIG &&
	    type != ICMP6_TIME_EXCEED && type != ICMP6_PARAMPROB)
		return 0;
	if (bpf_skb_load_bytes(ctx, quoted, &in, sizeof(in)) < 0 ||
	    bpf_skb_load_bytes(ctx, quoted + sizeof(in), ports, sizeof(ports)) < 0)
		return 0;
	__builtin_memcpy(&qsrc, &in.saddr, sizeof(qsrc));
	__builtin_memcpy(&qdst, &in.daddr, sizeof(qdst));
	if (!lb4_is_balanced_proto(in.nexthdr) || !ipv6_addr_equals(&qsrc, node))
		return 0;
	/* the replies' entry: from the quoted destination to the node's port */
	nat6_key(&key, &qdst, node, ports[1], ports[0], in.nexthdr, NAT_DIR_INGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v6_external, &key);
	if (!nat || (nat->flags & NAT6_F_NODEPORT))
		return 0;
	*to_pod = nat->to_addr;
	if (lb6_csum_move(ctx, csum_off, node, to_pod, sizeof(*to_pod), BPF_F_PSEUDO_HDR) < 0 ||
	    bpf_skb_store_bytes(ctx, ETH_HLEN + offsetof(struct ipv6hdr, daddr), to_pod,
				sizeof(*to_pod), 0) < 0 ||
	    lb6_csum_move(ctx, csum_off, node, to_pod, sizeof(*to_pod), 0) < 0 ||
	    bpf_skb_store_bytes(ctx, quoted + offsetof(struct ipv6hdr, saddr), to_pod,
				sizeof(*to_pod), 0) < 0)
		return -DROP_CSUM_L4;
	if (ports[0] != nat->to_port &&
	    (bpf_l4_csum_replace(ctx, csum_off, ports[0], nat->to_port, 2) < 0 ||
	     bpf_skb_store_bytes(ctx, quoted + sizeof(in), &nat->to_port, 2, 0) < 0))
		return -DROP_CSUM_L4;
	return 1;
}

/*
 * A packet arriving on the native device for the masquerade address: the
 * reply of a masqueraded flow gets its pod's address and port back and
 * goes through that pod's ingress (a node's own flow goes on to the
 * stack), as does an ICMPv6 error about one. Returns CTX_ACT_OK for
 * anything else, a redirect verdict, or a negative drop reason.
 */
static __always_inline int snat_v6_rev(struct __sk_buff *ctx)
{
	struct ipv6_ct_tuple key = {};
	union v6addr masq, saddr, daddr, pod;
	struct ipv6_nat_entry *nat;
	struct endpoint_info *ep;
	struct ct6_packet pkt;
	struct ipv6hdr *ip6;
	int ret;

	if (!snat6_address(&masq))
		return CTX_ACT_OK;
	ip6 = ipv6_hdr(ctx);
	if (!ip6)
		return CTX_ACT_OK;
	ipv6_daddr(ip6, &daddr);
	if (!ipv6_addr_equals(&daddr, &masq))
		return CTX_ACT_OK;
	ipv6_saddr(ip6, &saddr);
	if (ct_parse6(ctx, ip6, &pkt) < 0)
		return CTX_ACT_OK;
	if (pkt.tuple.flags & TUPLE_F_RELATED) {
		if (pkt.l4.fragment != IPV6_FRAG_NONE)
			return CTX_ACT_OK;
		ret = snat_v6_rev_icmp_error(ctx, pkt.l4.off, &masq, &pod);
		if (ret <= 0)
			return ret ? ret : CTX_ACT_OK;
	} else {
		/* the tuple keeps the source port in dport (an echo reply's
		 * identifier in sport, as NAT keys have it in dport) */
		nat6_key(&key, &saddr, &daddr, pkt.tuple.dport, pkt.tuple.sport,
			 pkt.tuple.nexthdr, NAT_DIR_INGRESS);
		nat = bpf_map_lookup_elem(&cilium_snat_v6_external, &key);
		if (!nat || (nat->flags & NAT6_F_NODEPORT))
			return CTX_ACT_OK;
		nat6_touch(nat);
		pod = nat->to_addr;
		ret = lb6_xlate(ctx, &pkt.l4, pkt.tuple.nexthdr, 1, &pod, nat->to_port);
		if (IS_ERR(ret))
			return ret;
	}
	ep = lookup_ip6_endpoint(&pod);
	if (!is_local_pod(ep))
		return CTX_ACT_OK;
	/* the callee reads the endpoint's address from the packet */
	return policy_tail_call_ingress(ctx, ep, 0, ip6_identity(&saddr), POLICY_F_PEER);
}

#endif /* ENABLE_IPV6 */
#endif /* __LIB_NAT6_H_ */
