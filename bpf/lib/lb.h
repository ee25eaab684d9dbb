/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Service load balancing for IPv4 (Cilium's lb4_local): look the frontend
 * up, keep each flow on the backend it first got (a SERVICE conntrack entry
 * holding the backend ID), DNAT to it, and turn replies back into the
 * frontend's address (reverse NAT by the rev-NAT index conntrack carries).
 */
#ifndef __LIB_LB_H_
#define __LIB_LB_H_

#include <stddef.h>
#include <linux/in.h>
#include "common.h"
#include "maps.h"
#include "conntrack.h"
#include "hash.h"
#include "runtime_config.h"

struct lb4_target {
	__u32 address;		/* network order */
	__u16 port;		/* network order; 0 = keep the packet's */
	__u16 rev_nat_index;	/* network order */
};

/* A frontend as the services map keys it. A lookup fills in the key it
 * found, so the flow's backend slots are read under the same protocol and
 * scope. */
struct lb4_frontend {
	__u32 address;		/* network order */
	__u16 port;		/* network order */
	__u8 proto;		/* 0 = any */
	__u8 scope;
};

static __always_inline struct lb4_service *lb4_lookup_key(const struct lb4_frontend *fe,
							   __u16 slot)
{
	struct lb4_key key = {
		.address = fe->address,
		.dport = fe->port,
		.backend_slot = slot,
		.proto = fe->proto,
		.scope = fe->scope,
	};

	return bpf_map_lookup_elem(&cilium_lb4_services_v2, &key);
}

/* The service entry of address:port in scope: the frontend of the
 * packet's L4 protocol, else one for any protocol (services made without
 * a protocol; Cilium's protocol differentiation). */
static __always_inline struct lb4_service *lb4_lookup_scoped(__u32 address, __u16 port,
							      __u8 proto, __u8 scope,
							      struct lb4_frontend *fe)
{
	struct lb4_service *svc;

	fe->address = address;
	fe->port = port;
	fe->proto = proto;
	fe->scope = scope;
	svc = lb4_lookup_key(fe, 0);
	if (svc || !proto)
		return svc;
	fe->proto = 0;
	return lb4_lookup_key(fe, 0);
}

/* The service entry of address:port for a client outside the cluster, if
 * any. */
static __always_inline struct lb4_service *lb4_lookup_service(__u32 address, __u16 port,
							       __u8 proto,
							       struct lb4_frontend *fe)
{
	return lb4_lookup_scoped(address, port, proto, LB_LOOKUP_SCOPE_EXT, fe);
}

/* The same for the cluster's own clients (pods, the node's sockets): a
 * frontend with two scopes has its internal entry for them, unless that
 * entry is missing. fe names the entry found, for its slots. */
static __always_inline struct lb4_service *lb4_lookup_service_internal(__u32 address, __u16 port,
									__u8 proto,
									struct lb4_frontend *fe)
{
	struct lb4_service *svc = lb4_lookup_service(address, port, proto, fe), *internal;
	struct lb4_frontend in;

	if (!svc || !(svc->flags2 & SVC_FLAG_TWO_SCOPES))
		return svc;
	in = *fe;
	in.scope = LB_LOOKUP_SCOPE_INT;
	internal = lb4_lookup_key(&in, 0);
	if (!internal)
		return svc;
	*fe = in;
	return internal;
}

static __always_inline struct lb4_backend *lb4_backend_of_slot(const struct lb4_frontend *fe,
								__u16 slot, __u32 *id)
{
	struct lb4_service *entry = lb4_lookup_key(fe, slot);

	if (!entry)
		return NULL;
	*id = entry->backend_id;
	return bpf_map_lookup_elem(&cilium_lb4_backends_v3, id);
}

/* Maglev: the backend the service's lookup table gives this flow, or
 * NULL when the service has no table (then selection is random). */
static __always_inline struct lb4_backend *lb4_maglev_backend(const struct ipv4_ct_tuple *tuple,
							      const struct lb4_service *svc,
							      __u32 *id)
{
	__u16 rev_nat = svc->rev_nat_index;
	struct lb4_maglev_lut *lut;
	__u32 seed, index, zero = 0;
	void *inner;

	inner = bpf_map_lookup_elem(&cilium_lb4_maglev, &rev_nat);
	if (!inner)
		return NULL;
	lut = bpf_map_lookup_elem(inner, &zero);
	if (!lut)
		return NULL;
	seed = (__u32)runtime_config(RUNTIME_CONFIG_MAGLEV_SEED4);
	index = hash_from_tuple_v4(tuple, seed) % LB_MAGLEV_LUT_SIZE;
	/* clang turns the modulo into arithmetic the verifier cannot bound;
	 * an opaque copy and an explicit check give it the bound back */
	asm volatile("" : "+r"(index));
	if (index >= LB_MAGLEV_LUT_SIZE)
		return NULL;
	*id = lut->backend_ids[index];
	return bpf_map_lookup_elem(&cilium_lb4_backends_v3, id);
}

/* Session affinity: the backend this client had for the service, if it
 * was used within the service's timeout and still belongs to it. The
 * client is an IPv4 address, or a netns cookie (is_cookie) for socket LB. */
static __always_inline struct lb4_backend *lb4_affinity_backend(__u64 client, __u8 is_cookie,
								const struct lb4_service *svc,
								__u32 *id)
{
	struct lb4_affinity_key key = {
		.client_id = client,
		.rev_nat_id = svc->rev_nat_index,
		.netns_cookie = is_cookie,
	};
	struct lb_affinity_match match = {
		.rev_nat_id = svc->rev_nat_index,
	};
	struct lb_affinity_val *val;
	struct lb4_backend *backend;

	val = bpf_map_lookup_elem(&cilium_lb4_affinity, &key);
	if (!val || val->last_used + svc->backend_id < ct_now())
		return NULL;
	match.backend_id = val->backend_id;
	if (!bpf_map_lookup_elem(&cilium_lb_affinity_match, &match))
		return NULL;
	*id = val->backend_id;
	backend = bpf_map_lookup_elem(&cilium_lb4_backends_v3, id);
	if (!backend || backend->flags != BE_STATE_ACTIVE)
		return NULL;
	return backend;
}

static __always_inline void lb4_affinity_update(__u64 client, __u8 is_cookie,
						const struct lb4_service *svc, __u32 id)
{
	struct lb4_affinity_key key = {
		.client_id = client,
		.rev_nat_id = svc->rev_nat_index,
		.netns_cookie = is_cookie,
	};
	struct lb_affinity_val val = {
		.last_used = ct_now(),
		.backend_id = id,
	};

	bpf_map_update_elem(&cilium_lb4_affinity, &key, &val, BPF_ANY);
}

/*
 * Picks the backend of a load-balanced flow whose original (pre-DNAT)
 * tuple is pkt. The flow's SERVICE entry keeps its backend while that
 * backend exists; a terminating one still carries the flow's later packets
 * but never a new connection. Returns 0, or -DROP_NO_SERVICE when the
 * service has no backend to give.
 */
static __always_inline int lb4_select(struct __sk_buff *ctx, const struct ct_packet *pkt,
				      const struct lb4_service *svc,
				      const struct lb4_frontend *fe, int maglev,
				      struct lb4_target *target)
{
	struct ipv4_ct_tuple key = pkt->tuple;
	void *map = ct_map_for(key.nexthdr);
	struct lb4_backend *backend = NULL;
	struct ct_entry *entry;
	__u32 id = 0;
	int syn = (pkt->tcp_flags & TCP_FLAG_SYN) && !(pkt->tcp_flags & TCP_FLAG_ACK);

	key.flags = TUPLE_F_SERVICE;
	entry = bpf_map_lookup_elem(map, &key);
	if (entry) {
		id = (__u32)entry->backend_id;
		backend = bpf_map_lookup_elem(&cilium_lb4_backends_v3, &id);
		if (backend && backend->flags != BE_STATE_ACTIVE && syn)
			backend = NULL;
		if (backend)
			ct_update(entry, key.nexthdr, pkt->tcp_flags, 0, ctx->len);
	}
	if (!backend) {
		if (svc->count == 0)
			return -DROP_NO_SERVICE;
		if (svc->flags & SVC_FLAG_AFFINITY)
			backend = lb4_affinity_backend(key.saddr, 0, svc, &id);
		if (!backend && maglev)
			backend = lb4_maglev_backend(&pkt->tuple, svc, &id);
		if (!backend)
			backend = lb4_backend_of_slot(fe,
						      (__u16)(bpf_get_prandom_u32() % svc->count) + 1,
						      &id);
		if (!backend)
			return -DROP_NO_SERVICE;
		if (svc->flags & SVC_FLAG_AFFINITY)
			lb4_affinity_update(key.saddr, 0, svc, id);
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

/* Rewrites the destination (dst) or source address and port of a TCP/UDP
 * packet, with the L3 and L4 checksums; of an ICMP echo, the "port" is its
 * identifier (either way), and its checksum covers no addresses. port 0
 * keeps the port. A later fragment has no L4 header: only its address
 * changes (the first fragment's L4 checksum covers the whole datagram). */
static __always_inline int lb4_xlate(struct __sk_buff *ctx, int l4_off, __u8 proto,
				     int dst, __u32 address, __u16 port)
{
	int icmp = proto == IPPROTO_ICMP;
	int addr_off = ETH_HLEN + (dst ? offsetof(struct iphdr, daddr) :
					 offsetof(struct iphdr, saddr));
	int port_off = l4_off + (icmp ? 4 : dst ? 2 : 0);
	int csum_off = l4_off + (proto == IPPROTO_TCP ? 16 : icmp ? 2 : 6);
	/* a UDP checksum of 0 means none, and must stay so */
	__u64 mangled = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	__u16 frag_off, old_port = 0;
	__u32 old_addr;
	int has_l4;

	if (bpf_skb_load_bytes(ctx, ETH_HLEN + offsetof(struct iphdr, frag_off),
			       &frag_off, 2) < 0 ||
	    bpf_skb_load_bytes(ctx, addr_off, &old_addr, 4) < 0)
		return -DROP_INVALID;
	has_l4 = !(frag_off & bpf_htons(0x1fff));
	if (has_l4 && bpf_skb_load_bytes(ctx, port_off, &old_port, 2) < 0)
		return -DROP_INVALID;
	if (old_addr != address) {
		if ((has_l4 && !icmp &&
		     bpf_l4_csum_replace(ctx, csum_off, old_addr, address,
					 mangled | BPF_F_PSEUDO_HDR | 4) < 0) ||
		    bpf_l3_csum_replace(ctx, ETH_HLEN + offsetof(struct iphdr, check),
					old_addr, address, 4) < 0 ||
		    bpf_skb_store_bytes(ctx, addr_off, &address, 4, 0) < 0)
			return -DROP_WRITE_ERROR;
	}
	if (has_l4 && port && old_port != port) {
		if (bpf_l4_csum_replace(ctx, csum_off, old_port, port, mangled | 2) < 0 ||
		    bpf_skb_store_bytes(ctx, port_off, &port, 2, 0) < 0)
			return -DROP_WRITE_ERROR;
	}
	return 0;
}

/* Rewrites both ends of a TCP/UDP packet (NAT in both directions). */
static __always_inline int lb4_xlate_both(struct __sk_buff *ctx, int l4_off, __u8 proto,
					  __u32 saddr, __u16 sport, __u32 daddr, __u16 dport)
{
	int ret = lb4_xlate(ctx, l4_off, proto, 1, daddr, dport);

	if (IS_ERR(ret))
		return ret;
	return lb4_xlate(ctx, l4_off, proto, 0, saddr, sport);
}

static __always_inline int lb4_is_balanced_proto(__u8 proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP;
}

/*
 * Load-balances a packet leaving a pod: when its destination is a service
 * frontend, DNATs it to the flow's backend and updates pkt to the new
 * tuple; state->rev_nat_index tells the flow's conntrack entry how to undo
 * it for replies. Returns 0 (also when there is no service) or a negative
 * drop reason.
 */
static __always_inline int lb4_local(struct __sk_buff *ctx, int l4_off,
				     struct ct_packet *pkt, struct ct_state *state)
{
	struct lb4_target target = {};
	struct lb4_frontend fe;
	struct lb4_service *svc;
	int ret;

	state->rev_nat_index = 0;
	state->loopback = 0;
	if (!lb4_is_balanced_proto(pkt->tuple.nexthdr))
		return 0;
	/* the tuple keeps the packet's destination port in sport */
	svc = lb4_lookup_service_internal(pkt->tuple.daddr, pkt->tuple.sport,
					  pkt->tuple.nexthdr, &fe);
	if (!svc)
		return 0;
	/* pods always pick at random, as Cilium's bpf_lxc does */
	ret = lb4_select(ctx, pkt, svc, &fe, 0, &target);
	if (IS_ERR(ret))
		return ret;
	ret = lb4_xlate(ctx, l4_off, pkt->tuple.nexthdr, 1, target.address, target.port);
	if (IS_ERR(ret))
		return ret;
	/* Hairpin: the pod is its own backend. From its own address the
	 * packet would be a martian to it, so it comes from IPV4_LOOPBACK. */
	if (target.address == pkt->tuple.saddr) {
		ret = lb4_xlate(ctx, l4_off, pkt->tuple.nexthdr, 0, IPV4_LOOPBACK, 0);
		if (IS_ERR(ret))
			return ret;
		pkt->tuple.saddr = IPV4_LOOPBACK;
		state->loopback = 1;
	}
	pkt->tuple.daddr = target.address;
	if (target.port)
		pkt->tuple.sport = target.port;
	state->rev_nat_index = target.rev_nat_index;
	return 0;
}

/* Turns a reply of a load-balanced flow back into one from the frontend. */
static __always_inline int lb4_rev_nat(struct __sk_buff *ctx, int l4_off, __u8 proto,
				       __u16 rev_nat_index)
{
	struct lb4_reverse_nat *nat;

	nat = bpf_map_lookup_elem(&cilium_lb4_reverse_nat, &rev_nat_index);
	if (!nat)
		return 0;	/* the service is gone; nothing to restore */
	return lb4_xlate(ctx, l4_off, proto, 0, nat->address, nat->port);
}

/* RFC 1624: a header checksum after 4 bytes of the header went from old
 * to new (one's complement sums do not care about byte order). */
static __always_inline __u16 csum_replace4(__u16 check, __u32 old, __u32 new)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~old + (__u16)~(old >> 16) + (__u16)new + (__u16)(new >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Rewrites len (2 or 4) bytes of an ICMP message at off, and its checksum with them
 * (ICMP has no pseudo header). */
static __always_inline int lb4_icmp_store(struct __sk_buff *ctx, int icmp_off, int off,
					  const void *to, int len)
{
	__u32 old = 0, new = 0;

	if (bpf_skb_load_bytes(ctx, off, &old, len) < 0)
		return -DROP_INVALID;
	__builtin_memcpy(&new, to, len);
	if (old == new)
		return 0;
	if (bpf_l4_csum_replace(ctx, icmp_off + 2, old, new, len) < 0 ||
	    bpf_skb_store_bytes(ctx, off, &new, len, 0) < 0)
		return -DROP_CSUM_L4;
	return 0;
}

/*
 * An ICMP error (port unreachable, ...) about a load-balanced flow, on
 * its way to the client: it quotes a datagram to the backend, and the
 * client's socket only knows the frontend. The quoted destination and port
 * become the frontend's, and so does the error's source when the backend
 * itself sent it.
 */
static __always_inline int lb4_rev_nat_icmp(struct __sk_buff *ctx, int l4_off,
					    __u16 rev_nat_index)
{
	struct lb4_reverse_nat *nat;
	int quoted = l4_off + 8;	/* the quoted IP header */
	struct iphdr in;
	__u32 outer_src, frontend;
	__u16 check, port;
	int ret;

	nat = bpf_map_lookup_elem(&cilium_lb4_reverse_nat, &rev_nat_index);
	if (!nat)
		return 0;
	if (bpf_skb_load_bytes(ctx, quoted, &in, sizeof(in)) < 0 ||
	    bpf_skb_load_bytes(ctx, ETH_HLEN + offsetof(struct iphdr, saddr), &outer_src, 4) < 0)
		return -DROP_INVALID;
	if (in.ihl != 5 || !lb4_is_balanced_proto(in.protocol))
		return 0;
	frontend = nat->address;
	if (outer_src == in.daddr) {
		if (bpf_l3_csum_replace(ctx, ETH_HLEN + offsetof(struct iphdr, check),
					outer_src, frontend, 4) < 0 ||
		    bpf_skb_store_bytes(ctx, ETH_HLEN + offsetof(struct iphdr, saddr),
					&frontend, 4, 0) < 0)
			return -DROP_CSUM_L3;
	}
	/* the quoted header's checksum follows its address, and the ICMP
	 * checksum follows both */
	check = csum_replace4(in.check, in.daddr, frontend);
	ret = lb4_icmp_store(ctx, l4_off, quoted + offsetof(struct iphdr, daddr), &frontend, 4);
	if (IS_ERR(ret))
		return ret;
	ret = lb4_icmp_store(ctx, l4_off, quoted + offsetof(struct iphdr, check), &check, 2);
	port = nat->port;
	if (IS_ERR(ret) || !port)
		return ret;
	return lb4_icmp_store(ctx, l4_off, quoted + sizeof(in) + 2, &port, 2);
}

/* After tracking a packet into a local pod (own_addr): a reply to a
 * load-balanced connection of that pod gets the frontend back as its
 * source, an ICMP error about one the frontend as what it quotes, and a
 * hairpin reply the pod's own address as destination. */
static __always_inline int lb4_rev_nat_ingress(struct __sk_buff *ctx, int l4_off, __u8 proto,
					       const struct ct_state *state, __u32 own_addr)
{
	int ret;

	if (state->status == CT_RELATED && state->rev_nat_index && !state->loopback &&
	    proto == IPPROTO_ICMP)
		return lb4_rev_nat_icmp(ctx, l4_off, state->rev_nat_index);
	if (state->status != CT_REPLY || !state->rev_nat_index)
		return 0;
	ret = lb4_rev_nat(ctx, l4_off, proto, state->rev_nat_index);
	if (IS_ERR(ret) || !state->loopback)
		return ret;
	return lb4_xlate(ctx, l4_off, proto, 1, own_addr, 0);
}

#endif /* __LIB_LB_H_ */
