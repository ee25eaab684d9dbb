/* SPDX-License-Identifier: Apache-2.0 */
/* Ethernet header access. */
#ifndef __LIB_ETH_H_
#define __LIB_ETH_H_

#include "common.h"

/* Returns the ethertype in host order, or a negative drop reason. */
static __always_inline int validate_ethertype(struct __sk_buff *ctx, __u16 *proto)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if (data + sizeof(*eth) > data_end)
		return -DROP_INVALID;
	*proto = bpf_ntohs(eth->h_proto);
	if (*proto < ETH_P_802_3_MIN)
		return -DROP_UNSUPPORTED_L2;
	return 0;
}

#endif /* __LIB_ETH_H_ */
