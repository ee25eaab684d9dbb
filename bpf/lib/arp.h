/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ARP responder for pods: every request a pod sends, except for its own
 * address, is answered with the host-side veth MAC, so the pod's gateway
 * (and anything else it tries to reach on-link) resolves to the node.
 */
#ifndef __LIB_ARP_H_
#define __LIB_ARP_H_

#include "endpoint.h"

/* From <linux/if_arp.h>, which pulls glibc through <linux/if.h>. */
#define ARPHRD_ETHER	1
#define ARPOP_REQUEST	1
#define ARPOP_REPLY	2

struct arphdr {
	__be16 ar_hrd;
	__be16 ar_pro;
	__u8 ar_hln;
	__u8 ar_pln;
	__be16 ar_op;
};

struct arp_eth {
	struct arphdr hdr;
	__u8 sha[ETH_ALEN];
	__u32 sip;
	__u8 tha[ETH_ALEN];
	__u32 tip;
} __attribute__((packed));

#define ARP_NOT_HANDLED	1

/* Returns CTX_ACT_REDIRECT with the reply in the packet, ARP_NOT_HANDLED
 * when the stack should see the frame, or a negative drop reason. */
static __always_inline int arp_respond(struct __sk_buff *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct arp_eth *arp = data + ETH_HLEN;
	struct endpoint_info *ep;
	__u8 pod_mac[ETH_ALEN];
	__u32 sip, tip;

	if ((void *)(arp + 1) > data_end)
		return -DROP_INVALID;
	if (arp->hdr.ar_op != bpf_htons(ARPOP_REQUEST) ||
	    arp->hdr.ar_hrd != bpf_htons(ARPHRD_ETHER) ||
	    arp->hdr.ar_pro != bpf_htons(ETH_P_IP) ||
	    arp->hdr.ar_hln != ETH_ALEN || arp->hdr.ar_pln != 4)
		return ARP_NOT_HANDLED;
	sip = arp->sip;
	tip = arp->tip;
	if (sip == tip)
		return ARP_NOT_HANDLED;	/* gratuitous / duplicate detection */
	ep = lookup_ip4_endpoint(sip);
	if (!is_local_pod(ep) || ep->ifindex != ctx->ifindex)
		return ARP_NOT_HANDLED;

	__builtin_memcpy(pod_mac, arp->sha, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, pod_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, ep->node_mac, ETH_ALEN);
	arp->hdr.ar_op = bpf_htons(ARPOP_REPLY);
	__builtin_memcpy(arp->sha, ep->node_mac, ETH_ALEN);
	__builtin_memcpy(arp->tha, pod_mac, ETH_ALEN);
	arp->sip = tip;
	arp->tip = sip;
	/* back out of the veth it came in on, towards the pod */
	return bpf_redirect(ctx->ifindex, 0);
}

#endif /* __LIB_ARP_H_ */
