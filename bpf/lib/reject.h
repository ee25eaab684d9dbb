/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Refusing a TCP connection on the spot: a SYN the datapath cannot serve
 * (a service without backends) is turned into a RST from its destination
 * and sent back, so the client's connect() fails at once with
 * ECONNREFUSED instead of retrying SYNs until it times out; IPv6 as IPv4.
 */
#ifndef __LIB_REJECT_H_
#define __LIB_REJECT_H_

#include <linux/in.h>
#include <linux/tcp.h>
#include "common.h"

struct tcp_rst4 {
	struct iphdr ip;
	struct tcphdr tcp;
};

/* What the TCP checksum covers besides the header: the pseudo header. */
struct tcp_pseudo4 {
	__be32 saddr;
	__be32 daddr;
	__u8 zero;
	__u8 proto;
	__be16 len;
	struct tcphdr tcp;
};

/* Returns the redirect verdict that sends the RST back out of the device
 * the SYN came in on, or 0 when the packet is not a SYN to refuse. */
static __always_inline int tcp_reject4(struct __sk_buff *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip4 = data + ETH_HLEN;
	struct tcphdr *tcp = data + ETH_HLEN + sizeof(struct iphdr);
	struct tcp_pseudo4 pseudo = {};
	struct tcp_rst4 out = {};
	struct ethhdr neth;
	__u32 ack;

	if ((void *)(tcp + 1) > data_end)
		return 0;
	if (ip4->ihl != 5 || ip4->protocol != IPPROTO_TCP || !tcp->syn || tcp->ack || tcp->rst)
		return 0;
	/* a SYN takes one sequence number, and so does its payload, if any */
	ack = bpf_ntohl(tcp->seq) + 1 + bpf_ntohs(ip4->tot_len) - sizeof(struct iphdr) -
	      tcp->doff * 4;

	__builtin_memcpy(neth.h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(neth.h_source, eth->h_dest, ETH_ALEN);
	neth.h_proto = bpf_htons(ETH_P_IP);

	out.ip.version = 4;
	out.ip.ihl = 5;
	out.ip.tot_len = bpf_htons(sizeof(out));
	out.ip.frag_off = bpf_htons(0x4000);	/* DF */
	out.ip.ttl = 64;
	out.ip.protocol = IPPROTO_TCP;
	out.ip.saddr = ip4->daddr;
	out.ip.daddr = ip4->saddr;
	out.tcp.source = tcp->dest;
	out.tcp.dest = tcp->source;
	out.tcp.ack_seq = bpf_htonl(ack);
	out.tcp.doff = 5;
	out.tcp.rst = 1;
	out.tcp.ack = 1;

	out.ip.check = csum_fold32(bpf_csum_diff(NULL, 0, (__be32 *)&out.ip, sizeof(out.ip), 0));
	pseudo.saddr = out.ip.saddr;
	pseudo.daddr = out.ip.daddr;
	pseudo.proto = IPPROTO_TCP;
	pseudo.len = bpf_htons(sizeof(out.tcp));
	pseudo.tcp = out.tcp;
	out.tcp.check = csum_fold32(bpf_csum_diff(NULL, 0, (__be32 *)&pseudo, sizeof(pseudo), 0));

	if (bpf_skb_change_tail(ctx, ETH_HLEN + sizeof(out), 0) < 0 ||
	    bpf_skb_store_bytes(ctx, 0, &neth, ETH_HLEN, 0) < 0 ||
	    bpf_skb_store_bytes(ctx, ETH_HLEN, &out, sizeof(out), 0) < 0)
		return 0;
	return bpf_redirect(ctx->ifindex, 0);
}

#ifdef ENABLE_IPV6
#include <linux/ipv6.h>

struct tcp_rst6 {
	struct ipv6hdr ip;
	struct tcphdr tcp;
};

struct tcp_pseudo6 {
	struct in6_addr saddr;
	struct in6_addr daddr;
	__be32 len;
	__u8 zero[3];
	__u8 nexthdr;
	struct tcphdr tcp;
};

/* tcp_reject4 for a SYN in IPv6 with no extension header. */
static __always_inline int tcp_reject6(struct __sk_buff *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	struct tcphdr *tcp = data + ETH_HLEN + sizeof(struct ipv6hdr);
	struct tcp_pseudo6 pseudo = {};
	struct tcp_rst6 out = {};
	struct ethhdr neth;
	__u32 ack;

	if ((void *)(tcp + 1) > data_end)
		return 0;
	if (ip6->nexthdr != IPPROTO_TCP || !tcp->syn || tcp->ack || tcp->rst)
		return 0;
	ack = bpf_ntohl(tcp->seq) + 1 + bpf_ntohs(ip6->payload_len) - tcp->doff * 4;

	__builtin_memcpy(neth.h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(neth.h_source, eth->h_dest, ETH_ALEN);
	neth.h_proto = bpf_htons(ETH_P_IPV6);

	out.ip.version = 6;
	out.ip.payload_len = bpf_htons(sizeof(out.tcp));
	out.ip.nexthdr = IPPROTO_TCP;
	out.ip.hop_limit = 64;
	out.ip.saddr = ip6->daddr;
	out.ip.daddr = ip6->saddr;
	out.tcp.source = tcp->dest;
	out.tcp.dest = tcp->source;
	out.tcp.ack_seq = bpf_htonl(ack);
	out.tcp.doff = 5;
	out.tcp.rst = 1;
	out.tcp.ack = 1;

	pseudo.saddr = out.ip.saddr;
	pseudo.daddr = out.ip.daddr;
	pseudo.len = bpf_htonl(sizeof(out.tcp));
	pseudo.nexthdr = IPPROTO_TCP;
	pseudo.tcp = out.tcp;
	out.tcp.check = csum_fold32(bpf_csum_diff(NULL, 0, (__be32 *)&pseudo, sizeof(pseudo), 0));

	if (bpf_skb_change_tail(ctx, ETH_HLEN + sizeof(out), 0) < 0 ||
	    bpf_skb_store_bytes(ctx, 0, &neth, ETH_HLEN, 0) < 0 ||
	    bpf_skb_store_bytes(ctx, ETH_HLEN, &out, sizeof(out), 0) < 0)
		return 0;
	return bpf_redirect(ctx->ifindex, 0);
}
#endif /* ENABLE_IPV6 */

/* After a drop was reported with verdict: a connection to a service
 * without backends (reason -DROP_NO_SERVICE) is refused at once instead. */
static __always_inline int reject_no_service(struct __sk_buff *ctx, int reason, int verdict)
{
	int ret;

	if (reason != -DROP_NO_SERVICE)
		return verdict;
#ifdef ENABLE_IPV6
	if (ctx->protocol == bpf_htons(ETH_P_IPV6))
		ret = tcp_reject6(ctx);
	else
#endif
		ret = tcp_reject4(ctx);
	return ret ? ret : verdict;
}

#endif /* __LIB_REJECT_H_ */
