/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPv4 connection tracking with Cilium's tuple conventions: the tuple is
 * filled straight from the packet, looked up as is (a hit is a reply), then
 * reversed with the IN bit flipped (a hit is an established flow). A miss
 * leaves the reversed tuple, which is exactly the key a new entry gets.
 *
 * The packet is parsed once (ct_parse4) and may then be tracked for both of
 * the endpoints it passes between (ct_track4 per direction).
 */
#ifndef __LIB_CONNTRACK_H_
#define __LIB_CONNTRACK_H_

#include <linux/in.h>
#include <linux/tcp.h>
#include "icmp.h"
#include "conntrack_map.h"
#include "ipv4.h"
#include "frag.h"

#define TCP_FLAG_FIN	0x01
#define TCP_FLAG_SYN	0x02
#define TCP_FLAG_RST	0x04
#define TCP_FLAG_ACK	0x10

struct ct_state {
	__u8 status;		/* CT_NEW, CT_ESTABLISHED, CT_REPLY, CT_RELATED */
	__u8 tcp_flags;
	/* of the entry that matched; given for the entry a new flow gets */
	__u16 rev_nat_index;	/* network order; 0 = not load-balanced */
	__u8 loopback;		/* hairpin flow: source is IPV4_LOOPBACK */
	/* a flow that came in through a NodePort with its client's address:
	 * its replies are translated back by the NodePort's NAT entries */
	__u8 node_port;
	__u32 src_sec_id;	/* of the entry that matched */
};

static __always_inline __u32 ct_now(void)
{
	return (__u32)(bpf_ktime_get_ns() / 1000000000ULL);
}

static __always_inline void *ct_map_for(__u8 nexthdr)
{
	return nexthdr == IPPROTO_TCP ? (void *)&cilium_ct4_global :
					(void *)&cilium_ct_any4_global;
}

/* What conntrack needs of one packet, read from its headers once. */
struct ct_packet {
	struct ipv4_ct_tuple tuple;	/* no direction bit set */
	__u8 tcp_flags;
	__u8 icmp_type;			/* what ICMP policy rules match on */
};

/* An ICMP message's tuple: echoes by their identifier, errors as related
 * to the flow they are about. Returns 0 or a negative drop reason. */
static __always_inline int ct_icmp_tuple(struct ipv4_ct_tuple *tuple, __u8 type, __u16 id)
{
	switch (type) {
	case ICMP_ECHO:
		tuple->dport = id;
		return 0;
	case ICMP_ECHOREPLY:
		tuple->sport = id;
		return 0;
	case ICMP_DEST_UNREACH:
	case ICMP_TIME_EXCEEDED:
	case ICMP_PARAMETERPROB:
		tuple->flags |= TUPLE_F_RELATED;
		return 0;
	default:
		return -DROP_UNKNOWN_ICMP_TYPE;
	}
}

/* TCP and UDP (either family): the ports into a tuple's dport and sport
 * (sport then dport on the wire land in dport then sport), and TCP's
 * flags, which live in byte 13 of its header. */
static __always_inline int ct_load_ports(struct __sk_buff *ctx, int l4_off, __u8 nexthdr,
					 void *tuple_ports, __u8 *tcp_flags)
{
	if (nexthdr == IPPROTO_TCP && bpf_skb_load_bytes(ctx, l4_off + 13, tcp_flags, 1) < 0)
		return -DROP_CT_INVALID_HDR;
	if (bpf_skb_load_bytes(ctx, l4_off, tuple_ports, 4) < 0)
		return -DROP_CT_INVALID_HDR;
	return 0;
}

/* Fills the tuple's ports and flags, and the TCP flags or ICMP type, from
 * the L4 header at l4_off. Returns 0 or a negative drop reason. */
static __always_inline int ct_extract_l4(struct __sk_buff *ctx, int l4_off,
					 struct ct_packet *pkt)
{
	struct ipv4_ct_tuple *tuple = &pkt->tuple;

	switch (tuple->nexthdr) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		return ct_load_ports(ctx, l4_off, tuple->nexthdr, &tuple->dport, &pkt->tcp_flags);
	case IPPROTO_ICMP: {
		struct icmphdr icmp;

		if (bpf_skb_load_bytes(ctx, l4_off, &icmp, sizeof(icmp)) < 0)
			return -DROP_CT_INVALID_HDR;
		pkt->icmp_type = icmp.type;
		return ct_icmp_tuple(tuple, icmp.type, icmp.un.echo.id);
	}
	default:
		return -DROP_CT_UNKNOWN_PROTO;
	}
}

static __always_inline void ct_tuple_reverse(struct ipv4_ct_tuple *tuple)
{
	__u32 addr = tuple->daddr;
	__u16 port = tuple->dport;

	tuple->daddr = tuple->saddr;
	tuple->saddr = addr;
	tuple->dport = tuple->sport;
	tuple->sport = port;
	tuple->flags ^= TUPLE_F_IN;
}

static __always_inline __u32 ct_lifetime(const struct ct_entry *entry, __u8 nexthdr)
{
	if (nexthdr != IPPROTO_TCP)
		return CT_CONNECTION_LIFETIME_NONTCP;
	if ((entry->flags & (CT_F_RX_CLOSING | CT_F_TX_CLOSING)) ==
	    (CT_F_RX_CLOSING | CT_F_TX_CLOSING))
		return CT_CLOSE_TIMEOUT;
	if (!(entry->flags & CT_F_SEEN_NON_SYN))
		return CT_SYN_TIMEOUT;
	return CT_CONNECTION_LIFETIME_TCP;
}

static __always_inline void ct_update(struct ct_entry *entry, __u8 nexthdr,
				      __u8 tcp_flags, int reply, __u32 len)
{
	__sync_fetch_and_add(&entry->packets, 1);
	__sync_fetch_and_add(&entry->bytes, len);
	if (nexthdr == IPPROTO_TCP) {
		/* A new connection on the tuple of a closed one (Cilium's
		 * CT_REOPENED): the entry starts over. */
		if ((tcp_flags & TCP_FLAG_SYN) && !(tcp_flags & TCP_FLAG_ACK) &&
		    (entry->flags & (CT_F_RX_CLOSING | CT_F_TX_CLOSING))) {
			entry->flags &= ~(CT_F_RX_CLOSING | CT_F_TX_CLOSING | CT_F_SEEN_NON_SYN);
			entry->rx_flags_seen = 0;
			entry->tx_flags_seen = 0;
		}
		if (reply)
			entry->rx_flags_seen |= tcp_flags;
		else
			entry->tx_flags_seen |= tcp_flags;
		if (!(tcp_flags & TCP_FLAG_SYN))
			entry->flags |= CT_F_SEEN_NON_SYN;
		if (tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST))
			entry->flags |= reply ? CT_F_RX_CLOSING : CT_F_TX_CLOSING;
		if (tcp_flags & TCP_FLAG_RST)
			entry->flags |= CT_F_RX_CLOSING | CT_F_TX_CLOSING;
	}
	entry->lifetime = ct_now() + ct_lifetime(entry, nexthdr);
}

/* Reads the packet's tuple; a fragment gets its datagram's. Returns 0 or a
 * negative drop reason. */
static __always_inline int ct_parse4(struct __sk_buff *ctx, const struct iphdr *ip4,
				     struct ct_packet *pkt)
{
	struct ipv4_frag_l4ports ports = {};
	int ret;

	__builtin_memset(pkt, 0, sizeof(*pkt));
	pkt->tuple.daddr = ip4->daddr;
	pkt->tuple.saddr = ip4->saddr;
	pkt->tuple.nexthdr = ip4->protocol;
	/* ICMP has no ports: its fragments note the type and identifier */
	if (ipv4_is_fragment(ip4)) {
		ret = ipv4_frag_recall(ip4, &ports);
		if (ret < 0)
			return ret;
		if (pkt->tuple.nexthdr != IPPROTO_ICMP) {
			/* tuples keep the source port in dport */
			pkt->tuple.dport = ports.sport;
			pkt->tuple.sport = ports.dport;
			return 0;
		}
		pkt->icmp_type = (__u8)ports.sport;
		return ct_icmp_tuple(&pkt->tuple, pkt->icmp_type, ports.dport);
	}
	ret = ct_extract_l4(ctx, ipv4_l4_off(ip4), pkt);
	if (ret < 0 || !ipv4_is_first_fragment(ip4))
		return ret;
	if (pkt->tuple.nexthdr == IPPROTO_ICMP)
		ipv4_frag_remember(ip4, pkt->icmp_type, pkt->tuple.dport | pkt->tuple.sport);
	else
		ipv4_frag_remember(ip4, pkt->tuple.dport, pkt->tuple.sport);
	return 0;
}

/* A packet matched `entry`, as a reply or in its original direction:
 * state says what the flow is, the entry counts the packet. */
static __always_inline void ct_entry_hit(struct __sk_buff *ctx, struct ct_entry *entry,
					 int dir, int reply, int related, __u8 nexthdr,
					 struct ct_state *state)
{
	/* the load balancer's decisions for this packet, made before lookup */
	__u16 rev_nat_index = state->rev_nat_index;
	__u8 node_port = state->node_port;

	state->status = related ? CT_RELATED : reply ? CT_REPLY : CT_ESTABLISHED;
	state->src_sec_id = entry->src_sec_id;
	/* A flow's own packets carry the translation made for them now: the
	 * tuple may have served another (closed) flow that went through a
	 * different service, or none. */
	if (!reply && dir == CT_EGRESS)
		entry->rev_nat_index = rev_nat_index;
	state->rev_nat_index = entry->rev_nat_index;
	if (!reply && node_port)
		entry->flags |= CT_F_NODE_PORT;
	state->node_port = !!(entry->flags & CT_F_NODE_PORT);
	state->loopback = !!(entry->flags & CT_F_LB_LOOPBACK);
	ct_update(entry, nexthdr, state->tcp_flags, reply, ctx->len);
}

/*
 * Looks the packet up for direction dir (CT_EGRESS leaving an endpoint,
 * CT_INGRESS entering one). On return the tuple is the key to create under
 * when the status is CT_NEW.
 */
static __always_inline void ct_lookup4(struct __sk_buff *ctx, int dir,
				       struct ipv4_ct_tuple *tuple,
				       struct ct_state *state)
{
	struct ct_entry *entry;
	void *map = ct_map_for(tuple->nexthdr);

	tuple->flags |= dir == CT_EGRESS ? TUPLE_F_IN : TUPLE_F_OUT;
	/* as is: a reply; reversed: the original direction */
	for (int reply = 1; reply >= 0; reply--) {
		entry = bpf_map_lookup_elem(map, tuple);
		if (entry) {
			ct_entry_hit(ctx, entry, dir, reply, tuple->flags & TUPLE_F_RELATED,
				     tuple->nexthdr, state);
			return;
		}
		if (reply)
			ct_tuple_reverse(tuple);
	}
	state->status = CT_NEW;
}

/*
 * As Cilium does, a flow also gets an ICMP entry between its two addresses,
 * so the errors its peer sends about it (port unreachable, fragmentation
 * needed, time exceeded) pass as CT_RELATED where policy would refuse a
 * new ICMP flow. It lives as long as a non-TCP flow and is refreshed by the
 * errors it lets through.
 */
static __always_inline void ct_related_entry(struct ct_entry *entry, const struct ct_entry *flow)
{
	*entry = *flow;
	entry->flags = (flow->flags & CT_F_LB_LOOPBACK) | CT_F_SEEN_NON_SYN;
	/* it counts the errors, not the flow's packets */
	entry->packets = 0;
	entry->bytes = 0;
	entry->lifetime = ct_now() + CT_CONNECTION_LIFETIME_NONTCP;
}

static __always_inline int ct_create_related4(const struct ipv4_ct_tuple *tuple,
					      const struct ct_entry *flow)
{
	struct ipv4_ct_tuple icmp = {
		.daddr = tuple->daddr,
		.saddr = tuple->saddr,
		.nexthdr = IPPROTO_ICMP,
		.flags = tuple->flags | TUPLE_F_RELATED,
	};
	struct ct_entry entry;

	ct_related_entry(&entry, flow);
	if (bpf_map_update_elem(&cilium_ct_any4_global, &icmp, &entry, BPF_ANY) < 0)
		return -DROP_CT_CREATE_FAILED;
	return 0;
}

/* The entry a new flow of this packet gets (either family). */
static __always_inline void ct_new_entry(struct __sk_buff *ctx, struct ct_entry *entry,
					 const struct ct_state *state, __u8 nexthdr,
					 __u32 src_sec_id, __u16 ifindex)
{
	__u32 now = ct_now();

	__builtin_memset(entry, 0, sizeof(*entry));
	entry->src_sec_id = src_sec_id;
	entry->ifindex = ifindex;
	entry->packets = 1;
	entry->bytes = ctx->len;
	entry->tx_flags_seen = state->tcp_flags;
	entry->last_tx_report = now;
	entry->rev_nat_index = state->rev_nat_index;
	if (nexthdr == IPPROTO_TCP && !(state->tcp_flags & TCP_FLAG_SYN))
		entry->flags |= CT_F_SEEN_NON_SYN;
	if (state->loopback)
		entry->flags |= CT_F_LB_LOOPBACK;
	if (state->node_port)
		entry->flags |= CT_F_NODE_PORT;
	entry->lifetime = now + ct_lifetime(entry, nexthdr);
}

/* Stores a new entry under the tuple ct_lookup4 left. */
static __always_inline int ct_create4(struct __sk_buff *ctx,
				      const struct ipv4_ct_tuple *tuple,
				      const struct ct_state *state,
				      __u32 src_sec_id, __u16 ifindex)
{
	struct ct_entry entry;

	ct_new_entry(ctx, &entry, state, tuple->nexthdr, src_sec_id, ifindex);
	if (bpf_map_update_elem(ct_map_for(tuple->nexthdr), tuple, &entry, BPF_ANY) < 0)
		return -DROP_CT_CREATE_FAILED;
	if (tuple->nexthdr != IPPROTO_ICMP)
		return ct_create_related4(tuple, &entry);
	return 0;
}

/* Looks a parsed packet up for direction dir and creates the entry of a
 * new flow. Returns 0 or a negative drop reason. */
static __always_inline int ct_track4(struct __sk_buff *ctx, const struct ct_packet *pkt,
				     int dir, __u32 src_sec_id, __u16 ifindex,
				     struct ct_state *state)
{
	struct ipv4_ct_tuple tuple = pkt->tuple;

	state->tcp_flags = pkt->tcp_flags;
	ct_lookup4(ctx, dir, &tuple, state);
	if (state->status != CT_NEW)
		return 0;
	return ct_create4(ctx, &tuple, state, src_sec_id, ifindex);
}

#endif /* __LIB_CONNTRACK_H_ */
