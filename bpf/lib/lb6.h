/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Service load balancing for IPv6 (Cilium's lb6_local), by lb.h's rules
 * over the cilium_lb6_* maps: the frontend of the packet's protocol or of
 * any, the internal scope for the cluster's own clients, a flow kept on
 * its backend by a SERVICE entry in cilium_ct*6_global, ClientIP affinity,
 * Maglev for NodePorts,
 * and replies (ICMPv6 errors too) turned back into the frontend's. IPv6
 * has no header checksum: an address change moves only the L4 checksum,
 * whose pseudo header covers both addresses.
 */
#ifndef __LIB_LB6_H_
#define __LIB_LB6_H_

#ifdef ENABLE_IPV6

#include "lb.h"
#include "conntrack6.h"
#include "hash.h"

struct lb6_target {
	union v6addr address;
	__u16 port;		/* network order; 0 = keep the packet's */
	__u16 rev_nat_index;	/* network order */
};

/* A frontend as the services map keys it (lb4_frontend's twin). */
struct lb6_frontend {
	union v6addr address;
	__u16 port;		/* network order */
	__u8 proto;		/* 0 = any */
	__u8 scope;
};

static __always_inline struct lb6_service *lb6_lookup_key(const struct lb6_frontend *fe,
							   __u16 slot)
{
	struct lb6_key key = {
		.address = fe->address,
		.dport = fe->port,
		.backend_slot = slot,
		.proto = fe->proto,
		.scope = fe->scope,
	};

	return bpf_map_lookup_elem(&cilium_lb6_services_v2, &key);
}

static __always_inline struct lb6_service *lb6_lookup_scoped(const union v6addr *address,
							      __u16 port, __u8 proto, __u8 scope,
							      struct lb6_frontend *fe)
{
	struct lb6_service *svc;

	fe->address = *address;
	fe->port = port;
	fe->proto = proto;
	fe->scope = scope;
	svc = lb6_lookup_key(fe, 0);
	if (svc || !proto)
		return svc;
	fe->proto = 0;
	return lb6_lookup_key(fe, 0);
}

/* The cluster's own clients get a two-scoped frontend's internal entry,
 * unless it is missing; fe names the entry found, for its slots. */
static __always_inline struct lb6_service *lb6_lookup_service_internal(const union v6addr *address,
									__u16 port, __u8 proto,
									struct lb6_frontend *fe)
{
	struct lb6_service *svc, *internal;
	struct lb6_frontend in;

	svc = lb6_lookup_scoped(address, port, proto, LB_LOOKUP_SCOPE_EXT, fe);
	if (!svc || !(svc->flags2 & SVC_FLAG_TWO_SCOPES))
		return svc;
	in = *fe;
	in.scope = LB_LOOKUP_SCOPE_INT;
	internal = lb6_lookup_key(&in, 0);
	if (!internal)
		return svc;
	*fe = in;
	return internal;
}

static __always_inline struct lb6_backend *lb6_backend_of_slot(const struct lb6_frontend *fe,
								__u16 slot, __u32 *id)
{
	struct lb6_service *entry = lb6_lookup_key(fe, slot);

	if (!entry)
		return NULL;
	*id = entry->backend_id;
	return bpf_map_lookup_elem(&cilium_lb6_backends_v3, id);
}

/* lb4_maglev_backend for IPv6: the backend the service's lookup table in
 * cilium_lb6_maglev gives this flow, or NULL when it has none. */
static __always_inline struct lb6_backend *lb6_maglev_backend(const struct ipv6_ct_tuple *tuple,
							      const struct lb6_service *svc,
							      __u32 *id)
{
	__u16 rev_nat = svc->rev_nat_index;
	struct lb4_maglev_lut *lut;
	__u32 seed, index, zero = 0;
	void *inner;

	inner = bpf_map_lookup_elem(&cilium_lb6_maglev, &rev_nat);
	if (!inner)
		return NULL;
	lut = bpf_map_lookup_elem(inner, &zero);
	if (!lut)
		return NULL;
	seed = (__u32)runtime_config(RUNTIME_CONFIG_MAGLEV_SEED6);
	index = hash_from_tuple_v6(tuple, seed) % LB_MAGLEV_LUT_SIZE;
	/* as for IPv4: give the verifier its bound back */
	asm volatile("" : "+r"(index));
	if (index >= LB_MAGLEV_LUT_SIZE)
		return NULL;
	*id = lut->backend_ids[index];
	return bpf_map_lookup_elem(&cilium_lb6_backends_v3, id);
}

/* Session affinity by the client's IPv6 address, or a netns cookie in its
 * first 8 bytes (is_cookie) for socket LB; lb4_affinity_backend's rules:
 * within the service's timeout, still one of its backends, active. */
static __always_inline struct lb6_backend *lb6_affinity_backend(const union v6addr *client,
								__u8 is_cookie,
								const struct lb6_service *svc,
								__u32 *id)
{
	struct lb6_affinity_key key = {
		.client_id = *client,
		.rev_nat_id = svc->rev_nat_index,
		.netns_cookie = is_cookie,
	};
	struct lb_affinity_match match = {
		.rev_nat_id = svc->rev_nat_index,
	};
	struct lb_affinity_val *val;
	struct lb6_backend *backend;

	val = bpf_map_lookup_elem(&cilium_lb6_affinity, &key);
	if (!val || val->last_used + svc->backend_id < ct_now())
		return NULL;
	match.backend_id = val->backend_id;
	if (!bpf_map_lookup_elem(&cilium_lb_affinity_match, &match))
		return NULL;
	*id = val->backend_id;
	backend = bpf_map_lookup_elem(&cilium_lb6_backends_v3, id);
	if (!backend || backend->flags != BE_STATE_ACTIVE)
		return NULL;
	return backend;
}

static __always_inline void lb6_affinity_update(const union v6addr *client, __u8 is_cookie,
						const struct lb6_service *svc, __u32 id)
{
	struct lb6_affinity_key key = {
		.client_id = *client,
		.rev_nat_id = svc->rev_nat_index,
		.netns_cookie = is_cookie,
	};
	struct lb_affinity_val val = {
		.last_used = ct_now(),
		.backend_id = id,
	};

	bpf_map_update_elem(&cilium_lb6_affinity, &key, &val, BPF_ANY);
}

/* lb4_select for IPv6: the flow's SERVICE entry keeps its backend while
 * it exists (a terminating one takes no new connection); else affinity,
 * the Maglev table (maglev), or a random slot. Returns 0 or
 * -DROP_NO_SERVICE. */
static __always_inline int lb6_select(struct __sk_buff *ctx, const struct ct6_packet *pkt,
				      const struct lb6_service *svc,
				      const struct lb6_frontend *fe, int maglev,
				      struct lb6_target *target)
{
	struct ipv6_ct_tuple key = pkt->tuple;
	void *map = ct6_map_for(key.nexthdr);
	struct lb6_backend *backend = NULL;
	struct ct_entry *entry;
	__u32 id = 0;
	int syn = (pkt->tcp_flags & TCP_FLAG_SYN) && !(pkt->tcp_flags & TCP_FLAG_ACK);

	key.flags = TUPLE_F_SERVICE;
	entry = bpf_map_lookup_elem(map, &key);
	if (entry) {
		id = (__u32)entry->backend_id;
		backend = bpf_map_lookup_elem(&cilium_lb6_backends_v3, &id);
		if (backend && backend->flags != BE_STATE_ACTIVE && syn)
			backend = NULL;
		if (backend)
			ct_update(entry, key.nexthdr, pkt->tcp_flags, 0, ctx->len);
	}
	if (!backend) {
		if (svc->count == 0)
			return -DROP_NO_SERVICE;
		if (svc->flags & SVC_FLAG_AFFINITY)
			backend = lb6_affinity_backend(&key.saddr, 0, svc, &id);
		if (!backend && maglev)
			backend = lb6_maglev_backend(&pkt->tuple, svc, &id);
		if (!backend)
			backend = lb6_backend_of_slot(fe,
						      (__u16)(bpf_get_prandom_u32() % svc->count) + 1,
						      &id);
		if (!backend)
			return -DROP_NO_SERVICE;
		if (svc->flags & SVC_FLAG_AFFINITY)
			lb6_affinity_update(&key.saddr, 0, svc, id);
		struct ct_entry fresh = {
			.backend_id = id,
			.rev_nat_index = svc->rev_nat_index,
			.packets = 1,
			.bytes = ctx->len,
			.tx_flags_seen = pkt->tcp_flags,
		};
		fresh.lifetime = ct_now() + ct_lifetime(&fresh, key.nexthdr);
		if (bpf_map_update_elem(map, &key, &fresh, BPF_ANY) < 0)
			return -DROP_CT_CREATE_FAILED;
	}
	target->address = backend->address;
	target->port = backend->port;
	target->rev_nat_index = svc->rev_nat_index;
	return 0;
}

/* Folds the change of len bytes at off, from old to new, into the checksum
 * at csum_off; pseudo when the bytes are part of the pseudo header. */
static __always_inline int lb6_csum_move(struct __sk_buff *ctx, int csum_off, const void *old,
					 const void *new, __u32 len, __u64 flags)
{
	__s64 diff = bpf_csum_diff((void *)old, len, (void *)new, len, 0);

	if (diff < 0 || bpf_l4_csum_replace(ctx, csum_off, 0, diff, flags) < 0)
		return -DROP_CSUM_L4;
	return 0;
}

/* Rewrites the destination (dst) or source address and port of a TCP/UDP
 * packet with its checksum; of an ICMPv6 echo, the "port" is its
 * identifier (either way), and its checksum covers the addresses too.
 * port 0 keeps the port. A later fragment only changes its address (the
 * first fragment's checksum covers the datagram). */
static __always_inline int lb6_xlate(struct __sk_buff *ctx, const struct ipv6_l4 *l4,
				     __u8 proto, int dst, const union v6addr *address,
				     __u16 port)
{
	int icmp = proto == NEXTHDR_ICMP;
	int addr_off = ETH_HLEN + (dst ? offsetof(struct ipv6hdr, daddr) :
					 offsetof(struct ipv6hdr, saddr));
	int port_off = l4->off + (icmp ? 4 : dst ? 2 : 0);
	int csum_off = l4->off + (proto == IPPROTO_TCP ? 16 : icmp ? 2 : 6);
	/* a UDP checksum of 0 would mean none, which IPv6 does not allow */
	__u64 mangled = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	int has_l4 = l4->fragment != IPV6_FRAG_LATER;
	union v6addr old_addr;
	__u16 old_port = 0;

	if (bpf_skb_load_bytes(ctx, addr_off, &old_addr, sizeof(old_addr)) < 0 ||
	    (has_l4 && bpf_skb_load_bytes(ctx, port_off, &old_port, 2) < 0))
		return -DROP_INVALID;
	if (!ipv6_addr_equals(&old_addr, address)) {
		if (has_l4 && lb6_csum_move(ctx, csum_off, &old_addr, address, sizeof(old_addr),
					    mangled | BPF_F_PSEUDO_HDR) < 0)
			return -DROP_CSUM_L4;
		if (bpf_skb_store_bytes(ctx, addr_off, address, sizeof(*address), 0) < 0)
			return -DROP_WRITE_ERROR;
	}
	if (has_l4 && port && old_port != port) {
		if (bpf_l4_csum_replace(ctx, csum_off, old_port, port, mangled | 2) < 0 ||
		    bpf_skb_store_bytes(ctx, port_off, &port, 2, 0) < 0)
			return -DROP_WRITE_ERROR;
	}
	return 0;
}

/*
 * Load-balances an IPv6 packet leaving a pod (lb4_local's twin): a
 * service frontend becomes the flow's backend in the packet and in pkt;
 * state->rev_nat_index tells the flow's conntrack entry how to undo it.
 * A pod that is its own backend is not treated as a hairpin here: IPv6
 * has no loopback address to send it from, as in 1.16.
 */
static __always_inline int lb6_local(struct __sk_buff *ctx, struct ct6_packet *pkt,
				     struct ct_state *state)
{
	struct lb6_target target = {};
	struct lb6_frontend fe;
	struct lb6_service *svc;
	int ret;

	state->rev_nat_index = 0;
	state->loopback = 0;
	if (!lb4_is_balanced_proto(pkt->tuple.nexthdr))
		return 0;
	/* the tuple keeps the packet's destination port in sport */
	svc = lb6_lookup_service_internal(&pkt->tuple.daddr, pkt->tuple.sport,
					  pkt->tuple.nexthdr, &fe);
	if (!svc)
		return 0;
	/* pods always pick at random, as Cilium's bpf_lxc does */
	ret = lb6_select(ctx, pkt, svc, &fe, 0, &target);
	if (IS_ERR(ret))
		return ret;
	ret = lb6_xlate(ctx, &pkt->l4, pkt->tuple.nexthdr, 1, &target.address, target.port);
	if (IS_ERR(ret))
		return ret;
	pkt->tuple.daddr = target.address;
	if (target.port)
		pkt->tuple.sport = target.port;
	state->rev_nat_index = target.rev_nat_index;
	return 0;
}

/*
 * An ICMPv6 error about a load-balanced flow on its way to the client: the
 * datagram it quotes went to the backend, which the client's socket does
 * not know. The quoted destination and port become the frontend's, and so
 * does the error's source when the backend sent it. The ICMPv6 checksum
 * covers the quote and, by its pseudo header, the outer addresses.
 */
static __always_inline int lb6_rev_nat_icmp(struct __sk_buff *ctx, int l4_off,
					    __u16 rev_nat_index)
{
	int quoted = l4_off + 8;	/* the quoted IPv6 header */
	int csum_off = l4_off + 2;
	struct lb6_reverse_nat *nat;
	union v6addr outer_src, frontend;
	struct ipv6hdr in;
	__u16 old_port, port;

	nat = bpf_map_lookup_elem(&cilium_lb6_reverse_nat, &rev_nat_index);
	if (!nat)
		return 0;
	if (bpf_skb_load_bytes(ctx, quoted, &in, sizeof(in)) < 0 ||
	    bpf_skb_load_bytes(ctx, ETH_HLEN + offsetof(struct ipv6hdr, saddr), &outer_src,
			       sizeof(outer_src)) < 0)
		return -DROP_INVALID;
	/* a quote with extension headers is left as it is */
	if (!lb4_is_balanced_proto(in.nexthdr))
		return 0;
	frontend = nat->address;
	if (ipv6_addr_equals(&outer_src, (union v6addr *)&in.daddr)) {
		if (lb6_csum_move(ctx, csum_off, &outer_src, &frontend, sizeof(frontend),
				  BPF_F_PSEUDO_HDR) < 0 ||
		    bpf_skb_store_bytes(ctx, ETH_HLEN + offsetof(struct ipv6hdr, saddr),
					&frontend, sizeof(frontend), 0) < 0)
			return -DROP_CSUM_L4;
	}
	if (lb6_csum_move(ctx, csum_off, &in.daddr, &frontend, sizeof(frontend), 0) < 0 ||
	    bpf_skb_store_bytes(ctx, quoted + offsetof(struct ipv6hdr, daddr), &frontend,
				sizeof(frontend), 0) < 0)
		return -DROP_CSUM_L4;
	port = nat->port;
	if (!port)
		return 0;
	if (bpf_skb_load_bytes(ctx, quoted + sizeof(in) + 2, &old_port, 2) < 0)
		return -DROP_INVALID;
	if (old_port == port)
		return 0;
	if (bpf_l4_csum_replace(ctx, csum_off, old_port, port, 2) < 0 ||
	    bpf_skb_store_bytes(ctx, quoted + sizeof(in) + 2, &port, 2, 0) < 0)
		return -DROP_CSUM_L4;
	return 0;
}

/* After tracking a packet into a local pod: a reply of a load-balanced
 * connection of that pod gets the frontend back as its source, an ICMPv6
 * error about one the frontend as what it quotes. */
static __always_inline int lb6_rev_nat_ingress(struct __sk_buff *ctx,
					       const struct ct6_packet *pkt,
					       const struct ct_state *state)
{
	struct lb6_reverse_nat *nat;

	if (!state->rev_nat_index)
		return 0;
	if (state->status == CT_RELATED && pkt->tuple.nexthdr == NEXTHDR_ICMP &&
	    pkt->l4.fragment == IPV6_FRAG_NONE)
		return lb6_rev_nat_icmp(ctx, pkt->l4.off, state->rev_nat_index);
	if (state->status != CT_REPLY)
		return 0;
	nat = bpf_map_lookup_elem(&cilium_lb6_reverse_nat, &state->rev_nat_index);
	if (!nat)
		return 0;	/* the service is gone; nothing to restore */
	return lb6_xlate(ctx, &pkt->l4, pkt->tuple.nexthdr, 0, &nat->address, nat->port);
}

#endif /* ENABLE_IPV6 */
#endif /* __LIB_LB6_H_ */
