/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPv6 connection tracking (cilium_ct6_global, cilium_ct_any6_global) with
 * the IPv4 side's conventions and entries: the tuple straight from the
 * packet is a reply's key, reversed with the IN bit flipped the original
 * direction's. L4 is found past the extension headers, and the fragments
 * after a datagram's first take its ports from the fragment map.
 */
#ifndef __LIB_CONNTRACK6_H_
#define __LIB_CONNTRACK6_H_

#ifdef ENABLE_IPV6

#include "conntrack.h"
#include "ipv6.h"
#include "frag.h"

#define ICMP6_DEST_UNREACH	1
#define ICMP6_PKT_TOOBIG	2
#define ICMP6_TIME_EXCEED	3
#define ICMP6_PARAMPROB		4
#define ICMP6_ECHO_REQUEST	128
#define ICMP6_ECHO_REPLY	129

struct ct6_packet {
	struct ipv6_ct_tuple tuple;	/* no direction bit set */
	__u8 tcp_flags;
	__u8 icmp_type;
	struct ipv6_l4 l4;
};

static __always_inline void *ct6_map_for(__u8 nexthdr)
{
	return nexthdr == IPPROTO_TCP ? (void *)&cilium_ct6_global :
					(void *)&cilium_ct_any6_global;
}

/* An ICMPv6 message's tuple, as 1.16 builds it: echoes by their
 * identifier, errors related to the flow they are about, every other type
 * (neighbour discovery among them) with no ports. */
static __always_inline void ct6_icmp_tuple(struct ipv6_ct_tuple *tuple, __u8 type, __u16 id)
{
	switch (type) {
	case ICMP6_ECHO_REQUEST:
		tuple->dport = id;
		break;
	case ICMP6_ECHO_REPLY:
		tuple->sport = id;
		break;
	case ICMP6_DEST_UNREACH:
	case ICMP6_PKT_TOOBIG:
	case ICMP6_TIME_EXCEED:
	case ICMP6_PARAMPROB:
		tuple->flags |= TUPLE_F_RELATED;
		break;
	}
}

/* Reads the packet's tuple (a later fragment gets its datagram's) and
 * where its L4 header is. Returns 0 or a negative drop reason. */
static __always_inline int ct_parse6(struct __sk_buff *ctx, const struct ipv6hdr *ip6,
				     struct ct6_packet *pkt)
{
	struct ipv6_ct_tuple *tuple = &pkt->tuple;
	struct ipv4_frag_l4ports ports = {};
	int ret;

	__builtin_memset(pkt, 0, sizeof(*pkt));
	ret = ipv6_l4(ctx, ip6, &pkt->l4);
	if (ret < 0)
		return ret;
	ipv6_daddr(ip6, &tuple->daddr);
	ipv6_saddr(ip6, &tuple->saddr);
	tuple->nexthdr = pkt->l4.nexthdr;
	switch (tuple->nexthdr) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case NEXTHDR_ICMP:
		break;
	default:
		return -DROP_CT_UNKNOWN_PROTO;
	}
	/* ICMPv6 fragments note the type and identifier, as IPv4's do */
	if (pkt->l4.fragment == IPV6_FRAG_LATER) {
		ret = ipv6_frag_recall(ip6, &pkt->l4, &ports);
		if (ret < 0)
			return ret;
		if (tuple->nexthdr != NEXTHDR_ICMP) {
			tuple->dport = ports.sport;
			tuple->sport = ports.dport;
			return 0;
		}
		pkt->icmp_type = (__u8)ports.sport;
		ct6_icmp_tuple(tuple, pkt->icmp_type, ports.dport);
		return 0;
	}
	if (tuple->nexthdr == NEXTHDR_ICMP) {
		struct {
			__u8 type;
			__u8 code;
			__u16 csum;
			__u16 id;	/* of an echo */
		} icmp;

		if (bpf_skb_load_bytes(ctx, pkt->l4.off, &icmp, sizeof(icmp)) < 0)
			return -DROP_CT_INVALID_HDR;
		pkt->icmp_type = icmp.type;
		ct6_icmp_tuple(tuple, icmp.type, icmp.id);
	} else {
		ret = ct_load_ports(ctx, pkt->l4.off, tuple->nexthdr, (void *)&tuple->dport,
				    &pkt->tcp_flags);
		if (ret < 0)
			return ret;
	}
	if (pkt->l4.fragment != IPV6_FRAG_FIRST)
		return 0;
	if (tuple->nexthdr == NEXTHDR_ICMP)
		ipv6_frag_remember(ip6, &pkt->l4, pkt->icmp_type, tuple->dport | tuple->sport);
	else
		ipv6_frag_remember(ip6, &pkt->l4, tuple->dport, tuple->sport);
	return 0;
}

static __always_inline void ct6_tuple_reverse(struct ipv6_ct_tuple *tuple)
{
	union v6addr addr = tuple->daddr;
	__u16 port = tuple->dport;

	tuple->daddr = tuple->saddr;
	tuple->saddr = addr;
	tuple->dport = tuple->sport;
	tuple->sport = port;
	tuple->flags ^= TUPLE_F_IN;
}

/* ct_lookup4's twin: on return the tuple is the key a CT_NEW flow gets. */
static __always_inline void ct_lookup6(struct __sk_buff *ctx, int dir,
				       struct ipv6_ct_tuple *tuple, struct ct_state *state)
{
	void *map = ct6_map_for(tuple->nexthdr);
	struct ct_entry *entry;

	tuple->flags |= dir == CT_EGRESS ? TUPLE_F_IN : TUPLE_F_OUT;
	for (int reply = 1; reply >= 0; reply--) {
		entry = bpf_map_lookup_elem(map, tuple);
		if (entry) {
			ct_entry_hit(ctx, entry, dir, reply, tuple->flags & TUPLE_F_RELATED,
				     tuple->nexthdr, state);
			return;
		}
		if (reply)
			ct6_tuple_reverse(tuple);
	}
	state->status = CT_NEW;
}

/* Stores a new flow's entry, and for TCP and UDP the ICMPv6 entry its
 * errors pass as related by (1.16's second entry in the related map). */
static __always_inline int ct_create6(struct __sk_buff *ctx, const struct ipv6_ct_tuple *tuple,
				      const struct ct_state *state, __u32 src_sec_id,
				      __u16 ifindex)
{
	struct ipv6_ct_tuple icmp = {};
	struct ct_entry entry, related;

	ct_new_entry(ctx, &entry, state, tuple->nexthdr, src_sec_id, ifindex);
	if (bpf_map_update_elem(ct6_map_for(tuple->nexthdr), tuple, &entry, BPF_ANY) < 0)
		return -DROP_CT_CREATE_FAILED;
	if (tuple->nexthdr == NEXTHDR_ICMP)
		return 0;
	icmp.daddr = tuple->daddr;
	icmp.saddr = tuple->saddr;
	icmp.nexthdr = NEXTHDR_ICMP;
	icmp.flags = tuple->flags | TUPLE_F_RELATED;
	ct_related_entry(&related, &entry);
	if (bpf_map_update_elem(&cilium_ct_any6_global, &icmp, &related, BPF_ANY) < 0)
		return -DROP_CT_CREATE_FAILED;
	return 0;
}

static __always_inline int ct_track6(struct __sk_buff *ctx, const struct ct6_packet *pkt,
				     int dir, __u32 src_sec_id, __u16 ifindex,
				     struct ct_state *state)
{
	struct ipv6_ct_tuple tuple = pkt->tuple;

	state->tcp_flags = pkt->tcp_flags;
	ct_lookup6(ctx, dir, &tuple, state);
	if (state->status != CT_NEW)
		return 0;
	return ct_create6(ctx, &tuple, state, src_sec_id, ifindex);
}

#endif /* ENABLE_IPV6 */
#endif /* __LIB_CONNTRACK6_H_ */
