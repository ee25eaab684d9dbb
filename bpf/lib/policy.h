/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Policy enforcement (Cilium's policy.h): an endpoint's policy map is
 * looked up twice, with the peer's identity and with identity 0 (any), and
 * the more specific match wins in Cilium's order: L3+L4, L4 only, L3+proto,
 * proto only, L3 only, allow-all. A deny entry drops with
 * DROP_POLICY_DENY; no match drops with DROP_POLICY. Replies and related
 * packets of a tracked flow are not looked up.
 */
#ifndef __LIB_POLICY_H_
#define __LIB_POLICY_H_

#include "common.h"
#include "maps.h"
#include "conntrack.h"
#include "conntrack6.h"
#include "ipv6.h"
#include "endpoint.h"
#include "notify.h"

/* identity, direction, protocol and port all given */
#define POLICY_FULL_PREFIX	64

static __always_inline int policy_exact_port(const struct policy_entry *e)
{
	return !(e->flags & POLICY_FLAG_WILDCARD_DPORT);
}

static __always_inline int policy_exact_proto(const struct policy_entry *e)
{
	return !(e->flags & POLICY_FLAG_WILDCARD_PROTOCOL);
}

/* Cilium's match types, as policy verdict events carry them */
#define POLICY_MATCH_NONE	0
#define POLICY_MATCH_L3_ONLY	1
#define POLICY_MATCH_L3_L4	2
#define POLICY_MATCH_L4_ONLY	3
#define POLICY_MATCH_ALL	4
#define POLICY_MATCH_L3_PROTO	5
#define POLICY_MATCH_PROTO_ONLY	6

/* May traffic between endpoint ep_id and the peer `remote` pass, in the
 * given direction, to destination port dport (network order; policy_dport
 * gives it, 0 for protocols without ports)? Returns 0 or a negative drop
 * reason. */
static __always_inline int policy_can_access(__u32 ep_id, __u32 remote, __u8 egress,
					     __u8 proto, __u16 dport, __u32 len,
					     __u8 *match)
{
	struct policy_key key = {
		.prefixlen = POLICY_FULL_PREFIX,
		.sec_label = remote,
		.egress = egress,
		.protocol = proto,
		.dport = dport,
	};
	struct policy_entry *a, *b, *pick;
	void *map;

	map = bpf_map_lookup_elem(&cilium_rs_policy_maps, &ep_id);
	if (!map)
		return -DROP_NO_CONFIG;
	a = bpf_map_lookup_elem(map, &key);
	key.sec_label = 0;
	b = bpf_map_lookup_elem(map, &key);
	if (a && policy_exact_port(a)) {
		pick = a;
		*match = POLICY_MATCH_L3_L4;
	} else if (b && policy_exact_port(b)) {
		pick = b;
		*match = POLICY_MATCH_L4_ONLY;
	} else if (a && policy_exact_proto(a)) {
		pick = a;
		*match = POLICY_MATCH_L3_PROTO;
	} else if (b && policy_exact_proto(b)) {
		pick = b;
		*match = POLICY_MATCH_PROTO_ONLY;
	} else if (a) {
		pick = a;
		*match = POLICY_MATCH_L3_ONLY;
	} else {
		pick = b;
		*match = POLICY_MATCH_ALL;
	}
	if (!pick) {
		*match = POLICY_MATCH_NONE;
		return -DROP_POLICY;
	}
	__sync_fetch_and_add(&pick->packets, 1);
	__sync_fetch_and_add(&pick->bytes, len);
	if (pick->flags & POLICY_FLAG_DENY)
		return -DROP_POLICY_DENY;
	return 0;
}

static __always_inline void send_policy_verdict_notify(struct __sk_buff *ctx, __u32 ep_id,
						       __u32 remote, __u16 dport, __u8 proto,
						       __u8 egress, __u8 match, int verdict)
{
	__u32 cap_len = notify_cap_len(ctx);
	struct policy_verdict_notify msg = {
		NOTIFY_CAPTURE_HDR(ctx, CILIUM_NOTIFY_POLICY_VERDICT, 0, (__u16)ep_id, cap_len),
		.remote_label = remote,
		.verdict = verdict,
		.dst_port = bpf_ntohs(dport),
		.proto = proto,
		.flags = (egress ? 2 : 1) | (__u8)(match << 3),
	};

	notify_output(ctx, &msg, sizeof(msg), cap_len);
}

/* The "port" policy keys carry: the destination port (CT tuples keep it in
 * sport), or for ICMP and ICMPv6 the type << 8, as Cilium keys ICMP rules. */
static __always_inline __u16 policy_dport(__u8 nexthdr, __u16 tuple_sport, __u8 icmp_type)
{
	switch (nexthdr) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		return tuple_sport;
	case IPPROTO_ICMP:
	case NEXTHDR_ICMP:
		return bpf_htons((__u16)icmp_type << 8);
	default:
		return 0;
	}
}

/* The policy half of tracking a packet for endpoint ep_id in direction
 * dir, once its flow was looked up: a packet that is not a reply is
 * checked against the policy for its peer `remote`. Allowed established
 * flows keep passing across policy changes as long as the policy still
 * allows them. Returns 0 or a negative drop reason. */
static __always_inline int ct_policy_check(struct __sk_buff *ctx, const struct ct_state *state,
					   int dir, __u32 ep_id, __u32 remote, __u8 nexthdr,
					   __u16 dport)
{
	__u8 match = POLICY_MATCH_NONE;
	int ret;

	if (state->status == CT_REPLY || state->status == CT_RELATED)
		return 0;
	ret = policy_can_access(ep_id, remote, dir == CT_EGRESS, nexthdr, dport, ctx->len,
				&match);
	/* every denial, and the allow that opens a connection */
	if (ret < 0 || state->status == CT_NEW)
		send_policy_verdict_notify(ctx, ep_id, remote, dport, nexthdr, dir == CT_EGRESS,
					   match, ret);
	return ret;
}

/* ct_track4 with the policy of endpoint ep_id between: only an allowed new
 * flow gets its entry. */
static __always_inline int ct_track4_policy(struct __sk_buff *ctx, const struct ct_packet *pkt,
					    int dir, __u32 src_sec_id, __u16 ifindex,
					    struct ct_state *state, __u32 ep_id, __u32 remote)
{
	struct ipv4_ct_tuple tuple = pkt->tuple;
	int ret;

	state->tcp_flags = pkt->tcp_flags;
	ct_lookup4(ctx, dir, &tuple, state);
	ret = ct_policy_check(ctx, state, dir, ep_id, remote, tuple.nexthdr,
			      policy_dport(tuple.nexthdr, pkt->tuple.sport, pkt->icmp_type));
	if (ret < 0 || state->status != CT_NEW)
		return ret;
	return ct_create4(ctx, &tuple, state, src_sec_id, ifindex);
}

#ifdef ENABLE_IPV6
static __always_inline int ct_track6_policy(struct __sk_buff *ctx, const struct ct6_packet *pkt,
					    int dir, __u32 src_sec_id, __u16 ifindex,
					    struct ct_state *state, __u32 ep_id, __u32 remote)
{
	struct ipv6_ct_tuple tuple = pkt->tuple;
	int ret;

	state->tcp_flags = pkt->tcp_flags;
	ct_lookup6(ctx, dir, &tuple, state);
	ret = ct_policy_check(ctx, state, dir, ep_id, remote, tuple.nexthdr,
			      policy_dport(tuple.nexthdr, pkt->tuple.sport, pkt->icmp_type));
	if (ret < 0 || state->status != CT_NEW)
		return ret;
	return ct_create6(ctx, &tuple, state, src_sec_id, ifindex);
}
#endif /* ENABLE_IPV6 */

/* skb->cb slots of a tail call into an endpoint's ingress */
#define CB_SRC_LABEL		0	/* the source identity */
#define CB_POLICY_FLAGS		1	/* POLICY_F_* */
#define CB_EP_ADDR		2	/* the endpoint's address (its cilium_lxc key) */

#define POLICY_F_SKIP		(1 << 0)	/* a pod reaching itself: no policy */
#define POLICY_F_PEER		(1 << 1)	/* deliver with bpf_redirect_peer */
#define POLICY_F_NODEPORT	(1 << 2)	/* a NodePort flow keeping its client's address */

/* Hands the packet to endpoint ep's ingress (cilium_call_policy); returns
 * only when the endpoint has no program there. */
static __always_inline int policy_tail_call_ingress(struct __sk_buff *ctx,
						    const struct endpoint_info *ep,
						    __u32 ep_addr, __u32 src_id, __u32 flags)
{
	ctx->cb[CB_SRC_LABEL] = src_id;
	ctx->cb[CB_POLICY_FLAGS] = flags;
	ctx->cb[CB_EP_ADDR] = ep_addr;
	bpf_tail_call(ctx, &cilium_call_policy, ep->lxc_id);
	return -DROP_MISSED_TAIL_CALL;
}

#endif /* __LIB_POLICY_H_ */
