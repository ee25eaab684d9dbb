/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SNAT on the node's native device (Cilium's bpf/lib/nat.h): one table,
 * cilium_snat_v4_external, for NodePort's translations and masquerading.
 * Each translated flow has two entries: its own tuple (NAT_DIR_EGRESS) to
 * the source it gets, and its replies' tuple (NAT_DIR_INGRESS) to the
 * destination they get back. Keys carry real ports, sport first; an ICMP
 * echo's identifier stands in as its source port, its reply's as the
 * destination port, as in Cilium.
 *
 * Masquerading (enable-bpf-masquerade) gives pods' traffic leaving through
 * the native device the node's address, with the pod's own port when free.
 * The node's own connections from that address are recorded too (their
 * port unchanged when free), so a pod's mapping never takes a port the node
 * is using towards the same peer, and the other way round.
 */
#ifndef __LIB_NAT_H_
#define __LIB_NAT_H_

#include "common.h"
#include "maps.h"
#include "endpoint.h"
#include "conntrack.h"
#include "lb.h"
#include "runtime_config.h"

#define NAT_PORT_MIN	32768
#define NAT_PORT_TRIES	32

/* A NAT key: real ports (network order), direction in flags. */
static __always_inline struct ipv4_ct_tuple nat_key(__u32 saddr, __u32 daddr, __u16 sport,
						    __u16 dport, __u8 proto, __u8 dir)
{
	struct ipv4_ct_tuple key = {
		.saddr = saddr,
		.daddr = daddr,
		.sport = sport,
		.dport = dport,
		.nexthdr = proto,
		.flags = dir,
	};

	return key;
}

/* Marks a NAT entry as used now; NAT GC keeps the entries of live flows.
 * Written at most once a second, so busy flows do not bounce the line. */
static __always_inline void nat_touch(struct ipv4_nat_entry *nat)
{
	__u64 now = ct_now();

	if (nat->last_used != now)
		nat->last_used = now;
}

/* Tells the native device's egress that this packet is translated already
 * (or a reply that keeps its source), and iptables' masquerading the same. */
static __always_inline void nat_done_set(struct __sk_buff *ctx)
{
	ctx->mark = (ctx->mark & ~MARK_MAGIC_MASK) | MARK_MAGIC_SNAT_DONE;
}

/* Whether the native device's egress leaves the packet as it is: already
 * translated, or an overlay packet (the node's, but its ports are the
 * tunnel's to choose). */
static __always_inline int nat_done(const struct __sk_buff *ctx)
{
	__u32 magic = ctx->mark & MARK_MAGIC_MASK;

	return magic == MARK_MAGIC_SNAT_DONE || magic == MARK_MAGIC_OVERLAY;
}

/* A fresh entry: translate to to:to_port (a NodePort's also from
 * from:rev_port; from 0 for masquerading). Ports are network order. */
static __always_inline struct ipv4_nat_entry nat_entry(__u32 from, __u16 rev_port, __u32 to,
						       __u16 to_port)
{
	struct ipv4_nat_entry e = {
		.created = ct_now(),
		.from_addr = from,
		.to_addr = to,
		.to_port = to_port,
		.rev_port = rev_port,
	};

	e.last_used = e.created;
	return e;
}

/* Records a translated flow's own entry once its replies' is in place;
 * without it, the replies' entry goes too. */
static __always_inline int nat_insert_fwd(const struct ipv4_ct_tuple *fwd_key,
					  const struct ipv4_nat_entry *fwd,
					  const struct ipv4_ct_tuple *rev_key)
{
	if (bpf_map_update_elem(&cilium_snat_v4_external, fwd_key, fwd, BPF_ANY) < 0) {
		bpf_map_delete_elem(&cilium_snat_v4_external, rev_key);
		return -DROP_NAT_NO_MAPPING;
	}
	return 0;
}

/* Claims a port of the node for a flow's replies, recording rev under
 * rev_key with that port as its destination port (network order): want
 * if free, else one from NAT_PORT_MIN up, probed from a random start. The
 * entry is created only if absent, so two CPUs taking one port at once
 * cannot both have it (Cilium's BPF_NOEXIST). */
static __always_inline int nat_claim_port(struct ipv4_ct_tuple *rev_key,
					  const struct ipv4_nat_entry *rev, __u16 want)
{
	__u16 start = NAT_PORT_MIN + bpf_get_prandom_u32() % NAT_PORT_MIN;

	rev_key->dport = want;
	if (!bpf_map_update_elem(&cilium_snat_v4_external, rev_key, rev, BPF_NOEXIST))
		return 0;
	for (int i = 0; i < NAT_PORT_TRIES; i++) {
		rev_key->dport = bpf_htons(NAT_PORT_MIN + (start + i) % NAT_PORT_MIN);
		if (!bpf_map_update_elem(&cilium_snat_v4_external, rev_key, rev, BPF_NOEXIST))
			return 0;
	}
	return -DROP_NAT_NO_MAPPING;
}

/* Whether a pod's packet to daddr stays as it is: towards the exclusion
 * CIDR (the cluster's own addresses), or another node of the cluster. */
static __always_inline int snat_excluded(__u32 daddr)
{
	__u64 exclusion = runtime_config(RUNTIME_CONFIG_SNAT_EXCLUSION_IPV4);
	__u32 net = (__u32)exclusion, mask = (__u32)(exclusion >> 32);
	__u32 id;

	if ((daddr & mask) == net)
		return 1;
	id = ip4_identity(daddr);
	return id == IDENTITY_REMOTE_NODE || id == IDENTITY_HOST;
}

/* The flow's ports as NAT keys have them, from a parsed packet (whose
 * tuple keeps the source port in dport). Returns 0 when the packet is
 * not one masquerading translates. */
static __always_inline int snat_ports(const struct ct_packet *pkt, __u16 *sport, __u16 *dport)
{
	switch (pkt->tuple.nexthdr) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		break;
	case IPPROTO_ICMP:
		/* echo requests; their replies come back through the table */
		if (pkt->icmp_type != ICMP_ECHO)
			return 0;
		break;
	default:
		return 0;
	}
	*sport = pkt->tuple.dport;
	*dport = pkt->tuple.sport;
	return 1;
}

/*
 * Masquerading on the native device's egress. A pod's packet leaving the
 * cluster gets the masquerade address and a port of the node; a packet of
 * the node's own from that address is recorded under its own port when
 * free. Returns CTX_ACT_OK or a negative drop reason.
 */
static __always_inline int snat_v4_masquerade(struct __sk_buff *ctx)
{
	__u32 masq = (__u32)runtime_config(RUNTIME_CONFIG_MASQUERADE_IPV4);
	struct ipv4_nat_entry *nat, fwd, rev;
	struct ipv4_ct_tuple key, rkey;
	struct ct_packet pkt;
	struct iphdr *ip4;
	__u16 sport, dport, port;
	__u32 saddr, daddr;
	int ret, host;

	if (!masq || nat_done(ctx))
		return CTX_ACT_OK;
	ip4 = ipv4_hdr(ctx);
	if (!ip4)
		return CTX_ACT_OK;
	saddr = ip4->saddr;
	daddr = ip4->daddr;
	host = saddr == masq;
	if (!host && (!is_local_pod(lookup_ip4_endpoint(saddr)) || snat_excluded(daddr)))
		return CTX_ACT_OK;
	if (ct_parse4(ctx, ip4, &pkt) < 0 || !snat_ports(&pkt, &sport, &dport))
		return CTX_ACT_OK;
	/* the node's servers answer from their own well-known ports */
	if (host && (pkt.tuple.nexthdr == IPPROTO_ICMP || bpf_ntohs(sport) < NAT_PORT_MIN))
		return CTX_ACT_OK;

	key = nat_key(saddr, daddr, sport, dport, pkt.tuple.nexthdr, NAT_DIR_EGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v4_external, &key);
	if (nat) {
		nat_touch(nat);
		port = nat->to_port;
	} else {
		fwd = nat_entry(0, 0, masq, 0);
		rev = nat_entry(0, 0, saddr, sport);
		/* as Cilium marks the node's own flows */
		fwd.needs_ct = host;
		rev.needs_ct = host;
		rkey = nat_key(daddr, masq, dport, 0, pkt.tuple.nexthdr, NAT_DIR_INGRESS);
		ret = nat_claim_port(&rkey, &rev, sport);
		if (IS_ERR(ret))
			return ret;
		port = rkey.dport;
		fwd.to_port = port;
		ret = nat_insert_fwd(&key, &fwd, &rkey);
		if (IS_ERR(ret))
			return ret;
	}
	return lb4_xlate(ctx, ipv4_l4_off(ip4), pkt.tuple.nexthdr, 0, masq, port);
}

/*
 * An ICMP error to the node (port unreachable, fragmentation needed, time
 * exceeded) about a masqueraded flow quotes the datagram as it left, from
 * the node's address and port; the pod's socket knows only its own. The
 * quoted source becomes the pod's again (with the quoted header's and the
 * ICMP checksums), and so does the error's destination. Returns the pod's
 * address (the error is the pod's now), 0 when the error is no
 * masqueraded flow's, or a negative drop reason.
 */
static __always_inline __s64 snat_v4_rev_icmp_error(struct __sk_buff *ctx, int l4_off,
						    __u32 node)
{
	struct ipv4_nat_entry *nat;
	struct ipv4_ct_tuple key;
	int quoted = l4_off + 8;	/* the quoted IP header */
	struct iphdr in;
	__u16 ports[2], check;
	__u32 pod;
	__u8 type;
	int ret;

	if (bpf_skb_load_bytes(ctx, l4_off, &type, 1) < 0)
		return -DROP_INVALID;
	if (type != ICMP_DEST_UNREACH && type != ICMP_TIME_EXCEEDED && type != ICMP_PARAMETERPROB)
		return 0;
	if (bpf_skb_load_bytes(ctx, quoted, &in, sizeof(in)) < 0 ||
	    bpf_skb_load_bytes(ctx, quoted + sizeof(in), ports, sizeof(ports)) < 0)
		return 0;
	if (in.ihl != 5 || !lb4_is_balanced_proto(in.protocol) || in.saddr != node)
		return 0;
	/* the replies' entry: from the quoted destination to the node's port */
	key = nat_key(in.daddr, node, ports[1], ports[0], in.protocol, NAT_DIR_INGRESS);
	nat = bpf_map_lookup_elem(&cilium_snat_v4_external, &key);
	if (!nat || nat->from_addr)
		return 0;
	pod = nat->to_addr;
	if (bpf_l3_csum_replace(ctx, ETH_HLEN + offsetof(struct iphdr, check), node, pod, 4) < 0 ||
	    bpf_skb_store_bytes(ctx, ETH_HLEN + offsetof(struct iphdr, daddr), &pod, 4, 0) < 0)
		return -DROP_CSUM_L3;
	check = csum_replace4(in.check, node, pod);
	ret = lb4_icmp_store(ctx, l4_off, quoted + offsetof(struct iphdr, saddr), &pod, 4);
	if (!IS_ERR(ret))
		ret = lb4_icmp_store(ctx, l4_off, quoted + offsetof(struct iphdr, check), &check, 2);
	if (!IS_ERR(ret))
		ret = lb4_icmp_store(ctx, l4_off, quoted + sizeof(in), &nat->to_port, 2);
	return IS_ERR(ret) ? ret : pod;
}

#endif /* __LIB_NAT_H_ */
