/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BPF host routing's way out (Cilium's fib.h): a packet leaving a pod for
 * beyond the node is forwarded by the kernel's FIB, as the stack would
 * forward it, without walking the stack (netfilter, the routing cache,
 * a second pass through the veth's backlog).
 */
#ifndef __LIB_FIB_H_
#define __LIB_FIB_H_

#include <linux/socket.h>
#include "common.h"
#include "l3.h"
#include "runtime_config.h"

#ifndef AF_INET
#define AF_INET 2
#endif

/* The caller hands the packet to the host's stack instead. */
#define FIB_TO_STACK	1

static __always_inline int host_routing_enabled(void)
{
	return runtime_config(RUNTIME_CONFIG_HOST_ROUTING) != 0;
}

/*
 * Redirects the packet out of the device the FIB picks for saddr -> daddr
 * (input device: the one it arrived on). With the neighbour known the MACs
 * are written here and the packet is redirected; otherwise the kernel
 * resolves it (bpf_redirect_neigh to the next hop). Where the FIB gives no
 * such answer (no route, a local address, forwarding off, a packet too big
 * for the device, a TTL run out) it returns FIB_TO_STACK: the stack then
 * routes, answers or refuses the packet as it would without host routing.
 * *oif is the device chosen; a negative return is a drop reason.
 */
static __always_inline int fib_redirect4(struct __sk_buff *ctx, __u32 saddr, __u32 daddr,
					 __u32 *oif)
{
	struct bpf_fib_lookup fib = {
		.family = AF_INET,
		.ifindex = ctx->ifindex,
		.ipv4_src = saddr,
		.ipv4_dst = daddr,
	};
	struct bpf_redir_neigh nh = { .nh_family = AF_INET };
	long rc;
	int ret;

	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return FIB_TO_STACK;
	/* back out of the device it came from is the stack's business
	 * (ICMP redirects, a pod reaching itself) */
	if (fib.ifindex == ctx->ifindex)
		return FIB_TO_STACK;
	*oif = fib.ifindex;
	ret = ipv4_dec_ttl(ctx);
	/* the stack sends the ICMP time exceeded that traceroute needs */
	if (ret == -DROP_TTL_EXCEEDED)
		return FIB_TO_STACK;
	if (ret < 0)
		return ret;
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		ret = eth_rewrite(ctx, fib.smac, fib.dmac);
		if (ret < 0)
			return ret;
		return bpf_redirect(fib.ifindex, 0);
	}
	/* the lookup left the next hop (the gateway, or daddr on link) in
	 * ipv4_dst */
	nh.ipv4_nh = fib.ipv4_dst;
	return bpf_redirect_neigh(fib.ifindex, &nh, sizeof(nh), 0);
}

#endif /* __LIB_FIB_H_ */
